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
