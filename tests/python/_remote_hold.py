"""A remote implementation that holds its request until released, for
tests on an in-process Dask worker: pickled by reference, so the worker
calls this very module and the test's events reach it."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

STARTED = threading.Event()
RELEASE = threading.Event()


def met2_held(ev: Any) -> np.ndarray:
    STARTED.set()
    RELEASE.wait(30.0)
    return np.asarray(ev.MET_pt, dtype=np.float64) * 2
