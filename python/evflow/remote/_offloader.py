"""The offloader of one remote producer during one job.

The engine calls :meth:`Offloader.acquire` for a batch (an engine event) on
one of its threads: the offloader decides the side, and for the remote side
queues the batch's payload and returns at once. Requests combine up to
``combine`` queued batches and at most ``max_in_flight`` are out: a batch
that arrives while fewer are out leaves at once, otherwise it waits for the
next answer (which sends the queue), so a busy link gets larger requests
and an idle one no wait. Answers arrive on the Dask client's callback
thread, which completes each batch's handle; the engine then calls
:meth:`Offloader.produce` on one of its threads for the values (computing
them locally when that was the decision or the fallback).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
import uuid
import warnings
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import _runtime as rt
from ..errors import ConfigurationError
from ._actors import call_actor, place_actors
from ._backoff import Backoff, timed_out
from ._connect import open_client
from ._distributed import own_cluster
from ._errors import RemoteError, RemoteNotice
from ._policy import Measurements, Policy
from ._shipping import check_shippable, load_failure, unloadable
from ._spec import Remote
from ._worker import run_request

#: How long connecting to a scheduler given by its address may take.
CONNECT_TIMEOUT_S = 10.0


def _nbytes(value: Any) -> int:
    nb = getattr(value, "nbytes", None)
    return int(nb) if nb is not None else 0


class Item:
    """One batch handed to the offloader."""

    __slots__ = (
        "data",
        "done",
        "error",
        "events",
        "nbytes",
        "payload",
        "probe",
        "raw",
        "sel",
        "side",
        "values",
    )

    def __init__(self, data: rt.BatchData, sel: rt.Selection, raw: list[Any], done: Any, events: int) -> None:
        self.data = data
        self.sel = sel
        self.raw = raw
        self.done = done
        self.events = events
        self.side = "local"
        self.payload: dict[str, Any] | None = None
        self.nbytes = 0
        self.values: list[Any] | None = None
        self.error: BaseException | None = None
        #: sent alone to probe a remote that timed out (see _backoff)
        self.probe = False


class Request:
    __slots__ = ("actor", "alone", "attempt", "future", "items", "probe", "resolved", "sent_at", "seq")

    def __init__(self, seq: int, items: list[Item], attempt: int) -> None:
        self.actor: str | None = None
        self.probe = any(it.probe for it in items)
        self.alone = True
        self.seq = seq
        self.items = items
        self.attempt = attempt
        self.future: Any = None
        self.sent_at = 0.0
        self.resolved = False


class Offloader:
    """Runs one producer locally or on Dask workers holding ``spec.resources``."""

    def __init__(
        self,
        label: str,
        spec: Remote,
        fn: Callable[[rt.Events], Any],
        names: frozenset[str],
        products: Sequence[str],
        produces: Sequence[str],
    ) -> None:
        self.label = label
        self.spec = spec
        self.names = names
        self.products = list(products)
        self.produces = list(produces)
        self.local = rt.producer_runner(label, fn, names, products, produces)
        self.remote_fn = spec.fn or fn
        self.what = f"producer '{label}'"
        self.measure = Measurements()
        self.policy = Policy(spec.mode, self.measure)
        self.lock = threading.Lock()
        self.pending: deque[Item] = deque()
        self.out: dict[int, Request] = {}
        self.backlog_events = 0
        self.seq = itertools.count()
        self.client: Any = None
        #: the client was opened here (from an address): closed by close()
        self.own_client = False
        self.available = False
        #: no worker with the resources is left mid-run: local from then on
        self.lost = False
        self.notices: list[str] = []
        self.backoff = Backoff(spec.timeout_s)
        #: the notice of the first timeout was given (one per module)
        self.told_timeout = False
        self.stop = threading.Event()
        self.watchdog: threading.Thread | None = None
        self.stats: dict[str, Any] = {
            "local_batches": 0,
            "local_events": 0,
            "local_s": 0.0,
            "remote_requests": 0,
            "remote_batches": 0,
            "remote_events": 0,
            "bytes_sent": 0,
            "bytes_received": 0,
            "remote_compute_s": 0.0,
            "retries": 0,
            "timeouts": 0,
            "fallback_batches": 0,
            "late_answers": 0,
            "max_batches_per_request": 0,
            "max_in_flight_seen": 0,
        }
        self.rtts: list[tuple[int, float]] = []
        self.workers: set[str] = set()
        #: transport "actor": worker address -> [actor, requests out, its future]
        self.actors: dict[str, list[Any]] = {}

    # -- job start and end ----------------------------------------------------

    def start(self, threads: int = 1, events_in_flight: int = 2) -> None:
        """Connects to the cluster and checks that a worker has the
        resources (runs locally with a notice, or fails when required)."""
        self.policy.configure(threads, events_in_flight, self.spec.max_in_flight)
        if self.spec.mode == "local":
            return
        try:
            self.client = self._client()
        except Exception as e:
            self._unavailable(f"no Dask client to send requests to ({e})")
            return
        if own_cluster(self.client):
            self._unavailable(
                "its requests would go to the Dask cluster running this chunk of a distributed run, whose "
                "worker threads are all busy with chunks (its requests would only time out); give "
                "Remote(client='tcp://other-scheduler:8786') for a cluster of its own, or mode='local'"
            )
            return
        info = self.client.scheduler_info()
        workers = info.get("workers", {})
        need = dict(self.spec.resources)
        fit = [
            addr
            for addr, w in workers.items()
            if all(w.get("resources", {}).get(r, 0) >= q for r, q in need.items())
        ]
        if not fit:
            have = sorted({f"{r}={q}" for w in workers.values() for r, q in w.get("resources", {}).items()})
            self._unavailable(
                f"no worker of the cluster at {info.get('address', '?')} has the resources {need} "
                f"({len(workers)} workers; resources advertised: {', '.join(have) or 'none'})"
            )
            return
        check_shippable(self.label, self.remote_fn)
        if self.spec.transport == "actor" and not place_actors(self, fit, need):
            return
        self.available = True
        self.watchdog = threading.Thread(target=self._watch, name=f"evflow-remote-{self.label}", daemon=True)
        self.watchdog.start()

    def _client(self) -> Any:
        import distributed

        c = self.spec.client
        if c is None:
            return distributed.get_client()
        if isinstance(c, str):
            # Ours for this job: closed when it ends (a client left open per
            # run piles up, and logs errors once the scheduler is gone); not
            # the default client of the user's session.
            client = open_client(c, CONNECT_TIMEOUT_S)
            self.own_client = True
            return client
        return c

    def _release_client(self) -> None:
        client, self.client = self.client, None
        if self.own_client and client is not None:
            self.own_client = False
            with contextlib.suppress(Exception):
                client.close()

    def _unavailable(self, why: str) -> None:
        if self.spec.required:
            raise ConfigurationError(f"module '{self.label}' must run remotely (required=True), but {why}")
        self._notice(f"module '{self.label}' runs locally: {why}")

    def _notice(self, text: str) -> None:
        self.notices.append(text)
        warnings.warn(text, RemoteNotice, stacklevel=2)

    def close(self) -> dict[str, Any]:
        """Stops the watchdog; returns the module's remote report."""
        self.stop.set()
        if self.watchdog is not None:
            self.watchdog.join()
        with self.lock:
            # Empty after a run: the engine ends only once every batch's
            # external work completed.
            self.pending.clear()
            self.out.clear()
            self.actors.clear()  # releases the actors on the workers
        self._release_client()
        return self.report()

    def report(self) -> dict[str, Any]:
        s = dict(self.stats)
        rtt = np.array([t for _, t in self.rtts]) if self.rtts else np.array([])
        s["rtt_s"] = (
            {
                "min": float(rtt.min()),
                "median": float(np.median(rtt)),
                "mean": float(rtt.mean()),
                "max": float(rtt.max()),
            }
            if len(rtt)
            else None
        )
        total = s["local_events"] + s["remote_events"]
        s["remote_share"] = s["remote_events"] / total if total else 0.0
        s["decision"] = self.policy.summary()
        s["resources"] = dict(self.spec.resources)
        s["available"] = self.available
        s["workers"] = sorted(self.workers)
        s["notices"] = list(self.notices)
        return s

    # -- engine calls -----------------------------------------------------------

    def acquire(self, data: rt.BatchData, sel: rt.Selection, raw: list[Any], done: Any) -> Item:
        events = data.n if sel is None else len(sel)
        item = Item(data, sel, raw, done, events)
        with self.lock:
            backlog = len(self.pending) + sum(len(r.items) for r in self.out.values())
            side = "local" if events == 0 else self.policy.choose(events, backlog, self.available)
            if side == "remote" and not self.spec.required:
                # Meant for the remote, whose workers are gone or which is
                # paused after a timeout: a fallback (or the probe).
                gate = "hold" if self.lost else self.backoff.gate(time.perf_counter())
                item.probe = gate == "probe"
                if gate == "hold":
                    side = item.side = "fallback"
                    self.stats["fallback_batches"] += 1
        if side != "remote":
            done.finish()
            return item
        t0 = time.perf_counter()
        ev = rt.Events(self.label, data, sel, self.names, dict(zip(self.products, raw, strict=True)))
        item.payload = {name: ev[name] for name in sorted(self.names)}
        item.nbytes = sum(_nbytes(v) for v in item.payload.values())
        if item.nbytes > self.spec.max_payload_bytes:
            if item.probe:
                with self.lock:
                    self.backoff.probing = False  # this probe never leaves: the next batch probes
            raise RemoteError(
                f"module '{self.label}': the remote payload of {item.nbytes} bytes ({events} events) is over "
                f"the limit max_payload_bytes={self.spec.max_payload_bytes} of its Remote(...); raise the "
                "limit or use a smaller step_size"
            )
        item.side = "remote"
        with self.lock:
            self.pending.append(item)
            self.backlog_events += events
        self._pump()
        with self.lock:
            self.measure.observe_send(events, time.perf_counter() - t0)
        return item

    def produce(self, item: Item) -> list[Any]:
        if item.error is not None:
            raise item.error
        if item.side == "remote":
            assert item.values is not None
            return [
                rt.check_array(self.what + " (remote)", f"'{p}'", v, item.events)
                for p, v in zip(self.produces, item.values, strict=True)
            ]
        t0 = time.perf_counter()
        values = self.local(item.data, item.sel, item.raw)
        dt = time.perf_counter() - t0
        with self.lock:
            self.stats["local_batches"] += 1
            self.stats["local_events"] += item.events
            self.stats["local_s"] += dt
            if item.side == "local":
                self.measure.observe_local(item.events, dt)
        return values

    # -- requests -----------------------------------------------------------------

    def _pump(self) -> None:
        """Sends queued batches while fewer than ``max_in_flight`` requests
        are out; while paused after a timeout, only the probe (alone)."""
        while True:
            held: list[Item] = []
            req: Request | None = None
            with self.lock:
                if self.backoff.paused:
                    # Queued as the pause began: local at once.
                    held = [it for it in self.pending if not it.probe]
                    self.pending = deque(it for it in self.pending if it.probe)
                    self._count_fallback(held)
                if self.pending and len(self.out) < self.spec.max_in_flight:
                    take = 1 if self.pending[0].probe else min(self.spec.combine, len(self.pending))
                    req = Request(next(self.seq), [self.pending.popleft() for _ in range(take)], 0)
                    req.alone = not self.out
                    self.out[req.seq] = req
                    self.stats["max_in_flight_seen"] = max(self.stats["max_in_flight_seen"], len(self.out))
            self._run_locally(held)
            if req is None:
                return
            self._send(req)

    def _count_fallback(self, items: list[Item]) -> None:
        """Counts batches meant for the remote that run locally (lock held)."""
        self.backlog_events -= sum(it.events for it in items)
        self.stats["fallback_batches"] += len(items)

    @staticmethod
    def _run_locally(items: list[Item]) -> None:
        """Completes the batches for ``produce`` to compute them locally."""
        for it in items:
            it.side = "fallback"
            it.payload = None
            it.done.finish()

    def _send(self, req: Request) -> None:
        payloads = [(it.events, it.payload) for it in req.items]
        req.sent_at = time.perf_counter()
        if self.spec.transport == "actor":
            call_actor(self, req, payloads)
            return
        try:
            fut = self.client.submit(
                run_request,
                self.remote_fn,
                self.label,
                self.produces,
                payloads,
                resources=dict(self.spec.resources),
                pure=False,
                # Unique across processes sharing the scheduler: Dask
                # would merge two requests with one key.
                key=f"evflow-remote-{self.label}-{uuid.uuid4().hex}",
            )
        except Exception as e:
            if self._claim(req):
                self._fault(req, e)
            return
        self._sent(req, fut)

    def _sent(self, req: Request, fut: Any) -> None:
        """Counts a request that was sent and answers it when ``fut`` is done."""
        req.future = fut
        with self.lock:
            self.stats["remote_requests"] += 1
            self.stats["bytes_sent"] += sum(it.nbytes for it in req.items)
            self.stats["max_batches_per_request"] = max(self.stats["max_batches_per_request"], len(req.items))
        fut.add_done_callback(lambda f, req=req: self._answer(req, f))

    def _claim(self, req: Request) -> bool:
        """Marks the request answered; False if it was already (timed out)."""
        with self.lock:
            if req.resolved:
                return False
            req.resolved = True
            if req.actor is not None and req.actor in self.actors:
                self.actors[req.actor][1] -= 1
            self.out.pop(req.seq, None)
            return True

    def _answer(self, req: Request, fut: Any) -> None:
        rtt = time.perf_counter() - req.sent_at
        with self.lock:
            if req.resolved:
                # After its timeout; cancelled here after it: no answer at all.
                self.stats["late_answers"] += not fut.cancelled()
                return
        try:
            result = fut.result()
        except BaseException as e:
            cause = load_failure(e)
            if cause is not None:
                # The cluster cannot import what the function refers to:
                # a retry or another worker fails the same way.
                if self._claim(req):
                    self._unloadable(req, cause)
                return
            if req.actor is not None:
                with self.lock:
                    # The actor's worker is gone (or unreachable): no more calls to it.
                    self.actors.pop(req.actor, None)
            if self._claim(req):
                self._fault(req, e)
            return
        if not self._claim(req):
            return
        events = sum(it.events for it in req.items)
        with self.lock:
            self.backlog_events -= events
            self.backoff.answered(req.probe)
        if "error" in result:
            err = RemoteError(
                f"module '{self.label}' failed on worker '{result.get('worker')}': {result['error']}\n"
                f"{result.get('traceback', '')}"
            )
            for it in req.items:
                it.error = err
                it.done.finish()
            self._pump()
            return
        with self.lock:
            self.measure.observe_remote(events, rtt, float(result.get("compute_s", 0.0)), req.alone)
            self.rtts.append((events, rtt))
            self.workers.add(str(result.get("worker")))
            self.stats["remote_batches"] += len(req.items)
            self.stats["remote_events"] += events
            self.stats["remote_compute_s"] += float(result.get("compute_s", 0.0))
            self.stats["bytes_received"] += sum(_nbytes(v) for vals in result["values"] for v in vals)
        for it, values in zip(req.items, result["values"], strict=True):
            it.values = values
            it.payload = None
            it.done.finish()
        self._pump()

    def _unloadable(self, req: Request, cause: BaseException) -> None:
        """Fails the request's batches: the Dask scheduler or worker could
        not unpickle the remote implementation (not retried)."""
        events = sum(it.events for it in req.items)
        with self.lock:
            self.backlog_events -= events
        error = RemoteError(unloadable(self.label, self.remote_fn, cause))
        for it in req.items:
            it.error = error
            it.done.finish()
        self._pump()

    def _fault(self, req: Request, err: BaseException) -> None:
        """A request that failed (worker died, connection lost): retry it,
        or run its batches locally (fail when required)."""
        if self.stop.is_set():
            return  # the job is over: nobody waits for these batches
        if req.future is not None:
            # A closing client cannot cancel: the request is gone anyway.
            with contextlib.suppress(Exception):
                req.future.cancel()
        left = self._worker_left()
        if req.attempt < self.spec.retries and left:
            with self.lock:
                self.stats["retries"] += 1
                again = Request(next(self.seq), req.items, req.attempt + 1)
                again.alone = False
                self.out[again.seq] = again
            self._send(again)
            return
        with self.lock:
            self.backlog_events -= sum(it.events for it in req.items)
            self.backoff.failed(time.perf_counter(), req.probe, timed_out=False)
        why = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
        if self.spec.required:
            error = RemoteError(
                f"module '{self.label}': remote request failed after {req.attempt + 1} attempt(s) ({why})"
            )
            for it in req.items:
                it.error = error
                it.done.finish()
        else:
            with self.lock:
                self.stats["fallback_batches"] += len(req.items)
            self._notice(
                f"module '{self.label}': remote request of {len(req.items)} batch(es) failed after "
                f"{req.attempt + 1} attempt(s) ({why}); running them locally"
            )
            self._run_locally(req.items)
            if not left:
                self._none_left()
        self._pump()

    def _none_left(self) -> None:
        """No worker has the resources any more (killed, gone): the module
        runs locally for the rest of the job, its queued batches and the
        requests still out at once, rather than each waiting timeout_s."""
        with self.lock:
            if self.lost:
                return
            self.lost = True
            items = list(self.pending)
            self.pending.clear()
            for r in list(self.out.values()):
                r.resolved = True  # an answer after all is a late one
                items.extend(r.items)
            self.out.clear()
            self._count_fallback(items)
        self._notice(
            f"module '{self.label}': no worker of the cluster has the resources {dict(self.spec.resources)} any "
            f"more; it runs locally for the rest of the job ({len(items)} more batch(es) now)"
        )
        self._run_locally(items)

    def _worker_left(self) -> bool:
        """Whether some worker still has the resources (a retry can run)."""
        if self.spec.transport == "actor":
            with self.lock:
                return bool(self.actors)
        try:
            workers = self.client.scheduler_info().get("workers", {})
        except Exception:
            return False
        need = dict(self.spec.resources)
        return any(
            all(w.get("resources", {}).get(r, 0) >= q for r, q in need.items()) for w in workers.values()
        )

    def _watch(self) -> None:
        """Times out requests out for longer than ``timeout_s``."""
        tick = min(0.05, self.spec.timeout_s / 4)
        while not self.stop.wait(tick):
            now = time.perf_counter()
            with self.lock:
                late = [r for r in self.out.values() if r.sent_at and now - r.sent_at > self.spec.timeout_s]
            for req in late:
                if self._claim(req):
                    timed_out(self, req)
