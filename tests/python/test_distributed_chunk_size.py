"""``chunk_size=`` of a distributed run cuts chunks of about that many
events also where batches are shorter or longer than the step (row
groups or clusters that end before or after it): the plan counts events,
not batches."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import evflow as ef

pytest.importorskip("distributed")


def _parquet(path: Path, rows: int, row_group: int) -> str:
    x = np.random.default_rng(3).normal(size=rows)
    pq.write_table(pa.table({"x": x}), path, row_group_size=row_group)
    return str(path)


def _process(source: ef.source.Source) -> ef.Process:
    proc = ef.Process("sizes")
    proc.source = source
    proc.histogram("x", bins=10, range=(-3, 3))
    return proc


def test_chunks_hold_chunk_size_events_with_row_groups_longer_than_the_step(tmp_path: Path) -> None:
    """Row groups of 1400 rows read in steps of 1000 (a batch of 1400 each,
    under 1.5 steps): chunks of 2800 events each, not 3 batches (4200
    events, 1.5× the tasks asked for)."""
    path = _parquet(tmp_path / "rg.parquet", 28_000, 1_400)
    proc = _process(ef.source.parquet(path, step_size=1_000))
    chunks = ef.distributed.preview_chunks(proc, chunk_size=2_800)
    assert [c.events for c in chunks] == [2_800] * 10
    # Every chunk still starts at a row group and the batches are those of one process.
    assert all(c.steps[0][1] % 1_400 == 0 for c in chunks)
    steps = [s for c in chunks for s in c.steps]
    assert [b - a for _f, a, b in steps] == [1_400] * 20


def test_clusters_longer_than_the_step_cut_evenly(tmp_path: Path) -> None:
    """ROOT clusters of 2500 entries in steps of 1000 (read in batches of
    1250): chunk_size=2000 gives 4 chunks of 2500 (the batch boundaries
    nearest), and 4000 gives 3 chunks as even as the batches allow."""
    import uproot

    path = tmp_path / "clusters.root"
    x = np.random.default_rng(4).normal(size=10_000)
    with uproot.recreate(path) as f:
        f.mktree("t", {"x": np.float64})
        for a in range(0, 10_000, 2_500):
            f["t"].extend({"x": x[a : a + 2_500]})
    proc = _process(ef.source.root(str(path), tree="t", step_size=1_000))
    assert [c.events for c in ef.distributed.preview_chunks(proc, chunk_size=2_000)] == [2_500] * 4
    assert [c.events for c in ef.distributed.preview_chunks(proc, chunk_size=4_000)] == [3_750, 2_500, 3_750]
