"""An ``after=`` / ``select=`` naming an unknown path, or none, is refused
naming the histogram, skim or module as it was declared, not the engine's
label for it (``hist.NAME``, ``outputN``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import evflow as ef


def _process() -> ef.Process:
    proc = ef.Process("unknown_path")
    proc.source = ef.source.synthetic(100, step_size=100)

    @proc.filter(consumes=["nJet"])
    def njet(ev: ef.Events) -> Any:
        return ev.nJet > 1

    proc.path("sel", [njet])
    return proc


def test_a_histogram_after_an_unknown_path_is_named() -> None:
    proc = _process()
    proc.histogram("met", column="MET_pt", bins=4, range=(0, 100), after="sr")
    with pytest.raises(
        ef.ConfigurationError, match=r"^histogram 'met' follows unknown path 'sr' \(paths: sel\)$"
    ):
        proc.run(threads=1)


def test_a_skim_selecting_an_unknown_path_is_named(tmp_path: Path) -> None:
    proc = _process()
    out = tmp_path / "skim.parquet"
    proc.output(ef.output.parquet(str(out), columns=["MET_pt"]), select="sr")
    with pytest.raises(ef.ConfigurationError, match=rf"^skim '{out}' follows unknown path 'sr'"):
        proc.run(threads=1)
    assert not out.exists()


def test_an_analyzer_after_no_path_is_named() -> None:
    proc = _process()

    @proc.analyzer(consumes=["MET_pt"], after=[])
    def look(ev: ef.Events) -> None:
        pass

    with pytest.raises(ef.ConfigurationError, match=r"^module 'look': after= / select= lists no path$"):
        proc.run(threads=1)


def test_a_branch_missing_in_a_later_root_file_names_what_reads_it(hzz_file: Path, zmumu_file: Path) -> None:
    """The second file lacks the branch: the error names that file and the
    histogram that reads the branch, as for the first file."""
    proc = ef.Process("later_file")
    proc.source = ef.source.root([hzz_file, zmumu_file], tree="events")
    proc.histogram("nmuon", column="NMuon", bins=5, range=(0, 5))
    with pytest.raises(ef.MissingBranchError) as e:
        proc.run(threads=1)
    assert f"branch 'NMuon' not found in tree 'events' of file '{zmumu_file}'" in str(e.value)
    assert "histogram 'nmuon' reads 'NMuon', which is neither a product" in str(e.value)
