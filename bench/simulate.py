#!/usr/bin/env python3
"""Simulation against measurement, and the scaling figures.

    python3 bench/simulate.py validate   # prediction vs measured throughput, one row per command
    python3 bench/simulate.py figures    # docs/figures/{inflight,event_profile,cores}.png
    python3 bench/simulate.py all

Every row runs `evflow run` and `evflow simulate` with the same options, side
by side, and prints both commands. Figures need matplotlib
(`pip install '.[bench]'`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "cms-reco"
CONFIGS = {
    "hipileup": DATA / "reco_hipileup_5_2_0_busywait_perfectIO.config",
    "minbias": DATA / "reco_minbias_busywait.config",
    "minbias-sleeping": DATA / "reco_minbias_sleeping_betweenmodules.config",
}
EVFLOW = ROOT / "target" / "release" / "evflow"
FIGURES = ROOT / "docs" / "figures"
OUT = Path(tempfile.mkdtemp(prefix="evflow-sim-"))


def rate(report: dict) -> float:
    """Steady-state events/s (without the pipeline's ramp-up and drain) when
    the run was long enough to have one, else the whole run's."""
    return report.get("steady_throughput_ev_s") or report["throughput_ev_s"]


def build() -> None:
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "evflow-cli"], cwd=ROOT, check=True)


def rel(path: Path) -> str:
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return "../" + str(path.relative_to(ROOT.parent))


def evflow(verb: str, config: Path, options: list[str], tag: str) -> tuple[dict, str]:
    report = OUT / f"{tag}-{verb}.json"
    args = [str(EVFLOW), verb, str(config), *options, "--quiet", "--report", str(report)]
    subprocess.run(args, check=True)
    command = " ".join(["evflow", verb, rel(config), *options])
    return json.loads(report.read_text()), command


def measured_and_predicted(name: str, work: str, threads: int, k: int, scale: float, events: int) -> dict:
    config = CONFIGS[name]
    common = ["--events", str(events), "--time-scale", str(scale), "--events-in-flight", str(k)]
    real, run_cmd = evflow(
        "run", config, [*common, "--threads", str(threads), "--work", work], f"{name}-{work}-{threads}-{k}"
    )
    sim, sim_cmd = evflow(
        "simulate", config, [*common, "--cores", str(threads)], f"{name}-{work}-{threads}-{k}"
    )
    measured = real["throughput_ev_s"]
    predicted = sim["report"]["throughput_ev_s"]
    return {
        "config": name,
        "work": work,
        "threads": threads,
        "k": k,
        "measured": measured,
        "predicted": predicted,
        "error": predicted / measured - 1.0,
        "run": run_cmd,
        "simulate": sim_cmd,
        "bound": sim["bounds"]["bound_ev_s"],
    }


def validate(quick: bool) -> list[dict]:
    rows = []
    busy_events = {"hipileup": 100, "minbias": 400, "minbias-sleeping": 400}
    for name in CONFIGS:
        n = busy_events[name] // (3 if quick else 1)
        rows.append(measured_and_predicted(name, "busy", 1, 1, 0.001, n))
        rows.append(measured_and_predicted(name, "busy", 2, 4, 0.001, n))
    for name in CONFIGS:
        for threads in (1, 4, 16, 64, 256):
            per_event = {"hipileup": 2.4, "minbias": 0.45, "minbias-sleeping": 0.45}[name]
            # Enough events to reach the steady state, a few seconds per row.
            events = max(4, min(3 * threads, int(12 * threads / per_event)))
            if quick:
                events = max(3, events // 3)
            rows.append(measured_and_predicted(name, "sleep", threads, threads, 0.1, events))
    print("| configuration | work | threads | events in flight | measured ev/s | predicted ev/s | error |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(
            f"| {r['config']} | {r['work']} | {r['threads']} | {r['k']} | {r['measured']:.2f} | "
            f"{r['predicted']:.2f} | {100 * r['error']:+.1f}% |"
        )
    print("\ncommands:")
    for r in rows:
        print(f"  {r['run']}\n  {r['simulate']}")
    (OUT / "validation.json").write_text(json.dumps(rows, indent=1))
    return rows


def figures(quick: bool) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as missing:
        raise SystemExit("figures need matplotlib: pip install .") from missing
    FIGURES.mkdir(parents=True, exist_ok=True)
    hip = CONFIGS["hipileup"]

    # Figure 1: throughput against events in flight, measured (sleep) and simulated.
    ks = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000]
    measured, predicted = [], []
    for k in ks:
        events = max(6, 3 * k) // (3 if quick else 1)
        common = ["--events", str(events), "--time-scale", "0.1", "--events-in-flight", str(k)]
        real, _ = evflow("run", hip, [*common, "--threads", str(k), "--work", "sleep"], f"fig1-{k}")
        sim, _ = evflow("simulate", hip, [*common, "--cores", str(k)], f"fig1-{k}")
        measured.append(rate(real))
        predicted.append(rate(sim["report"]))
        print(
            f"events in flight {k}: measured {measured[-1]:.2f} ev/s, simulated {predicted[-1]:.2f} ev/s",
            flush=True,
        )
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    ax1.loglog(ks, measured, "o-", label="measured (sleeping modules, threads = events in flight)")
    ax1.loglog(ks, predicted, "s--", label="evflow simulate")
    ax1.set_xlabel("events in flight")
    ax1.set_ylabel("throughput [events/s]")
    ax1.legend(fontsize=8)
    ax1.grid(True, which="both", alpha=0.3)
    ax2.semilogx(ks, [m / k for m, k in zip(measured, ks, strict=False)], "o-", label="measured")
    ax2.semilogx(ks, [p / k for p, k in zip(predicted, ks, strict=False)], "s--", label="simulated")
    ax2.set_xlabel("events in flight")
    ax2.set_ylabel("steady throughput per event in flight [events/s]")
    ax2.set_ylim(bottom=0)
    ax2.legend(fontsize=8)
    ax2.grid(True, which="both", alpha=0.3)
    fig.suptitle("CMS hipileup reconstruction (491 modules), module times x 0.1")
    fig.tight_layout()
    fig.savefig(FIGURES / "inflight.png", dpi=110)
    plt.close(fig)

    # Figure 2: modules running at once during one event, from a trace.
    trace = OUT / "event-trace.json"
    subprocess.run(
        [
            str(EVFLOW),
            "run",
            str(hip),
            "--events",
            "3",
            "--time-scale",
            "0.1",
            "--work",
            "sleep",
            "--threads",
            "64",
            "--events-in-flight",
            "1",
            "--quiet",
            "--trace",
            str(trace),
        ],
        check=True,
    )
    csv = OUT / "profile.csv"
    subprocess.run(
        [str(EVFLOW), "report", str(trace), "--event", "2", "--profile-csv", str(csv)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    times, running = [], []
    for line in csv.read_text().splitlines()[1:]:
        t, n = line.split(",")
        times.append(float(t))
        running.append(int(n))
    fig, ax = plt.subplots(figsize=(8, 3.6))
    ax.step(times, running, where="post")
    ax.set_xlabel("time since the event's first module [ms]")
    ax.set_ylabel("modules running at once")
    ax.set_title("One hipileup event, 64 threads, 1 event in flight (sleeping modules, times x 0.1)")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(FIGURES / "event_profile.png", dpi=110)
    plt.close(fig)

    # Figure 3: predicted throughput against cores, with the analytic bounds.
    cores = [1, 2, 4, 8, 16, 32, 64, 128, 256]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    for ax, (name, config) in zip(axes, CONFIGS.items(), strict=False):
        pred, work_b, cp_b, res_b = [], [], [], []
        for c in cores:
            events = max(400, 10 * c) // (2 if quick else 1)
            sim, _ = evflow(
                "simulate",
                config,
                ["--events", str(events), "--cores", str(c), "--events-in-flight", str(c)],
                f"fig3-{name}-{c}",
            )
            pred.append(rate(sim["report"]))
            b = sim["bounds"]
            work_b.append(b["work_bound_ev_s"])
            cp_b.append(b["critical_path_bound_ev_s"])
            res_b.append(b["resource_bound_ev_s"])
        ax.loglog(cores, pred, "o-", label="predicted")
        ax.loglog(cores, work_b, ":", label="work / cores")
        ax.loglog(cores, cp_b, "--", label="events in flight / critical path")
        if all(r is not None for r in res_b):
            ax.loglog(cores, res_b, "-.", label="busiest serial resource")
        ax.set_title(name)
        ax.set_xlabel("cores (= events in flight)")
        ax.set_ylabel("throughput [events/s] (original times)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(FIGURES / "cores.png", dpi=110)
    plt.close(fig)
    print(f"figures written to {rel(FIGURES)}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("what", choices=["validate", "figures", "all"])
    parser.add_argument("--quick", action="store_true", help="fewer events (noisier)")
    parser.add_argument("--no-build", action="store_true", help="use target/release/evflow as it is")
    args = parser.parse_args()
    if not DATA.is_dir():
        print(f"skipped: {DATA} not found")
        return 0
    if not args.no_build:
        build()
    if args.what in ("validate", "all"):
        validate(args.quick)
    if args.what in ("figures", "all"):
        figures(args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
