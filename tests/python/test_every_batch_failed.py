"""A run whose every batch failed ends in an error with ``on_error="skip"``
too (and ``"skip-chunk"`` on Dask), naming how many failed and the first
failure, and writes no skim, as the core ``evflow run`` ends a job whose
every event failed. Before, it returned an empty result (a skim of no row
written) and ``evflow run analysis.py --on-error skip-event -q`` exited 0
without a word."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import evflow as ef

EVENTS, STEP = 4_000, 1_000


def _process(skim: Path, bad_batches: set[int] | None = None) -> ef.Process:
    """A job whose filter fails on ``bad_batches`` (every batch: ``None``)."""
    proc = ef.Process("all_fail")
    proc.source = ef.source.synthetic(EVENTS, step_size=STEP, seed=5)

    @proc.filter(consumes=["MET_pt"])
    def met(ev: ef.Events) -> Any:
        if bad_batches is None or ev.info.index in bad_batches:
            raise KeyError("MET_pt_corrected")
        return ev.MET_pt > 20

    proc.path("sel", [met])
    proc.histogram("met", column="MET_pt", bins=10, range=(0, 200), after="sel")
    proc.output(ef.output.parquet(skim, columns=["MET_pt"]), select="sel")
    return proc


def test_every_batch_failed_is_an_error(tmp_path: Path) -> None:
    skim = tmp_path / "skim.parquet"
    with pytest.raises(ef.ModuleError) as err:
        _process(skim).run(threads=2, on_error="skip")
    text = str(err.value)
    assert "every batch of the job failed" in text
    assert "4 batches failed (on_error='skip')" in text
    assert "module 'met'" in text and "KeyError" in text and "MET_pt_corrected" in text
    assert err.value.module == "met" and err.value.batch is not None
    assert not skim.exists()


def test_some_batches_failed_is_a_result(tmp_path: Path) -> None:
    skim = tmp_path / "skim.parquet"
    result = _process(skim, bad_batches={0, 2}).run(threads=2, on_error="skip")
    assert result.failed_batches == [0, 2]
    assert result.events == 2 * STEP and skim.exists()


def test_command_line_exits_with_the_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from evflow.cli import main

    analysis = tmp_path / "ana.py"
    analysis.write_text(
        "import evflow as ef\n"
        "proc = ef.Process('cli_all_fail')\n"
        f"proc.source = ef.source.synthetic({EVENTS}, step_size={STEP})\n"
        "@proc.filter(consumes=['MET_pt'])\n"
        "def met(ev):\n"
        "    return ev.MET_ptt > 20\n"
        "proc.path('sel', [met])\n"
    )
    assert main(["run", str(analysis), "--on-error", "skip-event", "-q"]) == 1
    assert "every batch of the job failed" in capsys.readouterr().err


@pytest.mark.parametrize("on_error", ["skip", "skip-chunk"])
def test_every_chunk_failed_is_an_error(tmp_path: Path, client: Any, on_error: str) -> None:
    skim = tmp_path / "skim"
    with pytest.raises(ef.ModuleError, match="every batch of the job failed") as err:
        _process(skim).run(client=client, on_error=on_error, chunk_size=2 * STEP)
    assert ("4 batches failed" if on_error == "skip" else "2 chunks left out") in str(err.value)
    assert "MET_pt_corrected" in str(err.value)
    assert not skim.exists()


def test_an_input_of_no_event_is_no_error(tmp_path: Path) -> None:
    proc = _process(tmp_path / "skim.parquet")
    proc.source = ef.source.synthetic(0, step_size=STEP)
    result = proc.run(threads=1, on_error="skip")
    assert result.events == 0 and np.sum(result.histograms["met"].values()) == 0
