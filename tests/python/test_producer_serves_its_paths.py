"""A producer computes on the events of the paths it serves, not on every
path's. Its product is read by a cut of path ``sel`` guarded by
``after=`` (``pair_mass`` after ``two_muons``) and by a histogram after
``sel``; path ``ctl`` reads nothing of it. Before, the producer computed on
the events any path still held, ``ctl``'s included: ``Muon_pt[:, 1]``
failed on ``ctl``'s events with fewer than two muons, and the job with
it (it ran alone with ``sel``)."""

from __future__ import annotations

from typing import Any

import awkward as ak
import numpy as np
import pytest

import evflow as ef
from evflow._job import _Plan

EVENTS, STEP = 12_000, 2_000


def _pair_mass(pt: Any, eta: Any, phi: Any) -> np.ndarray:
    m2 = 2 * pt[:, 0] * pt[:, 1] * (np.cosh(eta[:, 0] - eta[:, 1]) - np.cos(phi[:, 0] - phi[:, 1]))
    return np.sqrt(np.maximum(ak.to_numpy(m2).astype(np.float64), 0.0))


def _process(calls: list[int]) -> ef.Process:
    proc = ef.Process("serves")
    proc.source = ef.source.synthetic(EVENTS, step_size=STEP, seed=7)

    @proc.producer(consumes=["Muon_pt", "Muon_eta", "Muon_phi"], produces=["mll"])
    def pair(ev: ef.Events) -> np.ndarray:
        calls.append(len(ev))
        return _pair_mass(ev.Muon_pt, ev.Muon_eta, ev.Muon_phi)  # needs two muons

    @proc.filter(consumes=["nMuon"])
    def two_muons(ev: ef.Events) -> Any:
        return ev.nMuon >= 2

    @proc.filter(consumes=["mll"])
    def pair_mass(ev: ef.Events) -> Any:
        return (ev.mll > 10) & (ev.mll < 120)

    @proc.filter(consumes=["MET_pt"])
    def met(ev: ef.Events) -> Any:
        return ev.MET_pt > 20

    proc.path("sel", [two_muons, pair_mass], reorderable=True, after=[("pair_mass", "two_muons")])
    proc.path("ctl", [met])
    proc.histogram("mll", bins=20, range=(0, 200), after="sel")
    return proc


def _reference() -> tuple[int, np.ndarray]:
    cols = ["nMuon", "Muon_pt", "Muon_eta", "Muon_phi"]
    reader = ef.source.synthetic(EVENTS, step_size=STEP, seed=7).reader(cols, None)
    masses = []
    while (batch := reader.next_batch()) is not None:
        c = batch.columns
        two = ak.to_numpy(c["nMuon"]) >= 2
        mll = _pair_mass(c["Muon_pt"][two], c["Muon_eta"][two], c["Muon_phi"][two])
        masses.append(mll[(mll > 10) & (mll < 120)])
    m = np.concatenate(masses)
    return len(m), np.histogram(m, bins=20, range=(0, 200))[0]


@pytest.mark.parametrize("order", ["fixed", "adaptive"])
def test_guarded_producer_beside_another_path(order: str) -> None:
    calls: list[int] = []
    result = _process(calls).run(threads=2, filter_order=order)
    accepted, counts = _reference()
    assert result.cutflow["sel"].passed == accepted
    assert np.array_equal(result.histograms["mll"].values(), counts)
    if order == "fixed":  # on the events two_muons kept, no more
        assert sum(calls) == result.cutflow["sel"]["two_muons"].passed


def test_paths_each_producer_serves() -> None:
    """``live_paths``: the paths whose filters, or whose histograms, skims
    and analyzers, read a producer's products; ``None`` where something
    reads every event."""
    proc = _process([])

    @proc.producer(consumes=["MET_pt"], produces=["met2"])
    def doubled(ev: ef.Events) -> Any:
        return ev.MET_pt * 2

    @proc.producer(consumes=["Jet_pt"], produces=["ht"])
    def ht(ev: ef.Events) -> Any:
        return ak.sum(ev.Jet_pt, axis=1)

    proc.histogram("met2", bins=10, range=(0, 100), after="ctl")
    proc.histogram("ht", bins=10, range=(0, 100))
    plan = _Plan(proc)
    serves = {m["label"]: m["live_paths"] for m in plan.modules if m["kind"] == "producer"}
    assert serves == {"pair": [0], "doubled": [1], "ht": None}
