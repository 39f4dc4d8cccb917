"""Parquet files: the native Rust reader (decoding without the GIL), or
pyarrow."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError, InputError, MissingFileError
from ..output import MANIFEST, PART, read_skim_manifest

if TYPE_CHECKING:
    from .._runtime import BatchData

from ._common import (
    PathLike,
    Setting,
    Source,
    _check_max_events,
    _check_step_size,
    _files,
    _IterReader,
    _missing,
    _setting,
    unreadable,
)
from ._readahead import ReadBalancer

_PARQUET_SUFFIXES = (".parquet", ".parq", ".pq")


def _expand_directories(files: list[str]) -> tuple[list[str], Any]:
    """Directories among ``files``, replaced by their Parquet files: a
    distributed skim's parts in its manifest's order (the rows of the
    single-process skim, in order), any other directory's ``*.parquet`` in
    name order. Returns the files and, when there are none (skims that no
    event reached), the column types of the first such skim's manifest."""
    out: list[str] = []
    schema = None
    for path in files:
        if not os.path.isdir(path):
            out.append(path)
            continue
        manifest = os.path.join(path, MANIFEST)
        if os.path.isfile(manifest):
            skim = read_skim_manifest(path)
            out.extend(skim.parts)
            if schema is None:
                schema = skim.schema
            continue
        names = sorted(os.listdir(path))
        if any(PART.match(n) for n in names):
            raise InputError(
                f"'{path}' is an incomplete distributed skim: it has parts but no '{MANIFEST}' (written last, "
                "once every chunk is in); run the job that writes it again"
            )
        parquet = [
            os.path.join(path, n)
            for n in names
            if n.lower().endswith(_PARQUET_SUFFIXES) and not n.startswith((".", "_"))
        ]
        if not parquet:
            raise MissingFileError(f"directory '{path}' holds no Parquet file")
        out.extend(parquet)
    return out, schema


def _from_arrow(column: Any) -> Any:
    """An Arrow column as an awkward array with an option type only at the
    levels that hold a missing value: Parquet marks its columns nullable,
    and pyarrow reads them with validity bitmaps even without a null, so
    that a flat numeric column would reach the modules as ``?float64``
    rather than the numpy array the native reader gives."""
    import awkward as ak

    return ak.Array(_without_unused_options(ak.to_layout(ak.from_arrow(column))))


def _without_unused_options(layout: Any) -> Any:
    """``layout`` with its option nodes that mark no element missing
    replaced by their contents (kept, with their contents so cleaned,
    where one does)."""
    import awkward as ak
    import numpy as np

    c = ak.contents
    if isinstance(layout, c.UnmaskedArray):
        return _without_unused_options(layout.content)
    if isinstance(layout, c.BitMaskedArray | c.ByteMaskedArray):
        if np.asarray(layout.mask_as_bool(valid_when=True)).all():
            return _without_unused_options(layout.content[: layout.length])
        return layout.copy(content=_without_unused_options(layout.content))
    if isinstance(layout, c.IndexedOptionArray):
        if (np.asarray(layout.index) >= 0).all():
            return _without_unused_options(layout.project())
        return layout.copy(content=_without_unused_options(layout.content))
    if isinstance(layout, c.ListOffsetArray | c.ListArray | c.RegularArray):
        return layout.copy(content=_without_unused_options(layout.content))
    if isinstance(layout, c.RecordArray):
        return layout.copy(contents=[_without_unused_options(x) for x in layout.contents])
    return layout


class ParquetSource(Source):
    """Batches of Parquet files. ``engine="native"`` (default) decodes with
    evflow's Rust reader, whole row groups on ``read_workers`` threads without
    the GIL, at most ``prefetch`` batches ahead (both adapted at run time by
    :attr:`balancer` unless fixed), and hands the decoded buffers to numpy
    without copying (read-only arrays); ``engine="pyarrow"`` reads with
    pyarrow (any Arrow type). A directory stands for its Parquet files: a
    distributed skim's parts in its manifest's order, any other directory's
    files in name order."""

    def __init__(
        self,
        files: PathLike | Iterable[PathLike],
        step_size: int = 100_000,
        max_events: int | None = None,
        engine: str = "native",
        prefetch: Setting = "auto",
        *,
        read_workers: Setting = "auto",
        read_memory: int | str = "512MB",
    ) -> None:
        step_size = _check_step_size(step_size)
        _check_max_events(max_events)
        if engine not in ("native", "pyarrow"):
            raise ConfigurationError(f"engine must be 'native' or 'pyarrow', not {engine!r}")
        given = _files(files)
        #: the directories given, which stand for their Parquet files (a
        #: skim must not be written into them: see ``_skim_checks``)
        self.directories = [f for f in given if os.path.isdir(f)]
        self.files, schema = _expand_directories(given)
        if not self.files and schema is None:
            raise InputError(f"the skims {_files(files)} have no row and their manifests no column types")
        #: the columns' types of skims without a row (a ``pyarrow.Schema``),
        #: when there is no file to read them from
        self._empty_schema = None if self.files else schema
        self.step_size = int(step_size)
        self.max_events = max_events
        #: first entry read in the first file (a row-group boundary; a chunk
        #: of a distributed run starts there)
        self.entry_start = 0
        self.engine = engine
        self.read_ahead = prefetch
        self.read_workers = read_workers
        self.read_memory = read_memory
        self.balancer = ReadBalancer(read_workers, prefetch, memory=read_memory)
        self._footers: dict[tuple[str, int, int], dict[str, Any]] = {}

    @property
    def prefetch(self) -> int:
        """Batches decoded ahead when no balancer is used (the balancer's
        first depth, less the batch being decoded)."""
        return max(1, (_setting(self.read_ahead, "prefetch") or 3) - 1)

    def __getstate__(self) -> dict[str, Any]:
        # The footers stay here: a chunk's source travels to a worker.
        return {**self.__dict__, "_footers": {}}

    def _metadata(self, path: str) -> dict[str, Any]:
        """The file's footer, read once while the file is unchanged (the
        check of the columns and the count of the rows both need it)."""
        from .. import _evflow

        try:
            st = os.stat(path)
        except OSError:
            raise MissingFileError(f"Parquet file '{path}' does not exist") from None
        key = (os.path.abspath(path), st.st_mtime_ns, st.st_size)
        cached = self._footers.get(key)
        if cached is not None:
            return cached
        try:
            meta = _evflow.parquet_metadata(path)
        except OSError as e:
            raise InputError(str(e)) from e
        self._footers[key] = meta
        return meta

    def check(self, columns: Sequence[str]) -> None:
        if not self.files:
            have = {f.name: str(f.type) for f in self._empty_schema}
            for c in columns:
                if c not in have:
                    raise _missing(c, have, "the skim (no row; its manifest's columns)")
        for path in self.files:
            meta = self._metadata(path)
            have = meta["columns"]
            for c in columns:
                if c not in have:
                    raise _missing(c, have, f"Parquet file '{path}'")
                if self.engine == "native" and not meta["native"][c]:
                    raise InputError(
                        f"column '{c}' of Parquet file '{path}' has Arrow type {have[c]}, which the native "
                        "Parquet reader does not support (numbers, booleans and lists of them are); use "
                        'ef.source.parquet(..., engine="pyarrow")'
                    )

    def total_events(self) -> int | None:
        total = sum(int(self._metadata(p)["num_rows"]) for p in self.files)
        return total if self.max_events is None else min(total, self.max_events)

    def build(self, weight: str | None) -> Any:
        """The callback the native reader calls with decoded buffers."""
        import awkward as ak
        import numpy as np

        from .._runtime import BatchData

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

        # The native reader asks this balancer for its decode workers and depth.
        build.evflow_reading = self.balancer  # type: ignore[attr-defined]
        return build

    def _pyarrow_batches(self, columns: Sequence[str], weight: str | None) -> Iterator[BatchData]:
        from .._runtime import BatchData

        # skip_bad_files (evflow._file_gate): a file whose data fail to be
        # read is left out as the job goes on, told to the watch in batch order.
        watch = getattr(self, "bad_watch", None)
        tell = watch.native() if watch is not None else None
        left = self.max_events
        for path in self.files:
            start = 0
            try:
                for rb in _record_batches(path, self.step_size, columns):
                    if left is not None:
                        if left <= 0:
                            return
                        if rb.num_rows > left:
                            rb = rb.slice(0, left)
                        left -= rb.num_rows
                    arrays = {c: _from_arrow(rb.column(c)) for c in columns}
                    n = rb.num_rows
                    if tell is not None:
                        tell.handed(path)
                    yield BatchData(
                        arrays, n, file=path, entry_start=start, entry_stop=start + n, weight=weight
                    )
                    start += n
            except InputError as e:
                where = getattr(e, "unreadable", None)
                if tell is None or where is None:
                    raise
                tell.unreadable(str(e), path, *where["entries"])
        if tell is not None:
            tell.ended()

    def empty_batch(self, columns: Sequence[str], weight: str | None) -> BatchData | None:
        import awkward as ak
        import pyarrow.parquet as pq

        from .._runtime import BatchData

        if self.files:
            path = self.files[0]
            schema = pq.read_schema(path)
        else:
            path, schema = "a skim without rows", self._empty_schema
        empty = schema.empty_table().select(list(columns))
        # The declared types as they are (nullable included): with no row,
        # no level is known to hold no null.
        arrays = {c: ak.from_arrow(empty.column(c)) for c in columns}
        return BatchData(
            arrays, 0, file=path, where=f"file '{path}', no row (the columns' types)", weight=weight
        )

    def reader(self, columns: Sequence[str], weight: str | None) -> Any:
        return _IterReader(self._pyarrow_batches(columns, weight))

    def describe(self) -> str:
        if not self.files:
            return "Parquet skim without rows"
        files = self.files[0] if len(self.files) == 1 else f"{len(self.files)} files"
        return f"Parquet {files}"


def parquet(
    files: PathLike | Iterable[PathLike],
    *,
    step_size: int = 100_000,
    max_events: int | None = None,
    engine: str = "native",
    prefetch: Setting = "auto",
    read_workers: Setting = "auto",
    read_memory: int | str = "512MB",
) -> ParquetSource:
    """Parquet files (one column per branch, e.g. written by
    ``python -m evflow.data resample``), or directories of them: the skim a
    distributed run writes (``output.parquet`` on a cluster) reads back as
    its parts in order, the rows of the same job's single-process skim.

    The native engine decodes whole row groups on ``read_workers`` threads
    without the GIL, at most ``prefetch`` batches ahead of the engine and
    within ``read_memory``; ``"auto"`` lets a :class:`ReadBalancer` choose
    both at run time."""
    return ParquetSource(
        files, step_size, max_events, engine, prefetch, read_workers=read_workers, read_memory=read_memory
    )


def _record_batches(path: str, step_size: int, columns: Sequence[str]) -> Iterator[Any]:
    """The record batches pyarrow reads from ``path``; an error names the
    file and the entry from which the read failed (pyarrow's own says
    neither: "Couldn't deserialize thrift")."""
    import pyarrow.parquet as pq

    start = 0
    file = None
    try:
        file = pq.ParquetFile(path)
        for rb in file.iter_batches(batch_size=step_size, columns=list(columns)):
            start += rb.num_rows
            yield rb
    except (OSError, ValueError) as e:
        # The entries from the failure to the file's end (skip_bad_files
        # leaves the file out from there).
        stop = file.metadata.num_rows if file is not None else start
        raise unreadable(
            f"reading file '{path}', entries from {start}: {type(e).__name__}: {e}", path, start, stop
        ) from e
