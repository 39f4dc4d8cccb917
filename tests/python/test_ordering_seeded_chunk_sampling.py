"""Chunks that start from imported ordering statistics (a distributed
run's later chunks) sample their batches at the budgeted rate from their
first batch: which batches the planner samples is drawn from a batch's
number in the whole job, so chunks do not all skip the same first
batches of their own."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

import evflow as ef
from evflow._job import run_process

STEP = 512  # events per batch: above the per-batch subsample of 256
CHUNKS = 160

OPTS: dict[str, Any] = dict(threads=1, events_in_flight=None, progress=False, executor="threaded",
                            on_error="fail", trace=False, raw=True, filter_order="adaptive")  # fmt: skip


def _analysis(events: int, seed: int) -> ef.Process:
    proc = ef.Process("seeded")
    proc.source = ef.source.synthetic(events, step_size=STEP, seed=seed)

    @proc.filter(consumes=["nMuon"])
    def two_muons(ev: ef.Events) -> np.ndarray:
        return ev.nMuon >= 2

    @proc.filter(consumes=["MET_pt"])
    def met_cut(ev: ef.Events) -> np.ndarray:
        return ev.MET_pt > 30

    proc.path("sel", [two_muons, met_cut], reorderable=True)
    return proc


def _statistics() -> str:
    """What a finished chunk hands over: its sampled decision vectors and
    stop counts, measured here, without step costs (never timed: the
    steps are then sampled at the highest rate, so that a few hundred
    batches show the rate)."""
    first = run_process(_analysis(64 * STEP, 1), **OPTS)
    assert first.raw is not None
    stats = json.loads(first.raw["ordering_stats"])
    sel = stats["sel"]
    assert len(sel["samples"]) >= 64
    sel["costs"] = [None] * len(sel["costs"])
    sel["shared"] = []
    return json.dumps(stats)


def test_seeded_chunks_sample_their_first_batch_at_the_budgeted_rate() -> None:
    """Chunks of one batch each, numbered as a distributed run numbers
    them, all starting from the same statistics: some sample their batch,
    about the budgeted share of them (at most 1 in 16 batches; not every
    chunk, nor none as when every chunk drew its first batch alike)."""
    stats = _statistics()
    sampled = 0
    for k in range(CHUNKS):
        r = run_process(_analysis(STEP, 100 + k), **OPTS, ordering_stats=stats, first_batch=k)
        assert r.raw is not None
        changes = [o for o in r.report["orderings"] if o["path"] == "sel"]
        assert "started from imported statistics" in changes[-1]["reason"]
        own = json.loads(r.raw["ordering_stats"]).get("sel", {"samples": []})
        sampled += len(own["samples"]) > 0
    # Expected CHUNKS / 16 = 10; none when the chunks drew alike (all or none).
    assert 2 <= sampled <= 3 * CHUNKS // 16, sampled
