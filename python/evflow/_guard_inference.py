"""Guards inferred by the probe before a path's first decision.

A physicist writes ``nmu = ev.nMuon >= 1`` and then ``ev.Muon_pt[:, 0] >
25`` on a reorderable path without ``after=``: the written order guards the
second cut, the adaptive default may not. When the probe before the first
decision (``_first_probe``) sees a filter raise on its subsample but decide
on the events that the filters written before it passed, the smallest set
of those filters that does it becomes ``after=`` pairs of the path, as if
written, and the job is told so once. See docs/filter-ordering.md,
"Guards inferred by the probe".
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

#: Whether a filter decides (does not raise) on the probe's events where a
#: set of step positions all passed; ``None`` where none of them did.
Trial = Callable[[frozenset[int]], int | None]


def smallest_guard(candidates: Sequence[int], decides: Trial) -> frozenset[int] | None:
    """The smallest set of ``candidates`` (positions of filters written
    before the failing one, which decided on the probe) on whose passing
    events the filter decides: ``None`` when all of them together do not
    (the filter fails on its own: a bug, not an order). One filter is tried
    at a time first; of those that guard on their own, the one that keeps
    the most events (the others guard by chance, keeping fewer: the guard
    of ``Muon_pt[:, 0]`` is ``nMuon >= 1``, not a tighter ``nMuon >= 2``).
    Else filters are left out one at a time while the rest still guards."""
    everything = frozenset(candidates)
    if not everything or decides(everything) is None:
        return None
    alone = [(kept, j) for j in candidates if (kept := decides(frozenset([j]))) is not None]
    if alone:
        return frozenset([max(alone, key=lambda k: (k[0], -k[1]))[1]])
    guard = everything
    for j in candidates:
        if len(guard) > 1 and decides(guard - {j}) is not None:
            guard = guard - {j}
    return guard


def where_passed(
    steps: frozenset[int], known: list[list[bool]], passed: list[list[bool]], n: int
) -> np.ndarray:
    """The probe's events that every step of ``steps`` decided and passed."""
    at = np.ones(n, dtype=bool)
    for j in steps:
        at &= np.asarray(known[j], dtype=bool) & np.asarray(passed[j], dtype=bool)
    return at


def notice(path: str, pairs: Sequence[tuple[str, str]], explicit: Sequence[tuple[str, str]]) -> str:
    """The one-time notice of pairs inferred on path ``path`` (``explicit``:
    the pairs the path was written with, to show the line to write)."""
    shown = ", ".join(f"('{a}', '{b}')" for a, b in pairs)
    every = ", ".join(f"('{a}', '{b}')" for a, b in [*explicit, *pairs])
    return (
        f"evflow: path '{path}': after=[{shown}] inferred: each cut (first of a pair) failed on the "
        f"first batch's probe where the filters written before it had not passed, and decided where "
        f"its guard (second) passed; it runs after its guard for the whole job. Write it explicitly: "
        f"proc.path('{path}', ..., after=[{every}])"
    )


def applied(
    stats: str | None, engine_label: Mapping[tuple[str, str], str]
) -> dict[str, list[tuple[str, str]]]:
    """Per path, the pairs its planner took beyond the written ones, by the
    filters' labels: inferred by this job's probe, or imported with
    statistics measured before (a later chunk of a distributed run, which
    takes no probe). ``stats``: the statistics the planner exported (JSON
    text, their ``after`` pairs by engine label); ``engine_label`` maps
    ``(path, filter label)`` to the engine's label."""
    if not stats:
        return {}
    label = {engine: f for (_path, f), engine in engine_label.items()}
    out: dict[str, list[tuple[str, str]]] = {}
    for path, s in json.loads(stats).items():
        pairs = [(label.get(a, a), label.get(b, b)) for a, b in s.get("after", [])]
        if pairs:
            out[path] = pairs
    return out


def union(parts: Iterable[Mapping[str, Sequence[Sequence[str]]]]) -> dict[str, list[tuple[str, str]]]:
    """Per path, the pairs of ``parts`` in their order, each once (a
    distributed run's chunks' pairs, given in chunk order, whatever the
    order they finished in).

    >>> union([{"sel": [("cut", "guard")]}, {"sel": [["cut", "guard"], ["b", "a"]]}])
    {'sel': [('cut', 'guard'), ('b', 'a')]}
    """
    out: dict[str, list[tuple[str, str]]] = {}
    for part in parts:
        for path, pairs in part.items():
            have = out.setdefault(path, [])
            for a, b in pairs:
                if (a, b) not in have:
                    have.append((a, b))
    return {path: pairs for path, pairs in out.items() if pairs}


def report_inferred(report: dict[str, Any], cutflow: Any, inferred: dict[str, list[tuple[str, str]]]) -> None:
    """Adds the inferred pairs where the order is explained: the report's
    ``inferred_after`` and order changes of the path, its cut-flow's
    ``why`` (and so the summary)."""
    if not inferred:
        return
    report["inferred_after"] = {p: [list(pair) for pair in pairs] for p, pairs in inferred.items()}
    for change in report.get("orderings", []):
        if change.get("path") in inferred:
            change["inferred_after"] = [list(pair) for pair in inferred[change["path"]]]
    for path, pairs in inferred.items():
        if path in cutflow:
            shown = ", ".join(f"('{a}', '{b}')" for a, b in pairs)
            why = (
                f"{cutflow[path].why}; after=[{shown}] inferred by the first probe (the cut needs its guard)"
            )
            cutflow.paths[path] = dataclasses.replace(cutflow[path], why=why)


def announce(inferred: dict[str, list[tuple[str, str]]], paths: dict[str, Any]) -> None:
    """Prints the one-time notice of each path's inferred pairs."""
    for path, pairs in inferred.items():
        print(notice(path, pairs, list(paths[path].after) if path in paths else []), file=sys.stderr)
