"""Merging chunk results in chunk order.

Chunks finish in any order on any worker. :class:`Merger` holds a finished
chunk until every earlier chunk is merged, then adds it: its batches take
the next global batch numbers, every batch's histogram part is added to the
running total in batch order (so floating-point sums, weighted ones
included, are done in the single-process order), and the engine's cut-flow
records are kept to be summed once, in batch order, by the same code as a
single-process run. The result is therefore bit-identical to the
single-process run, whatever the cluster did. Memory on the client holds
the totals, a few numbers per batch, and the chunks that finished ahead of
an earlier one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from .._fill import add_into
from .._report_labels import MODULE_SUMS, add_module
from ..errors import ConfigurationError
from .chunks import Chunk

__all__ = ["Merger", "merge_reports", "merge_types", "widen_part_types"]


class Merger:
    """Adds chunk results in chunk order; skipped chunks leave a gap."""

    def __init__(self, hist_names: Sequence[str], skims: Sequence[str] | int) -> None:
        self.next = 0
        self.pending: dict[int, tuple[Chunk, dict[str, Any] | None]] = {}
        self.records: list[tuple[Any, ...]] = []
        self.batches: list[tuple[Any, ...]] = []
        self.finals: list[tuple[Any, ...]] = []
        self.failed: list[int] = []
        self.totals: dict[str, Any] = dict.fromkeys(hist_names)
        #: the skims' paths (for messages)
        self.skim_names = [f"#{i}" for i in range(skims)] if isinstance(skims, int) else list(skims)
        n_skims = len(self.skim_names)
        self.skims: list[list[dict[str, Any]]] = [[] for _ in range(n_skims)]
        #: per skim, its columns' types (serialized Arrow schema): the first
        #: chunk whose part has rows and knew a column's type gives it (the
        #: parts with rows must agree) ...
        self.skim_schemas: list[bytes | None] = [None] * n_skims
        #: ... and the chunk that gave each column's type
        self.typed_by: list[dict[str, int]] = [{} for _ in range(n_skims)]
        #: per skim, the types of parts without rows (their columns may be
        #: typed otherwise, e.g. a product of no event): only where no part
        #: with rows told a column's type
        self.empty_schemas: list[bytes | None] = [None] * n_skims
        self.reports: list[dict[str, Any]] = []
        self.summaries: list[dict[str, Any]] = []
        self.events = 0

    def add(self, chunk: Chunk, result: dict[str, Any] | None) -> None:
        """Hands in ``chunk``'s result (``None``: skipped). Chunks are
        numbered 0, 1, ... in the order of their batches."""
        self.pending[chunk.index] = (chunk, result)
        while self.next in self.pending:
            ch, r = self.pending.pop(self.next)
            if r is not None:
                self._merge(ch, r)
            self.next += 1

    def skim_schema(self, i: int) -> bytes | None:
        """Skim ``i``'s columns' types, as the manifest keeps them."""
        return merge_types(self.skim_schemas[i], self.empty_schemas[i])

    @property
    def waiting(self) -> int:
        return len(self.pending)

    def _merge(self, chunk: Chunk, r: dict[str, Any]) -> None:
        raw = r["raw"]
        base = chunk.first_batch  # batches keep their single-process numbers
        self.batches.extend((b + base, *rest) for b, *rest in raw["batches"])
        self.records.extend((b + base, *rest) for b, *rest in raw["records"])
        self.finals.extend((b + base, *rest) for b, *rest in raw["finals"])
        self.failed.extend(b + base for b in raw["failed"])
        for name, parts in raw["hist_parts"].items():
            total = self.totals[name]
            for _batch, part in parts:  # in batch order, as the single-process fold
                total = part if total is None else add_into(total, part)
            self.totals[name] = total
        for i, (file, rows) in enumerate(r["skims"]):
            self.skims[i].append(
                {
                    "chunk": chunk.index,
                    "file": file,
                    "rows": rows,
                    "entries": [[p.file, p.start, p.stop] for p in chunk.pieces],
                }
            )
        for i, schema in enumerate(r.get("skim_schemas") or []):
            if r["skims"][i][1] == 0:
                self.empty_schemas[i] = merge_types(self.empty_schemas[i], schema)
                continue
            # Also takes the part's type where the earlier parts had none.
            self.skim_schemas[i] = widen_part_types(
                self.skim_names[i], self.skim_schemas[i], schema, self.typed_by[i], chunk.index
            )
        self.events += int(r["events"])
        self.reports.append(r["report"])
        self.summaries.append(
            {
                "chunk": chunk.index,
                "entries": [[p.file, p.start, p.stop] for p in chunk.pieces],
                "events": int(r["events"]),
                "batches": len(raw["batches"]),
                "first_batch": chunk.first_batch,
                "worker": r["worker"],
                "wall_s": r["wall_s"],
                "order": r["order"],
                "seeded": r.get("seeded"),
                "seeded_statistics": bool(r.get("seeded_statistics")),
            }
        )


def widen_part_types(
    skim: str, have: bytes | None, new: bytes | None, typed_by: dict[str, int], chunk: int
) -> bytes | None:
    """The column types of a skim's parts so far (``have``) with those of
    the part of ``chunk``: a column whose types differ takes the type
    holding both exactly (the parts are rewritten in it when the skim is
    finished, ``skims.finish_skim``), as one process widens its file; types
    no type holds both of are refused, naming both chunks (``typed_by``:
    the chunk that gave each column's type, updated)."""
    if new is None:
        return have
    import pyarrow as pa

    from .._skim_types import common_type, type_text

    b = pa.ipc.read_schema(pa.py_buffer(new))
    if have is None:
        typed_by.update((f.name, chunk) for f in b if not pa.types.is_null(f.type))
        return new
    a = pa.ipc.read_schema(pa.py_buffer(have))
    fields = []
    for f in a:
        if f.name not in b.names or pa.types.is_null(b.field(f.name).type):
            fields.append(f)
            continue
        new_type = b.field(f.name).type
        if pa.types.is_null(f.type):
            typed_by[f.name] = chunk
            fields.append(f.with_type(new_type))
            continue
        wider = common_type(f.type, new_type)
        if wider is None:
            raise ConfigurationError(
                f"skim '{skim}': column '{f.name}' is {type_text(f.type)} in the part of chunk "
                f"{typed_by[f.name]} but {type_text(new_type)} in the part of chunk {chunk}, and no type "
                "holds both exactly: make what computes it return one type (e.g. with .astype(np.float64))"
            )
        fields.append(f.with_type(wider))
    return bytes(pa.schema(fields).serialize().to_pybytes())


def merge_types(have: bytes | None, new: bytes | None) -> bytes | None:
    """Two serialized Arrow schemas of the same skim as one: each column
    keeps the type ``have`` gives it unless that is null (a chunk in which
    no event told the type), then takes ``new``'s."""
    if new is None or have is None:
        return have if new is None else new
    import pyarrow as pa

    a, b = (pa.ipc.read_schema(pa.py_buffer(x)) for x in (have, new))
    if not any(pa.types.is_null(f.type) for f in a):
        return have
    fields = [b.field(f.name) if pa.types.is_null(f.type) and f.name in b.names else f for f in a]
    return bytes(pa.schema(fields).serialize().to_pybytes())


def job_batch_message(message: str, batch: int, first_batch: int) -> str:
    """``message`` with the chunk's batch number ``batch`` (the engine numbers
    a chunk's batches from 0) replaced by its number in the whole job, as one
    process names it."""
    return re.sub(rf"\bbatch {batch}\b", f"batch {first_batch + batch}", message, count=1)


def merge_reports(
    reports: Sequence[dict[str, Any]], first_batches: Sequence[int], chunk_ids: Sequence[int]
) -> dict[str, Any]:
    """One report from the chunks' reports (in chunk order): calls, times
    and path counts summed per module and path, peaks as maxima, failed
    events renumbered to global batch numbers."""
    if not reports:
        return {"modules": [], "paths": [], "failed_events": [], "orderings": [], "stalls": []}
    first = reports[0]
    out: dict[str, Any] = {k: v for k, v in first.items() if not isinstance(v, list | dict)}
    for key in ("events", "module_executions", "batches", "events_processed"):
        out[key] = sum(int(r.get(key, 0)) for r in reports)
    out["cpu_s"] = sum(float(r.get("cpu_s", 0.0)) for r in reports)
    for key in ("peak_events_in_flight", "peak_rss_bytes"):
        out[key] = max(int(r.get(key, 0)) for r in reports)
    out["steady_throughput_ev_s"] = 0.0
    modules: dict[str, dict[str, Any]] = {}
    for r in reports:
        for m in r.get("modules", []):
            acc = modules.get(m["label"])
            if acc is None:
                acc = modules[m["label"]] = {**m, **dict.fromkeys(MODULE_SUMS, 0)}
                if "paths" in m:
                    acc["paths"] = {}
            add_module(acc, m)
    out["modules"] = list(modules.values())
    paths: dict[str, dict[str, Any]] = {}
    for r in reports:
        for p in r.get("paths", []):
            acc = paths.get(p["name"])
            if acc is None:
                paths[p["name"]] = {**p, "filters": [dict(f) for f in p.get("filters", [])]}
                continue
            acc["visited"] += p["visited"]
            acc["passed"] += p["passed"]
            steps = {f["label"]: f for f in acc["filters"]}
            for f in p.get("filters", []):
                if f["label"] in steps:
                    steps[f["label"]]["visited"] += f["visited"]
                    steps[f["label"]]["passed"] += f["passed"]
                else:
                    acc["filters"].append(dict(f))
    out["paths"] = list(paths.values())
    failed: list[dict[str, Any]] = []
    orderings: list[dict[str, Any]] = []
    stalls: list[dict[str, Any]] = []
    for i, r, base in zip(chunk_ids, reports, first_batches, strict=True):
        for f in r.get("failed_events", []):
            event = int(f.get("event", 0))  # the chunk's batch number + 1
            entry = {**f, "event": event + base}
            if isinstance(f.get("message"), str) and event >= 1:
                entry["message"] = job_batch_message(f["message"], event - 1, base)
            failed.append(entry)
        for o in r.get("orderings", []):
            orderings.append({**o, "chunk": i} if isinstance(o, dict) else {"change": o, "chunk": i})
        stalls.extend(r.get("stalls", []))
    out["failed_events"] = failed
    out["orderings"] = orderings
    # The longest waits of the whole job, as one process keeps them.
    out["stalls"] = sorted(
        stalls, key=lambda s: -float(s.get("waited_s", 0.0)) if isinstance(s, dict) else 0.0
    )[:10]
    devices = merge_devices([r["devices"] for r in reports if r.get("devices")])
    if devices is not None:
        out["devices"] = devices
    return out


#: Per device module, the counts and times that add up over chunks.
_DEVICE_SUMS = ("batches", "host_events", "device_events", "launches", "bytes_in", "bytes_out",
                "host_s", "device_s", "transfer_s", "kernel_s", "failed_launches")  # fmt: skip


def merge_devices(parts: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The ``devices`` sections of the chunks' reports as one: the device
    (and the notice of a missing one), per module its counts and times
    summed over the chunks, the device fraction over the whole job, and
    each chunk's final split (``chunk_fractions``, in chunk order)."""
    if not parts:
        return None
    modules: dict[str, dict[str, Any]] = {}
    for part in parts:
        for label, m in (part.get("modules") or {}).items():
            acc = modules.setdefault(label, {"kind": m.get("kind"), "split_mode": m.get("split_mode"),
                                             "chunk_fractions": [], **dict.fromkeys(_DEVICE_SUMS, 0)})  # fmt: skip
            for k in _DEVICE_SUMS:
                acc[k] += m.get(k, 0)
            acc["chunk_fractions"].append(m.get("device_fraction"))
    for m in modules.values():
        events = m["host_events"] + m["device_events"]
        m["device_fraction"] = m["device_events"] / events if events else 0.0
    return {
        "device": next((p.get("device") for p in parts if p.get("device")), None),
        "notice": next((p.get("notice") for p in parts if p.get("notice")), None),
        "modules": modules,
    }
