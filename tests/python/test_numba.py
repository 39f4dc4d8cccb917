"""The numba recipe of docs/python.md: a nogil kernel inside a producer."""

from __future__ import annotations

import awkward as ak
import numpy as np
import pytest

import evflow as ef

numba = pytest.importorskip("numba")


@numba.njit(nogil=True, cache=False)
def leading_pair_mass(offsets, pt, eta, phi, out):
    for i in range(len(offsets) - 1):
        a, b = offsets[i], offsets[i + 1]
        if b - a >= 2:
            m2 = 2 * pt[a] * pt[a + 1] * (np.cosh(eta[a] - eta[a + 1]) - np.cos(phi[a] - phi[a + 1]))
            out[i] = np.sqrt(m2)
        else:
            out[i] = -1.0


def test_numba_producer_matches_awkward() -> None:
    proc = ef.Process("numba")
    proc.source = ef.source.synthetic(20_000, step_size=3_000, seed=5)

    @proc.filter(consumes=["MET_pt"])
    def low_met(ev):
        return ev.MET_pt < 50

    @proc.producer(consumes=["Muon_pt", "Muon_eta", "Muon_phi"], produces=["mll"])
    def mll(ev):
        counts = ak.to_numpy(ak.num(ev.Muon_pt))
        offsets = np.concatenate([[0], np.cumsum(counts)])
        flat = [ak.to_numpy(ak.flatten(x)).astype(np.float64) for x in (ev.Muon_pt, ev.Muon_eta, ev.Muon_phi)]
        out = np.empty(len(ev))
        leading_pair_mass(offsets, *flat, out)
        return out

    @proc.filter(consumes=["mll"])
    def z_like(ev):
        return (ev.mll > 80) & (ev.mll < 100)

    proc.path("p", [low_met, z_like])
    proc.histogram("mll", bins=40, range=(80, 100), after="p")
    r = proc.run(threads=2)

    src = ef.source.synthetic(20_000, step_size=3_000, seed=5)
    parts = [src.generate(i, s, min(3_000, 20_000 - s)) for i, s in enumerate(range(0, 20_000, 3_000))]
    c = {k: ak.concatenate([p[k] for p in parts]) for k in ("Muon_pt", "Muon_eta", "Muon_phi", "MET_pt")}
    mu = ak.zip({"pt": c["Muon_pt"], "eta": c["Muon_eta"], "phi": c["Muon_phi"]})
    two = ak.num(mu) >= 2
    m = ak.where(
        two,
        np.sqrt(
            2
            * ak.fill_none(ak.pad_none(mu.pt, 2)[:, 0] * ak.pad_none(mu.pt, 2)[:, 1], 0)
            * (
                np.cosh(ak.fill_none(ak.pad_none(mu.eta, 2)[:, 0] - ak.pad_none(mu.eta, 2)[:, 1], 0))
                - np.cos(ak.fill_none(ak.pad_none(mu.phi, 2)[:, 0] - ak.pad_none(mu.phi, 2)[:, 1], 0))
            )
        ),
        -1.0,
    )
    m = ak.to_numpy(m)
    keep = (ak.to_numpy(c["MET_pt"]) < 50) & (m > 80) & (m < 100)
    assert r.cutflow["p"].passed == keep.sum() > 0
