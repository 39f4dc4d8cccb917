"""Shared fixtures: the real HEP files (tests skip when they are absent)."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("EVFLOW_HEP_DATA", ROOT.parent / "shared" / "data" / "hep"))


def data_file(name: str) -> Path:
    path = DATA / name
    if not path.exists():
        pytest.skip(f"real HEP data file {path} is absent (set EVFLOW_HEP_DATA to its folder)")
    return path


@pytest.fixture
def zmumu_file() -> Path:
    return data_file("uproot-Zmumu.root")


@pytest.fixture
def hzz_file() -> Path:
    return data_file("uproot-HZZ.root")


@pytest.fixture
def nano_file() -> Path:
    return data_file("nanoAOD_2015_CMS_Open_Data_ttbar.root")


def load_example(name: str) -> ModuleType:
    """Imports examples/NAME.py as a module."""
    path = ROOT / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"evflow_example_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def without_rows(events: Any, ranges: Iterable[tuple[int, int]]) -> Any:
    """EVENTS (an awkward array) without the rows START to STOP - 1 of each
    (START, STOP) in RANGES."""
    keep = np.ones(len(events), dtype=bool)
    for start, stop in ranges:
        keep[start:stop] = False
    return events[keep]
