"""Shared fixtures: the real HEP files (tests skip when they are absent)."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterable, Iterator
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


def cutflow_of_runs(
    filters: tuple[str, ...], runs: list[list[int]], orderings: list[dict[str, Any]], policy: str
) -> Any:
    """The cut-flow of one reorderable path ``sel`` of ``filters`` whose
    batch ``i`` recorded the filters ``runs[i]`` (their indices) in that
    order, every one of its 10 events passing; ``orderings`` as in a
    report."""
    from evflow.cutflow import build

    records = [
        (batch, 0, step, position, 10, 10, 10.0, 10.0)
        for batch, run in enumerate(runs)
        for position, step in enumerate(run)
    ]
    batches = [(batch, 10, 10.0) for batch in range(len(runs))]
    finals = [(batch, [(10, 10.0)]) for batch in range(len(runs))]
    return build([("sel", filters, True)], records, batches, finals, [], False, policy, orderings)["sel"]


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


#: The remote-offload analyses' input: events and batch size.
REMOTE_EVENTS, REMOTE_STEP = 4_000, 1_000


@pytest.fixture(scope="module")
def client() -> Any:
    """A client of a LocalCluster of 2 single-threaded worker processes, one
    per test module."""
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=40
    )
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


@pytest.fixture(scope="module")
def gpu_cluster() -> Any:
    """A cluster for remote requests: one in-process worker with GPU=1,
    reachable over TCP (by the chunk workers of a distributed run too)."""
    import distributed

    cluster = distributed.LocalCluster(
        n_workers=1,
        threads_per_worker=1,
        processes=False,
        protocol="tcp",
        resources={"GPU": 1},
        dashboard_address=None,
        silence_logs=40,
    )
    yield cluster
    cluster.close()


def remote_analysis(spec: Any, name: str = "offload") -> Any:
    """A process whose one producer (``met2 = 2 MET_pt``) runs as ``spec``
    (an ``ef.Remote``) says, with a histogram of it."""
    import numpy as np

    import evflow as ef

    proc = ef.Process(name)
    proc.source = ef.source.synthetic(REMOTE_EVENTS, step_size=REMOTE_STEP, seed=3)

    @proc.producer(consumes=["MET_pt"], produces=["met2"], remote=spec)
    def met2(ev: ef.Events) -> np.ndarray:
        return np.asarray(ev.MET_pt, dtype=np.float64) * 2

    proc.histogram("met2", bins=20, range=(0, 400))
    return proc


@pytest.fixture
def silent_socket() -> Iterator[int]:
    """The port of a socket that accepts connections and never says a
    word: no Dask scheduler (another service's port, a connection a
    firewall holds open)."""
    import socket

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    yield srv.getsockname()[1]
    srv.close()


def run_bounded(call: Any, seconds: float = 30.0) -> dict[str, Any]:
    """``call()`` on a thread, so that a hang fails the test instead of
    holding the suite (the thread is left behind only then): its
    ``"result"``, or the ``"error"`` it raised."""
    import threading

    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = call()
        except BaseException as e:
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still running after {seconds:g} s: a hang"
    return box
