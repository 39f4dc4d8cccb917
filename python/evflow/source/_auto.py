"""Picks the source kind of a list of files by extension."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from ..errors import ConfigurationError
from ._common import PathLike, Setting, Source, _files
from ._parquet import ParquetSource
from ._root import RootSource


def auto(
    files: PathLike | Iterable[PathLike],
    *,
    tree: str = "Events",
    step_size: int = 100_000,
    max_events: int | None = None,
    read_workers: Setting = "auto",
    prefetch: Setting = "auto",
    read_memory: int | str = "512MB",
) -> Source:
    """A ROOT or Parquet source chosen by the files' extension (``.root`` or
    ``.parquet``/``.parq``/``.pq``, or a directory of Parquet files such as
    a distributed skim); ``tree`` is used for ROOT files only.
    Lets one analysis run on the original ROOT files and on Parquet copies."""
    names = _files(files)
    # A directory is a Parquet one (a distributed skim, a dataset's files).
    kinds = {".parquet" if os.path.isdir(f) else os.path.splitext(f)[1].lower() for f in names}
    reading: dict[str, Any] = {"read_workers": read_workers, "prefetch": prefetch, "read_memory": read_memory}
    if kinds <= {".root"}:
        return RootSource(names, tree, step_size, max_events, **reading)
    if kinds <= {".parquet", ".parq", ".pq"}:
        return ParquetSource(names, step_size, max_events, **reading)
    raise ConfigurationError(f"cannot tell the format of {names}: use .root or .parquet files (not mixed)")
