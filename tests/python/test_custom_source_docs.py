"""The guide's custom source runs as written, with the public names it
uses (``ef.source.Source``, ``ef.BatchData``), and fills what numpy
counts; the name the guide gave before (``evflow._runtime.BatchData``)
still works. Before, the guide imported the private ``evflow._runtime``
and the ``Source`` docstring listed a ``columns`` method that does not
exist."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import evflow as ef
from conftest import ROOT


def _example() -> str:
    guide = (ROOT / "docs" / "python.md").read_text()
    return guide.split("#### Your own source", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]


def _run_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    code = _example()
    assert "_runtime" not in code
    monkeypatch.chdir(tmp_path)
    scope: dict[str, object] = {"__name__": "__main__"}
    exec(compile(code, "<custom source example>", "exec"), scope)
    return scope


def test_the_guides_custom_source_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scope = _run_example(tmp_path, monkeypatch)
    result = scope["result"]
    assert isinstance(result, ef.Result)
    assert result.events == 10_000
    want, _ = np.histogram(np.arange(10_000, dtype=np.float64), bins=10, range=(0, 10_000))
    np.testing.assert_array_equal(result.histograms["x"].values(), want)


def test_the_custom_source_refuses_an_unknown_column(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The example's source in a job that reads a column it lacks: its own
    ``check`` names it, before anything runs."""
    scope = _run_example(tmp_path, monkeypatch)
    proc = ef.Process("unknown")
    proc.source = scope["Ramp"](100)  # type: ignore[operator]
    proc.histogram("y", bins=10, range=(0, 1))
    with pytest.raises(ef.InputError, match=r"ramp of 100 events has no column 'y'"):
        proc.run()


def test_batch_data_is_public_and_the_old_name_still_works() -> None:
    from evflow import _runtime

    assert ef.BatchData is _runtime.BatchData
    assert "BatchData" in ef.__all__
    assert ef.source.Source.__doc__ is not None and "columns`" not in ef.source.Source.__doc__
    for method in ("check", "reader", "describe", "total_events"):
        assert f":meth:`{method}`" in ef.source.Source.__doc__
    batch = ef.BatchData({"w": np.array([1.0, 2.0])}, 2, file="f", weight="w")
    assert batch.weight_total == 3.0 and batch.where == "file 'f', entries 0-1"


def test_a_source_without_describe_is_refused_when_made() -> None:
    """``describe`` is part of what a source must provide: a subclass that
    lacks it is refused when instantiated, naming the method, instead of
    failing in the middle of a job's first message."""

    class NoName(ef.source.Source):
        step_size = 10
        max_events = None

        def check(self, columns: Any) -> None:
            pass

        def reader(self, columns: Any, weight: Any) -> Any:
            return None

    with pytest.raises(TypeError, match="describe"):
        NoName()  # type: ignore[abstract]
