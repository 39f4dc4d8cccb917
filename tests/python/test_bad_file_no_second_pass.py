"""``skip_bad_files=True`` without a second pass: a ROOT file whose fourth
basket does not decompress, between good files, is left out as the job
goes on, in one process and on a 2-worker Dask cluster. Every batch is
processed at most once (an instrumented module logs each batch it runs);
the batches of the bad file read before the failure are taken back, so
histograms (weighted ones included, bit for bit), the cut-flow, the events
and the skim are those of a run without the file and agree with numpy and
awkward computed from the files' own values."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import awkward as ak
import numpy as np
import pyarrow.parquet as pq
import pytest

import evflow as ef
from evflow.distributed import read_skim

pytest.importorskip("distributed")
uproot = pytest.importorskip("uproot")

EVENTS, STEP = 5_000, 1_000
BINS, RANGE = 20, (-3.0, 3.0)
NAMES = "abcd"  # b: its entries 3000-3999 cannot be read


def _values(seed: int, events: int = EVENTS) -> dict[str, Any]:
    rng = np.random.default_rng(100 + seed)
    counts = rng.integers(0, 4, size=events)
    return {
        "x": rng.normal(size=events),
        "w": rng.uniform(0.5, 1.5, size=events),
        "pt": ak.unflatten(rng.exponential(20.0, size=int(counts.sum())), counts),
    }


def _write(path: Path, seed: int, events: int = EVENTS) -> None:
    cols = _values(seed, events)
    with uproot.recreate(path, compression=uproot.ZLIB(4)) as f:
        f.mktree("t", {"x": np.float64, "w": np.float64, "pt": "var * float64"})
        for a in range(0, events, STEP):  # one basket per branch and cluster of STEP entries
            f["t"].extend({k: v[a : a + STEP] for k, v in cols.items()})


def _spoil_basket(path: Path, branch: str, basket: int) -> None:
    b = uproot.open(path)["t"][branch]
    seek = int(b.member("fBasketSeek")[basket])
    size = int(b.basket_compressed_bytes(basket))
    data = bytearray(path.read_bytes())
    start = seek + size // 2  # inside the compressed payload, past the key
    data[start : start + 64] = bytes(64)
    path.write_bytes(bytes(data))


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    d = tmp_path_factory.mktemp("no_second_pass")
    paths = [d / f"{n}.root" for n in NAMES]
    for k, p in enumerate(paths):
        _write(p, k)
    _spoil_basket(paths[1], "x", 3)
    return [str(p) for p in paths]


def _analysis(files: list[str], skim: str, log: Path) -> ef.Process:
    proc = ef.Process("no_second_pass")
    if files[0].endswith(".parquet"):
        proc.source = ef.source.parquet(files, step_size=STEP)
    else:
        proc.source = ef.source.root(files, tree="t", step_size=STEP)
    proc.weight = "w"

    @proc.producer(consumes=["x"], produces=["x_seen"])
    def seen(ev: ef.Events) -> dict[str, Any]:
        # Instrumented: one line per batch run, in this process's own log.
        with open(log / f"{os.getpid()}.log", "a") as f:
            f.write(f"{ev.info.file} {ev.info.entry_start}\n")
        return {"x_seen": ev.x}

    @proc.filter(consumes=["x"])
    def positive(ev: ef.Events) -> Any:
        return ev.x > 0

    @proc.filter(consumes=["pt"])
    def has_jet(ev: ef.Events) -> Any:
        return ak.num(ev.pt) >= 1

    proc.path("sel", [positive, has_jet], reorderable=True)
    proc.histogram("x_all", "x_seen", bins=BINS, range=RANGE)
    proc.histogram("x_weighted", "x", bins=BINS, range=RANGE, weight=True, after="sel")
    proc.histogram("pt", "pt", bins=BINS, range=(0, 100), after="sel")
    proc.output(ef.output.parquet(skim, columns=["x", "pt"]), select="sel")
    return proc


def _reference(seeds: list[int], events: int = EVENTS) -> dict[str, Any]:
    """What a run on the files ``seeds`` gives, from the values with numpy
    and awkward (independent of evflow)."""
    cols = [_values(k, events) for k in seeds]
    x = np.concatenate([c["x"] for c in cols])
    w = np.concatenate([c["w"] for c in cols])
    pt = ak.concatenate([c["pt"] for c in cols])
    keep = (x > 0) & (ak.to_numpy(ak.num(pt)) >= 1)
    return {
        "x_all": np.histogram(x, bins=BINS, range=RANGE)[0],
        "x_weighted": np.histogram(x[keep], bins=BINS, range=RANGE, weights=w[keep])[0],
        "pt": np.histogram(ak.to_numpy(ak.flatten(pt[keep])), bins=BINS, range=(0, 100))[0],
        "passed": int(keep.sum()),
        "weighted_passed": float(w[keep].sum()),
        "skim_x": x[keep],
        "skim_pt": pt[keep],
    }


def _batches_run(log: Path) -> Counter[tuple[str, int]]:
    runs: Counter[tuple[str, int]] = Counter()
    for name in os.listdir(log):
        for line in (log / name).read_text().splitlines():
            file, start = line.rsplit(" ", 1)
            runs[(file, int(start))] += 1
    return runs


@pytest.mark.parametrize(
    "where", ["one process", "one process, one batch at a time", "cluster", "cluster, skip-chunk"]
)
def test_a_corrupt_file_is_left_out_without_a_second_pass(
    client: Any, files: list[str], where: str, tmp_path: Path
) -> None:
    a, b, c, d = files
    clean_log = tmp_path / "clean-log"
    clean_log.mkdir()
    clean = _analysis([a, c, d], str(tmp_path / "clean.parquet"), clean_log).run(threads=2)
    ref = _reference([0, 2, 3])

    log = tmp_path / "log"
    log.mkdir()
    skim = str(tmp_path / "skim.parquet" if "one process" in where else tmp_path / "skim")
    options: dict[str, Any] = {"threads": 2}
    if "one batch" in where:
        # b's first three batches are in the histograms and held for the
        # skim before its fourth is read: they are taken back.
        options = {"threads": 1, "events_in_flight": 1}
    elif "cluster" in where:
        options = {"client": client, "chunk_size": 2 * STEP}
        if "skip-chunk" in where:
            options["on_error"] = "skip-chunk"
    result = _analysis(files, skim, log).run(skip_bad_files=True, **options)

    # The file and its error are named.
    assert result.skipped_files == [b]
    (left,) = result.report["skipped_files"]
    assert left["file"] == b and left["entries"] == [3000, 4000], left
    assert "entries 3000-3999" in left["error"] and b in left["error"], left

    # No batch ran twice: no second pass over a, nor over b's first batches.
    runs = _batches_run(log)
    assert max(runs.values()) == 1, [k for k, n in runs.items() if n > 1]
    for f in (a, c, d):
        assert {s for (g, s) in runs if g == f} == set(range(0, EVENTS, STEP)), f
    assert {s for (g, s) in runs if g == b} <= {0, 1000, 2000, 4000}

    # The results of a run without b, bit for bit, and the references.
    assert result.events == clean.events == 3 * EVENTS
    for name, h in clean.histograms.items():
        got = result.histograms[name]
        assert np.array_equal(h.values(flow=True), got.values(flow=True)), name
        assert np.array_equal(h.variances(flow=True), got.variances(flow=True)), name
        if name == "x_weighted":
            np.testing.assert_allclose(got.values(), ref[name], rtol=1e-12)
        else:
            assert np.array_equal(got.values(), ref[name]), name
    sel = result.cutflow["sel"]
    assert sel.events == 3 * EVENTS and sel.passed == ref["passed"]
    assert sel.weighted_passed == clean.cutflow["sel"].weighted_passed
    assert sel.weighted_passed == pytest.approx(ref["weighted_passed"], rel=1e-12)

    # The skim: the rows of the good files only, in order.
    table = read_skim(skim) if os.path.isdir(skim) else pq.read_table(skim)
    assert np.array_equal(table.column("x").to_numpy(), ref["skim_x"])
    assert ak.to_list(ak.from_arrow(table.column("pt"))) == ak.to_list(ref["skim_pt"])
    assert table.equals(pq.read_table(str(tmp_path / "clean.parquet")))
    assert result.outputs[skim] == ref["passed"]
    if os.path.isdir(skim):  # no part of b's chunks is left in the directory
        parts = [n for n in os.listdir(skim) if n.endswith(".parquet")]
        assert len(parts) == len(read_skim_parts(skim)), parts


def read_skim_parts(skim: str) -> list[str]:
    from evflow.output import read_skim_manifest

    return list(read_skim_manifest(skim).parts)


def test_a_corrupt_first_basket_and_a_corrupt_last_file(files: list[str], tmp_path: Path) -> None:
    """A file bad from its first batch and a bad file read last: both are
    left out, and the job's result is that of the one good file."""
    a, b, _c, d = files
    first = tmp_path / "first.root"
    first.write_bytes(Path(a).read_bytes())
    _spoil_basket(first, "pt", 0)
    log = tmp_path / "log"
    log.mkdir()
    result = _analysis([str(first), d, b], str(tmp_path / "s.parquet"), log).run(
        threads=2, skip_bad_files=True
    )
    assert result.skipped_files == [str(first), b]
    assert [s["entries"] for s in result.report["skipped_files"]] == [[0, 1000], [3000, 4000]]
    ref = _reference([3])
    assert np.array_equal(result.histograms["x_all"].values(), ref["x_all"])
    assert result.cutflow["sel"].passed == ref["passed"] == result.outputs[str(tmp_path / "s.parquet")]
    assert max(_batches_run(log).values()) == 1


def test_every_file_corrupt_writes_no_skim(files: list[str], tmp_path: Path) -> None:
    """Nothing left to run: an InputError naming the file, and no skim."""
    skim = tmp_path / "s.parquet"
    log = tmp_path / "log"
    log.mkdir()
    with pytest.raises(ef.InputError, match=r"no input file can be read: .*entries 3000-3999"):
        _analysis([files[1]], str(skim), log).run(threads=1, skip_bad_files=True)
    assert not skim.exists() and not any(n.startswith(".s.parquet") for n in os.listdir(tmp_path))


def _write_parquet(path: Path, seed: int, events: int) -> None:
    import pyarrow as pa

    cols = _values(seed, events)
    table = pa.table({"x": cols["x"], "w": cols["w"], "pt": ak.to_arrow(cols["pt"], extensionarray=False)})
    pq.write_table(table, path, row_group_size=STEP, compression="zstd")


def _spoil_row_group(path: Path, group: int) -> None:
    column = pq.ParquetFile(path).metadata.row_group(group).column(0)
    start = column.dictionary_page_offset if column.has_dictionary_page else column.data_page_offset
    start += column.total_compressed_size // 2
    data = bytearray(path.read_bytes())
    data[start : start + 64] = bytes(64)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("kind", ["root", "parquet"])
def test_small_files_keep_their_chunks_and_a_bad_one_is_left_out(
    client: Any, tmp_path: Path, kind: str
) -> None:
    """Six files of 2 000 events, chunks of 6 000: each chunk holds three
    files whole, as without ``skip_bad_files`` (no chunk per file). The
    middle file of the second chunk is corrupt: that chunk runs again
    without it (the native Parquet reader too, from the first file's
    start), so only the file before it in the chunk is read twice; the
    result is that of a run without the file."""
    small = 2 * STEP
    paths = [tmp_path / f"s{k}.{kind}" for k in range(6)]
    for k, p in enumerate(paths):
        if kind == "root":
            _write(p, k, small)
        else:
            _write_parquet(p, k, small)
    if kind == "root":
        _spoil_basket(paths[4], "x", 1)
    else:
        _spoil_row_group(paths[4], 1)
    files = [str(p) for p in paths]
    log = tmp_path / "log"
    log.mkdir()
    skim = str(tmp_path / "skim")
    result = _analysis(files, skim, log).run(client=client, chunk_size=3 * small, skip_bad_files=True)
    assert result.skipped_files == [files[4]]
    assert result.report["skipped_files"][0]["entries"] == [1000, 2000]
    chunks = result.report["distributed"]["chunks"]
    assert [[e[0] for e in c["entries"]] for c in chunks] == [files[:3], [files[3], files[5]]]
    runs = _batches_run(log)
    assert {k for k, n in runs.items() if n > 1} <= {(files[3], 0), (files[3], 1000)}, runs
    assert all(runs[(f, a)] >= 1 for f in files[:4] + files[5:] for a in (0, 1000)), runs

    ref = _reference([0, 1, 2, 3, 5], small)
    assert result.events == 5 * small
    assert np.array_equal(result.histograms["x_all"].values(), ref["x_all"])
    np.testing.assert_allclose(result.histograms["x_weighted"].values(), ref["x_weighted"], rtol=1e-12)
    assert result.cutflow["sel"].passed == ref["passed"] == result.outputs[skim]
    table = read_skim(skim)
    assert np.array_equal(table.column("x").to_numpy(), ref["skim_x"])
    assert ak.to_list(ak.from_arrow(table.column("pt"))) == ak.to_list(ref["skim_pt"])
