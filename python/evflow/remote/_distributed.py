"""Remote producers inside a distributed run.

A chunk of a distributed run is a Dask task that keeps a worker thread
busy. A remote producer whose requests would go to that same cluster (no
``client=`` of its own: a chunk's current client is its worker's) waits for
a free thread that the chunks never leave: its requests would only time
out and run locally. Such producers run locally inside the chunks
(with one notice), or the run is refused before it starts when they are
``required``. The chunks' remote statistics are merged into the
distributed report as one single-process report shapes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import ConfigurationError

__all__ = ["merge_remote", "own_cluster", "shared_cluster_remotes"]


def _address(client: Any) -> str | None:
    """The scheduler address a ``Remote(client=...)`` names, if known."""
    if isinstance(client, str):
        return client
    return getattr(getattr(client, "scheduler", None), "address", None)


def shared_cluster_remotes(proc: Any, address: str | None) -> list[str]:
    """The labels of the producers of ``proc`` whose offload would go to
    the cluster that runs the chunks (``address``: its scheduler's; ``None``
    before connecting: only those without a client of their own are known).
    Raises :class:`ConfigurationError` for one that is ``required``."""
    from .._modules import Producer

    labels = []
    for m in proc.modules.values():
        spec = getattr(m, "remote", None)
        if not isinstance(m, Producer) or spec is None or spec.mode == "local":
            continue
        if spec.client is not None and (address is None or _address(spec.client) != address):
            continue
        if spec.required:
            raise ConfigurationError(
                f"producer '{m.label}' must run remotely (Remote(required=True)), but its requests would "
                "go to the Dask cluster running the chunks of this distributed run, whose worker threads "
                "are all busy with them (each request would wait until it timed out); give it a cluster "
                "of its own with Remote(client='tcp://other-scheduler:8786'), or use mode='local'"
            )
        labels.append(m.label)
    return labels


def notice(labels: Sequence[str]) -> str:
    names = ", ".join(f"'{label}'" for label in labels)
    return (
        f"producer(s) {names} run locally in the chunk tasks: their Remote(...) has no cluster of its own "
        "and the cluster running the chunks has no free worker thread for requests; give "
        "Remote(client='tcp://other-scheduler:8786') to offload from a distributed run"
    )


#: Statistics that add up over chunks, and those whose maximum counts.
_SUMS = (
    "local_batches",
    "local_events",
    "local_s",
    "remote_requests",
    "remote_batches",
    "remote_events",
    "bytes_sent",
    "bytes_received",
    "remote_compute_s",
    "retries",
    "timeouts",
    "fallback_batches",
    "late_answers",
)
_MAXIMA = ("max_batches_per_request", "max_in_flight_seen")


def merge_remote(reports: Sequence[dict[str, Any] | None]) -> dict[str, Any] | None:
    """One ``report["remote"]`` from the chunks' (in chunk order): counts
    and times summed, maxima kept, round-trip times combined (the median as
    the request-weighted median of the chunks' medians), workers and
    notices gathered; the decision is the last chunk's (each chunk's
    offloader measured on its own)."""
    per_module: dict[str, list[dict[str, Any]]] = {}
    for r in reports:
        for label, stats in (r or {}).items():
            per_module.setdefault(label, []).append(stats)
    if not per_module:
        return None
    return {label: _merge_module(parts) for label, parts in per_module.items()}


def _merge_module(parts: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = dict(parts[-1])
    for key in _SUMS:
        out[key] = sum(p.get(key, 0) for p in parts)
    for key in _MAXIMA:
        out[key] = max(p.get(key, 0) for p in parts)
    timed = [(p["rtt_s"], max(1, int(p.get("remote_requests", 0)))) for p in parts if p.get("rtt_s")]
    if timed:
        weight = sum(n for _r, n in timed)
        medians = sorted((r["median"], n) for r, n in timed)
        seen, median = 0, medians[-1][0]
        for value, n in medians:
            seen += n
            if 2 * seen >= weight:
                median = value
                break
        out["rtt_s"] = {
            "min": min(r["min"] for r, _n in timed),
            "median": median,
            "mean": sum(r["mean"] * n for r, n in timed) / weight,
            "max": max(r["max"] for r, _n in timed),
        }
    else:
        out["rtt_s"] = None
    total = out["local_events"] + out["remote_events"]
    out["remote_share"] = out["remote_events"] / total if total else 0.0
    out["available"] = any(p.get("available") for p in parts)
    out["workers"] = sorted({w for p in parts for w in p.get("workers", [])})
    out["notices"] = list(dict.fromkeys(n for p in parts for n in p.get("notices", [])))
    out["chunks"] = len(parts)
    return out


def own_cluster(client: Any) -> bool:
    """Whether ``client`` talks to the scheduler of the Dask worker this
    runs on (a chunk task of a distributed run): a request would queue
    behind the chunks that keep every worker thread busy."""
    try:
        from distributed import get_worker

        worker = get_worker()
    except (ImportError, ValueError):
        return False  # not in a Dask task
    mine = getattr(getattr(worker, "scheduler", None), "address", None)
    theirs = getattr(getattr(client, "scheduler", None), "address", None)
    return mine is not None and mine == theirs
