"""The parts of a process description: modules (producers, filters,
analyzers), paths and histograms, with the checks of their names."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from .errors import ConfigurationError

if TYPE_CHECKING:
    import hist as _hist

    from ._runtime import Events
    from .remote import Remote

Concurrency = Literal["shared", "serial", "exclusive"]
F = TypeVar("F", bound=Callable[..., Any])

_LABEL = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


def _check_label(label: str, what: str) -> str:
    if not _LABEL.match(label):
        raise ConfigurationError(
            f"{what} name {label!r} is invalid: use letters, digits, '_', '.', '-' (not starting with a digit)"
        )
    return label


def check_counts(**counts: int | None) -> None:
    """Thread and batch counts of a run: ``None`` (the default) or a
    positive integer."""
    for what, count in counts.items():
        if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
            raise ConfigurationError(f"{what} must be a positive integer, not {count!r}")


def check_flag(value: Any, what: str) -> bool:
    """A boolean argument: ``True`` or ``False``, not a string (``"yes"``,
    ``"false"``) or a number that would silently read as one."""
    if not isinstance(value, bool):
        raise ConfigurationError(f"{what} must be True or False, not {value!r}")
    return value


def check_progress(progress: Any) -> None:
    """``progress=`` of a run: ``True``, ``False`` or a function ``(batches, events)``."""
    if not isinstance(progress, bool) and not callable(progress):
        raise ConfigurationError(
            f"progress must be True (a progress line on stderr), False or a function (batches, events), "
            f"not {progress!r}"
        )


def check_growth(name: str, h: Any) -> None:
    """Refuses a ``hist.Hist`` template with a growing continuous axis
    (``Regular``/``Variable`` with ``growth=True``): each batch fills a copy
    of the template and the copies are added, but copies that grew
    differently cannot be added (boost-histogram: "axes not mergable").
    Growing ``Integer``, ``IntCategory`` and ``StrCategory`` axes add up."""
    axes = getattr(h, "axes", None)
    if axes is None:
        raise ConfigurationError(f"histogram '{name}': hist= takes a hist.Hist, not {type(h).__name__} {h!r}")
    for i, axis in enumerate(axes):
        traits = getattr(axis, "traits", None)
        if traits is not None and traits.growth and traits.continuous:
            label = f" ('{axis.name}')" if getattr(axis, "name", "") else ""
            raise ConfigurationError(
                f"histogram '{name}': axis {i}{label} is a growing {type(axis).__name__} axis (growth=True), "
                "which evflow cannot merge: each batch fills its own histogram and those that grew "
                "differently cannot be added; give the axis a fixed range (growth=False: values outside "
                "go to the underflow/overflow bins), or use a growing Integer or IntCategory axis"
            )


def check_weight_storage(name: str, h: Any) -> None:
    """Refuses a weighted histogram's ``hist.Hist`` template whose storage
    counts in integers (``Int64``, ``AtomicInt64``): boost-histogram would
    truncate each weight to an integer. A ``Double`` storage sums the
    weights without their variances (kept: the user chose it); ``Weight``
    storage has both."""
    import boost_histogram as bh

    storage = getattr(h, "storage_type", None)
    if isinstance(storage, type) and issubclass(storage, bh.storage.Int64 | bh.storage.AtomicInt64):
        raise ConfigurationError(
            f"histogram '{name}' is weighted (weight=...) but its hist= template has {storage.__name__} "
            "storage, which would truncate each weight to an integer; use .Weight() storage (sums of "
            "weights and their variances) or .Double() (sums of weights only)"
        )


def _names(items: Iterable[Any], what: str) -> list[str]:
    if isinstance(items, str):
        return [items]
    if not isinstance(items, Iterable):
        raise ConfigurationError(f"{what} must be a name or a list of names (strings), not {items!r}")
    out = []
    for x in items:
        if not isinstance(x, str):
            raise ConfigurationError(f"{what} must be names (strings), got {x!r}")
        out.append(x)
    return out


def _check_arguments(fn: Callable[..., Any], arguments: str, what: str) -> None:
    """Refuses a function that cannot be called with the positional
    ``arguments`` (comma-separated names) the engine passes: a clear error
    when the module is declared, not a TypeError on the first batch.
    Callables without a signature (builtins, compiled functions) pass."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    names = [a.strip() for a in arguments.split(",")]
    try:
        signature.bind(*names)
    except TypeError:
        name = getattr(fn, "__name__", repr(fn))
        raise ConfigurationError(
            f"{what}: {name}{signature} cannot be called as {name}({arguments}); "
            f"it must take {len(names)} positional argument{'s' if len(names) > 1 else ''} ({arguments})"
        ) from None


class Module:
    """A Python module of the process (created by the decorators)."""

    kind: str = ""

    def __init__(
        self,
        fn: Callable[[Events], Any],
        label: str,
        consumes: Sequence[str],
        concurrency: Concurrency,
        resources: Sequence[str],
        *,
        device: Callable[[Any, Any], Any] | None = None,
        device_required: bool = False,
    ) -> None:
        if device is not None and not callable(device):
            raise ConfigurationError(
                f"module '{label}': device= must be a function fn(ev, xp), not {device!r}"
            )
        if not callable(fn):
            raise ConfigurationError(f"module '{label}': {fn!r} is not a function fn(ev)")
        _check_arguments(fn, "ev", f"module '{label}'")
        if device is not None:
            _check_arguments(device, "ev, xp", f"module '{label}': the device implementation")
        check_flag(device_required, f"module '{label}': device_required")
        if device_required and device is None:
            raise ConfigurationError(f"module '{label}': device_required=True needs a device= implementation")
        if concurrency not in ("shared", "serial", "exclusive"):
            raise ConfigurationError(
                f"module '{label}': concurrency must be 'shared', 'serial' or 'exclusive', not {concurrency!r}"
            )
        if concurrency == "exclusive" and not resources:
            resources = ["python"]
        self.fn = fn
        self.label = _check_label(label, "module")
        self.consumes = _names(consumes, f"consumes of '{label}'")
        self.concurrency: Concurrency = concurrency
        self.resources = list(resources)
        #: the device implementation ``device(ev, xp)`` (``None``: host only)
        self.device = device
        self.device_required = device_required
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __call__(self, ev: Any) -> Any:
        """Calls the function directly (for tests)."""
        return self.fn(ev)

    def __repr__(self) -> str:
        return f"<{self.kind} '{self.label}' consumes={self.consumes}>"


class Producer(Module):
    kind = "producer"

    def __init__(self, *args: Any, produces: Sequence[str], remote: Remote | None = None, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.produces = _names(produces, f"produces of '{self.label}'")
        #: how the producer may run on a Dask worker (see evflow.remote)
        self.remote = remote
        if remote is not None and remote.fn is not None:
            _check_arguments(remote.fn, "ev", f"producer '{self.label}': the remote implementation")
        if remote is not None and self.device is not None:
            raise ConfigurationError(
                f"producer '{self.label}': remote= and device= cannot be combined (a batch runs either "
                "on a Dask worker or split between this process's host and device)"
            )
        if not self.produces:
            raise ConfigurationError(f"producer '{self.label}' declares no product (produces=[...])")
        for p in self.produces:
            _check_label(p, f"product of '{self.label}'")


class Filter(Module):
    kind = "filter"


class Analyzer(Module):
    kind = "analyzer"

    def __init__(self, *args: Any, after: Sequence[str] | None, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.after = None if after is None else _names(after, f"after of '{self.label}'")


class Path:
    """A named sequence of filters; the batch's selection narrows along it."""

    def __init__(
        self, name: str, filters: list[Filter], reorderable: bool, after: list[tuple[str, str]]
    ) -> None:
        self.name = name
        self.filters = filters
        self.reorderable = reorderable
        self.after = after

    def __repr__(self) -> str:
        kind = "reorderable path" if self.reorderable else "path"
        return f"<{kind} '{self.name}': {[f.label for f in self.filters]}>"


class Histogram:
    """A histogram filled per batch from a column (or a function of the
    events) and merged in batch order."""

    def __init__(
        self,
        name: str,
        columns: list[str],
        fill: Callable[[Events], Any] | None,
        consumes: list[str],
        hist: Any,
        bins: int | None,
        range: tuple[float, float] | None,
        edges: Sequence[float] | None,
        after: list[str] | None,
        weight: str | bool | None,
        label: str | None,
    ) -> None:
        self.name = name
        self.columns = columns
        self.fill = fill
        self.consumes = consumes
        self._template = hist
        self.bins = bins
        self.range = range
        self.edges = edges
        self.after = after
        self.weight = weight
        self.label = label

    def template(self) -> _hist.Hist:
        import hist

        if self._template is not None:
            h = self._template.copy()
            h.reset()
            if self.label is not None:
                h.axes[0].label = self.label  # a 1D template (checked when declared)
            return h
        label = self.label or self.name
        if self.edges is not None:
            axis = hist.axis.Variable(list(self.edges), name=self.name, label=label)
        else:
            assert self.bins is not None and self.range is not None
            axis = hist.axis.Regular(self.bins, self.range[0], self.range[1], name=self.name, label=label)
        storage = hist.storage.Weight() if self.weight else hist.storage.Double()
        return hist.Hist(axis, storage=storage, name=self.name, label=label)


__all__ = ["Analyzer", "Filter", "Histogram", "Module", "Path", "Producer"]
