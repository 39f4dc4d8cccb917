"""``skip_bad_files=True``: input files that cannot be read, or lack a
branch the job reads, are left out before the job starts (in one process
here, as a distributed run does); a file whose data fail to be read during
the job (a corrupt basket or row group) is left out as the job goes on,
its batches' contributions taken back (ROOT files and the native Parquet
reader, :mod:`evflow._file_gate`), or, where a reader cannot go on past
it, by running the job again without it. Both are listed in the result."""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ._file_gate import NoFileLeft, unreadable_data
from .errors import EvflowError, InputError, JobError

if TYPE_CHECKING:
    from ._process import Process
    from .result import Result


@contextlib.contextmanager
def bad_files_left_out(proc: Process, columns: Sequence[str], skip: bool) -> Iterator[list[dict[str, str]]]:
    """With ``skip``, runs the job on the files of ``proc.source`` that
    open and have ``columns`` (``proc.source`` is restored afterwards);
    yields the files left out, each with its error. Fails, naming every
    file, when none is left."""
    source = proc.source
    skipped: list[dict[str, str]] = []
    if skip and hasattr(source, "files"):
        from .distributed.chunks import gather_meta, read_meta

        def read_all(paths: list[str]) -> list[Any]:
            # Opening files waits on storage: a few at once.
            with ThreadPoolExecutor(max(1, min(8, len(paths)))) as pool:
                return list(pool.map(lambda p: read_meta(source, p, columns), paths))

        metas = gather_meta(source, columns, read_all)
        skipped = [{"file": m.path, "error": str(m.error)} for m in metas if m.error is not None]
        if skipped:
            good = [m.path for m in metas if m.error is None]
            if not good:
                raise InputError(
                    "skip_bad_files: no input file can be read: " + "; ".join(s["error"] for s in skipped)
                )
            trimmed: Any = copy.copy(source)
            trimmed.files = good
            proc.source = trimmed
    watch = None
    if skip and _watchable(proc.source):
        from ._file_gate import FileWatch

        watched: Any = copy.copy(proc.source)
        watch = watched.bad_watch = FileWatch(watched.files)
        proc.source = watched
    try:
        yield skipped
    except JobError as e:
        if isinstance(e.__cause__, NoFileLeft):
            raise e.__cause__ from None
        raise
    finally:
        proc.source = source
        if watch is not None:
            skipped.extend(watch.left_out)


def _watchable(source: Any) -> bool:
    """Whether ``source``'s reader goes on past a file whose data fail to be
    read, told of it by a :class:`~evflow._file_gate.FileWatch`."""
    from .source import ParquetSource

    return isinstance(source, ParquetSource) or hasattr(source, "bad_watch")


def with_skipped(result: Result, skipped: list[dict[str, str]]) -> Result:
    """``result`` listing the files left out (``result.skipped_files`` and
    the report's ``skipped_files``, as a distributed run's)."""
    if skipped:
        result.skipped_files = [s["file"] for s in skipped]
        result.report["skipped_files"] = skipped
    return result


def leaving_out_unreadable(
    run: Callable[[list[dict[str, Any]]], Result], skip: bool, proc: Process | None = None
) -> Result:
    """``run(left_out)`` (``left_out``: the files whose data could not be
    read, each with its entries and error); with ``skip``, a run that
    fails on a file's data is run again without that file (where the
    reader cannot go on past it), so that no row of it reaches a
    histogram, cut-flow or skim (the result is that of a
    run without the file; the file's earlier batches are not kept). With
    ``proc``, its source is trimmed for each run (and restored); else
    ``run`` leaves the files out itself. The files left out are listed in
    the result, after those that did not open."""
    left: list[dict[str, Any]] = []
    source = proc.source if proc is not None else None
    try:
        while True:
            try:
                result = run(left)
            except EvflowError as e:
                where = unreadable_data(e)
                if not skip or where is None or any(s["file"] == where["file"] for s in left):
                    raise
                left.append({**where, "error": str(e)})
                if proc is not None:
                    proc.source = without_files(source, [s["file"] for s in left])
                continue
            if left:
                result.skipped_files = [*(result.skipped_files or []), *(s["file"] for s in left)]
                result.report["skipped_files"] = [*result.report.get("skipped_files", []), *left]
            return result
    finally:
        if proc is not None:
            proc.source = source


def without_files(source: Any, files: Sequence[str]) -> Any:
    """``source`` without ``files`` (a copy; every listing of them); an
    :class:`InputError` when no file is left."""
    if not files or not hasattr(source, "files"):
        return source
    drop = {os.path.abspath(f) for f in files}
    kept = [f for f in source.files if os.path.abspath(f) not in drop]
    if not kept:
        raise InputError("skip_bad_files: no input file can be read: " + ", ".join(f"'{f}'" for f in files))
    trimmed = copy.copy(source)
    trimmed.files = kept
    return trimmed
