"""A guarded cut written without ``after=`` (``nMuon >= 1`` and then
``Muon_pt[:, 0] > 25``) on a reorderable path: under the adaptive default
the probe before the first decision sees the cut fail where its guard did
not pass and decide where it did, and the path takes the pair as if it had
been written; the job runs to the end, with the counts of the written
order and of a numpy/awkward reference. A cut that fails on every event
still fails the job, and a failure the probe does not see keeps its error.
"""

from __future__ import annotations

from pathlib import Path

import awkward as ak
import numpy as np
import pytest

import evflow as ef
from evflow._guard_inference import smallest_guard

EVENTS = 24_000
STEP = 3_000


def _events(seed: int = 7, muons_from: int = 0) -> ak.Array:
    """Events with 0-3 muons and 0-4 jets; ``muons_from``: the events before
    it all have a muon (the first batches show no muon-less event)."""
    rng = np.random.default_rng(seed)
    n_mu = rng.poisson(0.9, EVENTS).clip(0, 3)
    n_mu[:muons_from] = np.maximum(n_mu[:muons_from], 1)
    n_jet = rng.poisson(1.8, EVENTS).clip(0, 4)
    return ak.Array(
        {
            "nMuon": n_mu,
            "Muon_pt": ak.unflatten(rng.exponential(30.0, n_mu.sum()), n_mu),
            "nJet": n_jet,
            "Jet_pt": ak.unflatten(rng.exponential(50.0, n_jet.sum()), n_jet),
            "MET_pt": rng.exponential(40.0, EVENTS),
        }
    )


def _source(tmp_path: Path, events: ak.Array) -> ef.source.ParquetSource:
    f = tmp_path / "events.parquet"
    ak.to_parquet(events, f)
    return ef.source.parquet(f, step_size=STEP)


def _process(
    src: ef.source.ParquetSource, paths: tuple[str, ...] = ("sel",), jets: bool = False
) -> ef.Process:
    """``one_muon`` (costly, loose) written before ``lead_muon`` (cheap,
    selective), which needs it: the planner would run ``lead_muon`` first."""
    proc = ef.Process("guarded")
    proc.source = src

    @proc.filter(consumes=["nMuon"])
    def one_muon(ev: ef.Events) -> np.ndarray:
        # Costly: the planner wants the selective cheap cut first.
        return np.asarray(ev.nMuon >= 1) & (np.sin(np.arange(len(ev)) * np.ones((40, 1))).sum(0) < 1e9)

    @proc.filter(consumes=["Muon_pt"])
    def lead_muon(ev: ef.Events) -> np.ndarray:
        return ak.to_numpy(ev.Muon_pt[:, 0] > 60)  # no [:, 0] without a muon

    filters = [one_muon, lead_muon]
    if jets:

        @proc.filter(consumes=["nJet"])
        def two_jets(ev: ef.Events) -> np.ndarray:
            return np.asarray(ev.nJet >= 2) & (np.sin(np.arange(len(ev)) * np.ones((40, 1))).sum(0) < 1e9)

        @proc.filter(consumes=["Jet_pt"])
        def second_jet(ev: ef.Events) -> np.ndarray:
            return ak.to_numpy(ev.Jet_pt[:, 1] > 20)  # no [:, 1] with one jet

        filters = [two_jets, one_muon, second_jet, lead_muon]
    for name in paths:
        proc.path(name, filters, reorderable=True)
        proc.histogram(f"met_{name}", "MET_pt", bins=20, range=(0, 200), after=name)
    return proc


def _reference(events: ak.Array, jets: bool = False) -> np.ndarray:
    """The events the path keeps, computed without the framework."""
    has_mu = ak.to_numpy(events.nMuon >= 1)
    keep = has_mu & ak.to_numpy(ak.fill_none(ak.firsts(events.Muon_pt), 0.0) > 60)
    if jets:
        jet2 = ak.to_numpy(ak.fill_none(ak.pad_none(events.Jet_pt, 2)[:, 1], 0.0))
        keep &= ak.to_numpy(events.nJet >= 2) & (jet2 > 20)
    return keep


def _counts(result: ef.Result, path: str) -> tuple[int, int, list[float]]:
    """What the order must not change (the steps' own counts depend on it)."""
    flow = result.cutflow[path]
    return flow.events, flow.passed, list(np.asarray(result.histograms[f"met_{path}"]))


@pytest.mark.parametrize("threads", [1, 2])
def test_the_guard_is_inferred_and_the_job_counts_as_written(
    tmp_path: Path, threads: int, capsys: pytest.CaptureFixture[str]
) -> None:
    events = _events()
    src = _source(tmp_path, events)
    adaptive = _process(src).run(threads=threads)
    err = capsys.readouterr().err
    fixed = _process(src).run(threads=threads, filter_order="fixed")
    keep = _reference(events)
    assert _counts(adaptive, "sel") == _counts(fixed, "sel")
    assert adaptive.cutflow["sel"].passed == int(keep.sum()) > 0
    expected, _ = np.histogram(ak.to_numpy(events.MET_pt)[keep], bins=20, range=(0, 200))
    assert list(np.asarray(adaptive.histograms["met_sel"])) == list(expected)
    # Reported where the order is explained, and said once.
    assert adaptive.report["inferred_after"] == {"sel": [["lead_muon", "one_muon"]]}
    assert all(c["inferred_after"] == [["lead_muon", "one_muon"]] for c in adaptive.report["orderings"])
    assert "after=[('lead_muon', 'one_muon')] inferred" in adaptive.cutflow["sel"].why
    assert "after=[('lead_muon', 'one_muon')] inferred" in adaptive.summary()
    assert err.count("inferred") == 1
    assert "proc.path('sel', ..., after=[('lead_muon', 'one_muon')])" in err
    assert "inferred_after" not in fixed.report


def test_two_guards_are_inferred_minimally_on_two_paths(tmp_path: Path) -> None:
    events = _events(seed=11)
    src = _source(tmp_path, events)
    adaptive = _process(src, paths=("sr", "cr"), jets=True).run(threads=2)
    fixed = _process(src, paths=("sr", "cr"), jets=True).run(threads=2, filter_order="fixed")
    pairs = [["second_jet", "two_jets"], ["lead_muon", "one_muon"]]
    assert adaptive.report["inferred_after"] == {"sr": pairs, "cr": pairs}
    keep = _reference(events, jets=True)
    for path in ("sr", "cr"):
        assert _counts(adaptive, path) == _counts(fixed, path)
        assert adaptive.cutflow[path].passed == int(keep.sum()) > 0
        order = adaptive.cutflow[path].order
        assert order.index("two_jets") < order.index("second_jet")
        assert order.index("one_muon") < order.index("lead_muon")


def test_a_cut_that_fails_on_every_event_still_fails_the_job(tmp_path: Path) -> None:
    proc = _process(_source(tmp_path, _events()))

    @proc.filter(consumes=["Muon_pt"])
    def broken(ev: ef.Events) -> np.ndarray:
        return ak.to_numpy(ev.Muon_pt[:, 5] > 0)  # a bug: no event has six muons

    proc.path("bug", [proc.modules["one_muon"], broken], reorderable=True)
    with pytest.raises(ef.ModuleError) as caught:
        proc.run(threads=2)
    assert caught.value.module == "broken"
    assert isinstance(caught.value.__cause__, IndexError)


def test_a_failure_the_probe_does_not_see_keeps_its_error(tmp_path: Path) -> None:
    """Muon-less events only after the first batch: the probe sees no
    failure, infers nothing, and the error names the pair to write."""
    with pytest.raises(ef.ModuleError) as caught:
        _process(_source(tmp_path, _events(muons_from=3 * STEP))).run(threads=2)
    assert caught.value.module == "lead_muon"
    assert "after=[('lead_muon', 'one_muon')]" in str(caught.value)


def test_the_smallest_guard_is_found_one_filter_at_a_time() -> None:
    # Events a filter decides on where the guard set passed (None: raised).
    needs = {frozenset([1]), frozenset([0, 1]), frozenset([1, 2]), frozenset([0, 1, 2])}
    kept = {frozenset([1]): 50, frozenset([0, 1]): 20, frozenset([1, 2]): 30, frozenset([0, 1, 2]): 10}
    assert smallest_guard([0, 1, 2], lambda g: kept[g] if g in needs else None) == {1}
    # Two filters guard on their own: the looser one (more events) is it.
    either = {frozenset([0]): 10, frozenset([2]): 40, frozenset([0, 1, 2]): 5}
    assert smallest_guard([0, 1, 2], either.get) == {2}
    # Only two together guard: the third is left out.
    both = {frozenset([0, 2]): 8, frozenset([0, 1, 2]): 5}
    assert smallest_guard([0, 1, 2], both.get) == {0, 2}
    # Nothing guards: a bug, not an order.
    assert smallest_guard([0, 1], lambda g: None) is None
