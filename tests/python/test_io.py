"""Parquet input (native Rust reader and pyarrow), the data tool, the
command line and plots."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import awkward as ak
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import uproot

import evflow as ef
from conftest import ROOT, load_example


@pytest.fixture(scope="module")
def resampled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from conftest import data_file

    src = data_file("uproot-HZZ.root")
    d = tmp_path_factory.mktemp("resampled")
    out = {}
    for ext in ("parquet", "root"):
        out[ext] = Path(
            ef.data.resample(
                str(src), str(d / f"hzz.{ext}"), tree="events", events=12_000, seed=3, chunk=2_500
            )
        )
    return out


def test_resample_is_deterministic_real_events(
    resampled: dict[str, Path], hzz_file: Path, tmp_path: Path
) -> None:
    again = ef.data.resample(
        str(hzz_file), str(tmp_path / "again.parquet"), tree="events", events=12_000, seed=3, chunk=2_500
    )
    assert Path(again).read_bytes() == resampled["parquet"].read_bytes()
    t = pq.read_table(resampled["parquet"])
    assert t.num_rows == 12_000
    assert pq.ParquetFile(resampled["parquet"]).num_row_groups == 5
    orig = uproot.open(hzz_file)["events"].arrays(["MET_px", "NJet"], library="np")
    assert np.isin(t.column("MET_px").to_numpy(), orig["MET_px"]).all()
    r = uproot.open(resampled["root"])["events"]
    assert r.num_entries == 12_000 and list(r.common_entry_offsets()) == [0, 2500, 5000, 7500, 10000, 12000]
    np.testing.assert_array_equal(r["MET_px"].array(library="np"), t.column("MET_px").to_numpy())
    assert ak.all(r["Jet_Px"].array() == ak.from_arrow(t.column("Jet_Px")))


def test_same_analysis_on_root_parquet_native_and_pyarrow(resampled: dict[str, Path]) -> None:
    ex = load_example("ttbar_hzz")
    results = []
    for files, engine in [
        (resampled["root"], None),
        (resampled["parquet"], "native"),
        (resampled["parquet"], "pyarrow"),
    ]:
        proc = ex.make_process(files, step_size=3_000)
        if engine == "pyarrow":
            proc.source = ef.source.parquet(files, step_size=3_000, engine="pyarrow")
        # The written order: the events each step sees depend on the order
        # (the adaptive planner's depends on the batches and the timings).
        results.append(proc.run(threads=2, filter_order="fixed"))
    base = results[0]
    assert base.events == 12_000
    for r in results[1:]:
        # batches differ (ROOT steps follow its 2500-event clusters), so
        # weighted sums may differ in the last bits; counts are exact
        a, b = r.cutflow["ttbar"], base.cutflow["ttbar"]
        assert (a.events, a.passed) == (b.events, b.passed)
        assert a.weighted_passed == pytest.approx(b.weighted_passed, rel=1e-12)
        for x, y in zip(a.steps, b.steps, strict=True):
            assert (x.filter, x.seen, x.passed) == (y.filter, y.seen, y.passed)
            assert x.weighted_seen == pytest.approx(y.weighted_seen, rel=1e-12)
        for k, h in base.histograms.items():
            np.testing.assert_allclose(r.histograms[k].values(), h.values(), rtol=1e-12)


def test_parquet_max_events_and_steps(resampled: dict[str, Path]) -> None:
    proc = ef.Process("pq")
    proc.source = ef.source.parquet(resampled["parquet"], step_size=1_000, max_events=4_321)
    proc.histogram("NJet", bins=10, range=(0, 10))
    r = proc.run(threads=2)
    # Row groups of 2500 in two equal parts each (as ROOT clusters of 2.5
    # steps); the 1821 rows read of the second, 1.8 steps, too.
    assert r.events == 4_321 and r.report["batches"] == 4
    assert r.histograms["NJet"].sum(flow=True) == 4_321


def test_cli_run_report_plot_and_save(zmumu_file: Path, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    plots = tmp_path / "plots"
    save = tmp_path / "saved"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "evflow",
            "run",
            str(ROOT / "examples" / "zmumu.py"),
            "-j",
            "2",
            "--step-size",
            "700",
            "--report",
            str(report),
            "--plot",
            str(plots),
            "--save",
            str(save),
            "--input",
            str(zmumu_file),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert "path 'zmumu'" in out.stdout and "accepted" in out.stdout
    rep = json.loads(report.read_text())
    assert rep["process"] == "zmumu" and rep["threads"] == 2 and rep["events_processed"] == 2304
    pngs = sorted(p.name for p in plots.glob("*.png"))
    assert pngs == ["mass.png", "pt1.png", "pt_pair.png"]
    assert (plots / "mass.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with open(save / "histograms.pkl", "rb") as f:
        assert set(pickle.load(f)) == {"mass", "pt_pair", "pt1"}
    replot = subprocess.run(
        [sys.executable, "-m", "evflow", "plot", str(save), "-o", str(tmp_path / "again"), "--only", "mass"],
        capture_output=True,
        text=True,
    )
    assert replot.returncode == 0, replot.stderr
    assert (tmp_path / "again" / "mass.png").exists()


def test_cli_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("x = 1\n")
    out = subprocess.run([sys.executable, "-m", "evflow", "run", str(bad)], capture_output=True, text=True)
    assert out.returncode == 1 and "defines no evflow Process" in out.stderr
    out = subprocess.run(
        [sys.executable, "-m", "evflow", "run", str(tmp_path / "nope.py")], capture_output=True, text=True
    )
    assert out.returncode == 1 and "does not exist" in out.stderr
    # The file's own errors at import name the file (and line), no traceback.
    for text, expected in [
        ("import evflow\n  x = 1\n", "line 2: IndentationError"),
        ("import evflow\nundefined_name\n", "failed while loading: NameError"),
    ]:
        bad.write_text(text)
        out = subprocess.run(
            [sys.executable, "-m", "evflow", "run", str(bad)], capture_output=True, text=True
        )
        assert out.returncode == 1 and expected in out.stderr and str(bad) in out.stderr, out.stderr
        assert "Traceback" not in out.stderr, out.stderr
    out = subprocess.run(
        [sys.executable, "-m", "evflow", "plot", str(tmp_path / "not-saved")], capture_output=True, text=True
    )
    assert out.returncode == 1 and "no saved histograms at" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize(
    "option", [["--step-size", "-5"], ["--step-size", "0"], ["-n", "-1"], ["-j", "0"], ["-k", "x"]]
)
def test_cli_refuses_counts_out_of_range(zmumu_file: Path, tmp_path: Path, option: list[str]) -> None:
    """A count that makes no sense is refused by name before the analysis
    runs, not ignored (a whole file in one batch) or taken as no event."""
    analysis = tmp_path / "a.py"
    analysis.write_text(
        "import evflow as ef\n"
        "proc = ef.Process('z')\n"
        f"proc.source = ef.source.root({str(zmumu_file)!r}, tree='events', step_size=500)\n"
        "proc.histogram('M', bins=10, range=(0, 100))\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "evflow", "run", str(analysis), "-q", *option], capture_output=True, text=True
    )
    assert out.returncode == 2 and f"argument {option[0]}" in out.stderr, out.stderr


@pytest.mark.parametrize("source", [ef.source.root, ef.source.parquet])
def test_negative_max_events_is_refused(source: Any) -> None:
    with pytest.raises(
        ef.ConfigurationError, match=r"max_events must be None or a non-negative integer, not -1"
    ):
        source("events.root", max_events=-1)


def test_plots_name_the_categories_of_categorical_axes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A systematic-variation axis (StrCategory) or an IntCategory axis is
    labelled with its categories, in 1D and 2D plots."""
    import hist

    import evflow.plot as plot

    figures: list = []
    figure = plot._figure
    monkeypatch.setattr(plot, "_figure", lambda: figures.append(figure()) or figures[-1])
    syst = hist.Hist(hist.axis.Regular(4, 0, 100), hist.axis.StrCategory(["nom", "up", "down"]))
    syst.fill([10, 50, 90], ["nom", "up", "down"])
    plot.plot_histogram(syst, tmp_path / "syst.png", name="syst")
    njet = hist.Hist(hist.axis.IntCategory([2, 4, 6]))
    njet.fill([2, 4, 4])
    plot.plot_histogram(njet, tmp_path / "njet.png", name="njet")
    (_, ax2), (_, ax1) = figures
    assert [t.get_text() for t in ax2.get_yticklabels()] == ["nom", "up", "down"]
    assert [t.get_text() for t in ax1.get_xticklabels()] == ["2", "4", "6"]
    assert (tmp_path / "syst.png").exists() and (tmp_path / "njet.png").exists()


def test_plot_leaves_out_histograms_of_three_axes(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """Result.plot draws the 1D and 2D histograms, and names those of more
    axes that it leaves out instead of stopping at the first of them."""
    import hist

    proc = ef.Process("axes")
    proc.source = ef.source.synthetic(2_000, step_size=1_000)
    three = hist.Hist(*(hist.axis.Regular(4, 0, 100) for _ in range(3)))
    proc.histogram("a3", column=["MET_pt", "MET_pt", "MET_pt"], hist=three)
    proc.histogram("b1", column="MET_pt", bins=4, range=(0, 100))
    proc.histogram(
        "c2", column=["MET_pt", "nJet"], hist=hist.Hist(*(hist.axis.Regular(4, 0, 100) for _ in range(2)))
    )
    written = proc.run(threads=1).plot(tmp_path)
    assert sorted(Path(p).name for p in written) == ["b1.png", "c2.png"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b1.png", "c2.png"]
    assert "histogram 'a3' has 3 axes: not plotted" in capfd.readouterr().err


def test_plot_labels(tmp_path: Path) -> None:
    import hist

    from evflow.plot import plot_histogram

    h = hist.Hist(hist.axis.Regular(10, 0, 10, name="x", label="x [GeV]"))
    h.fill(np.arange(10))
    p = plot_histogram(h, tmp_path / "x.png")
    assert Path(p).stat().st_size > 1000


def _skim_dir(tmp_path: Path, parts: list[pa.Table | None], schema: pa.Schema) -> Path:
    """A distributed skim as a run writes it: parts, then the manifest."""
    import base64

    d = tmp_path / "skim.parquet"
    d.mkdir(parents=True)
    listed = []
    # Parts listed in chunk order, written in another (as workers finish).
    for chunk, table in reversed(list(enumerate(parts))):
        name = f"part-{chunk:05d}.parquet" if table is not None else ""
        if table is not None:
            pq.write_table(table, d / name)
        listed.insert(0, {"chunk": chunk, "file": name, "rows": 0 if table is None else table.num_rows})
    manifest = {
        "process": "t",
        "columns": schema.names,
        "rows": sum(p["rows"] for p in listed),
        "parts": listed,
        "schema": base64.b64encode(schema.serialize().to_pybytes()).decode(),
    }
    (d / "_manifest.json").write_text(json.dumps(manifest))
    return d


@pytest.mark.parametrize("engine", ["native", "pyarrow"])
def test_a_distributed_skim_reads_back_as_its_parts_in_order(tmp_path: Path, engine: str) -> None:
    schema = pa.schema([("event", pa.int64()), ("pt", pa.list_(pa.float32()))])
    tables = [
        pa.table({"event": [3, 1], "pt": [[1.0], []]}, schema=schema),
        None,  # a chunk that selected no event
        pa.table({"event": [7], "pt": [[2.0, 3.0]]}, schema=schema),
        pa.table({"event": [2, 9, 4], "pt": [[4.0], [5.0], [6.0, 7.0]]}, schema=schema),
    ]
    d = _skim_dir(tmp_path, tables, schema)
    seen: list[int] = []
    proc = ef.Process("back")
    proc.source = ef.source.parquet(d, step_size=2, engine=engine)

    @proc.analyzer(consumes=["event"])
    def collect(ev: Any) -> None:
        seen.extend(ak.to_list(ev.event))

    proc.histogram("pt", bins=10, range=(0, 10))
    r = proc.run(threads=1)
    assert seen == [3, 1, 7, 2, 9, 4], "manifest order, not the order the parts were written"
    assert r.histograms["pt"].sum() == 7
    assert ef.source.auto(d).files == ef.source.parquet(d).files


def test_a_skim_without_rows_reads_back_as_no_event_with_its_types(tmp_path: Path) -> None:
    schema = pa.schema([("event", pa.int64()), ("pt", pa.list_(pa.float32()))])
    d = _skim_dir(tmp_path, [None, None], schema)
    proc = ef.Process("back")
    proc.source = ef.source.parquet(d)
    proc.output(ef.output.parquet(str(tmp_path / "again.parquet"), columns=["event", "pt"]))
    r = proc.run(threads=1)
    assert r.outputs[str(tmp_path / "again.parquet")] == 0
    assert pq.read_schema(tmp_path / "again.parquet").field("pt").type == pa.list_(pa.float32())
    with pytest.raises(ef.MissingBranchError, match=r"'ptt'.*did you mean 'pt'"):
        ef.source.parquet(d).check(["ptt"])


def test_directories_that_are_not_complete_skims(tmp_path: Path) -> None:
    # Parts without the manifest (a run that did not finish): refused, named.
    partial = tmp_path / "partial"
    partial.mkdir()
    pq.write_table(pa.table({"x": [1]}), partial / "part-00000.parquet")
    with pytest.raises(ef.InputError, match=r"'.*partial' is an incomplete distributed skim"):
        ef.source.parquet(partial)
    # A broken manifest names the file.
    broken = _skim_dir(tmp_path / "b", [pa.table({"x": [1]})], pa.schema([("x", pa.int64())]))
    (broken / "_manifest.json").write_text("{")
    with pytest.raises(ef.InputError, match=r"manifest '.*_manifest\.json' is broken"):
        ef.source.parquet(broken)
    # Any other directory: its Parquet files in name order.
    plain = tmp_path / "plain"
    plain.mkdir()
    for name, x in [("b.parquet", [2]), ("a.parquet", [1]), ("c.txt", None), ("_meta.parquet", None)]:
        if x is None:
            (plain / name).write_text("not parquet")
        else:
            pq.write_table(pa.table({"x": x}), plain / name)
    assert ef.source.parquet(plain).files == [str(plain / "a.parquet"), str(plain / "b.parquet")]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ef.MissingFileError, match=r"'.*empty' holds no Parquet file"):
        ef.source.parquet(empty)


def test_many_root_files_are_opened_once_before_the_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check before the job reads the first file's branches; the others
    are checked when the batches are planned, which opens each file anyway
    (a pass of its own opened every file once more: 0.45 s per NanoAOD
    file). A branch missing in a later file still fails before the job,
    naming that file."""
    import uproot

    from evflow.source import _root

    files = []
    for i in range(12):
        path = tmp_path / f"f{i}.root"
        with uproot.recreate(path) as f:
            f["tr"] = {"x": np.arange(10, dtype=np.float64) + i}
        files.append(str(path))
    _root._TREES.clear()
    opened: list[str] = []
    real = _root.RootSource._open_tree

    def counting(self: Any, path: str) -> Any:
        opened.append(path)
        return real(self, path)

    monkeypatch.setattr(_root.RootSource, "_open_tree", counting)
    in_check: list[int] = []
    real_check = _root.RootSource.check

    def check(self: Any, columns: Any) -> None:
        before = len(opened)
        real_check(self, columns)
        in_check.append(len(opened) - before)

    monkeypatch.setattr(_root.RootSource, "check", check)
    proc = ef.Process("many")
    proc.source = ef.source.root(files, tree="tr", step_size=5)
    proc.histogram("x", column="x", bins=30, range=(0, 30))
    result = proc.run(threads=1)
    assert result.histograms["x"].sum() == 120
    # The check opens the first file only (every file before: 37 opens of
    # the 12 files in all, against about 25 now, read-ahead threads aside).
    assert in_check == [1], in_check
    bad = tmp_path / "f5.root"
    with uproot.recreate(bad) as f:
        f["tr"] = {"y": np.arange(10, dtype=np.float64)}
    proc = ef.Process("missing")
    proc.source = ef.source.root(files, tree="tr", step_size=5)
    proc.histogram("x", column="x", bins=30, range=(0, 30))
    with pytest.raises(
        ef.MissingBranchError, match=r"branch 'x' not found in tree 'tr' of file '.*f5\.root'"
    ):
        proc.run(threads=1)
