#!/usr/bin/env python3
"""Benchmarks of issue "many cores": framework overhead per thread count,
the cost of luminosity-block boundaries, a scaling table measured next
to the simulator's prediction, and one process's throughput against the
capacity of as many sequential processes.

    python3 bench/manycore.py                        # all four
    python3 bench/manycore.py --only overhead --baseline OLD/evflow
    python3 bench/manycore.py --only lumis,scaling --reps 3
    python3 bench/manycore.py --only capacity --threads 16 --baseline OLD/evflow   # sleeping modules
    python3 bench/manycore.py --only capacity --threads 16 --work busy            # on 16 real cores
    python3 bench/manycore.py --only ranges --threads 8 --work sleep              # a parallel-for within a call
    python3 bench/manycore.py --only latency --threads 2 --baseline OLD/evflow     # events served in read order

Uses the CMS reconstruction workloads in ../shared/data/cms-reco/. Every
ratio compares runs made in this one invocation, interleaved; the median of
the repetitions is reported (the machine is shared and noisy).
``--baseline`` names another `evflow` binary (for example one built from an
older commit) to measure before/after side by side.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "cms-reco"
WORKLOADS = {
    "hipileup": DATA / "reco_hipileup_5_2_0_busywait_perfectIO.config",
    "minbias": DATA / "reco_minbias_busywait.config",
    "minbias-sleeping": DATA / "reco_minbias_sleeping_betweenmodules.config",
}
EVFLOW = ROOT / "target" / "release" / "evflow"
OUT = Path(tempfile.mkdtemp(prefix="evflow-manycore-"))
_count = 0


def run(binary: Path, config: Path, *args: str) -> dict:
    global _count
    _count += 1
    report = OUT / f"r{_count}.json"
    cmd = [str(binary), "run", str(config), "--quiet", "--report", str(report), *args]
    subprocess.run(cmd, check=True)
    return json.loads(report.read_text())


def simulate(config: Path, *args: str) -> dict:
    global _count
    _count += 1
    report = OUT / f"s{_count}.json"
    cmd = [str(EVFLOW), "simulate", str(config), "--quiet", "--report", str(report), *args]
    subprocess.run(cmd, check=True)
    return json.loads(report.read_text())


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def bench_overhead(reps: int, baseline: Path | None) -> None:
    """ns per module execution at --time-scale 0, 1 and 2 threads."""
    config = WORKLOADS["hipileup"]
    binaries = [("current", EVFLOW)] + ([("baseline", baseline)] if baseline else [])
    print(f"framework alone (hipileup, --time-scale 0, {EVENTS} events, events in flight = 2 x threads)")
    base_rate: dict[str, float] = {}
    for threads in THREADS_OVERHEAD:
        ns: dict[str, list[float]] = {name: [] for name, _ in binaries}
        rate: dict[str, list[float]] = {name: [] for name, _ in binaries}
        for _ in range(reps):
            for name, binary in binaries:
                args = ["--time-scale", "0", "--threads", str(threads)]
                args += ["--events-in-flight", str(2 * threads), "--events", str(EVENTS)]
                r = run(binary, config, *args)
                ns[name].append(r["wall_s"] * 1e9 / r["module_executions"])
                rate[name].append(r["throughput_ev_s"])
        for name, _ in binaries:
            base_rate.setdefault(name, median(rate[name]))
            print(
                f"  {threads} thread(s) {name:>8}: {median(ns[name]):7.1f} ns/module, {median(rate[name]):8.1f} events/s"
                f"  ({median(rate[name]) / base_rate[name]:.2f}x of {THREADS_OVERHEAD[0]} thread)"
            )
        if baseline:
            print(
                f"  {threads} thread(s) current/baseline ns per module: {median(ns['current']) / median(ns['baseline']):.3f}"
            )


def bench_lumis(reps: int, baseline: Path | None) -> None:
    """Throughput with a luminosity-block boundary every 2K events (K in
    flight) over the same job without boundaries."""
    config = WORKLOADS["hipileup"]
    k = 4
    common = ["--time-scale", "0.001", "--work", "sleep", "--threads", "2", "--events-in-flight", str(k)]
    common += ["--events", "400"]
    cases = [("no boundaries", [])]
    for n in (1, 2, 4):
        cases.append(
            (
                f"every {2 * k} events, {n} block(s) in flight",
                ["--events-per-lumi", str(2 * k), "--concurrent-lumis", str(n)],
            )
        )
    rates: dict[str, list[float]] = {name: [] for name, _ in cases}
    for _ in range(reps):
        for name, extra in cases:
            rates[name].append(run(EVFLOW, config, *common, *extra)["throughput_ev_s"])
    print(f"luminosity-block boundaries (hipileup sleep x0.001, 2 threads, {k} in flight, 400 events)")
    base = median(rates["no boundaries"])
    for name, _ in cases:
        print(
            f"  {name:<40} {median(rates[name]):8.2f} events/s  {median(rates[name]) / base:.3f} of no boundaries"
        )


def bench_scaling(reps: int, baseline: Path | None) -> None:
    """Measured throughput next to the simulator's prediction, 1..16 threads.

    Modules sleep (``--work sleep``): on a small, shared machine sleeping
    threads emulate cores, so rows above the machine's core count measure the
    scheduling, not a real many-core CPU (see docs/performance.md)."""
    threads = THREADS_SCALING
    print(f"scaling (modules {WORK} their configured time x0.001; events in flight = 2 x threads)")
    print("  predicted A: configured times; B: times measured by a sequential run (--times-from)")
    for name, config in WORKLOADS.items():
        n = 100 if name == "hipileup" else 400
        common = ["--time-scale", "0.001", "--work", WORK]

        def events(t: int, n: int = n) -> list[str]:
            # More threads get more events, so that filling and draining the
            # events in flight stay a small part of each run.
            return ["--events", str(n * max(1, t // 2))]

        measured: dict[int, list[float]] = {t: [] for t in threads}
        run(EVFLOW, config, *common, *events(1), "--executor", "sequential")
        seq_report = OUT / f"r{_count}.json"
        for _ in range(reps):
            for t in threads:
                args = [*events(t), "--threads", str(t), "--events-in-flight", str(2 * t)]
                measured[t].append(run(EVFLOW, config, *common, *args)["throughput_ev_s"])
        print(f"  {name} ({n} events x max(1, threads / 2)):")
        for t in threads:
            k = str(2 * t)
            sim = [*events(t), "--cores", str(t), "--events-in-flight", k]
            a = simulate(config, *common, *sim)["report"]["throughput_ev_s"]
            b = simulate(config, *common, *sim, "--times-from", str(seq_report))["report"]["throughput_ev_s"]
            m = median(measured[t])
            print(
                f"    {t:>2} threads: measured {m:8.2f}   predicted A {a:8.2f} ({m / a - 1:+.1%})"
                f"   B {b:8.2f} ({m / b - 1:+.1%}) events/s"
            )


def bench_capacity(reps: int, baseline: Path | None) -> None:
    """One process of T threads (T events in flight, then 2T) against T
    sequential processes run at once (their summed rates: the machine's
    capacity for the job), per workload; modules work their configured
    time x0.001 (``--work``: with ``sleep``, T sleeping threads emulate T
    cores on a smaller machine)."""
    t = THREADS_SCALING[-1]
    binaries = [("this build", EVFLOW)] + ([("baseline", baseline)] if baseline else [])
    print(f"capacity ({t} threads against {t} sequential processes; modules {WORK} x0.001)")
    for name in ("hipileup", "minbias"):
        config = WORKLOADS[name]
        n = 150 if name == "hipileup" else 600
        common = ["--time-scale", "0.001", "--work", WORK]
        capacity: list[float] = []
        rates: dict[tuple[str, int], list[float]] = {}
        for _ in range(reps):
            procs = []
            for i in range(t):
                report = OUT / f"cap-{name}-{i}.json"
                cmd = [str(EVFLOW), "run", str(config), "--quiet", "--report", str(report), *common]
                cmd += ["--executor", "sequential", "--events", str(n // 4 + 10)]
                procs.append((subprocess.Popen(cmd), report))
            total = 0.0
            for proc, report in procs:
                if proc.wait() != 0:
                    raise SystemExit(f"a sequential process of {name} failed")
                total += json.loads(report.read_text())["throughput_ev_s"]
            capacity.append(total)
            for label, binary in binaries:
                for k in (t, 2 * t):
                    args = ["--threads", str(t), "--events-in-flight", str(k), "--events", str(n * t // 4)]
                    rates.setdefault((label, k), []).append(
                        run(binary, config, *common, *args)["throughput_ev_s"]
                    )
        cap = median(capacity)
        print(f"  {name}: {t} sequential processes {cap:9.1f} events/s")
        for (label, k), xs in rates.items():
            print(
                f"    {label:<11} {k:>3} in flight: {median(xs):9.1f} events/s = {median(xs) / cap:.3f} of capacity"
            )


RANGES_CONFIG = """
[process]
name = "ranges"
events = {events}

[[module]]
label = "reco"
type = "producer"
time = 0.002

[[module]]
label = "output"
type = "filter"
time = 0.02
concurrency = "serial"
consumes = ["reco"]
{ranges}
{busy}
[[path]]
name = "o"
modules = ["output"]
"""

# A shared module beside the output, 25 ms per event and thread: every
# thread always has work, no core is idle to help the ranges.
RANGES_BUSY = """
[[module]]
label = "calo"
type = "producer"
time = {calo_s}

[[module]]
label = "caloDqm"
type = "analyzer"
consumes = ["calo"]

[[end_path]]
name = "dqm"
modules = ["caloDqm"]
"""


def bench_ranges(reps: int, baseline: Path | None) -> None:
    """A serial 20 ms output filter behind a 2 ms producer, as a plain
    filter and as a parallel-for of 10 ranges (``ranges = 10``: its thread
    and idle cores take the ranges), measured and simulated; then the same
    beside a shared producer of 25 ms per thread that leaves no core idle
    (``busy``),
    where the ranges cannot go faster than the plain filter."""
    t = THREADS_SCALING[-1]
    events = 100
    configs = {}
    for name, ranges, busy in (
        ("plain", "", ""),
        ("10 ranges", "ranges = 10", ""),
        ("busy plain", "", RANGES_BUSY.format(calo_s=0.025 * t)),
        ("busy 10 ranges", "ranges = 10", RANGES_BUSY.format(calo_s=0.025 * t)),
    ):
        path = OUT / f"ranges-{name.replace(' ', '-')}.toml"
        path.write_text(RANGES_CONFIG.format(events=events, ranges=ranges, busy=busy))
        configs[name] = path
    common = ["--work", WORK, "--threads", str(t), "--events-in-flight", str(t)]
    binaries = {"current": EVFLOW, **({"baseline": baseline} if baseline else {})}
    rates: dict[tuple[str, str], list[float]] = {(b, n): [] for b in binaries for n in configs}
    for _ in range(reps):
        for name, path in configs.items():
            for b, binary in binaries.items():
                rates[b, name].append(run(binary, path, *common)["throughput_ev_s"])
    print(
        f"parallel-for within a call (serial 20 ms filter, {t} threads and in flight, {WORK}, {events} events)"
    )
    for name, path in configs.items():
        sim = simulate(path, "--cores", str(t), "--events-in-flight", str(t))["report"]["throughput_ev_s"]
        measured = ", ".join(f"{b} {median(rates[b, name]):7.1f}" for b in binaries)
        print(f"  {name:<14} measured ({measured}) events/s, simulated ({t} cores) {sim:7.1f}")
    for b in binaries:
        ratios = [
            median(rates[b, f"{prefix}10 ranges"]) / median(rates[b, f"{prefix}plain"])
            for prefix in ("", "busy ")
        ]
        print(f"  {b}: 10 ranges / plain: {ratios[0]:.2f}x; with no idle core: {ratios[1]:.2f}x")


LATENCY_CONFIG = """
[process]
events = {events}
work = "{work}"
[[module]]
label = "a"
type = "producer"
time = 0.001
[[module]]
label = "b"
type = "producer"
time = 0.001
consumes = ["a"]
[[module]]
label = "out"
type = "output"
consumes = ["b"]
[[end_path]]
name = "e"
modules = ["out"]
"""


def event_latencies(trace: dict) -> list[float]:
    """Per event of a trace: from its read (the source's slice) to its last
    module's end, in ms."""
    spans: dict[tuple[int, int, int], list[float]] = {}
    for e in trace["traceEvents"]:
        args = e.get("args") or {}
        if e.get("ph") != "X" or e.get("cat") not in ("source", "module") or "event" not in args:
            continue
        key = (args["run"], args["lumi"], args["event"])
        start, end = e["ts"], e["ts"] + e.get("dur", 0.0)
        span = spans.setdefault(key, [start, end])
        span[0], span[1] = min(span[0], start), max(span[1], end)
    return sorted((end - start) / 1e3 for start, end in spans.values())


def bench_latency(reps: int, baseline: Path | None) -> None:
    """How long an event stays in flight, from its read to the end of its
    last module, for a chain of two 1 ms producers and an output on the last
    thread count with 4 x as many events in flight: an engine that serves
    events in read order keeps every event near the chain's 2 ms; one that
    goes on with new events leaves older ones waiting to the end."""
    t = THREADS_SCALING[-1]
    k = 4 * t
    events = 300
    config = OUT / "latency.toml"
    config.write_text(LATENCY_CONFIG.format(events=events, work=WORK))
    binaries = {"current": EVFLOW, **({"baseline": baseline} if baseline else {})}
    worst: dict[str, list[float]] = {name: [] for name in binaries}
    p90: dict[str, list[float]] = {name: [] for name in binaries}
    rate: dict[str, list[float]] = {name: [] for name in binaries}
    for _ in range(reps):
        for name, binary in binaries.items():
            trace = OUT / f"latency-{name}.json"
            report = run(
                binary, config, "--threads", str(t), "--events-in-flight", str(k), "--trace", str(trace)
            )
            lat = event_latencies(json.loads(trace.read_text()))
            assert len(lat) == events, f"{len(lat)} events in the trace"
            worst[name].append(lat[-1])
            p90[name].append(lat[int(0.9 * len(lat))])
            rate[name].append(report["throughput_ev_s"])
    print(
        f"event latency (chain of 2 x 1 ms, {WORK}, {t} threads, {k} in flight, {events} events; median of {reps})"
    )
    for name in binaries:
        print(
            f"  {name:>8}: p90 {median(p90[name]):7.2f} ms, worst {median(worst[name]):7.2f} ms, "
            f"{median(rate[name]):8.1f} events/s"
        )


THREADS_OVERHEAD: tuple[int, ...] = (1, 2)
THREADS_SCALING: tuple[int, ...] = (1, 2, 4, 8, 16)
EVENTS = 4000
WORK = "sleep"

BENCHES = {
    "overhead": bench_overhead,
    "lumis": bench_lumis,
    "scaling": bench_scaling,
    "capacity": bench_capacity,
    "ranges": bench_ranges,
    "latency": bench_latency,
}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", default="overhead,lumis,scaling")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument(
        "--baseline",
        type=Path,
        help="another evflow binary to compare with (overhead, capacity, ranges, latency)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        nargs="+",
        help="thread counts (overhead: 1 2; scaling: 1..16; capacity: the last)",
    )
    parser.add_argument("--events", type=int, default=4000, help="events of the overhead runs")
    parser.add_argument(
        "--work",
        choices=["sleep", "busy"],
        default="sleep",
        help="scaling, capacity: how modules spend their time",
    )
    parser.add_argument("--no-build", action="store_true", help="use target/release/evflow as it is")
    args = parser.parse_args()
    global THREADS_OVERHEAD, THREADS_SCALING, EVENTS, WORK
    if args.threads:
        THREADS_OVERHEAD = THREADS_SCALING = tuple(args.threads)
    EVENTS, WORK = args.events, args.work
    if not DATA.is_dir():
        print(f"the CMS workloads are not in {DATA}: nothing to measure")
        return 0
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "evflow-cli"], cwd=ROOT, check=True)
    for name in args.only.split(","):
        BENCHES[name](args.reps, args.baseline)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
