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
    import base64
    import json
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    with open(os.path.join(directory, MANIFEST)) as f:
        manifest = json.load(f)
    tables = [pq.read_table(os.path.join(directory, p["file"])) for p in manifest["parts"] if p["file"]]
    if not tables:
        if "schema" in manifest:  # the columns' types, as a single-process skim keeps them
            schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(manifest["schema"])))
            return schema.empty_table()
        return pa.table({c: pa.array([], pa.null()) for c in manifest["columns"]})
    return pa.concat_tables(tables)
