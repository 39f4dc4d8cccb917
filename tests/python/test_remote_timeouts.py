"""A remote that answers more slowly than ``timeout_s``: a timed-out
request's batches run locally at once (no retry), offloading pauses and
probes the remote with one batch after each pause, with one notice per
module; the products are those of a run without offload.

Before, each request was sent again after its timeout (the retry waited
behind the first on the busy worker) and then ran locally with a notice:
two ``timeout_s`` and a notice per request, for every batch of the job."""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import _remote_hold as hold
import evflow as ef
from conftest import run_bounded
from evflow.remote import Remote, RemoteNotice, _backoff, _offloader
from evflow.remote._backoff import Backoff

distributed = pytest.importorskip("distributed")

EVENTS, STEP, TIMEOUT_S = 12_000, 250, 0.3


def met2_local(ev: ef.Events) -> np.ndarray:
    time.sleep(0.02)  # the local implementation's cost, so that the job outlasts a pause
    return np.asarray(ev.MET_pt, dtype=np.float64) * 2


def analysis(spec: Remote) -> tuple[ef.Process, dict[int, np.ndarray]]:
    """``met2 = 2 MET_pt`` as ``spec`` says, each batch's values collected."""
    proc = ef.Process("timeouts")
    proc.source = ef.source.synthetic(EVENTS, step_size=STEP, seed=5)
    proc.producer(consumes=["MET_pt"], produces=["met2"], label="met2", remote=spec)(met2_local)
    got: dict[int, np.ndarray] = {}

    @proc.analyzer(consumes=["met2"])
    def collect(ev: ef.Events) -> None:
        assert ev.info.index not in got, "a batch's product arrived twice"
        got[ev.info.index] = np.asarray(ev.met2)

    return proc, got


def reference() -> dict[int, np.ndarray]:
    reader = ef.source.synthetic(EVENTS, step_size=STEP, seed=5).reader(["MET_pt"], None)
    out, i = {}, 0
    while (b := reader.next_batch()) is not None:
        out[i] = np.asarray(b.columns["MET_pt"], dtype=np.float64) * 2
        i += 1
    return out


def check(got: dict[int, np.ndarray]) -> None:
    want = reference()
    assert sorted(got) == sorted(want), "every batch exactly once"
    for i, values in want.items():
        np.testing.assert_array_equal(got[i], values)


def run(proc: ef.Process) -> dict[str, Any]:
    """Runs ``proc`` bounded, with its wall time and remote notices."""
    notices: list[str] = []

    def call() -> Any:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            t0 = time.perf_counter()
            result = proc.run(threads=1, events_in_flight=3)
            wall = time.perf_counter() - t0
        notices.extend(str(w.message) for w in caught if issubclass(w.category, RemoteNotice))
        return result, wall

    box = run_bounded(call, 60.0)
    assert "error" not in box, box.get("error")
    result, wall = box["result"]
    return {"result": result, "wall": wall, "notices": notices}


@pytest.fixture
def held() -> Iterator[None]:
    """The remote implementation ``hold.met2_held`` holds its request (and
    the worker's only thread) until the test ends."""
    hold.STARTED.clear()
    hold.RELEASE.clear()
    yield
    hold.RELEASE.set()


@pytest.mark.parametrize("mode", ["remote", "adaptive"])
def test_a_remote_that_never_answers_costs_one_timeout_per_pause(
    gpu_cluster: Any, held: None, mode: str
) -> None:
    with distributed.Client(gpu_cluster, set_as_default=False) as c:
        spec = Remote(resources={"GPU": 1}, mode=mode, client=c, fn=hold.met2_held, timeout_s=TIMEOUT_S)
        proc, got = analysis(spec)
        out = run(proc)
        address = c.scheduler.address
    check(got)
    rem = out["result"].report["remote"]["met2"]
    batches = EVENTS // STEP
    assert rem["remote_batches"] == 0 and rem["local_batches"] == batches
    # Every batch mode="remote" meant for the remote ran locally; the
    # adaptive rule measured the local side first.
    assert 1 <= rem["fallback_batches"] <= batches - (mode == "adaptive")
    assert rem["retries"] == 0, "a timed-out request is not sent again"
    assert rem["late_answers"] == 0, "no answer came: a request cancelled here is no late answer"
    # The requests out when the first timed out, then one probe per pause
    # (pauses of 2, 4, 8... timeout_s): not one request per batch.
    pauses = 1 + math.ceil(math.log2(1 + out["wall"] / (2 * TIMEOUT_S)))
    assert 1 <= rem["timeouts"] <= rem["remote_requests"] <= spec.max_in_flight + pauses, (rem, out["wall"])
    if mode == "remote":
        # The first request out timed out, the others ran locally at once;
        # a second timeout is a probe's.
        assert rem["timeouts"] >= 2, "the remote was probed again after the first pause"
    assert len(out["notices"]) == 1, out["notices"]
    notice = out["notices"][0]
    assert notice == rem["notices"][0]
    for part in (
        "module 'met2'",
        address,
        "timeout_s=0.3 s",
        "run locally now",
        "probes the remote",
    ):
        assert part in notice, notice


def test_offloading_resumes_once_a_probe_is_answered(
    gpu_cluster: Any, held: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker is freed once the offloader gave up on the held request:
    the probe after the pause is answered in time and later batches go to
    the remote again."""
    timed_out = _offloader.timed_out

    def give_up(off: Any, req: Any) -> None:
        timed_out(off, req)
        hold.RELEASE.set()

    monkeypatch.setattr(_offloader, "timed_out", give_up)
    with distributed.Client(gpu_cluster, set_as_default=False) as c:
        spec = Remote(
            resources={"GPU": 1}, mode="remote", client=c, fn=hold.met2_held, timeout_s=TIMEOUT_S, combine=1
        )
        proc, got = analysis(spec)
        out = run(proc)
    check(got)
    rem = out["result"].report["remote"]["met2"]
    assert rem["timeouts"] >= 1 and rem["fallback_batches"] >= 1
    assert rem["remote_batches"] >= 1, "offloading resumed after the probe"
    assert rem["remote_batches"] + rem["fallback_batches"] == EVENTS // STEP
    assert len(out["notices"]) == 1, out["notices"]


def test_a_required_module_fails_at_the_first_timeout(gpu_cluster: Any, held: None) -> None:
    with distributed.Client(gpu_cluster, set_as_default=False) as c:
        spec = Remote(
            resources={"GPU": 1},
            mode="remote",
            client=c,
            fn=hold.met2_held,
            timeout_s=TIMEOUT_S,
            required=True,
        )
        proc, _ = analysis(spec)
        box = run_bounded(lambda: proc.run(threads=1, events_in_flight=3), 30.0)
    assert isinstance(box.get("error"), ef.ModuleError), box
    message = str(box["error"])
    assert "'met2' must run remotely" in message and "no answer within timeout_s=0.3 s" in message, message


def test_pauses_double_until_a_probe_is_answered() -> None:
    b = Backoff(timeout_s=0.5)
    assert b.gate(0.0) == "send"
    assert not b.failed(0.0, probe=False, timed_out=False), "a failed request does not pause"
    assert b.gate(0.0) == "send"
    assert b.failed(10.0, probe=False, timed_out=True), "the first timeout pauses"
    assert not b.failed(10.1, probe=False, timed_out=True), "one pause at a time"
    assert b.gate(10.9) == "hold" and b.gate(11.0) == "probe" and b.gate(11.1) == "hold"
    now, pauses = 11.5, []
    for _ in range(8):  # every probe times out
        b.failed(now, probe=True, timed_out=True)
        pauses.append(b.until - now)
        assert b.gate(b.until - 0.01) == "hold"
        now = b.until
        assert b.gate(now) == "probe"
    assert pauses == pytest.approx([2.0, 4.0, 8.0, 16.0, 16.0, 16.0, 16.0, 16.0])
    b.answered(probe=False)
    assert b.paused, "only the probe's answer ends the pause"
    b.answered(probe=True)
    assert not b.paused and b.gate(now) == "send"
    b.failed(now, probe=False, timed_out=True)
    assert b.until == pytest.approx(now + 1.0), "the pause starts again at 2 timeout_s"
    b.gate(b.until)
    b.failed(b.until, probe=True, timed_out=False)  # a probe that failed, not timed out: pause longer too
    assert b.pause_s == pytest.approx(2.0) and not b.probing


def test_backoff_docstring_example() -> None:
    import doctest

    failures, tried = doctest.testmod(_backoff, verbose=False)[:2]
    assert tried > 0 and failures == 0
