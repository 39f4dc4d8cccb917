"""A one-line progress display of a running job."""

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
