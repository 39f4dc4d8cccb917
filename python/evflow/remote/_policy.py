"""The offload decision: measured local and remote costs of one module, and
the rule that sends a batch where it is expected to be done first.

The local implementation costs ``c`` seconds per event on an offloader
core. A request of ``n`` events comes back after ``o + b·n`` seconds
(``o``: the round-trip overhead — scheduler, transfer latency,
serialization —, ``b``: transfer and remote compute per event), fitted by
least squares over recent requests.

The wait holds no thread, so what a remote batch costs the offloader is
the time to send it (``s`` per event, measured) and an event slot while it
is out; what it gains is a core's ``c·n``. The two sides are two servers:
the local cores process ``cores / c`` events per second, the remote
``R = 1 / (b + o / (n·m))`` with ``m`` requests overlapping their
overheads. The remote gets the share ``f`` of events with which both sides
finish together — the cores spending ``(1 − f)·c + f·s`` per event, the
remote ``f / R`` —

    f = c / (cores / R + c − s)     (= R / (R + cores/c) when s = 0),

batch by batch (a batch goes out while the remote's share is below ``f``),
and only while

* sending costs less than computing (``s < c``) — otherwise offloading
  costs the offloader more CPU than it saves: small, cheap tasks stay local;
* fewer batches are out than the events in flight beyond one per core, so
  requests never hold the batches the cores need to stay busy.

``break_even_events`` in the report is the batch size above which an idle
remote returns a batch's products sooner than a core computes them
(``s·n + o + b·n < c·n``): ``o / (c − b − s)`` from the fitted ``o`` and
``b``; ``inf`` when ``c ≤ b + s`` (no batch is large enough), ``None``
until both sides are measured. Every ``probe_every`` decisions, the side
not chosen lately gets one batch, so both estimates stay current.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any, Literal

Side = Literal["local", "remote"]


class Measurements:
    """Local seconds per event (moving average) and the remote round-trip
    model ``rtt = overhead + per_event·n`` (least squares, recent window)."""

    def __init__(self, window: int = 32, alpha: float = 0.2) -> None:
        self.alpha = alpha
        self.local_s_per_event: float | None = None
        self.samples: deque[tuple[int, float]] = deque(maxlen=window)
        self.remote_seen = 0
        self.overhead_s: float | None = None
        self.remote_s_per_event: float | None = None
        self.send_s_per_event: float | None = None
        #: worker compute per event (reported by the worker)
        self.compute_s_per_event: float | None = None
        #: round trip minus worker compute, of requests that waited for no other
        self.wire_s: float | None = None

    def observe_local(self, events: int, seconds: float) -> None:
        if events <= 0:
            return
        x = seconds / events
        c = self.local_s_per_event
        self.local_s_per_event = x if c is None else (1 - self.alpha) * c + self.alpha * x

    def observe_send(self, events: int, seconds: float) -> None:
        """Offloader time to prepare and hand over a batch's payload."""
        if events <= 0:
            return
        x = seconds / events
        s = self.send_s_per_event
        self.send_s_per_event = x if s is None else (1 - self.alpha) * s + self.alpha * x

    def _ewma(self, old: float | None, x: float) -> float:
        return x if old is None else (1 - self.alpha) * old + self.alpha * x

    def observe_remote(
        self, events: int, rtt_s: float, compute_s: float | None = None, alone: bool = True
    ) -> None:
        """A request of ``events`` came back after ``rtt_s``; the worker
        computed for ``compute_s``; ``alone``: no other request was out
        when it left (so its round trip holds no wait behind another)."""
        self.remote_seen += 1
        if compute_s is not None and events > 0 and self.remote_seen > 1:
            self.compute_s_per_event = self._ewma(self.compute_s_per_event, compute_s / events)
            if alone or self.wire_s is None:
                self.wire_s = self._ewma(self.wire_s, max(rtt_s - compute_s, 0.0))
        if self.remote_seen == 1 and events > 0:
            # The first request also pays for the worker's warm-up (imports,
            # unpickling the function): a provisional estimate only.
            self.overhead_s, self.remote_s_per_event = 0.0, rtt_s / events
            return
        self.samples.append((max(events, 1), rtt_s))
        self._fit()

    def _fit(self) -> None:
        n = len(self.samples)
        xs = [float(e) for e, _ in self.samples]
        ys = [t for _, t in self.samples]
        mx, my = sum(xs) / n, sum(ys) / n
        sxx = sum((x - mx) ** 2 for x in xs)
        if n >= 3 and sxx > 0.01 * mx * mx * n:
            b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
            b = max(b, 0.0)
            o = max(my - b * mx, 0.0)
        elif self.compute_s_per_event is not None:
            # Requests all of about one size: overhead and per-event cost
            # cannot be told apart by the fit; the worker's compute counts
            # per event, the rest of the round trip as overhead.
            b = min(self.compute_s_per_event, my / mx)
            o = my - b * mx
        else:
            # The same, with no compute reported: the smallest round trip
            # bounds the overhead, the rest counts per event.
            o = min(ys) * 0.5
            b = max(my - o, 0.0) / mx
        self.overhead_s, self.remote_s_per_event = o, b

    def remote_time(self, events: int) -> float | None:
        if self.overhead_s is None or self.remote_s_per_event is None:
            return None
        return self.overhead_s + self.remote_s_per_event * events

    def break_even_events(self) -> float | None:
        """The batch size above which offloading a batch pays: an idle
        remote returns its products sooner than a core computes them,
        ``s·n + o + b·n < c·n``, i.e. ``n > o / (c − b − s)`` (``s``: 0
        until measured). ``inf`` when no batch size pays (``c ≤ b + s``);
        ``None`` until both sides are measured (a local call, and a request
        answered after the first, which also paid for the worker's warm-up).

        Example::

            >>> m = Measurements()
            >>> for n in (1, 100, 300, 100, 300):  # the first: warm-up, not fitted
            ...     m.observe_remote(n, 0.004 + 1e-5 * n)
            >>> m.break_even_events() is None  # no local call yet
            True
            >>> m.observe_local(100, 100 * 5e-5)
            >>> round(m.break_even_events())  # 0.004 / (5e-5 - 1e-5)
            100
        """
        c, o, b = self.local_s_per_event, self.overhead_s, self.remote_s_per_event
        if c is None or o is None or b is None or not self.samples:
            return None
        margin = c - b - (self.send_s_per_event or 0.0)
        return o / margin if margin > 0 else math.inf


class Policy:
    """Chooses the side of each batch (see the module docstring)."""

    def __init__(self, mode: str, measurements: Measurements, probe_every: int = 16) -> None:
        self.mode = mode
        self.m = measurements
        self.probe_every = probe_every
        self.decisions = 0
        self.last: dict[Side, int] = {"local": 0, "remote": 0}
        self.sent: dict[Side, int] = {"local": 0, "remote": 0}
        self.cores = 1
        self.slots = 1
        self.pipelines = 1
        self.target: float | None = None

    def configure(self, cores: int, events_in_flight: int, max_in_flight: int) -> None:
        """The job's shape: ``cores`` engine threads, ``events_in_flight``
        batches at once, ``max_in_flight`` requests out at once."""
        self.cores = max(1, cores)
        self.slots = max(1, events_in_flight - self.cores)
        self.pipelines = max(1, max_in_flight)

    def share(self, events: int) -> float | None:
        """Remote share of the events that balances both sides' rates."""
        c, o, b = self.m.local_s_per_event, self.m.overhead_s, self.m.remote_s_per_event
        if self.m.compute_s_per_event is not None and self.m.wire_s is not None:
            # Worker time and wire time apart: queueing behind another
            # request does not count as overhead.
            o, b = self.m.wire_s, self.m.compute_s_per_event
        if c is None or o is None or b is None or c <= 0:
            return None
        per_event = b + o / (max(events, 1) * self.pipelines)
        send = min(self.m.send_s_per_event or 0.0, c)
        # Both sides finish together: the cores spend ((1-f)·c + f·s) per
        # event, the remote f·per_event: f = c / (cores·per_event + c - s).
        return min(1.0, c / (self.cores * per_event + c - send))

    def choose(self, events: int, backlog_batches: int, remote_available: bool) -> Side:
        self.decisions += 1
        side = self._choose(events, backlog_batches, remote_available)
        self.last[side] = self.decisions
        self.sent[side] += events
        return side

    def _choose(self, events: int, backlog_batches: int, remote_available: bool) -> Side:
        if not remote_available or self.mode == "local":
            return "local"
        if self.mode == "remote":
            return "remote"
        c = self.m.local_s_per_event
        if c is None:
            return "local"
        if self.m.overhead_s is None:
            # Probe the remote once; wait for its answer before more.
            return "remote" if backlog_batches == 0 else "local"
        f = self.share(events)
        self.target = f
        send = self.m.send_s_per_event
        pays = f is not None and (send is None or send < c)
        side: Side = "local"
        if pays and backlog_batches < self.slots:
            total = self.sent["local"] + self.sent["remote"] + events
            if self.sent["remote"] + events <= (f or 0.0) * total + events / 2:
                side = "remote"
        other: Side = "local" if side == "remote" else "remote"
        if self.decisions - self.last[other] > self.probe_every and (
            other == "local" or backlog_batches < self.slots
        ):
            return other
        return side

    def summary(self) -> dict[str, Any]:
        m = self.m
        return {
            "mode": self.mode,
            "local_s_per_event": m.local_s_per_event,
            "send_s_per_event": m.send_s_per_event,
            "remote_overhead_s": m.overhead_s,
            "remote_s_per_event": m.remote_s_per_event,
            "remote_compute_s_per_event": m.compute_s_per_event,
            "remote_wire_s": m.wire_s,
            "break_even_events": m.break_even_events(),
            "target_remote_share": self.target,
            "remote_slots": self.slots,
        }
