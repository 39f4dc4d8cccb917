"""Which events each producer of a job computes on.

A producer computes on the events that the paths it serves still hold when
it runs: the paths whose filters read its products (directly or through
other producers) and those that its analyzers, histograms and skims follow
(``after=`` / ``select=``). The events of another path are left out: a
product that only one path's guarded cut reads is not computed on the
events another path holds (which that cut's guard would have removed).
Two consumers widen that: an analyzer, histogram or skim reading every
event (no ``after=`` / ``select=``) makes it compute on every event, and a
filter of a path whose batch the adaptive planner samples makes it compute
on the batch's subsample too (where every filter of the path decides,
event by event). A producer that feeds no filter of a path computes on no
subsample: the events it serves are the paths' own.
"""

from __future__ import annotations

from typing import Any


def _feeders(modules: list[dict[str, Any]], start: set[str]) -> set[str]:
    """``start`` and every producer whose products reach one of them,
    directly or through other producers."""
    by_label = {m["label"]: m for m in modules}
    found = set(start)
    todo = list(start)
    while todo:
        m = by_label.get(todo.pop())
        if m is None:
            continue
        for tag in m["consumes"]:
            producer = tag.split(":", 1)[0]
            if producer not in found:
                found.add(producer)
                todo.append(producer)
    return found


def mark_producer_events(modules: list[dict[str, Any]]) -> None:
    """Sets, on each producer of ``modules`` (the engine modules of a job),
    ``needs_all`` (some consumer reads every event), ``live_paths`` (the
    paths whose events it serves: their filters read its products or their
    analyzers, histograms and skims do; ``None``: every path) and
    ``probe_paths`` (the paths whose filters it feeds: on a batch sampled
    on one of them it computes on the subsample as well)."""
    every = {m["label"] for m in modules if m["kind"] in ("analyzer", "output") and m["after"] is None}
    needs_all = _feeders(modules, every)
    paths: dict[str, list[int]] = {}
    serves: dict[str, set[int]] = {}
    for m in modules:
        if m["kind"] == "filter":
            followed = [m["path"]]
        elif m["kind"] in ("analyzer", "output") and m["after"] is not None:
            followed = list(m["after"])
        else:
            continue
        for label in _feeders(modules, {m["label"]}):
            serves.setdefault(label, set()).update(followed)
            if m["kind"] == "filter":
                feeds = paths.setdefault(label, [])
                if m["path"] not in feeds:
                    feeds.append(m["path"])
    for m in modules:
        if m["kind"] == "producer":
            m["needs_all"] = m["label"] in needs_all
            # No consumer on a path (none that runs): every path's events, as before.
            m["live_paths"] = sorted(serves[m["label"]]) if serves.get(m["label"]) else None
            m["probe_paths"] = sorted(paths.get(m["label"], []))
