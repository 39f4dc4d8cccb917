"""A producer that several cuts of a reorderable path need (issue 14): a
costly ``jets`` producer feeds two cheap jet cuts, beside two selective cuts
that need nothing. It runs once per event, with the first jet cut, so the
best order puts the jet-free cuts first and computes the jets on the events
that pass them.

The first probe before the path times the producer on its own, and the
planner charges it to the first jet cut of each order it weighs, so the
first batch already runs the best order. Before, the probe added the
producer's time to the jet cut it happened to compute it for (``ht``,
written first): the other jet cut (``lead``) looked cheap and, the most
selective, ran first on the first batches, computing the jets on every
event.
"""

from __future__ import annotations

import functools
import itertools
import json
import time
from typing import Any

import awkward as ak
import numpy as np
import pytest

import evflow as ef
from evflow import _runtime as rt

EVENTS = 200_000
STEP = 10_000
SEED = 7
#: Seconds per event: the producer, and each cut.
JETS_S = 20e-6
CUT_S = 1e-6
JET_CUTS = ("ht", "lead")
WRITTEN = ("ht", "lead", "met", "phi")


@functools.cache
def _decisions() -> dict[str, np.ndarray]:
    """Each cut's decision on every event of the job, with plain numpy."""
    src = ef.source.synthetic(EVENTS, step_size=STEP, seed=SEED)
    parts = [src.generate(i, s, min(STEP, EVENTS - s)) for i, s in enumerate(range(0, EVENTS, STEP))]
    met = np.concatenate([ak.to_numpy(p["MET_pt"]) for p in parts])
    phi = np.concatenate([ak.to_numpy(p["MET_phi"]) for p in parts])
    ht, lead = zip(*(_jets(p["Jet_pt"]) for p in parts), strict=True)
    ht_all, lead_all = np.concatenate(ht), np.concatenate(lead)
    cuts = _cuts()
    return {
        "ht": ht_all > cuts["ht"],
        "lead": lead_all > cuts["lead"],
        "met": met > cuts["met"],
        "phi": phi > cuts["phi"],
    }


def _jets(jet_pt: ak.Array) -> tuple[np.ndarray, np.ndarray]:
    """Jet HT and leading jet pT (0 without jets)."""
    ht = ak.to_numpy(ak.sum(jet_pt, axis=1))
    lead = ak.to_numpy(ak.fill_none(ak.max(jet_pt, axis=1), 0.0))
    return ht, lead


@functools.cache
def _cuts() -> dict[str, float]:
    """``ht`` keeps half of the events, ``lead`` a tenth, ``met`` and ``phi`` half each."""
    src = ef.source.synthetic(EVENTS, step_size=STEP, seed=SEED)
    p = src.generate(0, 0, STEP)
    ht, lead = _jets(p["Jet_pt"])
    return {
        "ht": float(np.quantile(ht, 0.5)),
        "lead": float(np.quantile(lead, 0.9)),
        "met": float(np.quantile(ak.to_numpy(p["MET_pt"]), 0.5)),
        "phi": 0.0,
    }


def _cost(order: tuple[str, ...], costs: dict[str, float], shared: bool) -> float:
    """Expected seconds per event of ``order``: each cut's cost on the events
    reaching it, and (``shared``) the producer's on the events reaching the
    first jet cut."""
    d = _decisions()
    reach = np.ones(EVENTS, dtype=bool)
    total, jets = 0.0, False
    for name in order:
        total += costs[name] * reach.mean()
        if shared and name in JET_CUTS and not jets:
            total += JETS_S * reach.mean()
            jets = True
        reach &= d[name]
    return total


def _best(costs: dict[str, float], shared: bool) -> tuple[str, ...]:
    return min(itertools.permutations(WRITTEN), key=lambda o: _cost(o, costs, shared))


def _process(first: dict[int, str], jets_events: list[int]) -> ef.Process:
    """The path, written with the jet cuts first. ``first``: per batch, the
    first cut of its own run (called on the whole batch; probes call the
    cuts on at most a chunk of the first probe); ``jets_events``: the
    events the producer computed."""
    cuts = _cuts()
    proc = ef.Process("shared_producer")
    proc.source = ef.source.synthetic(EVENTS, step_size=STEP, seed=SEED)

    @proc.producer(consumes=["Jet_pt"], produces=["ht_sum", "lead_pt"])
    def jets(ev: ef.Events) -> tuple[np.ndarray, np.ndarray]:
        jets_events[0] += len(ev)
        time.sleep(JETS_S * len(ev))
        return _jets(ev.Jet_pt)

    def cut(name: str, ev: ef.Events, values: np.ndarray) -> np.ndarray:
        if len(ev) == STEP:
            first.setdefault(ev.info.index, name)
        time.sleep(CUT_S * len(ev))
        return np.asarray(values) > cuts[name]

    @proc.filter(consumes=["ht_sum"])
    def ht(ev: ef.Events) -> np.ndarray:
        return cut("ht", ev, ev.ht_sum)

    @proc.filter(consumes=["lead_pt"])
    def lead(ev: ef.Events) -> np.ndarray:
        return cut("lead", ev, ev.lead_pt)

    @proc.filter(consumes=["MET_pt"])
    def met(ev: ef.Events) -> np.ndarray:
        return cut("met", ev, ak.to_numpy(ev.MET_pt))

    @proc.filter(consumes=["MET_phi"])
    def phi(ev: ef.Events) -> np.ndarray:
        return cut("phi", ev, ak.to_numpy(ev.MET_phi))

    proc.path("sel", [ht, lead, met, phi], reorderable=True)
    return proc


def test_the_first_batch_runs_the_jet_free_cuts_before_a_costly_shared_producer() -> None:
    d = _decisions()
    costs = dict.fromkeys(WRITTEN, CUT_S)
    best = _best(costs, shared=True)
    # The oracle runs the jet-free cuts first; charged to the jet cut
    # written first (as the probe did), the producer sends the other jet
    # cut first, which computes the jets on every event.
    assert set(best[:2]) == {"met", "phi"}, best
    blind = _best({**costs, "ht": CUT_S + JETS_S}, shared=False)
    assert blind[0] == "lead", blind
    assert _cost(blind, costs, shared=True) > 2.5 * _cost(best, costs, shared=True)

    first: dict[int, str] = {}
    jets_events = [0]
    r = _process(first, jets_events).run(threads=2, filter_order="adaptive")
    sel = r.cutflow["sel"]
    everything = d["ht"] & d["lead"] & d["met"] & d["phi"]
    assert (sel.events, sel.passed) == (EVENTS, int(everything.sum()))
    # Every batch, the first one included, starts with a jet-free cut.
    assert len(first) == EVENTS // STEP
    assert first[0] in ("met", "phi"), (first, sel.why)
    assert set(first.values()) <= {"met", "phi"}, (first, sel.why)
    assert set(sel.order[:2]) == {"met", "phi"}, (sel.order, sel.why)
    # The producer computed the events passing both jet-free cuts (the
    # oracle's), plus at most the probes' events: the first probe's, and a
    # subsample of each sampled batch; not every event.
    oracle = int((d["met"] & d["phi"]).sum())
    probes = rt.FIRST_PROBE_EVENTS + (EVENTS // STEP) * rt.PROBE_EVENTS
    assert oracle <= jets_events[0] <= oracle + probes, (jets_events[0], oracle, probes)


def test_exported_statistics_carry_the_shared_producer_to_a_seeded_job() -> None:
    """The statistics a job exports (``result.raw["ordering_stats"]``, what
    distributed runs merge and hand to later chunks) hold the producer's
    cost with the cuts that share it; a job seeded with them (no first
    probe) runs the jet-free cuts first from its first batch. Seeded
    without it, the producer was free until timed, and the first batch ran
    the selective jet cut first."""
    from evflow import _evflow
    from evflow._job import run_process

    opts: dict[str, Any] = dict(threads=2, events_in_flight=None, progress=False, executor="threaded",
                                on_error="fail", trace=False, raw=True, filter_order="adaptive")  # fmt: skip
    measured = run_process(_process({}, [0]), **opts)
    assert measured.raw is not None
    stats = json.loads(measured.raw["ordering_stats"])
    shared = stats["sel"]["shared"]
    assert [(s["producer"], s["steps"]) for s in shared] == [("jets", ["ht", "lead"])], shared
    # Sleeping takes at least as long as asked, and not many times longer.
    assert JETS_S <= shared[0]["cost"]["mean_s"] < 3 * JETS_S, shared
    merged = json.loads(_evflow.merge_ordering_stats([measured.raw["ordering_stats"]] * 2))
    assert merged["sel"]["shared"][0]["cost"]["measurements"] == 2 * shared[0]["cost"]["measurements"]

    def seeded(statistics: dict[str, Any]) -> dict[int, str]:
        first: dict[int, str] = {}
        r = run_process(_process(first, [0]), **opts, ordering_stats=json.dumps(statistics))
        assert r.cutflow["sel"].passed == measured.cutflow["sel"].passed
        return first

    # The seeded first batch's order follows from the statistics alone: the
    # costs are set to what the modules sleep, as the measured ones are
    # without load (a loaded machine made the cut costs measured here
    # uneven enough to put `ht` before `lead` in the blind job).
    def scripted(cost: dict[str, Any], seconds: float) -> dict[str, Any]:
        return {**cost, "mean_s": seconds, "se_s": 0.01 * seconds}

    costs = [scripted(c, CUT_S) for c in stats["sel"]["costs"]]
    known = {
        **stats["sel"],
        "costs": costs,
        "shared": [{**shared[0], "cost": scripted(shared[0]["cost"], JETS_S)}],
    }
    first = seeded({"sel": known})
    assert first[0] in ("met", "phi") and set(first.values()) <= {"met", "phi"}, first
    blind = seeded({"sel": {**known, "shared": []}})
    assert blind[0] == "lead", blind

    bad = {"sel": {**stats["sel"], "shared": [{**shared[0], "steps": ["ht", "x"]}]}}
    with pytest.raises(ValueError, match="shared producer 'jets' is needed by 'x'"):
        run_process(_process({}, [0]), **opts, ordering_stats=json.dumps(bad))
