"""With ``engine="pyarrow"``, Parquet columns reach the modules as the
native reader gives them: flat numeric columns without a null as numpy
arrays (not awkward ``?float64``), jagged ones without an option type; a
column that holds a null keeps its option type there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import awkward as ak
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import evflow as ef


def _write(path: Path, n: int = 1_000) -> pa.Table:
    rng = np.random.default_rng(5)
    counts = rng.integers(0, 4, n)
    pt = ak.unflatten(rng.exponential(30.0, int(counts.sum())), counts)
    with_nulls = pa.array([None if i % 7 == 0 else float(i) for i in range(n)], pa.float64())
    table = pa.table(
        {
            "met": rng.exponential(20.0, n),
            "njet": counts.astype(np.int32),
            "good": rng.random(n) > 0.5,
            "Jet_pt": ak.to_arrow(pt, extensionarray=False),
            "maybe": with_nulls,
        }
    )
    pq.write_table(table, path, row_group_size=300)
    return table


def _seen(path: Path, engine: str, step_size: int, columns: list[str]) -> tuple[dict[str, Any], int]:
    kinds: dict[str, Any] = {}
    proc = ef.Process("types")
    proc.source = ef.source.parquet(str(path), engine=engine, step_size=step_size)

    @proc.filter(consumes=columns)
    def high(ev: ef.Events) -> np.ndarray:
        for c in columns:
            v = ev[c]
            kinds.setdefault(c, set()).add(
                ("numpy", str(v.dtype)) if isinstance(v, np.ndarray) else ("awkward", str(v.type.content))
            )
        return np.asarray(ev.met > 15) & np.asarray(ev.good)

    proc.path("sel", [high])
    return kinds, proc.run().cutflow["sel"].passed


@pytest.mark.parametrize("step_size", [100_000, 250])
def test_pyarrow_flat_columns_are_numpy_as_with_the_native_reader(tmp_path: Path, step_size: int) -> None:
    data = tmp_path / "events.parquet"
    table = _write(data)
    expected = int(np.sum((table["met"].to_numpy() > 15) & table["good"].to_numpy(zero_copy_only=False)))
    columns = ["met", "njet", "good", "Jet_pt"]
    arrow, passed = _seen(data, "pyarrow", step_size, columns)
    assert passed == expected
    assert arrow["met"] == {("numpy", "float64")}
    assert arrow["njet"] == {("numpy", "int32")}
    assert arrow["good"] == {("numpy", "bool")}
    assert arrow["Jet_pt"] == {("awkward", "var * float64")}
    native, passed_native = _seen(data, "native", step_size, columns)
    assert native == arrow
    assert passed_native == expected


def test_pyarrow_keeps_the_option_type_where_a_null_is(tmp_path: Path) -> None:
    data = tmp_path / "events.parquet"
    table = _write(data)
    seen: list[Any] = []
    proc = ef.Process("nulls")
    proc.source = ef.source.parquet(str(data), engine="pyarrow", step_size=250)

    @proc.analyzer(consumes=["maybe"])
    def keep(ev: ef.Events) -> None:
        seen.append(ev.maybe)

    proc.run()
    assert all(isinstance(v, ak.Array) and str(v.type.content) == "?float64" for v in seen)
    assert ak.to_list(ak.concatenate(seen)) == table["maybe"].to_pylist()
