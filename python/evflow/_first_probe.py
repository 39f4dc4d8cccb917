"""The probe a batch runs through every filter of a path before the
planner's first decision (see docs/filter-ordering.md, "The first decision:
a probe before the path").

The native engine calls a :class:`FirstProbe` when a batch is read while the
planner has no per-event samples of an ``adaptive`` path; the planner decides
from what it returns before the batch enters the path, so that no batch runs
the written order for want of statistics.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from . import _runtime as rt
from ._guard_inference import smallest_guard, where_passed

#: Per step of a path (written order): the filter's runner and the engine
#: tags (``label:product``) of the products it consumes.
Steps = list[tuple[Callable[..., Any], list[str]]]
#: Per producer run: its label, running time (its own, not that of the
#: producers it consumes) and the events it computed.
ProducerTimings = list[tuple[str, float, int]]
Probed = tuple[list[list[bool]], list[list[bool]], list[list[tuple[float, int]]], ProducerTimings]


class FirstProbe:
    """``probe(data, path)``: every filter of path ``path`` on a subsample of
    the batch ``data``, with the producers the filters need computed on it."""

    def __init__(
        self,
        path_steps: dict[int, Steps],
        modules: list[dict[str, Any]],
        device: set[str],
        paths: Mapping[str, Any] | None = None,
        path_index: Mapping[str, int] | None = None,
    ) -> None:
        self.path_steps = path_steps
        #: Per path, per step: the steps it must follow (``after=``). A step
        #: decides only on the events that all of them passed, as on the
        #: path: ``after=`` is how a cut guards the next one
        #: (``nJet >= 2`` before ``Jet_pt[:, 1]``).
        self.preds: dict[int, list[set[int]]] = {}
        #: Per path, its filters' labels (written order).
        self.labels: dict[int, list[str]] = {}
        #: What a filter decided and took on the events of a probe, by label
        #: and events, for the paths probed on the same batch (see
        #: ``_shared_step``); only the batch last probed is kept.
        self._steps: dict[
            tuple[str, bytes], tuple[list[bool], list[bool], list[tuple[float, int]], ProducerTimings]
        ] = {}
        self._batch: tuple[Any, ...] = ()
        #: Per path name: the ``after=`` pairs ``(cut, guard)`` inferred on
        #: its probe and taken by the planner (``refused`` takes them back).
        self.inferred: dict[str, list[tuple[str, str]]] = {}
        self._guards: dict[int, list[tuple[int, int]]] = {}
        self._names: dict[int, str] = {i: name for name, i in (path_index or {}).items()}
        for path in (paths or {}).values():
            labels = [f.label for f in path.filters]
            self.labels[(path_index or {})[path.name]] = labels
            preds: list[set[int]] = [set() for _ in labels]
            for later, earlier in path.after:
                preds[labels.index(later)].add(labels.index(earlier))
            self.preds[(path_index or {})[path.name]] = preds
        # Producers that only run remotely or on a device are left out: the
        # probe must not send requests or launch kernels of its own.
        self.producers = {
            m["label"]: m
            for m in modules
            if m["kind"] == "producer" and m["remote"] is None and m["label"] not in device
        }

    @classmethod
    def of(cls, plan: Any, proc: Any) -> FirstProbe:
        """The probe of a job's plan (``_job``) and its process's paths."""
        return cls(plan.path_steps, plan.modules, set(plan.split_runners), proc.paths, plan.path_index)

    def __call__(self, data: rt.BatchData, path: int) -> Probed | None:
        """Per step in written order: whether each event of the subsample
        (``FIRST_PROBE_EVENTS`` spread over the batch) was decided and
        passed, and its own timings on the subsample as ``(seconds,
        events)``; and each producer run, timed on its own as ``(label,
        seconds, events)``: the planner charges it as it charges the
        producer on batches (to the one step that needs it, to the first of
        several steps of the path that need it in each order, or, needed
        outside the path, to none). A filter fed by a left-out producer, or
        that cannot decide on a subsample, is left undecided (no timings);
        ``None`` when no step decided. A filter that raises where the steps
        it must follow passed is tried where filters written before it
        passed too: deciding there, it is guarded by the smallest such set,
        whose pairs :meth:`guards` gives the planner (``_guard_inference``)."""
        steps = self.path_steps.get(path)
        if not steps or data.n == 0:
            return None
        events = rt.probe_indices(data.n, rt.FIRST_PROBE_EVENTS)
        # Products per set of events they are computed on: a step's
        # producers run only where the steps it must follow passed, as on
        # the path (a guard keeps ``Jet_pt[:, 1]`` off events with one jet).
        caches: dict[bytes, dict[str, tuple[rt.Selection, Any] | None]] = {}
        known: list[list[bool]]
        passed: list[list[bool]]
        seconds: list[list[tuple[float, int]]]
        producers: ProducerTimings = []
        preds = self.preds.get(path) or [set() for _ in steps]
        labels = self.labels.get(path)
        batch = (id(data), data.index, data.n, data.entry_start, data.file)
        if batch != self._batch:
            self._steps, self._batch = {}, batch
        n = len(events)
        known = [[False] * n for _ in steps]
        passed = [[False] * n for _ in steps]
        seconds = [[] for _ in steps]
        guards: list[tuple[int, int]] = []
        for i in _constrained_order(preds):
            at = where_passed(frozenset(preds[i]), known, passed, n)
            try:
                self._step(data, i, steps[i], events, at, labels, caches, known, passed, seconds, producers)
            except Exception:
                # Raised where the steps it must follow passed: a cut that
                # needs a guard written before it, or one that fails anyway
                # (left undecided; its batch reports the error).
                guard = self._guard(data, i, steps[i], events, preds[i], known, passed, caches)
                if guard is None:
                    continue
                preds[i] |= guard
                guards += [(j, i) for j in sorted(guard)]
                at = where_passed(frozenset(preds[i]), known, passed, n)
                try:
                    self._step(
                        data, i, steps[i], events, at, labels, caches, known, passed, seconds, producers
                    )
                except Exception:
                    continue
        if not any(seconds):
            return None
        if guards and labels:
            name = self._names.get(path, str(path))
            self.inferred.setdefault(name, []).extend((labels[i], labels[j]) for j, i in guards)
        self._guards[path] = guards
        return known, passed, seconds, producers

    def guards(self, path: int) -> list[tuple[int, int]]:
        """The pairs ``(guard, cut)`` (positions in the written order) that
        the last probe of path ``path`` inferred, for the planner."""
        return self._guards.pop(path, [])

    def refused(self, path: int, why: str) -> None:
        """The planner refused the pairs inferred on path ``path`` (``why``):
        they are not reported."""
        self.inferred.pop(self._names.get(path, str(path)), None)

    def _guard(
        self,
        data: rt.BatchData,
        i: int,
        step: tuple[Callable[..., Any], list[str]],
        events: np.ndarray,
        must: set[int],
        known: list[list[bool]],
        passed: list[list[bool]],
        caches: dict[bytes, dict[str, tuple[rt.Selection, Any] | None]],
    ) -> frozenset[int] | None:
        """The smallest set of filters written before step ``i`` (and
        decided on the probe) on whose passing events it decides, when it
        raised where only ``must`` (its ``after=`` steps) had passed."""
        runner, tags = step
        probe = getattr(runner, "probe", None)
        candidates = [j for j in range(i) if j not in must and any(known[j])]
        if probe is None:
            return None

        def decides(guard: frozenset[int]) -> int | None:
            at = where_passed(guard | must, known, passed, len(events))
            mine = events[at]
            if len(mine) == 0:
                return None
            cache = caches.setdefault(mine.tobytes(), {})
            raw = [self._product(data, mine, tag, cache, []) for tag in tags]
            if any(r is None for r in raw):
                return None
            try:
                probe(data, mine, raw)
            except Exception:
                return None
            return len(mine)

        return smallest_guard(candidates, decides)

    def _step(
        self,
        data: rt.BatchData,
        i: int,
        step: tuple[Callable[..., Any], list[str]],
        events: np.ndarray,
        at: np.ndarray,
        labels: list[str] | None,
        caches: dict[bytes, dict[str, tuple[rt.Selection, Any] | None]],
        known: list[list[bool]],
        passed: list[list[bool]],
        seconds: list[list[tuple[float, int]]],
        producers: ProducerTimings,
    ) -> None:
        """Step ``i`` timed on the probe's events ``at`` (where the steps it
        must follow passed), its decisions into ``known`` and ``passed``;
        raises what the filter raises."""
        runner, tags = step
        mine = events[at]
        # Its own calls are timed: not a probe that remembers what it
        # decided for another path (``_shared_probe``).
        probe = getattr(runner, "timed_probe", None) or getattr(runner, "probe", None)
        if probe is None or len(mine) == 0:
            return
        # A filter on several paths decides the same events alike, in
        # the same time: the paths probed after the first one take its
        # decisions and timings, with those of the producers it ran,
        # instead of calling it again (three paths of systematic
        # variations sharing their cuts probed each cut three times).
        shared = (labels[i], mine.tobytes()) if labels else None
        if shared in self._steps:
            k, ok, seconds[i], ran = self._steps[shared]
            producers.extend(ran)
            for p, kk, oo in zip(np.flatnonzero(at), k, ok, strict=True):
                known[i][p], passed[i][p] = kk, oo
            return
        cache = caches.setdefault(mine.tobytes(), {})
        before = len(producers)
        raw = [self._product(data, mine, tag, cache, producers) for tag in tags]
        if any(r is None for r in raw):
            return
        # Each filter runs on the subsample in a few chunks, each one timing
        # for the planner, and before each on a few events: the least of
        # these is the call's fixed cost (a Python call, slicing, an awkward
        # kernel's start: tens of µs, which batches of 10^5 events spread
        # thin), taken out of the chunks' timings so that they measure what
        # grows with the events.
        chunks = [c for c in np.array_split(mine, rt.FIRST_PROBE_CHUNKS) if len(c)]
        few = mine[: rt.FIRST_PROBE_FEW]
        k: list[bool] = []
        ok: list[bool] = []
        times = []
        fixed = float("inf")
        for chunk in chunks:
            # The small calls between the chunks: a stretch of time
            # taken by other processes rarely covers all of them.
            t1 = time.perf_counter()
            probe(data, few, raw)
            t2 = time.perf_counter()
            kc, okc = probe(data, chunk, raw)
            times.append((time.perf_counter() - t2, len(chunk)))
            fixed = min(fixed, t2 - t1)
            k += kc
            ok += okc
        # Equal chunks of one batch cost about the same: a chunk well
        # above the least was slowed by other processes (which only ever
        # add time), and would blur the costs the first order rests on.
        least = min(t / size for t, size in times)
        # A fixed cost above half of the quickest chunk's time is a small
        # call that other processes slowed: taken out in full, it would
        # leave the step nearly free.
        fixed = min(fixed, 0.5 * min(t for t, _ in times))
        timings = []
        for t, size in times:
            if t / size > rt.FIRST_PROBE_SLOWER * least:
                continue
            grows = t - fixed
            if grows > 0 and size > len(few):
                t = grows * size / (size - len(few))
            timings.append((t, size))
        seconds[i] = timings
        if shared is not None:
            self._steps[shared] = (k, ok, timings, producers[before:])
        positions = np.flatnonzero(at)
        for p, kk, oo in zip(positions, k, ok, strict=True):
            known[i][p] = kk
            passed[i][p] = oo

    def _product(
        self,
        data: rt.BatchData,
        events: np.ndarray,
        tag: str,
        cache: dict[str, tuple[rt.Selection, Any] | None],
        timed: ProducerTimings,
    ) -> tuple[rt.Selection, Any] | None:
        """Product ``tag`` computed on ``events``, or ``None`` where its
        producer (or one it depends on) is left out; each producer run is
        timed into ``timed``."""
        if tag in cache:
            return cache[tag]
        label = tag.split(":", 1)[0]
        cache[tag] = None
        m = self.producers.get(label)
        if m is None:
            return None
        raw = [self._product(data, events, t, cache, timed) for t in m["consumes"]]
        if any(r is None for r in raw):
            return None
        t0 = time.perf_counter()
        values = m["runner"](data, events, raw)
        timed.append((label, time.perf_counter() - t0, len(events)))
        for p, v in zip(m["produces"], values, strict=True):
            cache[f"{label}:{p}"] = (events, v)
        return cache[tag]


def _constrained_order(preds: list[set[int]]) -> list[int]:
    """The steps in written order, each moved after the steps it must
    follow (the order a path with these constraints could run)."""
    done: list[int] = []
    left = list(range(len(preds)))
    while left:
        ready = next((i for i in left if preds[i] <= set(done)), left[0])  # a cycle: written order
        done.append(ready)
        left.remove(ready)
    return done
