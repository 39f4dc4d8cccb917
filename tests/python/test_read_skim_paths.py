"""``ef.distributed.read_skim`` reads the skim at a path whichever run
wrote it — a distributed run's directory or a single-process run's file —
and names a path that holds no finished skim."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

import evflow as ef


def _process(skim: Path) -> ef.Process:
    proc = ef.Process("read_skim")
    proc.source = ef.source.synthetic(3_000, step_size=1_000, seed=6)

    @proc.filter(consumes=["MET_pt"])
    def met(ev: ef.Events) -> Any:
        return ev.MET_pt > 40

    proc.path("sel", [met])
    proc.output(ef.output.parquet(str(skim), columns=["MET_pt", "Jet_pt"]), select="sel")
    return proc


def test_a_single_process_skim_reads_as_it_is(tmp_path: Path) -> None:
    skim = tmp_path / "skim.parquet"
    result = _process(skim).run(threads=1)
    table = ef.distributed.read_skim(str(skim))
    assert table.equals(pq.read_table(skim))  # type: ignore[attr-defined]
    assert table.num_rows == result.cutflow["sel"].passed > 0  # type: ignore[attr-defined]
    met = table.column("MET_pt").to_numpy()  # type: ignore[attr-defined]
    assert np.all(met > 40)


def test_a_path_without_a_finished_skim_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nothing"
    with pytest.raises(ef.MissingFileError, match=f"skim '{missing}' does not exist"):
        ef.distributed.read_skim(str(missing))
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    with pytest.raises(ef.InputError, match=f"'{unfinished}' is not a finished distributed skim"):
        ef.distributed.read_skim(str(unfinished))
    (unfinished / "_manifest.json").write_text("{")
    with pytest.raises(ef.InputError, match="is not a readable skim: its manifest"):
        ef.distributed.read_skim(str(unfinished))
