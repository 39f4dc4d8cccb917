"""The chunk task: what a Dask worker runs for one chunk.

It rebuilds the analysis (once per worker process, cached), points a copy of
it at the chunk's batches, runs the evflow engine on them and hands back
everything the client needs to merge the chunk in order: the engine's
per-batch cut-flow records, every batch's histogram part, the skim part it
wrote and the chunk's report. A failure is returned as data (module, batch,
file, entry range, traceback), not raised, so the client can name it
precisely whatever the cluster's pickling of exceptions.
"""

from __future__ import annotations

import contextlib
import copy
import os
import threading
import time
import traceback
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError, EvflowError, JobError, ModuleError
from ..output import ParquetOutput
from .chunks import Chunk, chunk_source
from .merge import job_batch_message

if TYPE_CHECKING:
    from .._process import Process
    from ..source import Source

__all__ = ["part_name", "run_chunk", "staged_name"]

#: The analyses this worker process has built, by job token.
_BUILT: dict[str, Any] = {}
_BUILT_LOCK = threading.Lock()


def part_name(chunk: int) -> str:
    """The file a chunk writes into a skim's directory (deterministic: a
    retried chunk rewrites its own part)."""
    return f"part-{chunk:05d}.parquet"


def staged_name(name: str, stage: str) -> str:
    """The name under which a chunk of the run ``stage`` (digits) writes the
    part ``name``: a temporary name (hidden, like every ``evflow-partial``
    file) that only that run's client renames, once the chunk is merged and
    the job ends. A chunk of an interrupted run still writing after its
    client gave up can then never leave a part that a later run (or a
    reader of the directory) takes for its own."""
    return f".{name}.evflow-partial-{stage}"


class _PartOutput(ParquetOutput):
    """A chunk's part, written under its run's staged name (``path``), from
    the temporary file of the final name (``final``), in a skim directory
    that must exist: a chunk of an aborted run, whose directory was removed,
    does not create it again."""

    def __init__(self, path: str, final: str, columns: list[str], compression: str) -> None:
        super().__init__(path, columns, compression)
        self.final = final

    def _open(self) -> None:
        d = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(d):
            raise ConfigurationError(f"skim directory '{d}' is gone (the run was aborted?)")
        super()._open()
        self._tmp = os.path.join(d, f".{self.final}.evflow-partial-{os.getpid()}")


#: glibc's largest dynamic mmap threshold on 64-bit systems, and the trim
#: threshold that goes with it (twice as large).
_MMAP_THRESHOLD = 32 * 1024 * 1024
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt parameters (malloc.h)


def tune_malloc() -> bool:
    """Gives this worker process the allocator behaviour of a plain process.

    Dask's nanny starts workers with ``MALLOC_TRIM_THRESHOLD_`` set to 64
    KiB, and any such variable turns off glibc's dynamic mmap threshold:
    every array above 128 KiB is then mapped and unmapped anew and the heap
    is trimmed after every free, with page faults on every batch (30-60 %
    more CPU on the ADL queries). This sets the mmap and trim thresholds to
    the largest values the dynamic thresholds reach (glibc
    only; not if ``MALLOC_MMAP_THRESHOLD_`` was chosen). Returns whether it
    changed them."""
    env = os.environ
    if "MALLOC_MMAP_THRESHOLD_" in env:
        return False
    if not any(k in env for k in ("MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")):
        return False  # the dynamic threshold is on
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)) and bool(
            libc.mallopt(_M_TRIM_THRESHOLD, 2 * _MMAP_THRESHOLD)
        )
    except (OSError, AttributeError):
        return False


def _process(payload: bytes, token: str) -> Process:
    """The analysis of job ``token``: ``payload`` is a pickled Process, or a
    pickled callable that returns one (built here, where the modules run)."""
    import cloudpickle

    with _BUILT_LOCK:
        proc = _BUILT.get(token)
        if proc is None:
            if not _BUILT:
                tune_malloc()  # the first analysis this worker process builds
            obj = cloudpickle.loads(payload)
            proc = obj() if callable(obj) else obj  # a Process is not callable
            if not all(hasattr(proc, a) for a in ("modules", "paths", "outputs", "source")):
                raise TypeError(f"the process factory returned {type(proc).__name__}, not an evflow Process")
            _BUILT.clear()  # one job's analysis at a time per worker process
            _BUILT[token] = proc
    return proc


def _slots_here(host_slots: dict[str, int] | None) -> int | None:
    """The task slots on this worker's host (None outside a Dask worker, or
    for a worker that joined after the run started: its own threads)."""
    try:
        from distributed import get_worker
        from distributed.comm.addressing import get_address_host

        worker = get_worker()
        slots = (host_slots or {}).get(get_address_host(worker.address))
    except (ImportError, ValueError):
        return None
    return slots if slots else max(1, int(getattr(worker.state, "nthreads", 1)))


def _local_remotes(modules: dict[str, Any], labels: list[str]) -> dict[str, Any]:
    """The modules with the remote producers ``labels`` run locally (their
    requests would go to the cluster this chunk keeps busy: see
    :mod:`evflow.remote._distributed`); copies, the built analysis is shared."""
    import dataclasses

    out = dict(modules)
    for label in labels:
        m = copy.copy(out[label])
        m.remote = dataclasses.replace(m.remote, mode="local")
        out[label] = m
    return out


def _failure(
    chunk: Chunk, kind: str, message: str, exc: BaseException | None, **extra: Any
) -> dict[str, Any]:
    import pickle

    cause = exc.__cause__ if exc is not None and exc.__cause__ is not None else exc
    pickled = None
    if cause is not None:
        with contextlib.suppress(Exception):
            pickled = pickle.dumps(cause)
            pickle.loads(pickled)
    return {
        "chunk": chunk.index,
        "kind": kind,
        "message": message,
        "where": chunk.describe(),
        "traceback": "".join(traceback.format_exception(cause)) if cause is not None else "",
        "cause": pickled,
        **extra,
    }


def run_chunk(
    payload: bytes, token: str, source: Source, chunk: Chunk, options: dict[str, Any]
) -> dict[str, Any]:
    """Runs the analysis on ``chunk``; returns the chunk's raw result, or
    ``{"error": ...}`` naming the module, file and entry range."""
    from .._cores import task_share
    from .._job import run_process
    from .._skim_types import read_declared

    t0 = time.perf_counter()
    host = f"{os.uname().nodename}:{os.getpid()}"
    try:
        base = _process(payload, token)
    except Exception as e:
        return {
            "error": _failure(
                chunk,
                "environment",
                f"cannot build the analysis on worker {host}: {type(e).__name__}: {e}",
                e,
            )
        }
    # A private copy: several chunk tasks may share this worker process.
    proc = copy.copy(base)
    proc.source = chunk_source(source, chunk)
    if options.get("local_remote"):
        proc.modules = _local_remotes(base.modules, options["local_remote"])
    seed = dict(options.get("seed") or {})
    perms = _reorder(proc, seed) if seed else {}
    skims = options.get("skims", [])
    proc.outputs = []
    parts: list[ParquetOutput] = []
    types = options.get("skim_types") or [None] * len(skims)
    stage = options.get("stage")  # the run's: parts keep a staged name until the client renames them
    final = part_name(chunk.index)
    for (out, select), directory, declared in zip(base.outputs, skims, types, strict=True):
        if stage is None:
            part = ParquetOutput(os.path.join(directory, final), out.columns, out.compression)
        else:
            staged = os.path.join(directory, staged_name(final, stage))
            part = _PartOutput(staged, final, out.columns, out.compression)
        part._declared = read_declared(declared)  # as every other chunk's part
        proc.outputs.append((part, select))
        parts.append(part)
    try:
        # This task slot's share of the host's cores, while the task runs.
        with task_share(_slots_here(options.get("host_slots"))):
            res = run_process(
                proc,
                threads=options["threads"],
                events_in_flight=options.get("events_in_flight"),
                progress=False,
                executor=options.get("executor", "threaded"),
                on_error=options.get("on_error", "fail"),
                trace=False,
                filter_order=options.get("filter_order") or "adaptive",
                raw=True,
                first_batch=chunk.first_batch,
                ordering_stats=options.get("statistics"),
                print_notice=False,
            )
    except EvflowError as e:
        extra: dict[str, Any] = {"type": type(e).__name__}
        message = str(e)
        if isinstance(e, JobError):
            batch = e.batch
            if batch is not None and 0 <= batch < len(chunk.steps):
                f, a, b = chunk.steps[batch]
                extra["batch_where"] = f"file '{f}', entries {a}-{b - 1}"
                # The engine numbers the chunk's batches from 0: give the job's number.
                message = job_batch_message(message, batch, chunk.first_batch)
                batch += chunk.first_batch
            extra.update(module=e.module, batch=batch, job_kind=e.kind)
        kind = "module" if isinstance(e, ModuleError) else "input"
        return {"error": _failure(chunk, kind, message, e, **extra)}
    written = []
    schemas: list[bytes | None] = []
    for part in parts:
        rows = res.outputs.get(part.path, 0)
        schemas.append(_schema(part.path))
        if rows == 0:
            # No row: no file; its columns' types go to the manifest.
            with contextlib.suppress(FileNotFoundError):
                os.remove(part.path)
            written.append((None, 0))
        else:
            written.append((final, rows))  # its final name: the client renames it
    assert res.raw is not None
    if perms:
        res.raw["records"] = written_steps(res.raw["records"], perms)
    fold_counts(proc, res.raw["hist_parts"], res.histograms)
    wall = time.perf_counter() - t0
    return {
        "chunk": chunk.index,
        "events": res.events,
        "raw": res.raw,
        "report": res.report,
        "skims": written,
        "skim_schemas": schemas,
        "worker": host,
        "wall_s": wall,
        # outside the engine's event loop: setup, start, results
        "overhead_s": max(0.0, wall - float(res.report.get("wall_s_python", 0.0))),
        "order": {p.path: p.order for p in res.cutflow if p.reorderable},
        "seeded": seed or None,
        # Whether the planner started from the merged statistics of the
        # chunks finished before this one was dispatched.
        "seeded_statistics": bool(options.get("statistics")),
    }


def _schema(path: str) -> bytes | None:
    """The Arrow schema of a skim part, serialized (``None``: unreadable)."""
    import pyarrow.parquet as pq

    try:
        return bytes(pq.read_schema(path).remove_metadata().serialize().to_pybytes())
    except (OSError, ValueError):
        return None


#: Storages whose bins an unweighted fill adds 1 to: sums of counts.
_COUNTS = ("Double", "Int64", "AtomicInt64", "Unlimited", "Weight")


def fold_counts(proc: Process, parts: dict[str, list[tuple[int, Any]]], totals: dict[str, Any]) -> None:
    """Replaces the batch parts of every unweighted counting histogram by
    the chunk's total (one part, numbered by the chunk's first batch).

    Such a histogram holds whole numbers (counts, and variances equal to
    them) far below 2^53, so every addition is exact and any grouping of
    the additions gives the single-process bits; weighted histograms (and
    other storages) keep their batch parts, added in the single-process
    order by the client."""
    for name, h in proc.histograms.items():
        got = parts.get(name)
        if h.weight or not got or len(got) < 2 or name not in totals:
            continue
        if getattr(getattr(totals[name], "storage_type", None), "__name__", "") not in _COUNTS:
            continue
        parts[name] = [(got[0][0], totals[name])]


def written_steps(records: list[tuple[Any, ...]], perms: dict[int, list[int]]) -> list[tuple[Any, ...]]:
    """The engine's cut-flow records with each filter step numbered by its
    written position (what the client's cut-flow expects) instead of its
    position on the reordered path."""
    return [(b, p, perms[p][step] if p in perms else step, *rest) for b, p, step, *rest in records]


def _reorder(proc: Process, seed: dict[str, list[str]]) -> dict[int, list[int]]:
    """Lists the filters of each seeded reorderable path in the seed's order
    (the engine's ordering policy starts from the listed order); returns,
    per path index, the written position of each listed filter."""
    from .._modules import Path

    perms: dict[int, list[int]] = {}
    paths = {}
    for i, (name, path) in enumerate(proc.paths.items()):
        labels = [f.label for f in path.filters]
        order = seed.get(name)
        if path.reorderable and order and sorted(order) == sorted(labels) and order != labels:
            perm = [labels.index(label) for label in order]
            path = Path(name, [path.filters[k] for k in perm], path.reorderable, path.after)
            perms[i] = perm
        paths[name] = path
    proc.paths = paths
    return perms
