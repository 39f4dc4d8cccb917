"""The code examples of the documentation run as written: the quick start
of docs/python.md and the examples in the package's docstrings (with the
real data files' folder for their input paths)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

import evflow as ef
import evflow.distributed
from conftest import ROOT, data_file


def _docstring_example(doc: str) -> str:
    """The indented block after the docstring's ``Example::`` (or ``Quick start::``)."""
    match = re.search(r"(?:Example|Quick start)::\n\n((?:[ \t]+.*\n|\n)+)", doc)
    assert match is not None, "no example in the docstring"
    return textwrap.dedent(match.group(1))


def _run(code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    zmumu = data_file("uproot-Zmumu.root")
    code = re.sub(r"(\.\./shared/data/hep/)?(uproot-)?Zmumu\.root", str(zmumu).replace("\\", "/"), code)
    monkeypatch.chdir(tmp_path)  # skims and plots go there
    scope: dict[str, object] = {"__name__": "__main__"}
    exec(compile(code, "<example>", "exec"), scope)
    return scope


@pytest.mark.parametrize("where", ["evflow", "evflow.Process"])
def test_docstring_examples_run(where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = ef.__doc__ if where == "evflow" else ef.Process.__doc__
    assert doc is not None
    code = _docstring_example(doc)
    if where == "evflow.Process":
        code = "import evflow as ef\n" + code
    scope = _run(code, tmp_path, monkeypatch)
    result = scope["result"]
    assert isinstance(result, ef.Result)
    assert result.events == 2304
    assert 0 < result.cutflow["selection"].passed < 2304


def test_distributed_docstring_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("distributed")
    assert evflow.distributed.__doc__ is not None
    scope = _run(_docstring_example(evflow.distributed.__doc__), tmp_path, monkeypatch)
    assert scope["result"].events == 200_000  # type: ignore[attr-defined]


def test_python_guide_quick_start_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    guide = (ROOT / "docs" / "python.md").read_text()
    code = guide.split("## Quick start", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    scope = _run(code, tmp_path, monkeypatch)
    result = scope["result"]
    assert isinstance(result, ef.Result)
    assert result.cutflow["selection"].passed == result.histograms["mass"].sum(flow=True)
    assert (tmp_path / "zmumu_skim.parquet").exists() and (tmp_path / "plots" / "mass.png").exists()


def test_python_guide_histogram_example_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The example of the guide's Histograms section runs as written (its
    columns are the synthetic source's), and fills what numpy counts."""
    import numpy as np

    guide = (ROOT / "docs" / "python.md").read_text()
    code = guide.split("## Histograms", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    scope: dict[str, object] = {"__name__": "__main__"}
    exec(compile(code, "<histograms example>", "exec"), scope)
    result = scope["result"]
    assert isinstance(result, ef.Result)
    source = ef.source.synthetic(20_000, step_size=5_000)
    batches = [source.generate(i, 5_000 * i, 5_000) for i in range(4)]
    n_jets = sum(int(np.sum(b["nJet"])) for b in batches)
    assert result.histograms["jet_pt"].sum(flow=True) == n_jets
    sr = sum(int(np.sum((b["nMuon"] >= 2) & (b["nJet"] >= 1))) for b in batches)
    assert result.cutflow["sr"].passed == sr == result.histograms["ht"].sum(flow=True)
