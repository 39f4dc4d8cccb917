"""Reading balanced against processing: the adaptive read balancer against
every fixed split of a sweep, on an input-bound and a compute-bound
configuration of the ADL queries (issue 6).

    python bench/adl_balance.py                      # 4M events, both configurations
    python bench/adl_balance.py --events 1000000 --repeat 2

For each configuration it runs the query with fixed (read workers, depth)
settings — workers read/decode batches concurrently, depth bounds the batches
read or decoded ahead of the engine — and with ``"auto"`` (the
:class:`evflow.source.ReadBalancer`), ``--repeat`` rounds of every setting in
shuffled order on 2 threads, and prints the sweep (median rates), the
adaptive median against the best fixed split's, and how fast the balancer settled (checkpoints, batches and events
taken when it made its last change). Datasets come from bench/adl.py's
``dataset`` (made when missing, outside the repository).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import evflow as ef

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


bench = _load("adl_bench", ROOT / "bench" / "adl.py")  # datasets
make_process = _load("adl_queries", ROOT / "examples" / "adl" / "adl.py").make_process

#: (name, input format, query, kernels, what bounds it)
CONFIGS = [
    (
        "input-bound",
        "root",
        8,
        "auto",
        "Q8 (numba kernel; few events pass its cuts) from ROOT: uproot reading 12 branches dominates",
    ),
    (
        "compute-bound",
        "parquet",
        6,
        "awkward",
        "Q6 (trijets) with awkward kernels from Parquet: processing dominates",
    ),
]

SWEEP = [(1, 1), (1, 2), (1, 4), (2, 2), (2, 3), (2, 6), (3, 4), (3, 8)]


def run_once(path: Path, query: int, kernels: str, step: int, workers: Any, depth: Any) -> dict[str, Any]:
    proc = make_process(query, str(path), step_size=step, kernels=kernels)
    proc.source = ef.source.auto(str(path), step_size=step, read_workers=workers, prefetch=depth)
    t0 = time.perf_counter()
    r = proc.run(threads=2)
    wall = time.perf_counter() - t0
    return {
        "rate": r.events / wall,
        "wall_s": wall,
        "events": r.events,
        "summary": proc.source.balancer.summary(),
        "history": proc.source.balancer.history,
        "hists": {k: v.values(flow=True).tolist() for k, v in r.histograms.items()},
    }


def sweep_rounds(n: int, path: Path, query: int, kernels: str, step: int) -> dict[Any, list[dict[str, Any]]]:
    """``n`` rounds; each runs every fixed setting and ``auto`` once, in a
    shuffled order (so that a drift of the machine's load hits every setting
    alike)."""
    settings: list[Any] = [*SWEEP, ("auto", "auto")]
    runs: dict[Any, list[dict[str, Any]]] = {s: [] for s in settings}
    rng = random.Random(1)
    for _ in range(n):
        order = settings[:]
        rng.shuffle(order)
        for w, d in order:
            runs[(w, d)].append(run_once(path, query, kernels, step, w, d))
    return runs


def median_rate(runs: list[dict[str, Any]]) -> float:
    return statistics.median(r["rate"] for r in runs)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=4_000_000)
    p.add_argument("--step-size", type=int, default=100_000)
    p.add_argument("--repeat", type=int, default=5, help="rounds (median of N runs per setting)")
    p.add_argument("--data-dir", default=os.environ.get("EVFLOW_BENCH_DATA", "/tmp/evflow-adl"))
    p.add_argument("--json", default=None)
    args = p.parse_args()
    data_dir = Path(args.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    load0 = os.getloadavg()
    print(
        f"# Reading balanced against processing: {args.events:,} events, 2 threads, median of {args.repeat}"
    )
    print(f"(cores: {os.cpu_count()}, load average at start: {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f})\n")
    out: dict[str, Any] = {}
    summary_rows = []
    for name, fmt, query, kernels, why in CONFIGS:
        path = bench.dataset(data_dir, args.events, fmt)
        run_once(path, query, kernels, args.step_size, "auto", "auto")  # warm-up (numba, page cache)
        runs = sweep_rounds(args.repeat, path, query, kernels, args.step_size)
        auto_runs = runs.pop(("auto", "auto"))
        ref = auto_runs[0]["hists"]
        identical = all(r["hists"] == ref for rs in [*runs.values(), auto_runs] for r in rs)
        med = {k: median_rate(v) for k, v in runs.items()}
        best_key = max(med, key=lambda k: med[k])
        worst_key = min(med, key=lambda k: med[k])
        auto_med = median_rate(auto_runs)
        # the adaptive run with the median rate: its decisions are the typical ones
        auto = sorted(auto_runs, key=lambda r: r["rate"])[len(auto_runs) // 2]
        s = auto["summary"]
        finals = sorted({(r["summary"]["workers"], r["summary"]["depth"]) for r in auto_runs})
        settled = [r["summary"]["settled_events"] / 1e6 for r in auto_runs]
        print(f"## {name}: {why}\n")
        print("| read workers | depth | events/s (median) | min – max | vs best |")
        print("| ---: | ---: | ---: | ---: | ---: |")
        for (w, d), rs in runs.items():
            mark = " (best)" if (w, d) == best_key else ""
            lo, hi = min(r["rate"] for r in rs), max(r["rate"] for r in rs)
            print(f"| {w} | {d} | {med[(w, d)] / 1e6:.2f} M{mark} | {lo / 1e6:.1f} – {hi / 1e6:.1f} M | "
                  f"{med[(w, d)] / med[best_key]:.2f} |")  # fmt: skip
        lo, hi = min(r["rate"] for r in auto_runs), max(r["rate"] for r in auto_runs)
        print(f"| auto | auto | {auto_med / 1e6:.2f} M | {lo / 1e6:.1f} – {hi / 1e6:.1f} M | "
              f"{auto_med / med[best_key]:.2f} |")  # fmt: skip
        print(f"\nadaptive final settings over the {len(auto_runs)} runs: "
              f"{', '.join(f'{w}w/{d}d' for w, d in finals)}; settled after "
              f"{', '.join(f'{x:g}' for x in settled)} M events")  # fmt: skip
        print(f"\ndecisions of the median adaptive run ({len(auto['history'])} checkpoints):")
        for h in auto["history"]:
            print(f"  checkpoint {h['checkpoint']} after {h['batches']} batches ({h['events'] / 1e6:g} M events): "
                  f"{h['workers']}w/{h['depth']}d, {h['rate'] / 1e6:.2f} M ev/s, engine waited {h['starving']:.0%}, "
                  f"readers ahead {h['ahead']:.0%} -> {h['action']}; next {h['next']}")  # fmt: skip
        print(f"\nsettled at checkpoint {s['settled_checkpoint']} ({s['settled_batches']} batches, "
              f"{s['settled_events'] / 1e6:g} M events); results identical for every run: {identical}\n")  # fmt: skip
        summary_rows.append(
            f"| {name} | {best_key[0]}w/{best_key[1]}d {med[best_key] / 1e6:.2f} M | "
            f"{worst_key[0]}w/{worst_key[1]}d {med[worst_key] / 1e6:.2f} M | "
            f"{s['workers']}w/{s['depth']}d {auto_med / 1e6:.2f} M | {auto_med / med[best_key]:.3f} | "
            f"checkpoint {s['settled_checkpoint']}, {s['settled_events'] / 1e6:g} M events | {identical} |"
        )
        out[name] = {
            "sweep": {f"{w}w{d}d": [r["rate"] for r in rs] for (w, d), rs in runs.items()},
            "auto": [{k: v for k, v in r.items() if k != "hists"} for r in auto_runs],
        }
    print("## Summary (median events/s, 2 threads)\n")
    print(
        "| configuration | best fixed | worst fixed | adaptive (final) | adaptive / best | settled | identical |"
    )
    print("| --- | --- | --- | --- | ---: | --- | --- |")
    for row in summary_rows:
        print(row)
    load1 = os.getloadavg()
    print(f"\n(load average at end: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
