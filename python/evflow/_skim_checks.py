"""Checks of a process's skims before its job starts: a skim never
overwrites (or, as a directory, deletes) one of the job's input files nor
a file that is not an earlier skim, and its directory takes files."""

from __future__ import annotations

import os
import tempfile
from typing import TYPE_CHECKING

from .errors import ConfigurationError

if TYPE_CHECKING:
    from ._process import Process
    from .source import Source

__all__ = ["check_replaceable", "check_skims", "input_paths"]


def input_paths(source: Source | None) -> list[tuple[str, str]]:
    """The source's local input files and directories, each as given and
    resolved (symbolic links followed); remote URLs are left out."""
    if source is None:
        return []
    given = list(getattr(source, "directories", None) or []) + list(getattr(source, "files", None) or [])
    return [(p, os.path.realpath(p)) for p in given if isinstance(p, str) and "://" not in p]


def _inside(path: str, directory: str) -> bool:
    return path != directory and os.path.commonpath([path, directory]) == directory


def check_against_inputs(skim: str, inputs: list[tuple[str, str]]) -> None:
    """Refuses a skim at ``skim`` that would replace, delete or be read
    as one of ``inputs`` (from :func:`input_paths`)."""
    target = os.path.realpath(skim)
    for given, real in inputs:
        if real == target:
            what = "input directory" if os.path.isdir(real) else "input file"
            raise ConfigurationError(
                f"skim '{skim}' is the {what} '{given}' of the job: writing the skim would replace "
                "its input; choose another output path"
            )
        if _inside(real, target):
            raise ConfigurationError(
                f"skim '{skim}' is a directory holding the input file '{given}' of the job: writing the "
                "skim would delete its input; choose another output path"
            )
        if os.path.isdir(real) and os.path.dirname(target) == real:
            raise ConfigurationError(
                f"skim '{skim}' is in the input directory '{given}' of the job, whose files a job reading "
                "that directory reads: choose an output path outside it"
            )


def check_replaceable(skim: str) -> None:
    """Refuses a skim at the path of an existing file that is not a Parquet
    file (an earlier skim, which the skim replaces): writing the skim would
    destroy it. (A directory is checked where it is replaced.)"""
    from .output import is_parquet_file

    if not os.path.exists(skim) or os.path.isdir(skim) or is_parquet_file(skim):
        return
    what = "a file that is not a Parquet file" if os.path.isfile(skim) else "not a regular file"
    raise ConfigurationError(
        f"skim '{skim}' exists and is {what} (not an earlier skim): writing the skim would replace it; "
        "remove it or choose another output path"
    )


def check_writable(skim: str) -> None:
    """Refuses a skim whose directory cannot be made or takes no file
    (tried with a file of its own: permissions alone do not tell, e.g.
    under ``/proc`` or on a read-only file system)."""
    d = os.path.dirname(os.path.abspath(skim))
    there = d
    while not os.path.exists(there):
        there = os.path.dirname(there)
    if not os.path.isdir(there):
        raise ConfigurationError(f"skim '{skim}': cannot create its directory '{d}': '{there}' is a file")
    try:
        fd, probe = tempfile.mkstemp(prefix=".evflow-probe-", dir=there)
        os.close(fd)
        os.remove(probe)
    except OSError as e:
        raise ConfigurationError(
            f"skim '{skim}': cannot write in the directory '{there}' ({e.strerror or e})"
        ) from None


def check_skims(proc: Process) -> None:
    """Checks every skim of ``proc`` against its source before the job
    starts. (A branch whose type differs between the input files needs no
    look at every file first: its column widens when a wider batch comes,
    ``output.ParquetOutput._widen``, and the parts of a distributed skim at
    merge. Opening each file for its types took 0.3 s per NanoAOD file.)"""
    inputs = input_paths(proc.source)
    for out, _select in proc.outputs:
        check_against_inputs(out.path, inputs)
        check_replaceable(out.path)
        check_writable(out.path)
        out._declared = {}
