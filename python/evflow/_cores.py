"""The cores this process may use: the default engine threads and the most
read-ahead workers a source starts.

``os.cpu_count()`` is the machine's cores, not this process's: a process
pinned with ``taskset`` or placed in a cpuset by a batch system may use
fewer, and a Dask worker process shares its machine with the other worker
processes there. Threads beyond the cores a process really has only take
turns on them (16 worker processes each starting up to 17 Parquet decode
threads on a 16-core machine).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

from .errors import ConfigurationError

#: The share of its machine's cores of one task slot of a distributed worker
#: process while chunk tasks run in it (:func:`task_share`); None elsewhere.
_task_share: int | None = None
#: The chunk tasks running in this process (:func:`task_share`).
_tasks = 0
_lock = threading.Lock()


def machine_cores() -> int:
    """The cores this process may run on: ``EVFLOW_CORES`` when set (a batch
    job's allocation that no affinity mask shows), else the process's CPU
    affinity, else the machine's cores."""
    raw = os.environ.get("EVFLOW_CORES", "").strip()
    if raw:
        try:
            n = int(raw)
        except ValueError:
            n = 0
        if n < 1:
            raise ConfigurationError(f"EVFLOW_CORES must be a positive whole number of cores, not {raw!r}")
        return n
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return max(1, os.cpu_count() or 1)


def available_cores() -> int:
    """The cores this process (or, in a distributed chunk task, this task
    slot) may use."""
    return _task_share if _task_share is not None else machine_cores()


def share_of(cores: int, slots_on_host: int | None) -> int:
    """One task slot's share of ``cores`` when ``slots_on_host`` task slots
    (worker threads, summed over the worker processes of the host) share
    them: at least one core."""
    if not slots_on_host or slots_on_host < 1:
        return max(1, cores)
    return max(1, cores // slots_on_host)


@contextlib.contextmanager
def task_share(slots_on_host: int | None) -> Iterator[int]:
    """This task slot's share of the host's cores while a chunk task runs:
    when the last chunk task running in this process ends, the process's
    own cores count again (a Dask worker of ``processes=False`` runs its
    tasks in the client's process, whose later single-process runs must
    not keep a task's share)."""
    global _task_share, _tasks
    with _lock:
        # Every task of the job computes the same share.
        share = _task_share = share_of(machine_cores(), slots_on_host)
        _tasks += 1
    try:
        yield share
    finally:
        with _lock:
            _tasks -= 1
            if _tasks == 0:
                _task_share = None
