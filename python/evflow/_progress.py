"""A one-line progress display of a running job (in one process, and over
the chunks of a distributed run)."""

from __future__ import annotations

import sys
import threading
import time


class _Progress:
    """A one-line progress display on stderr."""

    def __init__(self, total: int | None) -> None:
        self.total = total
        self.start = time.perf_counter()
        self.lock = threading.Lock()

    def __call__(self, batches: int, events: int) -> None:
        dt = max(time.perf_counter() - self.start, 1e-9)
        rate = events / dt
        if self.total is not None:
            frac = min(events / self.total, 1.0) if self.total else 1.0
            bar = "#" * int(30 * frac)
            text = f"\r[{bar:<30}] {frac:6.1%}  {events}/{self.total} events  {rate:,.0f} ev/s"
        else:
            text = f"\r{events} events  {batches} batches  {rate:,.0f} ev/s"
        sys.stderr.write(text)
        sys.stderr.flush()

    def close(self) -> None:
        sys.stderr.write("\n")
        sys.stderr.flush()


class ChunkProgress:
    """One progress line over the whole job: events and chunks done, rate."""

    def __init__(self, events: int) -> None:
        self.events = events
        self.t0 = time.perf_counter()

    def __call__(self, chunks: int, events: int) -> None:
        rate = events / max(time.perf_counter() - self.t0, 1e-9)
        frac = events / self.events if self.events else 1.0
        bar = "#" * int(30 * frac)
        sys.stderr.write(
            f"\r[{bar:<30}] {frac:6.1%}  {events}/{self.events} events  {chunks} chunks  {rate:,.0f} ev/s"
        )
        sys.stderr.flush()

    def close(self) -> None:
        sys.stderr.write("\n")
        sys.stderr.flush()
