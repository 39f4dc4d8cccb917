"""The Arrow types of skim columns.

A skim is written batch by batch (or chunk by chunk, as parts). A later
batch of another type is cast into a column's type when that keeps every
value exactly (``float32`` into ``float64``); when it needs a wider type
that holds both exactly (``float64`` after ``float32``), the rows already
written are rewritten in it (:func:`widen_file`: at most a few times per
column, as types only widen), so the skim does not depend on the order of
the batches, nor a distributed skim on how its chunks were cut. Types no
type holds both of exactly (``int64`` and ``float64``, ``int64`` and
``bool``, flat and jagged) are refused, naming the column, both types and
the batch, never narrowed silently. Nullability widens the same way: a
column whose lists (or lists' lists, or records' fields) hold ``None`` in
a later batch only takes the type whose nested field is nullable, whatever
the batches' order.

A branch whose type differs between the input files (``float32`` in one,
``float64`` in the next) widens the same way, whatever the files' order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa


__all__ = [
    "common_schema",
    "common_type",
    "copy_cast",
    "holds",
    "schema_of",
    "to_arrow",
    "type_text",
    "widen_file",
]

#: Bits of a float's mantissa (with the implicit one): the widest integer it holds exactly.
_MANTISSA = {16: 11, 32: 24, 64: 53}


def to_arrow(v: Any) -> Any:
    """A column of a batch (numpy or awkward) as the Arrow array a skim writes."""
    import awkward as ak
    import numpy as np
    import pyarrow as pa

    if isinstance(v, np.ndarray) and v.ndim > 1:
        # One list per event, of variable size in the file (as jagged
        # columns): the native Parquet reader reads it back.
        v = ak.from_regular(ak.from_numpy(v), axis=None)
    if isinstance(v, ak.Array):
        return ak.to_arrow(v, extensionarray=False)
    return pa.array(v)


def _is_list(t: pa.DataType) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t))


def _value_bits(t: pa.DataType) -> int:
    """Bits an integer type's magnitudes use (its sign bit not counted)."""
    import pyarrow as pa

    return int(t.bit_width) - (1 if pa.types.is_signed_integer(t) else 0)


def _field_holds(have: pa.Field, new: pa.Field) -> bool:
    """Whether the nested field ``have`` (a list's items, a record's field)
    holds every value of ``new``: its type holds ``new``'s, and it takes
    nulls where ``new`` may have them (a non-nullable field refuses them
    when written)."""
    if new.nullable and not have.nullable:
        return False
    return holds(have.type, new.type)


def holds(have: pa.DataType, new: pa.DataType) -> bool:
    """Whether a column of type ``have`` holds every value of type ``new``
    exactly (list offsets' width and field names aside; a nested field that
    takes no null holds no nullable one, :func:`_field_holds`)."""
    import pyarrow as pa

    if have == new or pa.types.is_null(new):
        return True
    if pa.types.is_integer(have) and pa.types.is_integer(new):
        if pa.types.is_signed_integer(new) and pa.types.is_unsigned_integer(have):
            return False
        return _value_bits(have) >= _value_bits(new)
    if pa.types.is_floating(have):
        if pa.types.is_floating(new):
            return bool(have.bit_width >= new.bit_width)
        if pa.types.is_integer(new):
            return _value_bits(new) <= _MANTISSA[have.bit_width]
        return False
    if _is_list(have) and _is_list(new):
        if pa.types.is_fixed_size_list(have) and (
            not pa.types.is_fixed_size_list(new) or have.list_size != new.list_size
        ):
            return False  # a fixed size takes no other size
        return _field_holds(have.value_field, new.value_field)
    if pa.types.is_struct(have) and pa.types.is_struct(new):
        names = [have.field(i).name for i in range(have.num_fields)]
        if names != [new.field(i).name for i in range(new.num_fields)]:
            return False
        return all(_field_holds(have.field(i), new.field(i)) for i in range(have.num_fields))
    return False


def _common_field(a: pa.Field, b: pa.Field) -> pa.Field | None:
    """The nested field holding both ``a``'s and ``b``'s values: their
    common type, nullable when either is."""
    import pyarrow as pa

    t = common_type(a.type, b.type)
    if t is None:
        return None
    return pa.field(a.name, t, nullable=a.nullable or b.nullable, metadata=a.metadata)


def common_type(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """The narrowest type holding every value of ``a`` and of ``b`` exactly
    (``None``: none does, e.g. ``int64`` and ``float64``, flat and jagged).
    Nested fields (lists' items, records' fields) are nullable where either
    type's are, so that a batch with nulls in a column's lists widens it
    whatever the batches' order."""
    import pyarrow as pa

    if holds(a, b):
        return a
    if holds(b, a):
        return b
    if _is_list(a) and _is_list(b):
        field = _common_field(a.value_field, b.value_field)
        if field is None:
            return None
        fixed = [t for t in (a, b) if pa.types.is_fixed_size_list(t)]
        if len(fixed) == 2:  # sizes differ: refused, as :func:`holds` refuses them
            return pa.list_(field, a.list_size) if a.list_size == b.list_size else None
        large = pa.types.is_large_list(a) or pa.types.is_large_list(b)
        return pa.large_list(field) if large else pa.list_(field)
    if pa.types.is_struct(a) and pa.types.is_struct(b):
        if [f.name for f in a] != [f.name for f in b]:
            return None
        fields = [_common_field(a.field(i), b.field(i)) for i in range(a.num_fields)]
        return None if any(f is None for f in fields) else pa.struct(fields)
    if pa.types.is_null(a):
        return b
    candidates = [pa.int16(), pa.int32(), pa.int64(), pa.float32(), pa.float64()]
    return next((c for c in candidates if holds(c, a) and holds(c, b)), None)


def type_text(t: pa.DataType) -> str:
    """A type as a message shows it (the list item's name and nullability left out)."""
    import pyarrow as pa

    if _is_list(t):
        return f"list<{type_text(t.value_type)}>"
    if pa.types.is_struct(t):
        return "struct<" + ", ".join(f"{f.name}: {type_text(f.type)}" for f in t) + ">"
    return str(t)


def schema_of(declared: dict[str, pa.DataType], columns: Sequence[str]) -> bytes | None:
    """``declared`` as a serialized Arrow schema (``None``: nothing declared),
    to hand to a distributed run's chunks."""
    if not declared:
        return None
    import pyarrow as pa

    fields = [pa.field(c, declared[c]) for c in columns if c in declared]
    return bytes(pa.schema(fields).serialize().to_pybytes())


def read_declared(schema: bytes | None) -> dict[str, pa.DataType]:
    """What :func:`schema_of` wrote."""
    if schema is None:
        return {}
    import pyarrow as pa

    s = pa.ipc.read_schema(pa.py_buffer(schema))
    return {f.name: f.type for f in s}


def common_schema(have: pa.Schema, new: pa.Schema) -> tuple[pa.Schema, str | None]:
    """The schema holding the rows of both ``have`` and ``new`` (same column
    names) exactly, and ``None``; or ``have`` and the name of the first
    column no type holds both of."""
    import pyarrow as pa

    fields = []
    for f in have:
        other = new.field(f.name).type
        t = common_type(f.type, other)
        if t is None:
            return have, f.name
        fields.append(f.with_type(t) if t != f.type else f)
    return pa.schema(fields), None


def copy_cast(path: str, writer: Any, schema: pa.Schema) -> None:
    """Writes every row of the Parquet file ``path`` into ``writer``, cast
    to ``schema`` (exactly: the caller checked :func:`holds`), batch by
    batch, so that the file never needs to fit in memory."""
    import pyarrow.parquet as pq

    for batch in pq.ParquetFile(path).iter_batches():
        writer.write_batch(batch.cast(schema))


def widen_file(path: str, schema: pa.Schema, tmp: str, compression: str = "zstd") -> None:
    """Rewrites the Parquet file ``path`` with ``schema`` into ``tmp``,
    which then replaces it."""
    import os

    import pyarrow.parquet as pq

    try:
        with pq.ParquetWriter(tmp, schema, compression=compression) as writer:
            copy_cast(path, writer, schema)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
