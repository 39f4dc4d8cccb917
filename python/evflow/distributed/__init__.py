"""Scale-out on Dask distributed: one evflow engine per worker process, on
one machine or many.

``proc.run(processes=N)`` starts a local cluster of ``N`` worker processes;
``proc.run(client=client)`` (a ``distributed.Client``) or
``proc.run(client="tcp://host:8786")`` uses an existing cluster (a
LocalCluster, dask-jobqueue on a batch system, Dask Gateway). The input is
split into chunks of the single-process run's batches (files × entry
ranges, aligned with ROOT clusters and Parquet row groups), each chunk is
one Dask task running the evflow engine, and the results are merged in
chunk order: histograms, cut-flows and the report are bit-identical to
``proc.run()`` on one process. Skims become a directory of one Parquet part
per chunk plus ``_manifest.json``, written last. See docs/distributed.md.

Example::

    import evflow as ef

    proc = ef.Process("met")
    proc.source = ef.source.synthetic(200_000, step_size=50_000)
    proc.histogram("MET_pt", bins=50, range=(0, 200))
    result = proc.run(processes=2)                      # or client=Client(...)
    assert result.histograms["MET_pt"].sum(flow=True) == 200_000

``preview_chunks(proc, chunk_size=...)`` shows the chunks a run would start
with (no cluster needed); ``analysis_file(path)`` is a target that loads an
analysis file on the workers, always from its current contents (what
``evflow run FILE --processes N`` ships).
"""

from __future__ import annotations

from .._dist_support import preview_chunks
from .chunks import Chunk, ChunkFeed, Piece, plan_chunks
from .run import MANIFEST, run

__all__ = [
    "MANIFEST",
    "Chunk",
    "ChunkFeed",
    "Piece",
    "analysis_file",
    "plan_chunks",
    "preview_chunks",
    "read_skim",
    "run",
]


def analysis_file(path: str, process: str | None = None) -> object:
    """A target for :func:`run` that loads the analysis file ``path`` (its
    Process ``process``, a module-level ``proc``, or its only Process) here
    and on each worker, instead of pickling the analysis: its modules need
    not be picklable, and an edited file, or an edited local module it
    imports, is loaded anew by the workers of a cluster that ran it before."""
    from .._analysis_file import AnalysisFile

    return AnalysisFile(path, process)


def read_skim(directory: str) -> object:
    """The rows of a distributed skim as one ``pyarrow.Table``, parts in
    chunk order (as the manifest lists them); a skim no event reached has
    no row and its columns' types (null columns for a manifest of an
    earlier version, which has no types). A file at that path, the skim of
    a single-process run of the same analysis, is read as it is; a path
    that is neither, or a directory without a readable manifest, is an
    :class:`~evflow.errors.InputError` naming it."""
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..errors import InputError, MissingFileError
    from ..output import MANIFEST, read_skim_manifest

    if os.path.isfile(directory):
        return pq.read_table(directory)
    if not os.path.isdir(directory):
        raise MissingFileError(f"skim '{directory}' does not exist")
    manifest = os.path.join(directory, MANIFEST)
    if not os.path.isfile(manifest):
        raise InputError(
            f"'{directory}' is not a finished distributed skim: it has no '{MANIFEST}' (written last, "
            "once every chunk is in)"
        )
    skim = read_skim_manifest(directory)
    tables = [pq.read_table(p) for p in skim.parts]
    if not tables:
        if skim.schema is not None:  # the columns' types, as a single-process skim keeps them
            return skim.schema.empty_table()
        return pa.table({c: pa.array([], pa.null()) for c in skim.columns})
    try:
        return pa.concat_tables(tables, promote_options="default")  # a null column takes the others' type
    except pa.ArrowException:
        return _concat_parts(directory, skim.parts, tables)


def _concat_parts(directory: str, parts: list[str], tables: list[object]) -> object:
    """The parts of a skim whose schemas differ as one table, when they
    differ only in what no value depends on (list offsets' width,
    nullability); else an :class:`~evflow.errors.InputError` naming the
    column and the two parts."""
    import pyarrow as pa

    from .._skim_types import holds, type_text
    from ..errors import InputError

    first: pa.Schema = tables[0].schema  # type: ignore[attr-defined]
    for path, t in zip(parts, tables, strict=True):
        schema: pa.Schema = t.schema  # type: ignore[attr-defined]
        if schema.names != first.names:
            raise InputError(
                f"the parts of skim '{directory}' have different columns: {first.names} in '{parts[0]}' "
                f"but {schema.names} in '{path}'"
            )
        for f, g in zip(first, schema, strict=True):
            if not (holds(f.type, g.type) and holds(g.type, f.type)):
                raise InputError(
                    f"the parts of skim '{directory}' disagree on the type of column '{f.name}': "
                    f"{type_text(f.type)} in '{parts[0]}' but {type_text(g.type)} in '{path}' (parts "
                    "written apart, by a run that did not check their types?); read each part with "
                    "pyarrow.parquet.read_table, or run the job that wrote it again"
                )
    try:
        return pa.concat_tables([t.cast(first) for t in tables])  # type: ignore[attr-defined]
    except pa.ArrowException as e:
        raise InputError(f"the parts of skim '{directory}' cannot be read as one table: {e}") from e
