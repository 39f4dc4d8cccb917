"""Where batches come from: ROOT files (uproot), Parquet files (native Rust
reader, or pyarrow), and a synthetic generator.

Each source reads only the columns some module, histogram, skim or the
cut-flow weight needs, in batches of about ``step_size`` events. The engine
calls the source one batch at a time, while other batches are processed.

Example::

    proc.source = ef.source.root("Zmumu.root", tree="events", step_size=50_000)
    proc.source = ef.source.parquet(["a.parquet", "b.parquet"], step_size=100_000)
    proc.source = ef.source.synthetic(1_000_000, step_size=100_000, seed=1)
"""

from __future__ import annotations

import difflib
import os
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from .errors import ConfigurationError, InputError, MissingBranchError, MissingFileError, MissingTreeError

if TYPE_CHECKING:
    from ._runtime import BatchData

PathLike = str | os.PathLike[str]

__all__ = ["ParquetSource", "RootSource", "Source", "SyntheticSource", "auto", "parquet", "root", "synthetic"]


def _files(files: PathLike | Iterable[PathLike]) -> list[str]:
    out = [os.fspath(files)] if isinstance(files, str | os.PathLike) else [os.fspath(f) for f in files]
    if not out:
        raise ConfigurationError("the source has no input file")
    return out


def _missing(column: str, available: Iterable[str], where: str) -> MissingBranchError:
    hint = difflib.get_close_matches(column, list(available), n=1)
    extra = f"; did you mean '{hint[0]}'?" if hint else ""
    return MissingBranchError(f"branch '{column}' not found in {where}{extra}")


class Source(ABC):
    """Base class of sources. A subclass provides :meth:`columns`,
    :meth:`reader` and :meth:`describe`; the native Parquet source is set up
    by the process itself."""

    step_size: int
    max_events: int | None

    @abstractmethod
    def check(self, columns: Sequence[str]) -> None:
        """Raises a clear :class:`~evflow.errors.InputError` when an input is
        missing or lacks one of ``columns``."""

    @abstractmethod
    def reader(self, columns: Sequence[str], weight: str | None) -> Any:
        """An object with ``next_batch() -> BatchData | None``."""

    def total_events(self) -> int | None:
        """Number of events the source will deliver, if known."""
        return None

    @abstractmethod
    def describe(self) -> str: ...


class _IterReader:
    """Adapts an iterator of BatchData to ``next_batch()``."""

    def __init__(self, it: Iterator[BatchData]) -> None:
        self._it = it

    def next_batch(self) -> BatchData | None:
        return next(self._it, None)


def _cluster_steps(boundaries: Sequence[int], step: int, start: int, stop: int) -> list[tuple[int, int]]:
    """Groups whole clusters ``[b_i, b_i+1)`` into steps of about ``step``
    entries (inside ``[start, stop)``); a cluster much larger than ``step``
    is split into equal parts."""
    cuts = sorted({b for b in boundaries if start < b < stop} | {start, stop})
    steps: list[tuple[int, int]] = []
    lo = cuts[0]
    for hi in cuts[1:]:
        if hi - lo >= step:
            steps.append((lo, hi))
            lo = hi
    if lo < stop:
        steps.append((lo, stop))
    out: list[tuple[int, int]] = []
    for a, b in steps:
        parts = max(1, round((b - a) / step))
        edges = [a + (b - a) * i // parts for i in range(parts + 1)]
        out.extend((edges[i], edges[i + 1]) for i in range(parts) if edges[i + 1] > edges[i])
    return out


class RootSource(Source):
    """Batches of a TTree in one or more ROOT files, read with uproot.

    Steps follow the tree's clusters (the entry ranges whose baskets all
    branches share), so each basket is decompressed once.
    """

    def __init__(
        self,
        files: PathLike | Iterable[PathLike],
        tree: str = "Events",
        step_size: int = 100_000,
        max_events: int | None = None,
    ) -> None:
        if step_size <= 0:
            raise ConfigurationError(f"step_size must be positive, not {step_size}")
        self.files = _files(files)
        self.tree = tree
        self.step_size = int(step_size)
        self.max_events = max_events

    def _open(self, path: str) -> Any:
        import uproot

        if not os.path.exists(path):
            raise MissingFileError(f"ROOT file '{path}' does not exist")
        try:
            f = uproot.open(path)
        except Exception as e:
            raise InputError(f"cannot open ROOT file '{path}': {type(e).__name__}: {e}") from e
        try:
            t = f[self.tree]
        except Exception:
            trees = sorted({k.split(";")[0] for k, v in f.classnames().items() if v.startswith("TTree")})
            raise MissingTreeError(
                f"file '{path}' has no tree '{self.tree}' (trees: {', '.join(trees) or 'none'})"
            ) from None
        if not hasattr(t, "num_entries") or not hasattr(t, "keys"):
            raise MissingTreeError(f"'{self.tree}' in file '{path}' is a {type(t).__name__}, not a TTree")
        return t

    def check(self, columns: Sequence[str]) -> None:
        for path in self.files:
            t = self._open(path)
            keys = set(t.keys(recursive=True))
            for c in columns:
                if c not in keys:
                    raise _missing(c, keys, f"tree '{self.tree}' of file '{path}'")

    def total_events(self) -> int | None:
        total = 0
        for path in self.files:
            total += self._open(path).num_entries
        return total if self.max_events is None else min(total, self.max_events)

    def _batches(self, columns: Sequence[str], weight: str | None) -> Iterator[BatchData]:
        from ._runtime import BatchData

        left = self.max_events
        for path in self.files:
            if left is not None and left <= 0:
                return
            t = self._open(path)
            n = t.num_entries
            stop = n if left is None else min(n, left)
            try:
                bounds = list(t.common_entry_offsets())
            except Exception:
                bounds = [0, n]
            for a, b in _cluster_steps(bounds, self.step_size, 0, stop):
                where = f"file '{path}', tree '{self.tree}', entries {a}-{b - 1}"
                try:
                    cols = t.arrays(list(columns), entry_start=a, entry_stop=b, library="ak", how=dict)
                except Exception as e:
                    raise InputError(f"reading {where}: {type(e).__name__}: {e}") from e
                yield BatchData(
                    cols, b - a, file=path, entry_start=a, entry_stop=b, where=where, weight=weight
                )
            if left is not None:
                left -= stop

    def reader(self, columns: Sequence[str], weight: str | None) -> Any:
        return _IterReader(self._batches(columns, weight))

    def describe(self) -> str:
        files = self.files[0] if len(self.files) == 1 else f"{len(self.files)} files"
        return f"ROOT {files} (tree '{self.tree}')"


class ParquetSource(Source):
    """Batches of Parquet files. ``engine="native"`` (default) decodes with
    evflow's Rust reader on its own thread, without the GIL, a few batches
    ahead; ``engine="pyarrow"`` reads with pyarrow (any Arrow type)."""

    def __init__(
        self,
        files: PathLike | Iterable[PathLike],
        step_size: int = 100_000,
        max_events: int | None = None,
        engine: str = "native",
        prefetch: int = 2,
    ) -> None:
        if step_size <= 0:
            raise ConfigurationError(f"step_size must be positive, not {step_size}")
        if engine not in ("native", "pyarrow"):
            raise ConfigurationError(f"engine must be 'native' or 'pyarrow', not {engine!r}")
        self.files = _files(files)
        self.step_size = int(step_size)
        self.max_events = max_events
        self.engine = engine
        self.prefetch = prefetch

    def _metadata(self, path: str) -> dict[str, Any]:
        from . import _evflow

        if not os.path.exists(path):
            raise MissingFileError(f"Parquet file '{path}' does not exist")
        try:
            return _evflow.parquet_metadata(path)
        except OSError as e:
            raise InputError(str(e)) from e

    def check(self, columns: Sequence[str]) -> None:
        for path in self.files:
            have = self._metadata(path)["columns"]
            for c in columns:
                if c not in have:
                    raise _missing(c, have, f"Parquet file '{path}'")

    def total_events(self) -> int | None:
        total = sum(int(self._metadata(p)["num_rows"]) for p in self.files)
        return total if self.max_events is None else min(total, self.max_events)

    def build(self, weight: str | None) -> Any:
        """The callback the native reader calls with decoded buffers."""
        import awkward as ak
        import numpy as np

        from ._runtime import BatchData

        def content(tree: tuple[Any, ...]) -> Any:
            if tree[0] == "flat":
                return ak.contents.NumpyArray(np.frombuffer(tree[2], dtype=tree[1]))
            offsets = np.frombuffer(tree[2], dtype=tree[1])
            index = ak.index.Index32(offsets) if tree[1] == "<i4" else ak.index.Index64(offsets)
            return ak.contents.ListOffsetArray(index, content(tree[3]))

        files = self.files

        def build(file: int, start: int, stop: int, cols: list[tuple[str, tuple[Any, ...]]]) -> BatchData:
            arrays = {name: ak.Array(content(tree)) for name, tree in cols}
            return BatchData(
                arrays, stop - start, file=files[file], entry_start=start, entry_stop=stop, weight=weight
            )

        return build

    def _pyarrow_batches(self, columns: Sequence[str], weight: str | None) -> Iterator[BatchData]:
        import awkward as ak
        import pyarrow.parquet as pq

        from ._runtime import BatchData

        left = self.max_events
        for path in self.files:
            start = 0
            for rb in pq.ParquetFile(path).iter_batches(batch_size=self.step_size, columns=list(columns)):
                if left is not None:
                    if left <= 0:
                        return
                    if rb.num_rows > left:
                        rb = rb.slice(0, left)
                    left -= rb.num_rows
                arrays = {c: ak.from_arrow(rb.column(c)) for c in columns}
                n = rb.num_rows
                yield BatchData(arrays, n, file=path, entry_start=start, entry_stop=start + n, weight=weight)
                start += n

    def reader(self, columns: Sequence[str], weight: str | None) -> Any:
        return _IterReader(self._pyarrow_batches(columns, weight))

    def describe(self) -> str:
        files = self.files[0] if len(self.files) == 1 else f"{len(self.files)} files"
        return f"Parquet {files}"


class SyntheticSource(Source):
    """Generated events with a CMS NanoAOD-like schema, deterministic for a
    seed (batch ``i`` uses the random stream ``(seed, i)``, so the events do
    not depend on the thread count).

    Columns: ``run``, ``event``, ``nMuon``, ``Muon_pt``, ``Muon_eta``,
    ``Muon_phi``, ``Muon_mass``, ``Muon_charge``, ``Muon_pfRelIso04_all``,
    ``nJet``, ``Jet_pt``, ``Jet_eta``, ``Jet_phi``, ``Jet_mass``,
    ``Jet_btagCSVV2``, ``MET_pt``, ``MET_phi``, ``genWeight``. About half the
    events hold a Z→μμ-like muon pair.
    """

    COLUMNS = (
        "run",
        "event",
        "nMuon",
        "Muon_pt",
        "Muon_eta",
        "Muon_phi",
        "Muon_mass",
        "Muon_charge",
        "Muon_pfRelIso04_all",
        "nJet",
        "Jet_pt",
        "Jet_eta",
        "Jet_phi",
        "Jet_mass",
        "Jet_btagCSVV2",
        "MET_pt",
        "MET_phi",
        "genWeight",
    )

    def __init__(self, events: int, step_size: int = 100_000, seed: int = 1) -> None:
        if step_size <= 0 or events < 0:
            raise ConfigurationError("events must be >= 0 and step_size > 0")
        self.events = int(events)
        self.step_size = int(step_size)
        self.max_events = None
        self.seed = int(seed)

    def check(self, columns: Sequence[str]) -> None:
        for c in columns:
            if c not in self.COLUMNS:
                raise _missing(c, self.COLUMNS, "the synthetic source")

    def total_events(self) -> int | None:
        return self.events

    def generate(self, index: int, start: int, n: int) -> dict[str, Any]:
        """Every column of batch ``index`` (events ``start`` to ``start+n``)."""
        import awkward as ak
        import numpy as np

        rng = np.random.default_rng([self.seed, index])

        def jagged(counts: np.ndarray, values: np.ndarray) -> ak.Array:
            return ak.unflatten(values, counts)

        n_mu = rng.poisson(1.2, n).astype(np.int32)
        z = rng.random(n) < 0.5
        n_mu[z] = np.maximum(n_mu[z], 2)
        m = int(n_mu.sum())
        mu_pt = rng.exponential(20.0, m).astype(np.float32) + 3.0
        mu_eta = rng.uniform(-2.4, 2.4, m).astype(np.float32)
        mu_phi = rng.uniform(-np.pi, np.pi, m).astype(np.float32)
        mu_q = np.where(rng.random(m) < 0.5, -1, 1).astype(np.int32)
        # Z-like pairs: the first two muons of a Z event share a 91 GeV mass.
        first = np.concatenate([[0], np.cumsum(n_mu)[:-1]])[z]
        # Same eta, back to back in phi, pT = m/2: the pair's mass is m.
        mass = rng.normal(91.19, 2.5, len(first))
        mu_eta[first + 1] = mu_eta[first]
        mu_phi[first + 1] = (mu_phi[first] + 2 * np.pi) % (2 * np.pi) - np.pi
        mu_pt[first] = mu_pt[first + 1] = (mass / 2).astype(np.float32)
        mu_q[first + 1] = -mu_q[first]
        n_j = rng.poisson(3.0, n).astype(np.int32)
        j = int(n_j.sum())
        cols: dict[str, Any] = {
            "run": ak.Array(np.ones(n, np.int32)),
            "event": ak.Array(np.arange(start + 1, start + n + 1, dtype=np.int64)),
            "nMuon": ak.Array(n_mu),
            "Muon_pt": jagged(n_mu, mu_pt),
            "Muon_eta": jagged(n_mu, mu_eta),
            "Muon_phi": jagged(n_mu, mu_phi),
            "Muon_mass": jagged(n_mu, np.full(m, 0.1057, np.float32)),
            "Muon_charge": jagged(n_mu, mu_q),
            "Muon_pfRelIso04_all": jagged(n_mu, rng.exponential(0.1, m).astype(np.float32)),
            "nJet": ak.Array(n_j),
            "Jet_pt": jagged(n_j, (rng.exponential(30.0, j) + 15.0).astype(np.float32)),
            "Jet_eta": jagged(n_j, rng.uniform(-4.7, 4.7, j).astype(np.float32)),
            "Jet_phi": jagged(n_j, rng.uniform(-np.pi, np.pi, j).astype(np.float32)),
            "Jet_mass": jagged(n_j, rng.exponential(8.0, j).astype(np.float32)),
            "Jet_btagCSVV2": jagged(n_j, rng.random(j).astype(np.float32)),
            "MET_pt": ak.Array(rng.exponential(30.0, n).astype(np.float32)),
            "MET_phi": ak.Array(rng.uniform(-np.pi, np.pi, n).astype(np.float32)),
            "genWeight": ak.Array(rng.normal(1.0, 0.1, n).astype(np.float32)),
        }
        return cols

    def _batches(self, columns: Sequence[str], weight: str | None) -> Iterator[BatchData]:
        from ._runtime import BatchData

        for index, start in enumerate(range(0, self.events, self.step_size)):
            n = min(self.step_size, self.events - start)
            cols = self.generate(index, start, n)
            keep = {c: cols[c] for c in columns}
            where = f"synthetic events {start}-{start + n - 1}"
            yield BatchData(
                keep,
                n,
                file="<synthetic>",
                entry_start=start,
                entry_stop=start + n,
                where=where,
                weight=weight,
            )

    def reader(self, columns: Sequence[str], weight: str | None) -> Any:
        return _IterReader(self._batches(columns, weight))

    def describe(self) -> str:
        return f"synthetic source ({self.events} events, seed {self.seed})"


def root(
    files: PathLike | Iterable[PathLike],
    tree: str = "Events",
    *,
    step_size: int = 100_000,
    max_events: int | None = None,
) -> RootSource:
    """ROOT files read with uproot: ``files`` (one path or a list), the TTree
    name, events per batch, and an optional limit on the total events."""
    return RootSource(files, tree, step_size, max_events)


def parquet(
    files: PathLike | Iterable[PathLike],
    *,
    step_size: int = 100_000,
    max_events: int | None = None,
    engine: str = "native",
    prefetch: int = 2,
) -> ParquetSource:
    """Parquet files (one column per branch, e.g. written by
    ``python -m evflow.data resample``)."""
    return ParquetSource(files, step_size, max_events, engine, prefetch)


def synthetic(events: int, *, step_size: int = 100_000, seed: int = 1) -> SyntheticSource:
    """``events`` generated events (see :class:`SyntheticSource`)."""
    return SyntheticSource(events, step_size, seed)


def auto(
    files: PathLike | Iterable[PathLike],
    *,
    tree: str = "Events",
    step_size: int = 100_000,
    max_events: int | None = None,
) -> Source:
    """A ROOT or Parquet source chosen by the files' extension (``.root`` or
    ``.parquet``/``.parq``/``.pq``); ``tree`` is used for ROOT files only.
    Lets one analysis run on the original ROOT files and on Parquet copies."""
    names = _files(files)
    kinds = {os.path.splitext(f)[1].lower() for f in names}
    if kinds <= {".root"}:
        return RootSource(names, tree, step_size, max_events)
    if kinds <= {".parquet", ".parq", ".pq"}:
        return ParquetSource(names, step_size, max_events)
    raise ConfigurationError(f"cannot tell the format of {names}: use .root or .parquet files (not mixed)")
