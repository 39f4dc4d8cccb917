#!/usr/bin/env python3
"""Benchmark of traces of long jobs: the peak resident memory of a traced
CMS reconstruction job (``evflow run ... --trace t.json``), and the
throughput of the same job with and without the trace.

    python3 bench/trace_memory.py --baseline OLD/evflow            # before/after
    python3 bench/trace_memory.py --events 1000 --reps 1            # quicker

Every run is one process; its peak resident set comes from the kernel's
accounting of the child (``wait4``), so it covers the job and the writing
of its trace. The binaries (traced), and this tree's binary untraced, alternate
within each repetition (the machine is shared and noisy); medians are reported.
``--baseline`` names another `evflow` binary (for example one built from
an older commit) to measure side by side with this tree's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT.parent / "shared" / "data" / "cms-reco" / "reco_hipileup_5_2_0_busywait_perfectIO.config"
EVFLOW = ROOT / "target" / "release" / "evflow"
OUT = Path(tempfile.mkdtemp(prefix="evflow-trace-memory-"))


def run(binary: Path, args: argparse.Namespace, trace: bool) -> dict[str, float]:
    """One job: its peak RSS (MB), throughput, trace size and slices."""
    report, trace_file = OUT / "r.json", OUT / "t.json"
    cmd = [
        str(binary),
        "run",
        str(args.config),
        "--quiet",
        "--time-scale",
        str(args.time_scale),
        "--threads",
        str(args.threads),
        "--events",
        str(args.events),
        "--report",
        str(report),
    ]
    if trace:
        cmd += ["--trace", str(trace_file)]
    child = subprocess.Popen(cmd)
    _, status, usage = os.wait4(child.pid, 0)
    if status != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit status {status}")
    r = json.loads(report.read_text())
    result = {
        "rss_mb": usage.ru_maxrss / 1024,
        "throughput": r["throughput_ev_s"],
        "executions": float(r["module_executions"]),
    }
    if trace:
        result["trace_mb"] = trace_file.stat().st_size / 1e6
        trace_file.unlink()
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", type=Path, help="another evflow binary to compare with")
    ap.add_argument("--evflow", type=Path, default=EVFLOW, help="the binary measured")
    ap.add_argument("--config", type=Path, default=CONFIG)
    ap.add_argument("--events", type=int, default=3000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--time-scale", type=float, default=0.001)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()

    binaries = {"after": args.evflow}
    if args.baseline:
        binaries = {"before": args.baseline, **binaries}
    runs: dict[tuple[str, bool], list[dict[str, float]]] = {}
    for rep in range(args.reps):
        for name, binary in binaries.items():
            # The untraced job is the same code before and after: measured
            # for this tree's binary only (the trace's cost).
            for trace in (True, False) if name == "after" else (True,):
                r = run(binary, args, trace)
                runs.setdefault((name, trace), []).append(r)
                print(f"rep {rep} {name:6} trace {'on ' if trace else 'off'}: {r}", flush=True)

    def median(name: str, trace: bool, key: str) -> float:
        return statistics.median(r[key] for r in runs[(name, trace)])

    print(
        f"\n{args.config.name}, {args.events} events, {args.threads} threads, "
        f"time scale {args.time_scale}, median of {args.reps}:"
    )
    print(
        "| binary | peak RSS traced (MB) | peak RSS untraced (MB) | ev/s traced | ev/s untraced | traced/untraced |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for name in binaries:
        on = median(name, True, "throughput")
        if (name, False) in runs:
            off = median(name, False, "throughput")
            untraced = f"{median(name, False, 'rss_mb'):.0f} | {on:.1f} | {off:.1f} | {on / off:.3f}"
        else:
            untraced = f"– | {on:.1f} | – | –"
        print(f"| {name} | {median(name, True, 'rss_mb'):.0f} | {untraced} |")
    if args.baseline:
        ratio = median("after", True, "rss_mb") / median("before", True, "rss_mb")
        print(f"peak RSS traced, after/before: {ratio:.2f}")
    print(
        f"module executions: {median('after', True, 'executions'):.0f}, trace file {median('after', True, 'trace_mb'):.0f} MB"
    )


if __name__ == "__main__":
    main()
