"""Adaptive ordering across the chunks of a distributed job (issue 10).

    python bench/ordering_chunks.py                        # 2 processes, 2 000 000 events, chunks of 100 000
    python bench/ordering_chunks.py --processes 2 --chunk-size 50000 --runs 3

The six cuts of ``bench/ordering_batches.py`` (calibrated sleeps per event
seen, a poor written order, correlated and anti-correlated pairs) run on a
Dask LocalCluster of ``--processes`` single-threaded workers, cut into
chunks of ``--chunk-size`` events, once with each chunk's planner starting
from the statistics that the finished chunks measured (merged by the
client: samples, stop counts, step costs) and once with the chunks starting
from the merged *orders* only (their planners measuring from scratch, as
before the statistics were handed over), runs alternated. Every call of
every filter, on any worker and including the planners' probes, appends the
events it saw to a file, so the figure is the work per event over the
per-event oracle's (the best order for every event's decisions, by
exhaustive search), as in ``bench/ordering_batches.py``; plus the wall time.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import evflow as ef
from ordering_batches import COST, add_cuts, apply, columns, cuts, oracle

#: the module (its name is shadowed by the function `evflow.distributed.run`)
dist_run = importlib.import_module("evflow.distributed.run")


def analysis(events: int, step: int, seed: int, spec, tally: str) -> ef.Process:
    proc = ef.Process("chunks")
    proc.source = ef.source.synthetic(events, step_size=step, seed=seed)

    def seen(name: str, n: int) -> None:
        # One line per call, from whichever worker process runs it.
        with open(os.path.join(tally, f"{name}.{os.getpid()}"), "a") as f:
            f.write(f"{n}\n")

    add_cuts(proc, spec, seen)
    return proc


def work(tally: str) -> dict[str, int]:
    seen = dict.fromkeys(COST, 0)
    for f in Path(tally).iterdir():
        seen[f.name.split(".")[0]] += sum(int(x) for x in f.read_text().split())
    return seen


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument("--step-size", type=int, default=20_000)
    ap.add_argument("--chunk-size", type=int, default=100_000)
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--runs", type=int, default=2)
    args = ap.parse_args()
    if min(args.events, args.step_size, args.chunk_size, args.processes, args.runs) < 1:
        ap.error("--events, --step-size, --chunk-size, --processes and --runs must be at least 1")
    from distributed import Client, LocalCluster

    seed = 5
    cols = columns(args.events, args.step_size, seed)
    spec = cuts(cols)
    d = {n: apply(op, cols[var], thr) for n, (var, op, thr) in spec.items()}
    best_order, best = oracle(d)
    from evflow.distributed.statistics import ChunkStatistics

    class OrdersOnly(ChunkStatistics):
        """The client hands the merged orders, not the statistics (as
        before they were exchanged)."""

        @property
        def merged(self) -> str | None:
            return None

    print(
        f"{args.events} events, batches of {args.step_size}, chunks of {args.chunk_size}, "
        f"{args.processes} worker processes, load average {os.getloadavg()[0]:.1f}"
    )
    print(f"per-event oracle: {' > '.join(best_order)} ({best * 1e6:.3f} us/event)")
    print("| chunks start from | run | work per event / oracle | wall s | chunks seeded with statistics |")
    print("| --- | ---: | ---: | ---: | ---: |")
    results: dict[str, list[float]] = {"statistics": [], "orders only": []}
    cluster = LocalCluster(
        n_workers=args.processes, threads_per_worker=1, processes=True, dashboard_address=None
    )
    try:
        with Client(cluster) as client:
            for r in range(args.runs):
                for mode in results:
                    dist_run.ChunkStatistics = ChunkStatistics if mode == "statistics" else OrdersOnly  # type: ignore[misc]
                    with tempfile.TemporaryDirectory(prefix="evflow-chunks-") as tally:
                        proc = analysis(args.events, args.step_size, seed, spec, tally)
                        t0 = time.perf_counter()
                        res = proc.run(client=client, chunk_size=args.chunk_size, filter_order="adaptive")
                        wall = time.perf_counter() - t0
                        seen = work(tally)
                    spent = sum(COST[n] * seen[n] for n in COST) / res.events
                    chunks = res.report["distributed"]["chunks"]
                    with_stats = sum(1 for c in chunks if c.get("seeded_statistics"))
                    results[mode].append(spent / best)
                    print(
                        f"| {mode} | {r + 1} | {spent / best:.3f} | {wall:.1f} | {with_stats} of {len(chunks)} |"
                    )
                    sys.stdout.flush()
    finally:
        dist_run.ChunkStatistics = ChunkStatistics  # type: ignore[misc]
        cluster.close()
    for mode, ratios in results.items():
        print(f"{mode}: median {float(np.median(ratios)):.3f}, worst {max(ratios):.3f}")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
