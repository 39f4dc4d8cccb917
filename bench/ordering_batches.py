"""Adaptive ordering from Python, batches of 10^5 events, correlated cuts (issue 14).

    python bench/ordering_batches.py                      # 3 000 000 events, 2 threads, 3 runs
    python bench/ordering_batches.py --events 1000000 --runs 2
    python bench/ordering_batches.py --runs 10 --neighbour   # beside a CPU-burning process
    python bench/ordering_batches.py --paths 3               # three paths sharing the cuts

Six cuts on the synthetic NanoAOD-like source, written in a poor order, with
running times proportional to the events they see (calibrated sleeps, 0.2 to
3 us per event): an anti-correlated pair on MET (each rejects 40%, together
80%), a correlated pair on jet HT (nearly the same cut), and two
independent cuts. The figure is the work per event, every call of every
filter counted with the events it saw (the planner's probes of sampled
batches included), divided by the per-event oracle's: the best order for the
per-event decisions (numpy, every event), by exhaustive search. With
``--neighbour``, a Python busy loop competes for the cores during the runs
(as in ``bench/ordering_heldout.py``), so that the figure under load is
reproducible. With ``--paths N`` the same six filters are on N reorderable
paths (systematic variations sharing their cuts), and the figure is the
work per path.
"""

from __future__ import annotations

import argparse
import itertools
import os
import subprocess
import sys
import time

import awkward as ak
import numpy as np

import evflow as ef

#: name -> seconds per event seen.
COST = {"ht_a": 3e-6, "met_lo": 0.4e-6, "jets": 1.5e-6, "ht_b": 2.5e-6, "met_hi": 0.5e-6, "mu": 0.2e-6}
WRITTEN = ["ht_a", "jets", "ht_b", "met_lo", "mu", "met_hi"]


def columns(events: int, step: int, seed: int) -> dict[str, np.ndarray]:
    src = ef.source.synthetic(events, step_size=step, seed=seed)
    parts = [src.generate(i, s, min(step, events - s)) for i, s in enumerate(range(0, events, step))]
    return {
        "met": np.concatenate([ak.to_numpy(p["MET_pt"]) for p in parts]),
        "ht": np.concatenate([ak.to_numpy(ak.sum(p["Jet_pt"], axis=1)) for p in parts]),
        "nj": np.concatenate([ak.to_numpy(p["nJet"]) for p in parts]),
        "nmu": np.concatenate([ak.to_numpy(p["nMuon"]) for p in parts]),
    }


def cuts(cols: dict[str, np.ndarray]) -> dict[str, tuple[str, str, float]]:
    q = np.quantile
    return {
        "met_lo": ("met", ">", float(q(cols["met"], 0.4))),
        "met_hi": ("met", "<", float(q(cols["met"], 0.6))),
        "ht_a": ("ht", ">", float(q(cols["ht"], 0.5))),
        "ht_b": ("ht", ">", float(q(cols["ht"], 0.45))),
        "jets": ("nj", ">=", 2.0),
        "mu": ("nmu", ">=", 1.0),
    }


def apply(op: str, x: np.ndarray, thr: float) -> np.ndarray:
    return {">": x > thr, "<": x < thr, ">=": x >= thr}[op]


def oracle(d: dict[str, np.ndarray]) -> tuple[tuple[str, ...], float]:
    best: tuple[tuple[str, ...], float] = ((), float("inf"))
    for order in itertools.permutations(d):
        reach = np.ones(len(d[order[0]]), dtype=bool)
        c = 0.0
        for name in order:
            c += COST[name] * reach.mean()
            reach &= d[name]
        if c < best[1]:
            best = (order, c)
    return best


def add_cuts(proc: ef.Process, spec, seen, paths: int = 1) -> None:
    """The six cuts as filters of a reorderable path ``sel`` of ``proc``,
    in the written order (with ``paths`` above 1, also of paths ``sel_1``
    ... as systematic variations sharing their cuts do); every call tells
    ``seen(name, events)`` and then sleeps the cut's cost for its events."""
    column = {"met": "MET_pt", "ht": "Jet_pt", "nj": "nJet", "nmu": "nMuon"}

    def make(name: str):
        var, op, thr = spec[name]

        def cut(ev):
            seen(name, len(ev))
            time.sleep(COST[name] * len(ev))
            x = ev[column[var]]
            if var == "ht":
                x = ak.sum(x, axis=1)
            return apply(op, ak.to_numpy(x), thr)

        cut.__name__ = name
        return proc.filter(consumes=[column[var]], label=name)(cut)

    filters = {name: make(name) for name in WRITTEN}
    for k in range(paths):
        proc.path("sel" if k == 0 else f"sel_{k}", [filters[n] for n in WRITTEN], reorderable=True)


def run(
    events: int, step: int, seed: int, threads: int, spec, policy: str, paths: int = 1
) -> tuple[float, list[str], float]:
    proc = ef.Process("batches")
    proc.source = ef.source.synthetic(events, step_size=step, seed=seed)
    work = dict.fromkeys(COST, 0)

    def seen(name: str, n: int) -> None:
        work[name] += n

    add_cuts(proc, spec, seen, paths)
    t0 = time.perf_counter()
    r = proc.run(threads=threads, filter_order=policy)
    wall = time.perf_counter() - t0
    spent = sum(COST[n] * work[n] for n in COST) / r.events / paths
    return spent, r.cutflow["sel"].order, wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=3_000_000)
    ap.add_argument("--step-size", type=int, default=100_000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--neighbour", action="store_true", help="with a CPU-burning neighbour process")
    ap.add_argument("--no-fixed", action="store_true", help="without the written order's run")
    ap.add_argument(
        "--paths",
        type=int,
        default=1,
        help="reorderable paths sharing the six cuts (work per path over the oracle)",
    )
    args = ap.parse_args()
    seed = 5
    cols = columns(args.events, args.step_size, seed)
    spec = cuts(cols)
    d = {n: apply(op, cols[var], thr) for n, (var, op, thr) in spec.items()}
    best_order, best = oracle(d)
    reach = np.ones(args.events, dtype=bool)
    written = 0.0
    for n in WRITTEN:
        written += COST[n] * reach.mean()
        reach &= d[n]
    burner = None
    if args.neighbour:
        burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        return measure(args, d, best_order, best, written, spec, seed, burner is not None)
    finally:
        if burner is not None:
            burner.kill()


def measure(
    args: argparse.Namespace,
    d: dict[str, np.ndarray],
    best_order: tuple[str, ...],
    best: float,
    written: float,
    spec: dict[str, tuple[str, str, float]],
    seed: int,
    neighbour: bool,
) -> int:
    print(
        f"{args.events} events, batches of {args.step_size}, {args.threads} threads, {args.paths} path(s), "
        f"neighbour: {'a busy loop' if neighbour else 'none'}, load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"per-event oracle: {' > '.join(best_order)} ({best * 1e6:.3f} us/event); written order {written / best:.2f}x"
    )
    print("| policy | run | work per event / oracle | order most batches ran | wall s |")
    print("| --- | ---: | ---: | --- | ---: |")
    ratios = []
    for policy in ("adaptive", "fixed"):
        for k in range(args.runs if policy == "adaptive" else 0 if args.no_fixed else 1):
            spent, order, wall = run(
                args.events, args.step_size, seed, args.threads, spec, policy, args.paths
            )
            print(f"| {policy} | {k + 1} | {spent / best:.3f} | {' > '.join(order)} | {wall:.1f} |")
            sys.stdout.flush()
            if policy == "adaptive":
                ratios.append(spent / best)
    print(f"adaptive: worst {max(ratios):.3f}; load average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
