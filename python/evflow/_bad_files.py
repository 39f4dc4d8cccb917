"""``skip_bad_files=True`` in one process: input files that cannot be read,
or lack a branch the job reads, are left out before the job starts and
listed in the result, as a distributed run lists them."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from .errors import InputError

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
    try:
        yield skipped
    finally:
        proc.source = source


def with_skipped(result: Result, skipped: list[dict[str, str]]) -> Result:
    """``result`` listing the files left out (``result.skipped_files`` and
    the report's ``skipped_files``, as a distributed run's)."""
    if skipped:
        result.skipped_files = [s["file"] for s in skipped]
        result.report["skipped_files"] = skipped
    return result
