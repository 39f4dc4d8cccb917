"""Where batches come from: ROOT files (uproot), Parquet files (native Rust
reader, or pyarrow), and a synthetic generator.

Each source reads only the columns some module, histogram, skim or the
cut-flow weight needs, in batches of about ``step_size`` events. The engine
calls the source one batch at a time, while other batches are processed.

Example::

    proc.source = ef.source.root("Zmumu.root", tree="events", step_size=50_000)
    proc.source = ef.source.parquet(["a.parquet", "b.parquet"], step_size=100_000)
    proc.source = ef.source.synthetic(1_000_000, step_size=100_000, seed=1)

Reading is balanced against processing: ROOT and native Parquet sources read
and decode batches ahead of the engine on worker threads, and a
:class:`ReadBalancer` sets how many workers read at once and how many batches
may wait decoded, at checkpoints whose interval doubles while the setting is
stable (see docs/adl.md, "Reading balanced against processing").
"""

from __future__ import annotations

import difflib
import os
import threading
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from .errors import ConfigurationError, InputError, MissingBranchError, MissingFileError, MissingTreeError

if TYPE_CHECKING:
    from ._runtime import BatchData

PathLike = str | os.PathLike[str]

__all__ = [
    "ParquetSource",
    "ReadBalancer",
    "RootSource",
    "Source",
    "SyntheticSource",
    "auto",
    "parquet",
    "root",
    "synthetic",
]


def _files(files: PathLike | Iterable[PathLike]) -> list[str]:
    out = [os.fspath(files)] if isinstance(files, str | os.PathLike) else [os.fspath(f) for f in files]
    if not out:
        raise ConfigurationError("the source has no input file")
    return out


def _missing(column: str, available: Iterable[str], where: str) -> MissingBranchError:
    hint = difflib.get_close_matches(column, list(available), n=1)
    extra = f"; did you mean '{hint[0]}'?" if hint else ""
    return MissingBranchError(f"branch '{column}' not found in {where}{extra}")


class Source(ABC):
    """Base class of sources. A subclass provides :meth:`columns`,
    :meth:`reader` and :meth:`describe`; the native Parquet source is set up
    by the process itself."""

    step_size: int
    max_events: int | None

    @abstractmethod
    def check(self, columns: Sequence[str]) -> None:
        """Raises a clear :class:`~evflow.errors.InputError` when an input is
        missing or lacks one of ``columns``."""

    @abstractmethod
    def reader(self, columns: Sequence[str], weight: str | None) -> Any:
        """An object with ``next_batch() -> BatchData | None``."""

    def total_events(self) -> int | None:
        """Number of events the source will deliver, if known."""
        return None

    @abstractmethod
    def describe(self) -> str: ...


class _IterReader:
    """Adapts an iterator of BatchData to ``next_batch()``."""

    def __init__(self, it: Iterator[BatchData]) -> None:
        self._it = it

    def next_batch(self) -> BatchData | None:
        return next(self._it, None)


Setting = int | str


def _setting(value: Setting, what: str) -> int | None:
    """``"auto"`` -> None, else a positive int."""
    if value == "auto":
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{what} must be a positive integer or 'auto', not {value!r}")
    return value


def _memory(value: int | str) -> int:
    if isinstance(value, int) and value > 0:
        return value
    if isinstance(value, str):
        units = {"KB": 2**10, "MB": 2**20, "GB": 2**30, "B": 1}
        v = value.strip().upper().replace("IB", "B")
        for suffix, mult in units.items():
            if v.endswith(suffix):
                try:
                    return int(float(v[: -len(suffix)]) * mult)
                except ValueError:
                    break
    raise ConfigurationError(f"read_memory must be bytes (int) or like '512MB', not {value!r}")


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
    ``max_workers`` (cores + 1), and a depth of workers + 2. Fixed
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
        cores = os.cpu_count() or 2
        # One more reader than cores: readers also wait (I/O, the GIL for uproot).
        self.max_workers = max(1, max_workers or cores + 1, self.fixed_workers or 1)
        self.start_workers = max(1, min(start_workers, self.max_workers))
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
        self._reset()
        self.history = []
        self._units = units
        max_workers = self.fixed_workers or self.max_workers
        return self.workers, self.depth, self.interval, max_workers

    def _depth_cap(self, bytes_per_batch: float) -> int:
        if bytes_per_batch <= 0:
            return 1 << 20
        return max(2, int(self.memory // bytes_per_batch))

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
                    "checkpoint": int(stats.get("checkpoint", len(self.history) + 1)),
                    "batches": self._batches,
                    "events": self._events,
                    "rate": rate,
                    "starving": starving,
                    "ahead": ahead,
                    "bytes_per_batch": per_batch,
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
                "checkpoint": int(stats.get("checkpoint", len(self.history) + 1)),
                "batches": self._batches,
                "events": self._events,
                "rate": rate,
                "starving": starving,
                "ahead": ahead,
                "bytes_per_batch": per_batch,
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


def _cluster_steps(boundaries: Sequence[int], step: int, start: int, stop: int) -> list[tuple[int, int]]:
    """Groups whole clusters ``[b_i, b_i+1)`` into steps of about ``step``
    entries (inside ``[start, stop)``); a cluster much larger than ``step``
    is split into equal parts."""
    cuts = sorted({b for b in boundaries if start < b < stop} | {start, stop})
    steps: list[tuple[int, int]] = []
    lo = cuts[0]
    for hi in cuts[1:]:
        if hi - lo >= step:
            steps.append((lo, hi))
            lo = hi
    if lo < stop:
        steps.append((lo, stop))
    out: list[tuple[int, int]] = []
    for a, b in steps:
        parts = max(1, round((b - a) / step))
        edges = [a + (b - a) * i // parts for i in range(parts + 1)]
        out.extend((edges[i], edges[i + 1]) for i in range(parts) if edges[i + 1] > edges[i])
    return out


#: Recently opened TTrees, by (file, tree): (mtime and size when opened, tree).
_TREES: OrderedDict[tuple[str, str], tuple[tuple[int, int], Any]] = OrderedDict()
_TREES_KEPT = 8
_TREES_LOCK = threading.Lock()


class RootSource(Source):
    """Batches of a TTree in one or more ROOT files, read with uproot.

    Steps follow the tree's clusters (the entry ranges whose baskets all
    branches share), so each basket is decompressed once. Steps are read
    ahead of the engine on worker threads (``read_workers``, at most
    ``prefetch`` steps ahead), which :attr:`balancer` (a
    :class:`ReadBalancer`) adapts at run time unless both are fixed.
    """

    def __init__(
        self,
        files: PathLike | Iterable[PathLike],
        tree: str = "Events",
        step_size: int = 100_000,
        max_events: int | None = None,
        *,
        read_workers: Setting = "auto",
        prefetch: Setting = "auto",
        read_memory: int | str = "512MB",
    ) -> None:
        if step_size <= 0:
            raise ConfigurationError(f"step_size must be positive, not {step_size}")
        self.files = _files(files)
        self.tree = tree
        self.step_size = int(step_size)
        self.max_events = max_events
        self.read_workers = read_workers
        self.prefetch = prefetch
        self.read_memory = read_memory
        self.balancer = ReadBalancer(read_workers, prefetch, memory=read_memory)

    def _open(self, path: str) -> Any:
        """The TTree of ``path`` (opened once while the file is unchanged:
        reading the metadata of a tree with many branches takes a while)."""
        try:
            st = os.stat(path)
            key = (st.st_mtime_ns, st.st_size)
        except OSError:
            key = None
        cache_key = (os.path.abspath(path), self.tree)
        with _TREES_LOCK:
            cached = _TREES.get(cache_key)
            if cached is not None and cached[0] == key:
                _TREES.move_to_end(cache_key)
                return cached[1]
        tree = self._open_tree(path)
        if key is not None:
            with _TREES_LOCK:
                _TREES[cache_key] = (key, tree)
                while len(_TREES) > _TREES_KEPT:
                    _TREES.popitem(last=False)
        return tree

    def _open_tree(self, path: str) -> Any:
        import uproot

        if not os.path.exists(path):
            raise MissingFileError(f"ROOT file '{path}' does not exist")
        try:
            f = uproot.open(path)
        except Exception as e:
            raise InputError(f"cannot open ROOT file '{path}': {type(e).__name__}: {e}") from e
        try:
            t = f[self.tree]
        except Exception:
            trees = sorted({k.split(";")[0] for k, v in f.classnames().items() if v.startswith("TTree")})
            raise MissingTreeError(
                f"file '{path}' has no tree '{self.tree}' (trees: {', '.join(trees) or 'none'})"
            ) from None
        if not hasattr(t, "num_entries") or not hasattr(t, "keys"):
            raise MissingTreeError(f"'{self.tree}' in file '{path}' is a {type(t).__name__}, not a TTree")
        return t

    def check(self, columns: Sequence[str]) -> None:
        for path in self.files:
            t = self._open(path)
            keys = set(t.keys(recursive=True))
            for c in columns:
                if c not in keys:
                    raise _missing(c, keys, f"tree '{self.tree}' of file '{path}'")

    def total_events(self) -> int | None:
        total = 0
        for path in self.files:
            total += self._open(path).num_entries
        return total if self.max_events is None else min(total, self.max_events)

    def _steps(self) -> list[tuple[str, int, int]]:
        out: list[tuple[str, int, int]] = []
        left = self.max_events
        for path in self.files:
            if left is not None and left <= 0:
                break
            t = self._open(path)
            n = t.num_entries
            stop = n if left is None else min(n, left)
            try:
                bounds = list(t.common_entry_offsets())
            except Exception:
                bounds = [0, n]
            out.extend((path, a, b) for a, b in _cluster_steps(bounds, self.step_size, 0, stop))
            if left is not None:
                left -= stop
        return out

    def _read_step(self, columns: Sequence[str], weight: str | None, step: tuple[str, int, int]) -> BatchData:
        from ._runtime import BatchData

        path, a, b = step
        where = f"file '{path}', tree '{self.tree}', entries {a}-{b - 1}"
        try:
            t = self._open(path)
            cols = t.arrays(
                list(columns), entry_start=a, entry_stop=b, library="ak", how=dict, array_cache=None
            )
        except Exception as e:
            raise InputError(f"reading {where}: {type(e).__name__}: {e}") from e
        return BatchData(cols, b - a, file=path, entry_start=a, entry_stop=b, where=where, weight=weight)

    def reader(self, columns: Sequence[str], weight: str | None) -> Any:
        """Reads steps ahead on worker threads, balanced by :attr:`balancer`."""
        cols = list(columns)
        return _ReadAhead(self._steps(), lambda step: self._read_step(cols, weight, step), self.balancer)

    def describe(self) -> str:
        files = self.files[0] if len(self.files) == 1 else f"{len(self.files)} files"
        return f"ROOT {files} (tree '{self.tree}')"


class ParquetSource(Source):
    """Batches of Parquet files. ``engine="native"`` (default) decodes with
    evflow's Rust reader, whole row groups on ``read_workers`` threads without
    the GIL, at most ``prefetch`` batches ahead (both adapted at run time by
    :attr:`balancer` unless fixed), and hands the decoded buffers to numpy
    without copying (read-only arrays); ``engine="pyarrow"`` reads with
    pyarrow (any Arrow type)."""

    def __init__(
        self,
        files: PathLike | Iterable[PathLike],
        step_size: int = 100_000,
        max_events: int | None = None,
        engine: str = "native",
        prefetch: Setting = "auto",
        *,
        read_workers: Setting = "auto",
        read_memory: int | str = "512MB",
    ) -> None:
        if step_size <= 0:
            raise ConfigurationError(f"step_size must be positive, not {step_size}")
        if engine not in ("native", "pyarrow"):
            raise ConfigurationError(f"engine must be 'native' or 'pyarrow', not {engine!r}")
        self.files = _files(files)
        self.step_size = int(step_size)
        self.max_events = max_events
        self.engine = engine
        self.read_ahead = prefetch
        self.read_workers = read_workers
        self.read_memory = read_memory
        self.balancer = ReadBalancer(read_workers, prefetch, memory=read_memory)

    @property
    def prefetch(self) -> int:
        """Batches decoded ahead when no balancer is used (the balancer's
        first depth, less the batch being decoded)."""
        return max(1, (_setting(self.read_ahead, "prefetch") or 3) - 1)

    def _metadata(self, path: str) -> dict[str, Any]:
        from . import _evflow

        if not os.path.exists(path):
            raise MissingFileError(f"Parquet file '{path}' does not exist")
        try:
            return _evflow.parquet_metadata(path)
        except OSError as e:
            raise InputError(str(e)) from e

    def check(self, columns: Sequence[str]) -> None:
        for path in self.files:
            have = self._metadata(path)["columns"]
            for c in columns:
                if c not in have:
                    raise _missing(c, have, f"Parquet file '{path}'")

    def total_events(self) -> int | None:
        total = sum(int(self._metadata(p)["num_rows"]) for p in self.files)
        return total if self.max_events is None else min(total, self.max_events)

    def build(self, weight: str | None) -> Any:
        """The callback the native reader calls with decoded buffers."""
        import awkward as ak
        import numpy as np

        from ._runtime import BatchData

        def content(tree: tuple[Any, ...]) -> Any:
            if tree[0] == "flat":
                return ak.contents.NumpyArray(np.frombuffer(tree[2], dtype=tree[1]))
            offsets = np.frombuffer(tree[2], dtype=tree[1])
            index = ak.index.Index32(offsets) if tree[1] == "<i4" else ak.index.Index64(offsets)
            return ak.contents.ListOffsetArray(index, content(tree[3]))

        files = self.files

        def build(file: int, start: int, stop: int, cols: list[tuple[str, tuple[Any, ...]]]) -> BatchData:
            arrays = {name: ak.Array(content(tree)) for name, tree in cols}
            return BatchData(
                arrays, stop - start, file=files[file], entry_start=start, entry_stop=stop, weight=weight
            )

        # The native reader asks this balancer for its decode workers and depth.
        build.evflow_reading = self.balancer  # type: ignore[attr-defined]
        return build

    def _pyarrow_batches(self, columns: Sequence[str], weight: str | None) -> Iterator[BatchData]:
        import awkward as ak
        import pyarrow.parquet as pq

        from ._runtime import BatchData

        left = self.max_events
        for path in self.files:
            start = 0
            for rb in pq.ParquetFile(path).iter_batches(batch_size=self.step_size, columns=list(columns)):
                if left is not None:
                    if left <= 0:
                        return
                    if rb.num_rows > left:
                        rb = rb.slice(0, left)
                    left -= rb.num_rows
                arrays = {c: ak.from_arrow(rb.column(c)) for c in columns}
                n = rb.num_rows
                yield BatchData(arrays, n, file=path, entry_start=start, entry_stop=start + n, weight=weight)
                start += n

    def reader(self, columns: Sequence[str], weight: str | None) -> Any:
        return _IterReader(self._pyarrow_batches(columns, weight))

    def describe(self) -> str:
        files = self.files[0] if len(self.files) == 1 else f"{len(self.files)} files"
        return f"Parquet {files}"


class SyntheticSource(Source):
    """Generated events with a CMS NanoAOD-like schema, deterministic for a
    seed (batch ``i`` uses the random stream ``(seed, i)``, so the events do
    not depend on the thread count).

    Columns: ``run``, ``event``, ``nMuon``, ``Muon_pt``, ``Muon_eta``,
    ``Muon_phi``, ``Muon_mass``, ``Muon_charge``, ``Muon_pfRelIso04_all``,
    ``nJet``, ``Jet_pt``, ``Jet_eta``, ``Jet_phi``, ``Jet_mass``,
    ``Jet_btagCSVV2``, ``MET_pt``, ``MET_phi``, ``genWeight``. About half the
    events hold a Z→μμ-like muon pair.
    """

    COLUMNS = (
        "run",
        "event",
        "nMuon",
        "Muon_pt",
        "Muon_eta",
        "Muon_phi",
        "Muon_mass",
        "Muon_charge",
        "Muon_pfRelIso04_all",
        "nJet",
        "Jet_pt",
        "Jet_eta",
        "Jet_phi",
        "Jet_mass",
        "Jet_btagCSVV2",
        "MET_pt",
        "MET_phi",
        "genWeight",
    )

    def __init__(self, events: int, step_size: int = 100_000, seed: int = 1) -> None:
        if step_size <= 0 or events < 0:
            raise ConfigurationError("events must be >= 0 and step_size > 0")
        self.events = int(events)
        self.step_size = int(step_size)
        self.max_events = None
        self.seed = int(seed)

    def check(self, columns: Sequence[str]) -> None:
        for c in columns:
            if c not in self.COLUMNS:
                raise _missing(c, self.COLUMNS, "the synthetic source")

    def total_events(self) -> int | None:
        return self.events

    def generate(self, index: int, start: int, n: int) -> dict[str, Any]:
        """Every column of batch ``index`` (events ``start`` to ``start+n``)."""
        import awkward as ak
        import numpy as np

        rng = np.random.default_rng([self.seed, index])

        def jagged(counts: np.ndarray, values: np.ndarray) -> ak.Array:
            return ak.unflatten(values, counts)

        n_mu = rng.poisson(1.2, n).astype(np.int32)
        z = rng.random(n) < 0.5
        n_mu[z] = np.maximum(n_mu[z], 2)
        m = int(n_mu.sum())
        mu_pt = rng.exponential(20.0, m).astype(np.float32) + 3.0
        mu_eta = rng.uniform(-2.4, 2.4, m).astype(np.float32)
        mu_phi = rng.uniform(-np.pi, np.pi, m).astype(np.float32)
        mu_q = np.where(rng.random(m) < 0.5, -1, 1).astype(np.int32)
        # Z-like pairs: the first two muons of a Z event share a 91 GeV mass.
        first = np.concatenate([[0], np.cumsum(n_mu)[:-1]])[z]
        # Same eta, back to back in phi, pT = m/2: the pair's mass is m.
        mass = rng.normal(91.19, 2.5, len(first))
        mu_eta[first + 1] = mu_eta[first]
        mu_phi[first + 1] = (mu_phi[first] + 2 * np.pi) % (2 * np.pi) - np.pi
        mu_pt[first] = mu_pt[first + 1] = (mass / 2).astype(np.float32)
        mu_q[first + 1] = -mu_q[first]
        n_j = rng.poisson(3.0, n).astype(np.int32)
        j = int(n_j.sum())
        cols: dict[str, Any] = {
            "run": ak.Array(np.ones(n, np.int32)),
            "event": ak.Array(np.arange(start + 1, start + n + 1, dtype=np.int64)),
            "nMuon": ak.Array(n_mu),
            "Muon_pt": jagged(n_mu, mu_pt),
            "Muon_eta": jagged(n_mu, mu_eta),
            "Muon_phi": jagged(n_mu, mu_phi),
            "Muon_mass": jagged(n_mu, np.full(m, 0.1057, np.float32)),
            "Muon_charge": jagged(n_mu, mu_q),
            "Muon_pfRelIso04_all": jagged(n_mu, rng.exponential(0.1, m).astype(np.float32)),
            "nJet": ak.Array(n_j),
            "Jet_pt": jagged(n_j, (rng.exponential(30.0, j) + 15.0).astype(np.float32)),
            "Jet_eta": jagged(n_j, rng.uniform(-4.7, 4.7, j).astype(np.float32)),
            "Jet_phi": jagged(n_j, rng.uniform(-np.pi, np.pi, j).astype(np.float32)),
            "Jet_mass": jagged(n_j, rng.exponential(8.0, j).astype(np.float32)),
            "Jet_btagCSVV2": jagged(n_j, rng.random(j).astype(np.float32)),
            "MET_pt": ak.Array(rng.exponential(30.0, n).astype(np.float32)),
            "MET_phi": ak.Array(rng.uniform(-np.pi, np.pi, n).astype(np.float32)),
            "genWeight": ak.Array(rng.normal(1.0, 0.1, n).astype(np.float32)),
        }
        return cols

    def _batches(self, columns: Sequence[str], weight: str | None) -> Iterator[BatchData]:
        from ._runtime import BatchData

        for index, start in enumerate(range(0, self.events, self.step_size)):
            n = min(self.step_size, self.events - start)
            cols = self.generate(index, start, n)
            keep = {c: cols[c] for c in columns}
            where = f"synthetic events {start}-{start + n - 1}"
            yield BatchData(
                keep,
                n,
                file="<synthetic>",
                entry_start=start,
                entry_stop=start + n,
                where=where,
                weight=weight,
            )

    def reader(self, columns: Sequence[str], weight: str | None) -> Any:
        return _IterReader(self._batches(columns, weight))

    def describe(self) -> str:
        return f"synthetic source ({self.events} events, seed {self.seed})"


def root(
    files: PathLike | Iterable[PathLike],
    tree: str = "Events",
    *,
    step_size: int = 100_000,
    max_events: int | None = None,
    read_workers: Setting = "auto",
    prefetch: Setting = "auto",
    read_memory: int | str = "512MB",
) -> RootSource:
    """ROOT files read with uproot: ``files`` (one path or a list), the TTree
    name, events per batch, and an optional limit on the total events.

    Steps are read ahead on ``read_workers`` threads, at most ``prefetch``
    batches ahead of the engine and within ``read_memory``; ``"auto"`` lets a
    :class:`ReadBalancer` choose both at run time."""
    return RootSource(
        files,
        tree,
        step_size,
        max_events,
        read_workers=read_workers,
        prefetch=prefetch,
        read_memory=read_memory,
    )


def parquet(
    files: PathLike | Iterable[PathLike],
    *,
    step_size: int = 100_000,
    max_events: int | None = None,
    engine: str = "native",
    prefetch: Setting = "auto",
    read_workers: Setting = "auto",
    read_memory: int | str = "512MB",
) -> ParquetSource:
    """Parquet files (one column per branch, e.g. written by
    ``python -m evflow.data resample``).

    The native engine decodes whole row groups on ``read_workers`` threads
    without the GIL, at most ``prefetch`` batches ahead of the engine and
    within ``read_memory``; ``"auto"`` lets a :class:`ReadBalancer` choose
    both at run time."""
    return ParquetSource(
        files, step_size, max_events, engine, prefetch, read_workers=read_workers, read_memory=read_memory
    )


def synthetic(events: int, *, step_size: int = 100_000, seed: int = 1) -> SyntheticSource:
    """``events`` generated events (see :class:`SyntheticSource`)."""
    return SyntheticSource(events, step_size, seed)


def auto(
    files: PathLike | Iterable[PathLike],
    *,
    tree: str = "Events",
    step_size: int = 100_000,
    max_events: int | None = None,
    read_workers: Setting = "auto",
    prefetch: Setting = "auto",
    read_memory: int | str = "512MB",
) -> Source:
    """A ROOT or Parquet source chosen by the files' extension (``.root`` or
    ``.parquet``/``.parq``/``.pq``); ``tree`` is used for ROOT files only.
    Lets one analysis run on the original ROOT files and on Parquet copies."""
    names = _files(files)
    kinds = {os.path.splitext(f)[1].lower() for f in names}
    reading: dict[str, Any] = {"read_workers": read_workers, "prefetch": prefetch, "read_memory": read_memory}
    if kinds <= {".root"}:
        return RootSource(names, tree, step_size, max_events, **reading)
    if kinds <= {".parquet", ".parq", ".pq"}:
        return ParquetSource(names, step_size, max_events, **reading)
    raise ConfigurationError(f"cannot tell the format of {names}: use .root or .parquet files (not mixed)")
