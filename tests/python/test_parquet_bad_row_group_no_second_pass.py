"""``skip_bad_files=True`` with the native Parquet reader in one process: a
file with a row group that does not decompress (in the middle of the file,
its first or its last row group) is left out as the job goes on, without
running the job again. The reader counts the row groups it decodes
(``_evflow.parquet_row_groups_read``) and an instrumented module logs each
batch it runs: the other files' row groups are decoded once and their
batches run once. Histograms (weighted ones bit for bit), the cut-flow,
the events and the skim are those of a run without the file and agree with
numpy and awkward computed from the files' own values."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import awkward as ak
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import evflow as ef
from evflow import _evflow

EVENTS, GROUP = 5_000, 1_000  # five row groups per file
BINS, RANGE = 20, (-3.0, 3.0)


def _values(seed: int, events: int = EVENTS) -> dict[str, Any]:
    rng = np.random.default_rng(200 + seed)
    counts = rng.integers(0, 4, size=events)
    return {
        "x": rng.normal(size=events),
        "w": rng.uniform(0.5, 1.5, size=events),
        "pt": ak.unflatten(rng.exponential(20.0, size=int(counts.sum())), counts),
    }


def _write(path: Path, seed: int, events: int = EVENTS) -> None:
    cols = _values(seed, events)
    table = pa.table({"x": cols["x"], "w": cols["w"], "pt": ak.to_arrow(cols["pt"], extensionarray=False)})
    pq.write_table(table, path, row_group_size=GROUP, compression="zstd")


def _spoil_row_group(path: Path, group: int) -> None:
    """Zeros in the middle of the compressed data of the row group's first column."""
    column = pq.ParquetFile(path).metadata.row_group(group).column(0)
    start = column.dictionary_page_offset if column.has_dictionary_page else column.data_page_offset
    start += column.total_compressed_size // 2
    data = bytearray(path.read_bytes())
    data[start : start + 64] = bytes(64)
    path.write_bytes(bytes(data))


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    d = tmp_path_factory.mktemp("parquet_bad_row_group")
    paths = [d / f"{n}.parquet" for n in "abcd"]
    for k, p in enumerate(paths):
        _write(p, k)
    return [str(p) for p in paths]


def _corrupt_copy(good: list[str], tmp_path: Path, group: int) -> str:
    """A copy of file b whose row group ``group`` does not decompress."""
    bad = tmp_path / f"b-{group}.parquet"
    bad.write_bytes(Path(good[1]).read_bytes())
    _spoil_row_group(bad, group)
    return str(bad)


def _analysis(
    files: list[str], skim: str, log: Path, step: int = GROUP, engine: str = "native"
) -> ef.Process:
    proc = ef.Process("parquet_bad_row_group")
    proc.source = ef.source.parquet(files, step_size=step, engine=engine)
    proc.weight = "w"

    @proc.producer(consumes=["x"], produces=["x_seen"])
    def seen(ev: ef.Events) -> dict[str, Any]:
        # Instrumented: one line per batch run.
        with open(log, "a") as f:
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


def _reference(seeds: list[int]) -> dict[str, Any]:
    """What a run on the files ``seeds`` gives, from the values with numpy
    and awkward (independent of evflow)."""
    cols = [_values(k) for k in seeds]
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
    for line in log.read_text().splitlines() if log.exists() else []:
        file, start = line.rsplit(" ", 1)
        runs[(file, int(start))] += 1
    return runs


def _row_groups_read() -> dict[str, int]:
    return dict(_evflow.parquet_row_groups_read())


@pytest.mark.parametrize("group", [2, 0, 4], ids=["middle row group", "first row group", "last row group"])
@pytest.mark.parametrize("options", [{"threads": 2}, {"threads": 1, "events_in_flight": 1}], ids=["2 threads", "one batch at a time"])  # fmt: skip
def test_a_corrupt_row_group_leaves_its_file_out_without_a_second_pass(
    good: list[str], tmp_path: Path, group: int, options: dict[str, Any]
) -> None:
    a, _b, c, d = good
    b = _corrupt_copy(good, tmp_path, group)
    clean = _analysis([a, c, d], str(tmp_path / "clean.parquet"), tmp_path / "clean.log").run(threads=2)
    ref = _reference([0, 2, 3])

    log = tmp_path / "run.log"
    skim = str(tmp_path / "skim.parquet")
    before = _row_groups_read()
    result = _analysis([a, b, c, d], skim, log).run(skip_bad_files=True, **options)
    read = {f: n - before.get(f, 0) for f, n in _row_groups_read().items()}

    # The file, the row group and the error are named.
    assert result.skipped_files == [b]
    (left,) = result.report["skipped_files"]
    first, stop = group * GROUP, (group + 1) * GROUP
    assert left["file"] == b and left["entries"] == [first, stop], left
    assert f"file '{b}', row group {group} (entries {first}-{stop - 1})" in left["error"], left
    assert "corrupt" in left["error"].lower(), left  # the decoder's own words

    # Every row group of the other files decoded once, every batch run once;
    # b's batches before the failure ran once and none after it.
    assert read[a] == read[c] == read[d] == EVENTS // GROUP, read
    assert group + 1 <= read[b] <= EVENTS // GROUP, read
    runs = _batches_run(log)
    assert max(runs.values()) == 1, [k for k, n in runs.items() if n > 1]
    for f in (a, c, d):
        assert {s for (g, s) in runs if g == f} == set(range(0, EVENTS, GROUP)), f
    assert {s for (g, s) in runs if g == b} == set(range(0, first, GROUP))

    # The results of a run without b, bit for bit, and the references.
    assert result.events == clean.events == 3 * EVENTS
    assert result.report["batches"] == clean.report["batches"] == 15
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
    table = pq.read_table(skim)
    assert np.array_equal(table.column("x").to_numpy(), ref["skim_x"])
    assert ak.to_list(ak.from_arrow(table.column("pt"))) == ak.to_list(ref["skim_pt"])
    assert table.equals(pq.read_table(str(tmp_path / "clean.parquet")))
    assert result.outputs[skim] == ref["passed"]


def test_without_skip_bad_files_the_row_group_fails_the_job(good: list[str], tmp_path: Path) -> None:
    a, _b, c, _d = good
    b = _corrupt_copy(good, tmp_path, 2)
    skim = tmp_path / "s.parquet"
    with pytest.raises(ef.JobError, match=rf"file '{b}', row group 2 \(entries 2000-2999\): "):
        _analysis([a, b, c], str(skim), tmp_path / "run.log").run(threads=2)
    assert not skim.exists()


def test_row_groups_read_together_are_named_together(good: list[str], tmp_path: Path) -> None:
    """A step of two row groups decodes them as one unit: the error names
    both and the file is left out from the first."""
    a, _b, _c, d = good
    b = _corrupt_copy(good, tmp_path, 3)
    result = _analysis([a, b, d], str(tmp_path / "s.parquet"), tmp_path / "run.log", step=2 * GROUP).run(
        threads=2, skip_bad_files=True
    )
    (left,) = result.report["skipped_files"]
    assert left["entries"] == [2000, 4000], left
    assert f"file '{b}', row groups 2-3 (entries 2000-3999)" in left["error"], left
    ref = _reference([0, 3])
    assert np.array_equal(result.histograms["x_all"].values(), ref["x_all"])
    assert result.cutflow["sel"].passed == ref["passed"]


def test_every_file_corrupt_is_an_input_error_and_writes_no_skim(good: list[str], tmp_path: Path) -> None:
    b = _corrupt_copy(good, tmp_path, 1)
    skim = tmp_path / "s.parquet"
    with pytest.raises(
        ef.InputError, match=r"no input file can be read: .*row group 1 \(entries 1000-1999\)"
    ):
        _analysis([b], str(skim), tmp_path / "run.log").run(threads=1, skip_bad_files=True)
    assert not skim.exists() and not any(n.startswith(".s.parquet") for n in os.listdir(tmp_path))


@pytest.mark.parametrize("group", [2, 0, 4], ids=["middle row group", "first row group", "last row group"])
def test_the_pyarrow_engine_leaves_a_corrupt_file_out_without_a_second_pass(
    good: list[str], tmp_path: Path, group: int
) -> None:
    """``engine="pyarrow"`` reads the files one after the other in Python:
    the file is left out from its failing row group on, as the native
    reader leaves it, and the other files' batches run once."""
    a, _b, c, d = good
    b = _corrupt_copy(good, tmp_path, group)
    clean = _analysis([a, c, d], str(tmp_path / "clean.parquet"), tmp_path / "clean.log", engine="pyarrow")
    clean_result = clean.run(threads=2)
    log = tmp_path / "run.log"
    skim = str(tmp_path / "skim.parquet")
    result = _analysis([a, b, c, d], skim, log, engine="pyarrow").run(skip_bad_files=True, threads=2)

    first = group * GROUP
    assert result.skipped_files == [b]
    (left,) = result.report["skipped_files"]
    assert left["file"] == b and left["entries"] == [first, EVENTS], left
    assert f"reading file '{b}', entries from {first}: " in left["error"], left
    runs = _batches_run(log)
    assert max(runs.values()) == 1, [k for k, n in runs.items() if n > 1]
    for f in (a, c, d):
        assert {s for (g, s) in runs if g == f} == set(range(0, EVENTS, GROUP)), f
    assert {s for (g, s) in runs if g == b} == set(range(0, first, GROUP))

    ref = _reference([0, 2, 3])
    assert result.events == clean_result.events == 3 * EVENTS
    for name, h in clean_result.histograms.items():
        got = result.histograms[name]
        assert np.array_equal(h.values(flow=True), got.values(flow=True)), name
        assert np.array_equal(h.variances(flow=True), got.variances(flow=True)), name
    assert np.array_equal(result.histograms["x_all"].values(), ref["x_all"])
    assert result.cutflow["sel"].passed == ref["passed"]
    assert pq.read_table(skim).equals(pq.read_table(str(tmp_path / "clean.parquet")))


def test_the_pyarrow_engine_without_skip_bad_files_names_the_file_and_entries(
    good: list[str], tmp_path: Path
) -> None:
    a, _b, c, _d = good
    b = _corrupt_copy(good, tmp_path, 2)
    with pytest.raises(ef.JobError, match=rf"reading file '{b}', entries from 2000: "):
        _analysis([a, b, c], str(tmp_path / "s.parquet"), tmp_path / "run.log", engine="pyarrow").run(
            threads=2
        )


def test_the_pyarrow_engine_on_a_cluster_leaves_a_corrupt_file_out(
    good: list[str], tmp_path: Path, client: Any
) -> None:
    """On a cluster the chunk that fails names the file and its entries, so
    the file is left out there too (before, the error named no entries and
    failed the job)."""
    a, _b, c, d = good
    b = _corrupt_copy(good, tmp_path, 2)
    clean = _analysis([a, c, d], str(tmp_path / "clean.parquet"), tmp_path / "clean.log", engine="pyarrow")
    clean_result = clean.run(threads=2)
    proc = _analysis([a, b, c, d], str(tmp_path / "skim"), tmp_path / "run.log", engine="pyarrow")
    result = proc.run(skip_bad_files=True, client=client, chunk_size=2 * GROUP)
    assert result.skipped_files == [b]
    (left,) = result.report["skipped_files"]
    assert left["file"] == b and left["entries"][1] == EVENTS, left
    assert f"reading file '{b}', entries from " in left["error"], left
    assert result.events == clean_result.events == 3 * EVENTS
    for name, h in clean_result.histograms.items():
        assert np.array_equal(h.values(flow=True), result.histograms[name].values(flow=True)), name
    assert result.cutflow["sel"].passed == clean_result.cutflow["sel"].passed
