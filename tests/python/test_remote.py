"""Remote offload on a 2-worker Dask cluster (one worker advertises
``GPU=1``): offload, combining, adaptive split, fallbacks, errors and a
worker killed mid-request, each checked against a local run and an
independent awkward/numpy reference."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import awkward as ak
import cloudpickle
import numpy as np
import pytest

import evflow as ef
from evflow.remote import Remote, RemoteNotice

distributed = pytest.importorskip("distributed")

# The remote implementations below are shipped by value: workers need not
# import this test module.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

EVENTS, STEP = 12_000, 1_000
CONSUMES = ["Jet_pt", "MET_pt"]


@pytest.fixture(scope="module")
def client() -> Any:
    from distributed import Client, Nanny, Scheduler, SpecCluster

    workers = {
        "cpu": {"cls": Nanny, "options": {"nthreads": 1}},
        "gpu": {"cls": Nanny, "options": {"nthreads": 1, "resources": {"GPU": 1}}},
    }
    cluster = SpecCluster(
        workers=workers,
        scheduler={"cls": Scheduler, "options": {"dashboard_address": None}},
        silence_logs=40,
    )
    c = Client(cluster, set_as_default=False)
    c.wait_for_workers(2)
    yield c
    c.close()
    cluster.close()


@pytest.fixture(autouse=True)
def _workers_present(request: pytest.FixtureRequest) -> None:
    """Each test that uses the cluster starts with both workers registered:
    a worker killed by an earlier test is restarted by its nanny, and under
    load the scheduler can briefly list none (a test then saw "0 workers"
    and ran the module locally)."""
    if "client" in request.fixturenames:
        request.getfixturevalue("client").wait_for_workers(2, timeout=60)


def gpu_workers(client: Any) -> set[str]:
    workers = client.scheduler_info()["workers"]
    return {a for a, w in workers.items() if w.get("resources", {}).get("GPU")}


def rss(ev: Any) -> np.ndarray:
    """Root of the sum of squares of the jets' pT and the MET, per event."""
    return np.sqrt(ak.to_numpy(ak.sum(ev.Jet_pt**2, axis=1)) + ev.MET_pt.astype(np.float64) ** 2)


def reference() -> dict[int, np.ndarray]:
    """The same quantity computed directly on the source's batches, for the
    events with MET_pt > 20."""
    reader = ef.source.synthetic(EVENTS, step_size=STEP, seed=3).reader(CONSUMES, None)
    out = {}
    i = 0
    while (b := reader.next_batch()) is not None:
        jet, met = b.columns["Jet_pt"], np.asarray(b.columns["MET_pt"])
        keep = met > 20
        out[i] = np.sqrt(ak.to_numpy(ak.sum(jet[keep] ** 2, axis=1)) + met[keep].astype(np.float64) ** 2)
        i += 1
    return out


def make(remote: Remote | None, fn: Any = rss) -> tuple[ef.Process, dict[int, np.ndarray]]:
    proc = ef.Process("remote")
    proc.source = ef.source.synthetic(EVENTS, step_size=STEP, seed=3)
    proc.producer(consumes=CONSUMES, produces=["rss"], label="rss", remote=remote)(fn)

    @proc.filter(consumes=["MET_pt"])
    def met(ev: Any) -> Any:
        return ev.MET_pt > 20

    proc.path("sel", [met])
    got: dict[int, np.ndarray] = {}

    @proc.analyzer(consumes=["rss"], after="sel")
    def collect(ev: Any) -> None:
        assert ev.info.index not in got, "a batch's product arrived twice"
        got[ev.info.index] = np.asarray(ev.rss)

    return proc, got


@pytest.fixture(scope="module")
def expected() -> dict[int, np.ndarray]:
    ref = reference()
    proc, got = make(None)
    proc.run(threads=2)
    assert sorted(got) == sorted(ref)
    for i in ref:
        np.testing.assert_allclose(got[i], ref[i], rtol=1e-12)
    return got


def check(got: dict[int, np.ndarray], expected: dict[int, np.ndarray]) -> None:
    assert sorted(got) == sorted(expected), "every batch exactly once"
    for i in expected:
        np.testing.assert_array_equal(got[i], expected[i])


def test_offload_every_batch(client: Any, expected: dict[int, np.ndarray]) -> None:
    proc, got = make(Remote(resources={"GPU": 1}, mode="remote", client=client, combine=4))
    res = proc.run(threads=2, events_in_flight=6)
    check(got, expected)
    r = res.report["remote"]["rss"]
    assert r["remote_batches"] == len(expected) and r["local_batches"] == 0
    assert r["remote_events"] == sum(len(v) for v in expected.values())
    assert r["bytes_sent"] > 0 and r["bytes_received"] == 8 * r["remote_events"]
    assert r["rtt_s"]["min"] > 0
    assert set(r["workers"]) <= gpu_workers(client), "requests ran on the worker with the resource"
    module = next(m for m in res.report["modules"] if m["label"] == "rss")
    assert module["wait_s"] > 0, "the engine waited for the request as external work"


def hold_first(flag: str, release: str, limit_s: float = 20.0) -> Any:
    """A remote implementation whose first call waits until the file
    ``release`` exists (bounded): it writes its pid to ``flag`` first."""

    def fn(ev: Any) -> Any:
        if not os.path.exists(flag):
            Path(flag).write_text(str(os.getpid()))
            t0 = time.monotonic()
            while not os.path.exists(release) and time.monotonic() - t0 < limit_s:
                time.sleep(0.005)
            Path(flag + ".released").write_text(str(os.path.exists(release)))
        return rss(ev)

    return fn


def test_combining_requests(client: Any, tmp_path: Path) -> None:
    """While the first request is out (held on the worker), the next
    batches queue and leave together in one request."""
    flag, release = str(tmp_path / "flag"), str(tmp_path / "go")
    spec = Remote(
        resources={"GPU": 1},
        mode="remote",
        client=client,
        fn=hold_first(flag, release),
        combine=8,
        max_in_flight=1,
    )
    off = ef.remote.Offloader("rss", spec, rss, frozenset(CONSUMES), [], ["rss"])
    off.start()
    reader = ef.source.synthetic(5 * STEP, step_size=STEP, seed=3).reader(CONSUMES, None)
    batches = [reader.next_batch() for _ in range(5)]
    handles = [Handle() for _ in batches]
    items = [off.acquire(b, None, [], h) for b, h in zip(batches, handles, strict=True)]
    Path(release).write_text("")
    for h in handles:
        assert h.wait(30), "every batch completed"
    out = [off.produce(it)[0] for it in items]
    report = off.close()
    assert report["remote_requests"] == 2 and report["max_batches_per_request"] == 4
    for b, v in zip(batches, out, strict=True):
        met = np.asarray(b.columns["MET_pt"], dtype=np.float64)
        want = np.sqrt(ak.to_numpy(ak.sum(b.columns["Jet_pt"] ** 2, axis=1)) + met**2)
        np.testing.assert_allclose(v, want, rtol=1e-12)
    assert all(h.calls == 1 for h in handles)


class Handle:
    """Stands in for the engine's completion handle."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.calls = 0
        self.failure: str | None = None

    def finish(self) -> bool:
        self.calls += 1
        self.event.set()
        return True

    def fail(self, message: str) -> bool:
        self.failure = message
        return self.finish()

    def wait(self, timeout: float) -> bool:
        return self.event.wait(timeout)


def test_no_engine_thread_waits(client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One engine thread. Batch 0 goes remote and its request is held on
    the worker until a local analyzer of another batch, running after the
    request left, releases it: possible only if the thread did not wait
    for the request (otherwise the hold expires and the test fails)."""
    flag, release = str(tmp_path / "flag"), str(tmp_path / "go")
    sent = threading.Event()

    class Recording(ef.remote.Offloader):
        def acquire(self, *args: Any) -> Any:
            item = super().acquire(*args)
            if item.side == "remote":
                sent.set()
            return item

    monkeypatch.setattr(ef.remote, "Offloader", Recording)
    spec = Remote(resources={"GPU": 1}, mode="remote", client=client, fn=hold_first(flag, release))
    proc = ef.Process("hold")
    proc.source = ef.source.synthetic(EVENTS, step_size=STEP, seed=3)
    proc.producer(consumes=CONSUMES, produces=["rss"], label="rss", remote=spec)(rss)

    @proc.filter(consumes=["MET_pt"])
    def first_batch(ev: Any) -> Any:
        return np.full(len(ev), ev.info.index == 0)

    proc.path("sel", [first_batch])
    got: dict[int, np.ndarray] = {}
    released_by: list[int] = []

    @proc.analyzer(consumes=["rss"], after="sel")
    def collect(ev: Any) -> None:
        got[ev.info.index] = np.asarray(ev.rss)

    @proc.analyzer(consumes=["MET_pt"])
    def releaser(ev: Any) -> None:
        if sent.is_set() and not os.path.exists(release):
            # The request is out: the worker starts it whatever this thread does.
            t0 = time.monotonic()
            while not os.path.exists(flag) and time.monotonic() - t0 < 20:
                time.sleep(0.005)
            Path(release).write_text("")
            released_by.append(ev.info.index)

    proc.run(threads=1, events_in_flight=4)
    assert Path(flag + ".released").read_text() == "True"
    assert released_by, "a local module ran while the request was out"
    b = ef.source.synthetic(STEP, step_size=STEP, seed=3).reader(CONSUMES, None).next_batch()
    met = np.asarray(b.columns["MET_pt"], dtype=np.float64)
    want = np.sqrt(ak.to_numpy(ak.sum(b.columns["Jet_pt"] ** 2, axis=1)) + met**2)
    assert list(got) == [0]
    np.testing.assert_allclose(got[0], want, rtol=1e-12)


def test_adaptive_split(client: Any, expected: dict[int, np.ndarray]) -> None:
    proc, got = make(Remote(resources={"GPU": 1}, client=client))
    res = proc.run(threads=2, events_in_flight=6)
    check(got, expected)
    r = res.report["remote"]["rss"]
    assert r["local_events"] + r["remote_events"] == sum(len(v) for v in expected.values())
    assert r["local_batches"] >= 1 and r["remote_batches"] >= 1, "both sides measured"
    d = r["decision"]
    assert d["mode"] == "adaptive" and d["local_s_per_event"] > 0 and d["remote_overhead_s"] is not None


def test_no_worker_with_the_resource(client: Any, expected: dict[int, np.ndarray]) -> None:
    proc, got = make(Remote(resources={"TPU": 1}, mode="remote", client=client))
    with pytest.warns(RemoteNotice, match=r"'rss' runs locally: no worker .* \{'TPU': 1\}"):
        res = proc.run(threads=2)
    check(got, expected)
    assert res.report["remote"]["rss"]["local_batches"] == len(expected)
    proc, _ = make(Remote(resources={"TPU": 1}, client=client, required=True))
    with pytest.raises(ef.ConfigurationError, match=r"module 'rss' must run remotely.*TPU"):
        proc.run(threads=2)


def test_payload_over_the_limit(client: Any) -> None:
    proc, _ = make(Remote(resources={"GPU": 1}, mode="remote", client=client, max_payload_bytes=1000))
    with pytest.raises(ef.ModuleError, match=r"module 'rss'.*max_payload_bytes=1000") as e:
        proc.run(threads=2)
    assert e.value.module == "rss"


def test_error_in_the_remote_implementation(client: Any) -> None:
    def broken(ev: Any) -> Any:
        raise ValueError("no calibration on this worker")

    proc, _ = make(Remote(resources={"GPU": 1}, mode="remote", client=client, fn=broken))
    with pytest.raises(ef.ModuleError, match=r"'rss'.*ValueError: no calibration on this worker"):
        proc.run(threads=2)


def test_timeout_runs_locally(client: Any, tmp_path: Path, expected: dict[int, np.ndarray]) -> None:
    flag, release = str(tmp_path / "flag"), str(tmp_path / "go")
    spec = Remote(
        resources={"GPU": 1},
        mode="remote",
        client=client,
        fn=hold_first(flag, release),
        timeout_s=0.5,
        retries=1,
    )
    proc, got = make(spec)
    try:
        with pytest.warns(RemoteNotice, match=r"'rss': the remote .* no answer within timeout_s=0.5 s"):
            res = proc.run(threads=2, events_in_flight=4)
    finally:
        Path(release).write_text("")
    check(got, expected)
    r = res.report["remote"]["rss"]
    assert r["fallback_batches"] >= 1 and r["timeouts"] >= 1
    assert r["retries"] == 0, "a timed-out request is not sent again"
    assert r["fallback_batches"] + r["remote_batches"] == len(expected)


def test_actor_transport(client: Any, expected: dict[int, np.ndarray]) -> None:
    """Requests as calls of a Dask actor placed on the worker with the
    resource: same products, combined requests."""
    spec = Remote(resources={"GPU": 1}, mode="remote", client=client, transport="actor", max_in_flight=1)
    proc, got = make(spec)
    res = proc.run(threads=2, events_in_flight=6)
    check(got, expected)
    r = res.report["remote"]["rss"]
    assert r["remote_batches"] == len(expected) and r["remote_requests"] <= len(expected)
    assert set(r["workers"]) <= gpu_workers(client)


class LostActor:
    """Stands in for the actor of a worker that died."""

    def run(self, *args: Any) -> Any:
        async def fail() -> Any:
            raise OSError("Unable to contact Actor's worker")

        return fail()


def test_lost_actor_runs_locally(client: Any) -> None:
    """Actor transport: the only actor's worker is gone; its requests run
    locally with a notice, each batch once."""
    spec = Remote(resources={"GPU": 1}, mode="remote", client=client, transport="actor", combine=1)
    off = ef.remote.Offloader("rss", spec, rss, frozenset(CONSUMES), [], ["rss"])
    off.start(2, 4)
    assert len(off.actors) == 1
    for entry in off.actors.values():
        entry[0] = LostActor()
    reader = ef.source.synthetic(3 * STEP, step_size=STEP, seed=3).reader(CONSUMES, None)
    batches = [reader.next_batch() for _ in range(3)]
    handles = [Handle() for _ in batches]
    with pytest.warns(RemoteNotice, match=r"'rss': remote request .* running them locally"):
        items = [off.acquire(b, None, [], h) for b, h in zip(batches, handles, strict=True)]
        assert all(h.wait(30) for h in handles)
    out = [off.produce(it)[0] for it in items]
    report = off.close()
    assert report["fallback_batches"] == 3 and report["remote_batches"] == 0
    assert any("OSError" in n for n in report["notices"])
    assert all(h.calls == 1 and h.failure is None for h in handles)
    for b, v in zip(batches, out, strict=True):
        met = np.asarray(b.columns["MET_pt"], dtype=np.float64)
        np.testing.assert_allclose(v, np.sqrt(ak.to_numpy(ak.sum(b.columns["Jet_pt"] ** 2, axis=1)) + met**2))


def test_worker_killed_mid_request(client: Any, tmp_path: Path, expected: dict[int, np.ndarray]) -> None:
    """The worker holding the first request is killed: its batches are
    computed again (elsewhere or locally); every batch arrives once and the
    result is that of the local run."""
    flag, release = str(tmp_path / "flag"), str(tmp_path / "go")
    spec = Remote(
        resources={"GPU": 1},
        mode="remote",
        client=client,
        fn=hold_first(flag, release, limit_s=30.0),
        timeout_s=30.0,
        retries=2,
    )
    proc, got = make(spec)
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = proc.run(threads=2, events_in_flight=4)
        except BaseException as e:
            box["error"] = e

    t = threading.Thread(target=run)
    t.start()
    deadline = time.monotonic() + 30
    while not os.path.exists(flag) and time.monotonic() < deadline:
        time.sleep(0.01)
    pid = int(Path(flag).read_text())
    killed = gpu_workers(client)
    os.kill(pid, signal.SIGKILL)
    Path(release).write_text("")
    t.join(60)
    assert not t.is_alive()
    assert "error" not in box, box.get("error")
    check(got, expected)
    r = box["result"].report["remote"]["rss"]
    assert r["remote_batches"] + r["fallback_batches"] == len(expected)
    assert killed.isdisjoint(r["workers"]), "the killed worker's request was answered by another"
