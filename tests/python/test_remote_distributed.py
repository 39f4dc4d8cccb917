"""Remote producers in distributed runs (conftest's 2-worker
cluster runs the chunks): without a cluster of their own they run locally
in the chunks at once (or are refused when required); offloading to a
separate cluster works and its statistics are merged into the report; a
client opened from an address is closed after the run. Also: a skim's
write error names the skim's module whatever the executor."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import cloudpickle
import numpy as np
import pytest

import evflow as ef
from conftest import REMOTE_EVENTS, REMOTE_STEP, remote_analysis
from evflow.output import ParquetOutput
from evflow.remote import Remote, RemoteNotice
from evflow.remote._distributed import merge_remote

distributed = pytest.importorskip("distributed")

# The analyses below are shipped by value: workers need not import this module.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def test_remote_without_a_cluster_of_its_own_runs_locally_in_the_chunks(client: Any) -> None:
    spec = Remote(mode="remote", timeout_s=30)  # before: each request waited 2 x 30 s
    alone = remote_analysis(Remote(mode="local")).run(threads=1)
    t0 = time.perf_counter()
    with pytest.warns(RemoteNotice, match="'met2' run locally in the chunk tasks"):
        r = remote_analysis(spec).run(client=client, chunk_size=2 * REMOTE_STEP)
    assert time.perf_counter() - t0 < 25
    assert np.array_equal(r.histograms["met2"].values(), alone.histograms["met2"].values())
    rem = r.report["remote"]["met2"]
    assert (rem["local_events"], rem["remote_events"], rem["remote_requests"]) == (REMOTE_EVENTS, 0, 0)
    assert "run locally in the chunk tasks" in rem["notices"][0]


def test_a_required_remote_without_a_cluster_of_its_own_is_refused(client: Any) -> None:
    with pytest.raises(ef.ConfigurationError, match=r"'met2' must run remotely .*Remote\(client="):
        remote_analysis(Remote(mode="remote", required=True)).run(client=client)


def _clients(cluster: Any) -> int:
    return len(cluster.scheduler.clients)


def test_offload_to_a_separate_cluster_is_reported(client: Any, gpu_cluster: Any) -> None:
    address = gpu_cluster.scheduler_address
    spec = Remote(resources={"GPU": 1}, mode="remote", client=address, combine=1)
    alone = remote_analysis(Remote(mode="local")).run(threads=1)
    r = remote_analysis(spec).run(client=client, chunk_size=2 * REMOTE_STEP)
    assert np.array_equal(r.histograms["met2"].values(), alone.histograms["met2"].values())
    rem = r.report["remote"]["met2"]
    assert rem["remote_events"] == REMOTE_EVENTS and rem["local_events"] == 0
    assert rem["remote_batches"] == REMOTE_EVENTS // REMOTE_STEP and rem["chunks"] == 2
    assert rem["remote_share"] == 1.0 and rem["rtt_s"]["min"] <= rem["rtt_s"]["max"]
    assert rem["workers"] and rem["bytes_sent"] == REMOTE_EVENTS * 4  # MET_pt: float32


def test_a_client_opened_from_an_address_is_closed_after_the_run(gpu_cluster: Any) -> None:
    address = gpu_cluster.scheduler_address
    before = _clients(gpu_cluster)
    for _ in range(3):
        r = remote_analysis(Remote(resources={"GPU": 1}, mode="remote", client=address)).run(threads=1)
        assert r.report["remote"]["met2"]["remote_events"] == REMOTE_EVENTS
    deadline = time.time() + 10
    while _clients(gpu_cluster) > before and time.time() < deadline:
        time.sleep(0.1)
    assert _clients(gpu_cluster) == before


def test_merge_remote_sums_counts_and_combines_round_trips() -> None:
    def chunk(requests: int, median: float, notice: str) -> dict[str, Any]:
        return {"m": {"local_events": 10, "remote_events": 30, "remote_requests": requests,
                      "max_in_flight_seen": requests, "workers": [f"w{requests}"], "notices": [notice],
                      "rtt_s": {"min": median / 2, "median": median, "mean": median, "max": 2 * median},
                      "decision": {"mode": "adaptive", "n": requests}, "available": True}}  # fmt: skip

    merged = merge_remote([chunk(1, 1.0, "a"), None, chunk(3, 3.0, "a")])
    assert merged is not None
    m = merged["m"]
    assert (m["local_events"], m["remote_events"], m["remote_requests"]) == (20, 60, 4)
    assert m["max_in_flight_seen"] == 3 and m["remote_share"] == 0.75 and m["chunks"] == 2
    assert m["rtt_s"] == {"min": 0.5, "median": 3.0, "mean": 2.5, "max": 6.0}
    assert m["workers"] == ["w1", "w3"] and m["notices"] == ["a"] and m["decision"]["n"] == 3
    assert merge_remote([None, {}]) is None


class _FailingSkim(ParquetOutput):
    """A skim whose second write fails (a full disk)."""

    writes = 0

    def _write(self, table: Any) -> None:
        type(self).writes += 1
        if type(self).writes == 2:
            raise OSError("disk full")
        super()._write(table)


@pytest.mark.parametrize("executor", ["sequential", "threaded"])
def test_a_skim_write_error_names_the_skim_module(executor: str, tmp_path: Path) -> None:
    """The threaded executor writes a batch's rows on the thread of whichever
    end module completes the batch (here a histogram's): the error still
    names the output module and the batch whose rows failed."""
    proc = ef.Process("p")
    proc.source = ef.source.synthetic(6_000, step_size=1_000)
    proc.output(_FailingSkim(str(tmp_path / "s.parquet"), ["MET_pt"]))
    proc.histogram("MET_pt", bins=10, range=(0, 100))

    @proc.producer(consumes=["MET_pt"], produces=["slow"])
    def slow(ev: ef.Events) -> Any:
        time.sleep(0.01)  # the histogram of it completes each batch, after the skim ran
        return ev.MET_pt

    proc.histogram("hx", "slow", bins=10, range=(0, 100))
    _FailingSkim.writes = 0
    with pytest.raises(ef.ModuleError) as e:
        proc.run(threads=1, executor=executor)  # type: ignore[arg-type]
    assert e.value.module == "output0" and e.value.batch == 1
    assert str(e.value).startswith("module 'output0' failed on batch 1 (synthetic events 1000-1999): OSError")
    assert isinstance(e.value.__cause__, OSError)
