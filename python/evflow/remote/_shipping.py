"""Whether a remote implementation can travel to the cluster: pickled here
(checked when the job starts) and unpickled by the Dask scheduler and
workers (an import that fails there fails every request the same way)."""

from __future__ import annotations

from typing import Any

from ..errors import ConfigurationError, error_chain


def name_of(fn: Any) -> str:
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"'{name}'"


def check_shippable(label: str, fn: Any) -> None:
    """Refuses, before any event runs, a remote implementation that cannot
    be pickled (a lock, an open file, a client captured): every request
    would fail to be sent, the same way each time."""
    import cloudpickle

    try:
        cloudpickle.dumps(fn)
    except Exception as e:
        raise ConfigurationError(
            f"module '{label}': its remote implementation {name_of(fn)} cannot be sent to a Dask worker: "
            f"it cannot be pickled ({type(e).__name__}: {e}); keep what it captures picklable (create "
            "locks, files and clients inside the function), or use mode='local'"
        ) from e


def load_failure(err: BaseException) -> BaseException | None:
    """The import error behind a request's failure, when the scheduler or a
    worker could not unpickle the request (Dask wraps the scheduler's in a
    ``RuntimeError``, "Error during deserialization of the task graph")."""
    return next((e for e in error_chain(err) if isinstance(e, ImportError)), None)


def unloadable(label: str, fn: Any, cause: BaseException) -> str:
    return (
        f"module '{label}': the Dask cluster could not load its remote implementation {name_of(fn)} "
        f"({type(cause).__name__}: {cause}); the scheduler and the workers must import the modules it "
        "refers to (install them there, put them on their PYTHONPATH, or client.upload_file(...)); "
        "not retried"
    )
