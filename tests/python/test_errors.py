"""Bad input and failing modules give clear errors naming the file, tree,
branch or module and the batch's entry range; never a hang, never a
complete-looking truncated output."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import awkward as ak
import numpy as np
import pytest

import evflow as ef


def _zmumu(path: Path, skim: Path | None = None, step: int = 500) -> ef.Process:
    proc = ef.Process("z")
    proc.source = ef.source.root(path, tree="events", step_size=step)
    if skim is not None:

        @proc.filter(consumes=["Q1", "Q2"])
        def oc(ev):
            return ev.Q1 * ev.Q2 < 0

        proc.path("p", [oc])
        proc.output(ef.output.parquet(skim, columns=["M"]), select="p")
    return proc


def test_missing_file(tmp_path: Path) -> None:
    proc = _zmumu(tmp_path / "nope.root")
    proc.histogram("M", bins=10, range=(0, 100))
    with pytest.raises(ef.MissingFileError, match=r"nope\.root' does not exist"):
        proc.run()


def test_uproot_file_and_tree_syntax_names_the_tree_argument(zmumu_file: Path) -> None:
    proc = ef.Process("z")
    proc.source = ef.source.root(f"{zmumu_file}:events")
    proc.histogram("M", bins=10, range=(0, 100))
    with pytest.raises(
        ef.MissingFileError,
        match=r"name the tree apart: ef.source.root\('.*uproot-Zmumu.root', tree='events'\)",
    ):
        proc.run()


def test_mistyped_product_is_named_as_such(zmumu_file: Path) -> None:
    """A product's name mistyped in consumes reads as a missing branch:
    the error points to the product."""
    proc = _zmumu(zmumu_file)
    proc.producer(consumes=["M"], produces=["dimuon_mass"], label="dm")(lambda ev: 1.0 * ev.M)
    f = proc.filter(consumes=["dimuon_mas"], label="window")(lambda ev: ev.dimuon_mas > 60)
    proc.path("p", [f])
    with pytest.raises(
        ef.MissingBranchError,
        match=r"branch 'dimuon_mas' not found in tree 'events'.*did you mean the product 'dimuon_mass'\?",
    ):
        proc.run(threads=1)


def test_jagged_process_weight_is_named(hzz_file: Path) -> None:
    proc = ef.Process("h", weight="Jet_E")
    proc.source = ef.source.root(hzz_file, tree="events")
    proc.histogram("NJet", bins=10, range=(0, 10))
    with pytest.raises(
        ef.SourceError,
        match=r"the process weight 'Jet_E' is of type var \* float32: a weight is one number per event",
    ):
        proc.run(threads=1)


def test_a_process_weight_that_is_not_finite_is_named(tmp_path: Path) -> None:
    """A NaN process weight made every weighted count of the cut-flow NaN,
    silently; it now fails the read of its batch, naming the column, the
    file and the entry."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    w = np.ones(300)
    w[217] = np.nan
    path = tmp_path / "weights.parquet"
    pq.write_table(pa.table({"x": np.arange(300.0), "w": w}), path)
    proc = ef.Process("w", weight="w")
    proc.source = ef.source.parquet(str(path), step_size=100)
    proc.histogram("x", bins=10, range=(0, 300))
    with pytest.raises(
        ef.SourceError,
        match=r"the process weight 'w' is not a finite number for 1 of the 100 events of .*weights\.parquet.*"
        r"entries 200-299 \(first: nan, entry 217\)",
    ):
        proc.run(threads=1)


def test_wrong_tree(zmumu_file: Path) -> None:
    proc = ef.Process("z")
    proc.source = ef.source.root(zmumu_file, tree="Events")
    proc.histogram("M", bins=10, range=(0, 100))
    with pytest.raises(ef.MissingTreeError, match=r"has no tree 'Events' \(trees: events\)"):
        proc.run()


def test_missing_branch(zmumu_file: Path) -> None:
    proc = _zmumu(zmumu_file)

    @proc.filter(consumes=["Q1", "pt_1"])
    def f(ev):
        return ev.Q1 > 0

    proc.path("p", [f])
    with pytest.raises(
        ef.MissingBranchError,
        match=r"branch 'pt_1' not found in tree 'events' of file .*uproot-Zmumu.root'; did you mean 'pt1'",
    ):
        proc.run()


def test_exception_in_module_names_module_and_entries(zmumu_file: Path, tmp_path: Path) -> None:
    skim = tmp_path / "skim.parquet"
    proc = _zmumu(zmumu_file, skim)

    @proc.producer(consumes=["E1"], produces=["bad"])
    def boom(ev):
        if ev.info.entry_start >= 1000:
            raise ValueError("calibration table missing")
        return ev.E1

    @proc.filter(consumes=["bad"])
    def uses(ev):
        return ev.bad > 0

    proc.path("q", [uses])
    with pytest.raises(ef.ModuleError) as info:
        proc.run(threads=2)
    msg = str(info.value)
    assert "module 'boom' failed on batch" in msg
    assert "uproot-Zmumu.root" in msg and "tree 'events'" in msg and "entries 1" in msg
    assert "ValueError: calibration table missing" in msg
    assert isinstance(info.value.__cause__, ValueError)
    assert info.value.module == "boom" and info.value.batch is not None and info.value.batch >= 2
    assert not skim.exists()
    assert not [p for p in os.listdir(tmp_path) if "evflow-partial" in p]


@pytest.mark.parametrize(
    "result,pattern",
    [
        (lambda ev: np.ones(len(ev) - 1), r"returned 'x' with \d+ entries for a batch of \d+ events"),
        (lambda ev: np.array(["a"] * len(ev)), r"returned 'x' of dtype <U1"),
        (lambda ev: [1.0] * len(ev), r"returned 'x' as a list"),
        (lambda ev: 3.0, r"returned 'x' as a float"),
    ],
)
def test_producer_wrong_shape_or_dtype(zmumu_file: Path, result, pattern: str) -> None:
    proc = _zmumu(zmumu_file)
    proc.producer(consumes=["E1"], produces=["x"], label="maker")(result)

    @proc.filter(consumes=["x"])
    def f(ev):
        return ev.x > 0

    proc.path("p", [f])
    with pytest.raises(
        # Every batch fails: the job names whichever failed first (batches
        # run concurrently), with its file and entries.
        ef.ModuleError,
        match=r"module 'maker' failed on batch \d+ \(file .*entries \d+-\d+\).*" + pattern,
    ):
        proc.run(threads=2)


@pytest.mark.parametrize(
    "mask,pattern",
    [
        (lambda ev: ev.Q1, r"mask of dtype int32"),
        (lambda ev: (ev.Q1 > 0)[:-3], r"mask of \d+ entries for a batch of \d+"),
        (lambda ev: True, r"returned a bool"),
        # Missing values (None) are no decision: refused, not taken as True.
        (lambda ev: ak.mask(ev.Q1 > -5, ev.Q1 > 0), r"mask with \d+ missing values \(None\).*fill_none"),
        (lambda ev: np.ma.masked_array(ev.Q1 > -5, mask=ev.Q1 > 0), r"mask with \d+ missing values"),
    ],
)
def test_filter_wrong_mask(zmumu_file: Path, mask, pattern: str) -> None:
    proc = _zmumu(zmumu_file)
    f = proc.filter(consumes=["Q1"], label="cut")(mask)
    proc.path("p", [f])
    with pytest.raises(ef.ModuleError, match=r"module 'cut' failed on batch.*" + pattern):
        proc.run(threads=2)


@pytest.mark.parametrize(
    "fill,pattern",
    [
        (
            lambda ev: (ev.M, ev.M),
            r"of 1 axes: cannot fill with 2 value\(s\) \(numpy float64 of shape \(\d+,\), ",
        ),
        (lambda ev: ev.M[:-1], r"with 1 value\(s\) \(numpy float64 of shape \(\d+,\)\) and weights numpy"),
        (
            lambda ev: ak.Array([[1.0]] * 3),
            r"\(awkward 3 \* var \* float64\) and weights .* for \d+ events: ValueError",
        ),
    ],
)
def test_histogram_fill_error_names_the_values_kinds(zmumu_file: Path, fill, pattern: str) -> None:
    """A histogram that cannot be filled says with what (kinds and shapes,
    not the arrays' contents)."""
    proc = _zmumu(zmumu_file)
    proc.histogram("bad", fill=fill, consumes=["M"], bins=10, range=(0, 100), weight="M")
    with pytest.raises(
        ef.ModuleError, match=r"module 'hist.bad' failed on batch.*histogram 'bad' .*" + pattern
    ) as e:
        proc.run(threads=1)
    assert "array(" not in str(e.value) and len(str(e.value)) < 800


def _cap(x: np.ndarray) -> np.ndarray:
    x[x > 50] = 50  # in place: would change what every other module sees
    return x


@pytest.mark.parametrize(
    "reads,modify",
    [
        (["pt1"], lambda ev: _cap(ev.pt1)),  # a branch, seen by every module of the batch
        (["pt2"], lambda ev: _cap(ev.doubled)),  # a product
        (["pt1"], lambda ev: _cap(ev.weight)),  # the process weights (of the cut-flow)
    ],
)
def test_columns_and_products_cannot_be_changed_in_place(zmumu_file: Path, reads: list[str], modify) -> None:
    """A module that changes a column, a product or the weights in place
    fails by name, instead of silently changing what the other modules of
    the batch see."""
    proc = _zmumu(zmumu_file)
    proc.weight = "M"
    proc.producer(consumes=["pt2"], produces=["doubled"], label="double")(lambda ev: 2 * ev.pt2)
    consumes = [*reads, "doubled"] if "pt2" in reads else reads
    proc.producer(consumes=consumes, produces=["capped"], label="capper")(modify)
    proc.histogram("capped", bins=10, range=(0, 100))
    proc.histogram("pt1", bins=10, range=(0, 100))
    with pytest.raises(ef.ModuleError, match=r"module 'capper' failed on batch .*read-only"):
        proc.run(threads=1)


def test_jagged_mask_is_refused(hzz_file: Path) -> None:
    proc = ef.Process("h")
    proc.source = ef.source.root(hzz_file, tree="events", step_size=1000)
    f = proc.filter(consumes=["Jet_btag"], label="cut")(lambda ev: ev.Jet_btag > 0)
    proc.path("p", [f])
    with pytest.raises(ef.ModuleError, match=r"jagged \(nested\) mask"):
        proc.run()


def test_undeclared_read(zmumu_file: Path) -> None:
    proc = _zmumu(zmumu_file)
    f = proc.filter(consumes=["Q1"], label="sneaky")(lambda ev: ev.Q2 > 0)
    proc.path("p", [f])
    with pytest.raises(ef.ModuleError, match=r"read 'Q2', which it did not declare in consumes=\['Q1'\]"):
        proc.run()


def test_skip_failed_batches(zmumu_file: Path) -> None:
    proc = _zmumu(zmumu_file, step=500)

    @proc.filter(consumes=["Q1"])
    def flaky(ev):
        if ev.info.index == 1:
            raise RuntimeError("bad batch")
        return ev.Q1 > 0

    proc.path("p", [flaky])
    proc.histogram("M", bins=10, range=(0, 200), after="p")
    r = proc.run(threads=2, on_error="skip")
    assert r.failed_batches == [1]
    assert r.events == 2304 - 461  # 5 batches of 460 or 461 events
    assert r.cutflow["p"].events == r.events
    assert r.histograms["M"].sum() == r.cutflow["p"].passed


def test_corrupt_root_file(zmumu_file: Path, tmp_path: Path) -> None:
    bad = tmp_path / "truncated.root"
    data = zmumu_file.read_bytes()
    bad.write_bytes(data[: len(data) // 2])
    proc = _zmumu(bad)
    proc.histogram("M", bins=10, range=(0, 100))
    with pytest.raises(ef.InputError, match=r"truncated\.root"):
        proc.run()


def test_root_file_cut_short_is_refused_before_any_batch(tmp_path: Path) -> None:
    """A ROOT file cut short whose tree still opens (its baskets are past the
    cut): refused by name before anything runs, and left out by a
    distributed run's skip_bad_files (its metadata reader says so)."""
    import uproot

    from evflow.distributed.chunks import read_meta

    bad = tmp_path / "cut.root"
    with uproot.recreate(bad) as f:
        f.mktree("events", {"x": "float64"})
        for i in range(4):
            f["events"].extend({"x": np.random.default_rng(i).normal(size=200)})
    data = bad.read_bytes()
    bad.write_bytes(data[: len(data) // 2])
    calls: list[int] = []
    proc = ef.Process("cut")
    proc.source = ef.source.root(bad, tree="events", step_size=200)

    @proc.filter(consumes=["x"])
    def pos(ev: ef.Events) -> Any:
        calls.append(len(ev))
        return ev.x > 0

    proc.path("p", [pos])
    with pytest.raises(ef.InputError, match=r"cut\.root' is incomplete: \d+ bytes of the \d+"):
        proc.run()
    assert calls == []
    meta = read_meta(proc.source, str(bad), ["x"])
    assert isinstance(meta.error, ef.InputError) and "incomplete" in str(meta.error)


def test_bad_histogram_binning_and_skim_directory_are_named(tmp_path: Path) -> None:
    proc = ef.Process("bad")
    for kwargs, says in [
        ({"bins": 0, "range": (0, 1)}, "bins= must be a positive integer, not 0"),
        ({"bins": 2.5, "range": (0, 1)}, "bins= must be a positive integer, not 2.5"),
        ({"bins": 10, "range": (1, 1)}, r"range= must have low < high, not \(1, 1\)"),
        ({"bins": 10, "range": "ab"}, "range= must be \\(low, high\\)"),
    ]:
        with pytest.raises(ef.ConfigurationError, match=rf"histogram 'x': {says}"):
            proc.histogram("x", **kwargs)
    a_file = tmp_path / "plain"
    a_file.write_text("")
    proc.source = ef.source.synthetic(100)
    proc.output(ef.output.parquet(str(a_file / "skim.parquet"), columns=["MET_pt"]))
    with pytest.raises(
        ef.ConfigurationError, match=r"skim '.*plain/skim\.parquet': cannot create its directory"
    ):
        proc.run()


def test_parquet_missing_column(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    f = tmp_path / "a.parquet"
    pq.write_table(pa.table({"x": np.arange(10.0)}), f)
    proc = ef.Process("pq")
    proc.source = ef.source.parquet(f)
    proc.histogram("y", bins=10, range=(0, 10))
    with pytest.raises(ef.MissingBranchError, match=r"branch 'y' not found in Parquet file .*a\.parquet'"):
        proc.run()


def test_parquet_type_the_native_reader_cannot_decode_is_found_before_running(tmp_path: Path) -> None:
    """A column of a type the native reader does not decode (records,
    strings) is named before any batch runs, with the engine that reads it."""
    f = tmp_path / "a.parquet"
    ak.to_parquet(
        ak.Array({"x": [1.0, 2.0, 3.0], "jets": [[1.0], [], [2.0, 3.0]], "lep": [{"pt": 1.0, "q": 1}] * 3}), f
    )
    seen: list[int] = []

    def process(engine: str) -> ef.Process:
        proc = ef.Process("pq")
        proc.source = ef.source.parquet(f, engine=engine)
        proc.analyzer(consumes=["x", "jets", "lep"], label="count")(lambda ev: seen.append(len(ev)))
        return proc

    with pytest.raises(
        ef.InputError,
        match=r"column 'lep' of Parquet file .*a\.parquet' has Arrow type Struct.*engine=\"pyarrow\"",
    ):
        process("native").run(threads=1)
    assert seen == []
    process("pyarrow").run(threads=1)
    assert seen == [3]


def _slow_script(tmp_path: Path, zmumu_file: Path, skim: Path, sleep_s: float) -> Path:
    script = tmp_path / "slow.py"
    script.write_text(
        f"""
import time, evflow as ef
proc = ef.Process("slow")
proc.source = ef.source.root({str(zmumu_file)!r}, tree="events", step_size=50)

@proc.filter(consumes=["Q1"])
def slow(ev):
    time.sleep({sleep_s})
    return ev.Q1 > 0

proc.path("p", [slow])
proc.output(ef.output.parquet({str(skim)!r}, columns=["M"]), select="p")
"""
    )
    return script


def _interrupt(
    script: Path, tmp_path: Path, signals: int, *extra: str, sig: int = signal.SIGINT
) -> tuple[int, str]:
    """Runs the script with the command line; once its output is open (the job
    is running) sends SIGINT, and once the run said it is finishing the
    batches in flight, sends SIGINT again (``signals`` = 2)."""
    import queue
    import threading

    p = subprocess.Popen(
        [sys.executable, "-m", "evflow", "run", str(script), "-j", "2", "-q", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A shell without job control starts background jobs with SIGINT
        # ignored, and Python then never turns it into KeyboardInterrupt:
        # give the child the default disposition a terminal user has.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    lines: queue.Queue[str] = queue.Queue()
    assert p.stderr is not None
    reader = threading.Thread(target=lambda: [lines.put(x) for x in p.stderr], daemon=True)  # type: ignore[union-attr]
    reader.start()
    deadline = time.time() + 30
    while time.time() < deadline and not [x for x in os.listdir(tmp_path) if "evflow-partial" in x]:
        time.sleep(0.05)
    p.send_signal(sig)
    err = []
    while signals > 1:
        line = lines.get(timeout=30)
        err.append(line)
        if "finishing the batches in flight" in line:
            # Later than 0.2 s: sooner is the same request delivered twice.
            time.sleep(0.3)
            p.send_signal(signal.SIGINT)
            signals -= 1
    p.wait(timeout=60)
    reader.join(timeout=10)
    while not lines.empty():
        err.append(lines.get())
    return p.returncode, "".join(err)


def test_interrupt_closes_outputs_complete(zmumu_file: Path, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    skim = tmp_path / "skim.parquet"
    report, saved = tmp_path / "report.json", tmp_path / "saved"
    script = _slow_script(tmp_path, zmumu_file, skim, 0.2)
    code, err = _interrupt(script, tmp_path, 1, "--report", str(report), "--save", str(saved))
    assert code == 130, err
    assert "interrupted" in err
    # Closed under its final name, complete for the batches done.
    rows = pq.read_table(skim).num_rows
    assert 0 < rows < 2304
    assert not [x for x in os.listdir(tmp_path) if "evflow-partial" in x]
    # The report and the saved result are written as after a whole run,
    # the report saying it was interrupted (as the core CLI's does).
    written = json.loads(report.read_text())
    assert written["interrupted"] is True
    loaded = ef.Result.load(saved)
    assert loaded.report["interrupted"] is True and 0 < loaded.events < 2304


def test_sigterm_stops_the_command_line_gracefully(zmumu_file: Path, tmp_path: Path) -> None:
    """SIGTERM (a batch system's, ``kill``) stops as Ctrl-C does: the skim
    is complete for the batches done and the report says interrupted (it
    used to kill the runner, leaving a partial skim file and no report)."""
    import pyarrow.parquet as pq

    skim = tmp_path / "skim.parquet"
    report = tmp_path / "report.json"
    script = _slow_script(tmp_path, zmumu_file, skim, 0.2)
    code, err = _interrupt(script, tmp_path, 1, "--report", str(report), sig=signal.SIGTERM)
    assert code == 130, err
    assert 0 < pq.read_table(skim).num_rows < 2304
    assert json.loads(report.read_text())["interrupted"] is True
    assert not [x for x in os.listdir(tmp_path) if "evflow-partial" in x]


def test_second_interrupt_aborts_and_leaves_no_output(zmumu_file: Path, tmp_path: Path) -> None:
    skim = tmp_path / "skim.parquet"
    # Batches take 3 s: the second interrupt comes long before they finish.
    code, err = _interrupt(_slow_script(tmp_path, zmumu_file, skim, 3.0), tmp_path, 2)
    assert code == 134, err
    assert "aborted by a second interrupt" in err
    assert not skim.exists()
    assert not [x for x in os.listdir(tmp_path) if "evflow-partial" in x]


def test_keyboard_interrupt_finishes_the_batches_read(zmumu_file: Path, tmp_path: Path) -> None:
    """An in-process Ctrl-C: the result, cut-flow and skim cover exactly the
    batches read (a prefix of the file), checked against plain numpy."""
    import pyarrow.parquet as pq
    import uproot

    skim = tmp_path / "skim.parquet"
    proc = ef.Process("z")
    proc.source = ef.source.root(zmumu_file, tree="events", step_size=50)
    sent: list[bool] = []

    @proc.filter(consumes=["Q1", "Q2"])
    def oc(ev):
        if not sent:
            sent.append(True)
            os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.1)
        return ev.Q1 * ev.Q2 < 0

    proc.path("p", [oc])
    proc.output(ef.output.parquet(skim, columns=["M"]), select="p")
    # Ctrl-C raises KeyboardInterrupt, as at a terminal, even when the test
    # runner inherited SIGINT ignored (a background job of a plain shell).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt) as caught:
            proc.run(threads=2)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert isinstance(caught.value, ef.Interrupted), caught.value
    result = caught.value.result
    n = result.events
    assert 0 < n < 2304 and n % 50 == 0, n
    with uproot.open(zmumu_file) as f:
        arrays = f["events"].arrays(["Q1", "Q2", "M"], library="np", entry_stop=n)
    keep = arrays["Q1"] * arrays["Q2"] < 0
    assert result.report["interrupted"] is True
    table = pq.read_table(skim)
    np.testing.assert_allclose(table.column("M").to_numpy(), arrays["M"][keep])
    assert not [x for x in os.listdir(tmp_path) if "evflow-partial" in x]


def test_data_tool_missing_branch(zmumu_file: Path, tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "evflow.data",
            "resample",
            str(zmumu_file),
            "--tree",
            "events",
            "-n",
            "10",
            "--out",
            str(tmp_path / "x.parquet"),
            "--branches",
            "nothing*",
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 1 and "no branch matches ['nothing*']" in out.stderr


def test_module_functions_that_cannot_take_their_arguments_are_refused_when_declared() -> None:
    """A module function must take ``ev`` and a device implementation
    ``(ev, xp)``: a wrong signature is named when the module is declared,
    not as a TypeError on the first batch (or, for a device implementation,
    only on a machine with a device)."""
    proc = ef.Process("signatures")

    def no_argument():
        return 1

    def host(ev):
        return ev.MET_pt

    def device_without_xp(ev):
        return ev.MET_pt

    with pytest.raises(
        ef.ConfigurationError, match=r"module 'no_argument': no_argument\(\) cannot be called"
    ):
        proc.producer(consumes=["MET_pt"], produces=["x"])(no_argument)
    with pytest.raises(
        ef.ConfigurationError, match=r"device implementation: device_without_xp\(ev\).*\(ev, xp\)"
    ):
        proc.producer(consumes=["MET_pt"], produces=["x"], device=device_without_xp)(host)
    with pytest.raises(ef.ConfigurationError, match=r"remote implementation: no_argument\(\) cannot"):
        remote = ef.remote.Remote(fn=no_argument, client="tcp://127.0.0.1:1")
        proc.producer(consumes=["MET_pt"], produces=["x"], remote=remote)(host)
    with pytest.raises(ef.ConfigurationError, match="needs a function"):
        proc.filter(consumes=["MET_pt"])(3)  # type: ignore[arg-type]
    # Defaults, *args and keyword-only arguments with defaults are fine.
    proc.producer(consumes=["MET_pt"], produces=["a"], label="a")(lambda ev, scale=2: ev.MET_pt * scale)
    proc.filter(consumes=["MET_pt"], label="b", device=lambda *args: args[0].MET_pt > 0)(
        lambda ev: ev.MET_pt > 0
    )
    proc.analyzer(consumes=["MET_pt"], label="c")(lambda ev, *, k=1: None)


def test_bad_files_are_left_out_in_one_process_when_asked(tmp_path: Path) -> None:
    """``skip_bad_files=True`` without a cluster: a missing file, a file that
    is not Parquet and a file without a branch the job reads are left out
    before the job and listed (as a distributed run lists them); the
    histogram is that of the good files alone; the source is the user's
    again afterwards; with no good file left, the job fails naming them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    good = []
    for i in range(2):
        path = tmp_path / f"good{i}.parquet"
        pq.write_table(pa.table({"x": np.arange(100, dtype=np.float64) + 100 * i}), path)
        good.append(str(path))
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"not parquet")
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"y": [1.0]}), other)
    missing = str(tmp_path / "missing.parquet")
    files = [good[0], str(broken), missing, str(other), good[1]]

    def job(paths: list[str]) -> ef.Process:
        proc = ef.Process("skip")
        proc.source = ef.source.parquet(paths, step_size=30)
        proc.histogram("x", bins=10, range=(0, 200))
        return proc

    with pytest.raises(ef.InputError, match=r"broken\.parquet"):
        job(files).run(threads=2)
    proc = job(files)
    r = proc.run(threads=2, skip_bad_files=True)
    assert r.skipped_files == [str(broken), missing, str(other)]
    assert [s["file"] for s in r.report["skipped_files"]] == r.skipped_files
    assert "branch 'x' not found" in r.report["skipped_files"][2]["error"]
    reference = job(good).run(threads=1)
    assert np.array_equal(r.histograms["x"].values(), reference.histograms["x"].values())
    assert r.events == 200 and proc.source.files == files
    with pytest.raises(
        ef.InputError, match=r"no input file can be read: .*broken\.parquet.*missing\.parquet"
    ):
        job([str(broken), missing]).run(threads=1, skip_bad_files=True)
