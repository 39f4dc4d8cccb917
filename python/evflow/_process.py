"""The process description: source, producers, filters, paths, analyzers,
histograms and outputs, and how it becomes an engine job."""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from .errors import (
    ConfigurationError,
)
from .output import ParquetOutput
from .source import Source

if TYPE_CHECKING:
    import hist as _hist

    from ._runtime import Events
    from .result import Result

Concurrency = Literal["shared", "serial", "exclusive"]
F = TypeVar("F", bound=Callable[..., Any])

_LABEL = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


def _check_label(label: str, what: str) -> str:
    if not _LABEL.match(label):
        raise ConfigurationError(
            f"{what} name {label!r} is invalid: use letters, digits, '_', '.', '-' (not starting with a digit)"
        )
    return label


def _names(items: Iterable[Any], what: str) -> list[str]:
    if isinstance(items, str):
        return [items]
    out = []
    for x in items:
        if not isinstance(x, str):
            raise ConfigurationError(f"{what} must be names (strings), got {x!r}")
        out.append(x)
    return out


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
    ) -> None:
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
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __call__(self, ev: Any) -> Any:
        """Calls the function directly (for tests)."""
        return self.fn(ev)

    def __repr__(self) -> str:
        return f"<{self.kind} '{self.label}' consumes={self.consumes}>"


class Producer(Module):
    kind = "producer"

    def __init__(self, *args: Any, produces: Sequence[str], **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.produces = _names(produces, f"produces of '{self.label}'")
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
            return h
        label = self.label or self.name
        if self.edges is not None:
            axis = hist.axis.Variable(list(self.edges), name=self.name, label=label)
        else:
            assert self.bins is not None and self.range is not None
            axis = hist.axis.Regular(self.bins, self.range[0], self.range[1], name=self.name, label=label)
        storage = hist.storage.Weight() if self.weight else hist.storage.Double()
        return hist.Hist(axis, storage=storage, name=self.name, label=label)


class Process:
    """An analysis: a source, Python modules, paths, histograms and outputs.

    Example::

        proc = ef.Process("zmumu")
        proc.source = ef.source.root("Zmumu.root", tree="events", step_size=50_000)

        @proc.filter(consumes=["Q1", "Q2"])
        def opposite_charge(ev):
            return (ev.Q1 * ev.Q2 < 0).to_numpy()

        proc.path("selection", [opposite_charge])
        proc.histogram("M", bins=120, range=(60, 120), after="selection")
        result = proc.run(threads=2)
    """

    def __init__(self, name: str = "evflow", *, weight: str | None = None) -> None:
        self.name = name
        self.source: Source | None = None
        #: column of per-event weights for the weighted cut-flow (and default histogram weights)
        self.weight = weight
        self.modules: dict[str, Module] = {}
        self.paths: dict[str, Path] = {}
        self.histograms: dict[str, Histogram] = {}
        self.outputs: list[tuple[ParquetOutput, list[str] | None]] = []

    def __repr__(self) -> str:
        return (
            f"<Process '{self.name}': {len(self.modules)} modules, {len(self.paths)} paths, "
            f"{len(self.histograms)} histograms, {len(self.outputs)} outputs>"
        )

    # -- modules -----------------------------------------------------------------

    def _register(self, m: Module) -> None:
        if m.label in self.modules:
            raise ConfigurationError(f"module label '{m.label}' is used more than once")
        self.modules[m.label] = m

    @overload
    def producer(self, fn: F, /) -> Producer: ...
    @overload
    def producer(
        self,
        *,
        consumes: Sequence[str],
        produces: Sequence[str],
        label: str | None = None,
        concurrency: Concurrency = "shared",
        resources: Sequence[str] = (),
    ) -> Callable[[F], Producer]: ...

    def producer(
        self,
        fn: F | None = None,
        /,
        *,
        consumes: Sequence[str] = (),
        produces: Sequence[str] = (),
        label: str | None = None,
        concurrency: Concurrency = "shared",
        resources: Sequence[str] = (),
    ) -> Any:
        """Decorator: ``fn(ev)`` computes new columns for the events of a
        batch. Return the array (one product) or a dict ``{name: array}``,
        one entry per event. Products are computed on demand, only for events
        still selected by some path."""

        def wrap(f: F) -> Producer:
            p = Producer(
                f,
                label or f.__name__,
                consumes,
                concurrency,
                resources,
                produces=produces or [f.__name__],
            )
            self._register(p)
            return p

        return wrap(fn) if fn is not None else wrap

    def filter(
        self,
        fn: F | None = None,
        /,
        *,
        consumes: Sequence[str] = (),
        label: str | None = None,
        concurrency: Concurrency = "shared",
        resources: Sequence[str] = (),
    ) -> Any:
        """Decorator: ``fn(ev)`` returns a boolean mask, one entry per event;
        the events with ``False`` leave the path. Put filters on paths with
        :meth:`path`."""

        def wrap(f: F) -> Filter:
            m = Filter(f, label or f.__name__, consumes, concurrency, resources)
            self._register(m)
            return m

        return wrap(fn) if fn is not None else wrap

    def analyzer(
        self,
        fn: F | None = None,
        /,
        *,
        consumes: Sequence[str] = (),
        after: str | Sequence[str] | None = None,
        label: str | None = None,
        concurrency: Concurrency = "serial",
        resources: Sequence[str] = (),
    ) -> Any:
        """Decorator: ``fn(ev)`` sees the events accepted by the paths in
        ``after`` (every event when ``None``) and returns nothing. Analyzers
        are ``serial`` by default, so they may update plain Python state."""

        def wrap(f: F) -> Analyzer:
            m = Analyzer(
                f,
                label or f.__name__,
                consumes,
                concurrency,
                resources,
                after=[after] if isinstance(after, str) else after,
            )
            self._register(m)
            return m

        return wrap(fn) if fn is not None else wrap

    def path(
        self,
        name: str,
        filters: Sequence[Filter | str],
        *,
        reorderable: bool = False,
        after: Sequence[tuple[Filter | str, Filter | str]] = (),
    ) -> Path:
        """A path: the events of a batch pass its filters one after the
        other; each filter sees only the events the earlier ones kept.

        ``reorderable=True`` declares that the filters commute: the engine
        then chooses their order (``after=[(later, earlier), ...]`` keeps
        some pairs in order). The events a path accepts never depend on it.
        """
        _check_label(name, "path")
        if name in self.paths:
            raise ConfigurationError(f"path name '{name}' is used more than once")
        fs: list[Filter] = []
        for f in filters:
            m = self.modules.get(f) if isinstance(f, str) else f
            if not isinstance(m, Filter):
                what = f if isinstance(f, str) else repr(f)
                raise ConfigurationError(f"path '{name}': {what} is not a filter of this process")
            if self.modules.get(m.label) is not m:
                raise ConfigurationError(f"path '{name}': filter '{m.label}' belongs to another process")
            if m in fs:
                raise ConfigurationError(f"path '{name}' lists filter '{m.label}' twice")
            fs.append(m)
        pairs = []
        for later, earlier in after:
            a = later if isinstance(later, str) else later.label
            b = earlier if isinstance(earlier, str) else earlier.label
            if a not in [f.label for f in fs] or b not in [f.label for f in fs]:
                raise ConfigurationError(
                    f"path '{name}': after=({a!r}, {b!r}) names a filter not on the path"
                )
            pairs.append((a, b))
        p = Path(name, fs, reorderable, pairs)
        self.paths[name] = p
        return p

    def histogram(
        self,
        name: str,
        column: str | Sequence[str] | None = None,
        *,
        bins: int | None = None,
        range: tuple[float, float] | None = None,
        edges: Sequence[float] | None = None,
        hist: Any = None,
        fill: Callable[[Events], Any] | None = None,
        consumes: Sequence[str] = (),
        after: str | Sequence[str] | None = None,
        weight: str | bool | None = None,
        label: str | None = None,
    ) -> Histogram:
        """A histogram ``name`` of ``column`` (default: ``name``), filled for
        the events accepted by the paths in ``after`` (all events when
        ``None``). Jagged columns are flattened (one entry per object).

        Give ``bins`` and ``range`` (or ``edges``), or a ``hist.Hist`` as
        ``hist=`` (several axes: ``column=[x, y]``). ``fill=fn`` computes the
        values from the events instead (declare what it reads in
        ``consumes``). ``weight`` names a weight column; ``True`` uses the
        process's ``weight``. ``label`` is the axis label (LaTeX allowed).
        """
        _check_label(name, "histogram")
        if name in self.histograms:
            raise ConfigurationError(f"histogram name '{name}' is used more than once")
        if hist is None and edges is None and (bins is None or range is None):
            raise ConfigurationError(f"histogram '{name}': give bins= and range=, edges=, or hist=")
        if fill is not None:
            columns: list[str] = []
            reads = _names(consumes, f"consumes of histogram '{name}'")
            if not reads:
                raise ConfigurationError(f"histogram '{name}': fill= needs consumes=[...] (what it reads)")
        else:
            columns = _names(column if column is not None else name, f"columns of histogram '{name}'")
            reads = list(columns)
        h = Histogram(
            name,
            columns,
            fill,
            reads,
            hist,
            bins,
            range,
            edges,
            [after] if isinstance(after, str) else (list(after) if after is not None else None),
            weight,
            label,
        )
        self.histograms[name] = h
        return h

    def output(self, out: ParquetOutput, *, select: str | Sequence[str] | None = None) -> ParquetOutput:
        """Writes ``out`` (e.g. ``ef.output.parquet(...)``) for the events
        accepted by any path in ``select`` (every event when ``None``)."""
        if not isinstance(out, ParquetOutput):
            raise ConfigurationError(f"unknown output {out!r}; use ef.output.parquet(...)")
        sel = [select] if isinstance(select, str) else (list(select) if select is not None else None)
        self.outputs.append((out, sel))
        return out

    # -- running -------------------------------------------------------------------

    def run(
        self,
        threads: int | None = None,
        *,
        events_in_flight: int | None = None,
        progress: bool | Callable[[int, int], None] = False,
        executor: Literal["threaded", "sequential"] = "threaded",
        on_error: Literal["fail", "skip"] = "fail",
        trace: bool = False,
        filter_order: Literal["fixed", "adaptive", "hepframe"] | None = None,
    ) -> Result:
        """Runs the process to the end of its source; returns a
        :class:`~evflow.Result` (cut-flow, histograms, report, outputs).

        ``threads``: engine threads (default: every core). ``events_in_flight``:
        batches processed at once (default ``threads + 2``); memory is
        bounded by it times the step size. ``progress``: ``True`` prints a
        progress line on stderr, or a function ``(batches, events)``.
        ``on_error="skip"`` leaves out a batch whose module fails instead of
        stopping (its events are not in the cut-flow; histograms filled by
        other analyzers of that batch before the failure stay filled).
        ``filter_order`` chooses the engine's ordering policy of reorderable
        paths (``None``: the engine's default, the written order).
        """
        from ._job import run_process

        return run_process(
            self,
            threads=threads or os.cpu_count() or 1,
            events_in_flight=events_in_flight,
            progress=progress,
            executor=executor,
            on_error=on_error,
            trace=trace,
            filter_order=filter_order,
        )


class _Progress:
    """A one-line progress display on stderr."""

    def __init__(self, total: int | None) -> None:
        self.total = total
        self.start = time.perf_counter()
        self.lock = threading.Lock()

    def __call__(self, batches: int, events: int) -> None:
        dt = max(time.perf_counter() - self.start, 1e-9)
        rate = events / dt
        if self.total:
            frac = min(events / self.total, 1.0)
            bar = "#" * int(30 * frac)
            text = f"\r[{bar:<30}] {frac:6.1%}  {events}/{self.total} events  {rate:,.0f} ev/s"
        else:
            text = f"\r{events} events  {batches} batches  {rate:,.0f} ev/s"
        sys.stderr.write(text)
        sys.stderr.flush()

    def close(self) -> None:
        sys.stderr.write("\n")
        sys.stderr.flush()


__all__ = ["Analyzer", "Filter", "Histogram", "Module", "Path", "Process", "Producer"]
