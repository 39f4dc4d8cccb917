"""The ADL benchmark queries: evflow side by side with coffea and a plain
uproot/pyarrow + awkward loop (issue 6).

One command::

    python bench/adl.py                      # 4M events, Parquet and ROOT, every query; 16M for peak RSS
    python bench/adl.py --events 1000000 --skip-rss --formats parquet   # quicker

creates the NanoAOD-schema datasets it needs (1, 4 and 16 million events
resampled from ../shared/data/hep/nanoAOD_2015_CMS_Open_Data_ttbar.root with
``python -m evflow.data``, in --data-dir: $EVFLOW_BENCH_DATA or
/tmp/evflow-adl, never in the repository), then for each input format and
query measures, each in a fresh process after a warm-up run:

* evflow with 2 threads (2 cores), and with 1 thread pinned to one core
  (``os.sched_setaffinity``: the single-core figure, its decode worker on
  that same core);
* coffea (``processor.Runner`` + ``FuturesExecutor``, 2 worker processes on
  a warm pool, NanoEvents) — the current coffea release, from the ``bench``
  extra;
* the plain single-process loop (bench/adl_peers.py), which is also the
  reference every other result is compared with bin by bin;

and prints a markdown table: events/s, the ratios the issue sets targets
for, RDataFrame's published single-core rates (Graur et al., PVLDB 15(2),
2022, AWS m5d: different hardware, orientation only), whether the results
are identical, and the peak RSS of all eight queries on 16 million events.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("EVFLOW_HEP_DATA", ROOT.parent / "shared" / "data" / "hep"))
NANOAOD = DATA / "nanoAOD_2015_CMS_Open_Data_ttbar.root"

#: Branches of the benchmark datasets: what the queries read and more, like
#: the 2012 benchmark file (kinematics, ids, isolation, vertices).
BRANCHES = [
    "run", "luminosityBlock", "event", "PV_npvs", "PV_x", "PV_y", "PV_z",
    "MET_pt", "MET_phi", "MET_sumEt", "MET_significance", "MET_covXX", "MET_covXY", "MET_covYY",
    "nJet", "Jet_pt", "Jet_eta", "Jet_phi", "Jet_mass", "Jet_btagCSVV2", "Jet_btagDeepB", "Jet_puId", "Jet_jetId",
    "nMuon", "Muon_pt", "Muon_eta", "Muon_phi", "Muon_mass", "Muon_charge", "Muon_pfRelIso03_all",
    "Muon_pfRelIso04_all", "Muon_tightId", "Muon_softId", "Muon_dxy", "Muon_dxyErr", "Muon_dz", "Muon_dzErr",
    "nElectron", "Electron_pt", "Electron_eta", "Electron_phi", "Electron_mass", "Electron_charge",
    "Electron_pfRelIso03_all", "Electron_dxy", "Electron_dxyErr", "Electron_dz", "Electron_dzErr",
    "Electron_cutBased",
]  # fmt: skip

#: RDataFrame single-core events/s published in the paper's artifact (AWS m5d).
RDF_1CORE = {1: 7.3e6, 2: 2.2e6, 3: 0.9e6, 4: 1.6e6, 5: 1.6e6, 6: 31e3, 7: 0.27e6, 8: 0.87e6}


def dataset(data_dir: Path, events: int, ext: str) -> Path:
    """``nanoaod_{events}.{ext}`` in ``data_dir``, made when missing."""
    out = data_dir / f"nanoaod_{events}.{ext}"
    if not out.exists():
        import evflow as ef

        t0 = time.perf_counter()
        ef.data.resample(str(NANOAOD), str(out), events=events, seed=1, chunk=100_000, branches=BRANCHES)
        print(f"  made {out} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return out


# --------------------------------------------------------------------------- one measurement (worker process)


def _hists_json(h: dict[str, Any]) -> dict[str, list[float]]:
    return {k: [float(x) for x in v.values(flow=True)] for k, v in h.items()}


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def worker(args: argparse.Namespace) -> int:
    """Runs ``args.queries`` with one framework on one file; prints one JSON
    line per query."""
    if args.pin is not None:
        os.sched_setaffinity(0, {args.pin})
    path = Path(args.input)
    warm = Path(args.warm) if args.warm else None
    sys.path.insert(0, str(ROOT / "bench"))
    if args.framework == "evflow":
        sys.path.insert(0, str(ROOT / "examples" / "adl"))
        import adl

        def run(query: int, file: Path) -> tuple[int, dict[str, Any], dict[str, Any]]:
            # The main input may be listed several times (a longer input from one file).
            files = [str(file)] * (args.repeat if file == path else 1)
            limit = args.max_events if file == path else None
            proc = adl.make_process(query, files, step_size=args.step_size, kernels=args.kernels,
                                    max_events=limit)  # fmt: skip
            r = proc.run(threads=args.threads)
            extra = {
                "balance": proc.source.balancer.summary(),
                "peak_events_in_flight": r.report.get("peak_events_in_flight"),
            }
            return r.events, r.histograms, extra

    elif args.framework == "plain":
        import adl_peers

        def run(query: int, file: Path) -> tuple[int, dict[str, Any], dict[str, Any]]:
            n, h = adl_peers.plain_run(query, file, args.step_size)
            return n, h, {}

    else:
        import adl_peers

        fmt = "root" if path.suffix == ".root" else "parquet"
        coffea = adl_peers.coffea_runner(fmt, workers=args.threads, step=args.step_size)

        def run(query: int, file: Path) -> tuple[int, dict[str, Any], dict[str, Any]]:
            n, h = coffea(query, file)
            return n, h, {}

    for q in args.queries:
        if warm is not None:
            run(q, warm)
        c0, t0 = _cpu(), time.perf_counter()
        n, h, extra = run(q, path)
        wall, cpu = time.perf_counter() - t0, _cpu() - c0
        line = {"query": q, "events": n, "wall_s": wall, "cpu_s": cpu, "hists": _hists_json(h), **extra}
        print(json.dumps(line), flush=True)
    with open("/proc/self/status") as f:
        hwm = next(x for x in f if x.startswith("VmHWM")).split()[1]
    print(json.dumps({"peak_rss_mb": int(hwm) / 1024}), flush=True)
    return 0


def measure(framework: str, path: Path, queries: list[int], threads: int, *, pin: int | None = None,
            warm: Path | None = None, step: int = 100_000, kernels: str = "auto", repeat: int = 1,
            max_events: int | None = None, timeout: float = 3600) -> tuple[dict[int, dict[str, Any]], float]:  # fmt: skip
    """Runs a worker process; returns ({query: figures}, peak RSS in MB).
    evflow only: ``repeat`` lists ``path`` that many times, ``max_events``
    stops there."""
    cmd = [sys.executable, __file__, "--worker", framework, "--input", str(path), "--threads", str(threads),
           "--step-size", str(step), "--kernels", kernels, "--queries", *map(str, queries),
           "--repeat", str(repeat)]  # fmt: skip
    if max_events is not None:
        cmd += ["--max-events", str(max_events)]
    if pin is not None:
        cmd += ["--pin", str(pin)]
    if warm is not None:
        cmd += ["--warm", str(warm)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"{framework} on {path.name} failed:\n{out.stderr[-4000:]}")
    results: dict[int, dict[str, Any]] = {}
    rss = 0.0
    for line in out.stdout.splitlines():
        if not line.startswith("{"):
            continue
        d = json.loads(line)
        if "query" in d:
            results[d["query"]] = d
        elif "peak_rss_mb" in d:
            rss = d["peak_rss_mb"]
    return results, rss


def same(a: dict[str, list[float]], b: dict[str, list[float]]) -> bool:
    return a.keys() == b.keys() and all(a[k] == b[k] for k in a)


def differing_bins(a: dict[str, list[float]], b: dict[str, list[float]]) -> int:
    return sum(x != y for k in a for x, y in zip(a[k], b.get(k, []), strict=False))


# --------------------------------------------------------------------------- the table


def rate(r: dict[str, Any]) -> float:
    return r["events"] / r["wall_s"] if r["wall_s"] > 0 else 0.0


def fmt_rate(x: float) -> str:
    return f"{x / 1e6:.2f} M" if x >= 1e6 else f"{x / 1e3:.0f} k"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=4_000_000)
    p.add_argument("--rss-events", type=int, default=16_000_000)
    p.add_argument("--queries", nargs="+", type=int, default=list(range(1, 9)))
    p.add_argument("--formats", nargs="+", default=["parquet", "root"], choices=["parquet", "root"])
    p.add_argument("--step-size", type=int, default=100_000)
    p.add_argument("--kernels", default="auto", choices=["auto", "numba", "awkward"])
    p.add_argument("--data-dir", default=os.environ.get("EVFLOW_BENCH_DATA", "/tmp/evflow-adl"))
    p.add_argument("--skip-coffea", action="store_true")
    p.add_argument("--skip-plain", action="store_true")
    p.add_argument("--skip-rss", action="store_true")
    p.add_argument("--json", default=None, help="also write every figure here")
    # worker mode (internal)
    p.add_argument("--worker", default=None, choices=["evflow", "plain", "coffea"], help=argparse.SUPPRESS)
    p.add_argument("--input", default=None, help=argparse.SUPPRESS)
    p.add_argument("--repeat", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--max-events", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--threads", type=int, default=2, help=argparse.SUPPRESS)
    p.add_argument("--pin", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--warm", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        args.framework = args.worker
        return worker(args)

    if not NANOAOD.exists():
        print(f"{NANOAOD} not found; set EVFLOW_HEP_DATA", file=sys.stderr)
        return 2
    data_dir = Path(args.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    load0 = os.getloadavg()
    print(f"# ADL benchmark queries: {args.events:,} events, step {args.step_size:,}")
    print(f"(cores: {os.cpu_count()}, load average at start: {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f})\n")
    figures: dict[str, Any] = {"events": args.events, "load_start": load0}
    qs = args.queries
    for fmt in args.formats:
        path = dataset(data_dir, args.events, fmt)
        # each worker runs every query once on a small file first (imports, numba, coffea's pool)
        warm_small = dataset(data_dir, 200_000, fmt)
        print(f"  {fmt}: evflow 2 threads ...", file=sys.stderr)
        ev2, _ = measure("evflow", path, qs, 2, warm=warm_small, step=args.step_size, kernels=args.kernels)
        print(f"  {fmt}: evflow 1 thread on one core ...", file=sys.stderr)
        ev1, _ = measure(
            "evflow", path, qs, 1, pin=0, warm=warm_small, step=args.step_size, kernels=args.kernels
        )
        plain: dict[int, dict[str, Any]] = {}
        if not args.skip_plain:
            print(f"  {fmt}: plain loop ...", file=sys.stderr)
            plain, _ = measure("plain", path, qs, 1, step=args.step_size)
        coffea: dict[int, dict[str, Any]] = {}
        if not args.skip_coffea and importlib.util.find_spec("coffea") is None:
            print("  coffea is not installed: its column is left empty (--skip-coffea)", file=sys.stderr)
            args.skip_coffea = True
        if not args.skip_coffea:
            print(f"  {fmt}: coffea 2 workers ...", file=sys.stderr)
            coffea, _ = measure("coffea", path, qs, 2, warm=warm_small, step=args.step_size)
        figures[fmt] = {"evflow_2t": ev2, "evflow_1t_1core": ev1, "plain": plain, "coffea": coffea}

        print(f"\n## {fmt.capitalize()} input, {args.events / 1e6:g} M events (events/s)\n")
        print("| query | evflow 2 threads | evflow 1 thread, 1 core | 2t / 1t | coffea, 2 workers | evflow / coffea "
              "| plain loop | evflow / plain | RDF 1 core (published) | evflow 1 core / RDF | identical |")  # fmt: skip
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
        for q in qs:
            r2, r1 = ev2[q], ev1[q]
            row = [f"Q{q}", fmt_rate(rate(r2)), fmt_rate(rate(r1)), f"{rate(r2) / rate(r1):.2f}x"]
            if coffea:
                row += [fmt_rate(rate(coffea[q])), f"{rate(r2) / rate(coffea[q]):.1f}x"]
            else:
                row += ["-", "-"]
            if plain:
                row += [fmt_rate(rate(plain[q])), f"{rate(r2) / rate(plain[q]):.1f}x"]
            else:
                row += ["-", "-"]
            row += [fmt_rate(RDF_1CORE[q]), f"{rate(r1) / RDF_1CORE[q]:.2f}x"]
            checks = ["1t" if same(r1["hists"], r2["hists"]) else "1t DIFFERS"]
            if plain:
                checks.append("ref" if same(plain[q]["hists"], r2["hists"]) else "ref DIFFERS")
            if coffea:
                d = differing_bins(coffea[q]["hists"], r2["hists"])
                checks.append("coffea" if d == 0 else f"coffea: {d} bins differ")
            row.append(", ".join(checks))
            print("| " + " | ".join(row) + " |")
        bal = ", ".join(
            f"Q{q} {ev2[q]['balance']['workers']}w/{ev2[q]['balance']['depth']}d@{ev2[q]['balance']['settled_events'] / 1e6:g}M"
            for q in qs
        )
        print(f"\nreading balance chosen (2 threads): workers/depth @ events when settled: {bal}")

    if not args.skip_rss:
        print("\n## Peak RSS, all eight queries in one process, 2 threads (target <= 1500 MB)\n")
        print("| input | events | peak RSS | s (8 queries) |")
        print("| --- | ---: | ---: | ---: |")
        for fmt in args.formats:
            big = dataset(data_dir, args.rss_events, fmt)
            t0 = time.perf_counter()
            res, rss = measure("evflow", big, qs, 2, step=args.step_size, kernels=args.kernels)
            figures[f"rss_{fmt}"] = {"peak_rss_mb": rss, "results": res}
            print(f"| {fmt} | {args.rss_events / 1e6:g} M | {rss:.0f} MB | {time.perf_counter() - t0:.0f} |")

    load1 = os.getloadavg()
    figures["load_end"] = load1
    print(f"\n(load average at end: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}; "
          f"benchmark took {time.perf_counter() - t_start:.0f} s)")  # fmt: skip
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
