"""A filter on several paths that fails is named by its label and the path
of the occurrence that failed — in the error, in ``report["failed_events"]``
and in the summary — as ``report["modules"]`` names it, in one process and
on Dask."""

from __future__ import annotations

from typing import Any

import pytest

import evflow as ef

STEP = 1_000
BAD_BATCH = 2


def _process() -> ef.Process:
    """``checked`` is first on ``sr`` (every event of a batch) and second on
    ``cr`` (after ``even`` kept half of them): it fails on batch
    ``BAD_BATCH`` only where it sees the whole batch, on ``sr``."""
    proc = ef.Process("two_path_errors")
    proc.source = ef.source.synthetic(5 * STEP, step_size=STEP, seed=2)

    @proc.producer(consumes=["MET_pt"], produces=["index"])
    def index(ev: ef.Events) -> Any:
        return ev.MET_pt * 0 + ev.info.index

    @proc.filter(consumes=["MET_pt"])
    def even(ev: ef.Events) -> Any:
        return ev.MET_pt > 20

    @proc.filter(consumes=["index"])
    def checked(ev: ef.Events) -> Any:
        if ev.info.index == BAD_BATCH and len(ev) == STEP:
            raise RuntimeError("bad calibration")
        return ev.index >= 0

    proc.path("sr", [checked])
    proc.path("cr", [even, checked])
    proc.histogram("MET_pt", bins=10, range=(0, 200), after="sr")
    return proc


def test_the_error_names_the_filter_and_the_path_it_failed_on() -> None:
    with pytest.raises(ef.ModuleError) as err:
        _process().run(threads=1, filter_order="fixed")
    assert str(err.value).startswith(f"module 'checked' on path 'sr' failed on batch {BAD_BATCH} ("), str(
        err.value
    )
    assert err.value.module == "checked"
    assert "@" not in str(err.value)


def test_a_skipped_batch_names_the_filter_and_its_path() -> None:
    result = _process().run(threads=1, on_error="skip", filter_order="fixed")
    assert result.failed_batches == [BAD_BATCH]
    (failed,) = result.report["failed_events"]
    assert (failed["module"], failed["path"]) == ("checked", "sr")
    assert "checked" in {m["label"] for m in result.report["modules"]}
    assert f"  module 'checked' on path 'sr': batch {BAD_BATCH} (" in result.summary()


def test_a_distributed_error_names_the_filter_and_its_path(client: Any) -> None:
    with pytest.raises(ef.ModuleError) as err:
        _process().run(client=client, chunk_size=2 * STEP, filter_order="fixed")
    assert f"module 'checked' on path 'sr' failed on batch {BAD_BATCH} (" in str(err.value), str(err.value)
    result = _process().run(client=client, chunk_size=2 * STEP, on_error="skip", filter_order="fixed")
    assert [(f["module"], f["path"]) for f in result.report["failed_events"]] == [("checked", "sr")]


def test_a_distributed_skip_names_the_batch_by_its_number_in_the_job(client: Any) -> None:
    """A chunk's engine numbers its batches from 0; the failed event's
    message names the batch as one process does (batch 2 is the first
    batch of the second chunk here, which called it batch 0)."""
    one = _process().run(threads=1, on_error="skip", filter_order="fixed")
    many = _process().run(client=client, chunk_size=2 * STEP, on_error="skip", filter_order="fixed")
    assert many.report["failed_events"] == one.report["failed_events"]
    (failed,) = many.report["failed_events"]
    assert failed["message"].startswith(f"batch {BAD_BATCH} ("), failed["message"]
