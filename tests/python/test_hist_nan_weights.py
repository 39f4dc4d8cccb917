"""A NaN (or infinite) weight in a histogram's fill fails the batch with an
error naming the histogram, the weight column and the input entry, instead
of making the bin's sum NaN in the merged histogram, silently. A weight that
fills nothing (an event without objects of a jagged column) is no error."""

from __future__ import annotations

from pathlib import Path

import awkward as ak
import numpy as np
import pytest
import uproot

import evflow as ef

#: Input entries whose weight is not a finite number.
BAD = (1234, 1800)


def _mass(path: Path) -> np.ndarray:
    return uproot.open(path)["events"]["M"].array(library="np")


def _process(path: Path, bad: float, step_size: int) -> ef.Process:
    """Weights ``w`` of 1, ``bad`` at the entries ``BAD`` (found by their
    mass: a producer sees only the events it computes on)."""
    proc = ef.Process("nan_weights")
    proc.source = ef.source.root(str(path), tree="events", step_size=step_size)
    masses = _mass(path)[list(BAD)]
    assert np.sum(np.isin(_mass(path), masses)) == len(BAD)

    @proc.producer(consumes=["M"], produces=["w"])
    def w(ev: ef.Events) -> np.ndarray:
        return np.where(np.isin(ev.M, masses), bad, 1.0)

    return proc


@pytest.mark.parametrize("bad", [np.nan, np.inf])
@pytest.mark.parametrize("step_size", [100_000, 500])
def test_a_weight_that_is_not_a_number_names_histogram_column_and_entry(
    zmumu_file: Path, bad: float, step_size: int
) -> None:
    proc = _process(zmumu_file, bad, step_size)
    proc.histogram("mass", column="M", bins=10, range=(0, 200), weight="w")
    with pytest.raises(ef.ModuleError, match=r"histogram 'mass': its weight 'w' is not a finite number") as e:
        proc.run(threads=1)
    message = str(e.value)
    assert "input entry 1234" in message
    assert isinstance(e.value.__cause__, ef.ModuleOutputError)


def test_the_entry_named_is_that_of_the_selected_events(zmumu_file: Path) -> None:
    """After a selection the histogram fills fewer events: the entry named
    is still the input's."""
    proc = _process(zmumu_file, np.nan, 500)

    first = _mass(zmumu_file)[BAD[0]]

    @proc.filter(consumes=["M"])
    def late(ev: ef.Events) -> np.ndarray:
        return np.not_equal(ev.M, first)

    proc.path("late", [late])
    proc.histogram("mass", column="M", bins=10, range=(0, 200), weight="w", after="late")
    with pytest.raises(ef.ModuleError, match=r"1 of the \d+ values it fills .*input entry 1800"):
        proc.run(threads=1)


def test_a_weight_that_fills_nothing_may_be_nan(hzz_file: Path) -> None:
    """Per-event weights broadcast to jets: an event without jets fills
    nothing, its weight neither."""
    arrays = uproot.open(hzz_file)["events"].arrays(["Jet_Px", "NJet"])
    no_jets = np.flatnonzero(ak.to_numpy(arrays.NJet) == 0)
    assert len(no_jets) > 0
    proc = ef.Process("nan_unused")
    proc.source = ef.source.root(str(hzz_file), tree="events", step_size=1_000)

    @proc.producer(consumes=["NJet"], produces=["w"])
    def w(ev: ef.Events) -> np.ndarray:
        return np.where(ev.NJet == 0, np.nan, 2.0)

    proc.histogram("px", column="Jet_Px", bins=20, range=(-200, 200), weight="w")
    h = proc.run(threads=1).histograms["px"]
    want, _ = np.histogram(ak.to_numpy(ak.flatten(arrays.Jet_Px)), bins=20, range=(-200, 200))
    np.testing.assert_array_equal(h.values(), 2.0 * want)
