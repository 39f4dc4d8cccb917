"""The process description: source, producers, filters, paths, analyzers,
histograms and outputs; :meth:`Process.run` hands it to the job runner
(``_job``)."""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, overload

from ._cores import available_cores
from ._modules import (
    Analyzer,
    Concurrency,
    F,
    Filter,
    Histogram,
    Module,
    Path,
    Producer,
    _check_label,
    _names,
    check_counts,
    check_flag,
    check_growth,
    check_progress,
    check_weight_storage,
)
from ._order_hint import after_label
from ._shared_work import producer_key
from .errors import ConfigurationError
from .output import ParquetOutput
from .source import Source

if TYPE_CHECKING:
    from ._runtime import Events
    from .device import Device
    from .remote import Remote
    from .result import Result


def _name_of(fn: Any) -> str:
    """The default label of a module: its function's name."""
    name = getattr(fn, "__name__", None)
    if not isinstance(name, str):
        raise ConfigurationError(f"a module needs a function fn(ev), not {fn!r}")
    return name


class Process:
    """An analysis: a source, Python modules, paths, histograms and outputs.

    Example::

        proc = ef.Process("zmumu")
        proc.source = ef.source.root("Zmumu.root", tree="events", step_size=50_000)

        @proc.filter(consumes=["Q1", "Q2"])
        def opposite_charge(ev):
            return ev.Q1 * ev.Q2 < 0  # flat branches are numpy arrays

        proc.path("selection", [opposite_charge])
        proc.histogram("M", bins=120, range=(60, 120), after="selection")
        result = proc.run(threads=2)
    """

    def __init__(self, name: str = "evflow", *, weight: str | None = None) -> None:
        if not isinstance(name, str):
            raise ConfigurationError(f"a process name is a string, not {name!r}")
        self.name = name
        self.source: Source | None = None
        self.weight = weight
        self.modules: dict[str, Module] = {}
        self.paths: dict[str, Path] = {}
        self.histograms: dict[str, Histogram] = {}
        self.outputs: list[tuple[ParquetOutput, list[str] | None]] = []

    @property
    def weight(self) -> str | None:
        """The column of per-event weights for the weighted cut-flow (and
        ``histogram(..., weight=True)``), or None."""
        return self._weight

    @weight.setter
    def weight(self, column: str | None) -> None:
        # Checked when set (also proc.weight = ...), not as a TypeError at run time.
        if column is not None and not isinstance(column, str):
            raise ConfigurationError(
                f"process '{self.name}': weight names a column (a string), not {column!r}"
            )
        self._weight = column

    def __repr__(self) -> str:
        return (
            f"<Process '{self.name}': {len(self.modules)} modules, {len(self.paths)} paths, "
            f"{len(self.histograms)} histograms, {len(self.outputs)} outputs>"
        )

    # -- modules -----------------------------------------------------------------

    def _register(self, m: Module) -> Module:
        """Adds ``m``; returns the module now under its label. A producer
        registered again under its label, computing the same from the same
        inputs into the same products (several analyses merged into one
        process, each adding the producer it needs), is the one there."""
        there = self.modules.get(m.label)
        if there is not None:
            if (
                isinstance(m, Producer)
                and isinstance(there, Producer)
                and m.produces == there.produces
                and producer_key(m) is not None
                and producer_key(m) == producer_key(there)
            ):
                return there
            raise ConfigurationError(f"module label '{m.label}' is used more than once")
        self.modules[m.label] = m
        return m

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
        remote: Remote | None = None,
        device: Callable[[Any, Any], Any] | None = None,
        device_required: bool = False,
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
        remote: Remote | None = None,
        device: Callable[[Any, Any], Any] | None = None,
        device_required: bool = False,
    ) -> Any:
        """Decorator: ``fn(ev)`` computes new columns for the events of a
        batch. Return the array (one product) or a dict ``{name: array}``,
        one entry per event. Products are computed on demand, only for events
        still selected by a path that reads them (through its filters, or the
        histograms, skims and analyzers following it). ``remote=ef.remote.Remote(...)`` lets
        batches run on a Dask worker holding resources (see evflow.remote).

        ``device=fn_device``: a device implementation ``fn_device(ev, xp)``
        computing the same with the array module ``xp`` (CuPy on a GPU);
        each batch is split between the two (``Process.run(device=...,
        device_split=...)``). ``device_required=True``: a job without a
        device fails instead of running it on the host."""

        def wrap(f: F) -> Producer:
            from .remote import Remote

            if remote is not None and not isinstance(remote, Remote):
                raise ConfigurationError(
                    f"producer '{label or _name_of(f)}': remote= takes an ef.remote.Remote(...), not {remote!r}"
                )
            p = Producer(
                f,
                label or _name_of(f),
                consumes,
                concurrency,
                resources,
                produces=produces or [_name_of(f)],
                remote=remote,
                device=device,
                device_required=device_required,
            )
            registered = self._register(p)
            assert isinstance(registered, Producer)
            return registered

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
        device: Callable[[Any, Any], Any] | None = None,
        device_required: bool = False,
    ) -> Any:
        """Decorator: ``fn(ev)`` returns a boolean mask, one entry per event;
        the events with ``False`` leave the path. Put filters on paths with
        :meth:`path`. ``device`` and ``device_required``: as for
        :meth:`producer` (the device implementation returns the mask)."""

        def wrap(f: F) -> Filter:
            m = Filter(
                f,
                label or _name_of(f),
                consumes,
                concurrency,
                resources,
                device=device,
                device_required=device_required,
            )
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
                label or _name_of(f),
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
        filters: Sequence[Filter | str] | Filter | str,
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
        check_flag(reorderable, f"path '{name}': reorderable")
        if isinstance(filters, Filter | str):
            filters = [filters]  # one filter
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
        if isinstance(after, tuple) and len(after) == 2 and all(isinstance(x, Filter | str) for x in after):
            after = [after]  # one pair
        for pair in after:
            if not (isinstance(pair, tuple | list) and len(pair) == 2):
                raise ConfigurationError(
                    f"path '{name}': after= takes pairs (later, earlier) of its filters, not {pair!r}"
                )
            a, b = (after_label(name, x, pair, fs, self.modules) for x in pair)
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
        process's ``weight``. ``label`` is the axis label (LaTeX allowed; with
        a 1D ``hist=`` template it replaces the template axis's label).
        """
        _check_label(name, "histogram")
        if name in self.histograms:
            raise ConfigurationError(f"histogram name '{name}' is used more than once")
        given = [
            k
            for k, v in (("bins=", bins), ("range=", range), ("edges=", edges), ("hist=", hist))
            if v is not None
        ]
        if given not in (["bins=", "range="], ["edges="], ["hist="]):
            raise ConfigurationError(
                f"histogram '{name}': give bins= and range=, edges=, or hist= (got {', '.join(given) or 'none'})"
            )
        if bins is not None and (isinstance(bins, bool) or not isinstance(bins, int) or bins < 1):
            raise ConfigurationError(f"histogram '{name}': bins= must be a positive integer, not {bins!r}")
        if range is not None:
            try:
                if isinstance(range, str | bytes):
                    raise TypeError
                lo, hi = (float(x) for x in range)
            except (TypeError, ValueError):
                raise ConfigurationError(
                    f"histogram '{name}': range= must be (low, high), two numbers, not {range!r}"
                ) from None
            if not (math.isfinite(lo) and math.isfinite(hi)):
                raise ConfigurationError(
                    f"histogram '{name}': range= must be two finite numbers, not {range!r} "
                    "(values outside the range go to the underflow/overflow bins)"
                )
            if not lo < hi:
                raise ConfigurationError(f"histogram '{name}': range= must have low < high, not {range!r}")
            range = (lo, hi)
        if edges is not None:
            try:
                e = [float(x) for x in edges]
            except (TypeError, ValueError):
                raise ConfigurationError(
                    f"histogram '{name}': edges= must be numbers, not {edges!r}"
                ) from None
            # NaN compares false: refused.
            if len(e) < 2 or not all(a < b for a, b in itertools.pairwise(e)):
                raise ConfigurationError(
                    f"histogram '{name}': edges= must be at least two strictly increasing numbers, not {edges!r}"
                )
        if hist is not None:
            check_growth(name, hist)
        if weight is not None and not isinstance(weight, str | bool):
            raise ConfigurationError(
                f"histogram '{name}': weight= is a column name, True (the process weight) or None, not {weight!r}"
            )
        if hist is not None and weight:
            check_weight_storage(name, hist)
        if label is not None and not isinstance(label, str):
            raise ConfigurationError(f"histogram '{name}': label= is a string, not {label!r}")
        if label is not None and hist is not None and getattr(hist, "ndim", 1) != 1:
            raise ConfigurationError(
                f"histogram '{name}': label= labels the axis of a 1D histogram; this hist= template has "
                f"{hist.ndim} axes: give each axis its label in the template (hist.axis...(label=...))"
            )
        if fill is not None and not callable(fill):
            raise ConfigurationError(f"histogram '{name}': fill= is a function fn(ev), not {fill!r}")
        if fill is not None and column is not None:
            raise ConfigurationError(f"histogram '{name}': give column= or fill=, not both")
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
            None if after is None else _names(after, f"after= of histogram '{name}'"),
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
        for there, _select in self.outputs:
            if os.path.abspath(there.path) == os.path.abspath(out.path):
                raise ConfigurationError(
                    f"two outputs write '{out.path}': give each skim a file of its own (one output "
                    "may select several paths: select=[...])"
                )
        sel = None if select is None else _names(select, f"select= of skim '{out.path}'")
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
        on_error: Literal["fail", "skip", "skip-chunk"] = "fail",
        trace: bool = False,
        filter_order: Literal["fixed", "adaptive", "hepframe"] = "adaptive",
        client: Any = None,
        processes: int | None = None,
        chunk_size: int | None = None,
        skip_bad_files: bool = False,
        device: str | Device | None = "auto",
        device_split: str = "adaptive",
    ) -> Result:
        """Runs the process to the end of its source; returns a
        :class:`~evflow.Result` (cut-flow, histograms, report, outputs).

        ``threads``: engine threads (default: every core this process may use:
        its CPU affinity, or ``EVFLOW_CORES``). ``events_in_flight``:
        batches processed at once (default ``threads + 2``); memory is
        bounded by it times the step size. ``progress``: ``True`` prints a
        progress line on stderr, or a function ``(batches, events)``
        (called every 0.2 s while the job runs, and last with the totals).
        ``on_error="skip"`` leaves out a batch whose module fails instead of
        stopping: it adds nothing to the cut-flow, the histograms or the
        skims (its fills and rows are held until every end-path module ran
        on it, then dropped), as if it were not in the input.
        ``filter_order`` chooses the engine's ordering policy of reorderable
        paths: ``"adaptive"`` (default; the order of least expected cost from
        measured costs and pass rates), ``"fixed"`` (the written order) or
        ``"hepframe"``. Which order ran, and why, is in
        ``result.cutflow[path].order``, ``.policy`` and ``.why``.

        ``device`` runs the device implementations of modules that have
        one: ``"auto"`` (a GPU through CuPy when there is one, else the host
        with a one-line notice), ``"cuda"`` (a GPU or an error),
        ``"emulated"`` (numpy on a worker thread, modelled costs; or an
        ``evflow.device.EmulatedDevice(...)`` with your own), ``"none"``
        (the host only). ``result.report["devices"]`` says which device ran
        what (``device`` None and no ``modules`` on the host only).
        ``device_split``: ``"adaptive"`` (measured, to the fastest split) or
        ``"fixed:P"`` (P % of each batch's events on the device).

        ``skip_bad_files=True`` leaves out input files that cannot be opened
        or lack a branch the job reads, before it starts, and a file whose
        data fail to be read during the job (a corrupt basket), as the job
        goes on (what its batches gave is taken back; the native Parquet
        reader runs the job again without it), and lists them in
        ``result.skipped_files`` (each with its error in the report's
        ``skipped_files``); without it such a file fails the job, named.

        ``client`` (a ``distributed.Client`` or a scheduler address) or
        ``processes=N`` (a local cluster of N worker processes) runs the job
        on Dask, one engine of ``threads`` threads (default 1) per worker, in
        chunks of about ``chunk_size`` events; ``on_error="skip-chunk"``
        applies there. Results are identical to a single-process run (see
        :mod:`evflow.distributed`).

        A first ``KeyboardInterrupt`` (Ctrl-C) stops reading: the batches in
        flight finish, outputs are closed complete for the events done, and
        :class:`~evflow.Interrupted` (a ``KeyboardInterrupt``) is raised with
        that partial result in ``.result``. A second one cancels the batches
        in flight and removes partial outputs.
        """
        check_counts(threads=threads, events_in_flight=events_in_flight)
        check_progress(progress)
        check_flag(trace, "trace")
        check_flag(skip_bad_files, "skip_bad_files")
        if client is not None or processes is not None:
            if trace:
                raise ConfigurationError("trace=True is not available on a distributed run")
            if device != "auto" or device_split != "adaptive":
                raise ConfigurationError("device= and device_split= apply to single-process runs")
            from .distributed import run as run_distributed

            return run_distributed(
                self,
                client=client,
                processes=processes,
                threads=threads,
                events_in_flight=events_in_flight,
                progress=progress,
                executor=executor,
                on_error=on_error,
                filter_order=filter_order,
                chunk_size=chunk_size,
                skip_bad_files=skip_bad_files,
            )
        if on_error == "skip-chunk" or chunk_size is not None:
            raise ConfigurationError(
                "on_error='skip-chunk' and chunk_size apply to distributed runs (give client= or processes=)"
            )
        from ._bad_files import leaving_out_unreadable
        from ._job import run_process
        from ._skim_checks import check_skims

        check_skims(self)  # before anything runs: nothing is written or deleted on a refusal
        return leaving_out_unreadable(
            lambda _left_out: run_process(
                self,
                threads=threads or available_cores(),
                events_in_flight=events_in_flight,
                progress=progress,
                executor=executor,
                on_error=on_error,
                trace=trace,
                filter_order=filter_order,
                device=device,
                device_split=device_split,
                skip_bad_files=skip_bad_files,
            ),
            skip_bad_files is True,
            self,
        )


__all__ = ["Analyzer", "Filter", "Histogram", "Module", "Path", "Process", "Producer"]
