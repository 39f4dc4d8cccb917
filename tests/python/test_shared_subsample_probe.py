"""The subsample probe of a sampled batch (the adaptive planner's per-event
joint statistics) for a filter on several paths: its occurrences share
its decisions by batch and events, so the filter decides them once, while
the probe before the first decision still times calls of its own."""

from __future__ import annotations

import numpy as np

import evflow as ef
from evflow import _runtime as rt
from evflow._job import _Plan


def _process(calls: list[int]) -> ef.Process:
    proc = ef.Process("variations")
    proc.source = ef.source.synthetic(4_000, step_size=4_000, seed=4)

    @proc.filter(consumes=["MET_pt"])
    def met(ev: ef.Events) -> np.ndarray:
        calls.append(len(ev))
        return ev.MET_pt > 20

    for name, n_jet in (("sr", 2), ("sr_up", 3), ("sr_down", 1)):
        jets = proc.filter(consumes=["nJet"], label=f"jets_{name}")(lambda ev, n=n_jet: ev.nJet >= n)
        proc.path(name, [met, jets], reorderable=True)
    return proc


def test_a_filter_on_several_paths_decides_a_probes_events_once() -> None:
    calls: list[int] = []
    plan = _Plan(_process(calls))
    columns = ef.source.synthetic(4_000, step_size=4_000, seed=4).generate(0, 0, 4_000)
    data = rt.BatchData({b: columns[b] for b in plan.branches}, 4_000)
    data.index = 0
    runners = [m["runner"] for m in plan.modules if m["label"].startswith("met@")]
    assert len(runners) == 3
    events = rt.probe_indices(4_000)
    decided = [r.probe(data, events, []) for r in runners]
    assert calls == [len(events)]
    expected = (np.asarray(columns["MET_pt"])[events] > 20).tolist()
    assert all(d == ([True] * len(events), expected) for d in decided)

    # Other events, another batch: decided again.
    runners[1].probe(data, events[:100], [])
    other = rt.BatchData({b: columns[b] for b in plan.branches}, 4_000)
    other.index = 1
    runners[2].probe(other, events, [])
    assert calls == [len(events), 100, len(events)]

    # The probe before the first decision times calls of its own.
    runners[0].timed_probe(data, events, [])
    assert calls[-1] == len(events) and len(calls) == 4
