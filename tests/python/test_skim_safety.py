"""Skims never destroy their inputs nor lose data: a skim path that is (or
holds, or sits in) one of the job's inputs, or whose directory takes no
file, is refused before the job; a column's type never narrows silently
(checked against numpy/uproot/pyarrow reading the same files)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
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


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _parquet(path: Path, n: int = 50, dtype: Any = np.float64) -> Path:
    met = (np.arange(n) * 1.25).astype(dtype)
    pq.write_table(pa.table({"met": met}), path, row_group_size=20)
    return path


def _root(path: Path, met: np.ndarray, jets: list[list[float]] | None = None) -> Path:
    import uproot

    with uproot.recreate(path) as f:
        branches: dict[str, Any] = {"met": met}
        if jets is not None:
            branches["Jet_pt"] = ak.Array(jets)
        f["tr"] = branches
    return path


def _skim(proc_source: ef.source.Source, out: str | Path, columns: list[str] | None = None) -> ef.Process:
    proc = ef.Process("skim")
    proc.source = proc_source
    proc.output(ef.output.parquet(out, columns=columns or ["met"]))
    return proc


# -- the skim's path against the inputs ------------------------------------------


def test_a_skim_onto_its_own_parquet_input_is_refused_and_the_input_kept(tmp_path: Path) -> None:
    data = _parquet(tmp_path / "x.parquet")
    before = _digest(data)
    with pytest.raises(ef.ConfigurationError, match=r"skim '.*x\.parquet' is the input file '.*x\.parquet'"):
        _skim(ef.source.parquet(data), data).run(threads=1)
    (tmp_path / "link.parquet").symlink_to(data)
    with pytest.raises(
        ef.ConfigurationError, match=r"skim '.*link\.parquet' is the input file '.*x\.parquet'"
    ):
        _skim(ef.source.parquet(data), tmp_path / "link.parquet").run(threads=1)
    assert _digest(data) == before
    assert sorted(os.listdir(tmp_path)) == ["link.parquet", "x.parquet"], "no partial file left"


def test_a_skim_onto_its_own_root_input_is_refused(tmp_path: Path) -> None:
    data = _root(tmp_path / "x.root", np.arange(10.0))
    before = _digest(data)
    with pytest.raises(
        ef.ConfigurationError, match=r"is the input file '.*x\.root'.*would replace its input"
    ):
        _skim(ef.source.root(data, tree="tr"), data).run(threads=1)
    assert _digest(data) == before


def test_a_skim_in_or_holding_an_input_directory_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "inputs"
    d.mkdir()
    _parquet(d / "a.parquet")
    _parquet(d / "b.parquet")
    with pytest.raises(
        ef.ConfigurationError, match=r"skim '.*inputs/new\.parquet' is in the input directory"
    ):
        _skim(ef.source.parquet(d), d / "new.parquet").run(threads=1)
    with pytest.raises(ef.ConfigurationError, match=r"skim '.*inputs' is the input directory"):
        _skim(ef.source.parquet(d), d).run(threads=1)
    # Only its files, as given: a skim holding one of them would delete it.
    with pytest.raises(ef.ConfigurationError, match=r"skim '.*inputs' is a directory holding the input file"):
        _skim(ef.source.parquet(d / "a.parquet"), d).run(threads=1)
    assert sorted(os.listdir(d)) == ["a.parquet", "b.parquet"]
    # A skim beside the inputs is fine: same rows as pyarrow reads.
    r = _skim(ef.source.parquet(d), tmp_path / "out.parquet").run(threads=1)
    expected = pq.read_table([str(d / "a.parquet"), str(d / "b.parquet")])["met"]
    assert r.outputs[str(tmp_path / "out.parquet")] == 100
    assert pq.read_table(tmp_path / "out.parquet")["met"].equals(expected)


def test_a_skim_whose_directory_takes_no_file_is_refused_before_the_job(tmp_path: Path) -> None:
    ran: list[int] = []
    proc = ef.Process("nowhere")
    proc.source = ef.source.synthetic(100, step_size=50)

    @proc.analyzer(consumes=["MET_pt"])
    def seen(ev: ef.Events) -> None:
        ran.append(len(ev))

    proc.output(ef.output.parquet(tmp_path / "file.txt" / "x.parquet", columns=["MET_pt"]))
    (tmp_path / "file.txt").write_text("")
    with pytest.raises(
        ef.ConfigurationError, match=r"cannot create its directory '.*file\.txt': .* is a file"
    ):
        proc.run(threads=1)
    if os.path.isdir("/proc/self"):  # a directory no file can be made in, whatever the permissions
        proc.outputs = []
        proc.output(ef.output.parquet("/proc/x.parquet", columns=["MET_pt"]))
        with pytest.raises(
            ef.ConfigurationError, match=r"skim '/proc/x\.parquet': cannot write in the directory '/proc'"
        ):
            proc.run(threads=1)
    assert ran == [], "refused before any batch"


def test_a_column_listed_twice_is_refused() -> None:
    with pytest.raises(
        ef.ConfigurationError, match=r"Parquet output 'x\.parquet' lists column\(s\) 'met' more"
    ):
        ef.output.parquet("x.parquet", columns=["met", "pt", "met"])


# -- column types ---------------------------------------------------------------


def test_lossless_type_rules() -> None:
    assert holds(pa.float64(), pa.float32()) and not holds(pa.float32(), pa.float64())
    assert holds(pa.int64(), pa.int32()) and not holds(pa.int32(), pa.int64())
    assert holds(pa.float64(), pa.int32()) and not holds(pa.float64(), pa.int64())
    assert not holds(pa.bool_(), pa.int64()) and not holds(pa.int64(), pa.bool_())
    assert not holds(pa.uint64(), pa.int8()) and holds(pa.int16(), pa.uint8())
    assert holds(pa.large_list(pa.float64()), pa.list_(pa.float32()))
    assert not holds(pa.list_(pa.float64()), pa.float64()) and not holds(pa.float64(), pa.list_(pa.float64()))
    assert common_type(pa.float32(), pa.float64()) == pa.float64()
    assert common_type(pa.int32(), pa.uint32()) == pa.int64()
    assert common_type(pa.int64(), pa.float64()) is None


@pytest.mark.parametrize("order", [(0, 1), (1, 0)])
def test_a_branch_of_float32_and_float64_files_is_written_exactly_in_any_order(
    tmp_path: Path, order: tuple[int, int]
) -> None:
    import uproot

    rng = np.random.default_rng(3)
    # float64 values float32 cannot hold: truncation would show.
    narrow = _root(tmp_path / "f32.root", (rng.random(30) * 100).astype(np.float32), [[1.5]] * 30)
    wide = _root(tmp_path / "f64.root", rng.random(40) * 100 + 1e-9, [[2.0, 3.0 + 1e-12]] * 40)
    files = [[narrow, wide][i] for i in order]
    out = tmp_path / "skim.parquet"
    r = _skim(ef.source.root(files, tree="tr", step_size=10), out, ["met", "Jet_pt"]).run(threads=2)
    t = pq.read_table(out)
    ref = [uproot.open(f)["tr"].arrays(["met", "Jet_pt"]) for f in files]
    assert r.outputs[str(out)] == 70
    assert t.schema.field("met").type == pa.float64()
    assert t.schema.field("Jet_pt").type.value_type == pa.float64()
    assert np.array_equal(
        t["met"].to_numpy(), np.concatenate([ak.to_numpy(a.met).astype(np.float64) for a in ref])
    )
    jets = ak.concatenate([ak.values_astype(a.Jet_pt, np.float64) for a in ref])
    assert ak.to_list(ak.from_arrow(t["Jet_pt"])) == ak.to_list(jets)


def test_a_branch_of_incompatible_types_is_refused_naming_both_batches(tmp_path: Path) -> None:
    a = _root(tmp_path / "a.root", np.arange(5.0) + 0.5)
    b = _root(tmp_path / "b.root", np.arange(5, dtype=np.int64))
    out = tmp_path / "skim.parquet"
    with pytest.raises(
        ef.EvflowError,
        match=r"column 'met' is double since batch 0 \(file '.*a\.root'.* but int64 in batch 1 \(file '.*b\.root'",
    ):
        _skim(ef.source.root([a, b], tree="tr"), out).run(threads=1)
    assert sorted(os.listdir(tmp_path)) == ["a.root", "b.root"], "nothing left behind"


def _product_skim(tmp_path: Path, first: Any, later: Any) -> tuple[ef.Process, Path]:
    data = _parquet(tmp_path / "in.parquet", n=60)
    out = tmp_path / "skim.parquet"
    proc = ef.Process("typed")
    proc.source = ef.source.parquet(data, step_size=20)

    @proc.producer(consumes=["met"], produces=["v"])
    def v(ev: ef.Events) -> Any:
        return first(ev.met) if ev.info.index == 0 else later(ev.met)

    proc.output(ef.output.parquet(out, columns=["v"]))
    return proc, out


@pytest.mark.parametrize(
    ("first", "later", "types"),
    [
        (lambda m: m > 30, lambda m: (m * 10).astype(np.int64), "bool since batch 0 .* but int64 in batch 1"),
        (lambda m: m.astype(np.int64), lambda m: m, "int64 since batch 0 .* but double in batch 1"),
        (
            lambda m: m,
            lambda m: ak.unflatten(m, np.ones(len(m), dtype=np.int64)),
            "double since .* but list<double> in batch 1",
        ),
    ],
)
def test_a_product_whose_type_narrows_later_is_refused_named(
    tmp_path: Path, first: Any, later: Any, types: str
) -> None:
    proc, out = _product_skim(tmp_path, first, later)
    with pytest.raises(
        ef.ModuleError, match=rf"skim '.*skim\.parquet'.*column 'v' is {types} \(file '.*in\.parquet'"
    ):
        proc.run(threads=1)
    assert not out.exists()


def test_a_product_whose_later_type_is_wider_widens_the_rows_written(tmp_path: Path) -> None:
    """float32 in the first batch, float64 after: the rows written are
    rewritten as float64, exactly; the skim is the one of the other order."""
    proc, out = _product_skim(tmp_path, lambda m: m.astype(np.float32), lambda m: m)
    proc.run(threads=2)
    met = pq.read_table(tmp_path / "in.parquet")["met"].to_numpy()
    expected = np.concatenate([met[:20].astype(np.float32).astype(np.float64), met[20:]])
    t = pq.read_table(out)
    assert t.schema.field("v").type == pa.float64()
    assert np.array_equal(t["v"].to_numpy(), expected)
    assert sorted(os.listdir(tmp_path)) == ["in.parquet", "skim.parquet"], "no file left behind"


def test_a_product_whose_later_type_fits_exactly_is_widened(tmp_path: Path) -> None:
    proc, out = _product_skim(tmp_path, lambda m: m, lambda m: m.astype(np.float32))
    proc.run(threads=2)
    met = pq.read_table(tmp_path / "in.parquet")["met"].to_numpy()
    expected = np.concatenate([met[:20], met[20:].astype(np.float32).astype(np.float64)])
    t = pq.read_table(out)
    assert t.schema.field("v").type == pa.float64() and np.array_equal(t["v"].to_numpy(), expected)


def test_read_skim_names_the_parts_whose_types_differ(tmp_path: Path) -> None:
    d = tmp_path / "skim"
    d.mkdir()
    pq.write_table(pa.table({"v": pa.array([True, False])}), d / "part-00000.parquet")
    pq.write_table(pa.table({"v": pa.array([277], pa.int64())}), d / "part-00001.parquet")
    schema = pa.schema([("v", pa.bool_())])
    manifest = {
        "process": "t",
        "columns": ["v"],
        "rows": 3,
        "parts": [
            {"chunk": 0, "file": "part-00000.parquet", "rows": 2},
            {"chunk": 1, "file": "part-00001.parquet", "rows": 1},
        ],
        "schema": base64.b64encode(schema.serialize().to_pybytes()).decode(),
    }
    (d / "_manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(
        ef.InputError,
        match=r"disagree on the type of column 'v': bool in '.*part-00000\.parquet' but int64 in '.*part-00001",
    ):
        read_skim(str(d))
