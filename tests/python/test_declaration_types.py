"""A weight or skim columns of the wrong type are refused when set, named,
not as a TypeError ('int' object is not iterable) when the job starts."""

from __future__ import annotations

import pytest

import evflow as ef


def test_a_process_weight_that_is_not_a_column_name_is_refused_when_set() -> None:
    proc = ef.Process("w")
    with pytest.raises(
        ef.ConfigurationError, match=r"^process 'w': weight names a column \(a string\), not 5$"
    ):
        proc.weight = 5  # type: ignore[assignment]
    with pytest.raises(
        ef.ConfigurationError, match=r"weight names a column \(a string\), not \['genWeight'\]"
    ):
        ef.Process("w", weight=["genWeight"])  # type: ignore[arg-type]
    proc.weight = "genWeight"
    assert proc.weight == "genWeight"
    proc.weight = None
    assert proc.weight is None


def test_skim_columns_and_path_of_the_wrong_type_are_refused() -> None:
    with pytest.raises(
        ef.ConfigurationError,
        match=r"^Parquet output 'skim.parquet': columns= is a name or a list of names, not 5$",
    ):
        ef.output.parquet("skim.parquet", columns=5)  # type: ignore[arg-type]
    with pytest.raises(ef.ConfigurationError, match=r"^a Parquet output's path is a file name, not 3$"):
        ef.output.parquet(3, columns=["MET_pt"])  # type: ignore[arg-type]
    assert ef.output.parquet("skim.parquet", columns=(c for c in ["MET_pt"])).columns == ["MET_pt"]


def test_after_and_select_that_name_no_path_are_refused_when_declared() -> None:
    """``after=3`` failed with "TypeError: 'int' object is not iterable" when
    the job started; it is refused when declared, naming what it belongs to."""
    proc = ef.Process("after")
    proc.source = ef.source.synthetic(100, step_size=100)
    with pytest.raises(
        ef.ConfigurationError,
        match=r"^after= of histogram 'met' must be a name or a list of names \(strings\), not 3$",
    ):
        proc.histogram("met", column="MET_pt", bins=4, range=(0, 100), after=3)  # type: ignore[arg-type]
    with pytest.raises(
        ef.ConfigurationError, match=r"^select= of skim 'skim.parquet' must be a name or a list"
    ):
        proc.output(ef.output.parquet("skim.parquet", columns=["MET_pt"]), select=3)  # type: ignore[arg-type]
    with pytest.raises(ef.ConfigurationError, match=r"^after of 'look' must be a name or a list of names"):

        @proc.analyzer(consumes=["MET_pt"], after=3)  # type: ignore[arg-type]
        def look(ev: ef.Events) -> None:
            pass

    with pytest.raises(ef.ConfigurationError, match=r"^consumes of 'cut' must be a name or a list of names"):

        @proc.filter(consumes=5)  # type: ignore[arg-type]
        def cut(ev: ef.Events) -> None:
            pass

    assert proc.histogram("met", column="MET_pt", bins=4, range=(0, 100), after=("sr",)).after == ["sr"]
