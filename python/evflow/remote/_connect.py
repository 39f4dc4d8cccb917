"""Opening a client of a scheduler given by its address, within a bounded
time even when something else listens there.

``distributed.Client(address, timeout=...)`` bounds the TCP connection but
not Dask's handshake that follows: a port of another service that accepts
the connection and never answers (or a firewall that holds it open) keeps
the client waiting for ever. The handshake is first tried on its own, on an
event loop of a short-lived thread (the caller may run one of its own, as
in a notebook), and given up after ``timeout_s``."""

from __future__ import annotations

import asyncio
import threading
from typing import Any


def open_client(address: str, timeout_s: float) -> Any:
    """A ``distributed.Client`` of the scheduler at ``address`` (not made
    the default client); ``TimeoutError`` naming the address when no Dask
    scheduler answers there within ``timeout_s``."""
    import distributed

    handshake(address, timeout_s)
    return distributed.Client(address, set_as_default=False, timeout=timeout_s)


def handshake(address: str, timeout_s: float) -> None:
    """Returns once a Dask scheduler at ``address`` answers; ``TimeoutError``
    naming the address when nothing answers as one within ``timeout_s``."""
    if address.startswith("inproc://"):  # in-process: no socket to hang on
        return
    from distributed.comm import connect
    from distributed.security import Security

    args = Security().get_connection_args("client")

    async def probe() -> None:
        comm = await asyncio.wait_for(connect(address, timeout=timeout_s, **args), timeout_s)
        await comm.close()

    failed: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(probe())
        except BaseException as e:
            failed.append(e)

    t = threading.Thread(target=run, name="evflow-remote-connect", daemon=True)
    t.start()
    t.join()
    if not failed:
        return
    if isinstance(failed[0], TimeoutError):
        raise TimeoutError(
            f"nothing at {address} answered as a Dask scheduler within {timeout_s:g} s (the port of "
            "another service, or a connection held open by a firewall?)"
        ) from failed[0]
    raise failed[0]
