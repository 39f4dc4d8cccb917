"""Benchmark commands refuse bad arguments by name, before building or
running anything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _heldout(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / "ordering_heldout.py"), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_missing_baseline_binary_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "old" / "evflow"
    done = _heldout("--baseline", str(missing))
    assert done.returncode == 2
    assert f"--baseline {missing}: no such file" in done.stderr


@pytest.mark.parametrize("option", ["--runs", "--events", "--threads"])
def test_counts_below_one_are_refused(option: str) -> None:
    done = _heldout(option, "0")
    assert done.returncode == 2
    assert "must be at least 1" in done.stderr
