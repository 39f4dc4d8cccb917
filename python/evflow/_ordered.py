"""Deterministic accumulation across batches and threads.

Batches finish in any order on several threads. Partial results (a
histogram of one batch, the rows of one batch for a skim) are combined in
*batch order*, so floating-point sums and written files are identical for
any thread count. Every end-path module runs once per batch, so the next
batch in order always arrives; at most the batches in flight wait.

:class:`Commit` holds a batch's parts until every end module of the batch
ran, so a batch that fails (``on_error="skip"``) adds nothing.

A part is consumed on the thread of whichever end module completes its
batch (or an earlier one): a failure to consume it (a skim that cannot be
written) is raised as :class:`AccumulatorError`, which names the module
that owns the accumulator and the batch of the part, so the job's error
blames that module whatever the executor.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .errors import AccumulatorError, accumulator_error

if TYPE_CHECKING:
    from ._file_gate import FileWatch, Gate

T = TypeVar("T")


class Ordered(Generic[T]):
    """Calls ``consume(index, part)`` for every part, in increasing batch
    index, as soon as all earlier batches have been handed in or skipped.
    ``owner``: the module whose parts these are (named by a failure).
    ``undo``: how to keep and put back what was consumed, for a part of a
    file that may turn out bad (see :mod:`evflow._file_gate`)."""

    def __init__(self, consume: Callable[[int, T], None], owner: str | None = None, undo: Any = None) -> None:
        self._consume = consume
        self._owner = owner
        self.undo = undo
        #: with ``skip_bad_files``: what to do with a part whose file may turn out bad
        self.gate: Gate | None = None
        self._lock = threading.Lock()
        self._pending: dict[int, T | None] = {}
        self._where: dict[int, str] = {}
        self._next = 0

    def add(self, index: int, part: T | None, where: str | None = None) -> None:
        """Hands in batch ``index``'s part (``None``: nothing to add)."""
        with self._lock:
            self._pending[index] = part
            if where is not None and part is not None:
                self._where[index] = where
            self._drain()

    def _call(self, index: int, part: T) -> None:
        if self.gate is not None:
            self.gate.call(index, part, self._consume_one)
        else:
            self._consume_one(index, part)

    def _consume_one(self, index: int, part: T) -> None:
        where = self._where.pop(index, None)
        try:
            self._consume(index, part)
        except Exception as e:
            if self._owner is None:
                raise
            raise AccumulatorError(self._owner, index, where, e) from e

    def skip(self, index: int) -> None:
        """Batch ``index`` failed and is left out (``on_error="skip"``)."""
        with self._lock:
            self._pending.setdefault(index, None)
            self._where.pop(index, None)
            self._drain()

    def _drain(self) -> None:
        while self._next in self._pending:
            part = self._pending.pop(self._next)
            self._next += 1
            if part is not None:
                self._call(self._next - 1, part)

    def finish(self) -> None:
        """Consumes whatever is still waiting, in order (gaps are skipped)."""
        with self._lock:
            for index in sorted(self._pending):
                part = self._pending.pop(index)
                if part is not None:
                    self._call(index, part)
            self._pending.clear()
            if self.gate is not None:
                self.gate.settle(self._consume_one, end=True)

    @property
    def waiting(self) -> int:
        return len(self._pending)


class Commit:
    """Holds each batch's parts until the batch has succeeded.

    Every end-path module (histogram, output, analyzer) runs once on every
    batch that succeeds, and once they all ran nothing of the batch runs
    any more: the batch can no longer fail. Until then its parts (a
    histogram's fill, a skim's rows) are held here; then they go to their
    :class:`Ordered` accumulators at once. A batch that fails
    (``on_error="skip"``) is reported through :meth:`skip`: its held parts
    are dropped and parts handed in later (by end modules still running on
    it) are ignored, so it contributes to nothing, as if its events had not
    been read. Only batches in flight are held.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ends = 0
        self._ordered: list[Ordered[Any]] = []
        #: batch -> (end modules that ran on it, their parts and the batch's origin)
        self._held: dict[int, tuple[int, list[tuple[Ordered[Any], Any, str | None]]]] = {}
        self._failed: set[int] = set()

    def ordered(
        self, consume: Callable[[int, Any], None], owner: str | None = None, undo: Any = None
    ) -> Ordered[Any]:
        """A new accumulator fed by the end module ``owner``, which calls :meth:`add`."""
        o: Ordered[Any] = Ordered(consume, owner, undo)
        self._ordered.append(o)
        self._ends += 1
        return o

    def watch_files(self, watch: FileWatch) -> None:
        """Parts of a batch whose file may turn out bad are added so that
        the file can be taken back (``skip_bad_files``, see :mod:`evflow._file_gate`)."""
        from ._file_gate import Gate

        for o in self._ordered:
            o.gate = Gate(watch, o.undo)

    def end_module(self) -> None:
        """Counts an end module that hands in no part (an analyzer): it calls
        :meth:`add` with no accumulator."""
        self._ends += 1

    def add(self, ordered: Ordered[Any] | None, index: int, part: Any, where: str | None = None) -> None:
        """An end module ran on batch ``index`` (from ``where``); ``part`` is
        its part for ``ordered`` (``None``: nothing to add)."""
        with self._lock:
            if index in self._failed:
                return
            count, parts = self._held.pop(index, (0, []))
            if ordered is not None:
                parts.append((ordered, part, where))
            if count + 1 < self._ends:
                self._held[index] = (count + 1, parts)
                return
        # Every end module ran: the batch succeeded. Batches in order are
        # serialized by each accumulator's own lock.
        handed = {id(o) for o, _p, _w in parts}
        for o, p, w in parts:
            o.add(index, p, w)
        for o in self._ordered:
            if id(o) not in handed:
                o.add(index, None)

    def skip(self, index: int) -> None:
        """Batch ``index`` failed: none of its parts is added."""
        with self._lock:
            if index in self._failed:
                return
            self._failed.add(index)
            self._held.pop(index, None)
        for o in self._ordered:
            o.skip(index)

    def finish(self) -> None:
        """The job ended: what a batch that did not finish left is dropped;
        every accumulator consumes what it still holds, in order."""
        with self._lock:
            self._held.clear()
        try:
            for o in self._ordered:
                o.finish()
        except AccumulatorError as e:  # after the engine: no job error names it
            raise accumulator_error(e) from e.error

    @property
    def held(self) -> int:
        """Batches whose parts are held."""
        with self._lock:
            return len(self._held)
