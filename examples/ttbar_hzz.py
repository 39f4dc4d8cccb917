"""A top-quark-pair (lepton + jets) selection on uproot-HZZ.root.

Jets (pT, |η|, jet ID), b-tags, exactly one isolated lepton, missing
transverse energy, on a reorderable path with a weighted cut-flow
(``EventWeight``). Run it with

    python -m evflow run examples/ttbar_hzz.py --threads 2 --plot plots/
"""

from __future__ import annotations

import os
from pathlib import Path

import awkward as ak
import numpy as np

import evflow as ef

DATA = Path(
    os.environ.get("EVFLOW_HEP_DATA", Path(__file__).resolve().parents[2] / "shared" / "data" / "hep")
)

JET_PT, JET_ETA, BTAG = 30.0, 2.4, 0.5
LEP_PT, LEP_ETA, LEP_ISO = 25.0, 2.4, 0.15


def _pt_eta(px: ak.Array, py: ak.Array, pz: ak.Array) -> tuple[ak.Array, ak.Array]:
    pt = np.hypot(px, py)
    return pt, np.arcsinh(pz / pt)


def make_process(
    files: str | os.PathLike[str] | list[str] = DATA / "uproot-HZZ.root",
    *,
    tree: str = "events",
    step_size: int = 50_000,
    skim: str | None = None,
) -> ef.Process:
    proc = ef.Process("ttbar", weight="EventWeight")
    proc.source = ef.source.auto(files, tree=tree, step_size=step_size)

    def good_jets(ev):
        pt, eta = _pt_eta(ev.Jet_Px, ev.Jet_Py, ev.Jet_Pz)
        return pt, (pt > JET_PT) & (abs(eta) < JET_ETA) & ev.Jet_ID

    @proc.producer(
        consumes=["Jet_Px", "Jet_Py", "Jet_Pz", "Jet_btag", "Jet_ID"], produces=["njets", "nbjets"]
    )
    def jets(ev):
        pt, good = good_jets(ev)
        return {"njets": ak.num(pt[good]), "nbjets": ak.sum(ev.Jet_btag[good] > BTAG, axis=1)}

    # Needed only by histograms of selected events: computed on the events
    # the path accepted, after the cuts.
    @proc.producer(
        consumes=["Jet_Px", "Jet_Py", "Jet_Pz", "Jet_E", "Jet_ID"], produces=["ht", "mjjj", "jet_pt"]
    )
    def jet_kinematics(ev):
        pt, good = good_jets(ev)
        # three leading good jets (jets are stored by decreasing pT)
        px, py, pz, e = ev.Jet_Px[good], ev.Jet_Py[good], ev.Jet_Pz[good], ev.Jet_E[good]
        three = ak.num(px) >= 3
        s = [ak.to_numpy(ak.sum(c[:, :3], axis=1)).astype(np.float64) for c in (px, py, pz, e)]
        m2 = s[3] ** 2 - s[0] ** 2 - s[1] ** 2 - s[2] ** 2
        mjjj = np.where(ak.to_numpy(three), np.sqrt(np.maximum(m2, 0.0)), -1.0)
        return {"ht": ak.sum(pt[good], axis=1), "mjjj": mjjj, "jet_pt": pt[good]}

    @proc.producer(
        consumes=[
            "Muon_Px",
            "Muon_Py",
            "Muon_Pz",
            "Muon_Iso",
            "Electron_Px",
            "Electron_Py",
            "Electron_Pz",
            "Electron_Iso",
        ],
        produces=["nleptons", "lepton_pt"],
    )
    def leptons(ev):
        mu_pt, mu_eta = _pt_eta(ev.Muon_Px, ev.Muon_Py, ev.Muon_Pz)
        el_pt, el_eta = _pt_eta(ev.Electron_Px, ev.Electron_Py, ev.Electron_Pz)
        mu = (mu_pt > LEP_PT) & (abs(mu_eta) < LEP_ETA) & (ev.Muon_Iso / mu_pt < LEP_ISO)
        el = (el_pt > LEP_PT) & (abs(el_eta) < LEP_ETA) & (ev.Electron_Iso / el_pt < LEP_ISO)
        pts = ak.concatenate([mu_pt[mu], el_pt[el]], axis=1)
        return {"nleptons": ak.num(pts), "lepton_pt": ak.fill_none(ak.max(pts, axis=1), 0.0)}

    @proc.producer(consumes=["MET_px", "MET_py"], produces=["met"])
    def met(ev):
        return np.hypot(ev.MET_px, ev.MET_py)

    @proc.filter(consumes=["nleptons"])
    def one_lepton(ev):
        return ev.nleptons == 1

    @proc.filter(consumes=["njets"])
    def two_jets(ev):
        return ev.njets >= 2

    @proc.filter(consumes=["nbjets"])
    def one_btag(ev):
        return ev.nbjets >= 1

    @proc.filter(consumes=["met"])
    def met_cut(ev):
        return ev.met > 20

    proc.path("ttbar", [one_lepton, two_jets, one_btag, met_cut], reorderable=True)
    proc.histogram("met", bins=40, range=(0, 200), after="ttbar", weight=True, label=r"$E_T^{miss}$ [GeV]")
    proc.histogram("ht", bins=40, range=(0, 800), after="ttbar", weight=True, label=r"$H_T$ [GeV]")
    proc.histogram("mjjj", bins=40, range=(0, 800), after="ttbar", weight=True, label=r"$m_{jjj}$ [GeV]")
    proc.histogram("jet_pt", bins=40, range=(0, 400), after="ttbar", weight=True, label=r"jet $p_T$ [GeV]")
    proc.histogram("njets", bins=10, range=(0, 10), label="good jets per event (all events)")
    if skim:
        proc.output(
            ef.output.parquet(skim, columns=["met", "ht", "njets", "nbjets", "lepton_pt", "jet_pt"]),
            select="ttbar",
        )
    return proc


proc = make_process()

if __name__ == "__main__":
    result = proc.run(threads=2, progress=True)
    print(result.summary())
    print("plots:", result.plot("ttbar_plots"))
