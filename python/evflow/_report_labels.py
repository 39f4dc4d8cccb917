"""The names of a job's report as the user wrote them.

A filter listed on several paths is one engine module per path, labelled
``FILTER@PATH`` (each occurrence narrows its own path's selection). The
cut-flow names it ``FILTER`` on each of its paths; the report's entries that
belong to one path (``orderings``, ``paths[].filters``) name it the same way,
their path being the entry's own ``path`` / ``name`` field. ``modules`` has
one entry per filter label, as the core ``evflow run`` report has for a
filter on several paths, with its calls and times summed over its
occurrences and, per path, the occurrence's own (``paths``). What is about
one occurrence (``failed_events``, ``stalls``, a module's error) names the
filter by its label, with the occurrence's ``path``; the trace keeps the
engine's label.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._process import Process
    from .output import ParquetOutput


def user_labels(report: dict[str, Any], engine_label: Mapping[tuple[str, str], str]) -> dict[str, Any]:
    """``report`` (changed in place and returned) with each path entry's
    engine labels replaced by the filters' labels; ``engine_label`` maps
    ``(path, filter label)`` to the engine's label."""
    by_path: dict[str, dict[str, str]] = {}
    occurrence = _occurrences(engine_label)
    for engine, (label, path) in occurrence.items():
        if engine != label:
            by_path.setdefault(path, {})[engine] = label
    if "modules" in report:
        report["modules"] = _modules_by_label(report["modules"], occurrence)
    for entry in [*report.get("failed_events", []), *report.get("stalls", [])]:
        if (
            isinstance(entry, dict)
            and entry.get("module") in occurrence
            and occurrence[entry["module"]][0] != entry["module"]
        ):
            entry["module"], entry["path"] = occurrence[entry["module"]]
    if not by_path:
        return report
    for change in report.get("orderings", []):
        names = by_path.get(str(change.get("path"))) if isinstance(change, dict) else None
        if not names:
            continue
        change["order"] = [names.get(m, m) for m in change.get("order", [])]
        if "reason" in change:
            change["reason"] = _renamed(str(change["reason"]), names)
    for path in report.get("paths", []):
        names = by_path.get(str(path.get("name")), {})
        for f in path.get("filters", []):
            f["label"] = names.get(f["label"], f["label"])
    return report


#: The per-module counts and times that add up over occurrences and chunks.
MODULE_SUMS = ("calls", "run_s", "wait_s", "queue_s", "failures")


def _modules_by_label(
    modules: list[dict[str, Any]], occurrence: Mapping[str, tuple[str, str]]
) -> list[dict[str, Any]]:
    """The engine's module entries with a filter's occurrences as one entry
    under its label, where its first occurrence was: the sums of
    ``MODULE_SUMS`` and, in ``paths``, each occurrence's own."""
    out: list[dict[str, Any]] = []
    by_label: dict[str, dict[str, Any]] = {}
    for m in modules:
        if m.get("label") not in occurrence:
            out.append(m)
            continue
        label, path = occurrence[m["label"]]
        entry = by_label.get(label)
        if entry is None:
            entry = by_label[label] = {**m, "label": label, **dict.fromkeys(MODULE_SUMS, 0), "paths": {}}
            out.append(entry)
        add_module(entry, {"paths": {path: m}, **{k: m.get(k, 0) for k in MODULE_SUMS}})
    return out


def add_module(total: dict[str, Any], part: Mapping[str, Any]) -> None:
    """Adds a module entry of another report (a chunk's) to ``total``, the
    entry of the same label: sums, and per path the occurrence's sums."""
    for k in MODULE_SUMS:
        total[k] += part.get(k, 0)
    for path, own in (part.get("paths") or {}).items():
        acc = total.setdefault("paths", {}).setdefault(path, dict.fromkeys(MODULE_SUMS, 0))
        for k in MODULE_SUMS:
            acc[k] += own.get(k, 0)


def _renamed(text: str, names: Mapping[str, str]) -> str:
    """``text`` (an engine's reason) naming each engine label of ``names``
    by its filter label; a longer label that merely contains one is left."""
    pattern = re.compile(r"(?<![\w@.])(" + "|".join(map(re.escape, names)) + r")(?![\w@])")
    return pattern.sub(lambda m: names[m.group(1)], text)


def user_error(res: dict[str, Any], engine_label: Mapping[tuple[str, str], str]) -> dict[str, Any]:
    """``res`` (a failed job's result, changed in place and returned) with
    the failing module named by its label and, for a filter on several
    paths, the path of the occurrence that failed."""
    err = res.get("error")
    if isinstance(err, dict):
        label, path = _occurrences(engine_label).get(err.get("module"), (None, None))
        if label is not None and label != err["module"]:
            err["module"], err["path"] = label, path
    return res


def _occurrences(engine_label: Mapping[tuple[str, str], str]) -> dict[str, tuple[str, str]]:
    """Each engine label's filter label and path (``engine_label`` maps
    ``(path, filter label)`` to the engine's label)."""
    return {engine: (label, path) for (path, label), engine in engine_label.items()}


def user_name(label: str, proc: Process, outputs: Sequence[ParquetOutput]) -> str:
    """An engine module as an error names it: ``histogram 'met'`` for
    ``hist.met``, ``skim 'out.parquet'`` for ``output0`` (``outputs``: the
    skims added so far, in order), else the module's own label."""
    if label.startswith("hist.") and label[len("hist.") :] in proc.histograms:
        return f"histogram '{label[len('hist.') :]}'"
    index = label[len("output") :]
    if label.startswith("output") and index.isdigit() and int(index) < len(outputs):
        return f"skim '{outputs[int(index)].path}'"
    return f"module '{label}'"
