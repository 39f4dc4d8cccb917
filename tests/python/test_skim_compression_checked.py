"""A skim's ``compression`` that pyarrow does not write is refused when the
skim is declared, naming the skim and the value. Before, the job started
and failed at its first batch with "module 'output0' failed on batch 0
(...): ArrowException: Unsupported compression: zip", naming neither the
skim nor the option."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

import evflow as ef


@pytest.mark.parametrize("codec", ["zip", "", 5, {"MET_pt": "lzma"}])
def test_an_unknown_codec_is_refused_when_declared(tmp_path: Path, codec: object) -> None:
    skim = tmp_path / "skim.parquet"
    with pytest.raises(ef.ConfigurationError, match=rf"^Parquet output '{skim}': compression=") as err:
        ef.output.parquet(skim, columns=["MET_pt"], compression=codec)  # type: ignore[arg-type]
    assert repr(codec) in str(err.value)
    assert not skim.exists()


@pytest.mark.parametrize("codec", ["zstd", "SNAPPY", "none", None, {"MET_pt": "gzip"}])
def test_the_codecs_pyarrow_writes_are_taken(tmp_path: Path, codec: object) -> None:
    skim = tmp_path / "skim.parquet"
    proc = ef.Process("codec")
    proc.source = ef.source.synthetic(2_000, step_size=1_000)
    proc.output(ef.output.parquet(skim, columns=["MET_pt"], compression=codec))  # type: ignore[arg-type]
    assert proc.run(threads=1).outputs[str(skim)] == 2_000
    assert pq.read_table(skim).num_rows == 2_000
