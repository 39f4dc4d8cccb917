"""Waiting for a distributed run's tasks without waiting for ever.

Dask keeps a task whose cluster has no worker left pending, silently: the
client would wait for ever. That happens when every worker of the cluster
is gone and none comes back, e.g. a LocalCluster whose worker kept dying
(a chunk that crashes its process): the cluster closes a nanny whose worker
has not come back within ``distributed.deploy.lost-worker-timeout``, and a
nanny still restarting its worker when that timer fires is closed too,
for good. A run on a ``LocalCluster`` (also ``processes=N``) then fails with
a clear error instead. Other clusters (dask-jobqueue, Dask Gateway, a
scheduler address) get workers from outside, after a batch queue's wait
that may be long: their runs wait for them, unless the Dask setting
``evflow.no-worker-timeout`` (e.g. ``"30 minutes"``) bounds the wait there
too (``"never"`` lifts the bound of a ``LocalCluster``).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import ConfigurationError, JobError

__all__ = ["CHECK_INTERVAL_S", "NO_WORKER_TIMEOUT_S", "completed", "no_worker_timeout"]

#: How long a ``LocalCluster``'s tasks wait with no worker connected to the
#: scheduler before the run fails (a worker that restarts, or a local
#: cluster that scales up again from none, comes back well within it).
NO_WORKER_TIMEOUT_S = 120.0
#: How often the cluster's workers are counted while tasks wait.
CHECK_INTERVAL_S = 1.0


def _worker_count(client: Any) -> int | None:
    """The workers connected to the scheduler now, or None if unknown
    (a scheduler that does not answer is Dask's own error to report)."""
    try:
        return len(client.nthreads())
    except Exception:
        return None


def no_worker_timeout(client: Any) -> float | None:
    """Seconds ``client``'s tasks may wait with no worker before the run
    fails; None: as long as it takes. The Dask setting
    ``evflow.no-worker-timeout`` (a duration, or ``"never"``) where set,
    else :data:`NO_WORKER_TIMEOUT_S` on a ``LocalCluster`` (its workers
    come back only through their nannies) and None elsewhere (a batch
    system's workers may wait in its queue).

    >>> import dask
    >>> with dask.config.set({"evflow.no-worker-timeout": "30 minutes"}):
    ...     no_worker_timeout(None)
    1800.0
    >>> no_worker_timeout(None) is None  # a client of no cluster object: an address
    True
    """
    import dask
    from dask.utils import parse_timedelta

    setting = dask.config.get("evflow.no-worker-timeout", None)
    if setting is not None:
        if str(setting).strip().lower() in ("never", "inf", "none"):
            return None
        try:
            return float(parse_timedelta(setting, default="s"))
        except (TypeError, ValueError, KeyError) as e:
            raise ConfigurationError(
                f"the Dask setting evflow.no-worker-timeout is a duration ('30 minutes', 600) or "
                f"'never', not {setting!r}"
            ) from e
    from distributed import LocalCluster

    return NO_WORKER_TIMEOUT_S if isinstance(getattr(client, "cluster", None), LocalCluster) else None


def completed(
    running: Any, client: Any, waiting: Callable[[], tuple[str, list[Any]]]
) -> Iterator[tuple[Any, Any]]:
    """The ``(future, result)`` pairs of ``running`` (a
    ``distributed.as_completed(with_results=True)``, which may grow while
    this is iterated) as they finish; a :class:`~evflow.errors.JobError`
    when its tasks have waited :func:`no_worker_timeout` with no worker
    connected to the scheduler. ``waiting()``: what waits (named in the
    error) and its futures.

    >>> from distributed import Client, as_completed
    >>> with Client(processes=False, n_workers=1, dashboard_address=":0") as c:
    ...     running = as_completed([c.submit(sum, [1, 2])], with_results=True)
    ...     [r for _f, r in completed(running, c, lambda: ("a sum", []))]
    [3]
    """
    limit = no_worker_timeout(client)
    alone_since: float | None = None  # when the scheduler was last seen without a worker, first
    checked = time.monotonic()
    while not running.is_empty():
        if running.has_ready():
            alone_since = None
            yield next(running)
            continue
        with running.thread_condition:  # notified as each task finishes
            running.thread_condition.wait(timeout=min(0.1, CHECK_INTERVAL_S))
        now = time.monotonic()
        if limit is None or now - checked < CHECK_INTERVAL_S:
            continue
        checked = now
        if _worker_count(client) != 0:
            alone_since = None
            continue
        alone_since = alone_since if alone_since is not None else now
        if now - alone_since >= limit:
            what, futures = waiting()
            states = Counter(getattr(f, "status", "?") for f in futures)
            said = ", ".join(f"{n} {s}" for s, n in sorted(states.items())) or "none"
            scheduler = getattr(getattr(client, "scheduler", None), "address", None) or "?"
            raise JobError(
                f"{what} waited {now - alone_since:.0f} s with no Dask worker connected to the scheduler "
                f"at {scheduler} (its tasks: {said}): the workers died or were removed and none came "
                "back; a cluster closes a worker that keeps dying (distributed.deploy.lost-worker-timeout)"
                " - see the workers' logs, add workers or rerun (the Dask setting evflow.no-worker-timeout"
                " sets how long to wait)",
                kind="executor",
            )
