"""A cut that needs the events an earlier cut keeps (``Muon_pt[:, 0]``
after ``nMuon >= 1``) runs as written under ``filter_order="fixed"``; the
adaptive default may run it first, where it fails on events the written
order never gave it. The probe before the first decision infers the pair
when it sees that (``test_inferred_guards.py``); where it does not (no
muon-less event in the first batch), the error says that the order ran the
cut early and which ``after=`` pair keeps it in place, instead of a bare
``IndexError``.
"""

from __future__ import annotations

import time
from pathlib import Path as FilePath

import awkward as ak
import numpy as np
import pytest

import evflow as ef
from evflow._modules import Path
from evflow._order_hint import reordered_hint

EVENTS = 60_000
STEP = 3_000


def _process(after: list[tuple[str, str]], tmp_path: FilePath | None = None) -> ef.Process:
    """With ``tmp_path``: events whose first batches all have a muon (the
    probe sees no failure to infer a guard from), else synthetic ones."""
    proc = ef.Process("muons")
    proc.source = ef.source.synthetic(EVENTS, step_size=STEP, seed=3)
    if tmp_path is not None:
        rng = np.random.default_rng(3)
        n_mu = rng.poisson(0.9, EVENTS).clip(0, 3)
        n_mu[: 4 * STEP] = np.maximum(n_mu[: 4 * STEP], 1)
        muons = ak.Array({"nMuon": n_mu, "Muon_pt": ak.unflatten(rng.exponential(30.0, n_mu.sum()), n_mu)})
        ak.to_parquet(muons, tmp_path / "muons.parquet")
        proc.source = ef.source.parquet(tmp_path / "muons.parquet", step_size=STEP)

    @proc.filter(consumes=["nMuon"])
    def one_muon(ev: ef.Events) -> np.ndarray:
        time.sleep(20e-6 * len(ev))  # costly: the planner wants the cheap cut first
        return ev.nMuon >= 1

    @proc.filter(consumes=["Muon_pt"])
    def lead_muon_pt(ev: ef.Events) -> np.ndarray:
        return ak.to_numpy(ev.Muon_pt[:, 0] > 60)  # an event without a muon has no [:, 0]

    proc.path("sel", [one_muon, lead_muon_pt], reorderable=True, after=after)
    return proc


def test_the_error_names_the_order_and_the_after_pair(tmp_path: FilePath) -> None:
    with pytest.raises(ef.ModuleError) as caught:
        _process([], tmp_path).run(threads=2)
    message = str(caught.value)
    assert caught.value.module == "lead_muon_pt"
    assert isinstance(caught.value.__cause__, IndexError)
    assert (
        "path 'sel' is reorderable and filter_order='adaptive' ran 'lead_muon_pt' on this batch "
        "before 'one_muon' (written before it)"
    ) in message
    assert "proc.path('sel', ..., after=[('lead_muon_pt', 'one_muon')])" in message


def test_batches_left_out_by_on_error_skip_say_it_too(tmp_path: FilePath) -> None:
    result = _process([], tmp_path).run(threads=2, on_error="skip")
    failed = result.report["failed_events"]
    assert failed and all(e["module"] == "lead_muon_pt" for e in failed)
    assert all("after=[('lead_muon_pt', 'one_muon')]" in e["message"] for e in failed)
    assert "after=[('lead_muon_pt', 'one_muon')]" in result.summary()


def test_with_the_pair_the_job_runs_and_counts_as_written() -> None:
    adaptive = _process([("lead_muon_pt", "one_muon")]).run(threads=2)
    fixed = _process([]).run(threads=2, filter_order="fixed")
    assert adaptive.cutflow["sel"].passed == fixed.cutflow["sel"].passed > 0


def _path(after: list[tuple[str, str]]) -> Path:
    proc = ef.Process("p")
    for name in ("a", "b", "c"):
        proc.filter(consumes=["x"], label=name)(lambda ev: ev.x > 0)
    return proc.path("sel", ["a", "b", "c"], reorderable=True, after=after)


def _error(module: str, batch: int = 4) -> dict[str, object]:
    return {"kind": "module", "module": module, "batch": batch, "message": "batch 4: IndexError: x"}


def test_only_the_written_predecessors_that_had_not_run_are_named() -> None:
    path = _path([])
    # Batch 4 ran b, then c failed; batch 3 ran a (not this batch).
    records = [(4, 0, 1, 0, 10, 5, 10.0, 5.0), (3, 0, 0, 0, 10, 5, 10.0, 5.0)]
    hint = reordered_hint(_error("c"), records, [path], "adaptive")
    assert "ran 'c' on this batch before 'a' (written before it)" in hint
    assert "after=[('c', 'a')]" in hint
    # Every filter written before it ran first: the order is not to blame.
    done = [*records, (4, 0, 0, 1, 5, 3, 5.0, 3.0)]
    assert reordered_hint(_error("c"), done, [path], "adaptive") == ""
    # The first written filter has nothing written before it.
    assert reordered_hint(_error("a"), [], [path], "adaptive") == ""


def test_a_filter_the_path_keeps_before_its_predecessor_is_not_named() -> None:
    # after=(a, c): a must follow c, so c running before a is what was asked.
    path = _path([("a", "c")])
    hint = reordered_hint(_error("c"), [(4, 0, 1, 0, 10, 5, 10.0, 5.0)], [path], "fixed")
    assert hint == ""
    # b is free: run before a, it is named.
    assert "after=[('b', 'a')]" in reordered_hint(_error("b"), [], [path], "fixed")


def test_a_path_that_is_not_reorderable_gets_no_hint() -> None:
    proc = ef.Process("p")
    for name in ("a", "b"):
        proc.filter(consumes=["x"], label=name)(lambda ev: ev.x > 0)
    path = proc.path("sel", ["a", "b"])
    assert reordered_hint(_error("b"), [], [path], "adaptive") == ""
