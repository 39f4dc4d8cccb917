"""When a remote stops answering in time: pause offloading, probe, resume.

A request without an answer within ``timeout_s`` runs its batches locally
at once (no retry: a remote that is slower than the bound would only be
waited for again). The first such timeout starts a *pause*: the module
runs locally, and once the pause is over the next batch meant for the
remote goes alone, as a probe. A probe answered in time ends the pause
(offloading resumes); one that times out starts a pause twice as long, up
to :data:`LONGEST` ``timeout_s``. A remote that never answers thus costs
the job one ``timeout_s`` (one probe batch's wait) per pause, not one per
request.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Literal

from ._errors import RemoteError

if TYPE_CHECKING:
    from ._offloader import Offloader, Request

#: The first pause, in units of ``timeout_s``.
FIRST = 2.0
#: The longest pause, in units of ``timeout_s``.
LONGEST = 32.0

Gate = Literal["send", "probe", "hold"]


class Backoff:
    """The pause state of one module's remote (callers hold its lock).

    Example::

        >>> b = Backoff(timeout_s=0.5)
        >>> b.gate(now=0.0)
        'send'
        >>> b.failed(now=1.0, probe=False, timed_out=True)  # starts a pause of 1 s
        True
        >>> b.gate(now=1.5), b.gate(now=2.0), b.gate(now=2.1)  # a probe, then wait for it
        ('hold', 'probe', 'hold')
        >>> b.answered(probe=True)
        >>> b.gate(now=2.2)
        'send'
    """

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = float(timeout_s)
        self.first_s = FIRST * self.timeout_s
        self.longest_s = LONGEST * self.timeout_s
        #: the length of the current (or next) pause
        self.pause_s = self.first_s
        #: the pause ends at this time; None: not paused
        self.until: float | None = None
        #: a probe request is out
        self.probing = False

    @property
    def paused(self) -> bool:
        return self.until is not None

    def gate(self, now: float) -> Gate:
        """What becomes of a batch meant for the remote: ``"send"`` it,
        send it alone as the ``"probe"`` (the caller then must report its
        outcome with ``probe=True``), or ``"hold"`` it local."""
        if self.until is None:
            return "send"
        if not self.probing and now >= self.until:
            self.probing = True
            return "probe"
        return "hold"

    def answered(self, probe: bool) -> None:
        """A request was answered in time: a probe's answer ends the pause."""
        if probe:
            self.probing = False
            self.until = None
            self.pause_s = self.first_s

    def failed(self, now: float, probe: bool, timed_out: bool) -> bool:
        """A request got no answer (``timed_out``: none within
        ``timeout_s``; else it failed for good). Returns whether this
        starts a pause (the first timeout while sending)."""
        if probe:
            # The remote still does not answer: pause longer.
            self.probing = False
            self.pause_s = min(2 * self.pause_s, self.longest_s)
            self.until = now + self.pause_s
            return False
        if timed_out and self.until is None:
            self.until = now + self.pause_s
            return True
        return False


def timed_out(off: Offloader, req: Request) -> None:
    """No answer within ``timeout_s``: the request's batches run locally
    at once (a required module's fail), not retried — a remote slower
    than the bound would only be waited for again. The first timeout
    pauses offloading: the batches queued and the requests still out run
    locally at once too. With no worker left that has the resources, the
    module runs locally for the rest of the job instead."""
    if off.stop.is_set():
        return  # the job is over: nobody waits for these batches
    with contextlib.suppress(Exception):
        req.future.cancel()  # frees the scheduler's queue (a running task runs on)
    required, t, items = off.spec.required, off.spec.timeout_s, list(req.items)
    left = required or off._worker_left()
    with off.lock:
        off.stats["timeouts"] += 1
        pauses = left and not required and off.backoff.failed(time.perf_counter(), req.probe, timed_out=True)
        if pauses:
            items.extend(off.pending)
            off.pending.clear()
        out = list(off.out.values()) if pauses else []
    for other in out:
        if off._claim(other):
            items.extend(other.items)
            with contextlib.suppress(Exception):
                other.future.cancel()
    if required:
        with off.lock:
            off.backlog_events -= sum(it.events for it in items)
        error = RemoteError(
            f"module '{off.label}' must run remotely (required=True), but {_remote(off, req)} gave no "
            f"answer within timeout_s={t:g} s to a request of {len(items)} batch(es)"
        )
        for it in items:
            it.error = error
            it.done.finish()
    else:
        with off.lock:
            off._count_fallback(items)
        if left and not off.told_timeout:
            off.told_timeout = True
            off._notice(
                f"module '{off.label}': {_remote(off, req)} gave no answer within timeout_s={t:g} s; the "
                f"{len(items)} batch(es) waiting for it run locally now, and so does every batch for "
                f"{off.backoff.first_s:g} s; then one batch probes the remote: offloading resumes once a probe "
                f"is answered in time, and each probe that times out doubles the pause (up to "
                f"{off.backoff.longest_s:g} s). Later timeouts are counted in the report ('timeouts'), without "
                "a notice"
            )
        off._run_locally(items)
        if not left:
            off._none_left()  # local for the rest of the job, with its notice
    off._pump()


def _remote(off: Offloader, req: Request) -> str:
    """The remote of ``req``, as a notice names it."""
    if req.actor is not None:
        return f"the remote (the actor on worker {req.actor})"
    where = getattr(getattr(off.client, "scheduler", None), "address", None) or "?"
    return f"the remote (Dask workers with {dict(off.spec.resources)} of the scheduler at {where})"
