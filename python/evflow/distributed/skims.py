"""The skim directories of a distributed run: where the parts go, the
cleanup of an earlier or failed run, and the manifest written last."""

from __future__ import annotations

import base64
import contextlib
import json
import os
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError, EvflowError
from ..output import MANIFEST, PART, is_skim_directory

if TYPE_CHECKING:
    from .._process import Process


def skim_dir(path: str) -> str:
    """Where a distributed run writes the parts of the skim at ``path``:
    there, or, when ``path`` is a file (a single-process run's skim), in a
    directory beside it that replaces the file when the job succeeded (a
    failed job leaves the file as it was)."""
    if os.path.isfile(path):
        d, name = os.path.split(path)
        return os.path.join(d, f".{name}.evflow-partial-dir-{os.getpid()}")
    return path


def prepare_skim_dir(path: str) -> None:
    if os.path.isfile(path):
        raise ConfigurationError(
            f"skim '{path}' is a file; a distributed run writes a skim as a directory of parts "
            "(one per chunk) and a manifest: remove the file or choose another path"
        )
    if os.path.isdir(path) and not is_skim_directory(path):
        raise ConfigurationError(
            f"skim '{path}' is a directory with other files than a skim's parts and manifest: "
            "choose another path"
        )
    os.makedirs(path, exist_ok=True)
    for name in os.listdir(path):  # parts of an earlier run: only evflow's own files
        if PART.match(name) or name == MANIFEST:
            os.remove(os.path.join(path, name))


def input_types(source: Any, columns: list[str], declared: dict[str, Any] | None = None) -> bytes:
    """A skim's columns' types when no chunk told them (an input without
    events: no chunk ran), as a single-process run has them: a branch's
    from the input (``Source.empty_batch``, or ``declared`` when its files
    disagree), null for a product."""
    import pyarrow as pa

    from ..output import ParquetOutput

    fields = []
    for c in columns:
        if declared and c in declared:
            fields.append(pa.field(c, declared[c]))
            continue
        try:
            batch = source.empty_batch([c], None)
        except (EvflowError, KeyError, OSError, ValueError):
            batch = None  # not a branch of the input: a product
        kind = pa.null() if batch is None else ParquetOutput._arrow(batch.columns[c]).type
        fields.append(pa.field(c, kind))
    return bytes(pa.schema(fields).serialize().to_pybytes())


def finish_skim(
    path: str,
    proc: Process,
    columns: list[str],
    parts: list[dict[str, Any]],
    schema: bytes | None,
    stage: str | None = None,
) -> int:
    """Gives the parts of the run ``stage`` (written under their staged
    names, see :func:`~evflow.distributed.task.staged_name`) their final
    names, widens them to the skim's types, writes the manifest and removes
    every other file of a skim's naming: the staged parts of chunks left
    out (an interrupted run's, one not merged), temporary files of killed
    tasks, parts of an earlier run. The directory then holds exactly the
    parts the manifest lists. Returns the skim's rows."""
    from .task import staged_name

    rows = sum(p["rows"] for p in parts)
    if stage is not None:
        for p in parts:
            if p.get("file"):
                os.replace(
                    os.path.join(path, staged_name(str(p["file"]), stage)), os.path.join(path, p["file"])
                )
    if schema is not None:
        _widen_parts(path, parts, schema)
    manifest: dict[str, Any] = {
        "process": proc.name,
        "columns": columns,
        "rows": rows,
        "parts": parts,
    }
    if schema is not None:
        # The columns' types (an Arrow IPC schema, base64): a skim no event
        # reaches has no part to tell them.
        manifest["schema"] = base64.b64encode(schema).decode("ascii")
    tmp = os.path.join(path, f".{MANIFEST}.partial-{os.getpid()}")
    with open(tmp, "w") as f:
        json.dump(manifest, f, indent=1)
    os.replace(tmp, os.path.join(path, MANIFEST))
    remove_strays(path, {str(p["file"]) for p in parts if p.get("file")})
    return rows


def remove_strays(path: str, keep: set[str]) -> None:
    """Removes the files of ``path`` named as a skim's parts (final or
    temporary) but not in ``keep``: what the manifest does not list is no
    part of the skim, and no reader of the directory may take it for one."""
    for name in os.listdir(path):
        if PART.match(name) and name not in keep:
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(path, name))


def _widen_parts(path: str, parts: list[dict[str, Any]], schema: bytes) -> None:
    """Rewrites the parts whose column types are narrower than the skim's
    (``schema``, the types holding every part's values exactly): the parts
    are then read as one table, with the types one process would write."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from .._skim_types import widen_file

    final = pa.ipc.read_schema(pa.py_buffer(schema))
    for p in parts:
        if not p.get("file") or not p.get("rows"):
            continue
        part = os.path.join(path, str(p["file"]))
        have = pq.read_schema(part).remove_metadata()
        target = pa.schema([have.field(f.name).with_type(final.field(f.name).type) for f in have])
        if target != have and not any(pa.types.is_null(f.type) for f in target):
            tmp = os.path.join(path, f".{p['file']}.evflow-partial-{os.getpid()}-w")
            try:
                widen_file(part, target, tmp)
            except (
                ValueError,
                TypeError,
                NotImplementedError,
            ) as e:  # pyarrow's ArrowInvalid is a ValueError
                raise ConfigurationError(
                    f"skim '{_skim_name(path)}': the part of chunk {p.get('chunk')} ({p['file']}) cannot be "
                    f"rewritten with the skim's column types ({_changed(have, target)}): {e}"
                ) from e


def _skim_name(directory: str) -> str:
    """The skim's path as given for the directory its parts are written in
    (the directory itself, or the file it replaces, :func:`skim_dir`)."""
    d, name = os.path.split(directory)
    if name.startswith(".") and ".evflow-partial-dir-" in name:
        return os.path.join(d, name[1:].rsplit(".evflow-partial-dir-", 1)[0])
    return directory


def _changed(have: Any, target: Any) -> str:
    """The columns whose types differ between two schemas (nullability shown)."""
    return ", ".join(
        f"column '{f.name}' {f.type} as {target.field(f.name).type}"
        for f in have
        if f.type != target.field(f.name).type
    )
