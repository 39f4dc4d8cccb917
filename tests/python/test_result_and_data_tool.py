"""The dataset tool (``python -m evflow.data resample``), ``Result`` (save,
load, plot), the path cut-flow's mapping behaviour and histogram
declaration checks, each compared with plain numpy/uproot references."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import awkward as ak
import hist
import numpy as np
import pyarrow.parquet as pq
import pytest
import uproot

import evflow as ef
from evflow.data import main as data_main
from evflow.data import resample

# -- resample: never its own input -------------------------------------------------


@pytest.mark.parametrize("how", ["same path", "other spelling", "symbolic link", "hard link"])
def test_resample_refuses_to_overwrite_its_input(
    zmumu_file: Path,
    tmp_path: Path,
    how: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    z = tmp_path / "z.root"
    shutil.copyfile(zmumu_file, z)
    before = z.read_bytes()
    monkeypatch.chdir(tmp_path)
    out = {
        "same path": str(z),
        "other spelling": "./sub/../z.root",
        "symbolic link": str(tmp_path / "link.root"),
        "hard link": str(tmp_path / "hard.root"),
    }[how]
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.root").symlink_to(z)
    os.link(z, tmp_path / "hard.root")
    rc = data_main(["resample", str(z), "--tree", "events", "--events", "10", "--out", out, "-q"])
    assert rc == 1
    err = capsys.readouterr().err
    assert f"the output '{out}' is the input file '{z}'" in err
    assert z.read_bytes() == before, "the input is untouched"
    assert uproot.open(z)["events"].num_entries == 2304


def test_resample_refuses_a_directory_as_output(zmumu_file: Path, tmp_path: Path) -> None:
    d = tmp_path / "out.root"
    d.mkdir()
    with pytest.raises(ef.ConfigurationError, match=r"the output '.*out\.root' is a directory"):
        resample(str(zmumu_file), str(d), tree="events", events=10)
    assert list(d.iterdir()) == []


# -- resample to ROOT: every branch, values and types ------------------------------


def _drawn(n_in: int, events: int, chunk: int, seed: int) -> np.ndarray:
    """The entries resample draws: chunk by chunk from one seeded generator."""
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.integers(0, n_in, min(chunk, events - s)) for s in range(0, events, chunk)])


def test_resample_to_root_keeps_every_nanoaod_branch_and_type(nano_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "nano.root"
    resample(str(nano_file), str(out), tree="Events", events=300, seed=5, chunk=120)
    src = uproot.open(nano_file)["Events"]
    res = uproot.open(out)["Events"]
    assert res.num_entries == 300
    names = list(src.keys())
    assert sorted(res.keys()) == sorted(names)
    for name in ("LHEPdfWeight", "LHEReweightingWeight", "LHEScaleWeight", "PSWeight", "nJet", "nMuon"):
        assert name in names, name
    # Every branch keeps its type, but the counters of jagged branches, which
    # uproot writes as int32 (NanoAOD's are uint32; their values are equal).
    counters = {b.count_branch.name for b in src.values() if getattr(b, "count_branch", None) is not None}
    types = {k: str(src[k].interpretation) for k in names if k not in counters}
    assert {k: str(res[k].interpretation) for k in names if k not in counters} == types
    idx = _drawn(src.num_entries, 300, 120, 5)
    want = src.arrays(library="ak", how=dict)
    got = res.arrays(library="ak", how=dict)
    for name in names:
        a, b = want[name][idx], got[name]
        if a.ndim == 2:
            np.testing.assert_array_equal(ak.to_numpy(ak.num(b)), ak.to_numpy(ak.num(a)), err_msg=name)
            a, b = ak.flatten(a), ak.flatten(b)
        np.testing.assert_array_equal(ak.to_numpy(b), ak.to_numpy(a), err_msg=name)  # NaN equal to NaN
    np.testing.assert_array_equal(
        ak.to_numpy(ak.flatten(got["LHEScaleWeight"])),
        ak.to_numpy(ak.flatten(src["LHEScaleWeight"].array()[idx])),
    )
    np.testing.assert_array_equal(got["nJet"], src["nJet"].array(library="np")[idx])


def test_resample_to_root_keeps_a_string_branch(zmumu_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "z.root"
    resample(str(zmumu_file), str(out), tree="events", events=50, seed=2, chunk=20)
    src = uproot.open(zmumu_file)["events"]
    res = uproot.open(out)["events"]
    assert sorted(res.keys()) == sorted(src.keys())  # "Type" (strings) included
    idx = _drawn(src.num_entries, 50, 20, 2)
    assert res["Type"].array().tolist() == src["Type"].array()[idx].tolist()
    np.testing.assert_array_equal(res["M"].array(library="np"), src["M"].array(library="np")[idx])


def test_resample_to_root_refuses_a_branch_it_cannot_write(
    hzz_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import evflow.data

    read = evflow.data._read

    def with_missing_values(path: str, tree: str, patterns: object) -> object:
        arrays = read(path, tree, None)
        arrays["maybe"] = ak.mask(arrays["NJet"], arrays["NJet"] > 1)  # option type: no TTree branch
        return arrays

    monkeypatch.setattr(evflow.data, "_read", with_missing_values)
    with pytest.raises(ef.ConfigurationError, match=r"cannot resample .* to ROOT: branches \['maybe'\]"):
        resample(str(hzz_file), str(tmp_path / "out.root"), tree="events", events=8)
    assert os.listdir(tmp_path) == []
    resample(str(hzz_file), str(tmp_path / "out.parquet"), tree="events", events=8)  # Parquet takes it
    assert "maybe" in pq.read_table(tmp_path / "out.parquet").column_names


# -- Result.save / Result.load ------------------------------------------------------


def _skimming_run(zmumu: Path, tmp_path: Path, failed: list[tuple[int, int]] | None = None) -> ef.Result:
    """Batch 2 fails (its entries go into ``failed``), a file is unreadable."""
    bad = tmp_path / "bad.root"
    bad.write_bytes(b"not a ROOT file at all" * 10)
    proc = ef.Process("z")
    proc.source = ef.source.root([str(zmumu), str(bad)], tree="events", step_size=500)

    @proc.filter(consumes=["pt1"])
    def f(ev: ef.Events) -> np.ndarray:
        if ev.info.index == 2:
            if failed is not None:
                failed.append((ev.info.entry_start, ev.info.entry_stop))
            raise RuntimeError("boom")
        return ev.pt1 > 20

    proc.path("s", [f])
    proc.histogram("pt1", bins=10, range=(0, 100), after="s")
    proc.output(ef.output.parquet(str(tmp_path / "skim.parquet"), columns=["pt1"]), select="s")
    return proc.run(threads=1, on_error="skip", skip_bad_files=True)


def test_saved_result_keeps_failed_batches_outputs_and_skips(zmumu_file: Path, tmp_path: Path) -> None:
    failed: list[tuple[int, int]] = []
    r = _skimming_run(zmumu_file, tmp_path, failed)
    pt1 = uproot.open(zmumu_file)["events"]["pt1"].array(library="np")
    ((a, b),) = failed
    kept = np.concatenate([pt1[:a], pt1[b:]])
    assert r.failed_batches == [2]
    assert r.outputs == {str(tmp_path / "skim.parquet"): int((kept > 20).sum())}
    assert r.skipped_files == [str(tmp_path / "bad.root")]
    r.skipped_chunks = [{"chunk": 3, "files": ["a.root"], "ranges": [[0, 10]], "error": "lost"}]
    r.save(tmp_path / "saved")
    back = ef.Result.load(tmp_path / "saved")
    assert back.failed_batches == r.failed_batches
    assert back.outputs == r.outputs
    assert back.skipped_files == r.skipped_files
    assert back.skipped_chunks == r.skipped_chunks
    assert (back.events, back.wall_s, back.process) == (r.events, r.wall_s, r.process)
    assert back.summary() == r.summary()
    np.testing.assert_array_equal(
        back.histograms["pt1"].values(), np.histogram(kept[kept > 20], 10, (0, 100))[0]
    )


def test_result_saved_by_the_previous_version_still_loads(zmumu_file: Path, tmp_path: Path) -> None:
    r = _skimming_run(zmumu_file, tmp_path)
    r.save(tmp_path / "saved")
    os.remove(tmp_path / "saved" / "result.json")  # as the previous version saved it
    back = ef.Result.load(tmp_path / "saved")
    assert back.events == r.events and back.process == "z"
    assert (back.failed_batches, back.outputs, back.skipped_files, back.skipped_chunks) == ([], {}, [], [])
    assert back.cutflow.to_dict() == r.cutflow.to_dict()


# -- the path cut-flow as a mapping by filter name --------------------------------


def test_path_cutflow_contains_and_lists_its_filters(zmumu_file: Path) -> None:
    proc = ef.Process("z")
    proc.source = ef.source.root(str(zmumu_file), tree="events", step_size=1000)

    @proc.filter(consumes=["Q1", "Q2"])
    def oc(ev: ef.Events) -> np.ndarray:
        return ev.Q1 * ev.Q2 < 0

    @proc.filter(consumes=["pt1"])
    def pt(ev: ef.Events) -> np.ndarray:
        return ev.pt1 > 20

    proc.path("s", [oc, pt])
    path = proc.run(threads=1).cutflow["s"]
    a = uproot.open(zmumu_file)["events"].arrays(["Q1", "Q2", "pt1"], library="np")
    assert "oc" in path and "pt" in path and "nope" not in path
    assert path.keys() == ["oc", "pt"] and len(path) == 2
    assert [s.filter for s in path] == ["oc", "pt"], "iteration gives the steps, as before"
    assert dict(path.items())["pt"] is path["pt"]
    assert path["oc"].passed == int((a["Q1"] * a["Q2"] < 0).sum())
    assert "s" in proc.run(threads=1).cutflow


# -- Result.plot(names=...) ------------------------------------------------------------


def _two_histograms(zmumu: Path) -> ef.Result:
    proc = ef.Process("z")
    proc.source = ef.source.root(str(zmumu), tree="events", step_size=1000)
    proc.histogram("M", bins=50, range=(0, 150))
    proc.histogram("Me", column="M", edges=[0, 10, 50, 80, 90, 100, 150])
    return proc.run(threads=1)


def test_plot_takes_one_name_as_a_string_and_refuses_unknown_names(zmumu_file: Path, tmp_path: Path) -> None:
    r = _two_histograms(zmumu_file)
    m = uproot.open(zmumu_file)["events"]["M"].array(library="np")
    np.testing.assert_array_equal(
        r.histograms["Me"].values(), np.histogram(m, [0, 10, 50, 80, 90, 100, 150])[0]
    )
    paths = r.plot(tmp_path / "one", names="Me")
    assert paths == [str(tmp_path / "one" / "Me.png")]
    assert sorted(os.listdir(tmp_path / "one")) == ["Me.png"]
    with pytest.raises(ef.ConfigurationError, match=r"no histogram 'nope' \(histograms: M, Me\)"):
        r.plot(tmp_path / "none", names=["nope"])
    assert not (tmp_path / "none").exists() or os.listdir(tmp_path / "none") == []


# -- histogram declaration: range and label ------------------------------------------


@pytest.mark.parametrize(
    "rng, says",
    [
        ((0, float("inf")), "two finite numbers"),
        ((float("-inf"), 1), "two finite numbers"),
        ("01", r"\(low, high\), two numbers"),
        ((0, 1, 2), r"\(low, high\), two numbers"),
    ],
)
def test_histogram_range_is_checked_when_declared(zmumu_file: Path, rng: object, says: str) -> None:
    proc = ef.Process("z")
    proc.source = ef.source.root(str(zmumu_file), tree="events")
    with pytest.raises(ef.ConfigurationError, match=rf"histogram 'mass': range= must be {says}"):
        proc.histogram("mass", column="M", bins=3, range=rng)  # type: ignore[arg-type]
    assert "mass" not in proc.histograms


def test_histogram_range_is_stored_as_floats(zmumu_file: Path) -> None:
    proc = ef.Process("z")
    proc.source = ef.source.root(str(zmumu_file), tree="events")
    h = proc.histogram("M", bins=5, range=(np.int64(0), 150))
    assert h.range == (0.0, 150.0) and all(type(x) is float for x in h.range)
    m = uproot.open(zmumu_file)["events"]["M"].array(library="np")
    np.testing.assert_array_equal(
        proc.run(threads=1).histograms["M"].values(), np.histogram(m, 5, (0, 150))[0]
    )


def test_label_applies_to_a_1d_template_axis_and_is_refused_for_more_axes(zmumu_file: Path) -> None:
    proc = ef.Process("z")
    proc.source = ef.source.root(str(zmumu_file), tree="events")
    template = hist.Hist(hist.axis.Regular(10, 0, 150, label="orig"))
    proc.histogram("M", hist=template, label="$m_{\\mu\\mu}$ [GeV]")
    with pytest.raises(ef.ConfigurationError, match=r"histogram 'pt2d': label= labels the axis of a 1D"):
        proc.histogram(
            "pt2d",
            column=["pt1", "pt2"],
            hist=hist.Hist(hist.axis.Regular(3, 0, 100), hist.axis.Regular(3, 0, 100)),
            label="x",
        )
    h = proc.run(threads=1).histograms["M"]
    assert h.axes[0].label == "$m_{\\mu\\mu}$ [GeV]"
    assert template.axes[0].label == "orig", "the template itself is left as it was"
    m = uproot.open(zmumu_file)["events"]["M"].array(library="np")
    np.testing.assert_array_equal(h.values(), np.histogram(m, 10, (0, 150))[0])


# -- cut-flow table: 0/0 ---------------------------------------------------------------


def test_cutflow_table_shows_no_efficiency_where_nothing_reached_the_filter(hzz_file: Path) -> None:
    proc = ef.Process("e")
    proc.source = ef.source.root(str(hzz_file), tree="events")

    @proc.filter(consumes=["NJet"])
    def none(ev: ef.Events) -> np.ndarray:
        return ev.NJet > 100

    @proc.filter(consumes=["NJet"])
    def g(ev: ef.Events) -> np.ndarray:
        return ev.NJet >= 0

    proc.path("s", [none, g])
    cf = proc.run(threads=1).cutflow
    step = cf["s"]["g"]
    assert (step.seen, step.passed, step.efficiency) == (0, 0, 1.0), "the numeric value stays as documented"
    row = next(line for line in cf.table().splitlines() if line.startswith("g "))
    assert row.split()[1:] == ["0", "0", "–", "0.00%"]
    assert "100.00%" not in row
    nj = uproot.open(hzz_file)["events"]["NJet"].array(library="np")
    assert cf["s"]["none"].seen == len(nj) and cf["s"]["none"].passed == int((nj > 100).sum()) == 0


# -- inputs that change during the job ----------------------------------------------


def test_a_root_file_cut_during_the_job_is_an_error_not_a_short_read(tmp_path: Path) -> None:
    """A file replaced by a shorter one after the job was planned was read
    short without a word (its batches' missing entries gone from every
    result): an error naming the file and the entries."""
    files = []
    for i in range(3):
        path = tmp_path / f"part{i}.root"
        with uproot.recreate(path) as f:
            f["events"] = {"x": np.arange(3000, dtype=np.float64) + 10_000 * i}
        files.append(str(path))
    replaced: list[bool] = []
    proc = ef.Process("cut")
    proc.source = ef.source.root(files, tree="events", step_size=1000, prefetch=1, read_workers=1)

    @proc.producer(consumes=["x"], produces=["y"])
    def y(ev: ef.Events) -> np.ndarray:
        if not replaced:
            replaced.append(True)
            with uproot.recreate(files[2]) as f:  # the last file, read last, now 100 entries
                f["events"] = {"x": np.arange(100, dtype=np.float64)}
        return np.asarray(ev.x) * 2

    proc.histogram("y", bins=10, range=(0, 100_000))
    with pytest.raises(ef.SourceError, match=r"part2\.root.*100 entries read, 1000 planned"):
        proc.run(threads=1)


def test_a_failed_save_leaves_the_earlier_result_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A save that fails half-way (a full disk) left one result's report
    beside another's histograms, which loaded without a word: every file is
    now written beside its final name and renamed once all are written."""
    import errno
    import pickle

    def run(events: int) -> ef.Result:
        proc = ef.Process("saved")
        proc.source = ef.source.synthetic(events, step_size=500)
        proc.histogram("met", column="MET_pt", bins=10, range=(0, 200))
        return proc.run(threads=1)

    first, second = run(1000), run(3000)
    first.save(tmp_path / "r")

    def full(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pickle, "dump", full)
    with pytest.raises(ef.EvflowError, match=r"cannot write '.*histograms\.pkl': No space left"):
        second.save(tmp_path / "r")
    monkeypatch.undo()
    assert sorted(os.listdir(tmp_path / "r")) == sorted(ef.result.SAVED.values())
    loaded = ef.Result.load(tmp_path / "r")
    assert loaded.events == 1000 and loaded.histograms["met"].sum() == first.histograms["met"].sum()
