"""``filter_order="fixed"``: ``why`` says the written order ran, and names
the repaired order only where the path's ``after=`` constraints changed it."""

from __future__ import annotations

from typing import Any

import evflow as ef


def _process(after: list[tuple[str, str]]) -> ef.Process:
    proc = ef.Process("fixed_why")
    proc.source = ef.source.synthetic(3_000, step_size=1_000, seed=3)

    @proc.filter(consumes=["nJet"])
    def njet(ev: ef.Events) -> Any:
        return ev.nJet >= 1

    @proc.filter(consumes=["MET_pt"])
    def met(ev: ef.Events) -> Any:
        return ev.MET_pt > 10

    proc.path("sr", [njet, met], reorderable=True, after=after)
    return proc


def test_the_written_order_is_not_said_to_be_repaired_without_constraints() -> None:
    path = _process([]).run(threads=1, filter_order="fixed").cutflow["sr"]
    assert path.order == ["njet", "met"]
    assert path.why == "filter_order='fixed': the written order"


def test_a_written_order_repaired_for_its_constraints_is_named() -> None:
    path = _process([("njet", "met")]).run(threads=1, filter_order="fixed").cutflow["sr"]
    assert path.order == ["met", "njet"]
    assert path.why == "filter_order='fixed': the written order repaired for its constraints (met > njet)"
