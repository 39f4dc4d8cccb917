"""evflow on Dask distributed (issue 10): the ADL queries on a LocalCluster
of worker processes against one process, the per-chunk overhead of the
machinery, and the client's memory over a long stream.

One command::

    python bench/scaleout.py                         # 4M events, Parquet, Q1-Q8, 2 processes
    python bench/scaleout.py --events 1000000 --processes 2 --skip-coffea

``--curve 1 2 4 8 16`` measures only the scaling curve: every query on
clusters of 1, 2, 4, 8 and 16 worker processes, in one table.

(Not ``bench/distributed.py``: that name would shadow Dask's ``distributed``
package for the scripts in bench/.)

measures, on the datasets of bench/adl.py (made when missing, in
$EVFLOW_BENCH_DATA or /tmp/evflow-adl):

* every query with ``proc.run(client=...)`` on a LocalCluster of
  ``--processes`` worker processes (1 engine thread each), warm (each query
  ran once on the 0.2M file first), against one single-threaded process
  pinned to one core and one process with 2 threads (the best thread-only
  configuration on 2 cores), each in a fresh process (bench/adl.py's
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
import os
import sys
import threading
import time
import warnings
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


def queries_on_cluster(client: Any, path: Path, warm: Path, qs: list[int], step: int,
                       kernels: str) -> dict[int, dict[str, Any]]:  # fmt: skip
    import adl  # examples/adl/adl.py
    import evflow as ef

    out = {}
    for q in qs:
        ef.distributed.run(
            partial(adl.make_process, q, str(warm), step_size=step, kernels=kernels), client=client
        )
        t0 = time.perf_counter()
        r = ef.distributed.run(
            partial(adl.make_process, q, str(path), step_size=step, kernels=kernels), client=client
        )
        wall = time.perf_counter() - t0
        out[q] = {"events": r.events, "wall_s": wall, "hists": _hists(r.histograms),
                  "chunks": len(r.report["distributed"]["chunks"])}  # fmt: skip
        print(f"  evflow on the cluster Q{q}: {rate(r.events, wall) / 1e6:.2f} M ev/s", file=sys.stderr)
    return out


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


def curve(args: argparse.Namespace, data_dir: Path) -> int:
    """Events/s of every query on clusters of 1, 2, 4, ... worker processes
    (``--curve``), one table, with the speed-up over 1 process."""
    import logging

    from distributed import Client, LocalCluster

    fmt = args.formats[0]
    path = adl_bench.dataset(data_dir, args.events, fmt)
    warm = adl_bench.dataset(data_dir, 200_000, fmt)
    rates: dict[int, dict[int, float]] = {}
    for n in args.curve:
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=":0",
                               silence_logs=logging.ERROR)  # fmt: skip
        client = Client(cluster)
        try:
            got = queries_on_cluster(client, path, warm, args.queries, args.step_size, args.kernels)
        finally:
            client.close()
            cluster.close()
        rates[n] = {q: rate(r["events"], r["wall_s"]) for q, r in got.items()}
    load = os.getloadavg()
    print(
        f"## Scaling, {fmt}, {args.events / 1e6:g} M events (events/s; speed-up over {args.curve[0]} process(es))\n"
    )
    print("| query | " + " | ".join(f"{n} processes" for n in args.curve) + " |")
    print("| --- |" + " ---: |" * len(args.curve))
    for q in args.queries:
        base = rates[args.curve[0]][q]
        cells = [f"{adl_bench.fmt_rate(rates[n][q])} ({rates[n][q] / base:.2f}x)" for n in args.curve]
        print(f"| Q{q} | " + " | ".join(cells) + " |")
    print(f"\n(load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f})")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=4_000_000)
    p.add_argument("--queries", nargs="+", type=int, default=list(range(1, 9)))
    p.add_argument("--formats", nargs="+", default=["parquet"], choices=["parquet", "root"])
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--step-size", type=int, default=100_000)
    p.add_argument("--kernels", default="auto", choices=["auto", "numba", "awkward"])
    p.add_argument("--stream-events", type=int, default=100_000_000)
    p.add_argument("--data-dir", default=os.environ.get("EVFLOW_BENCH_DATA", "/tmp/evflow-adl"))
    p.add_argument("--curve", nargs="+", type=int, default=None, metavar="N",
                   help="only the scaling curve: every query on clusters of N worker processes, for each N")  # fmt: skip
    p.add_argument("--skip-queries", action="store_true")
    p.add_argument("--skip-coffea", action="store_true")
    p.add_argument("--skip-baselines", action="store_true")
    p.add_argument("--skip-stream", action="store_true")
    p.add_argument("--skip-overhead", action="store_true")
    args = p.parse_args()

    import logging

    from distributed import Client, LocalCluster

    data_dir = Path(args.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    if args.curve:
        return curve(args, data_dir)
    load0 = os.getloadavg()
    print(
        f"# evflow on Dask: {args.processes} worker processes, {args.events:,} events, step {args.step_size:,}"
    )
    print(f"(cores: {os.cpu_count()}, load average at start: {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f})\n")
    t_start = time.perf_counter()
    cluster = LocalCluster(n_workers=args.processes, threads_per_worker=1, processes=True,
                           dashboard_address=":0", silence_logs=logging.ERROR)  # fmt: skip
    client = Client(cluster)
    qs = args.queries
    try:
        for fmt in [] if args.skip_queries else args.formats:
            path = adl_bench.dataset(data_dir, args.events, fmt)
            warm = adl_bench.dataset(data_dir, 200_000, fmt)
            dist = queries_on_cluster(client, path, warm, qs, args.step_size, args.kernels)
            coffea: dict[int, dict[str, Any]] = {}
            if not args.skip_coffea:
                try:
                    coffea = coffea_on_cluster(client, path, warm, qs, args.step_size)
                except ImportError as e:
                    print(f"  coffea not installed ({e}): pip install '.[bench]'", file=sys.stderr)
            one: dict[int, dict[str, Any]] = {}
            two: dict[int, dict[str, Any]] = {}
            if not args.skip_baselines:
                print(f"  {fmt}: evflow 1 thread on one core ...", file=sys.stderr)
                one, _ = adl_bench.measure("evflow", path, qs, 1, pin=0, warm=warm, step=args.step_size,
                                           kernels=args.kernels)  # fmt: skip
                print(f"  {fmt}: evflow 2 threads ...", file=sys.stderr)
                two, _ = adl_bench.measure("evflow", path, qs, 2, warm=warm, step=args.step_size,
                                           kernels=args.kernels)  # fmt: skip
            print(f"\n## {fmt.capitalize()}, {args.events / 1e6:g} M events (events/s)\n")
            n = args.processes
            print(f"| query | {n} processes | chunks | 1 process, 1 thread, 1 core | {n}p / 1t | "
                  f"1 process, 2 threads | {n}p / 2t | coffea, same cluster | evflow / coffea | identical |")  # fmt: skip
            print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
            for q in qs:
                d = dist[q]
                rd = rate(d["events"], d["wall_s"])
                row = [f"Q{q}", adl_bench.fmt_rate(rd), str(d["chunks"])]
                checks = []
                for base in (one, two):
                    if base:
                        rb = rate(base[q]["events"], base[q]["wall_s"])
                        row += [adl_bench.fmt_rate(rb), f"{rd / rb:.2f}x"]
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
            path = adl_bench.dataset(data_dir, args.events, "parquet")
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
    load1 = os.getloadavg()
    print(f"\n(load average at end: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}; "
          f"benchmark took {time.perf_counter() - t_start:.0f} s)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
