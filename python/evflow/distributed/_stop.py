"""How a distributed run stops early: a chunk's failure as the error a
single-process run raises, and Ctrl-C.

A first interrupt (SIGINT, or SIGTERM where it raises KeyboardInterrupt, as
``evflow run`` sets it) stops handing out chunks; the chunks already handed
out finish and are merged, the skims are finished for them and the run
raises :class:`~evflow.Interrupted` with that partial result, as a
single-process run does. A second interrupt aborts: the chunks are
cancelled, the skims removed, and :class:`~evflow.errors.Aborted` raised.
"""

from __future__ import annotations

import contextlib
import pickle
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

from .. import errors
from ..errors import EvflowError, InputError, JobError, ModuleError
from .chunks import Chunk

__all__ = ["Interrupts", "chunk_error", "task_exception", "task_failure"]


class Interrupts:
    """Whether a first interrupt asked the run to stop (:attr:`requested`).

    While :meth:`catching`, a first SIGINT (or SIGTERM turned into a
    KeyboardInterrupt) only sets :attr:`requested`, so that no exception
    lands in the middle of merging a chunk; a second one raises
    KeyboardInterrupt. Handlers are installed only in the main thread and
    only over Python's default ``default_int_handler`` (a handler of the
    application's own is left alone)."""

    def __init__(self) -> None:
        self.requested = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    @contextlib.contextmanager
    def catching(self) -> Iterator[None]:
        saved: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, getattr(signal, "SIGTERM", None)):
                if sig is not None and signal.getsignal(sig) is signal.default_int_handler:
                    saved[sig] = signal.signal(sig, self._handle)
        try:
            yield
        finally:
            for sig, handler in saved.items():
                signal.signal(sig, handler)

    def interrupt(self, e: KeyboardInterrupt) -> None:
        """A KeyboardInterrupt that reached the run's loop (not through the
        handler: raised by a callback, or in another thread's handler):
        the first stops the run as a first interrupt, a later one is raised."""
        if self.requested:
            raise e
        self.requested = True


def task_exception(r: Any) -> Any:
    """The exception of a failed task as ``as_completed(raise_errors=False)``
    hands it over (a ``(type, exception, traceback)`` tuple), else ``r``."""
    if isinstance(r, tuple) and len(r) == 3 and isinstance(r[1], BaseException):
        return r[1]
    return r


def task_failure(chunk: Chunk, e: BaseException) -> JobError:
    """The error of a chunk whose task failed on the cluster (not in the
    analysis: that returns its error), naming the chunk."""
    if type(e).__name__ == "KilledWorker":
        return JobError(
            f"{chunk.describe()}: the worker process running it died each time it was tried "
            f"(a crash in native code, the out-of-memory killer or os._exit in a module?): {e}",
            kind="executor",
        )
    return JobError(f"{chunk.describe()} failed on the cluster: {type(e).__name__}: {e}", kind="executor")


def _error_class(name: Any) -> type[EvflowError] | None:
    """The evflow error class the chunk's engine raised (by its name)."""
    cls = getattr(errors, name, None) if isinstance(name, str) else None
    return cls if isinstance(cls, type) and issubclass(cls, EvflowError) else None


def chunk_error(failure: dict[str, Any]) -> EvflowError:
    """The error of a chunk whose analysis failed (``failure``: what the
    task returned), of the class a single-process run raises (a corrupt
    basket's :class:`~evflow.errors.SourceError`, a skim's
    :class:`~evflow.errors.ConfigurationError`, ...), naming the chunk."""
    where = failure.get("batch_where") or failure["where"]
    module = failure.get("module") or ""
    cls = _error_class(failure.get("type"))
    err: EvflowError
    if failure["kind"] == "module":
        err = ModuleError(
            f"{failure['message']} [{failure['where']}]",
            kind="module",
            module=module,
            batch=failure.get("batch"),
        )
    elif failure["kind"] == "environment":
        err = JobError(f"{failure['message']} [{failure['where']}]", kind="environment")
    elif cls is not None and issubclass(cls, JobError):
        err = cls(
            f"{failure['message']} [{where}]",
            kind=failure.get("job_kind") or "",
            module=module,
            batch=failure.get("batch"),
        )
    else:
        err = InputError(f"{failure['message']} [{where}]")
        if cls is not None:
            with contextlib.suppress(Exception):
                err = cls(f"{failure['message']} [{where}]")
    if failure.get("cause"):
        with contextlib.suppress(Exception):
            err.__cause__ = pickle.loads(failure["cause"])
    return err
