#!/usr/bin/env python3
"""Accelerator benchmarks of evflow on the emulated device (or a CUDA GPU), side by side in one run.

    python3 bench/device.py                 # all, prints figures vs targets
    python3 bench/device.py --only 1        # a subset (1 bathtub, 2 combining, 3 overlap, 4 PRNG, 5 simulation)
    python3 bench/device.py --quick         # fewer events and repetitions (noisier)
    python3 bench/device.py --figure docs/figures/bathtub.png
    python3 bench/device.py --device cuda   # benchmarks 1-4 on GPU 0 with the real kernels (see below)
    python3 bench/device.py --device cuda --no-build --threads 16 --figure bathtub-h100.png
    python3 bench/device.py --only 1 --regime gpu-like --step 10   # the GPU's regime, emulated
    python3 bench/device.py --only 1 --baseline OTHER/evflow          # another build's adaptive beside
    python3 bench/device.py --only 6 --baseline OTHER/evflow          # combining under jitter, both builds

1. Bathtub: two synthetic device modules, a low-arithmetic-intensity one
   ("stencil": transfers dominate the device side) and a high one
   ("nbody": the kernel dominates), swept over static splits 0-100 % in 5 %
   steps, and the adaptive split. Target: adaptive within 3 % of the best
   static split.
2. Combining: framework cost per device invocation against the batch
   trigger (1 ... 1024 events); a device of zero modelled cost, compared with
   the same graph whose module is a plain host producer. Target: <= 5 us per
   invocation at >= 64 events per launch.
3. Overlap: a transfer-bound device module; time per launch with overlap
   against max(transfer in, kernel, transfer out), and without against their
   sum. Target: <= 1.1 x max with overlap.
4. PRNG: events/s of a module drawing 10^4 random numbers per event: host
   generation, the double-buffered device service, the device without
   double buffering (`cargo run --release -p evflow-device --example prng`).
5. Simulation: `evflow simulate` with the emulated device's model predicts
   benchmark 1's adaptive throughput. Target: within 10 %.
6. Combining under jitter: a device-only module whose launches are mostly
   their fixed cost (2 ms), 2 threads, 8 events in flight, behind a producer
   taking no time ("steady"), 50 us +- 50 % ("jittered"), 100 us ("slow":
   launches all of one size) or 200 us ("slower": a fill beyond 5 time-outs
   with its margin); events per launch
   and events/s of each run (this build and `--baseline`, interleaved), and
   `evflow simulate`'s prediction of the same job. Full launches are 8 events.

Host work sleeps (`--work sleep`), so 8 threads emulate 8 cores on a smaller
machine; the emulated device's engines sleep too. `--host-work busy` makes
benchmarks 1 and 5's host work keep its core busy instead: the host under
load, whose threads the device's own threads then wait for. The emulated bandwidth is
scaled down (0.25 GB/s) so that the bytes the host really packs and copies
stay small for this machine while transfers keep their weight against
kernels. Every ratio compares runs made in this one invocation, interleaved;
medians of the repetitions are reported.

With `--device cuda` (an evflow built with `--features cuda`; `--no-build`
takes target/release/evflow as it is) benchmarks 1-3 run on GPU 0, host
work is real (no sleeps) and `--threads` defaults to all cores:

1. Bathtub with the two real kernels (`device = { kernel = ..., size = ... }`):
   `stencil` (--stencil-size elements per event, ~1.25 FLOP per byte moved)
   and `nbody` (--nbody-size particles per event, O(size^2)); the host side
   runs their Rust twins. Static splits 0-100 % by 5 and the adaptive
   split; best static, host-only, device-only, adaptive and their ratios.
   Pick sizes so that host-only and device-only are within a few times of
   each other on the machine (the floor of the bathtub is then interior).
2. Combining: framework cost per invocation against --device-batch 1 ...
   1024, with the synthetic kernel (one hash per event: near-empty).
3. Overlap: a transfer-bound stencil (--overlap-size elements, batches of
   8); time per launch against max(transfer, kernel) with two streams and
   against their sum with one (`--device-no-overlap`).
4. PRNG: the `prng` example (built with `--features cuda`; `--no-build`
   takes target/release/examples/prng as it is) on GPU 0, on 1 and on
   `--threads` host threads.
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
EVFLOW = ROOT / "target" / "release" / "evflow"
OUT = Path(tempfile.mkdtemp(prefix="evflow-device-bench-"))
# `--baseline BIN`: another evflow build whose adaptive split runs beside this one's.
BASELINE: Path | None = None

THREADS = 8
IN_FLIGHT = 128
STEP = 5  # % between static splits (`--step`)
MAX_IN_FLIGHT: int | None = None  # `--max-in-flight`: --device-max-in-flight of this build's runs
HOST_WORK = "sleep"  # `--host-work`: how benchmarks 1 and 5's host work spends its time
BANDWIDTH_GBS = 0.25

# host s/event, device kernel s/event (speed-up 1), bytes in, bytes out, device options,
# events per run (None: the benchmark's default)
WORKLOADS = {
    "stencil": (0.001, 0.00005, 65536, 65536, [], None),
    "nbody": (0.002, 0.00025, 16384, 4096, [], None),
}

# `--regime gpu-like`: the regime measured on an H100 (best static split at an
# end of the sweep, device round trips of milliseconds, 128 events in flight).
# "host-wins": the host ~11x faster than the device, whose launches take
# 2 ms + 1.3 ms per event each way (like the stencil, bound by moving bytes);
# "device-wins": the device ~3.5x faster, a 0.5 ms fixed cost per launch
# (like the n-body kernel, whose time hardly grows with the batch), so a
# small device share makes small, inefficient launches. Its runs are longer
# (16 000 events): at ~25 000 events/s device-only, 4000 events would last
# only a few measurement windows.
GPU_LIKE = {
    "host-wins": (
        0.001,
        0.001,
        65536,
        65536,
        ["--device-latency-us", "2000", "--device-bandwidth-gbs", "0.05"],
        None,
    ),
    "device-wins": (0.002, 0.00002, 4096, 4096, ["--device-latency-us", "500"], 16000),
}


def build(cuda: bool = False) -> None:
    features = ["--features", "cuda"] if cuda else []
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "evflow-cli", *features], cwd=ROOT, check=True)


def config(name: str, host: float, device: float | None, bytes_in: int, bytes_out: int) -> Path:
    """raw -> <name> (device module) -> analyzer."""
    device_line = (
        f"device = {{ time = {device}, bytes_in = {bytes_in}, bytes_out = {bytes_out} }}\n"
        if device is not None
        else ""
    )
    text = (
        _head(name, f'work = "{HOST_WORK}"\n')
        + f"""time = {host}
consumes = ["raw"]
{device_line}
"""
        + _consumer(name)
    )
    path = OUT / f"{name}{'' if device is not None else '-plain'}.toml"
    path.write_text(text)
    return path


def _head(name: str, process_extra: str = "") -> str:
    """The process, the `raw` source product and the start of module `name`."""
    return f"""[process]
name = "{name}"
{process_extra}
[[module]]
label = "raw"
type = "producer"

[[module]]
label = "{name}"
type = "producer"
"""


def _consumer(name: str) -> str:
    """An analyzer reading `name`, on an end path: what makes the module run."""
    return f"""[[module]]
label = "use"
type = "analyzer"
consumes = ["{name}"]

[[end_path]]
name = "e"
modules = ["use"]
"""


def kernel_config(name: str, kernel: str, size: int) -> Path:
    """raw -> <name> (a real kernel; the host side runs its Rust twin) -> analyzer."""
    text = (
        _head(name)
        + f"""consumes = ["raw"]
device = {{ kernel = "{kernel}", size = {size} }}

"""
        + _consumer(name)
    )
    path = OUT / f"{name}-{kernel}-{size}.toml"
    path.write_text(text)
    return path


def run(path: Path, tag: str, *args: str, binary: Path | None = None) -> dict:
    report = OUT / f"{tag}.json"
    cmd = [str(binary or EVFLOW), "run", str(path), "--quiet", "--report", str(report), *args]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"evflow failed: {' '.join(cmd)}\n{done.stderr}")
    return json.loads(report.read_text())


def device_args(split: str, *extra: str, bandwidth_gbs: float = BANDWIDTH_GBS) -> list[str]:
    if MAX_IN_FLIGHT is not None:
        extra = (*extra, "--device-max-in-flight", str(MAX_IN_FLIGHT))
    return [
        "--device",
        "emulated",
        "--device-split",
        split,
        "--device-bandwidth-gbs",
        str(bandwidth_gbs),
        *extra,
    ]


def cuda_args(split: str, *extra: str) -> list[str]:
    if MAX_IN_FLIGHT is not None:
        extra = (*extra, "--device-max-in-flight", str(MAX_IN_FLIGHT))
    return ["--device", "cuda", "--device-split", split, *extra]


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def sweep(path: Path, name: str, common: list[str], dev, reps: int, statics: bool = True) -> dict:
    """Throughput per static split (0..100 % by 5) and adaptive; `dev(split)` gives the device options."""
    steps = sorted(set(range(0, 101, STEP)) | {100}) if statics else []
    splits = [f"fixed:{p}" for p in steps] + ["adaptive"] + (["baseline"] if BASELINE else [])
    rates: dict[str, list[float]] = {s: [] for s in splits}
    final: dict[str, list[float]] = {"adaptive": [], "baseline": []}
    for rep in range(reps):
        for s in splits:
            binary = BASELINE if s == "baseline" else None
            split = "adaptive" if s == "baseline" else s
            options = dev(split)
            if binary is not None and "--device-max-in-flight" in options:
                # An older build has no such option.
                i = options.index("--device-max-in-flight")
                options = options[:i] + options[i + 2 :]
            r = run(path, f"{name}-{s}-{rep}", *common, *options, binary=binary)
            rates[s].append(r["throughput_ev_s"])
            if s in final:
                final[s].append(r["devices"][0]["split_history"][-1]["device_fraction"])
    med = {s: median(v) for s, v in rates.items()}
    return {
        "static": [(p, med[f"fixed:{p}"]) for p in steps],
        "adaptive": med["adaptive"],
        "adaptive_split": median(final["adaptive"]),
        "baseline": med.get("baseline"),
        "baseline_split": median(final["baseline"]) if BASELINE else None,
        "command": f"evflow run {path.name} {' '.join(common)} " + " ".join(dev("SPLIT")),
        "path": path,
        "tag": name,
        "common": common,
    }


def emulated_args(extra: list[str]):
    """`dev(split)` for a workload: the common device options, its own in place of theirs."""
    own = dict(zip(extra[::2], extra[1::2], strict=True))
    bandwidth = float(own.pop("--device-bandwidth-gbs", BANDWIDTH_GBS))
    rest = [x for kv in own.items() for x in kv]
    return lambda split: device_args(split, *rest, bandwidth_gbs=bandwidth)


def bathtub(events: int, reps: int, statics: bool = True) -> dict:
    """Per workload of the emulated device."""
    results = {}
    for name, (host, device, bin_, bout, extra, own_events) in WORKLOADS.items():
        path = config(name, host, device, bin_, bout)
        common = ["-n", str(own_events or events), "-j", str(THREADS), "-k", str(IN_FLIGHT)]
        results[name] = sweep(path, name, common, emulated_args(extra), reps, statics)
    return results


def print_bathtub(bath: dict, reps: int) -> None:
    print("1 bathtub (throughput ev/s, median of", reps, "runs)")
    for name, r in bath.items():
        static = r["static"]
        best_p, best = max(static, key=lambda x: x[1])
        host, dev = static[0][1], static[-1][1]
        print(f"  {name}: {r['command']}")
        print("    static: " + " ".join(f"{p}%:{rate:.0f}" for p, rate in static))
        print(
            f"    best static {best_p}%: {best:.0f}; host-only {host:.0f}; device-only {dev:.0f}; "
            f"adaptive {r['adaptive']:.0f} (final split {100 * r['adaptive_split']:.0f}%)"
        )
        print(
            f"    best/host-only {best / host:.2f}x, best/device-only {best / dev:.2f}x, "
            f"adaptive/best {r['adaptive'] / best:.3f} (target >= 0.97)"
        )
        if r.get("baseline") is not None:
            print(
                f"    baseline adaptive ({BASELINE}): {r['baseline']:.0f} "
                f"(final split {100 * r['baseline_split']:.0f}%), baseline/best {r['baseline'] / best:.3f}"
            )


def combining(events: int, reps: int, cuda: bool = False, threads: int = 2) -> list[tuple]:
    """Framework cost per invocation of a near-empty kernel against the batch trigger."""
    name = "kernelless"
    dev = config(name, 0.0, 0.0, 16, 8)
    plain = config(name, 0.0, None, 16, 8)
    common = ["-n", str(events), "-j", str(threads), "-k", "1024"]
    rows = []
    for batch in [1, 4, 16, 64, 256, 1024]:
        costs, per_launch = [], []
        for rep in range(reps):
            base = run(plain, f"plain-{batch}-{rep}", *common, "--device", "none")
            extra = ["--device-timeout-us", "1000", "--device-batch", str(batch)]
            if cuda:
                extra = cuda_args("fixed:100", *extra)
            else:
                extra += ["--device-latency-us", "0", "--device-transfer-latency-us", "0"]
                extra = device_args("fixed:100", *extra, bandwidth_gbs=1000)
            r = run(dev, f"comb-{batch}-{rep}", *common, *extra)
            d = r["devices"][0]
            costs.append((r["wall_s"] - base["wall_s"]) / r["events"] * 1e6)
            per_launch.append(d["events_per_launch"])
        rows.append((batch, median(per_launch), median(costs)))
    return rows


def overlap(
    events: int, reps: int, cuda_size: int | None = None, threads: int = 2, streams: int | None = None
) -> list[tuple]:
    """Time per launch of a transfer-bound module, with and without overlap.

    Emulated: 32 kB each way per event at 0.125 GB/s: 2.1 ms per transfer of
    a batch of 8, against 0.81 ms of kernel; few bytes for the host to pack.
    CUDA (`cuda_size`): the stencil of `cuda_size` elements per event.
    """
    if cuda_size is None:
        path = config("transfers", 0.001, 0.0001, 32768, 32768)
    else:
        path = kernel_config("transfers", "stencil", cuda_size)
    common = ["-n", str(events), "-j", str(threads), "-k", "64"]
    rows = []
    for mode in ["overlap", "serial"]:
        periods, maxes, sums = [], [], []
        for rep in range(reps):
            extra = ["--device-batch", "8", "--device-timeout-us", "1000"]
            if mode == "serial":
                extra.append("--device-no-overlap")
            elif streams is not None:
                extra += ["--device-streams", str(streams)]
            if cuda_size is None:
                extra = device_args("fixed:100", *extra, bandwidth_gbs=0.125)
            else:
                extra = cuda_args("fixed:100", *extra)
            r = run(path, f"ovl-{mode}-{rep}", *common, *extra)
            d = r["devices"][0]
            n = d["launches"]
            tin, k, tout = d["transfer_in_s"] / n, d["kernel_s"] / n, d["transfer_out_s"] / n
            periods.append(r["wall_s"] / n)
            maxes.append(max(tin, k, tout))
            sums.append(tin + k + tout)
        rows.append((mode, median(periods), median(maxes), median(sums)))
    return rows


def prng(events: int, threads: int = 2, device: str = "emulated", build_it: bool = True) -> dict:
    """Benchmark 4 (a Rust example: the service is a library, not a module)."""
    if build_it:
        features = ["--features", "cuda"] if device == "cuda" else []
        cmd = ["cargo", "build", "--release", "-q", "-p", "evflow-device", "--example", "prng", *features]
        subprocess.run(cmd, cwd=ROOT, check=True)
    example = ROOT / "target" / "release" / "examples" / "prng"
    done = subprocess.run([str(example), str(events), str(threads), device], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"prng example failed: {done.stderr.strip()}")
    return json.loads(done.stdout)


def print_prng(r: dict, threads: int) -> None:
    print(f"4 PRNG (10^4 numbers per event, {threads} threads, {r['device']} device): events/s")
    print(
        f"  host generation {r['host']:.0f}; double-buffered device service {r['double_buffered']:.0f} "
        f"({r['from_device']} numbers from the device, {r['from_host']} computed by the host, "
        f"{r['fills']} fills); device without double buffering {r['unbuffered']:.0f}"
    )


def simulation(bath: dict, events: int) -> list[tuple]:
    rows = []
    for name, (host, device, bin_, bout, extra, own_events) in WORKLOADS.items():
        path = config(name, host, device, bin_, bout)
        cmd = [
            str(EVFLOW),
            "simulate",
            str(path),
            "-n",
            str(own_events or events),
            "--cores",
            str(THREADS),
            "--events-in-flight",
            str(IN_FLIGHT),
            "--quiet",
            "--report",
            str(OUT / f"sim-{name}.json"),
            *emulated_args(extra)("adaptive"),
        ]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            rows.append((name, None, bath[name]["adaptive"], done.stderr.strip()))
            continue
        sim = json.loads((OUT / f"sim-{name}.json").read_text())
        rows.append((name, sim["report"]["throughput_ev_s"], bath[name]["adaptive"], ""))
    return rows


def simulation_measured(bath: dict) -> list[tuple]:
    """`evflow simulate --times-from REPORT --device none`: the device as
    one static split's run measured it (its launches' `launch_model`, the
    host time per call), on a simulated machine without a device; predicts
    the adaptive run. Works for a GPU's runs as for the emulated device's."""
    rows = []
    for key, r in bath.items():
        mixed = [p for p, _ in r["static"] if 0 < p < 100]
        if not mixed:
            rows.append((key, None, r["adaptive"], "no static split with both sides was run", None))
            continue
        p = min(mixed, key=lambda x: abs(x - 50))
        measured = OUT / f"{r['tag']}-fixed:{p}-0.json"
        out = OUT / f"sim-measured-{r['tag']}.json"
        common = r["common"]
        cmd = [
            str(EVFLOW),
            "simulate",
            str(r["path"]),
            *common[: common.index("-j")],
            "--cores",
            common[common.index("-j") + 1],
            "--events-in-flight",
            common[common.index("-k") + 1],
            *common[common.index("-k") + 2 :],  # the run's own combining options
            "--device",
            "none",
            "--device-split",
            "adaptive",
            "--times-from",
            str(measured),
            "--quiet",
            "--report",
            str(out),
        ]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            rows.append((key, None, r["adaptive"], done.stderr.strip(), p))
            continue
        sim = json.loads(out.read_text())
        rows.append((key, sim["report"]["throughput_ev_s"], r["adaptive"], "", p))
    return rows


def print_simulation_measured(bath: dict, device: str) -> None:
    print(
        f"5b simulation from a measured run (evflow simulate --times-from the fixed:P run's report) vs the {device} run"
    )
    for name, sim, real, err, p in simulation_measured(bath):
        if sim is None:
            print(f"  {name}: simulate failed: {err}")
        else:
            print(
                f"  {name}: simulated from fixed:{p} {sim:.0f} ev/s, adaptive run {real:.0f} ev/s "
                f"({100 * (sim / real - 1):+.1f}%)"
            )


def figure(bath: dict, path: Path, title: str | None = None) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as missing:
        raise SystemExit("figures need matplotlib: pip install .") from missing
    fig, axes = plt.subplots(1, len(bath), figsize=(10, 3.8))
    for ax, (name, r) in zip(axes, bath.items(), strict=True):
        ps = [p for p, _ in r["static"]]
        ts = [1e3 / rate for _, rate in r["static"]]  # ms per event
        ax.plot(ps, ts, "o-", label="static split")
        ax.axhline(1e3 / r["adaptive"], color="C3", ls="--", label="adaptive")
        ax.axvline(100 * r["adaptive_split"], color="C3", ls=":", lw=1)
        ax.set_title(f"{name}")
        ax.set_xlabel("invocations on the device (%)")
        ax.set_ylabel("wall time per event (ms)")
        ax.set_ylim(bottom=0)
        ax.legend()
    fig.suptitle(title or f"Bathtub on the emulated device ({THREADS} threads, {IN_FLIGHT} events in flight)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


# Benchmark 6: the producer before the device module: (host s/event, time_jitter).
STAGGER = {
    "steady": (0.0, 0.0),
    "jittered": (50e-6, 0.5),
    # Launches all of one size (4 events within the time-out, every time),
    # and a full batch's fill (800 us) beyond 5 time-outs with its margin.
    "slow": (100e-6, 0.0),
    "slower": (200e-6, 0.0),
}


def stagger_config(name: str, raw_s: float, jitter: float) -> Path:
    """raw (raw_s +- jitter) -> <name> (device module of 10 us, 2 ms per launch) -> analyzer."""
    raw = f"time = {raw_s}\ntime_jitter = {jitter}\n" if raw_s > 0 else ""
    text = f"""[process]
name = "{name}"
work = "sleep"

[[module]]
label = "raw"
type = "producer"
{raw}
[[module]]
label = "{name}"
type = "producer"
time = 0.001
consumes = ["raw"]
device = {{ time = 0.00001, bytes_in = 4096, bytes_out = 4096 }}

""" + _consumer(name)
    path = OUT / f"stagger-{name}.toml"
    path.write_text(text)
    return path


def stagger(events: int, reps: int) -> None:
    """Benchmark 6: launches per run of this build (and the baseline), and the simulation."""
    common = ["-n", str(events), "-j", "2", "-k", "8"]
    dev = device_args("fixed:100", "--device-latency-us", "2000")
    builds = [("this", EVFLOW)] + ([("baseline", BASELINE)] if BASELINE else [])
    print("6 combining under jitter (device-only, 2 ms per launch, 2 threads, 8 in flight)")
    for name, (raw_s, jitter) in STAGGER.items():
        path = stagger_config(name, raw_s, jitter)
        print(f"  {name}: evflow run {path.name} {' '.join(common + dev)}")
        runs: dict[str, list[tuple[float, float]]] = {tag: [] for tag, _ in builds}
        for rep in range(reps):
            for tag, binary in builds:
                r = run(path, f"stagger-{name}-{tag}-{rep}", *common, *dev, binary=binary)
                runs[tag].append((r["throughput_ev_s"], r["devices"][0]["events_per_launch"]))
        for tag, binary in builds:
            rates = [x for x, _ in runs[tag]]
            sizes = [n for _, n in runs[tag]]
            print(
                f"    {tag} ({binary.name}): {median(rates):.0f} ev/s ({min(rates):.0f}-{max(rates):.0f}), "
                f"{median(sizes):.2f} events/launch ({min(sizes):.2f}-{max(sizes):.2f}); "
                f"full in {sum(n > 7.99 for n in sizes)} of {len(sizes)}"
            )
        report = OUT / f"sim-stagger-{name}.json"
        cmd = [
            str(EVFLOW),
            "simulate",
            str(path),
            "-n",
            str(events),
            "--cores",
            "2",
            "--events-in-flight",
            "8",
        ]
        cmd += [*dev, "--quiet", "--report", str(report)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            print(f"    simulate failed: {done.stderr.strip()}")
            continue
        sim = json.loads(report.read_text())
        rate, size = sim["report"]["throughput_ev_s"], sim["devices"][0]["events_per_launch"]
        real = median([x for x, _ in runs["this"]])
        real_size = median([n for _, n in runs["this"]])
        print(
            f"    simulated: {rate:.0f} ev/s, {size:.2f} events/launch; simulated/run "
            f"{rate / real:.2f} (ev/s), {size / real_size:.2f} (events/launch)"
        )


def check_cuda() -> None:
    """Fails at once, saying why, when evflow cannot open a CUDA device."""
    path = kernel_config("probe", "nbody", 8)
    cmd = [str(EVFLOW), "run", str(path), "--quiet", "-n", "4", *cuda_args("fixed:100")]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"--device cuda: evflow cannot use a CUDA device: {done.stderr.strip()}")


def cuda_bathtub(args: argparse.Namespace, reps: int) -> dict:
    """Benchmark 1 on the GPU with the real kernels (real host work)."""
    events = args.events or (2000 if args.quick else 10000)
    common = ["-n", str(events), "-j", str(args.threads), "-k", str(args.in_flight)]
    if args.batch:
        common += ["--device-batch", str(args.batch)]
    results = {}
    for name, size in [("stencil", args.stencil_size), ("nbody", args.nbody_size)]:
        path = kernel_config(name, name, size)
        results[f"{name} ({size})"] = sweep(path, name, common, cuda_args, reps)
    return results


def cuda_main(args: argparse.Namespace, only: set[int], reps: int) -> None:
    check_cuda()
    if 1 in only:
        bath = cuda_bathtub(args, reps)
        print_bathtub(bath, reps)
        if args.figure:
            title = f"Bathtub on CUDA GPU 0 ({args.threads} threads, {args.in_flight} events in flight)"
            figure(bath, args.figure, title)
            print("  figure:", args.figure)
    if 2 in only:
        print(f"2 combining (synthetic kernel, fixed:100, {args.threads} threads, 1024 in flight)")
        for batch, per_launch, cost in combining(5000 if args.quick else 20000, reps, True, args.threads):
            print(
                f"  batch {batch:5}: {per_launch:7.1f} events/launch, framework cost {cost:6.2f} us/invocation"
            )
    if 3 in only:
        for streams in args.streams:
            print(
                f"3 overlap (stencil of {args.overlap_size} elements, batches of 8, fixed:100, {streams} streams)"
            )
            rows = overlap(200 if args.quick else 800, reps, args.overlap_size, args.threads, streams)
            print_overlap(rows)
    if 4 in only:
        # The host side's threads matter: on many threads a cheap generator
        # outpaces the fills; on one the device's double buffer pays.
        for threads in sorted({1, args.threads}):
            events = 20000 if args.quick else 100000
            print_prng(prng(events, threads, "cuda", build_it=not args.no_build), threads)
    if 5 in only:
        if 1 not in only:
            print("benchmark 5 needs benchmark 1's runs: --only 1,5")
        else:
            print_simulation_measured(bath, "GPU")
    print("reports in", OUT)


def print_overlap(rows: list[tuple]) -> None:
    for mode, period, mx, sm in rows:
        print(
            f"  {mode:8}: {period * 1e3:.3f} ms/launch; max(transfer, kernel) {mx * 1e3:.3f} ms "
            f"(ratio {period / mx:.2f}); sum {sm * 1e3:.3f} ms (ratio {period / sm:.2f})"
        )
    print("  target: overlap <= 1.1 x max; serial ~ 1.0 x sum")


def main() -> None:
    global EVFLOW, BASELINE, STEP, MAX_IN_FLIGHT, HOST_WORK, THREADS
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="benchmarks to run (default 1,2,3,4,5,6)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--figure", type=Path)
    ap.add_argument("--device", choices=["emulated", "cuda"], default="emulated")
    ap.add_argument(
        "--regime",
        choices=["bathtub", "gpu-like"],
        default="bathtub",
        help="emulated benchmarks 1 and 5: the interior bathtub (default) or the GPU-like regime",
    )
    ap.add_argument(
        "--max-in-flight",
        type=int,
        help="--device-max-in-flight of this build's runs (not the baseline's)",
    )
    ap.add_argument(
        "--step", type=int, default=STEP, help="benchmark 1: %% between static splits (default 5)"
    )
    ap.add_argument(
        "--host-work",
        choices=["sleep", "busy"],
        default=HOST_WORK,
        help="emulated benchmarks 1 and 5: host work sleeps (default) or keeps its core busy (host under load)",
    )
    ap.add_argument("--no-build", action="store_true", help="use target/release/evflow as it is")
    ap.add_argument("--evflow", type=Path, help="the evflow binary (default target/release/evflow)")
    ap.add_argument(
        "--baseline", type=Path, help="benchmark 1: also run this evflow binary's adaptive split, interleaved"
    )
    ap.add_argument("--reps", type=int, help="repetitions, medians reported (default 3; --quick 1)")
    ap.add_argument(
        "--threads", type=int, help="host threads (CUDA default: all cores; emulated benchmarks 1 and 5: 8)"
    )
    ap.add_argument(
        "--streams",
        type=int,
        nargs="+",
        default=[2],
        help="CUDA, benchmark 3: streams to compare (default 2)",
    )
    ap.add_argument("--in-flight", type=int, default=IN_FLIGHT, help="CUDA: events in flight")
    ap.add_argument("--events", type=int, help="CUDA bathtub: events per run (default 10000; --quick 2000)")
    ap.add_argument("--batch", type=int, help="CUDA bathtub: --device-batch (default: evflow's)")
    ap.add_argument("--stencil-size", type=int, default=65536, help="CUDA: stencil elements per event")
    ap.add_argument("--nbody-size", type=int, default=128, help="CUDA: nbody particles per event")
    ap.add_argument(
        "--overlap-size", type=int, default=1 << 20, help="CUDA overlap: stencil elements per event"
    )
    args = ap.parse_args()
    if args.evflow:
        EVFLOW = args.evflow.resolve()
    if args.baseline:
        BASELINE = args.baseline.resolve()
    STEP = args.step
    MAX_IN_FLIGHT = args.max_in_flight
    HOST_WORK = args.host_work
    if args.figure:
        try:
            import matplotlib  # noqa: F401
        except ImportError as missing:
            raise SystemExit("--figure needs matplotlib: pip install .") from missing
    cuda = args.device == "cuda"
    only = {int(x) for x in (args.only or "1,2,3,4,5,6").split(",")}
    reps = args.reps or (1 if args.quick else 3)
    if args.threads and not cuda:
        THREADS = args.threads
    args.threads = args.threads or os.cpu_count() or 1
    if not args.no_build:
        build(cuda)
    if not EVFLOW.exists():
        raise SystemExit(f"no evflow binary at {EVFLOW} (build it, or leave out --no-build)")
    if cuda:
        cuda_main(args, only, reps)
        return
    if args.regime == "gpu-like":
        WORKLOADS.clear()
        WORKLOADS.update(GPU_LIKE)
    bath = None
    if 5 in only and 1 not in only:
        bath = bathtub(1000 if args.quick else 4000, reps, statics=False)
    if 1 in only:
        bath = bathtub(1000 if args.quick else 4000, reps)
        print_bathtub(bath, reps)
        if args.figure:
            figure(bath, args.figure)
            print("  figure:", args.figure)
    if 2 in only:
        print("2 combining (kernel-less device module, fixed:100, 2 threads, 1024 in flight)")
        for batch, per_launch, cost in combining(5000 if args.quick else 20000, reps):
            print(
                f"  batch {batch:5}: {per_launch:7.1f} events/launch, framework cost {cost:6.2f} us/invocation"
            )
        print("  target: <= 5 us per invocation at >= 64 events per launch")
    if 3 in only:
        print("3 overlap (transfer-bound module, batches of 8, fixed:100)")
        print_overlap(overlap(400 if args.quick else 1600, reps))
    if 4 in only:
        print_prng(prng(1000 if args.quick else 4000, build_it=not args.no_build), 2)
    if 5 in only and bath is not None:
        print("5 simulation (evflow simulate --device emulated, adaptive) vs the emulated run")
        for name, sim, real, err in simulation(bath, 1000 if args.quick else 4000):
            if sim is None:
                print(f"  {name}: simulate failed: {err}")
            else:
                print(
                    f"  {name}: simulated {sim:.0f} ev/s, emulated {real:.0f} ev/s ({100 * (sim / real - 1):+.1f}%)"
                )
        print_simulation_measured(bath, "emulated")
    if 6 in only:
        stagger(1000 if args.quick else 4000, 3 if args.quick else args.reps or 6)
    print("reports in", OUT)


if __name__ == "__main__":
    main()
