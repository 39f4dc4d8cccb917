"""``skip_bad_files=True`` in one process without a second pass: a file
whose data fail to be read during the job (a corrupt basket) is left out
as the job goes on, and what its batches read before the failure gave is
taken back.

The reader (:meth:`FileWatch.reader`) reads the steps ahead as usual; a
step whose data cannot be read becomes a marker instead of an error. When
the marker comes up, in step order, the file is marked bad: its remaining
steps are not handed to the engine and the job goes on with the next file.
The native Parquet reader does the same in Rust and tells the watch
through :meth:`FileWatch.native` (each batch's file, a file whose row
group fails to decode, the end).
Every step after it is handed out only after that mark, so an accumulator
that adds parts in batch order (:class:`~evflow._ordered.Ordered`) always
knows, when it reaches a batch of the next file, whether the file before
was bad:

* a histogram adds a file's batches into its running total as usual, after
  keeping a copy of the total as it was before the file (while the file is
  not read to its end); a bad file puts the copy back, so the sums of the
  other files are those, bit for bit, of a run without it. One copy per
  histogram at a time.
* a skim holds the rows of a file not read to its end and writes them once
  it is (the rows of one file, while it is being read); a bad file's rows
  are dropped, so the skim file is that of a run without it.

The cut-flow, the events and the batches counted leave the file's batches
out (:meth:`FileWatch.without_bad`).
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from .errors import EvflowError, InputError, error_chain

__all__ = ["BAD", "GOOD", "OPEN", "FileWatch", "NoFileLeft", "undo_hist", "unreadable_data"]

#: a file run read to its end without error
GOOD = "good"
#: a file run whose data could not be read: left out
BAD = "bad"
#: a file run still being read
OPEN = "open"


class NoFileLeft(InputError):
    """Every input file was left out (raised by the reader, so the job
    writes nothing; the job's error is replaced by it)."""


class _Unreadable:
    """A step whose data could not be read (instead of the reader's error)."""

    __slots__ = ("error", "where")

    def __init__(self, error: BaseException, where: dict[str, Any]) -> None:
        self.error = error
        self.where = where


#: the run of a batch that came from no file the watch follows (the batch
#: of no event an empty input runs, with the columns' types): always good
_NO_RUN = -1


class FileWatch:
    """Which file each batch of the job comes from, and whether each file
    read so far is good, bad or still being read. A *run* is one listing of
    a file: its consecutive steps."""

    def __init__(self, files: Sequence[str] = ()) -> None:
        #: the files the job reads (every one left out: no input is left)
        self.files = {os.path.abspath(f) for f in files}
        self._lock = threading.Lock()
        #: per engine batch index (batches handed out, from 0): its run
        self._batch_run: list[int] = []
        #: per run: its file (absolute) and status
        self._runs: list[tuple[str, str]] = []
        self._bad: set[str] = set()
        #: the files left out, each with the entries that failed and the error
        self.left_out: list[dict[str, Any]] = []

    # -- the reader ----------------------------------------------------------------

    def reader(self, steps: Sequence[tuple[str, int, int]], read: Callable[[Any], Any], balancer: Any) -> Any:
        """A reader of ``steps`` (``(file, start, stop)``) through ``read``
        (ahead, as :class:`~evflow.source._readahead._ReadAhead`) that
        leaves out a file from its first step whose data cannot be read."""
        from .source._readahead import _ReadAhead

        def guarded(step: tuple[str, int, int]) -> Any:
            if self.is_bad(step[0]):  # read ahead past the failure: no need
                return _Unreadable(EvflowError("left out"), {})
            try:
                return read(step)
            except EvflowError as e:
                where = unreadable_data(e)
                if where is None:
                    raise
                return _Unreadable(e, where)

        return _Skipping(_ReadAhead(steps, guarded, balancer), self)

    def is_bad(self, file: str) -> bool:
        with self._lock:
            return os.path.abspath(file) in self._bad

    def _handed(self, file: str) -> None:
        """A batch of ``file`` is handed to the engine (the next index)."""
        path = os.path.abspath(file)
        with self._lock:
            if not self._runs or self._runs[-1][0] != path or self._runs[-1][1] != OPEN:
                self._close_last()
                self._runs.append((path, OPEN))
            self._batch_run.append(len(self._runs) - 1)

    def _mark_bad(self, file: str, where: dict[str, Any], error: BaseException) -> None:
        path = os.path.abspath(file)
        with self._lock:
            if path in self._bad:
                return
            self._bad.add(path)
            self.left_out.append({**where, "file": where.get("file", file), "error": str(error)})
            for i, (f, status) in enumerate(self._runs):
                if f == path and status == OPEN:
                    self._runs[i] = (f, BAD)

    def _close_last(self) -> None:
        if self._runs and self._runs[-1][1] == OPEN:
            self._runs[-1] = (self._runs[-1][0], GOOD)

    def _ended(self) -> None:
        """The reader handed out its last batch: the file read last is good.
        With every file left out, a :class:`NoFileLeft` names them."""
        with self._lock:
            self._close_last()
            if self.files and self.files <= self._bad:
                raise NoFileLeft(
                    "skip_bad_files: no input file can be read: "
                    + "; ".join(s["error"] for s in self.left_out)
                )

    # -- the accumulators ----------------------------------------------------------

    def run_of(self, index: int) -> int:
        with self._lock:
            return self._batch_run[index] if index < len(self._batch_run) else _NO_RUN

    def status(self, run: int) -> str:
        if run == _NO_RUN:
            return GOOD
        with self._lock:
            return self._runs[run][1]

    def bad_batches(self) -> set[int]:
        with self._lock:
            return {i for i, r in enumerate(self._batch_run) if self._runs[r][1] == BAD}

    def without_bad(self, res: dict[str, Any]) -> dict[str, Any]:
        """The engine's result ``res`` without the batches of files left
        out: the cut-flow and the events counted are those of the others."""
        bad = self.bad_batches()
        if not bad:
            return res
        out = dict(res)
        for key in ("batches", "records", "finals"):
            out[key] = [r for r in res[key] if r[0] not in bad]
        out["failed"] = [b for b in res["failed"] if b not in bad]
        return out

    def native(self) -> _Native:
        """What the native Parquet reader tells (``Job.set_parquet_source(watch=...)``)."""
        return _Native(self)


class _Native:
    """The native Parquet reader's calls, in batch order: ``handed(path)``
    before each batch it hands to the engine, ``unreadable(message, path,
    start, stop)`` when a row group of ``path`` fails to decode (the reader
    then drops the file's remaining row groups and goes on), ``ended()``
    after the last batch."""

    def __init__(self, watch: FileWatch) -> None:
        self._watch = watch

    def handed(self, file: str) -> None:
        self._watch._handed(file)

    def unreadable(self, message: str, file: str, start: int, stop: int) -> None:
        from .source._common import unreadable

        e = unreadable(message, file, start, stop)
        self._watch._mark_bad(file, e.unreadable, e)  # type: ignore[attr-defined]

    def ended(self) -> None:
        self._watch._ended()


def unreadable_data(error: BaseException) -> dict[str, Any] | None:
    """The file and entries of the data an error (or its causes) could
    not read, if that is what it is about."""
    for e in error_chain(error):
        where = getattr(e, "unreadable", None)
        if isinstance(where, dict):
            return where
    return None


class _Skipping:
    """Hands out the batches of the steps read, in order, except those of a
    file whose data could not be read (from its first failing step on)."""

    def __init__(self, reader: Any, watch: FileWatch) -> None:
        self._reader = reader
        self._watch = watch

    def next_batch(self) -> Any:
        w = self._watch
        while True:
            batch = self._reader.next_batch()
            if batch is None:
                w._ended()
                return None
            if isinstance(batch, _Unreadable):
                if batch.where:
                    w._mark_bad(str(batch.where["file"]), batch.where, batch.error)
                continue
            if w.is_bad(batch.file):  # read before the failure was handed out
                continue
            w._handed(batch.file)
            return batch

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reader, name)


class Gate:
    """What an :class:`~evflow._ordered.Ordered` accumulator does with the
    part of a batch whose file may still turn out bad. With ``undo`` (a
    histogram: ``(keep, put_back)``), the part is added at once after the
    accumulator was kept as it was before the file; else (a skim) the part
    is held until the file is read to its end."""

    def __init__(
        self, watch: FileWatch, undo: tuple[Callable[[], Any], Callable[[Any], None]] | None
    ) -> None:
        self.watch = watch
        self.undo = undo
        #: the run whose batches were added after ``kept`` was taken
        self._kept_run: int | None = None
        self._kept: Any = None
        self._held: deque[tuple[int, int, Any]] = deque()

    def call(self, index: int, part: Any, consume: Callable[[int, Any], None]) -> None:
        """Batch ``index``'s part, in batch order."""
        self.settle(consume)
        run = self.watch.run_of(index)
        status = self.watch.status(run)
        if status == BAD:
            return
        if self.undo is not None:
            if status == OPEN and self._kept_run != run:
                self._kept_run, self._kept = run, self.undo[0]()
            consume(index, part)
        elif status == GOOD and not self._held:
            consume(index, part)
        else:
            self._held.append((index, run, part))

    def settle(self, consume: Callable[[int, Any], None], end: bool = False) -> None:
        """Acts on the files found good or bad since the last part; at the
        ``end`` (the job finished, or was interrupted), a file still being
        read counts as good."""
        w = self.watch
        if self._kept_run is not None:
            status = w.status(self._kept_run)
            if status == BAD:
                assert self.undo is not None
                self.undo[1](self._kept)
            if status != OPEN or end:
                self._kept_run = self._kept = None
        while self._held:
            index, run, part = self._held[0]
            status = w.status(run)
            if status == OPEN and not end:
                return
            self._held.popleft()
            if status != BAD:
                consume(index, part)


def undo_hist(state: dict[str, Any]) -> tuple[Callable[[], Any], Callable[[Any], None]]:
    """Keeping and putting back a histogram's running total (and the batch
    parts kept for a distributed chunk) for :class:`Gate`."""

    def keep() -> Any:
        total = state["total"]
        return (total.copy() if total is not None else None, len(state["parts"]))

    def put_back(kept: Any) -> None:
        state["total"] = kept[0]
        del state["parts"][kept[1] :]

    return keep, put_back
