"""A guarded filter's producer (``after=[("second", "two")]`` where
``second`` reads a product ``Jet_Px[:, 1]`` that only events with two jets
have) runs only on the events the guard passed, under every ordering
policy, as the path does. Before, the adaptive ordering's first probe
computed the product on its whole subsample: ``IndexError``, or a probe
that decided nothing."""

from __future__ import annotations

from pathlib import Path

import awkward as ak
import numpy as np
import pytest
import uproot

import evflow as ef
from evflow._first_probe import FirstProbe
from evflow._job import _Plan
from evflow._runtime import BatchData


def _process(path: Path, step_size: int) -> ef.Process:
    proc = ef.Process("guarded_producer")
    proc.source = ef.source.root(str(path), tree="events", step_size=step_size)

    @proc.filter(consumes=["NJet"])
    def two(ev: ef.Events) -> np.ndarray:
        return ev.NJet >= 2

    @proc.producer(consumes=["Jet_Px"], produces=["px2"])
    def px2(ev: ef.Events) -> np.ndarray:
        return ak.to_numpy(ev.Jet_Px[:, 1])  # IndexError on an event with fewer than two jets

    @proc.filter(consumes=["px2"])
    def second(ev: ef.Events) -> np.ndarray:
        return ev.px2 > 20

    # Written guarded cut first: every order must run `two` before it.
    proc.path("p", [second, two], reorderable=True, after=[("second", "two")])
    return proc


def _expected(path: Path) -> tuple[int, int]:
    """(events, passed) of the path, with plain numpy."""
    arrays = uproot.open(path)["events"].arrays(["NJet", "Jet_Px"])
    njet = ak.to_numpy(arrays.NJet)
    two = njet >= 2
    second = np.zeros(len(njet), dtype=bool)
    second[two] = ak.to_numpy(arrays.Jet_Px[two][:, 1]) > 20
    return len(njet), int(np.sum(two & second))


@pytest.mark.parametrize(
    ("filter_order", "step_size"),
    [
        ("fixed", 100_000),
        ("fixed", 500),
        ("fixed", 97),
        ("hepframe", 100_000),
        ("hepframe", 500),
        ("hepframe", 97),
        ("adaptive", 100_000),
        ("adaptive", 500),
        ("adaptive", 97),
    ],
)
def test_a_guarded_filters_producer_runs_only_where_the_guard_passed(
    hzz_file: Path, filter_order: str, step_size: int
) -> None:
    events, passed = _expected(hzz_file)
    result = _process(hzz_file, step_size).run(filter_order=filter_order)
    flow = result.cutflow["p"]
    assert flow.events == events
    assert flow.passed == passed == 286


def test_the_first_probe_decides_a_guarded_filter_on_the_guards_events(hzz_file: Path) -> None:
    proc = _process(hzz_file, 100_000)
    plan = _Plan(proc)
    arrays = uproot.open(hzz_file)["events"].arrays(plan.branches)
    data = BatchData({b: arrays[b] for b in plan.branches}, len(arrays))
    probed = FirstProbe.of(plan, proc)(data, plan.path_index["p"])
    assert probed is not None, "the first probe decided nothing"
    known, passed, seconds, _producers = probed
    # Written order: step 0 is `second`, step 1 `two`; the subsample is
    # every event of a batch this small.
    njet = ak.to_numpy(arrays.NJet)
    two = njet >= 2
    assert len(known[1]) == len(njet)
    assert known[1] == [True] * len(njet)
    assert passed[1] == two.tolist()
    # `second` decides exactly the events `two` passed.
    assert known[0] == two.tolist()
    second = np.zeros(len(njet), dtype=bool)
    second[two] = ak.to_numpy(arrays.Jet_Px[two][:, 1]) > 20
    assert passed[0] == second.tolist()
    assert seconds[0] and seconds[1]


def _probe_sensitive(filter_order: str, on_error: str) -> ef.Result:
    """A path whose middle cut fails on small inputs only: the sizes the
    path gives it are whole batches (every event passes the first cut),
    the adaptive planner's probes give it a subsample."""
    proc = ef.Process("probe_sensitive")
    proc.source = ef.source.synthetic(40_000, step_size=5_000)

    @proc.filter(consumes=["MET_pt"])
    def loose(ev: ef.Events) -> np.ndarray:
        return ev.MET_pt >= 0

    @proc.filter(consumes=["nMuon"])
    def flaky(ev: ef.Events) -> np.ndarray:
        if len(ev.nMuon) <= 1024:
            raise RuntimeError("fails on small inputs")
        return ev.nMuon >= 1

    @proc.filter(consumes=["MET_pt"])
    def tight(ev: ef.Events) -> np.ndarray:
        return ev.MET_pt > 40

    proc.path("p", [loose, flaky, tight], reorderable=True, after=[("flaky", "loose")])
    return proc.run(threads=2, filter_order=filter_order, on_error=on_error)  # type: ignore[arg-type]


@pytest.mark.parametrize("on_error", ["skip", "fail"])
def test_a_probe_that_fails_decides_nothing(on_error: str) -> None:
    """The accepted events never depend on the policy: a cut that fails on
    the planner's probe (a subsample the path never gives it) leaves that
    probe undecided instead of failing the batch (adaptive failed 7 of 10
    batches with on_error="skip", and the job with "fail")."""
    fixed = _probe_sensitive("fixed", on_error)
    adaptive = _probe_sensitive("adaptive", on_error)
    assert not fixed.failed_batches and not adaptive.failed_batches
    assert adaptive.events == fixed.events == 40_000
    assert adaptive.cutflow["p"].passed == fixed.cutflow["p"].passed > 0
