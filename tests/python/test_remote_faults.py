"""Remote producers when placing or reaching the remote side goes wrong:
an actor that cannot be placed in time (its resource busy) falls back
locally with a notice as a timed-out request does, and leaves no actor
behind; a ``Remote(client=<Client>)`` travels to the chunks of a
distributed run as its scheduler's address."""

from __future__ import annotations

import copy
import pickle
import sys
import time
from typing import Any

import cloudpickle
import numpy as np
import pytest

from conftest import REMOTE_EVENTS, REMOTE_STEP, remote_analysis
from evflow.remote import Remote, RemoteError, RemoteNotice

distributed = pytest.importorskip("distributed")

# The analyses below are shipped by value: workers need not import this module.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _busy(seconds: float) -> int:
    time.sleep(seconds)
    return 1


def _actors(cluster: Any) -> list[str]:
    """The actor tasks the scheduler knows and the actors the worker holds."""
    tasks = [str(k) for k in cluster.scheduler.tasks if "Runner" in str(k)]
    held = [str(k) for w in cluster.workers.values() for k in w.state.actors]
    return tasks + held


def test_an_actor_not_placed_in_time_falls_back_locally(gpu_cluster: Any) -> None:
    alone = remote_analysis(Remote(mode="local")).run(threads=1)
    with distributed.Client(gpu_cluster, set_as_default=False) as c:
        hog = c.submit(_busy, 3.0, resources={"GPU": 1}, pure=False)  # the resource is busy
        deadline = time.time() + 10
        while not any(c.processing().values()) and time.time() < deadline:
            time.sleep(0.05)
        spec = Remote(resources={"GPU": 1}, mode="remote", client=c, transport="actor", timeout_s=1.0)
        t0 = time.perf_counter()
        with pytest.warns(RemoteNotice, match=r"'met2' runs locally: its actor could not be placed"):
            r = remote_analysis(spec).run(threads=1)
        assert time.perf_counter() - t0 < 2.5, "one timeout_s for the placement, not one per request"
        assert np.array_equal(r.histograms["met2"].values(), alone.histograms["met2"].values())
        rem = r.report["remote"]["met2"]
        assert (rem["local_events"], rem["remote_events"], rem["available"]) == (REMOTE_EVENTS, 0, False)
        required = Remote(
            resources={"GPU": 1}, mode="remote", client=c, transport="actor", timeout_s=0.5, required=True
        )
        with pytest.raises(RemoteError, match=r"must run remotely .*could not be placed"):
            remote_analysis(required).run(threads=1)
        assert hog.result() == 1
        del hog
        deadline = time.time() + 5
        while _actors(gpu_cluster) and time.time() < deadline:
            time.sleep(0.05)
        assert _actors(gpu_cluster) == [], "the actors not placed were cancelled"


def test_a_client_object_reaches_the_chunks_as_its_address(client: Any, gpu_cluster: Any) -> None:
    address = gpu_cluster.scheduler_address
    with distributed.Client(address, set_as_default=False) as gpu:
        spec = Remote(resources={"GPU": 1}, mode="remote", client=gpu, combine=1)
        assert pickle.loads(cloudpickle.dumps(spec)).client == address
        assert copy.copy(spec).client is gpu and copy.deepcopy(spec).client is gpu
        alone = remote_analysis(Remote(mode="local")).run(threads=1)
        r = remote_analysis(spec).run(client=client, chunk_size=2 * REMOTE_STEP)
    assert np.array_equal(r.histograms["met2"].values(), alone.histograms["met2"].values())
    rem = r.report["remote"]["met2"]
    assert rem["remote_events"] == REMOTE_EVENTS and rem["local_events"] == 0 and rem["chunks"] == 2
