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
from collections.abc import Callable
from typing import Any

import numpy as np

from . import _runtime as rt

#: Per step of a path (written order): the filter's runner and the engine
#: tags (``label:product``) of the products it consumes.
Steps = list[tuple[Callable[..., Any], list[str]]]
Probed = tuple[list[list[bool]], list[list[bool]], list[list[tuple[float, int]]]]


class FirstProbe:
    """``probe(data, path)``: every filter of path ``path`` on a subsample of
    the batch ``data``, with the producers the filters need computed on it."""

    def __init__(self, path_steps: dict[int, Steps], modules: list[dict[str, Any]], device: set[str]) -> None:
        self.path_steps = path_steps
        # Producers that only run remotely or on a device are left out: the
        # probe must not send requests or launch kernels of its own.
        self.producers = {
            m["label"]: m
            for m in modules
            if m["kind"] == "producer" and m["remote"] is None and m["label"] not in device
        }

    def __call__(self, data: rt.BatchData, path: int) -> Probed | None:
        """Per step in written order: whether each event of the subsample
        (``FIRST_PROBE_EVENTS`` spread over the batch) was decided and
        passed, and its timings on the subsample as ``(seconds, events)``
        (with the producers the step was the first to need). A filter fed by
        a left-out producer, or that cannot decide on a subsample, is left
        undecided (no timings); ``None`` when no step decided."""
        steps = self.path_steps.get(path)
        if not steps or data.n == 0:
            return None
        events = rt.probe_indices(data.n, rt.FIRST_PROBE_EVENTS)
        cache: dict[str, tuple[rt.Selection, Any] | None] = {}
        known: list[list[bool]] = []
        passed: list[list[bool]] = []
        seconds: list[list[tuple[float, int]]] = []
        # Each filter runs on the subsample in a few chunks, each one timing
        # for the planner, and before each on a few events: the least of
        # these is the call's fixed cost (a Python call, slicing, an awkward
        # kernel's start: tens of µs, which batches of 10^5 events spread
        # thin), taken out of the chunks' timings so that they measure what
        # grows with the events.
        chunks = [c for c in np.array_split(events, rt.FIRST_PROBE_CHUNKS) if len(c)]
        few = events[: rt.FIRST_PROBE_FEW]
        for runner, tags in steps:
            t0 = time.perf_counter()
            probe = getattr(runner, "probe", None)
            raw = [self._product(data, events, tag, cache) for tag in tags]
            producers = time.perf_counter() - t0
            if probe is None or any(r is None for r in raw):
                known.append([False] * len(events))
                passed.append([False] * len(events))
                seconds.append([])
                continue
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
                timings.append((t + producers * size / len(events), size))
            seconds.append(timings)
            known.append(k)
            passed.append(ok)
        if not any(seconds):
            return None
        return known, passed, seconds

    def _product(
        self,
        data: rt.BatchData,
        events: np.ndarray,
        tag: str,
        cache: dict[str, tuple[rt.Selection, Any] | None],
    ) -> tuple[rt.Selection, Any] | None:
        """Product ``tag`` computed on ``events``, or ``None`` where its
        producer (or one it depends on) is left out."""
        if tag in cache:
            return cache[tag]
        label = tag.split(":", 1)[0]
        cache[tag] = None
        m = self.producers.get(label)
        if m is None:
            return None
        raw = [self._product(data, events, t, cache) for t in m["consumes"]]
        if any(r is None for r in raw):
            return None
        values = m["runner"](data, events, raw)
        for p, v in zip(m["produces"], values, strict=True):
            cache[f"{label}:{p}"] = (events, v)
        return cache[tag]
