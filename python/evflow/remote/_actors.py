"""The ``"actor"`` transport of an offloader: one Dask actor placed on each
worker with the resources when the job starts, and requests as calls of
the least busy one."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Any

from ._errors import RemoteError
from ._worker import Runner

if TYPE_CHECKING:
    from ._offloader import Offloader, Request


def place_actors(off: Offloader, fit: list[str], need: dict[str, float]) -> bool:
    """Places one actor on each worker of ``fit`` within ``timeout_s`` in
    all; an actor not placed in time (its resource busy) or whose
    placement failed is cancelled (nothing stays behind on the cluster).
    With none placed the module runs locally with a notice (as a request
    of the "task" transport that times out), or a required one fails;
    returns whether any actor was placed."""
    futures = {
        addr: off.client.submit(
            Runner, actor=True, workers=[addr], resources=need, allow_other_workers=False, pure=False
        )
        for addr in fit
    }
    deadline = time.perf_counter() + off.spec.timeout_s
    failed: dict[str, str] = {}
    try:
        for addr, fut in futures.items():
            try:
                actor = fut.result(timeout=max(0.0, deadline - time.perf_counter()))
            except Exception as e:
                # dask raises its own TimeoutError (not the builtin) on some versions
                why = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
                failed[addr] = why
                continue
            # The future keeps the actor alive on its worker.
            off.actors[addr] = [actor, 0, fut]
    finally:
        for addr, fut in futures.items():
            if addr not in off.actors:
                with contextlib.suppress(Exception):
                    fut.cancel()
    if not failed:
        return True
    why = "; ".join(f"{addr}: {w}" for addr, w in failed.items())
    if off.actors:
        off._notice(
            f"module '{off.label}': no actor placed on {len(failed)} of the {len(fit)} workers with "
            f"{need} within timeout_s={off.spec.timeout_s} ({why}); its requests go to the others"
        )
        return True
    text = (
        f"its actor could not be placed on any worker with {need} within timeout_s="
        f"{off.spec.timeout_s} (the resource busy, or the worker unreachable? {why})"
    )
    if off.spec.required:
        raise RemoteError(f"module '{off.label}' must run remotely (required=True), but {text}")
    off._notice(f"module '{off.label}' runs locally: {text}")
    return False


def call_actor(off: Offloader, req: Request, payloads: list[tuple[int, Any]]) -> None:
    """Calls the least busy live actor, on the client's event loop."""
    with off.lock:
        live = sorted(off.actors.items(), key=lambda kv: kv[1][1])
        if live:
            addr, entry = live[0]
            entry[1] += 1
            req.actor = addr
    if not live:
        if off._claim(req):
            off._fault(req, ConnectionError("no live actor"))
        return
    actor = entry[0]

    async def call() -> Any:
        # The actor's proxy finds its client as the current one.
        with off.client.as_current():
            pending = actor.run(off.remote_fn, off.label, off.produces, payloads)
        return await pending

    fut = asyncio.run_coroutine_threadsafe(call(), off.client.loop.asyncio_loop)
    off._sent(req, fut)
