"""Chunk planning of a distributed run against what one process reads,
without a cluster: the files after a file without rows still count."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import evflow as ef
from evflow.distributed.chunks import gather_meta, plan_chunks, read_meta


@pytest.mark.parametrize("engine", ["pyarrow", "native"])
@pytest.mark.parametrize("limit", [None, 1_300])
def test_files_after_a_file_without_rows_are_planned(tmp_path: Path, engine: str, limit: int | None) -> None:
    paths = []
    for name, rows in [("a", 500), ("empty", 0), ("b", 1_000), ("empty2", 0), ("c", 300)]:
        path = str(tmp_path / f"{name}.parquet")
        pq.write_table(pa.table({"x": np.arange(rows, dtype=np.float64)}), path, row_group_size=100)
        paths.append(path)
    src = ef.source.parquet(paths, step_size=200, engine=engine, max_events=limit)
    seen: list[int] = []
    proc = ef.Process("planned")
    proc.source = src

    @proc.analyzer(consumes=["x"])
    def count(ev: ef.Events, seen: list[int] = seen) -> None:
        seen.append(len(ev))

    proc.run(threads=1)
    expected = 1_800 if limit is None else limit
    assert sum(seen) == expected
    metas = gather_meta(src, ["x"], lambda todo: [read_meta(src, p, ["x"]) for p in todo])
    chunks = plan_chunks(src, metas, chunk_size=None, workers=2)
    planned = sum(stop - start for ch in chunks for _, start, stop in ch.steps)
    # Before: the pyarrow engine's plan stopped at the first file without rows.
    assert planned == expected, (engine, limit)
