"""Exceptions raised by evflow.

Every error names what went wrong and where: the module label, the batch
(file and entry range), the file, tree or branch.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator
from typing import Any


class EvflowError(Exception):
    """Base class of every evflow error."""


class Interrupted(KeyboardInterrupt):
    """A KeyboardInterrupt stopped :meth:`Process.run` gracefully.

    No batch was read after it; the batches already read were finished, and
    histograms, cut-flow and outputs are complete for them (outputs are
    closed under their final names). ``result`` holds that partial
    :class:`~evflow.result.Result`. Being a ``KeyboardInterrupt``, it still
    ends a script that does not catch it.
    """

    def __init__(self, result: Any) -> None:
        super().__init__(
            f"evflow run interrupted after {result.events} events; outputs are complete for them"
        )
        self.result = result


class Aborted(KeyboardInterrupt):
    """A second interrupt aborted :meth:`Process.run`: the batches in flight
    were cancelled and every output of the run was removed (nothing is
    left under a final or a temporary name)."""


class ConfigurationError(EvflowError, ValueError):
    """The process description is inconsistent (found before any event runs)."""


class InputError(EvflowError):
    """An input file cannot be used: missing file, tree or branch, unreadable data."""


class MissingFileError(InputError, FileNotFoundError):
    """An input file does not exist."""


class MissingTreeError(InputError, KeyError):
    """A ROOT file has no tree of the requested name."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class MissingBranchError(InputError, KeyError):
    """A module consumes a branch (column) that the input does not have."""

    #: the missing branch's name, where known
    branch: str | None = None

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class ModuleOutputError(EvflowError, TypeError):
    """A Python module returned a value of the wrong kind, shape or dtype."""


class DeviceError(EvflowError, RuntimeError):
    """No device can be used where one was demanded (``device="cuda"``,
    ``device_required=True``), or a device implementation failed on a batch
    (the message names the module, the batch and the device)."""


class JobError(EvflowError, RuntimeError):
    """The job started and failed.

    Attributes:
        kind: ``"module"``, ``"source"``, ``"transition"``, ``"executor"`` or ``"config"``.
        module: label of the failing module ("" if not a module).
        batch: index of the failing batch, if known.
        report: the engine's report of what ran (a dict), if any.
    """

    def __init__(
        self,
        message: str,
        *,
        kind: str = "",
        module: str = "",
        batch: int | None = None,
        report: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.module = module
        self.batch = batch
        self.report = report


class ModuleError(JobError):
    """A Python module raised an exception (or returned a wrong value) on a batch."""


class SourceError(JobError):
    """Reading the input failed during the run."""


def job_error(res: dict[str, Any], report: dict[str, Any] | None) -> EvflowError:
    """The exception of a failed engine job, from its result ``res``."""
    err = res["error"] or {}
    kind = err.get("kind", "")
    message = err.get("message", "unknown error")
    cause = res.get("cause")
    if isinstance(cause, AccumulatorError):
        # A part consumed on another end module's thread (a skim written when
        # a histogram completed the batch): the part's module and batch failed.
        return accumulator_error(cause, report)
    out: EvflowError
    if kind == "config":
        out = ConfigurationError(f"configuration error: {message}")
    elif kind == "module":
        # A filter on several paths: the occurrence that failed.
        on = f" on path '{err['path']}'" if err.get("path") else ""
        out = ModuleError(
            f"module '{err['module']}'{on} failed on {message}",
            kind=kind,
            module=err["module"],
            batch=err.get("batch"),
            report=report,
        )
    elif kind == "source":
        out = SourceError(f"reading input failed: {message}", kind=kind, report=report)
    else:
        out = JobError(f"{kind} error: {message}", kind=kind, module=err.get("module", ""), report=report)
    if isinstance(cause, BaseException):
        out.__cause__ = cause
    return out


class AccumulatorError(Exception):
    """Consuming batch ``batch``'s part of module ``module`` failed with
    ``error`` (``where``: the batch's origin, as the engine names it). An
    accumulator (``evflow._ordered``) consumes a part on the thread of
    whichever end module completes its batch: this carries the owner's
    name to the job's error (see :func:`accumulator_error`)."""

    def __init__(self, module: str, batch: int, where: str | None, error: BaseException) -> None:
        super().__init__(f"module '{module}' failed on batch {batch}: {type(error).__name__}: {error}")
        self.module = module
        self.batch = batch
        self.where = where
        self.error = error


def accumulator_error(e: AccumulatorError, report: dict[str, Any] | None = None) -> ModuleError:
    """The error of the module that owns an accumulator whose part could
    not be consumed."""
    where = f" ({e.where})" if e.where else ""
    out = ModuleError(
        f"module '{e.module}' failed on batch {e.batch}{where}: {type(e.error).__name__}: {e.error}",
        kind="module",
        module=e.module,
        batch=e.batch,
        report=report,
    )
    out.__cause__ = e.error
    return out


def readers_of(name: str, proc: Any) -> list[str]:
    """What in the process ``proc`` reads the column ``name``: its modules,
    histograms, skims and weight, as a message names them."""
    out = [f"module '{m.label}'" for m in proc.modules.values() if name in getattr(m, "consumes", ())]
    for h in proc.histograms.values():
        if name in h.consumes or h.weight == name:
            out.append(f"histogram '{h.name}'")
    out.extend(f"skim '{o.path}'" for o, _select in proc.outputs if name in o.columns)
    if proc.weight == name:
        out.append("the process weight")
    return out


def with_product_hint(error: BaseException, products: Iterable[str], proc: Any = None) -> BaseException:
    """``error``, a missing branch, names what reads it (with ``proc``, the
    process) and says it is no product either; a name close to one of
    ``products`` is suggested (a product's name mistyped in ``consumes``
    reads as a branch)."""
    branch = getattr(error, "branch", None)
    if not branch:
        return error
    close = difflib.get_close_matches(branch, list(products), n=1)
    readers = readers_of(branch, proc) if proc is not None else []
    if not close and not readers:
        return error
    message = str(error)
    if readers:
        message += (
            f"; {' and '.join(readers)} read{'s' if len(readers) == 1 else ''} '{branch}', "
            "which is neither a product of a producer nor a branch of the input"
        )
    if close:
        message += (
            f"; {'' if readers else 'no product is named so either: '}did you mean the product '{close[0]}'?"
        )
    hinted = MissingBranchError(message)
    hinted.branch = branch
    return hinted


def error_chain(error: BaseException) -> Iterator[BaseException]:
    """``error`` and the errors behind it (``__cause__``, else
    ``__context__``), each once."""
    seen: set[int] = set()
    e: BaseException | None = error
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__
