"""Adaptive ordering on held-out-style pipelines, on a loaded machine (issue 14).

    python bench/ordering_heldout.py                 # 4 pipelines x 5 runs, 40 000 events, 2 threads
    python bench/ordering_heldout.py --runs 2 --events 20000
    python bench/ordering_heldout.py --data-seed 7  # other draws of the same pipelines
    python bench/ordering_heldout.py --pipelines shared  # the same events as in the full run
    python bench/ordering_heldout.py --baseline OLD/evflow  # against another build, runs alternated

Four reorderable pipelines of 10 filters written in the native TOML (a
``table`` source of generated event variables, ``cut`` filters with
calibrated busy work), each with a poor written order, costs spanning 200x
(5 us to 1 ms), strongly correlated pairs and precedence constraints; in
``shared``, on-demand producers that several filters consume (their cost
is charged, in the oracle too, to the first filter that needs them). Each
is run ``--runs`` times with ``evflow run --filter-order adaptive`` while a
CPU-burning neighbour process (a Python busy loop) competes for the cores.
Each pipeline's events are drawn from a seed given by its place in
``PIPELINES`` and ``--data-seed``: ``--pipelines`` runs a subset on the
same events as the full run.

Per run: the expected filter cost per event as the issue defines it, the
configured cost of each filter (and producer) times the events it
actually ran on (the report's calls: warm-up, sampling and every order
included) over the events, divided by the exact oracle's (the best order respecting the
constraints for the same decisions, by dynamic programming over all 2^10
subsets); and the planner's own time (from its report) over the run's CPU
time. Files go to a temporary directory.

With ``--baseline``, every run of this build is preceded by one of the
given binary (built from another commit) on the same configuration, so
that both see the same load; each pipeline then has a row per build.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
EVFLOW = ROOT / "target" / "release" / "evflow"

#: name, column, op, pass rate, cost (s). Decisions are cuts on generated
#: columns; `pair` columns are strongly correlated with their partner.
PIPELINES: dict[str, list[tuple[str, str, str, float, float]]] = {
    "corr": [
        ("heavyLoose", "a", ">", 0.95, 1e-3),
        ("midA", "b", ">", 0.6, 40e-6),
        ("midA2", "b2", ">", 0.62, 30e-6),  # b2 ~ b: the twin of midA
        ("fastTight", "c", ">", 0.3, 5e-6),
        ("fastTwin", "c2", ">", 0.32, 6e-6),  # c2 ~ c
        ("loose1", "d", ">", 0.9, 10e-6),
        ("loose2", "e", ">", 0.85, 20e-6),
        ("mid3", "f", ">", 0.5, 100e-6),
        ("heavyTight", "g", ">", 0.4, 500e-6),
        ("cheap", "h", ">", 0.7, 8e-6),
    ],
    "constrained": [
        ("reco", "a", ">", 0.98, 600e-6),
        ("afterReco", "b", ">", 0.5, 10e-6),
        ("iso", "c", ">", 0.7, 15e-6),
        ("isoTwin", "c2", ">", 0.72, 25e-6),
        ("met", "d", ">", 0.6, 5e-6),
        ("ht", "e", ">", 0.45, 50e-6),
        ("nJet", "f", ">", 0.8, 5e-6),
        ("btag", "g", ">", 0.35, 200e-6),
        ("mass", "h", ">", 0.9, 1e-3),
        ("dphi", "b2", ">", 0.52, 12e-6),  # b2 ~ b
    ],
    "spread": [
        ("t1ms", "a", ">", 0.5, 1e-3),
        ("t500", "b", ">", 0.7, 500e-6),
        ("t200", "c", ">", 0.3, 200e-6),
        ("t100", "c2", ">", 0.33, 100e-6),  # c2 ~ c
        ("t50", "d", ">", 0.9, 50e-6),
        ("t20", "e", ">", 0.6, 20e-6),
        ("t10", "f", ">", 0.75, 10e-6),
        ("t8", "g", ">", 0.95, 8e-6),
        ("t6", "b2", ">", 0.72, 6e-6),  # b2 ~ b
        ("t5", "h", ">", 0.4, 5e-6),
    ],
    "shared": [
        ("jetPt", "a", ">", 0.5, 6e-6),  # the jet cuts read `jets`, a costly producer they share
        ("jetEta", "b", ">", 0.6, 5e-6),
        ("bTag", "b2", ">", 0.55, 30e-6),  # b2 ~ b
        ("lepton", "c", ">", 0.3, 10e-6),  # lepton and iso share `muons`
        ("iso", "c2", ">", 0.35, 8e-6),  # c2 ~ c
        ("met", "d", ">", 0.5, 5e-6),
        ("ht", "e", ">", 0.45, 40e-6),
        ("trigger", "f", ">", 0.8, 5e-6),
        ("vertex", "g", ">", 0.9, 15e-6),
        ("mass", "h", ">", 0.4, 300e-6),
    ],
}

#: Producers run on demand, each shared by several filters of a pipeline:
#: label, cost (s), the filters that consume its product.
PRODUCERS: dict[str, list[tuple[str, float, list[str]]]] = {
    "shared": [("jets", 200e-6, ["jetPt", "jetEta", "bTag"]), ("muons", 60e-6, ["lepton", "iso"])],
}

#: (later, earlier) precedence constraints per pipeline.
EDGES: dict[str, list[tuple[str, str]]] = {
    "corr": [("heavyTight", "midA"), ("loose2", "loose1")],
    "constrained": [("afterReco", "reco"), ("mass", "btag"), ("isoTwin", "iso")],
    "spread": [("t5", "t500"), ("t6", "t20")],
    "shared": [("bTag", "jetPt"), ("mass", "lepton")],
}


def columns(events: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    cols = {k: rng.random(events) for k in "abcdefgh"}
    # Twins: the same variable up to a small smearing.
    cols["b2"] = np.clip(cols["b"] + rng.normal(0, 0.05, events), 0, 1)
    cols["c2"] = np.clip(cols["c"] + rng.normal(0, 0.05, events), 0, 1)
    return cols


def decisions(cols: dict[str, np.ndarray], spec) -> tuple[np.ndarray, list[float]]:
    thresholds = [float(np.quantile(cols[col], 1 - rate)) for _, col, _, rate, _ in spec]
    d = np.stack([cols[col] > thr for (_, col, _, _, _), thr in zip(spec, thresholds, strict=True)], axis=1)
    return d, thresholds


def charge(j: int, ran: int, c: np.ndarray, shared: list[tuple[float, int]]) -> float:
    """Filter ``j``'s cost after the filters of the set ``ran``: its own and
    that of each shared producer it needs that none of them needed."""
    return float(c[j]) + sum(cost for cost, needed_by in shared if needed_by >> j & 1 and not needed_by & ran)


def oracle(d: np.ndarray, c: np.ndarray, preds: list[int], shared: list[tuple[float, int]]) -> float:
    """Least expected cost per event over the orders respecting `preds`
    (shared producers charged at first need)."""
    n = d.shape[1]
    masks = (d.astype(np.int64) << np.arange(n)).sum(axis=1)
    s = np.bincount(masks, minlength=1 << n).astype(np.float64)
    for j in range(n):  # superset sums: s[A] = events passing all of A
        v = s.reshape(-1, 2, 1 << j)
        v[:, 0, :] += v[:, 1, :]
    s /= len(d)
    f = np.full(1 << n, np.inf)
    f[0] = 0.0
    for a in range(1 << n):  # subsets in increasing order: predecessors first
        if not np.isfinite(f[a]):
            continue
        for j in range(n):
            if not a >> j & 1 and preds[j] & ~a == 0:
                b = a | 1 << j
                f[b] = min(f[b], f[a] + charge(j, a, c, shared) * s[a])
    return float(f[-1])


def write(tmp: Path, name: str, spec, thresholds, cols, events: int, threads: int) -> Path:
    table = tmp / f"{name}.csv"
    keys = sorted(cols)
    np.savetxt(
        table, np.stack([cols[k] for k in keys], axis=1), delimiter=",", header=",".join(keys), comments=""
    )
    lines = [
        "[process]",
        f'name = "{name}"',
        f"events = {events}",
        f"threads = {threads}",
        "events_in_flight = 4",
        "",
        "[source]",
        'type = "table"',
        f'file = "{table}"',
        "",
    ]
    producers = PRODUCERS.get(name, [])
    for label, cost, _ in producers:
        lines += ["[[module]]", f'label = "{label}"', 'type = "producer"', f"time = {cost!r}", ""]
    for (label, col, op, _, cost), thr in zip(spec, thresholds, strict=True):
        lines += ["[[module]]", f'label = "{label}"', 'type = "filter"', f"time = {cost!r}"]
        needs = [p for p, _, users in producers if label in users]
        if needs:
            lines += ["consumes = [" + ", ".join(f'"{p}"' for p in needs) + "]"]
        lines += [f'cut = "{col} {op} {thr!r}"', ""]
    lines += [
        "[[path]]",
        'name = "sel"',
        "modules = [" + ", ".join(f'"{s[0]}"' for s in spec) + "]",
        "reorderable = true",
        "after = [" + ", ".join(f'["{a}", "{b}"]' for a, b in EDGES[name]) + "]",
    ]
    cfg = tmp / f"{name}.toml"
    cfg.write_text("\n".join(lines) + "\n")
    return cfg


def planner_share(report: dict) -> float:
    final = next(
        (c["reason"] for c in report["orderings"] if c["reason"].startswith("in use at the end")), ""
    )
    m = re.search(r"planner time ([0-9.]+) ms", final)
    return float(m.group(1)) * 1e-3 / max(report["cpu_s"], 1e-9) if m else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=40_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pipelines", nargs="+", default=list(PIPELINES), choices=list(PIPELINES))
    ap.add_argument(
        "--data-seed", type=int, default=0, help="offset of the generated events' seeds (other draws)"
    )
    ap.add_argument("--no-neighbour", action="store_true", help="without the CPU-burning neighbour")
    ap.add_argument(
        "--baseline", type=Path, help="an evflow built from another commit, run alternately with this one"
    )
    ap.add_argument("--no-build", action="store_true", help="use target/release/evflow as it is")
    args = ap.parse_args()
    if args.runs < 1 or args.events < 1 or args.threads < 1:
        ap.error("--runs, --events and --threads must be at least 1")
    if args.baseline is not None and not args.baseline.is_file():
        ap.error(
            f"--baseline {args.baseline}: no such file (give an evflow binary built from another commit)"
        )
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "evflow-cli"], cwd=ROOT, check=True)
    tmp = Path(tempfile.mkdtemp(prefix="evflow-heldout-"))
    burner = None
    if not args.no_neighbour:
        burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    print(
        f"{args.events} events, {args.threads} threads, data seed offset {args.data_seed}, "
        f"neighbour: {'none' if burner is None else 'a busy loop'}"
    )
    builds = [("this build", EVFLOW)]
    if args.baseline is not None:
        builds.insert(0, ("baseline", args.baseline.resolve()))
    print(
        "| pipeline | build | written / oracle | run: expected cost / oracle | worst | planner share of CPU (max) |"
    )
    print("| --- | --- | ---: | --- | ---: | ---: |")
    try:
        for name in args.pipelines:
            spec = PIPELINES[name]
            # Seeded by the pipeline's place in PIPELINES, not in --pipelines:
            # a subset draws the same events as the full run.
            cols = columns(args.events, seed=100 + list(PIPELINES).index(name) + args.data_seed)
            d, thresholds = decisions(cols, spec)
            c = np.array([s[4] for s in spec])
            labels = [s[0] for s in spec]
            preds = [0] * len(spec)
            for later, earlier in EDGES[name]:
                preds[labels.index(later)] |= 1 << labels.index(earlier)
            producers = PRODUCERS.get(name, [])
            shared = [(cost, sum(1 << labels.index(u) for u in users)) for _, cost, users in producers]
            best = oracle(d, c, preds, shared)
            reach = np.ones(len(d), dtype=bool)
            written = 0.0
            for j in range(len(spec)):
                written += charge(j, (1 << j) - 1, c, shared) * reach.mean()
                reach &= d[:, j]
            cfg = write(tmp, name, spec, thresholds, cols, args.events, args.threads)
            ratios: dict[str, list[float]] = {b: [] for b, _ in builds}
            shares: dict[str, list[float]] = {b: [] for b, _ in builds}
            for r in range(args.runs):
                for build, binary in builds:
                    out = tmp / f"{name}-{r}.json"
                    subprocess.run(
                        [
                            str(binary),
                            "run",
                            str(cfg),
                            "--quiet",
                            "--filter-order",
                            "adaptive",
                            "--report",
                            str(out),
                        ],
                        check=True,
                    )
                    report = json.loads(out.read_text())
                    calls = {m["label"]: m["calls"] for m in report["modules"]}
                    spent = sum(calls.get(label, 0) * cost for label, cost in zip(labels, c, strict=True))
                    spent += sum(calls.get(label, 0) * cost for label, cost, _ in producers)
                    ratios[build].append(spent / report["events"] / best)
                    shares[build].append(planner_share(report))
            for build, _ in builds:
                runs = ", ".join(f"{x:.3f}" for x in ratios[build])
                print(
                    f"| {name} | {build} | {written / best:.2f} | {runs} | {max(ratios[build]):.3f} "
                    f"| {100 * max(shares[build]):.2f}% |"
                )
            sys.stdout.flush()
    finally:
        if burner is not None:
            burner.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
