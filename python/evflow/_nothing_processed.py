"""A run whose every batch failed is an error, whatever ``on_error`` says.

``on_error="skip"`` (and ``"skip-chunk"`` on Dask) leaves a failing batch
out and goes on; when no batch is left, nothing came out of the job (an
empty cut-flow, empty histograms, a skim of no row), which is a failure
however it was reached: the core ``evflow run`` ends such a job in an
error too. Before, the run returned that empty result, and ``evflow run
analysis.py --on-error skip-event -q`` exited 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .errors import ModuleError


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def nothing_processed(
    report: dict[str, Any], events: int, failed: Sequence[int], skipped_chunks: Sequence[dict[str, Any]] = ()
) -> ModuleError | None:
    """The error of a run that processed no event (``events`` 0) because
    its ``failed`` batches (``on_error="skip"``) and ``skipped_chunks``
    (``"skip-chunk"``) were all it had, naming how many and the first
    failure (from ``report["failed_events"]``); ``None`` for any other run
    (one that processed an event, or an input of no event)."""
    if events or not (failed or skipped_chunks):
        return None
    left_out = []
    if failed:
        left_out.append(f"{_count(len(failed), 'batch', 'batches')} failed (on_error='skip')")
    if skipped_chunks:
        left_out.append(f"{_count(len(skipped_chunks), 'chunk', 'chunks')} left out (on_error='skip-chunk')")
    module, batch, first = "", None, ""
    entries = report.get("failed_events") or []
    if entries:
        f = entries[0]
        module, batch = str(f.get("module", "")), int(f.get("event", 1)) - 1
        on_path = f" on path '{f['path']}'" if f.get("path") else ""
        first = f"; the first: module '{module}'{on_path}: {f.get('message', '')}"
    elif skipped_chunks:
        c = skipped_chunks[0]
        first = f"; the first: chunk {c.get('chunk')}: {c.get('error', '')}"
    return ModuleError(
        f"every batch of the job failed, no event was processed ({', '.join(left_out)}; "
        f"no output written){first}",
        kind="module",
        module=module,
        batch=batch,
        report=report,
    )


def fail_if_nothing_processed(res: dict[str, Any], report: dict[str, Any] | None, raw: bool) -> None:
    """Raises :func:`nothing_processed`'s error for a single-process run's
    engine result ``res`` (the caller removes its skims, as a failed run's).
    Not for a chunk of a distributed run (``raw``), whose batches are only
    part of the job, nor for an interrupted run, whose partial result is
    kept."""
    if raw or res["interrupted"]:
        return
    failed = set(res["failed"])
    events = sum(b[1] for b in res["batches"] if b[0] not in failed)
    error = nothing_processed(report or {}, events, res["failed"])
    if error is not None:
        raise error
