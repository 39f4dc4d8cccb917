"""Files left out by ``skip_bad_files`` are named as the source lists them,
on a cluster as in one process: a relative path stays relative in
``result.skipped_files`` and the report's ``skipped_files`` (a cluster
listed the absolute path the workers were given), so that a check such as
``"b.root" in result.skipped_files`` reads alike whichever way it ran."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import evflow as ef

pytest.importorskip("distributed")
uproot = pytest.importorskip("uproot")


def _write(path: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    with uproot.recreate(path, compression=uproot.ZLIB(4)) as f:
        f.mktree("t", {"x": np.float64})
        for _ in range(4):  # four baskets of 500 entries
            f["t"].extend({"x": rng.normal(size=500)})


def _spoil_last_basket(path: Path) -> None:
    b = uproot.open(path)["t"]["x"]
    seek = int(b.member("fBasketSeek")[3])
    start = seek + int(b.basket_compressed_bytes(3)) // 2
    data = bytearray(path.read_bytes())
    data[start : start + 32] = bytes(32)
    path.write_bytes(bytes(data))


def test_relative_paths_are_listed_as_given(
    client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for k, name in enumerate(["a.root", "b.root", "c.root"]):
        _write(tmp_path / name, k)
    _spoil_last_basket(tmp_path / "b.root")
    files = ["a.root", "missing.root", "b.root", "c.root"]
    for options in ({"threads": 1}, {"client": client, "chunk_size": 500}):
        proc = ef.Process("as_given")
        proc.source = ef.source.root(files, tree="t", step_size=500)
        proc.histogram("x", bins=10, range=(-3, 3))
        result = proc.run(skip_bad_files=True, **options)
        assert result.skipped_files == ["missing.root", "b.root"], options
        assert [s["file"] for s in result.report["skipped_files"]] == ["missing.root", "b.root"], options
        assert result.report["skipped_files"][1]["entries"] == [1500, 2000], options
        assert result.events == 4000, options


def test_a_cluster_run_after_a_one_process_run_of_relative_paths(
    client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one-process run with ``skip_bad_files`` caches the files'
    metadata under the paths as given (relative); the cluster run after it
    took them from there and sent its workers, which run elsewhere, the
    relative paths: every chunk failed with "ROOT file 'a.root' does not exist"."""
    monkeypatch.chdir(tmp_path)
    for k, name in enumerate(["a.root", "c.root"]):
        _write(tmp_path / name, k)
    results = []
    for options in ({"threads": 1}, {"client": client, "chunk_size": 500}):
        proc = ef.Process("cached")
        proc.source = ef.source.root(["a.root", "c.root"], tree="t", step_size=500)
        proc.histogram("x", bins=10, range=(-3, 3))
        results.append(proc.run(skip_bad_files=True, **options))
    one, cluster = results
    assert cluster.events == one.events == 4000
    assert np.array_equal(cluster.histograms["x"].values(flow=True), one.histograms["x"].values(flow=True))
