"""The native Parquet reader's batches, as a ROOT source's steps: row
groups together up to ``step_size`` rows; a larger row group read whole
under 1.5 steps, else in ``round(rows / step)`` equal parts (not a full
step and a small remainder: 3 000 rows at a step of 2 500 were 2 500 +
500). The single-process reader, the Dask planner and the chunk tasks'
readers cut alike. Checked on seeded random row-group layouts, against the
values read with pyarrow."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import evflow as ef
from evflow.distributed.chunks import (
    _unit_batches,
    batch_steps,
    chunk_source,
    gather_meta,
    plan_chunks,
    read_meta,
)


def _write(path: Path, sizes: list[int], rng: np.random.Generator) -> np.ndarray:
    """A file of one row group per entry of ``sizes``; its column ``x``."""
    x = rng.normal(size=sum(sizes))
    with pq.ParquetWriter(path, pa.schema([("x", pa.float64())])) as w:
        at = 0
        for n in sizes:
            w.write_table(pa.table({"x": x[at : at + n]}), row_group_size=n)
            at += n
    assert [pq.ParquetFile(path).metadata.row_group(i).num_rows for i in range(len(sizes))] == sizes
    return x


def _batches(source: ef.source.ParquetSource) -> tuple[list[tuple[str, int, int]], np.ndarray]:
    """The batches one process reads, ``(file, start, stop)`` in order, and
    the values they hold."""
    seen: list[tuple[int, str, int, int, np.ndarray]] = []
    proc = ef.Process("rowgroups")
    proc.source = source

    @proc.analyzer(consumes=["x"])
    def record(ev: ef.Events) -> Any:
        i = ev.info
        seen.append((i.index, str(i.file), i.entry_start, i.entry_stop, np.asarray(ev.x)))

    proc.run(threads=1)
    seen.sort(key=lambda s: s[0])
    values = np.concatenate([s[4] for s in seen]) if seen else np.zeros(0)
    return [(f, a, b) for _i, f, a, b, _x in seen], values


def test_a_row_group_near_the_step_is_one_batch_and_a_larger_one_equal_parts() -> None:
    # Before: 2 500 + 500.
    assert _unit_batches("f", [0, 3000], 2500) == [("f", 0, 3000)]
    assert _unit_batches("f", [0, 3749], 2500) == [("f", 0, 3749)]
    # From 1.5 steps: round(rows / step) parts, as a ROOT cluster.
    assert _unit_batches("f", [0, 3750], 2500) == [("f", 0, 1875), ("f", 1875, 3750)]
    assert _unit_batches("f", [100, 6000], 2500) == [("f", 100, 3100), ("f", 3100, 6100)]
    assert _unit_batches("f", [0, 10_001], 2500) == [
        ("f", 0, 2501),
        ("f", 2501, 5002),
        ("f", 5002, 7503),
        ("f", 7503, 10_001),
    ]
    # Row groups together (at most a step) are one batch.
    assert _unit_batches("f", [0, 2000], 2500) == [("f", 0, 2000)]


def test_a_file_of_row_groups_larger_than_the_step(tmp_path: Path) -> None:
    path = tmp_path / "big.parquet"
    x = _write(path, [3000, 3000, 6000, 500, 500, 10_001], np.random.default_rng(3))
    got, values = _batches(ef.source.parquet(str(path), step_size=2500))
    assert [(a, b) for _f, a, b in got] == [
        (0, 3000),
        (3000, 6000),
        (6000, 9000),
        (9000, 12_000),
        (12_000, 13_000),
        (13_000, 15_501),
        (15_501, 18_002),
        (18_002, 20_503),
        (20_503, 23_001),
    ]
    np.testing.assert_array_equal(values, x)


def _check_row_groups(layout: list[int], batches: list[tuple[int, int]], step: int) -> None:
    """The batches of one file (read to its last batch's end): a row group
    of at most a step is inside a batch of whole row groups of at most a
    step; a larger one is one batch when ``round(rows / step)`` is 1, else
    that many parts, equal to less than their count."""
    read_to = max((b for _a, b in batches), default=0)
    edges = np.cumsum([0, *layout]).tolist()
    for lo, hi in itertools.pairwise(edges):
        hi = min(hi, read_to)
        rows = hi - lo
        if rows <= 0:
            continue
        if rows <= step:
            (around,) = [(a, b) for a, b in batches if a <= lo and hi <= b]
            assert around[1] - around[0] <= step, (step, layout, batches)
            continue
        parts = [(a, b) for a, b in batches if lo <= a and b <= hi]
        sizes = [b - a for a, b in parts]
        assert sum(sizes) == rows, (step, layout, batches)
        assert len(sizes) == max(1, round(rows / step)), (step, rows, sizes)
        assert max(sizes) - min(sizes) < len(sizes), (step, rows, sizes)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_layouts_read_alike_in_one_process_the_planner_and_chunks(tmp_path: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    step = int(rng.integers(50, 400))
    paths, columns = [], []
    for k in range(3):
        # Row groups from a tenth of a step to four steps.
        sizes = rng.integers(step // 10 + 1, 4 * step, size=int(rng.integers(1, 12))).tolist()
        path = tmp_path / f"f{k}.parquet"
        columns.append(_write(path, sizes, rng))
        paths.append(str(path))
    everything = np.concatenate(columns)
    limit = int(rng.integers(len(everything) // 2, len(everything)))
    for max_events in (None, limit):
        src = ef.source.parquet(paths, step_size=step, max_events=max_events)
        got, values = _batches(src)
        np.testing.assert_array_equal(values, everything[: len(values)])
        assert len(values) == (max_events or len(everything))
        metas = gather_meta(src, ["x"], lambda todo, src=src: [read_meta(src, p, ["x"]) for p in todo])
        # The Dask planner's batches are the single-process ones.
        assert batch_steps(src, metas) == got, (step, max_events)
        for meta in metas:
            _check_row_groups(meta.layout, [(a, b) for f, a, b in got if f == meta.path], step)
        # A chunk task reads exactly the planner's batches of its chunk.
        chunks = plan_chunks(src, metas, chunk_size=3 * step, workers=2)
        assert [s for ch in chunks for s in ch.steps] == got
        for ch in chunks:
            assert _batches(chunk_source(src, ch))[0] == list(ch.steps), (step, ch)
