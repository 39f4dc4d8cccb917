"""Benchmarks of remote offload (evflow.remote) on a loopback Dask cluster.

Prints, side by side in one run:

1. **Overhead curve**: for payloads of 10¹ … 10⁷ doubles, the round trip of
   one request computing their root-sum-of-squares on a worker holding
   ``GPU=1`` (a resource-tagged task, and a Dask actor placed with the same
   resources), the remote compute time, the overhead (round trip minus
   compute), absolute and per element, and the local compute time; then
   the break-even size above which a remote implementation 10× faster than
   the local one pays.
2. **Throughput** of a job whose heavy producer is 10× faster remotely:
   all-local, all-remote and adaptive, plus all-remote with 1, 2 and 4
   requests in flight and with and without combining, and the actor
   transport. The faster worker is emulated (same results): by default
   (``--emulate sleep``) the remote implementation waits one tenth of the
   measured local compute time and uses no host core, as an accelerator
   or another machine would; ``--emulate busy`` does 1/10 of the busy
   work on a worker that shares this machine's cores with the offloader.
3. **Latency hiding**: 16 batches in flight, a remote producer whose
   remote implementation waits (device time emulated by sleeping, no host
   CPU) and local CPU-bound producers: offloader CPU use while requests
   are outstanding.

Usage::

    python bench/remote.py                    # everything (~2 minutes on 2 cores)
    python bench/remote.py --only overhead --reps 5
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from typing import Any

import awkward as ak
import numpy as np

import evflow as ef
from evflow.remote import Remote


def rss_task(x: np.ndarray) -> tuple[float, float]:
    t0 = time.perf_counter()
    r = float(np.sqrt(np.sum(x * x)))  # single-threaded (no BLAS threads)
    return r, time.perf_counter() - t0


class RssActor:
    def run(self, x: np.ndarray) -> tuple[float, float]:
        return rss_task(x)


def start_cluster(threads: int = 1) -> Any:
    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=1,
        threads_per_worker=threads,
        resources={"GPU": 1},
        dashboard_address=None,
        silence_logs=40,
    )
    return Client(cluster)


# --------------------------------------------------------------------------- 1. overhead


def overhead(client: Any, reps: int, speedup: float) -> dict[str, Any]:
    actor = client.submit(RssActor, actor=True, resources={"GPU": 1}).result()
    rows = []
    print("\n1. overhead of one request (root-sum-of-squares of n doubles), loopback, medians")
    print(
        f"{'n':>9} {'local':>10} {'task rtt':>10} {'compute':>10} {'overhead':>10} {'per elem':>10} "
        f"{'actor rtt':>10} {'overhead':>10} {'MB/s':>8}"
    )
    for e in range(1, 8):
        n = 10**e
        x = np.random.default_rng(e).normal(size=n)
        local = []
        for _ in range(max(reps, 5)):
            local.append(rss_task(x)[1])
        rtt_t, comp_t, rtt_a, comp_a = [], [], [], []
        for i in range(reps + 1):
            t0 = time.perf_counter()
            _, c = client.submit(rss_task, x, resources={"GPU": 1}, pure=False).result()
            dt = time.perf_counter() - t0
            t1 = time.perf_counter()
            _, ca = actor.run(x).result()
            da = time.perf_counter() - t1
            if i:  # the first request warms the path
                rtt_t.append(dt)
                comp_t.append(c)
                rtt_a.append(da)
                comp_a.append(ca)
        row = {
            "n": n,
            "local_s": float(np.median(local)),
            "task_rtt_s": float(np.median(rtt_t)),
            "task_compute_s": float(np.median(comp_t)),
            "actor_rtt_s": float(np.median(rtt_a)),
            "actor_compute_s": float(np.median(comp_a)),
        }
        row["task_overhead_s"] = row["task_rtt_s"] - row["task_compute_s"]
        row["actor_overhead_s"] = row["actor_rtt_s"] - row["actor_compute_s"]
        rows.append(row)
        print(
            f"{n:>9} {row['local_s'] * 1e3:>8.3f}ms {row['task_rtt_s'] * 1e3:>8.2f}ms "
            f"{row['task_compute_s'] * 1e3:>8.3f}ms {row['task_overhead_s'] * 1e3:>8.2f}ms "
            f"{row['task_overhead_s'] / n * 1e9:>8.1f}ns {row['actor_rtt_s'] * 1e3:>8.2f}ms "
            f"{row['actor_overhead_s'] * 1e3:>8.2f}ms {8 * n / row['task_rtt_s'] / 1e6:>8.1f}"
        )
    # Break-even for a remote implementation `speedup`× faster than the local
    # one: overhead(n) + local(n)/speedup < local(n). Overheads measured per
    # size; the cost of the *task* (here a dot product, ~1 ns per element)
    # is scaled up until it pays: the break-even per-element local cost.
    print(f"\n   break-even for a remote implementation {speedup:g}x faster than the local one:")
    for row in rows:
        need = row["task_overhead_s"] / (1 - 1 / speedup) / row["n"]
        row["break_even_local_s_per_element"] = need
        print(
            f"   n={row['n']:>9}: offloading pays when the local cost exceeds {need * 1e9:10.1f} ns "
            f"per element (this task: {row['local_s'] / row['n'] * 1e9:.2f} ns)"
        )
    paying = [r["n"] for r in rows if r["local_s"] * (1 - 1 / speedup) > r["task_overhead_s"]]
    print(f"   this root-sum-of-squares task pays at n >= {paying[0] if paying else 'never (up to 1e7)'}")
    return {"rows": rows, "pays_from_n": paying[0] if paying else None}


# --------------------------------------------------------------------------- 2. throughput


WORK = 40  # busy-work rounds per event of the local implementation


def busy(ev: Any, rounds: int) -> np.ndarray:
    """Root-sum-of-squares of the jets' pT and MET, after `rounds` rounds of
    busy work per jet (sin/cos of the jet pT, which does not change the
    result)."""
    pt = ak.to_numpy(ak.flatten(ev.Jet_pt)).astype(np.float64)
    acc = np.zeros_like(pt)
    for _ in range(rounds):
        acc += np.sin(pt + acc) * 1e-300
    out = np.sqrt(ak.to_numpy(ak.sum(ev.Jet_pt**2, axis=1)) + ev.MET_pt.astype(np.float64) ** 2)
    return out + 0.0 * float(acc[:1].sum() if len(acc) else 0.0)


def heavy_local(ev: Any) -> np.ndarray:
    return busy(ev, WORK)


def heavy_remote(ev: Any) -> np.ndarray:
    return busy(ev, WORK // 10)


#: local seconds per event of `heavy_local`, measured by `calibrate`
LOCAL_S_PER_EVENT = [0.0]


def heavy_remote_sleep(ev: Any) -> np.ndarray:
    """A device 10x faster than the local implementation, without using a
    host core: waits one tenth of the measured local time, then returns
    the same values (the busy work does not change them)."""
    time.sleep(LOCAL_S_PER_EVENT[0] * len(ev) / 10)
    return busy(ev, 0)


def calibrate(step: int) -> float:
    """Local seconds per event of the heavy producer (one thread, median of 5)."""
    reader = ef.source.synthetic(step, step_size=step, seed=5).reader(["Jet_pt", "MET_pt"], None)
    b = reader.next_batch()
    ev = ef.Events("heavy", b, None, frozenset(["Jet_pt", "MET_pt"]), {})
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        heavy_local(ev)
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) / step


def throughput_job(client: Any, events: int, step: int, spec: Remote | None) -> ef.Process:
    proc = ef.Process("remote-bench")
    proc.source = ef.source.synthetic(events, step_size=step, seed=5)
    proc.producer(consumes=["Jet_pt", "MET_pt"], produces=["rss"], label="heavy", remote=spec)(heavy_local)

    @proc.filter(consumes=["MET_pt"])
    def met(ev: Any) -> Any:
        return ev.MET_pt > 10

    proc.path("sel", [met])
    proc.histogram("rss", bins=50, range=(0, 1000), after="sel")
    return proc


def throughput(
    client: Any, events: int, step: int, threads: int, emulate: str, repeat: int
) -> dict[str, Any]:
    LOCAL_S_PER_EVENT[0] = calibrate(step)
    fn = heavy_remote_sleep if emulate == "sleep" else heavy_remote
    base = {"resources": {"GPU": 1}, "client": client, "fn": fn}
    configs: list[tuple[str, Remote | None]] = [
        ("all-local", Remote(mode="local", **base)),
        ("all-remote (2 in flight, combine 8)", Remote(mode="remote", **base)),
        ("adaptive (2 in flight, combine 8)", Remote(**base)),
        ("all-remote, 1 in flight, combine 1", Remote(mode="remote", max_in_flight=1, combine=1, **base)),
        ("all-remote, 1 in flight, combine 8", Remote(mode="remote", max_in_flight=1, **base)),
        ("all-remote, 4 in flight, combine 8", Remote(mode="remote", max_in_flight=4, **base)),
        ("adaptive, 4 in flight", Remote(max_in_flight=4, **base)),
        ("all-remote, actor transport", Remote(mode="remote", transport="actor", **base)),
        ("adaptive, actor transport", Remote(transport="actor", **base)),
    ]
    # warm-up (imports on the worker, first request)
    throughput_job(client, 4 * step, step, Remote(mode="remote", **base)).run(threads=threads)
    how = (
        "the remote waits 1/10 of the measured local time (no host CPU)"
        if emulate == "sleep"
        else "the remote does 1/10 of the busy work, on a worker sharing these cores"
    )
    print(
        f"\n2. throughput: heavy producer 10x faster remotely ({how}; local "
        f"{LOCAL_S_PER_EVENT[0] * 1e6:.1f} us/event), {events} events, step {step}, {threads} threads, "
        f"8 batches in flight; median (min-max) of {repeat} interleaved runs"
    )
    print(f"   {'config':<38} {'events/s':>10} {'(min - max)':>19} {'remote share':>13} {'batch/req':>9}")
    runs: dict[str, list[tuple[float, dict[str, Any]]]] = {name: [] for name, _ in configs}
    ref = None
    for _ in range(repeat):
        for name, spec in configs:
            res = throughput_job(client, events, step, spec).run(threads=threads, events_in_flight=8)
            h = res.histograms["rss"].values()
            ref = h if ref is None else ref
            assert np.array_equal(h, ref), f"{name}: histogram differs from all-local"
            runs[name].append((res.throughput, res.report["remote"]["heavy"]))
    out: dict[str, Any] = {}
    for name, _ in configs:
        rates = sorted(t for t, _ in runs[name])
        med = float(np.median(rates))
        r = min(runs[name], key=lambda x: abs(x[0] - med))[1]
        per_req = r["remote_batches"] / r["remote_requests"] if r["remote_requests"] else 0.0
        share = float(np.mean([x[1]["remote_share"] for x in runs[name]]))
        out[name] = {"events_s": med, "min": rates[0], "max": rates[-1], "report": r}
        print(
            f"   {name:<38} {med:>10,.0f} ({rates[0]:>8,.0f} - {rates[-1]:>8,.0f}) {share:>12.0%} "
            f"{per_req:>9.1f}"
        )
    d = out["adaptive (2 in flight, combine 8)"]["report"]["decision"]
    print(
        "   adaptive decision: local {:.2f} us/event, send {:.3f} us/event, remote overhead {:.2f} ms + "
        "{:.2f} us/event, target remote share {:.0%}".format(
            (d["local_s_per_event"] or 0) * 1e6,
            (d["send_s_per_event"] or 0) * 1e6,
            (d["remote_overhead_s"] or 0) * 1e3,
            (d["remote_s_per_event"] or 0) * 1e6,
            d["target_remote_share"] or 0,
        )
    )
    best = max(out["all-local"]["events_s"], out["all-remote (2 in flight, combine 8)"]["events_s"])
    print(
        f"   adaptive / best of all-local, all-remote: {out['adaptive (2 in flight, combine 8)']['events_s'] / best:.2f}"
    )
    return out


# --------------------------------------------------------------------------- 3. latency hiding


def latency_hiding(client: Any, events: int, step: int, threads: int, device_ms: float) -> dict[str, Any]:
    def device(ev: Any) -> np.ndarray:
        time.sleep(device_ms / 1e3)  # the accelerator's time; no host CPU
        return np.sqrt(ak.to_numpy(ak.sum(ev.Jet_pt**2, axis=1)))

    def local_rss(ev: Any) -> np.ndarray:
        return np.sqrt(ak.to_numpy(ak.sum(ev.Jet_pt**2, axis=1)))

    def job(mode: str) -> Any:
        proc = ef.Process("latency")
        proc.source = ef.source.synthetic(events, step_size=step, seed=7)
        spec = Remote(resources={"GPU": 1}, mode=mode, client=client, fn=device)  # type: ignore[arg-type]
        proc.producer(consumes=["Jet_pt"], produces=["jets"], label="offloaded", remote=spec)(local_rss)

        @proc.producer(consumes=["Jet_pt", "MET_pt"], produces=["cpu"], label="cpu_work")
        def cpu_work(ev: Any) -> np.ndarray:
            return busy(ev, WORK)

        proc.histogram("jets", bins=50, range=(0, 1000))
        proc.histogram("cpu", bins=50, range=(0, 1000))
        return proc.run(threads=threads, events_in_flight=16)

    print(
        f"\n3. latency hiding: 16 batches in flight, {threads} threads, a producer whose remote "
        f"implementation takes {device_ms:g} ms of device time per request (sleep, no host CPU), "
        "local busy work on every batch"
    )
    out: dict[str, Any] = {}
    for mode in ("local", "remote"):
        res = job(mode)
        wait = next(m for m in res.report["modules"] if m["label"] == "offloaded")["wait_s"]
        cpu = res.report["cpu_s"] / (res.wall_s * threads)
        r = res.report["remote"]["offloaded"]
        out[mode] = {"wall_s": res.wall_s, "cpu_busy": cpu, "waiting_batches": wait / res.wall_s}
        what = "offloaded producer run locally (no waits)" if mode == "local" else "offloaded (waits)"
        print(
            f"   {what:<42} wall {res.wall_s:6.2f} s  offloader CPU {cpu:5.0%} of {threads} cores  "
            f"requests {r['remote_requests']:>3}  mean batches waiting {wait / res.wall_s:5.2f}"
        )
    ratio = out["remote"]["cpu_busy"] / out["local"]["cpu_busy"]
    print(
        f"   CPU busy with requests out / without: {ratio:.2f} "
        f"(wall {out['local']['wall_s'] / out['remote']['wall_s']:.2f}x)"
    )
    out["busy_ratio"] = ratio
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=["overhead", "throughput", "latency"], action="append")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--repeat", type=int, default=3, help="interleaved runs of each throughput config")
    ap.add_argument("--events", type=int, default=400_000)
    ap.add_argument("--step", type=int, default=10_000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device-ms", type=float, default=20.0)
    ap.add_argument(
        "--emulate",
        choices=["sleep", "busy"],
        default="sleep",
        help="how the 10x faster remote is emulated in the throughput benchmark",
    )
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    warnings.filterwarnings("ignore", message=".*Large object.*")
    warnings.filterwarnings("ignore", message=".*Sending large graph.*")
    only = set(args.only or ["overhead", "throughput", "latency"])
    client = start_cluster()
    print(f"cluster: {client.scheduler_info()['address']}, 1 worker with GPU=1, {os.cpu_count()} cores")
    out: dict[str, Any] = {}
    if "overhead" in only:
        out["overhead"] = overhead(client, args.reps, 10.0)
    if "throughput" in only:
        out["throughput"] = throughput(
            client, args.events, args.step, args.threads, args.emulate, args.repeat
        )
    if "latency" in only:
        out["latency"] = latency_hiding(client, args.events // 2, args.step, args.threads, args.device_ms)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, default=str)
    client.close()


if __name__ == "__main__":
    main()
