"""``proc.run(client="tcp://host:port")`` where something listens that is
no Dask scheduler (another service's port, a connection a firewall holds
open): Dask bounds the TCP connection but not its handshake, so the run
waited for ever before it planned a chunk. It now fails within the connect
timeout, naming the address."""

from __future__ import annotations

import pytest

import evflow as ef
from conftest import run_bounded
from evflow import _dist_support

pytest.importorskip("distributed")


@pytest.fixture
def silent_port(silent_socket: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """A port where no scheduler answers, with a connect timeout of 1 s."""
    monkeypatch.setattr(_dist_support, "CONNECT_TIMEOUT_S", 1)
    return silent_socket


def test_a_port_that_is_no_scheduler_fails_the_run_naming_it(silent_port: int) -> None:
    proc = ef.Process("silent")
    proc.source = ef.source.synthetic(1_000, step_size=500, seed=1)
    proc.histogram("met", "MET_pt", bins=10, range=(0, 200))
    address = f"tcp://127.0.0.1:{silent_port}"
    box = run_bounded(lambda: proc.run(client=address))
    error = box.get("error")
    assert isinstance(error, ef.ConfigurationError), box
    assert f"cannot connect to the Dask scheduler at '{address}'" in str(error)
    assert "answered as a Dask scheduler" in str(error)
