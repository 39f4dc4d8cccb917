"""The only worker with the resources is lost mid-run (killed, gone):
once a request has no worker left to retry on, the module runs locally
for the rest of the job (its queued batches at once), instead of sending
every later batch to a cluster that cannot run it and waiting
``timeout_s`` for each."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest

import _remote_hold as hold
from conftest import REMOTE_EVENTS, REMOTE_STEP, remote_analysis
from evflow.remote import Remote, RemoteNotice

distributed = pytest.importorskip("distributed")


def test_the_last_worker_lost_mid_run_leaves_the_module_local() -> None:
    cluster = distributed.LocalCluster(
        n_workers=1,
        threads_per_worker=1,
        processes=False,
        protocol="tcp",
        resources={"GPU": 1},
        dashboard_address=None,
        silence_logs=50,
    )
    hold.STARTED.clear()
    hold.RELEASE.clear()
    try:
        alone = remote_analysis(Remote(mode="local")).run(threads=1)
        worker = next(iter(cluster.workers.values()))

        def lose_the_worker() -> None:
            if hold.STARTED.wait(30.0):  # the first request is on the worker
                cluster.sync(worker.close, executor_wait=False)

        killer = threading.Thread(target=lose_the_worker)
        killer.start()
        with distributed.Client(cluster, set_as_default=False) as c:
            spec = Remote(
                resources={"GPU": 1},
                mode="remote",
                client=c,
                fn=hold.met2_held,
                combine=1,
                max_in_flight=1,
                timeout_s=2.0,
            )
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                r = remote_analysis(spec).run(threads=1, events_in_flight=4)
        killer.join(30.0)
    finally:
        hold.RELEASE.set()
        cluster.close()
    assert np.array_equal(r.histograms["met2"].values(), alone.histograms["met2"].values())
    rem = r.report["remote"]["met2"]
    # Only the request out when the worker went was sent; every later
    # batch ran locally instead of timing out in turn.
    assert rem["remote_requests"] == 1, rem
    assert rem["local_events"] == REMOTE_EVENTS and rem["remote_events"] == 0
    batches = REMOTE_EVENTS // REMOTE_STEP
    assert rem["fallback_batches"] == batches and rem["local_batches"] == batches
    notices = [str(w.message) for w in seen if issubclass(w.category, RemoteNotice)]
    assert any("no worker of the cluster has the resources {'GPU': 1} any more" in n for n in notices), (
        notices
    )
