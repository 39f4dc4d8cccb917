"""A weighted histogram's plot says sums of weights, not entries: its
legend, y axis (1D) and colour bar (2D)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import hist
import pytest

import evflow as ef
import evflow.plot as plot


def _axes(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    figures: list[Any] = []
    figure = plot._figure
    monkeypatch.setattr(plot, "_figure", lambda: figures.append(figure()) or figures[-1])
    return figures


def test_a_weighted_run_plots_sums_of_weights(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    proc = ef.Process("weighted", weight="genWeight")
    proc.source = ef.source.synthetic(2_000, step_size=1_000)
    proc.histogram("met_w", column="MET_pt", bins=10, range=(0, 200), weight=True)
    proc.histogram("met", column="MET_pt", bins=10, range=(0, 200))
    proc.histogram(
        "met_njet_w",
        column=["MET_pt", "nJet"],
        hist=hist.Hist.new.Reg(4, 0, 200).Reg(4, 0, 8).Weight(),
        weight=True,
    )
    result = proc.run(threads=1)
    figures = _axes(monkeypatch)
    result.plot(tmp_path)
    (_, weighted), (_, plain), (fig2, _ax2) = figures
    total = result.histograms["met_w"].values().sum()
    assert weighted.get_legend().get_texts()[0].get_text() == f"met_w: sum of weights {total:.6g}"
    assert weighted.get_ylabel() == "Sum of weights / 20"
    count = result.histograms["met"].values().sum()
    assert plain.get_legend().get_texts()[0].get_text() == f"met: {count:.6g} entries"
    assert plain.get_ylabel() == "Entries / 20"
    assert fig2.axes[1].get_ylabel() == "Sum of weights"
