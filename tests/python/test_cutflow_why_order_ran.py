"""The cut-flow's ``why`` explains the order that ran even when no change of
order names it: HEP-Frame requests a level's steps together and the batches
record them in the order they finished, and a path starts from its written
order repaired for its constraints. It never says the written order was kept
when the order that ran is another."""

from __future__ import annotations

from typing import Any

import evflow as ef
from conftest import cutflow_of_runs

FILTERS = ("loose_fast", "mid", "tight_slow")


def _cutflow(runs: list[list[int]], orderings: list[dict[str, Any]], policy: str = "hepframe") -> Any:
    """One reorderable path; batch ``i`` recorded the filters ``runs[i]``
    (their indices) in that order, every event passing."""
    return cutflow_of_runs(FILTERS, runs, orderings, policy)


def _change(at: int, order: list[str], reason: str) -> dict[str, Any]:
    return {"path": "sel", "at_event": at, "order": order, "reason": reason}


def test_a_level_recorded_as_it_finished_is_explained_by_the_change_that_ran_it() -> None:
    """As a hepframe job of a slow tight cut, a mid one and a fast loose one
    in one level ran: the change says tight_slow > mid > loose_fast, the
    batches finished mid first; a later change ran on fewer batches."""
    written, finished, late = [0, 1, 2], [1, 2, 0], [2, 0, 1]
    path = _cutflow(
        [written] * 5 + [finished] * 30 + [late] * 10,
        [
            _change(5, ["tight_slow", "mid", "loose_fast"], "HEP-Frame weights: first"),
            _change(35, ["tight_slow", "loose_fast", "mid"], "HEP-Frame weights: second"),
        ],
    )
    assert path.order == ["mid", "tight_slow", "loose_fast"]
    assert "written order was kept" not in path.why, path.why
    assert path.why.startswith(
        "hepframe: ran mid > tight_slow > loose_fast from the order chosen after 5 batches "
        "(tight_slow > mid > loose_fast): HEP-Frame weights: first; HEP-Frame runs the steps of a level "
        "together"
    ), path.why
    assert "a later change after 35 batches, to tight_slow > loose_fast > mid" in path.why


def test_the_change_in_effect_for_most_of_the_batches_that_ran_the_order_explains_it() -> None:
    """Two changes, neither naming the order most batches recorded: the one
    in effect when those batches started is the reason, not the last."""
    finished = [1, 2, 0]
    path = _cutflow(
        [[0, 1, 2]] * 4 + [[2, 0, 1]] * 3 + [finished] * 20 + [finished] * 5,
        [
            _change(4, ["tight_slow", "loose_fast", "mid"], "first"),
            _change(7, ["tight_slow", "mid", "loose_fast"], "second"),
            _change(27, ["mid", "loose_fast", "tight_slow"], "third"),
        ],
    )
    assert path.order == ["mid", "tight_slow", "loose_fast"]
    assert "chosen after 7 batches (tight_slow > mid > loose_fast): second" in path.why, path.why
    assert "a later change after 27 batches" in path.why


def test_the_written_order_is_said_to_be_kept_only_when_it_ran() -> None:
    path = _cutflow([[0, 1, 2]] * 5 + [[1, 2, 0]] * 2, [_change(5, ["tight_slow", "mid", "loose_fast"], "x")])
    assert path.order == ["loose_fast", "mid", "tight_slow"]
    assert path.why.startswith("hepframe: the written order was kept"), path.why


def test_a_distributed_change_explains_an_order_no_change_names() -> None:
    """Chunks count their own batches: the last change is named, with its chunk."""
    path = _cutflow([[1, 2, 0]] * 3, [{**_change(0, ["tight_slow", "mid", "loose_fast"], "w"), "chunk": 2}])
    assert path.why.startswith(
        "hepframe: ran mid > tight_slow > loose_fast from the order chosen before any batch finished of chunk 2"
    ), path.why


def test_a_short_hepframe_job_says_its_written_order_was_repaired_not_kept() -> None:
    """Three batches, fewer than HEP-Frame's warm-up: no change of order. The
    written order puts ``odd`` before ``nmu``, which must run first: the
    order that ran is the repaired one, and the cut-flow says so."""
    proc = ef.Process("repaired")
    proc.source = ef.source.synthetic(1500, step_size=500, seed=1)

    @proc.filter(consumes=["MET_pt"])
    def met(ev: ef.Events) -> Any:
        return ev.MET_pt > 5

    @proc.filter(consumes=["event"])
    def odd(ev: ef.Events) -> Any:
        return ev.event % 2 == 1

    @proc.filter(consumes=["nMuon"])
    def nmu(ev: ef.Events) -> Any:
        return ev.nMuon >= 1

    proc.path("sel", [met, odd, nmu], reorderable=True, after=[("odd", "nmu")])
    sel = proc.run(threads=2, filter_order="hepframe").cutflow["sel"]
    assert sel.order == ["met", "nmu", "odd"]
    assert "written order was kept" not in sel.why, sel.why
    assert sel.why.startswith(
        "hepframe: ran met > nmu > odd, the order it started with: the written order "
        "repaired for the path's constraints"
    ), sel.why


def test_a_written_order_kept_on_part_of_the_job_says_on_how_many_batches() -> None:
    """The written order ran on the warm-up's 4 batches; the orders of the
    changes after it, on fewer each: the order is the written one, kept on
    4 of 11 batches, not "kept" as if for the whole job. Batches that agree
    on a first filter but split after it do not outvote the order more
    batches ran whole."""
    path = _cutflow(
        [[0, 1, 2]] * 4 + [[0, 2, 1]] * 3 + [[1, 0, 2]] * 2 + [[1, 2, 0]] * 2,
        [
            _change(4, ["loose_fast", "tight_slow", "mid"], "w1"),
            _change(7, ["mid", "loose_fast", "tight_slow"], "w2"),
        ],
    )
    assert path.order == ["loose_fast", "mid", "tight_slow"]
    assert path.why.startswith(
        "hepframe: the written order was kept on 4 of 11 batches, more than any other"
    ), path.why


def test_the_order_most_batches_ran_whole_beats_a_split_majority_of_first_steps() -> None:
    """8 batches start with loose_fast but split 4/3/1 after it; 7 ran
    tight_slow > mid > loose_fast: that is the order most batches ran."""
    slow_first = [2, 1, 0]
    path = _cutflow(
        [[0, 1, 2]] * 4 + [[0, 2, 1]] * 3 + [[0, 1]] + [slow_first] * 7,
        [_change(8, ["tight_slow", "mid", "loose_fast"], "weights")],
    )
    assert path.order == ["tight_slow", "mid", "loose_fast"]
    assert path.why == "hepframe: chosen after 8 batches: weights"


def test_why_agrees_with_the_order_on_seeded_random_jobs() -> None:
    """Seeded random jobs (batches running random orders or prefixes of them,
    random changes): ``why`` says the written order was kept only when
    ``order`` is the written one, says "chosen" only for an order a change
    names, and otherwise names the order that ran."""
    import random

    rng = random.Random(7)
    names = list(FILTERS)
    for _ in range(400):
        orders = [rng.sample(range(3), 3) for _ in range(rng.randint(1, 4))]
        runs = [rng.choice(orders)[: rng.randint(1, 3)] for _ in range(rng.randint(1, 12))]
        changes = [
            _change(rng.randint(0, len(runs)), [names[i] for i in rng.sample(range(3), 3)], f"r{k}")
            for k in range(rng.randint(0, 3))
        ]
        policy = rng.choice(["adaptive", "hepframe"])
        path = _cutflow(runs, sorted(changes, key=lambda c: c["at_event"]), policy)
        reach = max(len(r) for r in runs)
        ran = path.order[:reach]
        if "the written order was kept" in path.why:
            assert ran == names[:reach], (runs, changes, path.why)
        elif path.why.startswith((f"{policy}: chosen after", f"{policy}: chosen before")):
            assert any(c["order"][:reach] == ran for c in changes), (runs, changes, path.why)
        else:
            assert path.why.startswith(f"{policy}: ran {' > '.join(ran)}"), (runs, changes, path.why)
