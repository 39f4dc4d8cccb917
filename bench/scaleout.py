"""evflow on Dask distributed (issue 10): the ADL queries on a LocalCluster
of worker processes against one process, the per-chunk overhead of the
machinery, and the client's memory over a long stream.

One command::

    python bench/scaleout.py                         # 4M events, Parquet, Q1-Q8, 2 processes
    python bench/scaleout.py --events 1000000 --processes 2 --skip-coffea
    python bench/scaleout.py --seconds 5 --skip-coffea --skip-stream   # ~5 s of one process per query

``--curve 1 2 4 8 16`` measures only the scaling curve: every query on
clusters of 1, 2, 4, 8 and 16 worker processes against one single-threaded
process, in one table, with the efficiency targets of issue 10 (n processes
>= 0.8 x n x one process on Q5-Q8, >= 0.6 x on Q1-Q4); on a many-core
machine::

    python bench/scaleout.py --curve 1 2 4 8 16 --skip-coffea --seconds 20

``--ceiling`` adds, for the largest N, N independent single-threaded
processes at once (the machine's own ceiling for N processes of the work).

Inputs: one data file of ``--file-events`` events (default: ``--events``, at
most 4M; made once) listed as many times as ``--events`` needs (stopping
at ``--events``), so long inputs cost no generation or disk; with
``--seconds S`` each query reads as many whole files as one single-threaded
process handles in about S seconds (timed on one file first).

(Not ``bench/distributed.py``: that name would shadow Dask's ``distributed``
package for the scripts in bench/.)

measures, on the datasets of bench/adl.py (made when missing, in
$EVFLOW_BENCH_DATA or /tmp/evflow-adl):

* every query with ``proc.run(client=...)`` on a LocalCluster of
  ``--processes`` worker processes (1 engine thread each), warm (each query
  ran once on the 0.2M file first, in every worker and as a distributed
  run), against one single-threaded process pinned to one core, one
  process with 2 threads (the best thread-only configuration on 2 cores)
  and, as the machine's ceiling, ``--processes`` independent
  single-threaded processes at once (each pinned to its core, each on an
  equal share of the events), each in a fresh process (bench/adl.py's
  workers); histograms are compared bin by bin;
* coffea (``processor.Runner`` + ``DaskExecutor``) on the same
  LocalCluster, when coffea is installed (the ``bench`` extra);
* the overhead per chunk of an analysis that does nothing (no module, one
  column read), with one batch per chunk;
* ``--stream-events`` (10^8) events of Q1 streamed through the cluster (the
  4M file listed repeatedly), sampling the client's resident memory.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "examples" / "adl"))
# The workers import the analysis (examples/adl/adl.py) by name.
os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "examples" / "adl"), os.environ.get("PYTHONPATH", "")])


def _bench_adl() -> Any:
    """bench/adl.py (datasets, single-process workers) under its own name:
    ``adl`` is the analysis, examples/adl/adl.py."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("adl_bench", ROOT / "bench" / "adl.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


adl_bench = _bench_adl()


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return 0.0


def _hists(h: dict[str, Any]) -> dict[str, list[float]]:
    return {k: [float(x) for x in v.values(flow=True)] for k, v in h.items()}


def rate(events: int, wall: float) -> float:
    return events / wall if wall > 0 else 0.0


@dataclass(frozen=True)
class Input:
    """One query's input: ``path`` listed ``repeat`` times, read up to ``events``."""

    path: Path
    repeat: int
    events: int
    file_events: int

    @property
    def files(self) -> list[str]:
        return [str(self.path)] * self.repeat

    @property
    def limit(self) -> int | None:
        return None if self.events == self.repeat * self.file_events else self.events

    def describe(self) -> str:
        times = f" x {self.repeat}" if self.repeat > 1 else ""
        return f"{self.events / 1e6:g} M events ({self.path.name}{times})"


def inputs(args: argparse.Namespace, data_dir: Path, fmt: str) -> tuple[dict[int, Input], Path]:
    """Every query's input (``--events``, or sized by ``--seconds``) and the
    0.2M-event warm-up file."""
    file_events = args.file_events or min(args.events, 4_000_000)
    path = adl_bench.dataset(data_dir, file_events, fmt)
    warm = adl_bench.dataset(data_dir, 200_000, fmt)
    if not args.seconds:
        repeat = max(1, math.ceil(args.events / file_events))
        one = Input(path, repeat, min(args.events, repeat * file_events), file_events)
        return dict.fromkeys(args.queries, one), warm
    print(f"  {fmt}: timing one single-threaded process on {path.name} ...", file=sys.stderr)
    timed, _ = adl_bench.measure("evflow", path, args.queries, 1, pin=0, warm=warm, step=args.step_size,
                                 kernels=args.kernels)  # fmt: skip
    out = {}
    for q in args.queries:
        repeat = max(1, round(rate(timed[q]["events"], timed[q]["wall_s"]) * args.seconds / file_events))
        out[q] = Input(path, repeat, repeat * file_events, file_events)
    return out, warm


def _warm_worker(q: int, warm: str, step: int, kernels: str) -> None:
    import adl  # examples/adl/adl.py

    adl.make_process(q, warm, step_size=step, kernels=kernels).run(threads=1)


def _best(runs: list[dict[int, dict[str, Any]]]) -> dict[int, dict[str, Any]]:
    """Per query, the run with the shortest wall time (``--best-of``)."""
    return {q: min((r[q] for r in runs), key=lambda x: x["wall_s"]) for q in runs[0]}


def queries_on_cluster(client: Any, ins: dict[int, Input], warm: Path, qs: list[int], step: int,
                       kernels: str, best_of: int = 1) -> dict[int, dict[str, Any]]:  # fmt: skip
    import adl  # examples/adl/adl.py
    import evflow as ef

    out = {}
    for q in qs:
        client.run(_warm_worker, q, str(warm), step, kernels)  # imports, numba: in every worker
        ef.distributed.run(
            partial(adl.make_process, q, str(warm), step_size=step, kernels=kernels), client=client
        )
        i = ins[q]
        runs = []
        for _ in range(best_of):
            t0 = time.perf_counter()
            r = ef.distributed.run(
                partial(adl.make_process, q, i.files, step_size=step, kernels=kernels, max_events=i.limit),
                client=client,
            )
            wall = time.perf_counter() - t0
            runs.append({q: {"events": r.events, "wall_s": wall, "hists": _hists(r.histograms),
                             "chunks": len(r.report["distributed"]["chunks"])}})  # fmt: skip
        out[q] = _best(runs)[q]
        print(f"  evflow on the cluster Q{q}: {rate(out[q]['events'], out[q]['wall_s']) / 1e6:.2f} M ev/s",
              file=sys.stderr)  # fmt: skip
    return out


def baseline(ins: dict[int, Input], warm: Path, qs: list[int], threads: int, args: argparse.Namespace, *,
             pin: int | None = None, share: tuple[int, int] = (0, 1)) -> dict[int, dict[str, Any]]:  # fmt: skip
    """One fresh process (bench/adl.py's worker) per distinct input: every
    query of ``qs``; ``share=(k, n)``: the k-th of n equal shares of the
    events (the first events; the same cost). The best of ``--best-of``."""
    return _best([_baseline(ins, warm, qs, threads, args, pin, share) for _ in range(args.best_of)])


def _baseline(ins: dict[int, Input], warm: Path, qs: list[int], threads: int, args: argparse.Namespace,
              pin: int | None, share: tuple[int, int]) -> dict[int, dict[str, Any]]:  # fmt: skip
    out: dict[int, dict[str, Any]] = {}
    groups: dict[Input, list[int]] = {}
    for q in qs:
        groups.setdefault(ins[q], []).append(q)
    for i, group in groups.items():
        events = i.events // share[1]
        repeat = max(1, math.ceil(events / i.file_events))
        got, _ = adl_bench.measure("evflow", i.path, group, threads, pin=pin, warm=warm, step=args.step_size,
                                   kernels=args.kernels, repeat=repeat,
                                   max_events=None if events == repeat * i.file_events else events)  # fmt: skip
        out.update(got)
    return out


def independent(ins: dict[int, Input], warm: Path, qs: list[int], n: int,
                args: argparse.Namespace) -> dict[int, dict[str, Any]]:  # fmt: skip
    """``n`` independent single-threaded processes at once, each pinned to
    its core and on 1/n of the events: what the machine gives n processes
    without any distribution machinery (events / the slowest one's wall)."""
    cores = os.cpu_count() or 1
    with ThreadPoolExecutor(n) as pool:
        runs = list(pool.map(lambda k: _baseline(ins, warm, qs, 1, args, k % cores, (k, n)), range(n)))
    return {q: {"events": sum(r[q]["events"] for r in runs), "wall_s": max(r[q]["wall_s"] for r in runs)}
            for q in qs}  # fmt: skip


def coffea_on_cluster(
    client: Any, path: Path, warm: Path, qs: list[int], step: int
) -> dict[int, dict[str, Any]]:
    import cloudpickle
    from coffea import processor
    from coffea.nanoevents import NanoAODSchema

    import adl_peers

    NanoAODSchema.warn_missing_crossrefs = False
    warnings.filterwarnings("ignore", message="Missing cross-reference")
    cloudpickle.register_pickle_by_value(adl_peers)
    fmt = "root" if path.suffix == ".root" else "parquet"

    def one(q: int, file: Path) -> tuple[int, Any]:
        runner = processor.Runner(
            executor=processor.DaskExecutor(client=client, status=False),
            schema=NanoAODSchema,
            chunksize=step,
            format=fmt,
        )
        fileset = {"ttbar": {"files": {str(file): "Events"} if fmt == "root" else [str(file)]}}
        res = runner(fileset, processor_instance=adl_peers.coffea_processor(q), treename="Events")
        return int(res["events"]), res["hists"]

    out = {}
    for q in qs:
        one(q, warm)
        t0 = time.perf_counter()
        n, h = one(q, path)
        wall = time.perf_counter() - t0
        out[q] = {"events": n, "wall_s": wall, "hists": _hists(h)}
        print(f"  coffea on the cluster Q{q}: {rate(n, wall) / 1e6:.2f} M ev/s", file=sys.stderr)
    return out


def chunk_overhead(client: Any, data_dir: Path, workers: int) -> dict[str, float]:
    """The marginal cost of a chunk: an analysis that does nothing (no
    module) on 200 000 events in row groups of 1 000, run as 2 chunks and as
    200 chunks of one batch; the extra worker time over the extra chunks."""
    import evflow as ef

    path = data_dir / "met_200000_rg1000.parquet"
    if not path.exists():
        ef.data.resample(str(adl_bench.NANOAOD), str(path), events=200_000, seed=1, chunk=1_000,
                         branches=["MET_pt"])  # fmt: skip

    def proc() -> ef.Process:
        p = ef.Process("empty")
        p.source = ef.source.parquet(str(path), step_size=1_000)
        return p

    def timed(chunk_size: int) -> tuple[float, int, float]:
        ef.distributed.run(proc, client=client, chunk_size=chunk_size)  # warm (metadata cached)
        best = None
        for _ in range(3):
            t0 = time.perf_counter()
            r = ef.distributed.run(proc, client=client, chunk_size=chunk_size)
            wall = time.perf_counter() - t0
            if best is None or wall < best[0]:
                chunks = r.report["distributed"]["chunks"]
                best = (wall, len(chunks), sum(c["wall_s"] for c in chunks) / len(chunks))
        assert best is not None
        return best

    few, n_few, _ = timed(100_000)
    many, n_many, task = timed(1_000)
    return {
        "few_s": few,
        "few_chunks": n_few,
        "many_s": many,
        "many_chunks": n_many,
        "per_chunk_ms": 1e3 * workers * (many - few) / (n_many - n_few),
        "task_ms": 1e3 * task,
    }


def stream(client: Any, path: Path, events: int, step: int, kernels: str) -> dict[str, Any]:
    """Q1 over ``events`` events (the file listed repeatedly), sampling the
    client's resident memory every 50 ms."""
    import adl
    import evflow as ef

    n_file = adl.make_process(1, str(path)).source.total_events()
    repeats = max(1, round(events / n_file))
    samples: list[tuple[float, float]] = []
    done = threading.Event()
    t0 = time.perf_counter()

    def sample() -> None:
        while not done.is_set():
            samples.append((time.perf_counter() - t0, _rss_mb()))
            time.sleep(0.05)

    progress: list[tuple[float, int]] = []
    th = threading.Thread(target=sample, daemon=True)
    rss0 = _rss_mb()
    th.start()
    r = ef.distributed.run(
        partial(adl.make_process, 1, [str(path)] * repeats, step_size=step, kernels=kernels),
        client=client,
        progress=lambda chunks, ev: progress.append((time.perf_counter() - t0, ev)),
    )
    wall = time.perf_counter() - t0
    done.set()
    th.join()
    rss = [m for _, m in samples]
    tenth = [m for t, m in samples if t >= 0.1 * wall] or rss
    return {
        "events": r.events,
        "wall_s": wall,
        "chunks": len(r.report["distributed"]["chunks"]),
        "rss_start_mb": rss0,
        "rss_at_10pct_mb": tenth[0],
        "rss_peak_mb": max(rss),
        "rss_end_mb": rss[-1],
    }


def _cluster(n: int, env: dict[str, str] | None = None) -> tuple[Any, Any]:
    import logging

    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=":0",
                           silence_logs=logging.ERROR, env=env or {})  # fmt: skip
    return cluster, Client(cluster)


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


#: Issue 10's many-core targets: n processes >= this share of n x one process.
TARGET_EFFICIENCY = {1: 0.6, 2: 0.6, 3: 0.6, 4: 0.6, 5: 0.8, 6: 0.8, 7: 0.8, 8: 0.8}


def curve(args: argparse.Namespace, data_dir: Path) -> int:
    """Events/s of every query on clusters of 1, 2, 4, ... worker processes
    (``--curve``) against one single-threaded process, one table: speed-up
    over that process and efficiency (speed-up / processes)."""
    fmt = args.formats[0]
    t_start = time.perf_counter()
    print(
        f"# evflow on Dask: scaling over {', '.join(map(str, args.curve))} worker processes, step {args.step_size:,}"
    )
    print(f"(cores: {os.cpu_count()}, load average at start: {_load()})\n")
    ins, warm = inputs(args, data_dir, fmt)
    print(f"  {fmt}: evflow 1 thread on one core ...", file=sys.stderr)
    one = baseline(ins, warm, args.queries, 1, args, pin=0)
    top = max(args.curve)
    ceiling: dict[int, dict[str, Any]] = {}
    if args.ceiling:
        print(f"  {fmt}: {top} independent single-threaded processes ...", file=sys.stderr)
        ceiling = independent(ins, warm, args.queries, top, args)
    same: dict[int, bool] = dict.fromkeys(args.queries, True)

    def on_cluster(n: int, env: dict[str, str] | None = None) -> dict[int, float]:
        """Every query's rate on a fresh cluster of ``n`` worker processes."""
        print(f"  {n} worker processes{'' if not env else f', {env}'} ...", file=sys.stderr)
        cluster, client = _cluster(n, env)
        try:
            client.wait_for_workers(n, timeout=120)
            got = queries_on_cluster(
                client, ins, warm, args.queries, args.step_size, args.kernels, args.best_of
            )
        finally:
            client.close()
            cluster.close()
        for q, r in got.items():
            same[q] = same[q] and r["hists"] == one[q]["hists"]
        return {q: rate(r["events"], r["wall_s"]) for q, r in got.items()}

    rates = {n: on_cluster(n) for n in args.curve}
    other = on_cluster(top, {"EVFLOW_CORES": str(args.worker_cores)}) if args.worker_cores else {}
    print(
        f"## Scaling, {fmt} (events/s; speed-up over one single-threaded process; efficiency = speed-up / processes)\n"
    )
    print("| query | input | 1 process, 1 thread, 1 core | " + " | ".join(f"{n} processes" for n in args.curve)
          + " | identical |")  # fmt: skip
    print("| --- | --- | ---: |" + " ---: |" * len(args.curve) + " --- |")
    for q in args.queries:
        base = rate(one[q]["events"], one[q]["wall_s"])
        cells = [f"{adl_bench.fmt_rate(rates[n][q])} ({rates[n][q] / base:.2f}x, {rates[n][q] / base / n:.2f})"
                 for n in args.curve]  # fmt: skip
        print(f"| Q{q} | {ins[q].describe()} | {adl_bench.fmt_rate(base)} | " + " | ".join(cells)
              + f" | {'yes' if same[q] else 'DIFFERS'} |")  # fmt: skip
    print(f"\n### Targets at {top} processes: rate >= share x {top} x one process\n")
    if ceiling:
        print(f"(the machine's ceiling: {top} independent single-threaded processes at once, each pinned to its "
              "core, each on an equal share of the events, with no distribution machinery)\n")  # fmt: skip
        print(f"| query | efficiency | {top} independent processes: efficiency | cluster / independent "
              "| target | met? |")  # fmt: skip
        print("| --- | ---: | ---: | ---: | ---: | --- |")
    else:
        print("| query | efficiency | target | met? |")
        print("| --- | ---: | ---: | --- |")
    for q in args.queries:
        base = rate(one[q]["events"], one[q]["wall_s"])
        eff = rates[top][q] / base / top
        want = TARGET_EFFICIENCY.get(q, 0.8)
        met = "yes" if eff >= want else "no"
        if ceiling:
            ind = rate(ceiling[q]["events"], ceiling[q]["wall_s"])
            print(
                f"| Q{q} | {eff:.2f} | {ind / base / top:.2f} | {rates[top][q] / ind:.2f} | {want:.1f} | {met} |"
            )
        else:
            print(f"| Q{q} | {eff:.2f} | {want:.1f} | {met} |")
    if other:
        print(f"\n### {top} worker processes: each task's share of the cores (default) against "
              f"EVFLOW_CORES={args.worker_cores} in every worker (each task then reads with up to its share of {args.worker_cores} cores + 1 threads)\n")  # fmt: skip
        print(f"| query | default | EVFLOW_CORES={args.worker_cores} | default / other |")
        print("| --- | ---: | ---: | ---: |")
        for q in args.queries:
            print(f"| Q{q} | {adl_bench.fmt_rate(rates[top][q])} | {adl_bench.fmt_rate(other[q])} | "
                  f"{rates[top][q] / other[q]:.2f} |")  # fmt: skip
    print(f"\n(load average at end: {_load()}; benchmark took {time.perf_counter() - t_start:.0f} s)")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=4_000_000, help="events per query (default 4M)")
    p.add_argument(
        "--file-events",
        type=int,
        default=None,
        help="events of the data file, listed repeatedly up to --events (default: --events, at most 4M)",
    )
    p.add_argument(
        "--seconds",
        type=float,
        default=None,
        help="instead of --events: each query reads what one single-threaded process does in ~S s",
    )
    p.add_argument("--queries", nargs="+", type=int, default=list(range(1, 9)))
    p.add_argument("--formats", nargs="+", default=["parquet"], choices=["parquet", "root"])
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--best-of", type=int, default=1,
                   help="run every configuration K times and keep each query's fastest (noisy machines)")  # fmt: skip
    p.add_argument("--step-size", type=int, default=100_000)
    p.add_argument("--kernels", default="auto", choices=["auto", "numba", "awkward"])
    p.add_argument("--stream-events", type=int, default=100_000_000)
    p.add_argument("--data-dir", default=os.environ.get("EVFLOW_BENCH_DATA", "/tmp/evflow-adl"))
    p.add_argument("--curve", nargs="+", type=int, default=None, metavar="N",
                   help="only the scaling curve: every query on clusters of N worker processes, for each N")  # fmt: skip
    p.add_argument("--ceiling", action="store_true",
                   help="with --curve: also the largest N as N independent single-threaded processes at once")  # fmt: skip
    p.add_argument("--worker-cores", type=int, default=None, metavar="K",
                   help="with --curve: the largest N again with EVFLOW_CORES=K in every worker (a comparison)")  # fmt: skip
    p.add_argument("--skip-queries", action="store_true")
    p.add_argument("--skip-coffea", action="store_true")
    p.add_argument("--skip-baselines", action="store_true")
    p.add_argument("--skip-stream", action="store_true")
    p.add_argument("--skip-overhead", action="store_true")
    args = p.parse_args()

    data_dir = Path(args.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    if args.curve:
        return curve(args, data_dir)
    size = f"~{args.seconds:g} s of one process per query" if args.seconds else f"{args.events:,} events"
    print(f"# evflow on Dask: {args.processes} worker processes, {size}, step {args.step_size:,}")
    print(f"(cores: {os.cpu_count()}, load average at start: {_load()})\n")
    t_start = time.perf_counter()
    cluster, client = _cluster(args.processes)
    qs = args.queries
    n = args.processes
    try:
        for fmt in [] if args.skip_queries else args.formats:
            ins, warm = inputs(args, data_dir, fmt)
            # --best-of: the configurations take turns, so a burst of load on
            # the machine does not fall on one of them only.
            runs: dict[str, list[dict[int, dict[str, Any]]]] = {"dist": [], "one": [], "two": [], "pair": []}
            for k in range(args.best_of):
                print(f"  {fmt}: round {k + 1} of {args.best_of}", file=sys.stderr)
                runs["dist"].append(queries_on_cluster(client, ins, warm, qs, args.step_size, args.kernels))
                if not args.skip_baselines:
                    print(f"  {fmt}: evflow 1 thread on one core, 2 threads, {n} independent processes ...",
                          file=sys.stderr)  # fmt: skip
                    runs["one"].append(_baseline(ins, warm, qs, 1, args, 0, (0, 1)))
                    runs["two"].append(_baseline(ins, warm, qs, 2, args, None, (0, 1)))
                    runs["pair"].append(independent(ins, warm, qs, n, args))
            dist = _best(runs["dist"])
            one, two, pair = ({} if not runs[k] else _best(runs[k]) for k in ("one", "two", "pair"))
            coffea: dict[int, dict[str, Any]] = {}
            if not args.skip_coffea and any(ins[q].repeat > 1 for q in qs):
                print("  coffea: only on a single file (--events up to --file-events)", file=sys.stderr)
            elif not args.skip_coffea:
                try:
                    coffea = coffea_on_cluster(client, ins[qs[0]].path, warm, qs, args.step_size)
                except ImportError as e:
                    print(f"  coffea not installed ({e}): pip install '.[bench]'", file=sys.stderr)
            print(f"\n## {fmt.capitalize()} (events/s)\n")
            print(f"| query | input | {n} processes | chunks | 1 process, 1 thread, 1 core | {n}p / 1t | "
                  f"1 process, 2 threads | {n}p / 2t | {n} independent processes | {n}p / independent | "
                  "coffea, same cluster | evflow / coffea | identical |")  # fmt: skip
            print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
            for q in qs:
                d = dist[q]
                rd = rate(d["events"], d["wall_s"])
                row = [f"Q{q}", ins[q].describe(), adl_bench.fmt_rate(rd), str(d["chunks"])]
                checks = []
                for base in (one, two, pair):
                    if base:
                        rb = rate(base[q]["events"], base[q]["wall_s"])
                        row += [adl_bench.fmt_rate(rb), f"{rd / rb:.2f}x"]
                        if "hists" in base[q]:
                            checks.append(base[q]["hists"] == d["hists"])
                    else:
                        row += ["-", "-"]
                if coffea:
                    rc = rate(coffea[q]["events"], coffea[q]["wall_s"])
                    row += [adl_bench.fmt_rate(rc), f"{rd / rc:.1f}x"]
                else:
                    row += ["-", "-"]
                ident = "1t, 2t" if checks and all(checks) else ("DIFFERS" if checks else "-")
                if coffea:
                    bins = adl_bench.differing_bins(coffea[q]["hists"], d["hists"])
                    ident += ", coffea" if bins == 0 else f", coffea: {bins} bins differ"
                row.append(ident)
                print("| " + " | ".join(row) + " |")

        if not args.skip_overhead:
            o = chunk_overhead(client, data_dir, args.processes)
            print("\n## Per-chunk overhead (no module, 200 000 events, batches of 1 000; best of 3)\n")
            print(
                "| chunks | wall | chunks | wall | marginal cost per chunk (worker-ms) | task time per chunk |"
            )
            print("| ---: | ---: | ---: | ---: | ---: | ---: |")
            print(f"| {o['few_chunks']} | {o['few_s']:.3f} s | {o['many_chunks']} | {o['many_s']:.3f} s | "
                  f"{o['per_chunk_ms']:.1f} ms | {o['task_ms']:.1f} ms |")  # fmt: skip

        if not args.skip_stream:
            path = adl_bench.dataset(data_dir, args.file_events or min(args.events, 4_000_000), "parquet")
            s = stream(client, path, args.stream_events, args.step_size, args.kernels)
            print(f"\n## Q1 stream: {s['events']:,} events in {s['chunks']} chunks, {s['wall_s']:.1f} s "
                  f"({rate(s['events'], s['wall_s']) / 1e6:.1f} M ev/s)\n")  # fmt: skip
            print("| client RSS at start | at 10 % of the run | peak | at the end |")
            print("| ---: | ---: | ---: | ---: |")
            print(f"| {s['rss_start_mb']:.0f} MB | {s['rss_at_10pct_mb']:.0f} MB | {s['rss_peak_mb']:.0f} MB | "
                  f"{s['rss_end_mb']:.0f} MB |")  # fmt: skip
    finally:
        client.close()
        cluster.close()
    print(f"\n(load average at end: {_load()}; benchmark took {time.perf_counter() - t_start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
