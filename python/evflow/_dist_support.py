"""Helpers of a distributed run (``evflow.distributed.run``) kept out of its
module: shipping the analysis, the local cluster evflow starts and stops,
the skim directories a failed run created, and the chunk plan shown
without a cluster."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .errors import ConfigurationError

if TYPE_CHECKING:
    from ._process import Process
    from .distributed.chunks import Chunk

#: How long connecting to a scheduler given by its address may take (Dask's
#: default of 30 s reads as a hang when nothing listens there).
CONNECT_TIMEOUT_S = 10

_SHIPPING_HINT = (
    "a distributed run ships the analysis to the Dask workers pickled (cloudpickle): create such objects "
    "(locks, open files, connections) inside the function that uses them, or run the analysis file with "
    "'evflow run FILE --processes N' (or --scheduler ADDRESS), which loads the file on each worker "
    "instead (in Python: ef.distributed.run(ef.distributed.analysis_file(FILE), ...))"
)


def pickled(shipped: Any, proc: Process) -> bytes:
    """``shipped`` (the Process, or a factory of it) pickled; a
    :class:`ConfigurationError` naming the module that cannot be."""
    import cloudpickle

    try:
        return bytes(cloudpickle.dumps(shipped))
    except Exception as e:
        error = e
    if callable(shipped) and not hasattr(shipped, "modules"):
        raise ConfigurationError(
            f"the process factory {shipped!r} cannot be pickled ({type(error).__name__}: {error}); "
            + _SHIPPING_HINT
        ) from error
    parts: list[tuple[str, Any]] = [(f"module '{label}'", m) for label, m in proc.modules.items()]
    parts += [(f"histogram '{name}'", h) for name, h in proc.histograms.items()]
    parts += [(f"skim '{out.path}'", out) for out, _sel in proc.outputs]
    for what, obj in parts:
        try:
            cloudpickle.dumps(obj)
        except Exception as e:
            raise ConfigurationError(
                f"{what} cannot be pickled ({type(e).__name__}: {e}); " + _SHIPPING_HINT
            ) from e
    raise ConfigurationError(
        f"process '{proc.name}' cannot be pickled ({type(error).__name__}: {error}); " + _SHIPPING_HINT
    ) from error


def connect(address: str) -> Any:
    """A client of the scheduler at ``address``; a clear error within
    :data:`CONNECT_TIMEOUT_S` when none answers."""
    from distributed import Client

    from .remote._connect import handshake

    try:
        # Dask bounds the connection but not its handshake: a port where
        # something else listens would keep the client waiting for ever.
        handshake(address, CONNECT_TIMEOUT_S)
        return Client(address, timeout=f"{CONNECT_TIMEOUT_S}s")
    except Exception as e:
        why = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        raise ConfigurationError(
            f"cannot connect to the Dask scheduler at '{address}' within {CONNECT_TIMEOUT_S} s ({why}); "
            "is a scheduler running there ('dask scheduler') and reachable from here?"
        ) from e


def _ignore_interrupts() -> Any:
    """A worker plugin that makes the worker processes of a cluster evflow
    started ignore SIGINT: Ctrl-C in a terminal reaches the whole process
    group, and each worker would print its KeyboardInterrupt traceback; the
    client stops them when it closes the cluster."""
    from distributed import WorkerPlugin

    class IgnoreInterrupts(WorkerPlugin):
        name = "evflow-ignore-sigint"

        def setup(self, worker: Any) -> None:
            # The worker's event loop runs in its process's main thread.
            with contextlib.suppress(ValueError):
                signal.signal(signal.SIGINT, signal.SIG_IGN)

    return IgnoreInterrupts()


@contextlib.contextmanager
def local_cluster(processes: int) -> Iterator[Any]:
    """A client of a new local cluster of ``processes`` worker processes,
    closed at the end; a run that fails or is interrupted shuts it down
    without Dask's log output (the workers' cancelled tasks)."""
    from distributed import Client, LocalCluster

    # One evflow engine per worker process; the engine has its own threads.
    cluster = LocalCluster(
        n_workers=processes,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",
        silence_logs=logging.ERROR,
    )
    c = Client(cluster)
    failed = True
    try:
        with contextlib.suppress(Exception):
            c.register_plugin(_ignore_interrupts())
        yield c
        failed = False
    finally:
        with _quiet() if failed else contextlib.nullcontext():
            c.close()
            cluster.close()


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Dask's loggers silenced (of a cluster we own, while it shuts down)."""
    loggers = [logging.getLogger(n) for n in ("distributed", "tornado", "asyncio")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def new_directories(paths: list[str]) -> list[bool]:
    """Whether each of ``paths`` does not exist yet (a run that fails
    removes those it created, if empty)."""
    return [not os.path.exists(p) for p in paths]


def remove_created(paths: list[str], created: list[bool]) -> None:
    """Removes the directories of ``paths`` that the run created and that
    are empty (a failed or interrupted run leaves nothing behind)."""
    for path, new in zip(paths, created, strict=True):
        if new:
            with contextlib.suppress(OSError):
                os.rmdir(path)  # only if empty


def preview_chunks(proc: Process, *, chunk_size: int | None = None, workers: int = 1) -> list[Chunk]:
    """The chunks a distributed run of ``proc`` would start with, read here
    without a cluster: with ``chunk_size``, the whole fixed plan; without,
    the chunks cut before any chunk was timed (a run sizes later chunks as
    they finish). Each :class:`~evflow.distributed.Chunk` has its pieces
    (file, entries), events and batches."""
    import copy

    from ._job import _Plan
    from .distributed.chunks import gather_meta, plan_chunks, read_meta, source_kind

    plan = _Plan(proc)
    assert proc.source is not None
    source = copy.copy(proc.source)
    if hasattr(source, "files"):
        source.files = [os.path.abspath(f) if os.path.exists(f) else f for f in source.files]
    metas = []
    if source_kind(source) != "synthetic":

        def mapper(paths: list[str]) -> list[Any]:
            return [read_meta(source, p, plan.branches) for p in paths]

        metas = gather_meta(source, plan.branches, mapper)
        for m in metas:
            if m.error is not None:
                raise m.error
    return plan_chunks(source, metas, chunk_size=chunk_size, workers=workers)
