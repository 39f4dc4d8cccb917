"""``skip_bad_files=True`` on an input without any event: the job runs
one batch of no event with the columns' types, which comes from no file
the reader follows; it counts as from a good file (the check of whether
its file was left out failed with an IndexError in the first histogram)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import evflow as ef


@pytest.mark.parametrize("kind", ["parquet", "root"])
def test_an_input_of_no_event_runs_with_skip_bad_files(tmp_path: Path, kind: str) -> None:
    if kind == "parquet":
        path = tmp_path / "empty.parquet"
        pq.write_table(pa.table({"x": pa.array([], pa.float64())}), path)
        source: ef.source.Source = ef.source.parquet(str(path))
    else:
        uproot = pytest.importorskip("uproot")
        path = tmp_path / "empty.root"
        with uproot.recreate(path) as f:
            f.mktree("t", {"x": np.float64})
        source = ef.source.root(str(path), tree="t")
    proc = ef.Process("empty")
    proc.source = source
    proc.histogram("x", bins=10, range=(0, 1))
    result = proc.run(threads=1, skip_bad_files=True)
    assert result.events == 0 and result.skipped_files == []
    assert result.histograms["x"].values().sum() == 0
