"""What runs per batch: the view a module sees (:class:`Events`), and the
*runners* the native engine calls for each module and batch.

A batch's columns are read once, for the whole batch. Each path keeps the
indices of the events still on it (``None`` = every event) in the engine's
per-batch state; a runner receives the selection it applies to, slices the
columns it reads lazily, calls the user function, checks what it returned and
hands the result back to the engine.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import awkward as ak
import numpy as np

from .errors import ModuleOutputError

if TYPE_CHECKING:
    from ._ordered import Commit

Selection = np.ndarray | None


class BatchData:
    """One batch as read from the input: every requested column over the
    batch's events, and where the batch comes from."""

    __slots__ = (
        "columns",
        "entry_start",
        "entry_stop",
        "file",
        "first_batch",
        "index",
        "n",
        "weight_total",
        "weights",
        "where",
    )

    def __init__(
        self,
        columns: dict[str, Any],
        n: int,
        *,
        file: str = "",
        entry_start: int = 0,
        entry_stop: int | None = None,
        where: str | None = None,
        weight: str | None = None,
    ) -> None:
        self.columns = {k: _read_only(_flat_to_numpy(v)) for k, v in columns.items()}
        self.n = int(n)
        self.file = file
        self.entry_start = int(entry_start)
        self.entry_stop = int(entry_stop if entry_stop is not None else entry_start + n)
        self.where = where or f"file '{file}', entries {self.entry_start}-{self.entry_stop - 1}"
        #: set by the engine: the batch's number in its job
        self.index = -1
        #: the number, in the whole job, of the job's first batch (a chunk of
        #: a distributed run is a job of its own)
        self.first_batch = 0
        if weight is not None:
            values = columns[weight]
            if isinstance(values, ak.Array) and values.ndim != 1:
                raise ValueError(
                    f"the process weight '{weight}' is of type {values.type.content}: a weight is one "
                    "number per event (weight objects in histograms: histogram(..., weight=...))"
                )
            w = _read_only(np.asarray(ak.to_numpy(values), dtype=np.float64))
            bad = ~np.isfinite(w)
            if bad.any():
                # One NaN weight makes every weighted count of the cut-flow
                # and every histogram bin it reaches NaN, silently.
                raise ValueError(
                    f"the process weight '{weight}' is not a finite number for {int(bad.sum())} of the "
                    f"{len(w)} events of {self.where} (first: {w[bad][0]}, entry "
                    f"{self.entry_start + int(np.argmax(bad))}); select the events or replace the weights first"
                )
            self.weights: np.ndarray | None = w
            self.weight_total = float(w.sum())
        else:
            self.weights = None
            self.weight_total = float(self.n)


def _read_only(v: Any) -> Any:
    """Marks a numpy array read-only: every module of a batch sees the same
    column (or product), so an in-place change by one would silently change
    what the others see; numpy refuses it instead."""
    if isinstance(v, np.ndarray):
        v.flags.writeable = False
    return v


def _flat_to_numpy(v: Any) -> Any:
    """Flat numeric columns become numpy arrays (zero-copy): numpy kernels
    release the GIL, so batches on several threads really run in parallel.
    Jagged and other structured columns stay awkward arrays."""
    if isinstance(v, ak.Array) and isinstance(v.layout, ak.contents.NumpyArray) and v.layout.data.ndim == 1:
        return v.layout.data if isinstance(v.layout.data, np.ndarray) else ak.to_numpy(v)
    return v


class BatchInfo:
    """Where the batch a module is looking at comes from."""

    __slots__ = ("entry_start", "entry_stop", "file", "index", "selected")

    def __init__(self, data: BatchData, selected: int) -> None:
        self.index = data.first_batch + data.index
        self.file = data.file
        self.entry_start = data.entry_start
        self.entry_stop = data.entry_stop
        self.selected = selected

    def __repr__(self) -> str:
        return (
            f"BatchInfo(index={self.index}, file={self.file!r}, entries={self.entry_start}-"
            f"{self.entry_stop - 1}, selected={self.selected})"
        )


def align(value: Any, have: Selection, want: Selection) -> Any:
    """``value`` is aligned with the events ``have``; returns it for ``want``
    (a subset of ``have``; ``None`` = every event)."""
    if have is None:
        return value if want is None else value[want]
    if want is None:
        raise RuntimeError("internal error: a product computed on part of a batch is read for all of it")
    if len(want) == len(have):
        return value
    return value[np.searchsorted(have, want)]


class ItemAttributes:
    """Reads ``obj.name`` as ``obj["name"]`` (a missing name is an
    ``AttributeError`` with the ``KeyError``'s message)."""

    __slots__ = ()

    def __getitem__(self, name: str) -> Any:
        raise NotImplementedError

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError as e:
            raise AttributeError(e.args[0]) from None


class Events(ItemAttributes):
    """The events of one batch that a module sees: the selected events of the
    columns and products it declared in ``consumes``.

    Access a column as ``ev.Muon_pt`` or ``ev["Muon_pt"]``; ``len(ev)`` is the
    number of events. Flat numeric columns are numpy arrays, collections
    (``Muon_pt``) jagged awkward arrays with one list per event; products
    are what their producer returned.
    """

    __slots__ = ("_cache", "_data", "_inputs", "_label", "_n", "_names", "_sel", "_weights")

    def __init__(
        self,
        label: str,
        data: BatchData,
        sel: Selection,
        names: frozenset[str],
        inputs: dict[str, tuple[Selection, Any]],
    ) -> None:
        self._label = label
        self._data = data
        self._sel = sel
        self._names = names
        self._inputs = inputs
        self._n = data.n if sel is None else len(sel)
        self._cache: dict[str, Any] = {}
        self._weights: np.ndarray | None = None

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, name: str) -> Any:
        try:
            return self._cache[name]
        except KeyError:
            pass
        if name in self._inputs:
            have, value = self._inputs[name]
            out = align(value, have, self._sel)
        elif name in self._names:
            col = self._data.columns[name]
            out = col if self._sel is None else col[self._sel]
        else:
            hint = difflib.get_close_matches(name, sorted(self._names), n=1)
            extra = f"; did you mean '{hint[0]}'?" if hint else ""
            raise KeyError(
                f"module '{self._label}' read '{name}', which it did not declare in consumes="
                f"{sorted(self._names)}{extra}"
            )
        self._cache[name] = out
        return out

    def __contains__(self, name: str) -> bool:
        return name in self._names

    def __dir__(self) -> list[str]:
        return [*sorted(self._names), "fields", "info", "weight", "zip"]

    def __repr__(self) -> str:
        return f"<Events of module '{self._label}': {self._n} events, fields {sorted(self._names)}>"

    @property
    def fields(self) -> list[str]:
        """The names this module may read."""
        return sorted(self._names)

    @property
    def info(self) -> BatchInfo:
        """Batch index, file and entry range (for messages and debugging)."""
        return BatchInfo(self._data, self._n)

    @property
    def weight(self) -> np.ndarray:
        """Per-event weights (the process's ``weight`` column; ones if none)."""
        if self._weights is None:
            w = self._data.weights
            if w is None:
                self._weights = np.ones(self._n)
            else:
                self._weights = w if self._sel is None else w[self._sel]
        return self._weights

    def zip(self, prefix: str, *, with_name: str | None = None) -> ak.Array:
        """Zips the consumed columns ``prefix_*`` into one collection:
        ``ev.zip("Muon")`` gives records with fields ``pt``, ``eta``, ... for
        every consumed ``Muon_pt``, ``Muon_eta``, ..."""
        start = prefix + "_"
        fields = {n[len(start) :]: self[n] for n in sorted(self._names) if n.startswith(start)}
        if not fields:
            raise KeyError(f"module '{self._label}' consumes no column starting with '{start}'")
        return ak.zip(fields, with_name=with_name)


def check_array(label: str, what: str, value: Any, n: int) -> Any:
    """Checks that a module returned one entry per event, of a numeric,
    boolean or record type; returns it (lists are refused)."""
    if isinstance(value, ak.Array):
        if len(value) != n:
            raise ModuleOutputError(
                f"{label} returned {what} with {len(value)} entries for a batch of {n} events "
                "(one entry per event is needed)"
            )
        return value
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            raise ModuleOutputError(f"{label} returned {what} as a scalar; one entry per event is needed")
        if len(value) != n:
            raise ModuleOutputError(
                f"{label} returned {what} with {len(value)} entries for a batch of {n} events "
                "(one entry per event is needed)"
            )
        if value.dtype.kind not in "biufc":
            raise ModuleOutputError(
                f"{label} returned {what} of dtype {value.dtype}; numeric or boolean arrays are needed"
            )
        return _read_only(value)
    kind = type(value).__name__
    raise ModuleOutputError(
        f"{label} returned {what} as a {kind}; return a numpy or awkward array with one entry per event"
    )


def as_mask(label: str, value: Any, n: int) -> np.ndarray:
    """The boolean mask a filter returned, as a 1-D numpy bool array of ``n``."""
    if isinstance(value, ak.Array):
        if value.ndim != 1:
            raise ModuleOutputError(
                f"{label} returned a jagged (nested) mask of type {value.type}; a filter returns one "
                "boolean per event (reduce collections with ak.any / ak.all / ak.num first)"
            )
        try:
            value = ak.to_numpy(value, allow_missing=False)
        except ValueError as e:
            missing = int(ak.sum(ak.is_none(value)))
            if missing:
                raise ModuleOutputError(_missing_in_mask(label, missing, n)) from None
            raise ModuleOutputError(f"{label} returned a mask of type {value.type}: {e}") from None
    elif np.ma.isMaskedArray(value):
        if np.ma.count_masked(value):
            raise ModuleOutputError(_missing_in_mask(label, int(np.ma.count_masked(value)), n))
        value = np.ma.getdata(value)
    elif not isinstance(value, np.ndarray):
        kind = type(value).__name__
        raise ModuleOutputError(
            f"{label} returned a {kind}; a filter returns a boolean numpy or awkward array, one entry per event"
        )
    if value.ndim != 1:
        raise ModuleOutputError(
            f"{label} returned a mask of shape {value.shape}; one boolean per event is needed"
        )
    if value.dtype != np.bool_:
        raise ModuleOutputError(
            f"{label} returned a mask of dtype {value.dtype}; a filter returns booleans "
            "(for example ev.x > 3), one per event"
        )
    if len(value) != n:
        raise ModuleOutputError(f"{label} returned a mask of {len(value)} entries for a batch of {n} events")
    return value


def _missing_in_mask(label: str, missing: int, n: int) -> str:
    return (
        f"{label} returned a mask with {missing} missing values (None) among {n} events; a filter "
        "decides every event: fill them, e.g. ak.fill_none(mask, False)"
    )


def union(sels: Sequence[np.ndarray]) -> np.ndarray:
    """Sorted union of index arrays."""
    out = sels[0]
    for s in sels[1:]:
        out = np.union1d(out, s)
    return out


def intersect(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.intersect1d(a, b, assume_unique=True)


#: Events of a sampled batch on which every filter of a sampled reorderable
#: path also decides, event by event (the planner's joint statistics).
PROBE_EVENTS = 256


#: Events of the probe a batch runs through every filter before the
#: planner's first decision, which rests on its timings alone: enough that a
#: Python call's fixed cost (tens of µs) is small against the per-event
#: cost of even a cheap cut, so that costs per event are not flattened.
FIRST_PROBE_EVENTS = 4096
#: The first probe calls each filter on this many chunks of it, and before
#: each on ``FIRST_PROBE_FEW`` events, which measures the call's fixed cost;
#: a chunk that took this many times the least per event was slowed by other
#: processes and is left out.
FIRST_PROBE_CHUNKS = 4
FIRST_PROBE_FEW = 32
FIRST_PROBE_SLOWER = 1.2


def probe_indices(n: int, size: int = PROBE_EVENTS) -> np.ndarray:
    """The subsample of a batch of ``n`` events whose per-event decisions the
    planner measures: at most ``size`` events spread evenly over it."""
    if n <= size:
        return np.arange(n, dtype=np.int64)
    return np.unique(np.linspace(0, n - 1, size).astype(np.int64))


def _inputs(
    product_names: Sequence[str], raw: list[tuple[Selection, Any]]
) -> dict[str, tuple[Selection, Any]]:
    return dict(zip(product_names, raw, strict=True))


def producer_runner(
    label: str,
    fn: Callable[[Events], Any],
    names: frozenset[str],
    products: Sequence[str],
    produces: Sequence[str],
) -> Callable[[BatchData, Selection, list[tuple[Selection, Any]]], list[Any]]:
    what = f"producer '{label}'"

    def run(data: BatchData, sel: Selection, raw: list[tuple[Selection, Any]]) -> list[Any]:
        n = data.n if sel is None else len(sel)
        if n == 0:
            return [None] * len(produces)
        ev = Events(label, data, sel, names, _inputs(products, raw))
        values = producer_values(what, fn(ev), produces)
        return [check_array(what, f"'{p}'", v, n) for p, v in zip(produces, values, strict=True)]

    return run


def producer_values(what: str, out: Any, produces: Sequence[str]) -> list[Any]:
    """What a producer returned, as one value per declared product."""
    if isinstance(out, dict):
        missing = [p for p in produces if p not in out]
        extra = [k for k in out if k not in produces]
        if missing or extra:
            raise ModuleOutputError(
                f"{what} returned keys {sorted(out)}, but declares produces={list(produces)}"
            )
        return [out[p] for p in produces]
    if len(produces) == 1:
        return [out]
    if isinstance(out, tuple | list) and len(out) == len(produces):
        return list(out)
    raise ModuleOutputError(
        f"{what} declares produces={list(produces)}: return a dict of them, or a tuple in that order"
    )


def filter_runner(
    label: str, fn: Callable[[Events], Any], names: frozenset[str], products: Sequence[str]
) -> Callable[[BatchData, Selection, list[tuple[Selection, Any]]], tuple[Selection, int, float, float]]:
    what = f"filter '{label}'"

    def run(
        data: BatchData, sel: Selection, raw: list[tuple[Selection, Any]]
    ) -> tuple[Selection, int, float, float]:
        n = data.n if sel is None else len(sel)
        ev = Events(label, data, sel, names, _inputs(products, raw) if raw else {})
        return narrow(data, sel, as_mask(what, fn(ev), n))

    run.probe = filter_probe(label, fn, names, products)  # type: ignore[attr-defined]
    return run


def filter_probe(
    label: str, fn: Callable[[Events], Any], names: frozenset[str], products: Sequence[str]
) -> Callable[[BatchData, np.ndarray, list[tuple[Selection, Any]]], tuple[list[bool], list[bool]]]:
    """A filter's ``probe(data, events, inputs)``, with which the engine
    learns the joint pass rates of a reorderable path's filters: ``fn``'s
    decisions on ``events`` (a subsample of a sampled batch) as (decided,
    passed) per event; an event is decided when every input covers it."""
    what = f"filter '{label}'"

    def probe(
        data: BatchData, events: np.ndarray, raw: list[tuple[Selection, Any]]
    ) -> tuple[list[bool], list[bool]]:
        covered = events
        for have, _ in raw:
            if have is not None:
                covered = np.intersect1d(covered, have, assume_unique=True)
        known = np.isin(events, covered)
        passed = np.zeros(len(events), dtype=bool)
        if len(covered):
            ev = Events(label, data, covered, names, _inputs(products, raw) if raw else {})
            passed[known] = as_mask(what, fn(ev), len(covered))
        return known.tolist(), passed.tolist()

    return probe


def narrow(data: BatchData, sel: Selection, mask: np.ndarray) -> tuple[Selection, int, float, float]:
    """A filter's result for the engine: the new selection, events passed,
    weights seen and passed."""
    n = len(mask)
    new = (None if mask.all() else np.flatnonzero(mask)) if sel is None else sel[mask]
    passed = n if new is None else len(new)
    w = data.weights
    if w is None:
        return new, passed, float(n), float(passed)
    w_seen = data.weight_total if sel is None else float(w[sel].sum())
    w_passed = w_seen if passed == n else float(w[new].sum())
    return new, passed, w_seen, w_passed


def analyzer_runner(
    label: str,
    fn: Callable[[Events], Any],
    names: frozenset[str],
    products: Sequence[str],
    commit: Commit,
) -> Callable[[BatchData, int, Selection, list[tuple[Selection, Any]]], None]:
    """An analyzer on the end path; it tells ``commit`` when it ran on a
    batch (the batch's parts are held until every end module ran)."""
    commit.end_module()

    def run(data: BatchData, index: int, sel: Selection, raw: list[tuple[Selection, Any]]) -> None:
        n = data.n if sel is None else len(sel)
        if n:
            fn(Events(label, data, sel, names, _inputs(products, raw)))
        commit.add(None, index, None)

    return run


class Numbered:
    """A reader whose batches are numbered from ``first_batch`` in
    ``ev.info.index``."""

    def __init__(self, reader: Any, first_batch: int) -> None:
        self.reader = reader
        self.first_batch = first_batch

    def next_batch(self) -> BatchData | None:
        data = self.reader.next_batch()
        if data is not None:
            data.first_batch = self.first_batch
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self.reader, name)


def numbered_build(build: Callable[..., BatchData], first_batch: int) -> Callable[..., BatchData]:
    """The native Parquet reader's batch builder, numbering from ``first_batch``."""
    if not first_batch:
        return build

    def numbered(*args: Any) -> BatchData:
        data = build(*args)
        data.first_batch = first_batch
        return data

    numbered.__dict__.update(build.__dict__)  # evflow_reading: the reader's balancer
    return numbered
