"""A ROOT file of 0 bytes (a copy or transfer that failed) is named as
empty. Before, the error was uproot's "cannot open ROOT file ...: OSError:
expected Chunk of length 403, received 0 bytes from FSSpecSource for file
path ...", over three lines, not saying that the file is empty."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import uproot

import evflow as ef


def _process(files: list[Path]) -> ef.Process:
    proc = ef.Process("empty_file")
    proc.source = ef.source.root(files, tree="t", step_size=100)
    proc.histogram("x", bins=10, range=(0, 1))
    return proc


def test_an_empty_root_file_is_named(tmp_path: Path) -> None:
    good, empty = tmp_path / "good.root", tmp_path / "empty.root"
    with uproot.recreate(good) as f:
        f.mktree("t", {"x": np.float64})
        f["t"].extend({"x": np.linspace(0, 1, 300, endpoint=False)})
    empty.write_bytes(b"")
    message = f"ROOT file '{empty}' is empty (0 bytes): an interrupted copy or write?"
    with pytest.raises(ef.InputError) as err:
        _process([good, empty]).run(threads=1)
    assert str(err.value) == message
    result = _process([good, empty]).run(threads=1, skip_bad_files=True)
    assert result.events == 300 and result.skipped_files == [str(empty)]
    assert result.report["skipped_files"][0]["error"] == message
