"""What runs on the Dask worker: one request holds the payloads of one or
several batches; they are concatenated, the remote implementation runs
once over all their events, and its outputs are split back per batch."""

from __future__ import annotations

import socket
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import awkward as ak
import numpy as np

Payload = dict[str, Any]


class RemoteEvents:
    """The events a remote implementation sees: the columns and products
    the module consumes, for the events of the request (``ev.x``,
    ``ev["x"]``, ``len(ev)``, ``ev.fields``, ``ev.zip(prefix)``)."""

    __slots__ = ("_columns", "_label", "_n")

    def __init__(self, label: str, columns: Payload, n: int) -> None:
        self._label = label
        self._columns = columns
        self._n = n

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, name: str) -> Any:
        try:
            return self._columns[name]
        except KeyError:
            raise KeyError(
                f"module '{self._label}' (remote) read '{name}', which it did not declare in consumes="
                f"{sorted(self._columns)}"
            ) from None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if name in ("weight", "info"):
            raise AttributeError(
                f"module '{self._label}': ev.{name} is not available to a remote implementation; "
                "consume the columns it needs instead"
            )
        try:
            return self[name]
        except KeyError as e:
            raise AttributeError(e.args[0]) from None

    @property
    def fields(self) -> list[str]:
        return sorted(self._columns)

    def zip(self, prefix: str, *, with_name: str | None = None) -> ak.Array:
        start = prefix + "_"
        fields = {n[len(start) :]: self[n] for n in sorted(self._columns) if n.startswith(start)}
        if not fields:
            raise KeyError(f"module '{self._label}' consumes no column starting with '{start}'")
        return ak.zip(fields, with_name=with_name)


def concat(parts: Sequence[Any]) -> Any:
    """One column over several batches (numpy stays numpy)."""
    if len(parts) == 1:
        return parts[0]
    if all(isinstance(p, np.ndarray) for p in parts):
        return np.concatenate(parts)
    return ak.concatenate([ak.Array(p) if isinstance(p, np.ndarray) else p for p in parts])


def outputs(label: str, out: Any, produces: Sequence[str]) -> list[Any]:
    """The producer's return value as one value per declared product."""
    if isinstance(out, dict):
        if sorted(out) != sorted(produces):
            raise ValueError(
                f"producer '{label}' returned keys {sorted(out)}, but declares produces={list(produces)}"
            )
        return [out[p] for p in produces]
    if len(produces) == 1:
        return [out]
    if isinstance(out, tuple | list) and len(out) == len(produces):
        return list(out)
    raise ValueError(
        f"producer '{label}' declares produces={list(produces)}: return a dict of them, or a tuple in that order"
    )


def _worker_name() -> str:
    """The Dask worker's address (the host name outside a worker)."""
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except (ImportError, ValueError):
        return socket.gethostname()


def run_request(
    fn: Callable[[Any], Any], label: str, produces: Sequence[str], payloads: Sequence[tuple[int, Payload]]
) -> dict[str, Any]:
    """Runs one request on the worker. ``payloads``: ``(events, columns)``
    per batch. Returns ``{"values": [[value per product] per batch],
    "compute_s", "worker"}``, or ``{"error": text}`` when the remote
    implementation raised (an error of the module, not of the cluster: the
    offloader does not retry it)."""
    t0 = time.perf_counter()
    try:
        counts = [n for n, _ in payloads]
        names = list(payloads[0][1])
        columns = {name: concat([cols[name] for _, cols in payloads]) for name in names}
        total = sum(counts)
        values = outputs(label, fn(RemoteEvents(label, columns, total)), produces)
        for p, v in zip(produces, values, strict=True):
            if len(v) != total:
                raise ValueError(
                    f"producer '{label}' returned '{p}' with {len(v)} entries for {total} events"
                )
        per_batch: list[list[Any]] = []
        start = 0
        for n in counts:
            per_batch.append([v[start : start + n] for v in values])
            start += n
    except Exception as e:
        text = "".join(traceback.format_exception_only(type(e), e)).strip()
        return {"error": text, "traceback": traceback.format_exc(), "worker": _worker_name()}
    return {"values": per_batch, "compute_s": time.perf_counter() - t0, "worker": _worker_name()}


class Runner:
    """The Dask actor of the ``"actor"`` transport: one per worker."""

    def run(
        self,
        fn: Callable[[Any], Any],
        label: str,
        produces: Sequence[str],
        payloads: Sequence[tuple[int, Payload]],
    ) -> dict[str, Any]:
        return run_request(fn, label, produces, payloads)
