"""The probe before the planner's first decision, for a filter on several
reorderable paths (a selection and its systematic variations sharing their
cuts): the paths probed on the same batch after the first one take its
decisions and timings, and those of the producers it ran, instead of
calling it again."""

from __future__ import annotations

import awkward as ak
import numpy as np

import evflow as ef
from evflow import _runtime as rt
from evflow._first_probe import FirstProbe
from evflow._job import _Plan

EVENTS = 10_000


def _process(calls: dict[str, int]) -> ef.Process:
    proc = ef.Process("variations")
    proc.source = ef.source.synthetic(EVENTS, step_size=EVENTS, seed=2)

    @proc.producer(consumes=["Muon_pfRelIso04_all"], produces=["n_iso"])
    def isolated_muons(ev: ef.Events) -> np.ndarray:
        calls["isolated_muons"] = calls.get("isolated_muons", 0) + 1
        return ak.to_numpy(ak.sum(ev.Muon_pfRelIso04_all < 0.25, axis=1))

    @proc.filter(consumes=["n_iso"])
    def iso(ev: ef.Events) -> np.ndarray:
        calls["iso"] = calls.get("iso", 0) + 1
        return ev.n_iso >= 1

    @proc.filter(consumes=["MET_pt"])
    def met(ev: ef.Events) -> np.ndarray:
        return ev.MET_pt > 20

    for name, scale in (("sr", 1.0), ("sr_up", 1.05), ("sr_down", 0.95)):
        jets = proc.filter(consumes=["Jet_pt"], label=f"jets_{name}")(
            lambda ev, scale=scale: ak.to_numpy(ak.sum(ev.Jet_pt * scale > 30, axis=1) >= 2)
        )
        proc.path(name, [iso, met, jets], reorderable=True)
    return proc


def test_a_filter_on_several_paths_is_probed_once_per_batch() -> None:
    calls: dict[str, int] = {}
    proc = _process(calls)
    plan = _Plan(proc)
    src = ef.source.synthetic(EVENTS, step_size=EVENTS, seed=2)
    columns = src.generate(0, 0, EVENTS)
    data = rt.BatchData({b: columns[b] for b in plan.branches}, EVENTS)
    probe = FirstProbe.of(plan, proc)
    probed = {name: probe(data, plan.path_index[name]) for name in ("sr", "sr_up", "sr_down")}
    # Each filter call on the probe: a chunk and a small call before it.
    assert calls["iso"] == 2 * rt.FIRST_PROBE_CHUNKS
    assert calls["isolated_muons"] == 1
    iso = ak.to_numpy(ak.sum(columns["Muon_pfRelIso04_all"] < 0.25, axis=1)) >= 1
    events = rt.probe_indices(EVENTS, rt.FIRST_PROBE_EVENTS)
    first = probed["sr"]
    assert first is not None
    for name, result in probed.items():
        assert result is not None, name
        known, passed, seconds, producers = result
        assert known[0] == [True] * len(events)
        assert passed[0] == iso[events].tolist()
        assert seconds[0] == first[2][0] and seconds[0]
        # Each path's planner charges the producer the shared step ran.
        assert [label for label, _s, _n in producers] == ["isolated_muons"]
        assert known[2] == [True] * len(events)  # its own jet cut, called for it

    # A later batch is probed again.
    other = rt.BatchData({b: columns[b] for b in plan.branches}, EVENTS)
    assert probe(other, plan.path_index["sr"]) is not None
    assert calls["iso"] == 4 * rt.FIRST_PROBE_CHUNKS


def test_paths_sharing_filters_accept_what_numpy_selects() -> None:
    result = _process({}).run(threads=2)
    src = ef.source.synthetic(EVENTS, step_size=EVENTS, seed=2)
    columns = src.generate(0, 0, EVENTS)
    iso = ak.to_numpy(ak.sum(columns["Muon_pfRelIso04_all"] < 0.25, axis=1)) >= 1
    met = ak.to_numpy(columns["MET_pt"]) > 20
    for name, scale in (("sr", 1.0), ("sr_up", 1.05), ("sr_down", 0.95)):
        jets = ak.to_numpy(ak.sum(columns["Jet_pt"] * scale > 30, axis=1) >= 2)
        assert result.cutflow[name].passed == int((iso & met & jets).sum())
