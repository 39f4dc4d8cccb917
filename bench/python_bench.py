"""Benchmarks of evflow's Python API (issue: Python API and columnar analysis).

Prints, side by side in one run:

1. the overhead of calling a no-op Python filter, per batch call;
2. the Z→μμ and top-pair examples on N resampled events (default 2 million),
   ROOT (uproot) and Parquet input: a plain uproot+awkward loop in one
   process, evflow with 1 thread and evflow with 2 threads, and the ratios;
3. peak RSS of a 10-million-event streamed run (fresh process).

Derived datasets are created with ``python -m evflow.data resample`` in
``--data-dir`` (default: $EVFLOW_BENCH_DATA or /tmp/evflow-bench), never in
the repository. Usage::

    python bench/python_bench.py                   # everything
    python bench/python_bench.py --events 500000 --skip-rss
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import awkward as ak
import hist
import numpy as np

import evflow as ef
from evflow.source._common import _IterReader

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("EVFLOW_HEP_DATA", ROOT.parent / "shared" / "data" / "hep"))
sys.path.insert(0, str(ROOT / "examples"))

import ttbar_hzz  # noqa: E402
import zmumu  # noqa: E402

# --------------------------------------------------------------------------- data


def dataset(data_dir: Path, name: str, source: str, tree: str, events: int, ext: str) -> Path:
    out = data_dir / f"{name}_{events}.{ext}"
    if not out.exists():
        t0 = time.perf_counter()
        ef.data.resample(str(DATA / source), str(out), tree=tree, events=events, seed=1, chunk=100_000)
        print(f"  made {out} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return out


# --------------------------------------------------------------------------- plain loops


def _batches(path: Path, tree: str, columns: list[str], step: int):
    if path.suffix == ".root":
        import uproot

        yield from uproot.iterate(f"{path}:{tree}", columns, step_size=step, library="ak")
    else:
        import pyarrow.parquet as pq

        for rb in pq.ParquetFile(path).iter_batches(batch_size=step, columns=columns):
            yield ak.Array({c: ak.from_arrow(rb.column(c)) for c in columns})


def plain_zmumu(path: Path, step: int) -> dict[str, Any]:
    """Z→μμ as a plain uproot+awkward loop (same cuts and histograms as examples/zmumu.py)."""
    cols = ["E1", "px1", "py1", "pz1", "E2", "px2", "py2", "pz2", "Q1", "Q2", "pt1", "pt2", "eta1", "eta2"]
    h_mass = hist.Hist(hist.axis.Regular(120, 60, 120))
    h_ptp = hist.Hist(hist.axis.Regular(50, 0, 100))
    h_pt1 = hist.Hist(hist.axis.Regular(50, 0, 150))
    passed = 0
    for b in _batches(path, "events", cols, step):
        h_pt1.fill(ak.to_numpy(b.pt1))
        b = b[b.Q1 * b.Q2 < 0]
        b = b[(b.pt1 > 20) & (b.pt2 > 20)]
        b = b[(abs(b.eta1) < 2.1) & (abs(b.eta2) < 2.1)]
        e = (b.E1 + b.E2).to_numpy()
        px = (b.px1 + b.px2).to_numpy()
        py = (b.py1 + b.py2).to_numpy()
        pz = (b.pz1 + b.pz2).to_numpy()
        mass = np.sqrt(np.maximum(e**2 - px**2 - py**2 - pz**2, 0.0))
        win = (mass > 60) & (mass < 120)
        h_mass.fill(mass[win])
        h_ptp.fill(np.hypot(px, py)[win])
        passed += int(win.sum())
    return {"passed": passed, "mass": h_mass.values()}


def plain_ttbar(path: Path, step: int) -> dict[str, Any]:
    """The top-pair selection of examples/ttbar_hzz.py as a plain loop."""
    cols = [
        "Jet_Px", "Jet_Py", "Jet_Pz", "Jet_E", "Jet_btag", "Jet_ID",
        "Muon_Px", "Muon_Py", "Muon_Pz", "Muon_Iso",
        "Electron_Px", "Electron_Py", "Electron_Pz", "Electron_Iso",
        "MET_px", "MET_py", "EventWeight",
    ]  # fmt: skip
    hs = {n: hist.Hist(hist.axis.Regular(40, 0, hi), storage=hist.storage.Weight()) for n, hi in
          [("met", 200), ("ht", 800), ("mjjj", 800), ("jet_pt", 400)]}  # fmt: skip
    h_nj = hist.Hist(hist.axis.Regular(10, 0, 10))
    passed = 0

    def pt_eta(px, py, pz):
        pt = np.hypot(px, py)
        return pt, np.arcsinh(pz / pt)

    for b in _batches(path, "events", cols, step):
        jpt, jeta = pt_eta(b.Jet_Px, b.Jet_Py, b.Jet_Pz)
        good = (jpt > 30) & (abs(jeta) < 2.4) & b.Jet_ID
        njets = ak.num(jpt[good])
        h_nj.fill(ak.to_numpy(njets))
        mpt, meta = pt_eta(b.Muon_Px, b.Muon_Py, b.Muon_Pz)
        ept, eeta = pt_eta(b.Electron_Px, b.Electron_Py, b.Electron_Pz)
        mu = (mpt > 25) & (abs(meta) < 2.4) & (b.Muon_Iso / mpt < 0.15)
        el = (ept > 25) & (abs(eeta) < 2.4) & (b.Electron_Iso / ept < 0.15)
        nlep = ak.num(mpt[mu]) + ak.num(ept[el])
        keep = ak.to_numpy(nlep == 1) & ak.to_numpy(njets >= 2)
        b, jpt, good = b[keep], jpt[keep], good[keep]
        nb = ak.sum(b.Jet_btag[good] > 0.5, axis=1)
        keep = ak.to_numpy(nb >= 1)
        b, jpt, good = b[keep], jpt[keep], good[keep]
        met = np.hypot(b.MET_px, b.MET_py).to_numpy()
        keep = met > 20
        b, jpt, good, met = b[keep], jpt[keep], good[keep], met[keep]
        w = ak.to_numpy(b.EventWeight).astype(np.float64)
        px, py, pz, e = b.Jet_Px[good], b.Jet_Py[good], b.Jet_Pz[good], b.Jet_E[good]
        s = [ak.to_numpy(ak.sum(c[:, :3], axis=1)).astype(np.float64) for c in (px, py, pz, e)]
        m2 = s[3] ** 2 - s[0] ** 2 - s[1] ** 2 - s[2] ** 2
        mjjj = np.where(ak.to_numpy(ak.num(px) >= 3), np.sqrt(np.maximum(m2, 0.0)), -1.0)
        hs["met"].fill(met, weight=w)
        hs["ht"].fill(ak.to_numpy(ak.sum(jpt[good], axis=1)), weight=w)
        hs["mjjj"].fill(mjjj, weight=w)
        jp, jw = ak.broadcast_arrays(jpt[good], w)
        hs["jet_pt"].fill(ak.to_numpy(ak.flatten(jp)), weight=ak.to_numpy(ak.flatten(jw)))
        passed += len(met)
    return {"passed": passed, "met": hs["met"].values()}


# --------------------------------------------------------------------------- measurements


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def noop_overhead(batches: int = 2000, filters: int = 10, n: int = 1000) -> dict[str, float]:
    """Per-call overhead of a no-op Python filter: (t[F filters] - t[0]) / (batches * F)."""
    from evflow._runtime import BatchData

    col = ak.Array(np.arange(n, dtype=np.float64))
    ones = np.ones(n, dtype=bool)

    class Mem(ef.source.Source):
        step_size = n
        max_events = None

        def check(self, columns):
            pass

        def reader(self, columns, weight):
            it = (BatchData({"x": col}, n, file="<memory>", entry_start=i * n) for i in range(batches))
            return _IterReader(it)

        def describe(self) -> str:
            return "memory"

    def run(k: int, threads: int) -> float:
        proc = ef.Process("noop")
        proc.source = Mem()
        fs = [proc.filter(consumes=["x"], label=f"f{i}")(lambda ev: ones) for i in range(k)]
        if k:
            proc.path("p", fs)
        else:
            proc.analyzer(consumes=["x"], label="sink")(lambda ev: None)
        t0 = time.perf_counter()
        proc.run(threads=threads, events_in_flight=threads + 2)
        return time.perf_counter() - t0

    out = {}
    for threads in (1, 2):
        run(filters, threads)  # warm up
        t0 = min(run(0, threads) for _ in range(3))
        tf = min(run(filters, threads) for _ in range(3))
        out[f"{threads}t"] = (tf - t0) / (batches * filters) * 1e6
    return out


def evflow_run(make: Callable[..., ef.Process], path: Path, step: int, threads: int) -> Callable[[], Any]:
    def go() -> Any:
        r = make(str(path), step_size=step).run(threads=threads)
        return r

    return go


def peak_rss_run(path: Path, step: int, threads: int) -> dict[str, Any]:
    code = f"""
import sys, json, resource, time
sys.path.insert(0, {str(ROOT / "examples")!r})
import zmumu
t0 = time.perf_counter()
r = zmumu.make_process({str(path)!r}, step_size={step}).run(threads={threads}, events_in_flight={threads + 2})
# VmHWM: this process's own peak (ru_maxrss would include the parent's at fork)
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
print(json.dumps({{"events": r.events, "wall_s": time.perf_counter() - t0,
    "peak_rss_mb": int(hwm) / 1024, "passed": r.cutflow["zmumu"].passed}}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=2_000_000)
    p.add_argument("--rss-events", type=int, default=10_000_000)
    p.add_argument("--step-size", type=int, default=100_000)
    p.add_argument("--repeat", type=int, default=2, help="best of N runs")
    p.add_argument("--formats", nargs="+", default=["parquet", "root"], choices=["parquet", "root"])
    p.add_argument("--data-dir", default=os.environ.get("EVFLOW_BENCH_DATA", "/tmp/evflow-bench"))
    p.add_argument("--skip-rss", action="store_true")
    p.add_argument("--json", default=None, help="also write the figures here")
    args = p.parse_args()
    if not DATA.exists():
        print(f"real HEP data not found in {DATA}; set EVFLOW_HEP_DATA", file=sys.stderr)
        return 2
    data_dir = Path(args.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    print(f"# evflow Python benchmark  (cores: {os.cpu_count()}, load avg: {os.getloadavg()[0]:.2f})")
    figures: dict[str, Any] = {}

    ov = noop_overhead()
    figures["noop_filter_us_per_call"] = ov
    print("\n## no-op Python filter overhead per batch call (target <= 20 us)")
    print(f"  1 thread: {ov['1t']:.1f} us    2 threads: {ov['2t']:.1f} us")

    analyses = [
        ("zmumu", "uproot-Zmumu.root", "events", zmumu.make_process, plain_zmumu),
        ("ttbar", "uproot-HZZ.root", "events", ttbar_hzz.make_process, plain_ttbar),
    ]
    print(f"\n## {args.events:,} resampled events, step {args.step_size:,} (best of {args.repeat}); "
          "targets: evflow 2t >= 1.8x plain, 2t >= 1.8x 1t")  # fmt: skip
    print(f"  {'analysis':<8} {'input':<8} {'plain s':>8} {'evflow1 s':>9} {'evflow2 s':>9} "
          f"{'2t/plain':>9} {'2t/1t':>7} {'ev/s (2t)':>11}")  # fmt: skip
    for name, src, tree, make, plain in analyses:
        for fmt in args.formats:
            path = dataset(data_dir, name, src, tree, args.events, fmt)
            t_plain, ref = timed(lambda: plain(path, args.step_size), args.repeat)  # noqa: B023
            t1, r1 = timed(evflow_run(make, path, args.step_size, 1), args.repeat)
            t2, r2 = timed(evflow_run(make, path, args.step_size, 2), args.repeat)
            path_name = next(iter(r2.cutflow)).path
            assert r1.cutflow[path_name].passed == r2.cutflow[path_name].passed == ref["passed"], (
                "results differ"
            )
            row = {"plain_s": t_plain, "evflow_1t_s": t1, "evflow_2t_s": t2,
                   "speedup_vs_plain": t_plain / t2, "speedup_2t_vs_1t": t1 / t2,
                   "events_per_s_2t": args.events / t2}  # fmt: skip
            figures[f"{name}_{fmt}"] = row
            print(f"  {name:<8} {fmt:<8} {t_plain:>8.2f} {t1:>9.2f} {t2:>9.2f} {t_plain / t2:>8.2f}x "
                  f"{t1 / t2:>6.2f}x {args.events / t2:>11,.0f}")  # fmt: skip

    if not args.skip_rss:
        path = dataset(data_dir, "zmumu", "uproot-Zmumu.root", "events", args.rss_events, "parquet")
        rss = peak_rss_run(path, args.step_size, 2)
        figures["rss"] = rss
        print(
            f"\n## {rss['events']:,} events streamed (Z→μμ, Parquet, 2 threads, 4 batches in flight); target < 1500 MB"
        )
        print(
            f"  peak RSS {rss['peak_rss_mb']:.0f} MB, {rss['wall_s']:.1f} s, {rss['events'] / rss['wall_s']:,.0f} ev/s"
        )
    print(
        f"\n(load avg at end: {os.getloadavg()[0]:.2f}; own peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB)"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
