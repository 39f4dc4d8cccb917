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
"""

from __future__ import annotations

from .chunks import Chunk, ChunkFeed, Piece, plan_chunks
from .run import MANIFEST, run

__all__ = ["MANIFEST", "Chunk", "ChunkFeed", "Piece", "plan_chunks", "read_skim", "run"]


def read_skim(directory: str) -> object:
    """The rows of a distributed skim as one ``pyarrow.Table``, parts in
    chunk order (as the manifest lists them); a skim no event reached has
    no row and its columns' types (null columns for a manifest of an
    earlier version, which has no types)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..output import read_skim_manifest

    skim = read_skim_manifest(directory)
    tables = [pq.read_table(p) for p in skim.parts]
    if not tables:
        if skim.schema is not None:  # the columns' types, as a single-process skim keeps them
            return skim.schema.empty_table()
        return pa.table({c: pa.array([], pa.null()) for c in skim.columns})
    return pa.concat_tables(tables)
