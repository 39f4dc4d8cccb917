"""The eight ADL queries in one pass (issue 14): evflow running all eight in
one process, evflow running them as eight passes (one after the other), and an independent
plain single-process loop that reads the file once and fills all eight
queries' histograms (bench/adl_peers.py's reference code), side by side.

    python bench/adl_one_pass.py                       # 300 000 events, Parquet, 2 threads, 3 rounds
    python bench/adl_one_pass.py --events 100000 --format root --kernels awkward

The dataset (NanoAOD schema, resampled from
../shared/data/hep/nanoAOD_2015_CMS_Open_Data_ttbar.root with
``evflow.data.resample``) is made in $EVFLOW_BENCH_DATA or /tmp/evflow-adl,
never in the repository. Each round runs the three side by side (the order
rotated between rounds); the table gives the least wall time of each (other
processes only ever add time) and checks that every histogram is identical
bin by bin across the three.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "examples" / "adl"))

import numpy as np  # noqa: E402

import adl  # noqa: E402  (examples/adl/adl.py)
import adl_peers  # noqa: E402

QUERIES = [1, 2, 3, 4, 5, 6, 7, 8]


def dataset(events: int, ext: str) -> Path:
    data_dir = Path(os.environ.get("EVFLOW_BENCH_DATA", "/tmp/evflow-adl"))
    data_dir.mkdir(parents=True, exist_ok=True)
    out = data_dir / f"nanoaod_{events}.{ext}"
    if not out.exists():
        import evflow as ef

        ef.data.resample(
            str(adl.NANOAOD), str(out), events=events, seed=1, chunk=100_000, branches=adl.BRANCHES
        )
    return out


def values(h: Any) -> np.ndarray:
    return np.asarray(h.values(flow=True))


def one_pass(path: Path, threads: int, step: int, kernels: str) -> dict[str, np.ndarray]:
    proc = adl.make_one_pass(str(path), QUERIES, step_size=step, kernels=kernels)
    r = proc.run(threads=threads)
    return {name: values(h) for name, h in r.histograms.items()}


def eight_passes(path: Path, threads: int, step: int, kernels: str) -> dict[str, np.ndarray]:
    out = {}
    for q in QUERIES:
        r = adl.make_process(q, str(path), step_size=step, kernels=kernels).run(threads=threads)
        out.update({name: values(r.histograms[name]) for name in adl.histograms(q)})
    return out


def plain_loop(path: Path, step: int) -> dict[str, np.ndarray]:
    """One read of the union of the queries' columns, all eight filled per batch."""
    hists = {q: adl_peers.new_hists(q) for q in QUERIES}
    columns = sorted({c for q in QUERIES for c in adl_peers.COLUMNS[q]})
    for b in adl_peers.batches(path, columns, step):
        for q in QUERIES:
            adl_peers.plain_fill(q, b, hists[q])
    return {name: values(h) for q in QUERIES for name, h in hists[q].items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=300_000)
    ap.add_argument("--format", choices=["parquet", "root"], default="parquet")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--step-size", type=int, default=100_000)
    ap.add_argument("--kernels", default="auto", choices=["auto", "numba", "awkward"])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if not adl.NANOAOD.exists():
        print(f"needs {adl.NANOAOD} (the shared data); skipped", file=sys.stderr)
        return 0
    path = dataset(args.events, args.format)
    runs = {
        "evflow, one pass": lambda: one_pass(path, args.threads, args.step_size, args.kernels),
        "evflow, eight passes": lambda: eight_passes(path, args.threads, args.step_size, args.kernels),
        "plain loop, one pass (1 process)": lambda: plain_loop(path, args.step_size),
    }
    # Warm-up (numba compilation, page cache), then rounds side by side.
    results = {name: run() for name, run in runs.items()}
    best = {name: float("inf") for name in runs}
    names = list(runs)
    for k in range(args.rounds):
        for name in names[k % len(names) :] + names[: k % len(names)]:
            t0 = time.perf_counter()
            runs[name]()
            best[name] = min(best[name], time.perf_counter() - t0)
    ref = results["plain loop, one pass (1 process)"]
    kernels = "numba" if adl._use_numba(args.kernels) else "awkward"
    print(
        f"{args.events} events, {args.format}, step {args.step_size}, {args.threads} threads, "
        f"{kernels} kernels; least of {args.rounds} rounds"
    )
    print("| run | s | events/s | vs plain loop | histograms identical to the plain loop |")
    print("| --- | ---: | ---: | ---: | --- |")
    for name in names:
        same = all(np.array_equal(results[name][h], ref[h]) for h in ref)
        print(
            f"| {name} | {best[name]:.3f} | {args.events / best[name]:,.0f} | "
            f"{best[ref_name(names)] / best[name]:.2f}x | {'yes' if same else 'NO'} |"
        )
    return 0


def ref_name(names: list[str]) -> str:
    return names[-1]


if __name__ == "__main__":
    sys.exit(main())
