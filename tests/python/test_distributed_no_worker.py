"""A distributed run whose cluster is left without a worker ends with a clear
error naming what waited, not a wait for ever (Dask keeps such tasks
pending silently)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

import evflow as ef
from evflow.distributed import _watch

distributed = pytest.importorskip("distributed")


def _without_workers(cluster: Any, client: Any) -> None:
    """Removes every worker of ``cluster`` and waits until the scheduler
    has none (as a cluster that closed the nanny of a worker that kept
    dying is left)."""
    cluster.scale(0)
    deadline = time.monotonic() + 30
    while client.nthreads():
        assert time.monotonic() < deadline, f"the workers are still there: {client.nthreads()}"
        time.sleep(0.05)


def _one_cut(source: Any) -> ef.Process:
    proc = ef.Process("alone")
    proc.source = source

    @proc.filter(consumes=["nMuon"])
    def sel(ev: ef.Events) -> Any:
        return ev.nMuon >= 1

    proc.path("p", [sel])
    return proc


@pytest.fixture
def client_without_workers(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A client of a LocalCluster left with no worker, its wait bounded at 1 s."""
    monkeypatch.setattr(_watch, "NO_WORKER_TIMEOUT_S", 1.0)
    monkeypatch.setattr(_watch, "CHECK_INTERVAL_S", 0.1)
    cluster = distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None, silence_logs=50
    )
    with cluster, distributed.Client(cluster) as c:
        _without_workers(cluster, c)
        yield c


def test_chunks_left_with_no_worker_are_a_clear_error(client_without_workers: Any) -> None:
    proc = _one_cut(ef.source.synthetic(3_000, step_size=1_000))
    t0 = time.monotonic()
    with pytest.raises(ef.JobError, match=r"no Dask worker connected to the scheduler") as info:
        proc.run(client=client_without_workers, chunk_size=1_000)
    assert time.monotonic() - t0 < 20, "the error comes within the bound, not after a long wait"
    # The waiting chunks are named, and what Dask said of their tasks.
    assert "chunk 0 (" in str(info.value) and "1 more" in str(info.value), info.value
    assert "(its tasks: 2 pending)" in str(info.value), info.value


def test_metadata_reads_left_with_no_worker_are_a_clear_error(
    client_without_workers: Any, tmp_path: Any
) -> None:
    import awkward as ak

    path = tmp_path / "events.parquet"
    ak.to_parquet(ak.Array({"nMuon": [1, 2, 0]}), path)
    proc = _one_cut(ef.source.parquet([str(path)]))
    with pytest.raises(ef.JobError, match=r"reading the metadata of 1 file\(s\) waited \d+ s with no Dask"):
        proc.run(client=client_without_workers)


def test_only_a_local_cluster_bounds_the_wait_unless_the_setting_says() -> None:
    """A batch system's workers may wait in its queue for long: runs on
    clusters other than a LocalCluster wait for them, unless the Dask
    setting ``evflow.no-worker-timeout`` bounds the wait."""
    import dask

    cluster = distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None, silence_logs=50
    )
    with cluster, distributed.Client(cluster) as local:
        assert _watch.no_worker_timeout(local) == _watch.NO_WORKER_TIMEOUT_S
        with distributed.Client(cluster.scheduler_address) as by_address:
            assert _watch.no_worker_timeout(by_address) is None
            with dask.config.set({"evflow.no-worker-timeout": "30 minutes"}):
                assert _watch.no_worker_timeout(by_address) == 1800.0
                assert _watch.no_worker_timeout(local) == 1800.0
            with dask.config.set({"evflow.no-worker-timeout": "never"}):
                assert _watch.no_worker_timeout(local) is None
            with (
                dask.config.set({"evflow.no-worker-timeout": "soon"}),
                pytest.raises(ef.ConfigurationError, match=r"evflow.no-worker-timeout .* not 'soon'"),
            ):
                _watch.no_worker_timeout(local)


def test_the_module_examples_hold() -> None:
    import doctest

    failures, tried = doctest.testmod(_watch, verbose=False)[:2]
    assert tried >= 4 and failures == 0
