"""Reading ahead of the engine on worker threads, balanced against processing
by the :class:`ReadBalancer` (used by the ROOT and native Parquet sources)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from .._cores import available_cores
from ._common import Setting, _memory, _setting


class ReadBalancer:
    """Balances reading against processing (HEP-Frame's data-setup layer).

    A source's read/decode workers run ahead of the engine. At *checkpoints*
    (every ``interval`` batches the engine takes) the source reports what it
    measured since the last one: how long the engine waited for input
    (``wait_s``: input-bound), how long workers were blocked because the
    allowed depth was reached (``ahead_s``: reading is ahead, processing-bound),
    the events taken and the bytes per batch. The balancer answers with the
    next ``(workers, depth, interval)``:

    * starving (the engine waited more than ``starve`` of the time) while
      the workers were busy (blocked by the depth less than ``busy`` of
      their time) and a worker more is allowed: *try* one more worker (and
      depth at least workers + 2);
    * starving although the workers were often blocked by the depth (reading
      keeps up on average but comes in bursts): one batch more of depth, up
      to ``max_depth`` per worker;
    * reading well ahead (engine never waited, workers blocked by the depth
      more than half the time) with several workers: *try* one fewer, which
      frees a core for processing and memory;
    * a trial is judged over twice the first interval: one worker more is
      kept when the event rate rose by ``gain``, or when the engine waited
      clearly less (by 2 × ``busy`` of the time) at a rate not ``gain``
      lower; one fewer is kept when the rate is not ``gain`` lower. Else the
      previous setting comes back and that direction stays closed for three
      checkpoints;
    * the first ``warmup`` checkpoint only measures (the engine is still
      filling its batches in flight, so the rate is that of reading alone),
      and an interval shorter than ``min_wall`` seconds is too short to
      judge: the balancer only doubles it;
    * depth never exceeds ``memory`` / bytes per batch;
    * every change sets the interval back to ``first_interval`` batches; a
      checkpoint without change doubles it (up to ``max_interval``).

    The balancer starts at ``start_workers`` (2) workers, at most
    ``max_workers`` (the cores this process may use, see
    ``evflow._cores.available_cores``, + 1; counted when reading starts),
    and a depth of workers + 2. Fixed
    ``workers`` / ``depth`` (integers) disable the adaptation of that knob;
    the measurements are still recorded. ``history`` holds one dict per
    checkpoint; :meth:`summary` says when the setting settled.
    """

    def __init__(
        self,
        workers: Setting = "auto",
        depth: Setting = "auto",
        *,
        max_workers: int | None = None,
        memory: int | str = "512MB",
        first_interval: int = 4,
        max_interval: int = 64,
        starve: float = 0.05,
        busy: float = 0.1,
        gain: float = 0.05,
        max_depth: int = 4,
        min_wall: float = 0.02,
        start_workers: int = 2,
        warmup: int = 1,
    ) -> None:
        self.fixed_workers = _setting(workers, "read_workers")
        self.fixed_depth = _setting(depth, "prefetch")
        self._max_workers = max_workers
        self._start_workers = start_workers
        self._limit_workers()
        self.memory = _memory(memory)
        self.first_interval = max(1, first_interval)
        self.max_interval = max(self.first_interval, max_interval)
        self.starve = starve
        self.busy = busy
        self.gain = gain
        self.max_depth = max_depth
        self.min_wall = min_wall
        self.warmup = max(0, warmup)
        self.history: list[dict[str, Any]] = []
        self._reset()

    def _limit_workers(self) -> None:
        # The cores of the process that reads, when it reads: a source built
        # on a Dask client runs on a worker, whose machine may differ.
        cores = available_cores()
        # One more reader than cores: readers also wait (I/O, the GIL for uproot).
        self.max_workers = max(1, self._max_workers or cores + 1, self.fixed_workers or 1)
        self.start_workers = max(1, min(self._start_workers, self.max_workers))

    def _reset(self) -> None:
        self.workers = self.fixed_workers or self.start_workers
        self.depth = self.fixed_depth or self.workers + 2
        self.interval = self.first_interval
        self._trial: dict[str, Any] | None = None
        self._closed: dict[str, int] = {}
        self._units = 0
        self._batches = 0
        self._events = 0
        self.settled_checkpoint = 0
        self.settled_batches = 0
        self.settled_events = 0
        self._committed = (self.workers, self.depth)

    def start(self, units: int = 0) -> tuple[int, int, int, int]:
        """The first setting: ``(workers, depth, interval, max_workers)``."""
        self._limit_workers()
        self._reset()
        self.history = []
        self._units = units
        max_workers = self.fixed_workers or self.max_workers
        return self.workers, self.depth, self.interval, max_workers

    def _depth_cap(self, bytes_per_batch: float) -> int:
        if bytes_per_batch <= 0:
            return 1 << 20
        return max(2, int(self.memory // bytes_per_batch))

    def _measured(
        self, stats: dict[str, Any], rate: float, starving: float, ahead: float, per_batch: float
    ) -> dict[str, Any]:
        """The measurements of one interval, as a :attr:`history` record starts."""
        return {
            "checkpoint": int(stats.get("checkpoint", len(self.history) + 1)),
            "batches": self._batches,
            "events": self._events,
            "rate": rate,
            "starving": starving,
            "ahead": ahead,
            "bytes_per_batch": per_batch,
        }

    def checkpoint(self, stats: dict[str, Any]) -> tuple[int, int, int]:
        """Takes one interval's measurements; returns ``(workers, depth, interval)``."""
        wall = max(float(stats.get("wall_s", 0.0)), 1e-9)
        batches = int(stats.get("batches", 0))
        events = int(stats.get("events", 0))
        self._batches += batches
        self._events += events
        rate = events / wall
        starving = float(stats.get("wait_s", 0.0)) / wall
        ahead = float(stats.get("ahead_s", 0.0)) / (wall * max(1, self.workers))
        per_batch = float(stats.get("bytes", 0)) / batches if batches else 0.0
        cap = self._depth_cap(per_batch)
        action = "keep"
        before = (self.workers, self.depth)

        for k in list(self._closed):  # reopen closed directions after the interval doubled 3 times
            self._closed[k] -= 1
            if self._closed[k] <= 0:
                del self._closed[k]

        warming = len(self.history) < self.warmup
        if self._trial is None and (wall < self.min_wall or warming):
            # The first intervals fill the engine's batches in flight (their
            # rate is that of reading alone), and a very short interval is
            # noise: measure, decide later.
            if not warming:
                self.interval = min(self.interval * 2, self.max_interval)
            self.history.append(
                {
                    **self._measured(stats, rate, starving, ahead, per_batch),
                    "workers": self.workers,
                    "depth": self.depth,
                    "action": "warm-up" if warming else "measure longer",
                    "next": (self.workers, self.depth, self.interval),
                }
            )
            return self.workers, self.depth, self.interval
        if self._trial is not None:
            trial, self._trial = self._trial, None
            better = rate >= trial["rate"] * (1 + self.gain)
            not_worse = rate >= trial["rate"] * (1 - self.gain)
            # One worker more is kept when the rate rose, or when the engine
            # waited clearly less at no loss of rate (rates over a few
            # batches are noisy; the wait is a steadier signal).
            fed = trial["starving"] - starving >= 2 * self.busy
            ok = (better or (fed and not_worse)) if trial["dir"] == "more" else not_worse
            if ok:
                action = f"keep trial ({trial['dir']} workers)"
            else:
                self.workers, self.depth = trial["workers"], trial["depth"]
                self._closed[trial["dir"]] = 3
                action = f"revert trial ({trial['dir']} workers)"
        elif starving > self.starve and ahead >= self.busy:
            # The engine waited although the workers were often blocked by the
            # depth: reading is fast enough but bursty, so read further ahead.
            if self.fixed_depth is None and self.depth < min(cap, self.max_depth * self.workers):
                self.depth += 1
                action = "deeper"
        elif self.fixed_workers is None and starving > self.starve and self.workers < self.max_workers:
            if "more" not in self._closed:
                self._trial = {
                    "dir": "more",
                    "rate": rate,
                    "starving": starving,
                    "workers": self.workers,
                    "depth": self.depth,
                }
                self.workers += 1
                if self.fixed_depth is None:
                    self.depth = max(self.depth, self.workers + 2)
                action = "try more workers"
        elif (
            self.fixed_workers is None
            and self.workers > 1
            and starving < self.starve / 2
            and ahead > 0.5
            and "fewer" not in self._closed
        ):
            self._trial = {
                "dir": "fewer",
                "rate": rate,
                "starving": starving,
                "workers": self.workers,
                "depth": self.depth,
            }
            self.workers -= 1
            if self.fixed_depth is None:
                self.depth = self.workers + 2
            action = "try fewer workers"
        if self.fixed_depth is None and self.depth > cap:
            self.depth = max(self.workers + 1, cap) if cap > self.workers else max(1, cap)
            action += ", depth capped by memory"

        changed = (self.workers, self.depth) != before or self._trial is not None or action != "keep"
        if changed:
            # A trial is judged over twice the first interval.
            self.interval = self.first_interval * (2 if self._trial is not None else 1)
        else:
            self.interval = min(self.interval * 2, self.max_interval)
        # The committed setting: the current one, or the one a pending trial would return to.
        committed = (
            (self._trial["workers"], self._trial["depth"])
            if self._trial is not None
            else (self.workers, self.depth)
        )
        if committed != self._committed:
            self._committed = committed
            self.settled_checkpoint = int(stats.get("checkpoint", len(self.history) + 1))
            self.settled_batches = self._batches
            self.settled_events = self._events
        self.history.append(
            {
                **self._measured(stats, rate, starving, ahead, per_batch),
                "decode_s_per_batch": float(stats.get("decode_s", 0.0)) / batches if batches else 0.0,
                "build_s_per_batch": float(stats.get("build_s", 0.0)) / batches if batches else 0.0,
                "workers": before[0],
                "depth": before[1],
                "action": action,
                "next": (self.workers, self.depth, self.interval),
            }
        )
        return self.workers, self.depth, self.interval

    def summary(self) -> dict[str, Any]:
        """The final committed setting (a trial still running at the end does
        not count), and when it settled: the checkpoint, batches and events
        taken when it last changed (0 = the first setting was kept)."""
        return {
            "workers": self._committed[0],
            "depth": self._committed[1],
            "trial_at_end": self._trial is not None,
            "checkpoints": len(self.history),
            "settled_checkpoint": self.settled_checkpoint,
            "settled_batches": self.settled_batches,
            "settled_events": self.settled_events,
        }


class _ReadState:
    """What the read-ahead workers share with the consumer (kept apart from
    :class:`_ReadAhead`, so that dropping the reader stops the workers)."""

    def __init__(self, steps: Sequence[Any], read: Any) -> None:
        self.steps = list(steps)
        self.read = read
        self.cond = threading.Condition()
        self.ready: dict[int, tuple[bool, Any]] = {}
        self.next_claim = 0
        self.next_deliver = 0
        self.decoding = 0
        self.workers = 1
        self.depth = 2
        self.stop = False
        self.decode_s = 0.0
        self.ahead_s = 0.0
        self.ahead_count = 0
        self.ahead_since = time.perf_counter()

    def settle_ahead(self) -> None:
        now = time.perf_counter()
        self.ahead_s += (now - self.ahead_since) * min(self.ahead_count, self.workers)
        self.ahead_since = now


def _read_worker(s: _ReadState) -> None:
    cond = s.cond
    with cond:
        while True:
            if s.stop or s.next_claim >= len(s.steps):
                return
            u = s.next_claim
            # Within the depth; and nothing is read ahead of the first batch before
            # the engine took it (the job starts as a sequential reader would).
            within = u < s.next_deliver + s.depth and (u == 0 or s.next_deliver > 0)
            if s.decoding < s.workers and within:
                s.next_claim += 1
                s.decoding += 1
                cond.release()
                t0 = time.perf_counter()
                try:
                    item: tuple[bool, Any] = (True, s.read(s.steps[u]))
                except BaseException as e:
                    item = (False, e)
                took = time.perf_counter() - t0
                cond.acquire()
                s.decoding -= 1
                s.decode_s += took
                s.ready[u] = item
                cond.notify_all()
                continue
            blocked = not within and s.decoding < s.workers
            if blocked:
                s.settle_ahead()
                s.ahead_count += 1
            cond.wait(0.2)
            if blocked:
                s.settle_ahead()
                s.ahead_count -= 1


class _ReadAhead:
    """Reads the steps of a source on worker threads ahead of the engine and
    hands them out in order (``next_batch()``), balanced by a
    :class:`ReadBalancer`: a worker claims the next step only while fewer than
    ``workers`` read and the step is within ``depth`` of the engine. Workers
    are Python threads: they hold the GIL only while uproot (or the reader
    function) needs it; decompression and numpy copies release it."""

    def __init__(self, steps: Sequence[Any], read: Any, balancer: ReadBalancer) -> None:
        self._s = s = _ReadState(steps, read)
        self._balancer = balancer
        w, d, interval, max_w = balancer.start(len(s.steps))
        s.workers, s.depth, self._interval = w, d, interval
        self._checkpoint = 0
        self._iv_batches = 0
        self._iv_events = 0
        self._iv_wait = 0.0
        self._iv_bytes = 0
        self._iv_start = time.perf_counter()
        for i in range(max(1, min(max_w, len(s.steps)))):
            threading.Thread(target=_read_worker, args=(s,), name=f"evflow-read-{i}", daemon=True).start()

    def next_batch(self) -> Any:
        s = self._s
        with s.cond:
            if s.next_deliver >= len(s.steps):
                return None
            want = s.next_deliver
            t0 = time.perf_counter()
            while want not in s.ready:
                s.cond.wait(0.1)
            if want == 0:  # filling the pipeline is not starvation: measure from the first batch on
                self._iv_start = time.perf_counter()
            else:
                self._iv_wait += time.perf_counter() - t0
            ok, value = s.ready.pop(want)
            s.next_deliver += 1
            s.cond.notify_all()
        if not ok:
            self.close()
            raise value
        self._iv_batches += 1
        self._iv_events += int(getattr(value, "n", 0))
        self._iv_bytes += _nbytes(value)
        if self._iv_batches >= self._interval:
            self._do_checkpoint()
        return value

    def _do_checkpoint(self) -> None:
        s = self._s
        with s.cond:
            s.settle_ahead()
            decode_s, ahead_s = s.decode_s, s.ahead_s
            s.decode_s = s.ahead_s = 0.0
            workers, depth, ready = s.workers, s.depth, len(s.ready)
        self._checkpoint += 1
        now = time.perf_counter()
        stats = {
            "checkpoint": self._checkpoint,
            "batches": self._iv_batches,
            "events": self._iv_events,
            "wall_s": now - self._iv_start,
            "wait_s": self._iv_wait,
            "build_s": 0.0,
            "decode_s": decode_s,
            "ahead_s": ahead_s,
            "bytes": self._iv_bytes,
            "workers": workers,
            "depth": depth,
            "ready": ready,
        }
        w, d, interval = self._balancer.checkpoint(stats)
        with s.cond:
            s.workers, s.depth = max(1, w), max(1, d)
            s.cond.notify_all()
        self._interval = max(1, interval)
        self._iv_batches = self._iv_events = self._iv_bytes = 0
        self._iv_wait = 0.0
        self._iv_start = now

    def close(self) -> None:
        s = self._s
        with s.cond:
            s.stop = True
            s.ready.clear()
            s.cond.notify_all()

    def __del__(self) -> None:
        self.close()


def _nbytes(batch: Any) -> int:
    """Approximate bytes of a BatchData's columns."""
    total = 0
    for v in getattr(batch, "columns", {}).values():
        nb = getattr(v, "nbytes", None)
        if isinstance(nb, int):
            total += nb
    return total
