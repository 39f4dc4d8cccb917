#!/usr/bin/env python3
"""How long `evflow simulate` itself takes, against a baseline build.

    python3 bench/simulate_speed.py --baseline OLD/evflow [--repeat 3]

OLD/evflow is an `evflow` built from another commit (for example the commit
before a change, built in a second worktree). Both binaries run the same
commands, alternately, `--repeat` times each; the table gives the median
wall time of each and checks that both predicted exactly the same figures
(the report minus the simulation's own wall time and the planner's).

The commands: chains of 5 000, 10 000 and 20 000 modules of 1 µs (a
generated TOML file, 100 events, 1 core), where the critical-path bound
simulates one core per module, and the three CMS reconstruction graphs on
256 cores with 256 events in flight (2 000 events), when
../shared/data/cms-reco is present.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "cms-reco"
CMS = {
    "hipileup": DATA / "reco_hipileup_5_2_0_busywait_perfectIO.config",
    "minbias": DATA / "reco_minbias_busywait.config",
    "minbias-sleeping": DATA / "reco_minbias_sleeping_betweenmodules.config",
}
EVFLOW = ROOT / "target" / "release" / "evflow"
OUT = Path(tempfile.mkdtemp(prefix="evflow-sim-speed-"))


def chain(n: int) -> Path:
    """A chain of n producers of 1 µs, each reading the one before, then a filter."""
    path = OUT / f"chain{n}.toml"
    lines = ['[process]\nname = "chain"\nevents = 100\n']
    for i in range(n):
        lines.append(f'[[module]]\nlabel = "m{i}"\ntype = "producer"\ntime = 1e-6')
        if i:
            lines.append(f'consumes = ["m{i - 1}"]')
    lines.append(f'[[module]]\nlabel = "f"\ntype = "filter"\nconsumes = ["m{n - 1}"]')
    lines.append('[[path]]\nname = "p"\nmodules = ["f"]\n')
    path.write_text("\n".join(lines))
    return path


def figures(report: Path) -> str:
    sim = json.loads(report.read_text())
    sim.pop("simulation_wall_s")
    text = json.dumps(sim, sort_keys=True)
    return re.sub(r"planner time [^)]*\)", "planner time", text)


def timed(binary: Path, args: list[str], report: Path) -> float:
    start = time.perf_counter()
    subprocess.run([str(binary), "simulate", *args, "--quiet", "--report", str(report)], check=True)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--baseline", type=Path, required=True, help="an evflow built from another commit")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-build", action="store_true", help="use target/release/evflow as it is")
    args = parser.parse_args()
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "evflow-cli"], cwd=ROOT, check=True)
    cases = [(f"chain of {n} modules", [str(chain(n))], f"chain{n}.toml") for n in (5000, 10000, 20000)]
    if DATA.is_dir():
        options = ["--cores", "256", "--events-in-flight", "256", "--events", "2000"]
        for name, config in CMS.items():
            cases.append((name, [str(config), *options], f"../shared/data/cms-reco/{config.name}"))
    else:
        print(f"CMS graphs skipped: {DATA} not found")
    print("| workload | command | baseline s | this build s | speed-up | same figures |")
    print("| --- | --- | ---: | ---: | ---: | --- |")
    for name, cmd, shown in cases:
        old, new = [], []
        for _ in range(args.repeat):
            old.append(timed(args.baseline, cmd, OUT / "old.json"))
            new.append(timed(EVFLOW, cmd, OUT / "new.json"))
        same = figures(OUT / "old.json") == figures(OUT / "new.json")
        o, n = statistics.median(old), statistics.median(new)
        command = " ".join(["evflow simulate", shown, *cmd[1:]])
        print(
            f"| {name} | `{command}` | {o:.2f} | {n:.2f} | {o / n:.2f}x | {'yes' if same else 'NO'} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
