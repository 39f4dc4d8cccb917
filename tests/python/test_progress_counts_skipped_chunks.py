"""The progress of a distributed run with ``on_error="skip-chunk"`` ends
at every event of the input, as one process's with ``on_error="skip"``
counts the batches it left out: a chunk skipped is done (its events were
handled), and the bar stopped short of 100% (86.7% with one chunk of
16 000 events of 120 000 skipped), as if the job had ended early."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

import evflow as ef

pytest.importorskip("distributed")

EVENTS, STEP = 6_000, 500


def _analysis() -> ef.Process:
    proc = ef.Process("progress")
    proc.source = ef.source.synthetic(EVENTS, step_size=STEP, seed=3)

    @proc.filter(consumes=["MET_pt"])
    def picky(ev: ef.Events) -> Any:
        if ev.info.entry_start == 2 * STEP:
            raise ValueError("cannot handle this batch")
        return ev.MET_pt > 20

    proc.path("sel", [picky])
    proc.histogram("MET_pt", bins=10, range=(0, 200), after="sel")
    return proc


@pytest.mark.parametrize("where", ["one process", "cluster"])
def test_progress_ends_at_every_event(client: Any, where: str) -> None:
    calls: list[tuple[int, int]] = []
    options: dict[str, Any] = (
        {"threads": 1, "on_error": "skip"}
        if where == "one process"
        else {"client": client, "chunk_size": 1000, "on_error": "skip-chunk"}
    )
    result = _analysis().run(progress=lambda done, events: calls.append((done, events)), **options)
    left_out = STEP if where == "one process" else 1000
    assert result.events == EVENTS - left_out
    assert calls[-1][1] == EVENTS, calls
    assert all(a[1] <= b[1] for a, b in itertools.pairwise(calls)), calls
    assert np.sum(result.histograms["MET_pt"].values(flow=True)) == result.cutflow["sel"].passed
