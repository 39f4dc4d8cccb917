"""Outputs: Parquet skims of the selected events.

A skim is written to a temporary file next to the target
(``.NAME.evflow-partial-PID``) and renamed to its final name only when the
whole job succeeded; a failed or interrupted run removes it, so a file with
the final name is always complete. Rows are written in batch order, so the
file is identical for any thread count.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from ._skim_types import common_schema, common_type, copy_cast, holds, to_arrow, type_text
from .errors import ConfigurationError, InputError

if TYPE_CHECKING:
    from ._runtime import Events

__all__ = ["ParquetOutput", "parquet"]

#: The manifest of a distributed run's skim directory, written last.
MANIFEST = "_manifest.json"
#: The parts of a distributed run's skim directory (and their temporary names).
PART = re.compile(r"^part-\d{5}\.parquet$|^\.part-\d{5}\.parquet\.evflow-partial-\d+(-w)?$")
_MANIFEST_PARTIAL = re.compile(r"^\._manifest\.json\.partial-\d+$")
#: The schema metadata key under which a batch's table says where it comes from.
_WHERE = "evflow.where"


def is_skim_directory(path: str) -> bool:
    """Whether ``path`` is a directory holding nothing but a distributed
    run's skim (its parts and manifest, finished or not): a run may replace
    it."""
    try:
        names = os.listdir(path)
    except OSError:
        return False
    return all(PART.match(n) or n == MANIFEST or _MANIFEST_PARTIAL.match(n) for n in names)


def is_parquet_file(path: str) -> bool:
    """Whether ``path`` is a regular file with Parquet's magic bytes at both
    ends (``PAR1``; ``PARE`` closes a file with an encrypted footer): an
    earlier skim, which a run may replace."""
    import stat

    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with open(path, "rb") as f:
            head = f.read(4)
            f.seek(0, os.SEEK_END)
            if f.tell() < 12:  # magic, footer length, magic
                return False
            f.seek(-4, os.SEEK_END)
            return head == b"PAR1" and f.read(4) in (b"PAR1", b"PARE")
    except OSError:
        return False


class SkimContents(NamedTuple):
    """What a distributed skim's manifest lists."""

    #: the parts' paths, in chunk order (the single-process skim's rows, in order)
    parts: list[str]
    #: the columns, in order
    columns: list[str]
    #: the columns' Arrow types (a ``pyarrow.Schema``), or ``None`` for a
    #: manifest of an earlier version, which has none
    schema: Any


def read_skim_manifest(directory: str) -> SkimContents:
    """Reads the manifest of the skim ``directory``; a manifest that cannot
    be read or decoded raises :class:`~evflow.errors.InputError` naming it
    and what failed."""
    import base64
    import json

    path = os.path.join(directory, MANIFEST)
    try:
        with open(path) as f:
            manifest = json.load(f)
        parts = [os.path.join(directory, str(p["file"])) for p in manifest["parts"] if p.get("file")]
        schema = None
        if isinstance(manifest.get("schema"), str):
            import pyarrow as pa

            schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(manifest["schema"])))
        return SkimContents(parts, list(manifest.get("columns", [])), schema)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise InputError(
            f"'{directory}' is not a readable skim: its manifest '{path}' is broken ({type(e).__name__}: {e})"
        ) from None


def remove_skim_directory(path: str) -> None:
    """Removes a directory that :func:`is_skim_directory` accepted."""
    for name in os.listdir(path):
        if PART.match(name) or name == MANIFEST or _MANIFEST_PARTIAL.match(name):
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(path, name))
    os.rmdir(path)


def _checked_compression(compression: Any, path: str) -> Any:
    """``compression`` when pyarrow's Parquet writer takes it (a codec name,
    ``None``, or ``{column: codec}``), checked when the skim is declared:
    an unknown codec failed the job at its first batch, as a failure of
    module ``output0`` that named neither the skim nor the option."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    what = f"Parquet output '{path}': compression={compression!r}"
    if not (compression is None or isinstance(compression, str | dict)):
        raise ConfigurationError(f"{what} is not a codec name (or {{column: codec}})")
    names = list(compression) if isinstance(compression, dict) else ["x"]
    empty = pa.table({str(n): pa.array([], pa.int8()) for n in names})
    try:
        pq.write_table(empty, pa.BufferOutputStream(), compression=compression)
    except Exception as e:
        raise ConfigurationError(
            f"{what} is not a codec pyarrow writes ({e}); use 'zstd', 'snappy', 'gzip', 'brotli', "
            "'lz4' or 'none'"
        ) from None
    return compression


class ParquetOutput:
    """A Parquet skim: ``columns`` (branches or products) of the events that
    pass the selected paths. Jagged columns are written as Arrow lists."""

    def __init__(
        self, path: str | os.PathLike[str], columns: Sequence[str] | str, compression: str = "zstd"
    ) -> None:
        if not isinstance(path, str | os.PathLike):
            raise ConfigurationError(f"a Parquet output's path is a file name, not {path!r}")
        if not isinstance(columns, str | Iterable):
            raise ConfigurationError(
                f"Parquet output '{os.fspath(path)}': columns= is a name or a list of names, not {columns!r}"
            )
        columns = [columns] if isinstance(columns, str) else list(columns)  # one column
        if not columns:
            raise ConfigurationError("a Parquet output needs at least one column")
        if not all(isinstance(c, str) for c in columns):
            raise ConfigurationError(f"the columns of a Parquet output are names (strings), not {columns!r}")
        twice = sorted({c for c in columns if columns.count(c) > 1})
        if twice:
            # Parquet takes two columns of one name, but no reader reads them back.
            raise ConfigurationError(
                f"Parquet output '{os.fspath(path)}' lists column(s) {', '.join(repr(c) for c in twice)} "
                "more than once: list each column once"
            )
        self.path = os.fspath(path)
        self.columns = columns
        self.compression = _checked_compression(compression, self.path)
        self._tmp: str | None = None
        self._writer: Any = None
        self._rows = 0
        #: empty columns of the right types, for a skim no event reaches
        self._empty: dict[str, Any] = {}
        #: the Arrow type of columns fixed before the job (branches whose
        #: type differs between the input files; see ``_skim_types``)
        self._declared: dict[str, Any] = {}
        #: where each column's type in the file comes from (messages)
        self._typed_by = ""

    def __repr__(self) -> str:
        return f"ParquetOutput({self.path!r}, columns={self.columns})"

    # -- used by the process -------------------------------------------------

    def _open(self) -> None:
        d, name = os.path.split(os.path.abspath(self.path))
        try:
            os.makedirs(d, exist_ok=True)
        except OSError as e:
            raise ConfigurationError(
                f"skim '{self.path}': cannot create its directory '{d}' ({e.strerror}; is a part of it a file?)"
            ) from e
        if os.path.isdir(self.path) and not is_skim_directory(self.path):
            raise ConfigurationError(
                f"skim '{self.path}' is a directory with other files than a distributed run's skim parts: "
                "choose another path"
            )
        self._tmp = os.path.join(d, f".{name}.evflow-partial-{os.getpid()}")
        self._writer = None
        self._rows = 0
        self._empty = {}

    def _table(self, ev: Events) -> Any:
        import pyarrow as pa

        table = pa.Table.from_arrays([self._arrow(ev[c]) for c in self.columns], names=self.columns)
        # Where the rows come from travels with them to _write (its messages).
        where = f"batch {ev.info.index} ({ev._data.where})"
        return table.replace_schema_metadata({_WHERE: where})

    @staticmethod
    def _arrow(v: Any) -> Any:
        return to_arrow(v)

    def _note_types(self, ev: Events) -> None:
        """Keeps the columns' types, from ``ev`` (no event of a batch), while
        no row is written: the types of a skim no event reaches. A product
        computed on none of the batch's events has no type there."""
        if self._writer is not None:
            return
        for c in self.columns:
            if c not in self._empty:
                with contextlib.suppress(Exception):
                    v = self._arrow(ev[c])
                    self._empty[c] = v.cast(self._declared[c]) if c in self._declared else v

    def _write(self, table: Any) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        where = (table.schema.metadata or {}).get(_WHERE.encode(), b"").decode() or "a batch"
        table = table.replace_schema_metadata(None)
        if self._writer is None:
            assert self._tmp is not None
            schema = pa.schema([pa.field(f.name, self._declared.get(f.name, f.type)) for f in table.schema])
            self._typed_by = where
            table = self._fit(table, schema, where, "(the type holding it in every input file)")
            self._writer = pq.ParquetWriter(self._tmp, schema, compression=self.compression)
        elif table.schema != self._writer.schema:
            wider, clash = common_schema(self._writer.schema, table.schema)
            if clash is None and wider != self._writer.schema:
                self._widen(wider)
            table = self._fit(table, self._writer.schema, where, f"since {self._typed_by}")
        if table.num_rows or self._rows == 0:
            self._writer.write_table(table)
        self._rows += table.num_rows

    def _widen(self, schema: Any) -> None:
        """Rewrites the rows written so far with ``schema`` (a wider type of
        some column, holding the old values exactly) and goes on writing in
        it: the skim keeps every value whatever the order of the batches."""
        import pyarrow.parquet as pq

        assert self._tmp is not None
        self._writer.close()
        # A Parquet file takes no rows once closed: the rows written are
        # copied, cast, into a new writer that goes on with the batches.
        old = f"{self._tmp}-w"
        os.replace(self._tmp, old)
        try:
            self._writer = pq.ParquetWriter(self._tmp, schema, compression=self.compression)
            copy_cast(old, self._writer, schema)
        finally:
            os.remove(old)

    def _fit(self, table: Any, schema: Any, where: str, since: str) -> Any:
        """``table`` cast to ``schema`` where that keeps every value exactly
        (``float32`` into ``float64``); any other change of a column's type
        is refused, naming the column, both types and the batch."""
        if table.schema == schema:
            return table
        # A column no type holds with the batch's is named first: a column that
        # only the widening still pending would fit reads alike in the message.
        fields = sorted(
            schema, key=lambda f: common_type(f.type, table.schema.field(f.name).type) is not None
        )
        for field in fields:
            new = table.schema.field(field.name).type
            if not holds(field.type, new):
                have = f"{type_text(field.type)} {since}"
                raise ConfigurationError(
                    f"skim '{self.path}': the columns' types changed between batches: column "
                    f"'{field.name}' is {have} but {type_text(new)} in {where}; writing {type_text(new)} "
                    f"values as {type_text(field.type)} would lose data (a column's later values may only "
                    f"widen into its type, e.g. float32 into float64): make what computes '{field.name}' "
                    "return one type (e.g. with .astype(np.float64))"
                )
        try:
            return table.cast(schema)
        except (ValueError, TypeError, NotImplementedError) as e:  # pyarrow's ArrowInvalid is a ValueError
            raise ConfigurationError(
                f"skim '{self.path}': the columns of {where} ({table.schema}) cannot be written as {schema}: {e}"
            ) from e

    def _close(self) -> str:
        """Finishes the file and gives it its final name."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        if self._writer is None:
            assert self._tmp is not None
            # Columns whose type no batch told are nulls.
            empty = pa.table(
                {c: self._empty.get(c, pa.array([], self._declared.get(c, pa.null()))) for c in self.columns}
            )
            pq.write_table(empty, self._tmp, compression=self.compression)
        else:
            self._writer.close()
            self._writer = None
        assert self._tmp is not None
        if os.path.exists(self.path) and not os.path.isdir(self.path) and not is_parquet_file(self.path):
            raise ConfigurationError(
                f"skim '{self.path}' became a file that is not a Parquet file during the job: "
                "it is left as it is"
            )
        if os.path.isdir(self.path):
            # A distributed run's skim of the same path (checked when the
            # job started): this run's file replaces it, as it would a file.
            if not is_skim_directory(self.path):
                raise ConfigurationError(
                    f"skim '{self.path}' became a directory with other files during the job"
                )
            remove_skim_directory(self.path)
        os.replace(self._tmp, self.path)
        self._tmp = None
        return self.path

    def _abort(self) -> None:
        """Removes the partial file of a failed run."""
        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.close()
            self._writer = None
        if self._tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.remove(self._tmp)
            self._tmp = None

    @property
    def rows(self) -> int:
        return self._rows


def parquet(
    path: str | os.PathLike[str], columns: Sequence[str] | str, *, compression: str = "zstd"
) -> ParquetOutput:
    """A Parquet skim of ``columns`` at ``path``; attach it with
    ``proc.output(ef.output.parquet(...), select=["path_name"])``."""
    return ParquetOutput(path, columns, compression)
