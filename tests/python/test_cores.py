"""The cores a process may use: its affinity or ``EVFLOW_CORES``, and a
distributed chunk task's share of its host (engine threads, read-ahead
workers)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

import evflow as ef
from evflow import _cores
from evflow.errors import ConfigurationError
from evflow.source import ReadBalancer


@pytest.fixture(autouse=True)
def _no_task_share(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_cores, "_task_share", None)
    monkeypatch.delenv("EVFLOW_CORES", raising=False)


def test_machine_cores_are_the_affinity_or_evflow_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _cores.machine_cores() == len(os.sched_getaffinity(0))
    monkeypatch.setenv("EVFLOW_CORES", "12")
    assert _cores.machine_cores() == 12 == _cores.available_cores()
    for bad in ("0", "-3", "four", "1.5"):
        monkeypatch.setenv("EVFLOW_CORES", bad)
        with pytest.raises(ConfigurationError, match="EVFLOW_CORES"):
            _cores.machine_cores()


def test_a_task_slot_gets_its_share_of_the_host() -> None:
    assert _cores.share_of(16, 16) == 1
    assert _cores.share_of(16, 4) == 4
    assert _cores.share_of(16, 5) == 3
    assert _cores.share_of(2, 8) == 1  # never less than one core
    assert _cores.share_of(16, None) == 16


def test_read_ahead_workers_follow_the_cores_when_reading_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVFLOW_CORES", "16")
    balancer = ReadBalancer()  # built where the analysis is defined (a Dask client, say)
    assert balancer.start(100)[3] == 17
    monkeypatch.setenv("EVFLOW_CORES", "1")  # ... reads where it runs
    workers, depth, _interval, most = balancer.start(100)
    assert most == 2 and workers <= most and depth >= workers
    assert ReadBalancer(max_workers=5).start(100)[3] == 5  # chosen explicitly: kept
    assert ReadBalancer(workers=6).start(100)[3] == 6


def test_default_engine_threads_are_the_cores_this_process_may_use(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVFLOW_CORES", "3")
    proc = ef.Process("threads")
    proc.source = ef.source.synthetic(2_000, step_size=500)
    proc.histogram("MET_pt", bins=10, range=(0, 100))
    result = proc.run()
    assert result.report["threads"] == 3
    assert result.histograms["MET_pt"].sum(flow=True) == 2_000


def _seen_cores(ev: ef.Events) -> np.ndarray:
    from evflow import _cores

    return np.full(len(ev["MET_pt"]), _cores.available_cores(), dtype=np.int64)


def test_chunk_tasks_use_their_share_of_the_host() -> None:
    """Two single-threaded worker processes on one host whose allocation is
    8 cores (``EVFLOW_CORES`` in the workers): each chunk task uses 4."""
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",
        silence_logs=40,
        env={"EVFLOW_CORES": "8"},
    )
    client: Any = distributed.Client(cluster)
    try:
        proc = ef.Process("share")
        proc.source = ef.source.synthetic(6_000, step_size=1_000)
        proc.producer(_seen_cores, consumes=["MET_pt"], produces="cores")
        proc.histogram("cores", bins=16, range=(0, 16))
        result = proc.run(client=client, chunk_size=2_000)
        hist = result.histograms["cores"]
        assert hist.sum(flow=True) == 6_000
        assert hist[4] == 6_000, hist.values(flow=True)
    finally:
        client.close()
        cluster.close()


def test_a_chunk_tasks_share_ends_with_the_last_task_of_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVFLOW_CORES", "8")
    with _cores.task_share(4) as share:
        assert share == 2 == _cores.available_cores()
        with _cores.task_share(4):  # a second task slot of the same worker process
            assert _cores.available_cores() == 2
        assert _cores.available_cores() == 2  # the first task still runs
    assert _cores.available_cores() == 8


def test_an_in_process_cluster_leaves_the_clients_own_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers of ``processes=False`` run the chunk tasks in the client's
    process: a later single-process run there uses the process's cores, not
    a chunk task's share (it used 2 of 4 after the cluster's run)."""
    distributed = pytest.importorskip("distributed")
    monkeypatch.setenv("EVFLOW_CORES", "4")
    proc = ef.Process("in-process")
    proc.source = ef.source.synthetic(4_000, step_size=1_000)
    proc.producer(_seen_cores, consumes=["MET_pt"], produces="cores")
    proc.histogram("cores", bins=16, range=(0, 16))
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0", silence_logs=40
    )
    client: Any = distributed.Client(cluster)
    try:
        shared = proc.run(client=client, chunk_size=2_000)
    finally:
        client.close()
        cluster.close()
    assert shared.histograms["cores"][2] == 4_000
    alone = proc.run()
    assert alone.report["threads"] == 4
    assert alone.histograms["cores"][4] == 4_000
