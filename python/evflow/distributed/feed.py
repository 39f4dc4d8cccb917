"""Cutting the batches into chunks as a run dispatches them.

A distributed run keeps a few chunks per worker thread in flight (one
running, the next queued) and asks the :class:`ChunkFeed` for the next chunk
each time one finishes. The feed cuts it from the batches not yet handed
out (*guided self-scheduling*, "factoring"): a chunk takes about
``1 / (2 × workers)`` of what is left, so chunks are long at the start (few
tasks, little overhead) and shrink towards the end, where the last ones are
short and every worker finishes at about the same time. Once chunks have
come back, their measured cost (worker-seconds per event) bounds a chunk
between ``min_seconds`` (several times the measured per-chunk overhead, so
the overhead stays a small share) and ``max_seconds``; before that, a chunk
is at most ``first_batches`` batches.

Chunks are always runs of consecutive single-process batches, numbered in
the order they are handed out, which is the order of their batches: the
merge in chunk order is the single-process order whatever the sizes.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator, Sequence

from .chunks import Chunk

__all__ = ["ChunkFeed"]


class ChunkFeed:
    """Hands out chunks of ``steps`` (the single-process batches, ``(file,
    start, stop)`` each) in order. ``starts[i]``: whether a chunk may start
    at step ``i``. ``fixed``: a plan to hand out as it is (an explicit
    ``chunk_size``) instead of cutting chunks as they are asked for."""

    #: the longest chunk, in batches, while no chunk has been timed
    first_batches = 10
    #: the longest chunk in batches (bounds a chunk's result: a few numbers
    #: and possibly a histogram part per batch)
    max_batches = 1000
    #: the shortest and longest chunk, in worker-seconds, once timed
    min_seconds = 0.01
    max_seconds = 5.0
    #: the shortest chunk is at least this many times the per-chunk overhead
    overhead_factor = 5.0
    #: a chunk takes 1 / (factor × workers) of the events left
    factor = 2

    def __init__(
        self,
        steps: Sequence[tuple[str, int, int]],
        kind: str,
        starts: Sequence[bool] | None = None,
        *,
        workers: int = 1,
        fixed: Sequence[Chunk] | None = None,
    ) -> None:
        self.steps = list(steps)
        self.kind = kind
        self.starts = list(starts) if starts is not None else [True] * len(self.steps)
        #: events before step i (the last entry: all events)
        self.ends = [0]
        for _f, a, b in self.steps:
            self.ends.append(self.ends[-1] + b - a)
        self.workers = max(1, workers)
        self.fixed = list(fixed) if fixed is not None else None
        self.pos = 0  # the first step not handed out
        self.handed: list[Chunk] = []
        self._seconds = 0.0
        self._events = 0
        self._overheads: list[float] = []

    # ----------------------------------------------------------------- measurements

    @property
    def total_events(self) -> int:
        if self.fixed is not None:
            return sum(ch.events for ch in self.fixed)
        return self.ends[-1]

    @property
    def left_events(self) -> int:
        """Events not handed out yet."""
        if self.fixed is not None:
            return sum(ch.events for ch in self.fixed[len(self.handed) :])
        return self.ends[-1] - self.ends[self.pos]

    def set_workers(self, n: int) -> None:
        """The number of chunks the cluster runs at once (its threads)."""
        self.workers = max(1, n)

    def observe(self, events: int, seconds: float, overhead: float | None = None) -> None:
        """A chunk of ``events`` events took ``seconds`` on its worker, of
        which ``overhead`` outside the engine's event loop."""
        if events > 0 and seconds > 0:
            self._events += events
            self._seconds += seconds
        if overhead is not None and overhead >= 0:
            self._overheads.append(overhead)
            del self._overheads[:-32]

    @property
    def cost(self) -> float | None:
        """Worker-seconds per event of the chunks timed so far."""
        return self._seconds / self._events if self._events else None

    @property
    def shortest_s(self) -> float:
        """The shortest chunk (worker-seconds) once the cost is known."""
        if not self._overheads:
            return self.min_seconds
        ordered = sorted(self._overheads)
        return max(self.min_seconds, self.overhead_factor * ordered[len(ordered) // 2])

    # ----------------------------------------------------------------- chunks

    def __iter__(self) -> Iterator[Chunk]:
        while (ch := self.next()) is not None:
            yield ch

    def next(self) -> Chunk | None:
        """The next chunk, or ``None`` when every batch is handed out."""
        if self.fixed is not None:
            if len(self.handed) >= len(self.fixed):
                return None
            ch = self.fixed[len(self.handed)]
            self.handed.append(ch)
            return ch
        i = self.pos
        n = len(self.steps)
        if i >= n:
            return None
        j = self._end(i)
        while j < n and not self.starts[j]:
            j += 1
        ch = Chunk(len(self.handed), tuple(self.steps[i:j]), self.kind, first_batch=i)
        self.handed.append(ch)
        self.pos = j
        return ch

    def _end(self, i: int) -> int:
        """One past the last step of the chunk that starts at step ``i``."""
        n = len(self.steps)
        left = self.ends[-1] - self.ends[i]
        target = left / (self.factor * self.workers)
        last = min(n, i + self.max_batches)
        cost = self.cost
        if cost is None:
            last = min(last, i + self.first_batches)
        else:
            target = min(max(target, self.shortest_s / cost), self.max_seconds / cost)
        # The fewest steps that hold ``target`` events (at least one).
        j = bisect.bisect_left(self.ends, self.ends[i] + math.ceil(target), lo=i + 1)
        return max(i + 1, min(j, last))
