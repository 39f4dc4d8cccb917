"""bench/bad_file.py refuses bad counts by name, before making any input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("option", "value", "says"), [
    ("--files", "1", "must be at least 2, not 1"),
    ("--runs", "0", "must be at least 1, not 0"),
    ("--events", "many", "'many' is not a whole number"),
])  # fmt: skip
def test_bad_counts_are_refused(tmp_path: Path, option: str, value: str, says: str) -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "bad_file.py"),
            "--data-dir",
            str(tmp_path / "d"),
            option,
            value,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert f"argument {option}: {says}" in done.stderr
    assert not (tmp_path / "d").exists()
