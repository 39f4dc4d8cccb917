"""The summary (``evflow run analysis.py`` prints it) says why each
reorderable path ran in its order, as ``cutflow[path].why`` does; a path
that is not reorderable has no such line."""

from __future__ import annotations

from typing import Any

import evflow as ef


def test_the_summary_gives_each_reorderable_paths_why() -> None:
    proc = ef.Process("why")
    proc.source = ef.source.synthetic(2_000, step_size=1_000)

    @proc.filter(consumes=["nJet"])
    def njet(ev: ef.Events) -> Any:
        return ev.nJet >= 1

    @proc.filter(consumes=["MET_pt"])
    def met(ev: ef.Events) -> Any:
        return ev.MET_pt > 10

    proc.path("sr", [njet, met], reorderable=True)
    proc.path("cr", [met])
    result = proc.run(threads=1, filter_order="fixed")
    lines = result.summary().splitlines()
    why = result.cutflow["sr"].why
    assert why.startswith("filter_order='fixed'")
    assert f"order of path 'sr': {why}" in lines
    assert not [line for line in lines if line.startswith("order of path 'cr'")]


def test_the_summary_counts_one_failed_batch_in_the_singular() -> None:
    proc = ef.Process("one_failure")
    proc.source = ef.source.synthetic(3_000, step_size=1_000)

    @proc.filter(consumes=["nJet"])
    def njet(ev: ef.Events) -> Any:
        if ev.info.index == 1:
            raise RuntimeError("bad calibration")
        return ev.nJet >= 1

    proc.path("sr", [njet])
    summary = proc.run(threads=1, on_error="skip").summary()
    assert "1 batch failed and was left out (on_error='skip'):" in summary, summary
    assert ", 3 batches, peak RSS" in summary.splitlines()[0]


def test_the_summary_counts_one_batch_in_the_singular() -> None:
    proc = ef.Process("one_batch")
    proc.source = ef.source.synthetic(500, step_size=1_000)
    proc.histogram("met", column="MET_pt", bins=4, range=(0, 100))
    first = proc.run(threads=1).summary().splitlines()[0]
    assert " on 1 thread, 1 batch, peak RSS " in first, first
