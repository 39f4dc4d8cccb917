"""Bad input files named and skipped the same way in one process and on a
2-worker Dask cluster: the first bad file in the listed order is the one
an error names; with ``skip_bad_files``, a file whose data fail to be read
(a corrupt basket or row group, found only while the job reads it) is left
out as a whole, so the result is that of a run without it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import evflow as ef
from evflow.distributed import read_skim

distributed = pytest.importorskip("distributed")

EVENTS, STEP = 5_000, 1_000


def _values(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"x": rng.normal(size=EVENTS), "n": rng.integers(0, 5, size=EVENTS).astype(np.int32)}


def _write_root(path: Path, seed: int) -> None:
    import uproot

    cols = _values(seed)
    with uproot.recreate(path, compression=uproot.ZLIB(4)) as f:
        f.mktree("t", {"x": np.float64, "n": np.int32})
        for a in range(0, EVENTS, STEP):  # one basket per cluster of STEP entries
            f["t"].extend({k: v[a : a + STEP] for k, v in cols.items()})


def _write_parquet(path: Path, seed: int) -> None:
    table = pa.table(_values(seed))
    pq.write_table(table, path, row_group_size=STEP, compression="zstd")


def _spoil(path: Path, start: int, length: int = 64) -> None:
    """Overwrites ``length`` bytes from ``start`` with zeros (a copy whose
    compressed data no longer decompress)."""
    data = bytearray(path.read_bytes())
    data[start : start + length] = bytes(length)
    path.write_bytes(bytes(data))


def _spoil_root_basket(path: Path, basket: int) -> None:
    import uproot

    branch = uproot.open(path)["t"]["x"]
    seek = int(branch.member("fBasketSeek")[basket])
    size = int(branch.basket_compressed_bytes(basket))
    _spoil(path, seek + size // 2)  # inside the compressed payload, past the key


def _spoil_parquet_row_group(path: Path, group: int) -> None:
    column = pq.ParquetFile(path).metadata.row_group(group).column(0)
    start = column.dictionary_page_offset if column.has_dictionary_page else column.data_page_offset
    _spoil(path, start + column.total_compressed_size // 2)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """ROOT and Parquet files a, b, c; b's data are corrupt in entries
    3000-3999 (its fourth basket, its fourth row group); a truncated copy
    of a and a path that does not exist."""
    d = tmp_path_factory.mktemp("bad_data")
    out: dict[str, Any] = {"dir": d}
    for ext, write, spoil in (("root", _write_root, _spoil_root_basket), ("parquet", _write_parquet, _spoil_parquet_row_group)):  # fmt: skip
        files = [d / f"{name}.{ext}" for name in "abc"]
        for k, f in enumerate(files):
            write(f, k)
        spoil(files[1], 3)
        out[ext] = [str(f) for f in files]
    truncated = d / "truncated.root"
    data = Path(out["root"][0]).read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    out["truncated"] = str(truncated)
    out["missing"] = str(d / "missing.root")
    return out


def _source(kind: str, files: list[str]) -> ef.source.Source:
    if kind == "root":
        return ef.source.root(files, tree="t", step_size=STEP)
    return ef.source.parquet(files, step_size=STEP)


def _analysis(source: ef.source.Source, skim: str | None = None) -> ef.Process:
    proc = ef.Process("bad_data")
    proc.source = source

    @proc.filter(consumes=["x"])
    def positive(ev: ef.Events) -> np.ndarray:
        return ev.x > 0

    @proc.filter(consumes=["n"])
    def some(ev: ef.Events) -> np.ndarray:
        return ev.n >= 1

    proc.path("sel", [positive, some], reorderable=True)
    proc.histogram("x", bins=20, range=(-3, 3), after="sel")
    proc.histogram("x_all", "x", bins=20, range=(-3, 3))
    if skim is not None:
        proc.output(ef.output.parquet(skim, columns=["x", "n"]), select="sel")
    return proc


def _skim_rows(path: str) -> pa.Table:
    return read_skim(path) if os.path.isdir(path) else pq.read_table(path)


def _reference(files: list[str]) -> tuple[np.ndarray, int]:
    """Histogram of x after the selection and the events selected, with
    numpy from the files' own values (independent of evflow)."""
    x = np.concatenate([_values(k)["x"] for k in files])
    n = np.concatenate([_values(k)["n"] for k in files])
    keep = (x > 0) & (n >= 1)
    return np.histogram(x[keep], bins=20, range=(-3, 3))[0], int(keep.sum())


@pytest.mark.parametrize("order", ["truncated first", "missing first"])
def test_the_first_bad_file_listed_is_named_alike(client: Any, inputs: dict[str, Any], order: str) -> None:
    """A truncated file and a missing one, without ``skip_bad_files``: one
    process and the cluster both name the one listed first."""
    good, truncated, missing = inputs["root"][0], inputs["truncated"], inputs["missing"]
    bad = [truncated, missing] if order == "truncated first" else [missing, truncated]
    files = [good, *bad]
    named = []
    for options in ({"threads": 1}, {"client": client}):
        with pytest.raises(ef.InputError) as err:
            _analysis(_source("root", files)).run(**options)
        named.append(err.value)
    first = bad[0]
    for e in named:
        assert f"'{first}'" in str(e) and f"'{bad[1]}'" not in str(e), str(e)
    assert type(named[0]) is type(named[1]), named
