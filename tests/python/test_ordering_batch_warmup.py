"""The planner's warm-up on batches (issue 14): a Python job's observations
are batches of many events, so the warm-up is counted in the events they
carry (64, with at least 4 batches for the timings), not in 64 observations
meant for single events. A job of 20 batches is then probed (every filter on
a subsample of each batch) only during its first batches, and ``hepframe``
acts after 4 batches instead of keeping the written order for 64.

The path: an expensive cut that keeps almost every event, written before a
cheap one that keeps about one event in seven. The cuts count the events
they are called on (the work, deterministic) and the accepted events are
checked against numpy.
"""

from __future__ import annotations

import functools
import time
from collections import Counter

import awkward as ak
import numpy as np

import evflow as ef
from evflow import _runtime as rt

EVENTS = 400_000
STEP = 20_000
SEED = 3
#: Seconds per event the expensive cut takes (the cheap one: numpy only).
HEAVY_S = 2e-6
#: A call on more events than a chunk of the first probe is a batch's own
#: run; smaller ones are probes (the subsample of a sampled batch, the first
#: probe's chunks and its calls on a few events).
OWN_RUN = rt.FIRST_PROBE_EVENTS // rt.FIRST_PROBE_CHUNKS


@functools.cache
def _columns() -> tuple[np.ndarray, np.ndarray]:
    """MET and jet HT of every event of the job's source."""
    src = ef.source.synthetic(EVENTS, step_size=STEP, seed=SEED)
    parts = [src.generate(i, s, min(STEP, EVENTS - s)) for i, s in enumerate(range(0, EVENTS, STEP))]
    met = np.concatenate([ak.to_numpy(p["MET_pt"]) for p in parts])
    ht = np.concatenate([ak.to_numpy(ak.sum(p["Jet_pt"], axis=1)) for p in parts])
    return met, ht


def _cuts() -> tuple[float, float]:
    """The expensive cut keeps 98% of the events (jet HT), the cheap one 14% (MET)."""
    met, ht = _columns()
    return float(np.quantile(ht, 0.02)), float(np.quantile(met, 0.86))


def _decisions() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """MET of every event, and the decisions of the expensive and the cheap cut."""
    met, ht = _columns()
    ht_cut, met_cut = _cuts()
    return met, ht > ht_cut, met > met_cut


def _run(policy: str, threads: int) -> tuple[ef.Result, dict[str, Counter[int]]]:
    """The job under ``policy``; per cut, its calls by the events they got."""
    ht_cut, met_cut = _cuts()
    calls: dict[str, Counter[int]] = {"heavy": Counter(), "cheap": Counter()}
    proc = ef.Process(f"warmup_{policy}")
    proc.source = ef.source.synthetic(EVENTS, step_size=STEP, seed=SEED)

    @proc.filter(consumes=["Jet_pt"])
    def heavy(ev: ef.Events) -> np.ndarray:
        calls["heavy"][len(ev)] += 1
        time.sleep(HEAVY_S * len(ev))
        return ak.to_numpy(ak.sum(ev.Jet_pt, axis=1)) > ht_cut

    @proc.filter(consumes=["MET_pt"])
    def cheap(ev: ef.Events) -> np.ndarray:
        calls["cheap"][len(ev)] += 1
        return ak.to_numpy(ev.MET_pt) > met_cut

    proc.path("sel", [heavy, cheap], reorderable=True)
    proc.histogram("met", "MET_pt", after="sel", bins=40, range=(0.0, 400.0))
    return proc.run(threads=threads, filter_order=policy), calls


def _work(calls: Counter[int], own: bool | None = None) -> int:
    """Events a cut was called on: all, in the batches' own runs, or in probes."""
    return sum(n * k for n, k in calls.items() if own is None or (n > OWN_RUN) == own)


def _check_results(r: ef.Result, calls: dict[str, Counter[int]]) -> None:
    """The accepted events and their histogram are numpy's; each cut's
    cut-flow counts the events its own runs saw."""
    met, heavy_pass, cheap_pass = _decisions()
    both = heavy_pass & cheap_pass
    sel = r.cutflow["sel"]
    assert (sel.events, sel.passed) == (EVENTS, int(both.sum()))
    expected, _ = np.histogram(met[both], bins=40, range=(0.0, 400.0))
    assert np.array_equal(r.histograms["met"].values(), expected)
    for name, passes in (("heavy", heavy_pass), ("cheap", cheap_pass)):
        assert sel[name].seen == _work(calls[name], own=True), name
        assert sel[name].passed <= int(passes.sum())


def test_a_short_job_is_probed_only_during_its_warm_up_and_does_less_work_than_fixed() -> None:
    fixed, fixed_calls = _run("fixed", threads=2)
    _check_results(fixed, fixed_calls)
    _met, heavy_pass, _cheap = _decisions()
    # The written order: the expensive cut on every event, the cheap one
    # on what it keeps.
    assert fixed.cutflow["sel"]["heavy"].seen == EVENTS
    assert fixed.cutflow["sel"]["cheap"].seen == int(heavy_pass.sum())
    adaptive, calls = _run("adaptive", threads=2)
    _check_results(adaptive, calls)
    sel = adaptive.cutflow["sel"]
    assert sel.order == ["cheap", "heavy"], sel.why
    # Far less work for the expensive cut over the whole job, probes included.
    assert _work(calls["heavy"]) < 0.25 * _work(fixed_calls["heavy"]), calls["heavy"]
    # Probes: the first one (before the first batch's path), and the
    # subsamples of the batches of the warm-up (4 batches, some more in
    # flight when it ends) and of the few sampled after it. A warm-up of 64
    # batches probed all 20.
    probed = calls["heavy"][rt.PROBE_EVENTS]
    assert probed <= 8, calls["heavy"]
    first_probe = rt.FIRST_PROBE_EVENTS + rt.FIRST_PROBE_CHUNKS * rt.FIRST_PROBE_FEW
    assert _work(calls["heavy"], own=False) <= first_probe + 8 * rt.PROBE_EVENTS, calls["heavy"]


def test_hepframe_acts_after_its_warm_up_on_a_short_job() -> None:
    fixed, fixed_calls = _run("fixed", threads=1)
    r, calls = _run("hepframe", threads=1)
    _check_results(r, calls)
    sel = r.cutflow["sel"]
    assert sel.order == ["cheap", "heavy"], sel.why
    assert sel.why.startswith("hepframe: chosen "), sel.why
    changes = [o for o in r.report["orderings"] if not str(o["reason"]).startswith("in use at the end")]
    assert changes and changes[0]["at_event"] <= 8, changes
    # HEP-Frame samples nothing: the cuts ran only in the batches' own runs.
    assert _work(calls["heavy"], own=False) == 0
    assert _work(calls["heavy"]) < 0.5 * _work(fixed_calls["heavy"]), calls["heavy"]
    assert sel.passed == fixed.cutflow["sel"].passed
