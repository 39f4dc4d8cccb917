"""The three examples, each checked against an independent plain
uproot + awkward/numpy computation of the same numbers (exact agreement)."""

from __future__ import annotations

from pathlib import Path

import awkward as ak
import numpy as np
import pyarrow.parquet as pq
import pytest
import uproot

from conftest import load_example


def _hist_counts(
    values: np.ndarray, bins: int, lo: float, hi: float, weights: np.ndarray | None = None
) -> np.ndarray:
    """Counts like hist's Regular axis: [lo, hi) bins, overflow dropped."""
    v = np.asarray(values, dtype=np.float64)
    inside = (v >= lo) & (v < hi)
    idx = np.floor((v[inside] - lo) / (hi - lo) * bins).astype(np.int64)
    idx = np.minimum(idx, bins - 1)
    w = None if weights is None else np.asarray(weights, dtype=np.float64)[inside]
    return np.bincount(idx, weights=w, minlength=bins)


def _same_selection(adaptive, fixed, path: str) -> None:
    """The default (adaptive) filter order selects exactly what the written
    order selects: the same accepted events and the same histograms. Per-step
    counts are compared only for the fixed order: when the adaptive planner
    changes the order during a run, each step's counts add up events seen at
    different places of the path, which is not a chain."""
    assert adaptive.cutflow[path].policy == "adaptive"
    assert adaptive.cutflow[path].events == fixed.cutflow[path].events
    assert adaptive.cutflow[path].passed == fixed.cutflow[path].passed
    for name, h in fixed.histograms.items():
        np.testing.assert_allclose(adaptive.histograms[name].values(), h.values(), rtol=1e-12)


@pytest.mark.parametrize("threads,step", [(2, 300), (1, 1000)])
def test_zmumu(zmumu_file: Path, tmp_path: Path, threads: int, step: int) -> None:
    ex = load_example("zmumu")
    skim = tmp_path / "skim.parquet"
    result = ex.make_process(zmumu_file, step_size=step, skim=str(skim)).run(
        threads=threads, filter_order="fixed"
    )
    adaptive = ex.make_process(zmumu_file, step_size=step).run(threads=threads)
    _same_selection(adaptive, result, "zmumu")

    a = uproot.open(zmumu_file)["events"].arrays(library="np")
    e, px, py, pz = (a[f"{c}1"] + a[f"{c}2"] for c in ("E", "px", "py", "pz"))
    mass = np.sqrt(np.maximum(e**2 - px**2 - py**2 - pz**2, 0.0))
    cuts = {
        "opposite_charge": a["Q1"] * a["Q2"] < 0,
        "muon_pt": (a["pt1"] > 20) & (a["pt2"] > 20),
        "muon_eta": (np.abs(a["eta1"]) < 2.1) & (np.abs(a["eta2"]) < 2.1),
        "z_window": (mass > 60) & (mass < 120),
    }
    path = result.cutflow["zmumu"]
    assert path.events == len(mass) == 2304
    keep = np.ones(len(mass), bool)
    for name in path.order:  # execution order
        seen = keep.sum()
        keep &= cuts[name]
        assert (path[name].seen, path[name].passed) == (seen, keep.sum()), name
    assert path.passed == keep.sum()

    h = result.histograms["mass"]
    np.testing.assert_array_equal(h.values(), _hist_counts(mass[keep], 120, 60, 120))
    np.testing.assert_array_equal(
        result.histograms["pt_pair"].values(), _hist_counts(np.hypot(px, py)[keep], 50, 0, 100)
    )
    np.testing.assert_array_equal(result.histograms["pt1"].values(), _hist_counts(a["pt1"], 50, 0, 150))

    t = pq.read_table(skim)
    assert result.outputs[str(skim)] == keep.sum() == t.num_rows
    np.testing.assert_array_equal(t.column("mass").to_numpy(), mass[keep])
    np.testing.assert_array_equal(t.column("pt2").to_numpy(), a["pt2"][keep])
    # one 2304-entry cluster, split into equal parts of about `step`
    assert result.report["batches"] == result.report["events"] == round(2304 / step)
    assert not list(tmp_path.glob(".*evflow-partial*"))


def test_ttbar_hzz(hzz_file: Path, tmp_path: Path) -> None:
    ex = load_example("ttbar_hzz")
    result = ex.make_process(hzz_file, step_size=400).run(threads=2, filter_order="fixed")
    _same_selection(ex.make_process(hzz_file, step_size=400).run(threads=2), result, "ttbar")

    a = uproot.open(hzz_file)["events"].arrays()
    jpt = np.hypot(a.Jet_Px, a.Jet_Py)
    jeta = np.arcsinh(a.Jet_Pz / jpt)
    good = (jpt > 30) & (abs(jeta) < 2.4) & a.Jet_ID
    njets = ak.to_numpy(ak.num(jpt[good]))
    nb = ak.to_numpy(ak.sum(a.Jet_btag[good] > 0.5, axis=1))

    def iso(prefix: str) -> ak.Array:
        pt = np.hypot(a[f"{prefix}_Px"], a[f"{prefix}_Py"])
        eta = np.arcsinh(a[f"{prefix}_Pz"] / pt)
        return pt[(pt > 25) & (abs(eta) < 2.4) & (a[f"{prefix}_Iso"] / pt < 0.15)]

    nlep = ak.to_numpy(ak.num(iso("Muon")) + ak.num(iso("Electron")))
    met = np.hypot(ak.to_numpy(a.MET_px), ak.to_numpy(a.MET_py))
    w = ak.to_numpy(a.EventWeight).astype(np.float64)
    cuts = {"one_lepton": nlep == 1, "two_jets": njets >= 2, "one_btag": nb >= 1, "met_cut": met > 20}

    path = result.cutflow["ttbar"]
    keep = np.ones(len(met), bool)
    for name in path.order:
        seen = keep.copy()
        keep &= cuts[name]
        step = path[name]
        assert (step.seen, step.passed) == (seen.sum(), keep.sum()), name
        assert step.weighted_seen == pytest.approx(w[seen].sum(), rel=1e-9)
        assert step.weighted_passed == pytest.approx(w[keep].sum(), rel=1e-9)
    assert path.passed == keep.sum() > 0
    assert result.cutflow.weighted

    np.testing.assert_allclose(
        result.histograms["met"].values(), _hist_counts(met[keep], 40, 0, 200, w[keep]), rtol=1e-9
    )
    np.testing.assert_array_equal(result.histograms["njets"].values(), _hist_counts(njets, 10, 0, 10))
    jets_sel = ak.to_numpy(ak.flatten(jpt[good][keep]))
    wj = ak.to_numpy(ak.flatten(ak.broadcast_arrays(w[keep], jpt[good][keep])[0]))
    np.testing.assert_allclose(
        result.histograms["jet_pt"].values(), _hist_counts(jets_sel, 40, 0, 400, wj), rtol=1e-9
    )


def test_nanoaod(nano_file: Path, tmp_path: Path) -> None:
    ex = load_example("nanoaod_ttbar")
    skim = tmp_path / "nano.parquet"
    result = ex.make_process(nano_file, step_size=48, skim=str(skim)).run(threads=2, filter_order="fixed")
    _same_selection(ex.make_process(nano_file, step_size=48).run(threads=2), result, "ttbar")

    a = uproot.open(nano_file)["Events"].arrays(
        [
            "Muon_pt",
            "Muon_eta",
            "Muon_pfRelIso04_all",
            "Electron_pt",
            "Electron_eta",
            "Electron_cutBased",
            "Jet_pt",
            "Jet_eta",
            "Jet_phi",
            "Jet_mass",
            "Jet_jetId",
            "Jet_btagCSVV2",
            "MET_pt",
        ]
    )
    mu = (a.Muon_pt > 20) & (abs(a.Muon_eta) < 2.4) & (a.Muon_pfRelIso04_all < 0.15)
    el = (a.Electron_pt > 20) & (abs(a.Electron_eta) < 2.5) & (a.Electron_cutBased >= 2)
    nlep = ak.to_numpy(ak.num(a.Muon_pt[mu]) + ak.num(a.Electron_pt[el]))
    good = (a.Jet_pt > 20) & (abs(a.Jet_eta) < 2.4) & (a.Jet_jetId >= 2)
    pt, eta, phi, m = (a[f"Jet_{c}"][good] for c in ("pt", "eta", "phi", "mass"))
    njets = ak.to_numpy(ak.num(pt))
    nb = ak.to_numpy(ak.sum(a.Jet_btagCSVV2[good] > 0.8484, axis=1))
    ht = ak.to_numpy(ak.sum(pt, axis=1))
    met = ak.to_numpy(a.MET_pt)
    cuts = {"one_lepton": nlep == 1, "three_jets": njets >= 3, "btag": nb >= 1, "met": met > 20}
    path = result.cutflow["ttbar"]
    keep = np.ones(len(met), bool)
    for name in path.order:
        seen = keep.sum()
        keep &= cuts[name]
        assert (path[name].seen, path[name].passed) == (seen, keep.sum()), name

    # M3 with plain loops over events: the highest-pT trijet's mass.
    m3 = []
    for i in np.flatnonzero(keep):
        best, best_pt2 = -1.0, -1.0
        j = [(pt[i][k], eta[i][k], phi[i][k], m[i][k]) for k in range(len(pt[i]))]
        for x in range(len(j)):
            for y in range(x + 1, len(j)):
                for z in range(y + 1, len(j)):
                    px = sum(j[q][0] * np.cos(j[q][2]) for q in (x, y, z))
                    py = sum(j[q][0] * np.sin(j[q][2]) for q in (x, y, z))
                    pz = sum(j[q][0] * np.sinh(j[q][1]) for q in (x, y, z))
                    e = sum(np.sqrt((j[q][0] * np.cosh(j[q][1])) ** 2 + j[q][3] ** 2) for q in (x, y, z))
                    if px**2 + py**2 > best_pt2:
                        best_pt2, best = px**2 + py**2, np.sqrt(max(e**2 - px**2 - py**2 - pz**2, 0.0))
        m3.append(best)
    t = pq.read_table(skim)
    np.testing.assert_allclose(t.column("m3").to_numpy(), m3, rtol=1e-5)
    np.testing.assert_array_equal(t.column("ht").to_numpy(), ht[keep])
    np.testing.assert_array_equal(result.histograms["ht"].values(), _hist_counts(ht[keep], 30, 0, 900))
    np.testing.assert_array_equal(result.histograms["MET_pt"].values(), _hist_counts(met, 30, 0, 300))
    assert result.histograms["m3"].sum() == keep.sum()
