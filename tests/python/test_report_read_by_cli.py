"""``evflow report`` (the command line's report reader) reads a report the
Python face wrote, in one process and on a Dask cluster: the devices
section (a map here, a list in ``evflow run``'s report), modules with their
per-path entries, orderings, failed batches, stalls and skipped files.

The ``evflow`` binary is looked for in ``EVFLOW_CLI``, the workspace's
``target`` folders (or ``CARGO_TARGET_DIR``'s) and ``PATH``; the tests skip
without it (crates/evflow-cli/tests/report_python.rs reads the same
sections from fixtures written after the report's documented schema)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import evflow as ef

ROOT = Path(__file__).resolve().parents[2]


def _cli() -> str:
    candidates = [os.environ.get("EVFLOW_CLI", "")]
    for target in [os.environ.get("CARGO_TARGET_DIR", ""), str(ROOT / "target")]:
        if target:
            candidates += [os.path.join(target, "release", "evflow"), os.path.join(target, "debug", "evflow")]
    candidates.append(shutil.which("evflow") or "")
    for c in candidates:
        if c and os.access(c, os.X_OK) and os.path.isfile(c):
            return c
    pytest.skip("the evflow command-line binary is not built (cargo build -p evflow-cli, or set EVFLOW_CLI)")


def _process(tmp_path: Path) -> ef.Process:
    """A device producer and filter, a filter on two paths sharing an
    exclusive resource with another (stalls), a batch that fails
    (``on_error="skip"``) and an unreadable input file
    (``skip_bad_files``)."""
    files = []
    rng = np.random.default_rng(5)
    for i in range(3):
        path = tmp_path / f"part{i}.parquet"
        pq.write_table(pa.table({"MET_pt": rng.exponential(20, 4000).astype(np.float32)}), path)
        files.append(str(path))
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not a parquet file")
    proc = ef.Process("cli")
    proc.source = ef.source.parquet([*files, str(bad)], step_size=1000)

    @proc.producer(consumes=["MET_pt"], produces=["twice"], device=lambda ev, xp: ev.MET_pt * 2)
    def twice(ev: Any) -> Any:
        if ev.info.index == 2:
            raise ValueError("bad batch")
        return ev.MET_pt * 2

    @proc.filter(consumes=["twice"], device=lambda ev, xp: ev.twice > 30)
    def big(ev: Any) -> Any:
        return ev.twice > 30

    @proc.filter(consumes=["MET_pt"], concurrency="exclusive", resources=["x"])
    def nonzero(ev: Any) -> Any:
        return ev.MET_pt > 1

    @proc.filter(consumes=["MET_pt"], concurrency="exclusive", resources=["x"])
    def above2(ev: Any) -> Any:
        return ev.MET_pt > 2

    proc.path("sel", [big, nonzero], reorderable=True)
    proc.path("ctl", [nonzero, above2])
    proc.histogram("twice", bins=10, range=(0, 100), after="sel")
    return proc


def _read_by_cli(report: dict[str, Any], tmp_path: Path) -> str:
    cli = _cli()
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    out = subprocess.run([cli, "report", str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_a_single_process_report_reads(tmp_path: Path) -> None:
    _cli()  # skip before the run
    result = _process(tmp_path).run(threads=2, device="emulated", on_error="skip", skip_bad_files=True)
    r = result.report
    assert r["devices"]["modules"] and r["failed_events"] and r["skipped_files"] and r["orderings"]
    text = _read_by_cli(r, tmp_path)
    assert f"{result.events} events in {r['batches']} batches" in text
    assert "module 'twice'" in text and "ValueError: bad batch" in text
    assert "bad.parquet: " in text
    assert "cut-flow of path 'ctl'" in text
    for label, m in r["devices"]["modules"].items():
        assert (
            f"device module {label} ({m['kind']}) on emulated: {m['host_events']} host + "
            f"{m['device_events']} device events in {m['batches']} batches"
        ) in text


def test_a_distributed_report_reads(tmp_path: Path) -> None:
    _cli()
    pytest.importorskip("distributed")
    result = _process(tmp_path).run(processes=2, threads=1, on_error="skip", skip_bad_files=True)
    r = result.report
    text = _read_by_cli(r, tmp_path)
    assert f"{result.events} events in {r['batches']} batches" in text
    assert "bad.parquet: " in text
    devices = r["devices"]
    if devices.get("notice"):
        assert devices["notice"] in text
    for label in devices["modules"]:
        assert f"device module {label} " in text
