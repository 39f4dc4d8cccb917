"""Skim defects a new user found: a column whose values become nullable in a
later batch (in a jagged column's lists, at the top level, in lists of lists
and records' fields) widens to the nullable type whatever the batches'
order, in one process and on a cluster; an existing file that is not a
Parquet file (not an earlier skim) is refused before the job runs."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import awkward as ak
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import evflow as ef
from evflow._skim_types import common_type, holds
from evflow.distributed import read_skim

STEP = 100
CUT = 50.0


def _jets(columns: dict[str, Any]) -> Any:
    return ak.Array(columns["Jet_Px"])


def _masked(values: Any) -> Any:
    """``values`` with those above the cut replaced by None (an option type)."""
    return values.mask[values > CUT]


def _lists_of_lists(columns: dict[str, Any]) -> Any:
    return ak.from_regular(ak.unflatten(_jets(columns), 1, axis=1), axis=2)


def _flat(columns: dict[str, Any]) -> Any:
    return np.asarray(columns["MET_px"])


#: a column kind: (its values on a batch of the non-nullable kind, on one of the nullable kind)
KINDS: dict[str, tuple[Callable[[dict[str, Any]], Any], Callable[[dict[str, Any]], Any]]] = {
    "jagged": (_jets, lambda c: _masked(_jets(c))),
    "flat": (_flat, lambda c: ak.mask(ak.Array(_flat(c)), _flat(c) > 5)),
    "nested": (_lists_of_lists, lambda c: _masked(_lists_of_lists(c))),
    "record": (
        lambda c: ak.zip({"px": _jets(c), "py": ak.Array(c["Jet_Py"])}),
        lambda c: ak.zip({"px": _masked(_jets(c)), "py": ak.Array(c["Jet_Py"])}),
    ),
}


def _value(kind: str, nullable_parity: int, index: int, columns: dict[str, Any]) -> Any:
    plain, nullable = KINDS[kind]
    return nullable(columns) if index % 2 == nullable_parity else plain(columns)


def _process(
    hzz: Path, out: Path, kinds: list[str], parity: int, seen: dict[int, tuple[int, int]] | None = None
) -> ef.Process:
    proc = ef.Process("nullable")
    proc.source = ef.source.root(str(hzz), tree="events", step_size=STEP)

    @proc.producer(consumes=["Jet_Px", "Jet_Py", "MET_px"], produces=kinds)
    def make(ev: ef.Events) -> Any:
        if seen is not None:
            seen[ev.info.index] = (ev.info.entry_start, ev.info.entry_stop)
        cols = {"Jet_Px": ev.Jet_Px, "Jet_Py": ev.Jet_Py, "MET_px": ev.MET_px}
        values = [_value(k, parity, ev.info.index, cols) for k in kinds]
        return values[0] if len(values) == 1 else tuple(values)

    proc.output(ef.output.parquet(out, columns=kinds))
    return proc


def _reference(hzz: Path, kind: str, parity: int, batches: dict[int, tuple[int, int]]) -> list[Any]:
    """The column as awkward computes it, batch by batch, from uproot's arrays."""
    import uproot

    with uproot.open(hzz) as f:
        arrays = f["events"].arrays(["Jet_Px", "Jet_Py", "MET_px"])
    rows: list[Any] = []
    for index in sorted(batches):
        start, stop = batches[index]
        cols = {name: arrays[name][start:stop] for name in ("Jet_Px", "Jet_Py", "MET_px")}
        cols["MET_px"] = ak.to_numpy(cols["MET_px"])
        rows.extend(ak.to_list(_value(kind, parity, index, cols)))
    assert len(rows) == len(arrays)
    return rows


def _nullable_somewhere(t: pa.DataType) -> bool:
    if pa.types.is_large_list(t) or pa.types.is_list(t):
        return t.value_field.nullable or _nullable_somewhere(t.value_type)
    if pa.types.is_struct(t):
        return any(f.nullable or _nullable_somewhere(f.type) for f in t)
    return False


@pytest.mark.parametrize("parity", [1, 0], ids=["nullable-later", "nullable-first"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_a_column_becoming_nullable_widens_whatever_the_batch_order(
    hzz_file: Path, tmp_path: Path, kind: str, parity: int
) -> None:
    batches: dict[int, tuple[int, int]] = {}
    out = tmp_path / "q.parquet"
    _process(hzz_file, out, [kind], parity, batches).run(threads=1)
    assert len(batches) > 4
    table = pq.read_table(out)
    assert table.column(kind).to_pylist() == _reference(hzz_file, kind, parity, batches)
    if kind != "flat":  # the nested field that takes the nulls is nullable in the file
        assert _nullable_somewhere(table.schema.field(kind).type)


def test_nullable_types_agree_whatever_the_order() -> None:
    strict = pa.large_list(pa.field("item", pa.float32(), nullable=False))
    loose = pa.large_list(pa.field("item", pa.float32()))
    assert holds(loose, strict) and not holds(strict, loose)
    assert common_type(strict, loose) == loose and common_type(loose, strict) == loose
    wide = pa.large_list(pa.field("item", pa.float64(), nullable=False))
    assert common_type(wide, loose) == pa.large_list(pa.field("item", pa.float64()))
    assert common_type(loose, wide) == pa.large_list(pa.field("item", pa.float64()))
    a = pa.struct([pa.field("x", pa.float32(), nullable=False), pa.field("y", pa.int32())])
    b = pa.struct([pa.field("x", pa.float64()), pa.field("y", pa.int64(), nullable=False)])
    both = pa.struct([pa.field("x", pa.float64()), pa.field("y", pa.int64())])
    assert common_type(a, b) == both and common_type(b, a) == both
    null_x = pa.struct([pa.field("x", pa.null()), pa.field("y", pa.int32())])
    assert not holds(a, null_x) and common_type(a, null_x) == pa.struct(
        [pa.field("x", pa.float32()), pa.field("y", pa.int32())]
    )


distributed = pytest.importorskip("distributed")


def test_a_distributed_skim_widens_to_nullable_as_one_process(
    hzz_file: Path, tmp_path: Path, client: Any
) -> None:
    """Chunks of three batches: some parts start non-nullable and meet nulls
    later in the chunk, some parts are nullable and others not; the merged
    skim equals the single-process one and the awkward reference."""
    kinds = list(KINDS)
    batches: dict[int, tuple[int, int]] = {}
    _process(hzz_file, tmp_path / "dist", kinds, 1).run(client=client, chunk_size=3 * STEP)
    _process(hzz_file, tmp_path / "one.parquet", kinds, 1, batches).run(threads=1)
    one = pq.read_table(tmp_path / "one.parquet")
    dist = read_skim(str(tmp_path / "dist"))
    assert dist.schema.remove_metadata() == one.schema.remove_metadata()
    for kind in kinds:
        assert dist.column(kind).to_pylist() == _reference(hzz_file, kind, 1, batches)
    assert all(not p.startswith(".") for p in os.listdir(tmp_path / "dist")), "no temporary file left"


def test_a_part_that_cannot_be_rewritten_names_the_skim_and_chunk(tmp_path: Path) -> None:
    from evflow.distributed.skims import finish_skim

    d = tmp_path / "skim"
    d.mkdir()
    pq.write_table(
        pa.table({"q": pa.array([[1.0, None]], pa.large_list(pa.float64()))}), d / "part-00003.parquet"
    )
    strict = pa.schema([pa.field("q", pa.large_list(pa.field("item", pa.float64(), nullable=False)))])
    parts = [{"chunk": 3, "file": "part-00003.parquet", "rows": 1, "entries": []}]
    with pytest.raises(
        ef.ConfigurationError, match=r"skim '.*skim': the part of chunk 3 \(part-00003\.parquet\)"
    ):
        finish_skim(str(d), ef.Process("p"), ["q"], parts, bytes(strict.serialize().to_pybytes()))


# -- an existing file that is not a skim ----------------------------------------------


def _plain(out: Path, ran: list[int]) -> ef.Process:
    proc = ef.Process("plain")
    proc.source = ef.source.synthetic(200, step_size=100)

    @proc.analyzer(consumes=["MET_pt"])
    def seen(ev: ef.Events) -> None:
        ran.append(len(ev))

    proc.output(ef.output.parquet(out, columns=["MET_pt"]))
    return proc


@pytest.mark.parametrize(
    "content", [b"precious", b"", b"PAR1 but not at the end"], ids=["text", "empty", "head"]
)
def test_a_skim_onto_a_file_that_is_not_parquet_is_refused_before_the_job(
    tmp_path: Path, content: bytes
) -> None:
    out = tmp_path / "out" / "exists.parquet"
    out.parent.mkdir()
    out.write_bytes(content)
    ran: list[int] = []
    for run in (lambda p: p.run(threads=1), lambda p: p.run(processes=2, chunk_size=100)):
        with pytest.raises(
            ef.ConfigurationError, match=r"skim '.*exists\.parquet' exists and is a file that is not"
        ):
            run(_plain(out, ran))
        assert out.read_bytes() == content and ran == [], "refused before the job, the file kept"
        assert os.listdir(out.parent) == ["exists.parquet"]


def test_a_skim_onto_a_pipe_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.parquet"
    os.mkfifo(fifo)
    ran: list[int] = []
    with pytest.raises(
        ef.ConfigurationError, match=r"skim '.*pipe\.parquet' exists and is not a regular file"
    ):
        _plain(fifo, ran).run(threads=1)
    assert fifo.is_fifo() and ran == []


def test_an_earlier_skim_is_still_replaced(tmp_path: Path) -> None:
    out = tmp_path / "skim.parquet"
    pq.write_table(pa.table({"other": [1, 2, 3]}), out)
    ran: list[int] = []
    _plain(out, ran).run(threads=1)
    assert pq.read_table(out).column_names == ["MET_pt"] and pq.read_table(out).num_rows == 200
    _plain(out, ran).run(threads=1)  # a skim of its own
    assert pq.read_table(out).num_rows == 200
