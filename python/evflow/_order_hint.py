"""The ``after=`` pairs of a reorderable path: their labels, checked when
the path is declared, and what a filter's failure owes to the order.

A cut that reads what an earlier cut guarantees (``Muon_pt[:, 0]`` after
``nMuon >= 1``) runs as written under ``filter_order="fixed"``, but the
adaptive default may run it first and it then fails on events the written
order never gave it. The error says so, with the ``after=`` pair that
keeps the two in order, instead of leaving an ``IndexError`` to decode.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from ._modules import Filter
from .errors import ConfigurationError


def after_label(
    path: str, item: Any, pair: Any, filters: Sequence[Filter], modules: Mapping[str, Any]
) -> str:
    """The label of ``item``, one side of the pair ``pair`` of path
    ``path``'s ``after=``; refused, named, when it is not one of the path's
    ``filters`` (``modules``: the process's, to say what else it is)."""
    labels = [f.label for f in filters]
    head = f"path '{path}': after={tuple(pair)!r}"
    if not isinstance(item, Filter | str):
        raise ConfigurationError(f"{head}: {item!r} is neither a filter nor a filter's label")
    label = item if isinstance(item, str) else item.label
    if label in labels:
        return label
    if isinstance(modules.get(label), Filter):
        why = f"'{label}' is a filter of the process but not on this path (list it in the path's filters)"
    elif label in modules:
        why = f"'{label}' is a {type(modules[label]).__name__.lower()}, not a filter of the path"
    else:
        close = difflib.get_close_matches(label, labels, n=1)
        why = f"no filter of the path is labelled '{label}'" + (
            f" (did you mean '{close[0]}'?)" if close else ""
        )
    raise ConfigurationError(f"{head}: {why}; its filters are {', '.join(labels)}")


def _must_follow(pairs: Sequence[tuple[str, str]], label: str) -> set[str]:
    """The filters that must run after ``label`` (transitively) by ``pairs``
    (``(later, earlier)``)."""
    later: set[str] = set()
    todo = [label]
    while todo:
        here = todo.pop()
        for a, b in pairs:
            if b == here and a not in later:
                later.add(a)
                todo.append(a)
    return later


def reordered_hint(
    err: dict[str, Any],
    records: Sequence[Sequence[Any]],
    paths: Sequence[Any],
    filter_order: str,
) -> str:
    """A sentence to add to the error ``err`` (the engine's error, its
    ``module`` a filter label, ``path`` set for a filter on several paths)
    when the failing filter ran on its batch before a filter written above
    it on a reorderable path; "" otherwise. ``records`` are the job's
    per-step records ``(batch, path, step, position, ...)`` (a step's
    record is made when it finished, so those of the failing batch are the
    steps that ran before the failure); ``paths`` the process's paths, in
    the order the records number them."""
    if err.get("kind") != "module" or err.get("batch") is None:
        return ""
    label, batch = err.get("module"), err["batch"]
    on = [
        (i, p)
        for i, p in enumerate(paths)
        if p.reorderable
        and any(f.label == label for f in p.filters)
        and (not err.get("path") or err["path"] == p.name)
    ]
    if len(on) != 1:
        return ""
    index, path = on[0]
    labels = [f.label for f in path.filters]
    step = labels.index(label)
    done = {r[2] for r in records if r[0] == batch and r[1] == index}
    follows = _must_follow(path.after, label)
    skipped = [f for i, f in enumerate(labels[:step]) if i not in done and f not in follows]
    if not skipped:
        return ""
    names = ", ".join(f"'{f}'" for f in skipped)
    pairs = ", ".join(f"('{label}', '{f}')" for f in skipped)
    return (
        f"; path '{path.name}' is reorderable and filter_order='{filter_order}' ran '{label}' on this "
        f"batch before {names} (written before it): a cut that needs the events another cut keeps "
        f"must say so, proc.path('{path.name}', ..., after=[{pairs}])"
    )


def with_order_hint(res: dict[str, Any], proc: Any, filter_order: str) -> dict[str, Any]:
    """``res`` (a failed job's result, changed in place and returned) with
    :func:`reordered_hint` added to its error's message."""
    err = res.get("error")
    if isinstance(err, dict):
        hint = reordered_hint(err, res.get("records") or (), list(proc.paths.values()), filter_order)
        err["message"] = f"{err.get('message', '')}{hint}"
    return res


def with_failed_hints(
    report: dict[str, Any], records: Sequence[Sequence[Any]], proc: Any, filter_order: str
) -> None:
    """The batches ``on_error="skip"`` left out (``report["failed_events"]``,
    an engine event being batch ``event - 1``) get :func:`reordered_hint`
    in their messages, as a failing job's error does."""
    paths = list(proc.paths.values())
    for entry in report.get("failed_events", []):
        err = {"kind": "module", "module": entry.get("module"), "batch": entry.get("event", 0) - 1}
        if entry.get("path"):
            err["path"] = entry["path"]
        entry["message"] = f"{entry.get('message', '')}{reordered_hint(err, records, paths, filter_order)}"
