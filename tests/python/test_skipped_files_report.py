"""``skip_bad_files=True``: the report lists the files left out, with why,
under ``report["skipped_files"]`` on a Dask cluster as in one process —
the files that did not open as well as a file whose data failed to be
read during the job."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import evflow as ef

pytest.importorskip("distributed")

EVENTS, STEP = 4_000, 1_000


def _write(path: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    pq.write_table(pa.table({"x": rng.normal(size=EVENTS)}), path, row_group_size=STEP, compression="zstd")


def _spoil_row_group(path: Path, group: int) -> None:
    """Zeros in the middle of a row group's compressed data."""
    column = pq.ParquetFile(path).metadata.row_group(group).column(0)
    start = column.dictionary_page_offset if column.has_dictionary_page else column.data_page_offset
    data = bytearray(path.read_bytes())
    middle = start + column.total_compressed_size // 2
    data[middle : middle + 64] = bytes(64)
    path.write_bytes(bytes(data))


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("skipped_report")
    good, corrupt, truncated = d / "good.parquet", d / "corrupt.parquet", d / "truncated.parquet"
    _write(good, 1)
    _write(corrupt, 2)
    _spoil_row_group(corrupt, 2)
    _write(truncated, 3)
    truncated.write_bytes(truncated.read_bytes()[:600])
    return {
        "good": str(good),
        "corrupt": str(corrupt),
        "truncated": str(truncated),
        "missing": str(d / "no.parquet"),
    }


def _analysis(paths: list[str]) -> ef.Process:
    proc = ef.Process("skipped_report")
    proc.source = ef.source.parquet(paths, step_size=STEP)
    proc.histogram("x", bins=10, range=(-3, 3))
    return proc


def _listed(report: dict[str, Any]) -> list[tuple[str, Any]]:
    entries = report.get("skipped_files")
    assert isinstance(entries, list), sorted(report)
    assert all(isinstance(e.get("error"), str) and e["error"] for e in entries), entries
    return [(e["file"], e.get("entries")) for e in entries]


@pytest.mark.parametrize("bad", [["truncated", "missing"], ["truncated", "corrupt", "missing"]])
def test_the_report_lists_the_files_left_out_on_a_cluster_as_in_one_process(
    client: Any, files: dict[str, str], bad: list[str]
) -> None:
    paths = [files["good"], *(files[b] for b in bad)]
    one = _analysis(paths).run(threads=1, skip_bad_files=True)
    dist = _analysis(paths).run(client=client, skip_bad_files=True)
    assert _listed(dist.report) == _listed(one.report)
    assert [f for f, _ in _listed(one.report)] == one.skipped_files == dist.skipped_files
    expected = [files["truncated"], files["missing"]] + ([files["corrupt"]] if "corrupt" in bad else [])
    assert one.skipped_files == expected
    x = pq.read_table(files["good"]).column("x").to_numpy()
    assert np.array_equal(dist.histograms["x"].values(), np.histogram(x, bins=10, range=(-3, 3))[0])
