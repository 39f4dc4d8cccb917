"""The eight ADL benchmark queries of examples/adl/adl.py, each compared bin
by bin with an independent plain awkward/numpy implementation written here:
on the real NanoAOD file, on a small resampled dataset (ROOT and Parquet),
and on a generated lepton-rich NanoAOD-like file (the real sample holds no
event for query 5 and a single one for query 8). Results must be identical
for 1 and 2 threads, fixed and adaptive reading, numba and awkward kernels.
Also: the read balancer's decisions on scripted measurements."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import awkward as ak
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import uproot

import evflow as ef
from conftest import ROOT, load_example

adl = load_example("adl/adl")
KERNELS = ["awkward", "numba"] if adl.HAVE_NUMBA else ["awkward"]

# --------------------------------------------------------------------------- reference


def read(path: Path) -> dict[str, Any]:
    """Every branch the queries use, for every event, as awkward arrays."""
    if path.suffix == ".root":
        return uproot.open(path)["Events"].arrays(adl.BRANCHES, library="ak", how=dict)
    table = pq.read_table(path, columns=adl.BRANCHES)
    return {c: ak.from_arrow(table.column(c)) for c in adl.BRANCHES}


def counts(values: Any, bins: int, lo: float, hi: float) -> np.ndarray:
    """Counts like hist's Regular axis with flow bins: [underflow, bins..., overflow]
    (NaN counts as overflow, as in boost-histogram)."""
    v = np.asarray(values, dtype=np.float64)
    out = np.zeros(bins + 2)
    nan = np.isnan(v)
    out[-1] += nan.sum()
    v = v[~nan]
    out[0] = (v < lo).sum()
    out[-1] += (v >= hi).sum()
    inside = v[(v >= lo) & (v < hi)]
    idx = np.minimum(np.floor((inside - lo) / (hi - lo) * bins).astype(np.int64), bins - 1)
    out[1:-1] = np.bincount(idx, minlength=bins)
    return out


def four_vectors(a: dict[str, Any], prefix: str) -> dict[str, ak.Array]:
    """px, py, pz, E (float64) of a collection, computed on the flat values
    as (pT cos φ, pT sin φ, pT sinh η, sqrt(p² + m²))."""
    n = ak.num(a[f"{prefix}_pt"])
    pt, eta, phi, m = (
        ak.to_numpy(ak.flatten(a[f"{prefix}_{k}"])).astype(np.float64) for k in ("pt", "eta", "phi", "mass")
    )
    px, py, pz = pt * np.cos(phi), pt * np.sin(phi), pt * np.sinh(eta)
    e = np.sqrt(px * px + py * py + pz * pz + m * m)
    return {k: ak.unflatten(v, n) for k, v in (("px", px), ("py", py), ("pz", pz), ("e", e))}


def invariant_mass(px: Any, py: Any, pz: Any, e: Any) -> Any:
    return np.sqrt(np.maximum(e * e - px * px - py * py - pz * pz, 0.0))


def reference(a: dict[str, Any]) -> dict[str, Any]:
    """The value(s) each histogram is filled with, query by query."""
    out: dict[str, Any] = {}
    met = ak.to_numpy(a["MET_pt"])
    jet_pt = a["Jet_pt"]
    out["q1_met"] = met
    out["q2_jet_pt"] = ak.to_numpy(ak.flatten(jet_pt))
    out["q3_jet_pt"] = ak.to_numpy(ak.flatten(jet_pt[abs(a["Jet_eta"]) < 1]))
    out["q4_met"] = met[ak.to_numpy(ak.count_nonzero(jet_pt > 40, axis=1)) >= 2]

    # Q5: some opposite-charge muon pair with 60 < m < 120
    mu = four_vectors(a, "Muon")
    i, j = ak.unzip(ak.argcombinations(a["Muon_pt"], 2))
    m = invariant_mass(*(mu[k][i] + mu[k][j] for k in ("px", "py", "pz", "e")))
    q = a["Muon_charge"]
    z = ak.to_numpy(ak.any((q[i] != q[j]) & (m > 60) & (m < 120), axis=1))
    out["q5_met"] = met[z & (ak.to_numpy(a["nMuon"]) >= 2)]

    # Q6: trijet closest to 172.5 GeV in events with >= 3 jets
    three = ak.to_numpy(ak.num(jet_pt)) >= 3
    jv = {k: v[three] for k, v in four_vectors(a, "Jet").items()}
    btag = ak.values_astype(a[adl.BTAG][three], np.float64)
    i, j, k = ak.unzip(ak.argcombinations(jv["px"], 3))
    s = {c: (jv[c][i] + jv[c][j]) + jv[c][k] for c in ("px", "py", "pz", "e")}
    best = ak.argmin(abs(invariant_mass(s["px"], s["py"], s["pz"], s["e"]) - 172.5), axis=1, keepdims=True)
    out["q6_trijet_pt"] = ak.to_numpy(ak.flatten(np.sqrt(s["px"] * s["px"] + s["py"] * s["py"])[best]))
    top = np.maximum(np.maximum(btag[i], btag[j]), btag[k])
    out["q6_trijet_btag"] = ak.to_numpy(ak.flatten(top[best]))

    # Q7: scalar sum of jets (pT > 30) away (dR >= 0.4) from every lepton with pT > 10
    def f64(x: Any) -> Any:
        return ak.values_astype(x, np.float64)

    jeta, jphi, jpt = f64(a["Jet_eta"]), f64(a["Jet_phi"]), f64(jet_pt)
    near = jpt < -1.0  # all False, jagged like the jets
    for lep in ("Electron", "Muon"):
        good = a[f"{lep}_pt"] > 10
        leta, lphi = f64(a[f"{lep}_eta"][good]), f64(a[f"{lep}_phi"][good])
        # every (jet, lepton) difference by broadcasting: jets along axis 1, leptons along axis 2
        de = jeta[:, :, np.newaxis] - leta[:, np.newaxis, :]
        dp = jphi[:, :, np.newaxis] - lphi[:, np.newaxis, :]
        dp = ak.where(dp > np.pi, dp - 2 * np.pi, ak.where(dp < -np.pi, dp + 2 * np.pi, dp))
        near = near | ak.any(np.sqrt(de * de + dp * dp) < 0.4, axis=2)
    out["q7_sum_pt"] = ak.to_numpy(ak.sum(jpt[(jpt > 30) & ~near], axis=1))

    # Q8: events with >= 3 leptons and an SFOS pair; mT of MET and the leading other lepton
    el, mu_ = four_vectors(a, "Electron"), four_vectors(a, "Muon")
    lep = {c: ak.concatenate([el[c], mu_[c]], axis=1) for c in ("px", "py", "pz", "e")}
    lep["pt"] = ak.concatenate([f64(a["Electron_pt"]), f64(a["Muon_pt"])], axis=1)
    lep["phi"] = ak.concatenate([f64(a["Electron_phi"]), f64(a["Muon_phi"])], axis=1)
    lep["q"] = ak.concatenate([a["Electron_charge"], a["Muon_charge"]], axis=1)
    lep["flavour"] = ak.concatenate([a["Electron_charge"] * 0, a["Muon_charge"] * 0 + 1], axis=1)
    i, j = ak.unzip(ak.argcombinations(lep["pt"], 2))
    sfos = (lep["flavour"][i] == lep["flavour"][j]) & (lep["q"][i] != lep["q"][j])
    mll = invariant_mass(*(lep[c][i] + lep[c][j] for c in ("px", "py", "pz", "e")))
    dist = ak.where(sfos, abs(mll - 91.2), np.inf)
    best = ak.argmin(dist, axis=1, keepdims=True)
    keep = (ak.to_numpy(ak.num(lep["pt"])) >= 3) & ak.to_numpy(ak.fill_none(ak.any(sfos, axis=1), False))
    bi, bj = ak.flatten(i[best][keep]), ak.flatten(j[best][keep])
    pt, phi = lep["pt"][keep], lep["phi"][keep]
    idx = ak.local_index(pt)
    others = (idx != bi) & (idx != bj)
    lead = ak.argmax(pt[others], axis=1, keepdims=True)
    lpt = ak.to_numpy(ak.flatten(pt[others][lead]))
    lphi = ak.to_numpy(ak.flatten(phi[others][lead]))
    mphi = ak.to_numpy(a["MET_phi"]).astype(np.float64)[keep]
    out["q8_mt"] = np.sqrt(2.0 * lpt * met.astype(np.float64)[keep] * (1.0 - np.cos(lphi - mphi)))
    return out


def check(result: ef.Result, query: int, ref: dict[str, Any]) -> None:
    for name in adl.histograms(query):
        bins, lo, hi = adl.BINNING[name]
        got = result.histograms[name].values(flow=True)
        np.testing.assert_array_equal(got, counts(ref[name], bins, lo, hi), err_msg=name)


def one_pass(path: Path, step: int, ref: dict[str, Any], kernels: str = "awkward") -> None:
    """All eight queries in one process: each histogram identical to the
    reference (and so to the queries run one by one), for 1 and 2 threads."""
    proc = adl.make_one_pass(str(path), step_size=step, kernels=kernels)
    one = proc.run(threads=1)
    two = proc.run(threads=2)
    for query in adl.QUERIES:
        check(one, query, ref)
        for name in adl.histograms(query):
            assert one.histograms[name] == two.histograms[name], (query, kernels, name)
    assert one.events == len(ref["q1_met"])


def run_all(path: Path, step: int, ref: dict[str, Any]) -> None:
    for query in adl.QUERIES:
        for kernels in KERNELS:
            proc = adl.make_process(query, str(path), step_size=step, kernels=kernels)
            one = proc.run(threads=1)
            two = proc.run(threads=2)
            check(one, query, ref)
            for name in adl.histograms(query):
                assert one.histograms[name] == two.histograms[name], (query, kernels, name)
            assert one.events == two.events == len(ref["q1_met"])


# --------------------------------------------------------------------------- data


@pytest.fixture(scope="module")
def nano() -> Path:
    from conftest import data_file

    return data_file("nanoAOD_2015_CMS_Open_Data_ttbar.root")


@pytest.fixture(scope="module")
def resampled(nano: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("adl")
    out = {}
    for ext in ("parquet", "root"):
        out[ext] = Path(
            ef.data.resample(
                str(nano), str(d / f"nano.{ext}"), events=3000, seed=7, chunk=700, branches=adl.BRANCHES
            )
        )
    return out


@pytest.fixture(scope="module")
def leptonic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated NanoAOD-like file rich in leptons (for queries 5 and 8)."""
    rng = np.random.default_rng(11)
    n = 4000
    cols: dict[str, Any] = {}

    def collection(name: str, mean: float, extra: dict[str, Any]) -> None:
        k = rng.poisson(mean, n).astype(np.uint32)
        m = int(k.sum())
        cols[f"n{name}"] = pa.array(k)
        values = {
            "pt": rng.exponential(25.0, m) + 5.0,
            "eta": rng.uniform(-2.5, 2.5, m),
            "phi": rng.uniform(-np.pi, np.pi, m),
            "mass": rng.exponential(5.0, m)
            if name == "Jet"
            else np.full(m, 0.105 if name == "Muon" else 0.0005),
            **{key: f(m) for key, f in extra.items()},
        }
        offsets = np.concatenate([[0], np.cumsum(k)]).astype(np.int32)
        for key, v in values.items():
            dtype = np.int32 if key == "charge" else np.float32
            cols[f"{name}_{key}"] = pa.ListArray.from_arrays(pa.array(offsets), pa.array(v.astype(dtype)))

    def charge(m: int) -> np.ndarray:
        return np.where(rng.random(m) < 0.5, -1, 1)

    collection("Jet", 5.0, {"btagCSVV2": lambda m: rng.uniform(-0.2, 1.0, m)})
    collection("Muon", 1.6, {"charge": charge})
    collection("Electron", 1.6, {"charge": charge})
    cols["MET_pt"] = pa.array(rng.exponential(40.0, n).astype(np.float32))
    cols["MET_phi"] = pa.array(rng.uniform(-np.pi, np.pi, n).astype(np.float32))
    path = tmp_path_factory.mktemp("leptonic") / "leptonic.parquet"
    pq.write_table(pa.table(cols), path, row_group_size=900)
    return path


# --------------------------------------------------------------------------- tests


def test_real_file(nano: Path) -> None:
    ref = reference(read(nano))
    assert len(ref["q8_mt"]) == 1 and len(ref["q5_met"]) == 0  # what the 200 real events hold
    run_all(nano, 60, ref)


def test_resampled_parquet_and_root(resampled: dict[str, Path]) -> None:
    ref = reference(read(resampled["parquet"]))
    ref_root = reference(read(resampled["root"]))
    for name in ref:
        np.testing.assert_array_equal(ref[name], ref_root[name])
    run_all(resampled["parquet"], 500, ref)
    run_all(resampled["root"], 500, ref)


def test_leptonic(leptonic: Path) -> None:
    ref = reference(read(leptonic))
    assert len(ref["q5_met"]) > 200 and len(ref["q8_mt"]) > 200
    run_all(leptonic, 1000, ref)
    for kernels in KERNELS:
        one_pass(leptonic, 1000, ref, kernels)


@pytest.mark.parametrize("workers,depth", [(1, 1), (3, 2), (2, 6)])
def test_fixed_reading_same_results(resampled: dict[str, Path], workers: int, depth: int) -> None:
    for ext, path in resampled.items():
        base = adl.make_process(6, str(path), step_size=400).run(threads=2)
        proc = adl.make_process(6, str(path), step_size=400)
        proc.source = ef.source.auto(str(path), step_size=400, read_workers=workers, prefetch=depth)
        r = proc.run(threads=2)
        assert r.histograms == base.histograms, ext
        summary = proc.source.balancer.summary()
        assert (summary["workers"], summary["depth"]) == (workers, depth)


def test_max_events_parquet_units(resampled: dict[str, Path]) -> None:
    for limit in (1, 699, 700, 701, 2999, 5000):
        proc = adl.make_process(1, str(resampled["parquet"]), step_size=1000, max_events=limit)
        r = proc.run(threads=2)
        assert r.events == min(limit, 3000)
        assert r.histograms["q1_met"].sum(flow=True) == min(limit, 3000)


def test_examples_import_path() -> None:
    assert (ROOT / "examples" / "adl" / "adl.py").exists()
    assert {f"q{q}" for q in adl.QUERIES} <= set(vars(adl))


# --------------------------------------------------------------------------- balancer


def stats(rate: float, wait: float = 0.0, ahead: float = 0.0, batches: int = 4, **kw: Any) -> dict[str, Any]:
    """Measurements of one interval of 1 s."""
    return {"batches": batches, "events": int(rate), "wall_s": 1.0, "wait_s": wait, "ahead_s": ahead, **kw}


def test_balancer_adds_a_worker_when_starving_and_keeps_it_if_faster() -> None:
    b = ef.source.ReadBalancer(max_workers=4, first_interval=2, start_workers=1, warmup=0)
    assert b.start(100) == (1, 3, 2, 4)
    assert b.checkpoint(stats(1000, wait=0.5)) == (2, 4, 4)  # trial, judged over 2 intervals
    assert b.checkpoint(stats(1500, wait=0.2)) == (2, 4, 2)  # kept (changed: interval stays short)
    assert b.checkpoint(stats(1500, wait=0.2)) == (3, 5, 4)  # still starving: trial of a third
    assert b.checkpoint(stats(1520, wait=0.18)) == (2, 4, 2)  # neither 5% faster nor fed: back to two
    # stable: the interval doubles, and "more" stays closed for a while
    assert b.checkpoint(stats(1500, wait=0.1)) == (2, 4, 4)
    assert b.checkpoint(stats(1500, wait=0.1)) == (2, 4, 8)
    assert b.summary()["settled_checkpoint"] == 2  # the kept trial; the reverted one changed nothing
    b2 = ef.source.ReadBalancer(first_interval=2, start_workers=1, warmup=0)
    b2.start(100)
    assert b2.checkpoint(stats(1000, wait=0.8)) == (2, 4, 4)
    assert b2.checkpoint(stats(1010, wait=0.5)) == (2, 4, 2)  # same rate, but fed: kept
    assert b2.checkpoint({"batches": 2, "events": 10, "wall_s": 0.01, "wait_s": 0.009}) == (
        2,
        4,
        4,
    )  # too short
    assert b2.history[-1]["action"] == "measure longer"
    assert [h["action"] for h in b.history][:4] == [
        "try more workers",
        "keep trial (more workers)",
        "try more workers",
        "revert trial (more workers)",
    ]


def test_balancer_drops_a_worker_when_reading_is_ahead() -> None:
    b = ef.source.ReadBalancer(workers="auto", max_workers=3, first_interval=1, max_interval=4, warmup=0)
    b.start(50)
    b.workers, b.depth = 3, 5
    assert b.checkpoint(stats(1000, ahead=2.4)) == (2, 4, 2)  # trial of one fewer
    assert b.checkpoint(stats(990, ahead=1.5)) == (2, 4, 1)  # not 5% worse: kept
    assert b.checkpoint(stats(980, ahead=1.2)) == (1, 3, 2)  # still well ahead: one fewer again
    assert b.checkpoint(stats(1000)) == (1, 3, 1)  # kept
    assert b.checkpoint(stats(1000)) == (1, 3, 2)  # stable: the interval doubles
    assert b.checkpoint(stats(1000)) == (1, 3, 4)
    assert b.checkpoint(stats(1000)) == (1, 3, 4)  # capped


def test_balancer_reads_deeper_when_bursty() -> None:
    b = ef.source.ReadBalancer(first_interval=2, start_workers=1, warmup=0)
    assert b.start(40)[:2] == (1, 3)
    assert b.checkpoint(stats(1000, wait=0.2, ahead=0.4)) == (1, 4, 2)  # waits, but readers idle: deeper
    assert b.checkpoint(stats(1000, wait=0.2, ahead=0.4)) == (1, 4, 4)  # at most max_depth per worker
    assert b.history[0]["action"] == "deeper"


def test_balancer_fixed_and_memory_cap() -> None:
    b = ef.source.ReadBalancer(workers=2, depth=3)
    assert b.start(10)[:2] == (2, 3)
    assert b.checkpoint(stats(100, wait=0.9))[:2] == (2, 3)  # fixed: never changes
    c = ef.source.ReadBalancer(memory="100MB", first_interval=1, start_workers=1, warmup=0)
    c.start(10)
    w, d, _ = c.checkpoint(stats(100, wait=0.9, bytes=4 * 60 * 2**20))  # 60 MB per batch
    assert (w, d) == (2, 2)
    with pytest.raises(ef.ConfigurationError):
        ef.source.ReadBalancer(workers=0)
    default = ef.source.ReadBalancer(max_workers=3)
    assert default.start(10) == (2, 4, 4, 3)  # starts with two readers
    assert default.checkpoint(stats(100, wait=0.9)) == (2, 4, 4)  # the first checkpoint only measures
    assert default.history[0]["action"] == "warm-up"
    assert default.checkpoint(stats(100, wait=0.9)) == (3, 5, 8)
