"""Splitting a source into chunks: files × entry ranges whose batches are
exactly the batches of the single-process run.

A single-process run reads a ROOT file in steps of whole clusters and a
Parquet file in units of whole row groups (see :mod:`evflow.source`). A
chunk here is a run of consecutive steps, so the batches a chunk task reads
are the same batches, with the same boundaries, as the single-process run;
merged in chunk order they give bit-identical results.

The metadata the plan needs (entries and cluster boundaries of a ROOT tree,
row-group sizes and columns of a Parquet file) is read once per file, in
parallel (on the Dask workers, which see the files the tasks will read), and
cached on the client while the file is unchanged.
"""

from __future__ import annotations

import bisect
import copy
import itertools
import math
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import ConfigurationError, EvflowError, InputError
from ..source import ParquetSource, RootSource, Source, SyntheticSource

__all__ = [
    "Chunk",
    "FileMeta",
    "Piece",
    "batch_steps",
    "chunk_source",
    "chunk_starts",
    "plan_chunks",
    "read_meta",
]


@dataclass(frozen=True)
class Piece:
    """Entries ``[start, stop)`` of one file."""

    file: str
    start: int
    stop: int

    def __str__(self) -> str:
        return f"file '{self.file}', entries {self.start}-{self.stop - 1}"


@dataclass(frozen=True)
class Chunk:
    """One Dask task's share of the input: consecutive batches (``steps``:
    ``(file, start, stop)`` per batch) of the single-process run."""

    index: int
    steps: tuple[tuple[str, int, int], ...]
    kind: str  # "root", "parquet", "pyarrow", "synthetic"
    #: the single-process number of the chunk's first batch
    first_batch: int = 0

    @property
    def events(self) -> int:
        return sum(b - a for _, a, b in self.steps)

    @property
    def pieces(self) -> list[Piece]:
        """The entry range of each file the chunk reads."""
        out: list[Piece] = []
        for f, a, b in self.steps:
            if out and out[-1].file == f and out[-1].stop == a:
                out[-1] = Piece(f, out[-1].start, b)
            else:
                out.append(Piece(f, a, b))
        return out

    def describe(self) -> str:
        return f"chunk {self.index} (" + "; ".join(str(p) for p in self.pieces) + ")"


@dataclass
class FileMeta:
    """What the plan needs of one input file (or the error reading it)."""

    path: str
    entries: int = 0
    #: ROOT: cluster boundaries; Parquet: row-group sizes
    layout: list[int] = field(default_factory=list)
    error: EvflowError | None = None


# --------------------------------------------------------------------------- metadata


def _stat_key(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


_CACHE: dict[tuple[Any, ...], FileMeta] = {}
_CACHE_LOCK = threading.Lock()
_CACHE_KEPT = 4096


def _meta_key(source: Source, path: str, columns: Sequence[str]) -> tuple[Any, ...] | None:
    stat = _stat_key(path)
    if stat is None:  # not visible here (remote files): read again next time
        return None
    tree = getattr(source, "tree", None)
    return (type(source).__name__, os.path.abspath(path), tree, tuple(sorted(columns)), stat)


def read_meta(source: Source, path: str, columns: Sequence[str]) -> FileMeta:
    """Reads one file's metadata and checks it has ``columns``; an input
    problem is returned in :attr:`FileMeta.error`, not raised (runs on a
    worker)."""
    one = copy.copy(source)
    one.files = [path]  # type: ignore[attr-defined]
    one.max_events = None
    try:
        one.check(columns)
        if isinstance(source, RootSource):
            tree = one._open(path)
            n = int(tree.num_entries)
            try:
                bounds = [int(b) for b in tree.common_entry_offsets()]
            except Exception:
                bounds = [0, n]
            return FileMeta(path, n, bounds)
        import pyarrow.parquet as pq

        md = pq.ParquetFile(path).metadata
        sizes = [md.row_group(i).num_rows for i in range(md.num_row_groups)]
        return FileMeta(path, int(md.num_rows), sizes)
    except EvflowError as e:
        return FileMeta(path, error=e)
    except Exception as e:  # anything else a corrupt file raises
        return FileMeta(path, error=InputError(f"cannot read '{path}': {type(e).__name__}: {e}"))


def gather_meta(
    source: Source,
    columns: Sequence[str],
    mapper: Callable[[list[str]], list[FileMeta]],
) -> list[FileMeta]:
    """Metadata of every file of ``source`` (cached ones are not read again);
    ``mapper(paths)`` reads the others in parallel (on the cluster) with
    :func:`read_meta`."""
    files: list[str] = list(source.files)  # type: ignore[attr-defined]
    keys = {p: _meta_key(source, p, columns) for p in files}
    out: dict[str, FileMeta] = {}
    with _CACHE_LOCK:
        for p, k in keys.items():
            if k is not None and k in _CACHE:  # named as asked (one process caches paths as given)
                out[p] = replace(_CACHE[k], path=p)
    todo = [p for p in dict.fromkeys(files) if p not in out]
    if todo:
        got = mapper(todo)
        with _CACHE_LOCK:
            for p, m in zip(todo, got, strict=True):
                out[p] = m
                k = keys[p]
                if k is not None and m.error is None:
                    _CACHE[k] = m
                    while len(_CACHE) > _CACHE_KEPT:
                        _CACHE.pop(next(iter(_CACHE)))
    return [out[p] for p in files]


# --------------------------------------------------------------------------- steps (the single-process batches)


class _Tree:
    """Stands for an opened TTree in :meth:`RootSource._steps`, from metadata."""

    def __init__(self, meta: FileMeta) -> None:
        self.num_entries = meta.entries
        self._bounds = meta.layout

    def common_entry_offsets(self) -> list[int]:
        return self._bounds


def _root_steps(source: RootSource, metas: list[FileMeta]) -> list[tuple[str, int, int]]:
    # The single-process source's own step logic, fed the cached metadata.
    by_path = {m.path: m for m in metas}
    planner = copy.copy(source)
    planner.files = [m.path for m in metas]
    planner._open = lambda path: _Tree(by_path[path])  # type: ignore[method-assign]
    return planner._steps()


def _parquet_steps(source: ParquetSource, metas: list[FileMeta]) -> list[tuple[str, int, int]]:
    """The native reader's units (crates/evflow-python/src/parquet.rs,
    ``plan_units``): consecutive row groups of one file up to ``step_size``
    rows together, up to ``max_events`` in total; a row group larger than
    the step is one unit, read whole or in equal parts (``_unit_batches``)."""
    step, stop = source.step_size, source.max_events
    out: list[tuple[str, int, int]] = []
    total = 0
    for meta in metas:
        path = meta.path
        entry = 0
        unit: list[int] | None = None  # [entry, rows]
        done = False
        for rows in meta.layout:
            if rows == 0:
                continue
            left = stop - total if stop is not None else None
            if left is not None and left <= 0:
                done = True
                break
            take = rows if left is None else min(rows, left)
            if unit is not None and unit[1] + rows <= step and take == rows:
                unit[1] += rows
            else:
                if unit is not None:
                    out.extend(_unit_batches(path, unit, step))
                unit = [entry, take]
            entry += rows
            total += take
            if take < rows:
                done = True
                break
        if unit is not None:
            out.extend(_unit_batches(path, unit, step))
        if done:
            break
    return out


def _unit_batches(path: str, unit: list[int], step: int) -> list[tuple[str, int, int]]:
    """A unit's batches, as the native reader cuts them (``batch_rows``):
    one unless one row group is larger than the step, which is read whole
    under 1.5 steps, else in ``round(rows / step)`` equal parts (the last
    one short by less than a part)."""
    start, rows = unit
    size = step
    if rows > step:
        parts = max(1, round(rows / step))
        size = -(-rows // parts)
    return [(path, a, min(a + size, start + rows)) for a in range(start, start + rows, size)]


def _pyarrow_steps(source: ParquetSource, metas: list[FileMeta]) -> list[tuple[str, int, int]]:
    """Whole files (pyarrow's batches may cross row groups): one step per file."""
    out: list[tuple[str, int, int]] = []
    left = source.max_events
    for meta in metas:
        if left is not None and left <= 0:
            break  # max_events reached
        path = meta.path
        n = meta.entries if left is None else min(meta.entries, left)
        if n <= 0:
            continue  # a file without rows: the files after it still count
        out.append((path, 0, n))
        if left is not None:
            left -= n
    return out


def _synthetic_steps(source: SyntheticSource) -> list[tuple[str, int, int]]:
    return [
        ("<synthetic>", a, min(a + source.step_size, source.events))
        for a in range(0, source.events, source.step_size)
    ]


def source_kind(source: Source) -> str:
    if isinstance(source, RootSource):
        return "root"
    if isinstance(source, ParquetSource):
        return "parquet" if source.engine == "native" else "pyarrow"
    if isinstance(source, SyntheticSource):
        return "synthetic"
    raise ConfigurationError(
        f"a distributed run cannot split {source.describe()} ({type(source).__name__}) into chunks: "
        "use ef.source.root, ef.source.parquet or ef.source.synthetic"
    )


def batch_steps(source: Source, metas: list[FileMeta]) -> list[tuple[str, int, int]]:
    """The single-process batches of ``source`` over the readable files in
    ``metas``, in order: ``(file, start, stop)`` each."""
    kind = source_kind(source)
    good = [m for m in metas if m.error is None]  # in the source's order, repeats kept
    if kind == "root":
        assert isinstance(source, RootSource)
        return _root_steps(source, good)
    if kind == "parquet":
        assert isinstance(source, ParquetSource)
        return _parquet_steps(source, good)
    if kind == "pyarrow":
        assert isinstance(source, ParquetSource)
        return _pyarrow_steps(source, good)
    assert isinstance(source, SyntheticSource)
    return _synthetic_steps(source)


def chunk_starts(source: Source, metas: list[FileMeta], steps: Sequence[tuple[str, int, int]]) -> list[bool]:
    """Whether a chunk may start at each step: anywhere, except that the
    native Parquet reader starts a chunk at a row-group boundary (a row
    group larger than the step gives several batches, never split)."""
    if source_kind(source) != "parquet":
        return [True] * len(steps)
    cuts: set[tuple[str, int]] = set()
    for m in metas:
        if m.error is None:
            offset = 0
            for rows in m.layout:
                cuts.add((m.path, offset))
                offset += rows
    return [(f, a) in cuts for f, a, _b in steps]


def plan_chunks(
    source: Source,
    metas: list[FileMeta],
    *,
    chunk_size: int | None,
    workers: int,
) -> list[Chunk]:
    """Groups the single-process batches of ``source`` (over the readable
    files in ``metas``) into chunks: of about ``chunk_size`` events each, cut
    as evenly as the batches allow; without ``chunk_size``, the chunks a
    :class:`ChunkFeed` for ``workers`` cuts before
    any chunk has been timed (a run sizes them as it goes: see there)."""
    steps = batch_steps(source, metas)
    if not steps:
        return []
    kind = source_kind(source)
    starts = chunk_starts(source, metas, steps)
    if chunk_size is None:
        return list(ChunkFeed(steps, kind, starts, workers=workers))
    if chunk_size <= 0:
        raise ConfigurationError(f"chunk_size must be positive, not {chunk_size}")
    # Cut by events, not by a count of batches: batches are shorter or
    # longer than the step where row groups or clusters end before or
    # after it (row groups of 1400 rows read in steps of 1000 are batches
    # of 1400).
    before = [0, *itertools.accumulate(b - a for _f, a, b in steps)]  # events before each batch

    def cut(i: int, target: float) -> int:
        """The chunk start after ``i`` nearest ``target`` events."""
        j = bisect.bisect_left(before, target)
        if j > 0 and target - before[j - 1] <= before[min(j, len(steps))] - target:
            j -= 1
        j = min(max(j, i + 1), len(steps))
        while j < len(steps) and not starts[j]:
            j += 1
        return j

    # As many chunks as cuts nearest chunk_size from each start make, then
    # cut evenly in events.
    n_chunks, i = 0, 0
    while i < len(steps):
        i, n_chunks = cut(i, before[i] + chunk_size), n_chunks + 1
    chunks: list[Chunk] = []
    i = 0
    for k in range(1, n_chunks + 1):
        if i >= len(steps):
            break
        j = cut(i, k * before[-1] / n_chunks)
        chunks.append(Chunk(len(chunks), tuple(steps[i:j]), kind, first_batch=i))
        i = j
    return chunks


# --------------------------------------------------------------------------- dispatching: the chunk feed

# Cutting the batches into chunks as a run dispatches them.
#
# A distributed run keeps a few chunks per worker thread in flight (one
# running, the next queued) and asks the :class:`ChunkFeed` for the next chunk
# each time one finishes. The feed cuts it from the batches not yet handed
# out (*guided self-scheduling*, "factoring"): a chunk takes about
# ``1 / (2 × workers)`` of what is left, so chunks are long at the start (few
# tasks, little overhead) and shrink towards the end, where the last ones are
# short and every worker finishes at about the same time. Once chunks have
# come back, their measured cost (worker-seconds per event) bounds a chunk
# between ``min_seconds`` (several times the measured per-chunk overhead, so
# the overhead stays a small share) and ``max_seconds``; before that, a chunk
# is at most ``first_batches`` batches.
#
# Chunks are always runs of consecutive single-process batches, numbered in
# the order they are handed out, which is the order of their batches: the
# merge in chunk order is the single-process order whatever the sizes.


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


# --------------------------------------------------------------------------- the source of one chunk


class _RootChunk(RootSource):
    """A ROOT source reading only a chunk's steps."""

    chunk_steps: list[tuple[str, int, int]]

    def _steps(self) -> list[tuple[str, int, int]]:
        return list(self.chunk_steps)

    def total_events(self) -> int | None:
        return sum(b - a for _, a, b in self.chunk_steps)


class _SyntheticChunk(SyntheticSource):
    """The synthetic batches ``first`` .. ``first + len(steps)``."""

    first: int
    chunk_steps: list[tuple[str, int, int]]

    def _batches(self, columns: Sequence[str], weight: str | None) -> Any:
        from .._runtime import BatchData

        for k, (_, start, stop) in enumerate(self.chunk_steps):
            n = stop - start
            cols = self.generate(self.first + k, start, n)
            yield BatchData(
                {c: cols[c] for c in columns},
                n,
                file="<synthetic>",
                entry_start=start,
                entry_stop=stop,
                where=f"synthetic events {start}-{stop - 1}",
                weight=weight,
            )

    def total_events(self) -> int | None:
        return sum(b - a for _, a, b in self.chunk_steps)


def chunk_source(source: Source, chunk: Chunk) -> Source:
    """A copy of ``source`` that reads exactly the batches of ``chunk``."""
    steps = list(chunk.steps)
    pieces = chunk.pieces
    files = [p.file for p in pieces]  # a file listed twice is read twice
    if chunk.kind == "root":
        assert isinstance(source, RootSource)
        r = copy.copy(source)
        r.__class__ = _RootChunk
        r.files = files
        r.max_events = None
        r.chunk_steps = steps  # type: ignore[attr-defined]
        r.balancer = copy.deepcopy(source.balancer)
        return r
    if chunk.kind in ("parquet", "pyarrow"):
        assert isinstance(source, ParquetSource)
        p = copy.copy(source)
        p.files = files
        p.entry_start = pieces[0].start  # type: ignore[attr-defined]
        p.max_events = chunk.events
        p.balancer = copy.deepcopy(source.balancer)
        return p
    assert isinstance(source, SyntheticSource)
    s = copy.copy(source)
    s.__class__ = _SyntheticChunk
    s.first = steps[0][1] // source.step_size  # type: ignore[attr-defined]
    s.chunk_steps = steps  # type: ignore[attr-defined]
    return s
