"""Which events each producer of a job computes on.

A producer computes on the events some path still holds when it runs. Two
consumers widen that: an analyzer, histogram or skim reading every event
(no ``after=`` / ``select=``) makes it compute on every event, and a filter
of a path whose batch the adaptive planner samples makes it compute on the
batch's subsample too (where every filter of the path decides, event by
event). A producer that feeds no filter of a path computes on no subsample:
the events it serves are the paths' own.
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
    ``needs_all`` (some consumer reads every event) and ``probe_paths``
    (the paths whose filters it feeds: on a batch sampled on one of them it
    computes on the subsample as well)."""
    every = {m["label"] for m in modules if m["kind"] in ("analyzer", "output") and m["after"] is None}
    needs_all = _feeders(modules, every)
    paths: dict[str, list[int]] = {}
    for f in modules:
        if f["kind"] != "filter":
            continue
        for label in _feeders(modules, {f["label"]}):
            feeds = paths.setdefault(label, [])
            if f["path"] not in feeds:
                feeds.append(f["path"])
    for m in modules:
        if m["kind"] == "producer":
            m["needs_all"] = m["label"] in needs_all
            m["probe_paths"] = sorted(paths.get(m["label"], []))
