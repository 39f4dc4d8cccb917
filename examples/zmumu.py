"""Z→μμ on real CMS 2010 dimuon events (uproot-Zmumu.root).

Opposite-charge muon pairs, muon pT and η cuts and a Z mass window on a
reorderable path, the dimuon mass peak, a cut-flow, a Parquet skim and PNG
plots. Run it with

    python examples/zmumu.py                 # or
    python -m evflow run examples/zmumu.py --threads 2 --plot plots/
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

import evflow as ef

DATA = Path(
    os.environ.get("EVFLOW_HEP_DATA", Path(__file__).resolve().parents[2] / "shared" / "data" / "hep")
)


def make_process(
    files: str | os.PathLike[str] | list[str] = DATA / "uproot-Zmumu.root",
    *,
    tree: str = "events",
    step_size: int = 50_000,
    skim: str | None = None,
) -> ef.Process:
    proc = ef.Process("zmumu")
    proc.source = ef.source.auto(files, tree=tree, step_size=step_size)

    @proc.producer(
        consumes=["E1", "px1", "py1", "pz1", "E2", "px2", "py2", "pz2"], produces=["mass", "pt_pair"]
    )
    def dimuon(ev):
        # flat branches are numpy arrays
        e, px = ev.E1 + ev.E2, ev.px1 + ev.px2
        py, pz = ev.py1 + ev.py2, ev.pz1 + ev.pz2
        return {"mass": np.sqrt(np.maximum(e**2 - px**2 - py**2 - pz**2, 0.0)), "pt_pair": np.hypot(px, py)}

    @proc.filter(consumes=["Q1", "Q2"])
    def opposite_charge(ev):
        return ev.Q1 * ev.Q2 < 0

    @proc.filter(consumes=["pt1", "pt2"])
    def muon_pt(ev):
        return (ev.pt1 > 20) & (ev.pt2 > 20)

    @proc.filter(consumes=["eta1", "eta2"])
    def muon_eta(ev):
        return (abs(ev.eta1) < 2.1) & (abs(ev.eta2) < 2.1)

    @proc.filter(consumes=["mass"])
    def z_window(ev):
        return (ev.mass > 60) & (ev.mass < 120)

    proc.path("zmumu", [opposite_charge, muon_pt, muon_eta, z_window], reorderable=True)
    proc.histogram("mass", bins=120, range=(60, 120), after="zmumu", label=r"$m_{\mu\mu}$ [GeV]")
    proc.histogram("pt_pair", bins=50, range=(0, 100), after="zmumu", label=r"$p_T^{\mu\mu}$ [GeV]")
    proc.histogram("pt1", bins=50, range=(0, 150), label=r"leading muon $p_T$, all events [GeV]")
    if skim:
        proc.output(ef.output.parquet(skim, columns=["mass", "pt1", "pt2", "eta1", "eta2"]), select="zmumu")
    return proc


proc = make_process()

if __name__ == "__main__":
    result = proc.run(threads=2, progress=True)
    print(result.summary())
    print("plots:", result.plot("zmumu_plots"))
