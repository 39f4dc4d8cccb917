"""Where batches come from: ROOT files (uproot), Parquet files (native Rust
reader, or pyarrow), and a synthetic generator.

Each source reads only the columns some module, histogram, skim or the
cut-flow weight needs, in batches of about ``step_size`` events. The engine
calls the source one batch at a time, while other batches are processed.

Example::

    proc.source = ef.source.root("Zmumu.root", tree="events", step_size=50_000)
    proc.source = ef.source.parquet(["a.parquet", "b.parquet"], step_size=100_000)
    proc.source = ef.source.synthetic(1_000_000, step_size=100_000, seed=1)

Reading is balanced against processing: ROOT and native Parquet sources read
and decode batches ahead of the engine on worker threads, and a
:class:`ReadBalancer` sets how many workers read at once and how many batches
may wait decoded, at checkpoints whose interval doubles while the setting is
stable (see docs/adl.md, "Reading balanced against processing").

The kinds of source live in their own modules (``_root``, ``_parquet``,
``_synthetic``; ``_common`` and ``_readahead`` hold what they share); this
package is their one public namespace.
"""

from ._auto import auto
from ._common import PathLike, Source
from ._parquet import ParquetSource, parquet
from ._readahead import ReadBalancer
from ._root import RootSource, root
from ._synthetic import SyntheticSource, synthetic

__all__ = [
    "ParquetSource",
    "PathLike",
    "ReadBalancer",
    "RootSource",
    "Source",
    "SyntheticSource",
    "auto",
    "parquet",
    "root",
    "synthetic",
]
