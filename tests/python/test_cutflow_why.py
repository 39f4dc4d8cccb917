"""The cut-flow's ``why`` explains the order it reports (``order``, the one
most batches ran), not a later change that fewer batches ran, or none (a
decision after the job's last batch)."""

from __future__ import annotations

from typing import Any

from conftest import cutflow_of_runs

FILTERS = ("a", "b", "c")


def _cutflow(runs: list[list[int]], orderings: list[dict[str, Any]]) -> Any:
    """One reorderable path; batch ``i`` ran the filters ``runs[i]`` (their
    indices) in that order, every event passing."""
    return cutflow_of_runs(FILTERS, runs, orderings, "adaptive")


def _change(at: int, order: list[str], reason: str) -> dict[str, Any]:
    return {"path": "sel", "at_event": at, "order": order, "reason": reason}


def test_a_change_after_the_last_batch_is_not_the_reason_of_the_order_that_ran() -> None:
    path = _cutflow(
        [[2, 0, 1]],
        [
            _change(0, ["c", "a", "b"], "first probe"),
            _change(1, ["c", "b", "a"], "after the batch"),
            _change(1, ["c", "b", "a"], "in use at the end (adaptive policy)"),
        ],
    )
    assert path.order == ["c", "a", "b"]
    assert path.why.startswith("adaptive: chosen before any batch finished: first probe"), path.why
    assert "later change after 1 batch, to c > b > a, ran on fewer batches" in path.why


def test_the_written_order_that_most_batches_ran_is_said_to_be_kept() -> None:
    path = _cutflow([[0, 1, 2]] * 3 + [[2, 1, 0]], [_change(3, ["c", "b", "a"], "late")])
    assert path.order == ["a", "b", "c"]
    assert path.why.startswith("adaptive: the written order was kept"), path.why
    assert "later change after 3 batches" in path.why


def test_the_last_change_explains_the_order_when_most_batches_ran_it() -> None:
    path = _cutflow([[0, 1, 2], [2, 1, 0], [2, 1, 0]], [_change(1, ["c", "b", "a"], "the reason")])
    assert path.order == ["c", "b", "a"]
    assert path.why == "adaptive: chosen after 1 batch: the reason"


def test_a_filter_on_several_paths_is_matched_by_its_name() -> None:
    path = _cutflow([[1, 0, 2]] * 2, [_change(0, ["b@sel", "a", "c@sel"], "the reason")])
    assert path.order == ["b", "a", "c"]
    assert path.why == "adaptive: chosen before any batch finished: the reason"


def test_a_change_in_a_chunk_of_a_distributed_run_names_the_chunk() -> None:
    """A distributed run's order changes count batches within their chunk:
    the reason says which chunk, not "after 0 batches" as if at the job's
    start."""
    path = _cutflow(
        [[0, 1, 2], [2, 1, 0], [2, 1, 0]],
        [
            {**_change(0, ["c", "b", "a"], "the reason"), "chunk": 3},
            {**_change(2, ["a", "c", "b"], "late"), "chunk": 5},
        ],
    )
    assert path.order == ["c", "b", "a"]
    assert path.why.startswith("adaptive: chosen before any batch finished of chunk 3: the reason"), path.why
    assert "later change after 2 batches of chunk 5, to a > c > b" in path.why
