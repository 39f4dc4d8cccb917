"""Deterministic accumulation across batches and threads.

Batches finish in any order on several threads. Partial results (a
histogram of one batch, the rows of one batch for a skim) are combined in
*batch order*, so floating-point sums and written files are identical for
any thread count. Every end-path module runs once per batch, so the next
batch in order always arrives; at most the batches in flight wait.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Ordered(Generic[T]):
    """Calls ``consume(index, part)`` for every part, in increasing batch
    index, as soon as all earlier batches have been handed in or skipped."""

    def __init__(self, consume: Callable[[int, T], None]) -> None:
        self._consume = consume
        self._lock = threading.Lock()
        self._pending: dict[int, T | None] = {}
        self._next = 0

    def add(self, index: int, part: T | None) -> None:
        """Hands in batch ``index``'s part (``None``: nothing to add)."""
        with self._lock:
            self._pending[index] = part
            self._drain()

    def skip(self, index: int) -> None:
        """Batch ``index`` failed and is left out (``on_error="skip"``)."""
        with self._lock:
            self._pending.setdefault(index, None)
            self._drain()

    def _drain(self) -> None:
        while self._next in self._pending:
            part = self._pending.pop(self._next)
            if part is not None:
                self._consume(self._next, part)
            self._next += 1

    def finish(self) -> None:
        """Consumes whatever is still waiting, in order (gaps are skipped)."""
        with self._lock:
            for index in sorted(self._pending):
                part = self._pending.pop(index)
                if part is not None:
                    self._consume(index, part)
            self._pending.clear()

    @property
    def waiting(self) -> int:
        return len(self._pending)
