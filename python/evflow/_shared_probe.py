"""One subsample probe per batch for a filter on several paths.

On a batch the adaptive planner samples, every filter of each sampled
reorderable path also decides on a subsample of the batch (the planner's
per-event joint statistics, see docs/filter-ordering.md). A filter on
several paths (a selection and its systematic variations sharing their
cuts) was called on that subsample once per path. Its decisions on an
event do not depend on the path, and the probe is not timed: its
occurrences share them, by batch and events.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

Probe = Callable[[Any, np.ndarray, list[tuple[Any, Any]]], tuple[list[bool], list[bool]]]

#: Probes kept: those of the batches in flight (a few per path); an older
#: one dropped is only computed again.
KEEP = 256


def shared_probe(probe: Probe) -> Probe:
    """``probe`` (a filter's ``probe(data, events, inputs)``), remembering
    its result per batch, events and the inputs' events, for the filter's
    other occurrences."""
    done: dict[tuple[Any, ...], tuple[list[bool], list[bool]]] = {}
    lock = threading.Lock()

    def run(data: Any, events: np.ndarray, raw: list[tuple[Any, Any]]) -> tuple[list[bool], list[bool]]:
        # The inputs' events decide which events are decided (covered):
        # part of the key, by identity (a product of the batch is one object).
        key = (id(data), data.index, data.n, np.asarray(events).tobytes(), tuple(id(have) for have, _ in raw))
        with lock:
            if key in done:
                return done[key]
        out = probe(data, events, raw)
        with lock:
            done[key] = out
            while len(done) > KEEP:
                del done[next(iter(done))]
        return out

    return run
