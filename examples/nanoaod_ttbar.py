"""A NanoAOD analysis: lepton + jets top-pair selection on CMS Open Data
2015 simulated tt̄ events (nanoAOD_2015_CMS_Open_Data_ttbar.root), with
NanoAOD branch names (Jet_*, Muon_*, Electron_*, MET_*).

    python -m evflow run examples/nanoaod_ttbar.py --threads 2 --plot plots/
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

CSVV2_MEDIUM = 0.8484


def make_process(
    files: str | os.PathLike[str] | list[str] = DATA / "nanoAOD_2015_CMS_Open_Data_ttbar.root",
    *,
    tree: str = "Events",
    step_size: int = 100_000,
    skim: str | None = None,
) -> ef.Process:
    proc = ef.Process("nanoaod_ttbar")
    proc.source = ef.source.auto(files, tree=tree, step_size=step_size)

    @proc.producer(
        consumes=[
            "Muon_pt",
            "Muon_eta",
            "Muon_pfRelIso04_all",
            "Electron_pt",
            "Electron_eta",
            "Electron_cutBased",
        ],
        produces=["nleptons", "lepton_pt"],
    )
    def leptons(ev):
        mu = (ev.Muon_pt > 20) & (abs(ev.Muon_eta) < 2.4) & (ev.Muon_pfRelIso04_all < 0.15)
        el = (ev.Electron_pt > 20) & (abs(ev.Electron_eta) < 2.5) & (ev.Electron_cutBased >= 2)
        pts = ak.concatenate([ev.Muon_pt[mu], ev.Electron_pt[el]], axis=1)
        return {"nleptons": ak.num(pts), "lepton_pt": ak.fill_none(ak.max(pts, axis=1), 0.0)}

    def good(ev):
        return (ev.Jet_pt > 20) & (abs(ev.Jet_eta) < 2.4) & (ev.Jet_jetId >= 2)

    @proc.producer(consumes=["Jet_pt", "Jet_eta", "Jet_jetId", "Jet_btagCSVV2"], produces=["njets", "nbjets"])
    def jets(ev):
        g = good(ev)
        return {"njets": ak.num(ev.Jet_pt[g]), "nbjets": ak.sum(ev.Jet_btagCSVV2[g] > CSVV2_MEDIUM, axis=1)}

    # Only histograms and the skim of selected events read these: they are
    # computed after the cuts, on the accepted events only.
    @proc.producer(
        consumes=["Jet_pt", "Jet_eta", "Jet_phi", "Jet_mass", "Jet_jetId"],
        produces=["good_jet_pt", "ht", "m3"],
    )
    def jet_kinematics(ev):
        jet = ev.zip("Jet")[good(ev)]
        # trijet with the largest pT: the hadronic top candidate
        tri = ak.combinations(jet, 3, fields=["a", "b", "c"])
        px = sum(j.pt * np.cos(j.phi) for j in (tri.a, tri.b, tri.c))
        py = sum(j.pt * np.sin(j.phi) for j in (tri.a, tri.b, tri.c))
        pz = sum(j.pt * np.sinh(j.eta) for j in (tri.a, tri.b, tri.c))
        e = sum(np.sqrt((j.pt * np.cosh(j.eta)) ** 2 + j.mass**2) for j in (tri.a, tri.b, tri.c))
        best = ak.argmax(px**2 + py**2, axis=1, keepdims=True)
        m = np.sqrt(np.maximum(e**2 - px**2 - py**2 - pz**2, 0.0))
        return {
            "good_jet_pt": jet.pt,
            "ht": ak.sum(jet.pt, axis=1),
            "m3": ak.fill_none(ak.firsts(m[best]), -1.0),
        }

    @proc.filter(consumes=["nleptons"])
    def one_lepton(ev):
        return ev.nleptons == 1

    @proc.filter(consumes=["njets"])
    def three_jets(ev):
        return ev.njets >= 3

    @proc.filter(consumes=["nbjets"])
    def btag(ev):
        return ev.nbjets >= 1

    @proc.filter(consumes=["MET_pt"])
    def met(ev):
        return ev.MET_pt > 20

    proc.path("ttbar", [one_lepton, three_jets, btag, met], reorderable=True)
    proc.histogram("m3", bins=30, range=(0, 600), after="ttbar", label=r"$M_3$ (highest-$p_T$ trijet) [GeV]")
    proc.histogram("ht", bins=30, range=(0, 900), after="ttbar", label=r"$H_T$ [GeV]")
    proc.histogram("MET_pt", bins=30, range=(0, 300), label=r"$E_T^{miss}$, all events [GeV]")
    proc.histogram("good_jet_pt", bins=30, range=(0, 300), after="ttbar", label=r"jet $p_T$ [GeV]")
    if skim:
        proc.output(
            ef.output.parquet(skim, columns=["ht", "m3", "MET_pt", "lepton_pt", "good_jet_pt"]),
            select="ttbar",
        )
    return proc


proc = make_process()

if __name__ == "__main__":
    result = proc.run(threads=2, progress=True)
    print(result.summary())
    print("plots:", result.plot("nanoaod_plots"))
