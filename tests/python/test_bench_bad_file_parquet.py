"""bench/bad_file.py --format parquet: the middle file is corrupt in its
last row group, so the native reader runs nearly all of its batches before
the failure (what the benchmark claims to measure), and the run with
``skip_bad_files`` gives the histograms of the good files alone."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import evflow as ef

ROOT = Path(__file__).resolve().parents[2]


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bad_file_bench", ROOT / "bench" / "bad_file.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_parquet_inputs_fail_in_the_last_row_group(tmp_path: Path) -> None:
    bench = _bench()
    files, bad = bench.make_inputs(tmp_path / "d", 3, 2_000, 500, "parquet")
    assert bad == 1 and all(f.endswith(".parquet") for f in files)
    with pytest.raises(ef.JobError, match=r"row group 3 \(entries 1500-1999\)"):
        bench.analysis(files, 500, str(tmp_path / "s.parquet")).run(threads=1)
    result = bench.analysis(files, 500, str(tmp_path / "s.parquet")).run(threads=1, skip_bad_files=True)
    assert result.report["skipped_files"][0]["entries"] == [1500, 2000]
    good = files[:bad] + files[bad + 1 :]
    clean = bench.analysis(good, 500, str(tmp_path / "c.parquet")).run(threads=1)
    for name, h in clean.histograms.items():
        assert np.array_equal(h.values(flow=True), result.histograms[name].values(flow=True)), name
