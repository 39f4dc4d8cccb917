"""``Remote``: how a producer may run on a Dask worker holding resources."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ..errors import ConfigurationError

Mode = Literal["adaptive", "remote", "local"]
Transport = Literal["task", "actor"]


@dataclass(frozen=True)
class Remote:
    """Marks a producer as offloadable to a Dask worker.

    ``resources``: what a worker must advertise (``{"GPU": 1}``); the Dask
    scheduler picks such a worker for every request and runs at most as
    many requests at once on it as it has of the resource.

    ``fn``: the remote implementation, called on the worker with an
    events view of the module's inputs (default: the producer's own
    function, which stays the local implementation). It must compute each
    event independently of the others: several batches travel in one
    request and are concatenated.

    ``mode``: ``"adaptive"`` (default) offloads the share of batches that
    the measurements say pays; ``"remote"`` offloads every batch;
    ``"local"`` never offloads (the local implementation only).

    ``required``: fail the job (instead of running locally with a notice)
    when no worker has the resources or a request cannot be completed.

    ``client``: a ``distributed.Client`` or a scheduler address; default:
    the client current when the job starts (``distributed.get_client()``).
    A client cannot travel to other processes: shipped to the workers of a
    distributed run, a ``Remote`` holds its scheduler's address instead, and
    each chunk connects a client of its own there.

    ``max_in_flight``: requests outstanding at once; ``combine``: batches
    per request at most; ``timeout_s`` per request: a request not answered
    by then runs its batches locally at once and pauses offloading (one
    batch probes the remote after the pause; see ``docs/remote.md``);
    ``retries`` of a request that failed (a lost worker or connection)
    before running its batches locally; ``max_payload_bytes``: largest
    payload of one batch.

    ``transport``: ``"task"`` (default) submits each request as a task
    tagged with the resources, so the scheduler picks a free worker every
    time and reschedules a request whose worker died; ``"actor"`` places
    one Dask actor on each worker with the resources when the job starts
    and calls it directly (fewer round trips per request, but a lost
    worker's actor is gone: its requests retry on another actor or run
    locally).

    Example::

        >>> import evflow as ef
        >>> spec = ef.remote.Remote(resources={"GPU": 1}, max_in_flight=4)
        >>> spec.mode
        'adaptive'
    """

    resources: Mapping[str, float] = field(default_factory=dict)
    fn: Callable[[Any], Any] | None = None
    mode: Mode = "adaptive"
    required: bool = False
    client: Any = None
    max_in_flight: int = 2
    combine: int = 8
    timeout_s: float = 60.0
    retries: int = 1
    max_payload_bytes: int = 256 * 2**20
    transport: Transport = "task"

    def __post_init__(self) -> None:
        if self.mode not in ("adaptive", "remote", "local"):
            raise ConfigurationError(f"Remote(mode={self.mode!r}): use 'adaptive', 'remote' or 'local'")
        if self.transport not in ("task", "actor"):
            raise ConfigurationError(f"Remote(transport={self.transport!r}): use 'task' or 'actor'")
        if not isinstance(self.resources, Mapping):
            raise ConfigurationError(
                f"Remote(resources={self.resources!r}) takes a mapping of resource names to amounts, "
                "e.g. {'GPU': 1}"
            )
        for name, value in dict(self.resources).items():
            if not isinstance(name, str) or not _is_number(value) or value <= 0:
                raise ConfigurationError(
                    f"Remote(resources=...): {name!r}: {value!r} is not a resource name with a positive amount"
                )
        # Checked by type, not converted: a string or a float here is a
        # mistake that would otherwise fail (or be rounded) mid-job.
        if not isinstance(self.required, bool):
            raise ConfigurationError(f"Remote(required={self.required!r}) takes True or False")
        for name, least in (("max_in_flight", 1), ("combine", 1), ("retries", 0), ("max_payload_bytes", 1)):
            value = getattr(self, name)
            if not _is_int(value):
                raise ConfigurationError(
                    f"Remote({name}={value!r}) takes a whole number, not {type(value).__name__}"
                )
            if value < least:
                what = "at least 1" if least == 1 else "0 or more"
                raise ConfigurationError(f"Remote({name}={value!r}) must be {what}")
        if not _is_number(self.timeout_s):
            raise ConfigurationError(
                f"Remote(timeout_s={self.timeout_s!r}) takes a number of seconds, not {type(self.timeout_s).__name__}"
            )
        if not self.timeout_s > 0:
            raise ConfigurationError(f"Remote(timeout_s={self.timeout_s!r}) must be positive")
        if self.fn is not None and not callable(self.fn):
            raise ConfigurationError(f"Remote(fn={self.fn!r}) is not callable")

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled (shipped to the workers of a distributed run) with a
        ``distributed.Client`` replaced by its scheduler's address."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        values["client"] = _shippable_client(self.client)
        return (_rebuild, (values,))

    def __copy__(self) -> Remote:
        return dataclasses.replace(self)  # the same client object, unlike a pickle

    def __deepcopy__(self, memo: dict[int, Any]) -> Remote:
        return dataclasses.replace(self, resources=dict(self.resources))


def _is_int(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    """A real number of seconds or of a resource (not a bool, not NaN)."""
    return (
        isinstance(value, int | float | np.integer | np.floating)
        and not isinstance(value, bool)
        and value == value
    )


def _shippable_client(client: Any) -> Any:
    """``client`` as it may travel to another process: an address as it is,
    a Dask client (or cluster) as its scheduler's address."""
    if client is None or isinstance(client, str):
        return client
    address = getattr(getattr(client, "scheduler", None), "address", None)
    if address is None:
        address = getattr(client, "scheduler_address", None)  # a cluster object
    if not isinstance(address, str) or not address:
        raise TypeError(
            f"Remote(client={type(client).__name__}) cannot be sent to other processes and its scheduler "
            "address is unknown (a closed client?); in a distributed run give Remote the scheduler "
            "address: client='tcp://host:port'"
        )
    return address


def _rebuild(values: dict[str, Any]) -> Remote:
    return Remote(**values)
