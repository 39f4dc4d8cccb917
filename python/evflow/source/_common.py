"""What every source kind shares: the :class:`Source` interface, file lists,
missing-column errors, and size settings."""

from __future__ import annotations

import difflib
import os
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError, InputError, MissingBranchError

if TYPE_CHECKING:
    from .._runtime import BatchData

PathLike = str | os.PathLike[str]


def _files(files: PathLike | Iterable[PathLike]) -> list[str]:
    if isinstance(files, str | os.PathLike):
        return [os.fspath(files)]
    given = list(files) if isinstance(files, Iterable) else None
    if given is None or any(not isinstance(f, str | os.PathLike) for f in given):
        raise ConfigurationError(f"the source's files are a path or a list of paths, not {files!r}")
    out = [os.fspath(f) for f in given]
    if not out:
        raise ConfigurationError("the source has no input file")
    return out


def _missing(column: str, available: Iterable[str], where: str) -> MissingBranchError:
    hint = difflib.get_close_matches(column, list(available), n=1)
    extra = f"; did you mean '{hint[0]}'?" if hint else ""
    error = MissingBranchError(f"branch '{column}' not found in {where}{extra}")
    error.branch = column
    return error


class Source(ABC):
    """Base class of sources. A subclass provides :meth:`check`,
    :meth:`reader` (an object whose ``next_batch()`` returns an
    :class:`evflow.BatchData` or ``None`` at the end), :meth:`describe` (a
    line naming the input, for messages), and may provide
    :meth:`total_events` (for progress) and :meth:`empty_batch`; the
    native Parquet source is set up by the process itself. A complete
    example: docs/python.md, "Your own source"."""

    step_size: int
    max_events: int | None

    @abstractmethod
    def check(self, columns: Sequence[str]) -> None:
        """Raises a clear :class:`~evflow.errors.InputError` when an input is
        missing or lacks one of ``columns``."""

    @abstractmethod
    def reader(self, columns: Sequence[str], weight: str | None) -> Any:
        """An object with ``next_batch() -> BatchData | None``."""

    @abstractmethod
    def describe(self) -> str:
        """A line naming the input (files, tree), for messages."""

    def total_events(self) -> int | None:
        """Number of events the source will deliver, if known."""
        return None

    def empty_batch(self, columns: Sequence[str], weight: str | None) -> BatchData | None:
        """A batch of no event with ``columns`` of the types the input has,
        or ``None`` when the source cannot tell them. A job whose input has
        no event runs it, so that skims get their columns' types (those of
        the same job with events) instead of untyped ones."""
        return None


class _TypesWhenEmpty:
    """A reader that hands out ``empty()`` (a batch of no event) once
    when ``reader`` has no batch at all."""

    def __init__(self, reader: Any, empty: Any) -> None:
        self._reader = reader
        self._empty = empty
        self._any = False

    def next_batch(self) -> Any:
        batch = self._reader.next_batch()
        if batch is not None:
            self._any = True
            return batch
        if self._any:
            return None
        self._any = True
        return self._empty()

    def __getattr__(self, name: str) -> Any:
        # Read-ahead statistics and the like come from the reader itself.
        return getattr(self._reader, name)


class _IterReader:
    """Adapts an iterator of BatchData to ``next_batch()``."""

    def __init__(self, it: Iterator[BatchData]) -> None:
        self._it = it

    def next_batch(self) -> BatchData | None:
        return next(self._it, None)


Setting = int | str


#: The largest batch a source takes: the engine counts entries in 64 bits,
#: and a batch this large would not fit in memory anyway.
MAX_STEP_SIZE = 1 << 40


def _check_step_size(step_size: object) -> int:
    """``step_size`` as an int: a whole number of entries from 1 to
    :data:`MAX_STEP_SIZE` (1.5 ran as 1, a string or 2**64 failed only in
    the run)."""
    import numbers

    if isinstance(step_size, bool) or not isinstance(step_size, numbers.Integral):
        raise ConfigurationError(f"step_size must be a whole number of entries, not {step_size!r}")
    if not 1 <= int(step_size) <= MAX_STEP_SIZE:
        raise ConfigurationError(f"step_size must be from 1 to {MAX_STEP_SIZE}, not {step_size}")
    return int(step_size)


def _check_max_events(max_events: int | None) -> None:
    if max_events is not None and (
        isinstance(max_events, bool) or not isinstance(max_events, int) or max_events < 0
    ):
        raise ConfigurationError(f"max_events must be None or a non-negative integer, not {max_events!r}")


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


def unreadable(message: str, file: str, start: int, stop: int) -> InputError:
    """The error of entries ``start``-``stop - 1`` of ``file`` whose data
    cannot be read (a corrupt basket or row group): it keeps the file and
    the entries, so that ``skip_bad_files`` can leave that file out (also
    when the error comes back pickled from a worker)."""
    e = InputError(message)
    e.unreadable = {"file": file, "entries": [start, stop]}  # type: ignore[attr-defined]
    return e
