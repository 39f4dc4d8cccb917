"""``skip_bad_files=True`` on a cluster without a second pass: a file
whose data fail to be read (a corrupt basket or row group) is left out as
the job goes on.

A file the chunks the feed plans hold only part of gets chunks of its
own (:class:`FileFeed` cuts the planned chunks at its boundaries; the
batches, and so the results, are the same); files a planned chunk holds
whole stay together (many small files: no more chunks than without
``skip_bad_files``). A chunk that fails on a file's data marks the file
bad, and its chunks not handed out yet are never run:

* a chunk of that file alone: :class:`FileMerger` takes back what the
  file's earlier chunks merged. The merger adds chunks in chunk order, so
  it reaches the failed chunk after every earlier chunk of the file and
  before any chunk of a later file: it keeps the merged state as it was
  before each file (histogram totals copied once per file, the lengths of
  the per-batch lists) and puts it back, so the sums of the other files are
  done exactly as in a run without the file;
* a chunk holding the file whole beside other whole files: the chunk runs
  again without the file, in its place in the merge (its other files,
  small ones, are read again: at most one chunk's worth).

The file's skim parts are not listed in the manifest and are removed with
the skim's other strays.
"""

from __future__ import annotations

import copy
import os
from collections import deque
from typing import Any

from .._file_gate import unreadable_data
from .chunks import Chunk, ChunkFeed
from .merge import Merger

__all__ = ["FileFeed", "FileMerger", "as_given"]

#: a chunk result: the chunk failed on its file's data
_BAD = {"bad file": True}


def as_given(entries: list[dict[str, Any]], given: Any, absolute: Any) -> list[dict[str, Any]]:
    """``entries`` (files left out, each a dict with its ``file``) naming
    each file as the source ``given`` lists it, not by the absolute path
    (``absolute``: the same source, as the workers were given it), as one
    process names it."""
    names = dict(zip(getattr(absolute, "files", []), getattr(given, "files", []), strict=True))
    return [{**e, "file": names.get(e["file"], e["file"])} for e in entries]


def _file(chunk: Chunk) -> str:
    return os.path.abspath(chunk.steps[0][0])


class FileFeed:
    """The chunks of ``feed`` cut at the boundaries of every file they hold
    only part of, and numbered anew; no step of a file marked bad
    (:meth:`FileMerger.leave_out`) is handed out."""

    def __init__(self, feed: ChunkFeed, merger: FileMerger) -> None:
        self._feed = feed
        self._merger = merger
        self._cut: deque[Chunk] = deque()
        self._count = 0
        #: per step of the feed: the first step of its file's run and one past its last
        self._run: list[tuple[int, int]] = []
        steps = feed.steps
        start = 0
        for k in range(1, len(steps) + 1):
            if k == len(steps) or steps[k][0] != steps[start][0]:
                self._run.extend([(start, k)] * (k - start))
                start = k

    def _split(self, ch: Chunk) -> None:
        """Queues ``ch`` cut at the boundaries of the files it holds part of."""
        group: list[tuple[str, int, int]] = []
        first = ch.first_batch
        start = 0
        for k in range(1, len(ch.steps) + 1):
            if k < len(ch.steps) and ch.steps[k][0] == ch.steps[start][0]:
                continue
            whole = self._run[ch.first_batch + start] == (ch.first_batch + start, ch.first_batch + k)
            if not whole and group:
                self._cut.append(Chunk(0, tuple(group), ch.kind, first_batch=first))
                group = []
            if not group:
                first = ch.first_batch + start
            group.extend(ch.steps[start:k])
            if not whole:
                self._cut.append(Chunk(0, tuple(group), ch.kind, first_batch=first))
                group = []
            start = k
        if group:
            self._cut.append(Chunk(0, tuple(group), ch.kind, first_batch=first))

    def next(self) -> Chunk | None:
        while True:
            while not self._cut:
                ch = self._feed.next()
                if ch is None:
                    return None
                self._split(ch)
            ch = self._cut.popleft()
            steps = tuple(s for s in ch.steps if os.path.abspath(s[0]) not in self._merger.bad_files)
            if not steps:
                continue
            out = Chunk(self._count, steps, ch.kind, first_batch=ch.first_batch)
            self._count += 1
            return out

    def __getattr__(self, name: str) -> Any:
        # Sizing and progress: the feed's own.
        return getattr(self._feed, name)


class FileMerger(Merger):
    """A :class:`Merger` of one-file chunks that can take back a file."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.bad_files: set[str] = set()
        #: the files left out, each with the entries that failed and the error
        self.left_out: list[dict[str, Any]] = []
        self._file: str | None = None
        self._kept: dict[str, Any] | None = None

    def leave_out(self, chunk: Chunk, failure: BaseException) -> list[Chunk] | None:
        """``None`` unless ``failure`` of ``chunk`` is a file's data that
        cannot be read; then the file is left out and the chunks to run in
        this one's place are returned: none for a chunk of the file alone
        (the file's merged chunks are taken back when the merge reaches
        this one), else this chunk without the file (whole in it)."""
        where = unreadable_data(failure)
        bad = os.path.abspath(str(where.get("file"))) if where is not None else None
        files = {os.path.abspath(f) for f, _a, _b in chunk.steps}
        if bad is None or bad not in files:
            return None
        if bad not in self.bad_files:
            self.bad_files.add(bad)
            self.left_out.append({**where, "error": str(failure)})  # type: ignore[dict-item]
        if files == {bad}:
            self.add(chunk, _BAD)
            return []
        steps = tuple(s for s in chunk.steps if os.path.abspath(s[0]) not in self.bad_files)
        if not steps:  # its other files were left out before
            self.add(chunk, None)
            return []
        return [Chunk(chunk.index, steps, chunk.kind, first_batch=chunk.first_batch)]

    def add(self, chunk: Chunk, result: dict[str, Any] | None) -> None:
        self.pending[chunk.index] = (chunk, result)
        while self.next in self.pending:
            ch, r = self.pending.pop(self.next)
            self.next += 1
            file = _file(ch)
            if file != self._file:
                # A new file: the state before it (the file before is settled).
                self._file = file
                self._kept = None if file in self.bad_files else self._keep()
            if r is _BAD:
                if self._kept is not None:
                    self._put_back(self._kept)
                    self._kept = None
            elif r is not None and file not in self.bad_files:
                self._merge(ch, r)

    _LISTS = ("records", "batches", "finals", "failed", "reports", "summaries")

    def _keep(self) -> dict[str, Any]:
        kept: dict[str, Any] = {k: len(getattr(self, k)) for k in self._LISTS}
        kept["totals"] = {n: (h.copy() if h is not None else None) for n, h in self.totals.items()}
        kept["skims"] = [len(s) for s in self.skims]
        kept["events"] = self.events
        for k in ("skim_schemas", "typed_by", "empty_schemas"):
            kept[k] = copy.deepcopy(getattr(self, k))
        return kept

    def _put_back(self, kept: dict[str, Any]) -> None:
        for k in self._LISTS:
            del getattr(self, k)[kept[k] :]
        self.totals = kept["totals"]
        for s, n in zip(self.skims, kept["skims"], strict=True):
            del s[n:]
        self.events = kept["events"]
        for k in ("skim_schemas", "typed_by", "empty_schemas"):
            setattr(self, k, kept[k])
