"""Analyses merged into one process (one pass for several queries) compute
the work they share once: a producer with the same structural key as
another (same code, captured values and inputs) runs no module of its own,
whatever its label and product names."""

from __future__ import annotations

from collections.abc import Callable

import awkward as ak
import numpy as np
import pytest

import evflow as ef
from evflow._shared_work import function_key

EVENTS, STEP = 20_000, 5_000
#: One entry per producer call (the producers capture nothing that differs
#: between the queries, so the entry cannot name the label).
CALLS: list[int] = []


def _jet_ht(proc: ef.Process, label: str, product: str, power: float = 1.0) -> None:
    """What each query adds for itself: the scalar sum of its jets' pT."""

    @proc.producer(consumes=["Jet_pt"], produces=[product], label=label)
    def ht(ev: ef.Events) -> np.ndarray:
        CALLS.append(len(ev))
        return ak.to_numpy(ak.sum(ev.Jet_pt**power, axis=1))


def _query(proc: ef.Process, name: str, label: str, power: float = 1.0) -> None:
    _jet_ht(proc, label, f"{name}_ht", power)
    proc.histogram(f"{name}_h", f"{name}_ht", bins=20, range=(0.0, 500.0))


def _run(build: Callable[[ef.Process], None]) -> tuple[dict[str, np.ndarray], int]:
    """The histograms, and the events the producers computed on."""
    proc = ef.Process("merged")
    proc.source = ef.source.synthetic(EVENTS, step_size=STEP, seed=3)
    build(proc)
    CALLS.clear()
    r = proc.run(threads=2)
    return {k: np.asarray(h.values()) for k, h in r.histograms.items()}, sum(CALLS)


def test_identical_producers_of_merged_queries_run_once() -> None:
    def merged(proc: ef.Process) -> None:
        _query(proc, "qa", "ht_a")
        _query(proc, "qb", "ht_b")

    hists, ran = _run(merged)
    assert ran == EVENTS
    assert np.array_equal(hists["qa_h"], hists["qb_h"]) and hists["qa_h"].sum() > 0
    alone, _ = _run(lambda proc: _query(proc, "qb", "ht_b"))
    assert np.array_equal(alone["qb_h"], hists["qb_h"])


def test_the_same_producer_added_twice_under_its_label_is_one() -> None:
    def merged(proc: ef.Process) -> None:
        _jet_ht(proc, "ht", "jet_ht")
        _jet_ht(proc, "ht", "jet_ht")
        proc.histogram("h", "jet_ht", bins=20, range=(0.0, 500.0))

    _, ran = _run(merged)
    assert ran == EVENTS
    proc = ef.Process("clash")
    _jet_ht(proc, "ht", "jet_ht")
    with pytest.raises(ef.ConfigurationError, match="used more than once"):
        _jet_ht(proc, "ht", "jet_ht", power=2.0)


def test_different_captured_values_are_different_work() -> None:
    def merged(proc: ef.Process) -> None:
        _query(proc, "qa", "ht_a")
        _query(proc, "qb", "ht_b", power=2.0)

    hists, ran = _run(merged)
    assert ran == 2 * EVENTS
    assert not np.array_equal(hists["qa_h"], hists["qb_h"])


def test_structural_keys() -> None:
    def make(k: object) -> Callable[[int], object]:
        def f(x: int) -> object:
            return (x, k)

        return f

    assert function_key(make(1)) == function_key(make(1))
    assert function_key(make(1)) != function_key(make(1.0))
    assert function_key(make([1])) != function_key(make([1]))
    shared = [1]
    assert function_key(make(shared)) == function_key(make(shared))
    assert function_key(make(make(2))) == function_key(make(make(2)))
    assert function_key(len) == function_key(len)
