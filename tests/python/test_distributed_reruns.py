"""Distributed runs on a persistent 2-worker cluster (conftest's `client`
fixture): an edited analysis file or helper module is what the next run
uses; run options, unpicklable analyses and unreachable schedulers are
refused clearly before anything runs; a failed or interrupted run leaves no
skim directory and no Dask traceback behind."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import evflow as ef
from evflow.cli import main

pytest.importorskip("distributed")

SOURCE = "ef.source.synthetic(6_000, step_size=1_000, seed=3)"


def _saved(path: Path) -> dict[str, Any]:
    with open(path / "histograms.pkl", "rb") as f:
        return dict(pickle.load(f))


def _run_file(analysis: Path, out: Path, *scheduler: str) -> dict[str, Any]:
    """The histograms of ``evflow run analysis`` (on the scheduler, if given)."""
    args = ["run", str(analysis), "--save", str(out), "-q"]
    if scheduler:
        args += ["--scheduler", scheduler[0]]
    assert main(args) == 0
    return _saved(out)


def test_an_edited_analysis_file_is_run_anew_on_the_same_cluster(client: Any, tmp_path: Path) -> None:
    analysis = tmp_path / "ana.py"
    text = (
        "import evflow as ef\n"
        f"proc = ef.Process('edit')\nproc.source = {SOURCE}\n"
        "@proc.filter(consumes=['MET_pt'])\n"
        "def cut(ev):\n    return ev.MET_pt > CUT\n"
        "proc.path('sel', [cut])\n"
        "proc.histogram('MET_pt', bins=20, range=(0, 200), after='sel')\n"
    )
    address = client.scheduler.address
    counts = []
    for cut in ("10", "40.5"):  # a different size: no bytecode cache could hide the edit
        analysis.write_text(f"CUT = {cut}\n" + text)
        tag = cut.replace(".", "_")
        on_cluster = _run_file(analysis, tmp_path / f"dist{tag}", address)["MET_pt"]
        alone = _run_file(analysis, tmp_path / f"one{tag}")["MET_pt"]
        assert np.array_equal(on_cluster.values(), alone.values())
        counts.append(on_cluster.sum())
    assert counts[1] < counts[0]  # the second run used the edited cut


def test_an_edited_helper_module_is_imported_anew_on_the_same_cluster(client: Any, tmp_path: Path) -> None:
    helper = f"evflow_test_helper_{uuid.uuid4().hex[:8]}"  # sys.modules is per process: a name of its own
    (tmp_path / f"{helper}.py").write_text("def scale(x):\n    return x * 1\n")
    body = (
        f"import evflow as ef\nfrom {helper} import scale\n"
        f"proc = ef.Process('helper')\nproc.source = {SOURCE}\n"
        "@proc.producer(consumes=['MET_pt'], produces=['s'])\n"
        "def s(ev):\n    return scale(ev.MET_pt)\n"
        "proc.histogram('s', bins=20, range=(0, 200))\n"
    )
    address = client.scheduler.address
    first = tmp_path / "v1.py"
    first.write_text(body)
    before = _run_file(first, tmp_path / "d1", address)["s"]
    (tmp_path / f"{helper}.py").write_text("def scale(x):\n    return x * 100.0\n")  # every value overflows
    for name in ("v1.py", "v2.py"):  # the same analysis file, and a new one importing the helper
        analysis = tmp_path / name
        analysis.write_text(body)
        after = _run_file(analysis, tmp_path / f"after-{name}", address)["s"]
        alone = _run_file(analysis, tmp_path / f"one-{name}")["s"]
        assert np.array_equal(after.values(flow=True), alone.values(flow=True))
        assert after.values().sum() < before.values().sum()


def _simple(skim: str | None = None) -> ef.Process:
    proc = ef.Process("opts")
    proc.source = ef.source.synthetic(2_000, step_size=1_000)
    proc.histogram("MET_pt", bins=10, range=(0, 100))
    if skim is not None:
        proc.output(ef.output.parquet(skim, columns=["MET_pt"]))
    return proc


@pytest.mark.parametrize("option", [{"filter_order": "nope"}, {"executor": "nope"}, {"on_error": "nope"}])
def test_run_options_are_checked_before_a_cluster_starts(
    option: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import distributed

    def no_cluster(*_a: Any, **_k: Any) -> None:
        raise AssertionError("a cluster was started")

    monkeypatch.setattr(distributed, "LocalCluster", no_cluster)
    with pytest.raises(ef.ConfigurationError) as alone:
        _simple().run(**option)  # type: ignore[arg-type]
    with pytest.raises(ef.ConfigurationError) as dist:
        _simple().run(processes=2, **option)  # type: ignore[arg-type]
    if "on_error" not in option:  # a distributed run also has 'skip-chunk'
        assert str(dist.value) == str(alone.value)
    assert "'nope'" in str(dist.value)


def test_an_unpicklable_module_is_named(client: Any) -> None:
    proc = _simple()
    lock = threading.Lock()

    @proc.producer(consumes=["MET_pt"], produces=["locked"])
    def locked(ev: ef.Events) -> Any:
        with lock:
            return ev.MET_pt

    proc.histogram("locked", bins=10, range=(0, 100))
    with pytest.raises(ef.ConfigurationError, match="module 'locked' cannot be pickled") as e:
        proc.run(client=client)
    assert "--processes" in str(e.value) and "inside the function" in str(e.value)
    assert isinstance(e.value.__cause__, TypeError)


def test_an_unreachable_scheduler_fails_within_the_connect_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    from evflow import _dist_support

    monkeypatch.setattr(_dist_support, "CONNECT_TIMEOUT_S", 1)
    t0 = time.perf_counter()
    with pytest.raises(ef.ConfigurationError, match=r"cannot connect .* within 1 s"):
        _simple().run(client="tcp://127.0.0.1:9")  # the discard port: nothing listens
    assert time.perf_counter() - t0 < 15
    assert _dist_support.CONNECT_TIMEOUT_S == 1


def test_a_failed_run_removes_the_skim_directory_it_created(client: Any, tmp_path: Path) -> None:
    skim = tmp_path / "new_skim"
    with pytest.raises(ef.ModuleError, match="broken"):
        _with_bad(str(skim)).run(client=client)
    assert not skim.exists()
    kept = tmp_path / "kept"
    kept.mkdir()  # a directory that was there stays
    with pytest.raises(ef.ModuleError):
        _with_bad(str(kept)).run(client=client)
    assert kept.is_dir()


def _with_bad(skim: str) -> ef.Process:
    proc = _simple(skim)

    @proc.producer(consumes=["MET_pt"], produces=["bad"])
    def bad(ev: ef.Events) -> Any:
        raise ValueError("broken")

    proc.histogram("bad", bins=10, range=(0, 100))
    return proc


def test_preview_chunks_needs_no_cluster() -> None:
    chunks = ef.distributed.preview_chunks(_simple(), chunk_size=1_000)
    assert [c.events for c in chunks] == [1_000, 1_000]


@pytest.mark.skipif(sys.platform == "win32", reason="process groups")
def test_ctrl_c_on_processes_is_quiet(tmp_path: Path) -> None:
    """SIGINT to the whole process group (Ctrl-C in a terminal): the
    command ends with 'interrupted', no worker traceback; the chunks that
    finished are kept (the skim, read through its manifest, holds exactly
    them, and no other file in its directory)."""
    skim = tmp_path / "skim"
    analysis = tmp_path / "slow.py"
    analysis.write_text(
        "import time\nimport evflow as ef\n"
        "proc = ef.Process('slow')\nproc.source = ef.source.synthetic(200_000, step_size=1_000)\n"
        "@proc.producer(consumes=['MET_pt'], produces=['m'])\n"
        "def m(ev):\n    time.sleep(0.05)\n    return ev.MET_pt\n"
        "proc.histogram('m', bins=10, range=(0, 100))\n"
        f"proc.output(ef.output.parquet({str(skim)!r}, columns=['m']))\n"
    )
    p = subprocess.Popen(
        [sys.executable, "-m", "evflow", "run", str(analysis), "--processes", "1", "--no-progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert p.stderr is not None
        line = p.stderr.readline()  # the dashboard: the cluster is up and the job starts
        assert "dashboard" in line, line
        time.sleep(2)
        os.killpg(p.pid, signal.SIGINT)
        _out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == 130
    lines = err.strip().splitlines()
    assert "Traceback" not in err and lines[-1].startswith("evflow: interrupted after"), err
    if skim.exists():
        import json

        from evflow.distributed import read_skim

        manifest = json.loads((skim / "_manifest.json").read_text())
        assert read_skim(skim).num_rows == manifest["rows"]
        listed = {part["file"] for part in manifest["parts"] if part.get("file")} | {"_manifest.json"}
        assert {f.name for f in skim.iterdir()} <= listed, sorted(f.name for f in skim.iterdir())
