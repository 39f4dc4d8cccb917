"""An ``after=`` pair of a path that names something other than one of the
path's filters is refused when the path is declared, the error saying
which side is wrong, what it is instead (a mistyped label, a filter left
off the path, a producer, not a label at all) and the path's filters."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import evflow as ef


def _process() -> tuple[ef.Process, Any, Any]:
    proc = ef.Process("after")

    @proc.filter(consumes=["nMuon"])
    def two_muons(ev: ef.Events) -> np.ndarray:
        return ev.nMuon >= 2

    @proc.filter(consumes=["MET_pt"])
    def met(ev: ef.Events) -> np.ndarray:
        return ev.MET_pt > 30

    @proc.filter(consumes=["nJet"])
    def jets(ev: ef.Events) -> np.ndarray:
        return ev.nJet >= 2

    @proc.producer(consumes=["MET_pt"], produces=["met2"])
    def met_squared(ev: ef.Events) -> np.ndarray:
        return ev.MET_pt**2

    return proc, two_muons, met


@pytest.mark.parametrize(
    ("after", "message"),
    [
        (
            [("met", "two_muon")],
            "path 'sel': after=('met', 'two_muon'): no filter of the path is labelled 'two_muon' "
            "(did you mean 'two_muons'?); its filters are two_muons, met",
        ),
        (
            [("zzz", "met")],
            "path 'sel': after=('zzz', 'met'): no filter of the path is labelled 'zzz'; "
            "its filters are two_muons, met",
        ),
        (
            [("met", "jets")],
            "path 'sel': after=('met', 'jets'): 'jets' is a filter of the process but not on this "
            "path (list it in the path's filters); its filters are two_muons, met",
        ),
        (
            [("met", "met_squared")],
            "path 'sel': after=('met', 'met_squared'): 'met_squared' is a producer, not a filter of "
            "the path; its filters are two_muons, met",
        ),
        ([("met", 3)], "path 'sel': after=('met', 3): 3 is neither a filter nor a filter's label"),
    ],
)
def test_a_pair_naming_no_filter_of_the_path_is_refused_named(after: Any, message: str) -> None:
    proc, two_muons, met = _process()
    with pytest.raises(ef.ConfigurationError) as caught:
        proc.path("sel", [two_muons, met], reorderable=True, after=after)
    assert str(caught.value) == message
    assert "sel" not in proc.paths


def test_pairs_of_filters_or_labels_are_kept_as_labels() -> None:
    proc, two_muons, met = _process()
    path = proc.path("sel", [two_muons, met], reorderable=True, after=[(met, "two_muons")])
    assert path.after == [("met", "two_muons")]
