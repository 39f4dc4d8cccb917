"""What the command line writes (``--report``, ``--trace``, ``--save``,
``--plot``) is checked before the job starts and written without replacing
links or devices; the data tool and the API's typed arguments give clear
errors."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from pathlib import Path

import hist
import numpy as np
import pytest

import evflow as ef
from evflow.cli import main

ANALYSIS = """
import pathlib
import evflow as ef

pathlib.Path(__file__).with_name("loaded").touch()  # the analysis file was run
proc = ef.Process("cli")
proc.source = ef.source.synthetic(400, step_size=200)
proc.histogram("met", column="MET_pt", bins=10, range=(0, 200))
"""


@pytest.fixture
def analysis(tmp_path: Path) -> Path:
    path = tmp_path / "analysis.py"
    path.write_text(ANALYSIS)
    return path


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (
            ["--report", "/nonexistent/dir/r.json"],
            r"--report /nonexistent/dir/r\.json: no directory '/nonexistent/dir'",
        ),
        (["--trace", "{tmp}/no/t.json"], r"--trace .*/no/t\.json: no directory '.*/no'"),
        (["--report", "{tmp}"], r"--report .*: is a directory"),
        (["--report", "{tmp}/r.json", "--trace", "{tmp}/r.json"], r"--report and --trace name the same file"),
        (["--report", "{tmp}/analysis.py"], r"--report .*analysis\.py is the analysis file"),
        (["--save", "{tmp}/analysis.py"], r"--save .*analysis\.py: not a directory \(is a file\)"),
        (["--plot", "{tmp}/analysis.py/plots"], r"--plot .*: not a directory \('.*analysis\.py' is a file\)"),
    ],
)
def test_output_options_are_checked_before_the_job(
    analysis: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str], says: str
) -> None:
    argv = ["run", str(analysis), "-q", *(o.replace("{tmp}", str(tmp_path)) for o in options)]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("evflow: error: ") and __import__("re").search(says, err), err
    assert not (tmp_path / "loaded").exists(), "refused before the analysis ran"
    assert analysis.read_text() == ANALYSIS


@pytest.mark.parametrize("option", ["--report", "--trace"])
def test_a_report_or_trace_onto_the_analysis_skim_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str
) -> None:
    """Written after the skim, either replaced it (the skim lost, exit 0)."""
    skim = tmp_path / "skim.parquet"
    path = tmp_path / "skimming.py"
    path.write_text(ANALYSIS + f"proc.output(ef.output.parquet({str(skim)!r}, columns=['MET_pt']))\n")
    assert main(["run", str(path), "-q", option, str(skim)]) == 1
    err = capsys.readouterr().err
    assert "is the skim" in err and "would be overwritten" in err, err
    assert not skim.exists(), "refused before the job ran"


def test_a_report_follows_a_link_and_replaces_a_file_whole(analysis: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere" / "report.json"
    target.parent.mkdir()
    link = tmp_path / "report.json"
    link.symlink_to(target)  # a link to a file not written yet
    assert main(["run", str(analysis), "-q", "--report", str(link), "--save", str(tmp_path / "saved")]) == 0
    assert link.is_symlink() and json.loads(target.read_text())["events_processed"] == 400
    assert json.loads((tmp_path / "saved" / "report.json").read_text())["events_processed"] == 400
    target.write_text("old")
    assert main(["run", str(analysis), "-q", "--report", str(target)]) == 0
    assert json.loads(target.read_text())["events_processed"] == 400
    assert sorted(os.listdir(target.parent)) == ["report.json"], "no partial file left"


def test_a_report_into_a_pipe_is_written_into_it(analysis: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    try:
        assert main(["run", str(analysis), "-q", "--report", str(fifo)]) == 0
    finally:
        if reader.is_alive():  # the run failed before opening it: let the reader end
            # Without blocking: the reader may have just read the report and
            # be ending, and a blocking open would then wait for ever.
            with contextlib.suppress(OSError):  # no reader waits on the pipe
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(timeout=10)
    assert fifo.is_fifo(), "the pipe is not replaced by a regular file"
    assert json.loads(got[0])["events_processed"] == 400


def test_result_save_and_plot_onto_a_file_are_named(tmp_path: Path) -> None:
    proc = ef.Process("saved")
    proc.source = ef.source.synthetic(100)
    result = proc.run(threads=1)
    a_file = tmp_path / "x.json"
    a_file.write_text("mine")
    with pytest.raises(ef.ConfigurationError, match=r"Result\.save: '.*x\.json' is a file, not a directory"):
        result.save(a_file)
    with pytest.raises(ef.ConfigurationError, match=r"plot: '.*x\.json' is a file, not a directory"):
        result.plot(a_file)
    assert a_file.read_text() == "mine"


def test_resampling_a_tree_without_entries_names_file_and_tree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import uproot

    from evflow.data import main as data_main

    empty = tmp_path / "empty.root"
    with uproot.recreate(empty) as f:
        f.mktree("tr", {"met": np.float64})
    out = tmp_path / "out.parquet"
    assert data_main(["resample", str(empty), "--tree", "tr", "--events", "10", "--out", str(out), "-q"]) == 1
    err = capsys.readouterr().err
    assert f"cannot resample file '{empty}': its tree 'tr' has no entry" in err
    assert not out.exists()


# -- typed arguments of the API ----------------------------------------------------


def _proc() -> ef.Process:
    proc = ef.Process("args")
    proc.source = ef.source.synthetic(300, step_size=100)
    return proc


def test_boolean_and_progress_arguments_are_checked_when_given() -> None:
    proc = _proc()

    @proc.filter(consumes=["MET_pt"])
    def low(ev: ef.Events) -> np.ndarray:
        return ev.MET_pt < 50

    with pytest.raises(
        ef.ConfigurationError, match=r"path 'p': reorderable must be True or False, not 'yes'"
    ):
        proc.path("p", [low], reorderable="yes")  # type: ignore[arg-type]
    proc.path("p", [low], reorderable=True)
    for kwargs, says in [
        ({"progress": "yes"}, r"progress must be True .*, not 'yes'"),
        ({"progress": 3}, r"progress must be True .*, not 3"),
        ({"trace": 1}, r"trace must be True or False, not 1"),
        ({"skip_bad_files": "no"}, r"skip_bad_files must be True or False, not 'no'"),
    ]:
        with pytest.raises(ef.ConfigurationError, match=says):
            proc.run(threads=1, **kwargs)
    with pytest.raises(ef.ConfigurationError, match=r"module 'f': device_required must be True or False"):
        proc.filter(lambda ev: ev.MET_pt > 0, label="f", device_required="yes")  # type: ignore[arg-type]
    calls: list[tuple[int, int]] = []
    assert proc.run(threads=1, progress=lambda b, e: calls.append((b, e))).events == 300
    assert calls[-1] == (3, 300)


def test_a_growing_regular_axis_is_refused_and_a_growing_category_works() -> None:
    proc = _proc()
    with pytest.raises(
        ef.ConfigurationError, match=r"histogram 'g': axis 0 is a growing Regular axis .*cannot merge"
    ):
        proc.histogram("g", column="MET_pt", hist=hist.Hist(hist.axis.Regular(10, 0, 50, growth=True)))
    proc.histogram("n", column="nJet", hist=hist.Hist(hist.axis.IntCategory([], growth=True)))
    seen: list[np.ndarray] = []

    @proc.analyzer(consumes=["nJet"])
    def keep(ev: ef.Events) -> None:
        seen.append(np.asarray(ev.nJet))

    h = proc.run(threads=2).histograms["n"]
    values, counts = np.unique(np.concatenate(seen), return_counts=True)
    assert {int(c): h[hist.loc(int(c))] for c in values} == dict(
        zip(values.tolist(), counts.tolist(), strict=True)
    )


def test_a_histogram_of_an_unknown_column_is_named() -> None:
    proc = _proc()
    proc.histogram("h", column="nonexist", bins=3, range=(0, 1))
    with pytest.raises(
        ef.MissingBranchError,
        match=r"branch 'nonexist' not found in the synthetic source; histogram 'h' reads 'nonexist', which is "
        "neither a product of a producer nor a branch of the input",
    ):
        proc.run(threads=1)


def test_resample_and_root_patterns_say_what_is_wrong(tmp_path: Path) -> None:
    from evflow.data import resample

    with pytest.raises(
        ef.ConfigurationError, match=r"events \(--events\) and chunk \(--chunk\) must be positive"
    ):
        resample("x.root", str(tmp_path / "o.parquet"), tree="t", events=0)
    pq_file = tmp_path / "in.parquet"
    pq_file.write_bytes(b"PAR1")
    with pytest.raises(ef.ConfigurationError, match=r"resample reads ROOT files; .* is a Parquet file"):
        resample(str(pq_file), str(tmp_path / "o.parquet"), tree="t", events=5)
    with pytest.raises(ef.InputError, match=r"a pattern is not expanded; list the files"):
        ef.source.root(str(tmp_path / "data_*.root"), tree="t").empty_batch(["x"], None)


def test_a_saved_result_loads_back(tmp_path: Path) -> None:
    proc = ef.Process("saved")
    proc.source = ef.source.synthetic(events=300, step_size=100)

    @proc.filter(consumes=["MET_pt"])
    def met(ev: ef.Events) -> np.ndarray:
        return ev.MET_pt > 20

    proc.path("sr", [met])
    proc.histogram("met", column="MET_pt", bins=10, range=(0, 200), after="sr")
    result = proc.run(threads=1)
    result.save(tmp_path / "out")
    back = ef.Result.load(tmp_path / "out")
    assert back.cutflow.to_dict() == result.cutflow.to_dict()
    assert back.cutflow.table() == result.cutflow.table()
    assert back.histograms["met"] == result.histograms["met"]
    assert back.events == result.events and back.process == "saved"
    with pytest.raises(ef.InputError, match=r"is not a saved result \(Result.save\)"):
        ef.Result.load(tmp_path)


def test_fill_may_return_values_by_axis_name() -> None:
    proc = ef.Process("named")
    proc.source = ef.source.synthetic(events=400, step_size=100)
    h = hist.Hist(hist.axis.Regular(10, 0, 200, name="met"), hist.axis.Regular(4, 0, 4, name="n"))
    proc.histogram(
        "by_name", hist=h, fill=lambda ev: {"n": ev.nJet, "met": ev.MET_pt}, consumes=["MET_pt", "nJet"]
    )
    proc.histogram(
        "by_order", hist=h.copy(), fill=lambda ev: (ev.MET_pt, ev.nJet), consumes=["MET_pt", "nJet"]
    )
    result = proc.run(threads=1)
    assert result.histograms["by_name"] == result.histograms["by_order"]
    assert result.histograms["by_name"].sum() > 0
    wrong = ef.Process("wrong")
    wrong.source = ef.source.synthetic(events=100, step_size=100)
    wrong.histogram("w", hist=h.copy(), fill=lambda ev: {"met": ev.MET_pt}, consumes=["MET_pt"])
    with pytest.raises(ef.EvflowError, match=r"fill= returned the keys \['met'\], but the axes are named"):
        wrong.run(threads=1)


@pytest.mark.parametrize("step_size", [1.5, "100", 2**64, 0, True])
def test_a_step_size_that_is_no_whole_number_of_entries_is_refused(step_size: object) -> None:
    """1.5 ran as 1 (batches of one event), a string or 2**64 failed only in
    the run with a raw TypeError or OverflowError."""
    for make in (
        lambda: ef.source.parquet("x.parquet", step_size=step_size),  # type: ignore[arg-type]
        lambda: ef.source.root("x.root", tree="t", step_size=step_size),  # type: ignore[arg-type]
        lambda: ef.source.synthetic(10, step_size=step_size),  # type: ignore[arg-type]
    ):
        with pytest.raises(ef.ConfigurationError, match="step_size must be"):
            make()


def test_a_corrupt_row_group_read_with_pyarrow_names_file_and_entries(tmp_path: Path) -> None:
    """pyarrow's own message ("Couldn't deserialize thrift") named neither."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "bad.parquet"
    table = pa.table({"x": np.arange(10_000, dtype=np.float64)})
    pq.write_table(table, path, row_group_size=1_000, compression="none")
    offset = pq.ParquetFile(path).metadata.row_group(5).column(0).data_page_offset
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(b"\xff" * 32)
    proc = ef.Process("corrupt")
    proc.source = ef.source.parquet(str(path), step_size=1_000, engine="pyarrow")
    proc.histogram("x", bins=10, range=(0, 10_000))
    with pytest.raises(ef.EvflowError, match=r"file '.*bad\.parquet', entries from 5000"):
        proc.run(threads=1)
