"""``Remote(client="tcp://host:port")`` where something listens that is no
Dask scheduler (another service's port, a connection a firewall holds
open): Dask bounds the TCP connection but not its handshake, so the job
waited for ever before it ran any event. The handshake is now given up
after the connect timeout: the module runs locally with a notice naming
the address, or the job is refused when the module is required."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import evflow as ef
from conftest import REMOTE_EVENTS, remote_analysis, run_bounded
from evflow.remote import Remote, RemoteNotice, _offloader

pytest.importorskip("distributed")


@pytest.fixture
def silent_port(silent_socket: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """A port where no scheduler answers, with a connect timeout of 1 s."""
    monkeypatch.setattr(_offloader, "CONNECT_TIMEOUT_S", 1.0)
    return silent_socket


def _run_bounded(proc: ef.Process) -> dict[str, Any]:
    """Runs ``proc`` within a bound (``run_bounded``), with the remote
    notices it gave."""
    seen: list[str] = []

    def run() -> Any:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = proc.run(threads=1)
        seen.extend(str(w.message) for w in caught if issubclass(w.category, RemoteNotice))
        return result

    return {**run_bounded(run), "notices": seen}


def test_a_port_that_is_no_scheduler_runs_the_module_locally(silent_port: int) -> None:
    alone = remote_analysis(Remote(mode="local")).run(threads=1)
    address = f"tcp://127.0.0.1:{silent_port}"
    box = _run_bounded(remote_analysis(Remote(resources={"GPU": 1}, mode="remote", client=address)))
    assert "error" not in box, box.get("error")
    r = box["result"]
    assert np.array_equal(r.histograms["met2"].values(), alone.histograms["met2"].values())
    assert r.report["remote"]["met2"]["local_events"] == REMOTE_EVENTS
    assert [n for n in box["notices"] if f"nothing at {address} answered as a Dask scheduler within 1 s" in n]


def test_a_port_that_is_no_scheduler_refuses_a_required_module(silent_port: int) -> None:
    address = f"tcp://127.0.0.1:{silent_port}"
    spec = Remote(resources={"GPU": 1}, mode="remote", client=address, required=True)
    box = _run_bounded(remote_analysis(spec))
    assert isinstance(box.get("error"), ef.ConfigurationError), box
    assert f"nothing at {address} answered as a Dask scheduler" in str(box["error"])
