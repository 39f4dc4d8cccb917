"""The host/device split of a Python device module on the emulated device:
throughput against static splits (``fixed:P``) and with the adaptive split.

The host implementation costs ``--host-us`` per event (slept: the machine
this was written on has 2 shared cores, so sleeping host work, like
``bench/device.py --work sleep``, keeps the measured curve that of the
model rather than of the machine's load); the emulated device costs its
launch latency plus the bytes moved at ``--bandwidth-gbs``. Both implement
the same numpy computation, and every run's products are checked equal.

    .venv/bin/python bench/python_device.py [--events 200000] [--step 5000] [--repeat 3]

``--device cuda`` runs the device implementation with CuPy on a GPU instead
(the host cost is then also real: ``--host-us 0`` leaves only numpy's own);
CuPy's ``cos``/``sin`` may differ from numpy's in the last bits, so there
each batch's sum of products is compared within 1e-6 of its sum of
magnitudes (float32 columns).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np

import evflow as ef
from evflow.device import EmulatedDevice


def _process(events: int, step: int, host_s: float, sums: list[tuple[int, float, float]]) -> ef.Process:
    proc = ef.Process("split")
    proc.source = ef.source.synthetic(events, step_size=step, seed=11)

    def metxy_device(ev: Any, xp: Any) -> dict[str, Any]:
        return {"met_x": ev.MET_pt * xp.cos(ev.MET_phi), "met_y": ev.MET_pt * xp.sin(ev.MET_phi)}

    @proc.producer(consumes=["MET_pt", "MET_phi"], produces=["met_x", "met_y"], device=metxy_device)
    def metxy(ev):
        if host_s:
            time.sleep(host_s * len(ev))
        return {"met_x": ev.MET_pt * np.cos(ev.MET_phi), "met_y": ev.MET_pt * np.sin(ev.MET_phi)}

    @proc.analyzer(consumes=["met_x", "met_y"])
    def check(ev):
        x, y = np.asarray(ev.met_x, dtype=np.float64), np.asarray(ev.met_y, dtype=np.float64)
        sums.append(
            (ev.info.index, float(np.sum(x) + np.sum(y)), float(np.sum(np.abs(x)) + np.sum(np.abs(y))))
        )

    return proc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--step", type=int, default=5_000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--host-us", type=float, default=20.0, help="host cost per event, µs")
    ap.add_argument("--latency-us", type=float, default=200.0, help="device launch latency, µs")
    ap.add_argument("--bandwidth-gbs", type=float, default=0.0024, help="device transfer bandwidth")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10, help="static splits every 100/STEPS %%")
    ap.add_argument("--device", choices=["emulated", "cuda"], default="emulated")
    args = ap.parse_args()

    splits = [f"fixed:{p}" for p in range(0, 101, 100 // args.steps)] + ["adaptive"]
    reference: list[tuple[int, float, float]] | None = None
    rows = []
    for split in splits:
        rates, fractions = [], []
        for _ in range(args.repeat):
            sums: list[tuple[int, float, float]] = []
            proc = _process(args.events, args.step, args.host_us * 1e-6, sums)
            if args.device == "cuda":
                r = proc.run(threads=args.threads, device="cuda", device_split=split)
            else:
                dev = EmulatedDevice(latency_us=args.latency_us, bandwidth_gbs=args.bandwidth_gbs)
                r = proc.run(threads=args.threads, device=dev, device_split=split)
                dev.close()
            sums.sort()
            if reference is None:
                reference = sums
            if args.device == "cuda":
                got, want = np.array(sums), np.array(reference)
                assert np.array_equal(got[:, 0], want[:, 0]), f"{split}: other batches than the first run's"
                # Per batch: the sum's error is bounded by the rounding of
                # each term, relative to the sum of magnitudes (the sum
                # itself cancels).
                off = np.abs(got[:, 1] - want[:, 1]) / want[:, 2]
                assert np.all(off <= 1e-6), (
                    f"{split}: products differ (up to {off.max():.2e} of the magnitudes)"
                )
            else:
                assert sums == reference, f"{split}: products differ from the first run's"
            rates.append(r.throughput)
            fractions.append(r.report["devices"]["modules"]["metxy"]["device_fraction"])
        rows.append((split, statistics.median(rates), statistics.median(fractions)))
        print(f"{split:>10}  {rows[-1][1]:>10,.0f} ev/s  final device fraction {rows[-1][2]:.2f}", flush=True)

    static = rows[:-1]
    best = max(static, key=lambda r: r[1])
    host_only, device_only, adaptive = static[0][1], static[-1][1], rows[-1]
    print()
    print("| host only | device only | best static | adaptive (final split) | adaptive vs best |")
    print("| --- | --- | --- | --- | --- |")
    print(
        f"| {host_only:,.0f} ev/s | {device_only:,.0f} ev/s | {best[1]:,.0f} ev/s ({best[0][6:]} %) "
        f"| {adaptive[1]:,.0f} ev/s ({adaptive[2] * 100:.0f} %) | {(adaptive[1] / best[1] - 1) * 100:+.1f} % |"
    )
    print(f"best vs host-only {best[1] / host_only:.2f}×, best vs device-only {best[1] / device_only:.2f}×")


if __name__ == "__main__":
    main()
