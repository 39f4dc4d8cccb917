"""Bad input files named and skipped the same way in one process and on a
2-worker Dask cluster: the first bad file in the listed order is the one
an error names; with ``skip_bad_files``, a file whose data fail to be read
(a corrupt basket or row group, found only while the job reads it) is left
out as a whole, so the result is that of a run without it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
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


@pytest.mark.parametrize("kind", ["root", "parquet"])
def test_corrupt_file_data_skip_the_whole_file(client: Any, inputs: dict[str, Any], kind: str, tmp_path: Path) -> None:  # fmt: skip
    """With ``skip_bad_files``, a file whose fourth basket / row group does
    not decompress is left out whole, in one process and on a cluster (also
    with ``on_error="skip-chunk"``): histograms, cut-flow and skim equal a
    run without it and the numpy reference, and the result names the file
    and the entries that failed. Without it, the error names them."""
    a, b, c = inputs[kind]
    clean = _analysis(_source(kind, [a, c]), str(tmp_path / "clean.parquet")).run(threads=1)
    expected, selected = _reference([0, 2])
    assert np.array_equal(clean.histograms["x"].values(), expected)
    assert clean.cutflow["sel"].passed == selected
    runs = {
        "one process": dict(threads=2),
        "cluster": dict(client=client, chunk_size=STEP),
        "cluster, skip-chunk": dict(client=client, chunk_size=2 * STEP, on_error="skip-chunk"),
    }
    for what, options in runs.items():
        skim = str(tmp_path / f"skim-{what.replace(' ', '').replace(',', '')}")
        proc = _analysis(_source(kind, [a, b, c]), skim)
        result = proc.run(skip_bad_files=True, **options)
        assert result.skipped_files == [b], what
        (left,) = result.report["skipped_files"]
        assert left["file"] == b and left["entries"][0] == 3000, (what, left)
        assert "3000" in left["error"], (what, left)
        assert result.events == clean.events == 2 * EVENTS, what
        for name, h in clean.histograms.items():
            same = np.array_equal(h.values(flow=True), result.histograms[name].values(flow=True))
            assert same, (what, name)
        # A filter's `seen` depends on the order adaptive ordering ran; what passes does not.
        assert result.cutflow["sel"].passed == selected, what
        assert _skim_rows(skim).equals(_skim_rows(str(tmp_path / "clean.parquet"))), what
        if "cluster" in what:
            assert result.skipped_chunks == [], what  # the file is left out, not a chunk of it
        assert proc.source.files == [a, b, c]  # the analysis's own source is unchanged

    for options in ({"threads": 1}, {"client": client, "chunk_size": STEP}):
        with pytest.raises(ef.JobError, match=rf"{b}'?, .*entries (3000-3999|from 3000)"):
            _analysis(_source(kind, [a, b, c])).run(**options)


def test_every_file_corrupt_is_an_input_error(inputs: dict[str, Any]) -> None:
    """Nothing left to run: the error names the files left out."""
    b = inputs["root"][1]
    with pytest.raises(ef.InputError, match="no input file can be read"):
        _analysis(_source("root", [b])).run(threads=1, skip_bad_files=True)


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


def test_bad_files_skipped_alike_in_one_process_and_on_a_cluster(client: Any, inputs: dict[str, Any]) -> None:
    """Truncated, missing and corrupt files together: both list the same
    files left out (those that do not open first, in the listed order, then
    the corrupt one) and give the same histograms."""
    a, b, c = inputs["root"]
    files = [a, inputs["truncated"], b, inputs["missing"], c]
    one = _analysis(_source("root", files)).run(threads=1, skip_bad_files=True)
    dist = _analysis(_source("root", files)).run(client=client, skip_bad_files=True)
    assert one.skipped_files == dist.skipped_files == [inputs["truncated"], inputs["missing"], b]
    for name, h in one.histograms.items():
        assert np.array_equal(h.values(flow=True), dist.histograms[name].values(flow=True)), name
    assert np.array_equal(one.histograms["x"].values(), _reference([0, 2])[0])


def test_corrupt_copy_is_left_out_of_the_input_only(inputs: dict[str, Any], tmp_path: Path) -> None:
    """The file's name, not its contents, is what is left out: a good copy
    of it under another name is read."""
    a, b, _c = inputs["root"]
    copy = tmp_path / "a_copy.root"
    shutil.copy(a, copy)
    r = _analysis(_source("root", [a, b, str(copy)])).run(threads=1, skip_bad_files=True)
    assert r.skipped_files == [b]
    assert np.array_equal(r.histograms["x"].values(), _reference([0, 0])[0])


def test_the_command_line_names_the_entries_of_a_corrupt_file_left_out(inputs: dict[str, Any], tmp_path: Path) -> None:  # fmt: skip
    """`evflow run --skip-bad-files` says which entries of a file that
    opened could not be read, and why, besides the file's name."""
    files = inputs["parquet"]
    analysis = tmp_path / "analysis.py"
    analysis.write_text(
        "import evflow as ef\n"
        "proc = ef.Process('cli_bad_data')\n"
        f"proc.source = ef.source.parquet({files!r}, step_size={STEP})\n"
        "proc.histogram('x', bins=20, range=(-3, 3))\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "evflow", "run", str(analysis), "--skip-bad-files", "--threads", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "1 input file was left out (skip_bad_files):" in out.stdout, out.stdout
    lines = [line for line in out.stdout.splitlines() if line.startswith(f"  {files[1]}")]
    assert len(lines) == 1, out.stdout
    assert lines[0].startswith(f"  {files[1]} (entries 3000-3999 could not be read): ")
