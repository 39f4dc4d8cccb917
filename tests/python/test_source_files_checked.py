"""A source's files that are neither a path nor a list of paths are
refused, named, when the source is made. Before, ``ef.source.root(3)``
raised Python's own "TypeError: 'int' object is not iterable", and a list
holding a number failed in ``os.fspath``."""

from __future__ import annotations

from pathlib import Path

import pytest

import evflow as ef


@pytest.mark.parametrize("make", [ef.source.root, ef.source.parquet, ef.source.auto])
@pytest.mark.parametrize("files", [3, ["a.root", 3], [None]])
def test_files_of_the_wrong_type_are_refused(make: object, files: object) -> None:
    with pytest.raises(
        ef.ConfigurationError, match=r"^the source's files are a path or a list of paths, not "
    ):
        make(files)  # type: ignore[operator]


def test_paths_and_iterables_of_paths_are_taken(tmp_path: Path) -> None:
    a, b = tmp_path / "a.root", tmp_path / "b.root"
    assert ef.source.root(a).files == [str(a)]
    assert ef.source.root(str(a)).files == [str(a)]
    assert ef.source.root(p for p in (a, b)).files == [str(a), str(b)]
    with pytest.raises(ef.ConfigurationError, match="the source has no input file"):
        ef.source.root([])
