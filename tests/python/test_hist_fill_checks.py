"""Histograms a new user declared wrongly are refused, not filled with a
result that depends on the batches: a ``fill=`` returning a scalar or a
list (one entry per batch, or entries no event gave), and a weighted
histogram whose ``hist=`` template counts in integers (each weight
truncated). A ``Double()`` template keeps the sums of weights (no
variances), a ``Weight()`` one both, as numpy computes them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import hist
import numpy as np
import pytest
import uproot

import evflow as ef


def _mass(path: Path) -> np.ndarray:
    return uproot.open(path)["events"]["M"].array(library="np")


def _process(path: Path, step_size: int) -> ef.Process:
    proc = ef.Process("hists")
    proc.source = ef.source.root(str(path), tree="events", step_size=step_size)
    return proc


@pytest.mark.parametrize("step_size", [100_000, 500, 97])
@pytest.mark.parametrize(
    ("fill", "what"),
    [
        (lambda ev: ev.M.mean(), r"a scalar \(0-d\)"),
        (lambda ev: np.asarray(ev.M.mean()), r"a scalar \(0-d\)"),
        (lambda ev: float(ev.M[0]), r"a scalar \(0-d\)"),
        (lambda ev: [1.0, 2.0], "a list, not an array"),
        (lambda ev: [float(x) for x in ev.M], "a list, not an array"),
    ],
)
def test_a_fill_that_returns_no_array_is_refused(
    zmumu_file: Path, step_size: int, fill: Callable[[Any], Any], what: str
) -> None:
    proc = _process(zmumu_file, step_size)
    proc.histogram("mass_mean", fill=fill, consumes=["M"], bins=10, range=(0, 200))
    with pytest.raises(ef.errors.ModuleError, match=rf"histogram 'mass_mean'.*fill= returned {what}"):
        proc.run()


def test_a_scalar_for_one_axis_of_two_is_refused(zmumu_file: Path) -> None:
    proc = _process(zmumu_file, 500)
    proc.histogram(
        "m2",
        fill=lambda ev: (ev.M, ev.M.max()),
        consumes=["M"],
        hist=hist.Hist(hist.axis.Regular(10, 0, 200), hist.axis.Regular(10, 0, 200)),
    )
    with pytest.raises(ef.errors.ModuleError, match=r"histogram 'm2'.*a scalar \(0-d\) for axis 1"):
        proc.run()


@pytest.mark.parametrize("step_size", [100_000, 97])
def test_a_fill_of_arrays_still_fills_as_numpy(zmumu_file: Path, step_size: int) -> None:
    mass = _mass(zmumu_file)
    proc = _process(zmumu_file, step_size)
    proc.histogram("half", fill=lambda ev: ev.M / 2, consumes=["M"], bins=10, range=(0, 100))
    got = proc.run().histograms["half"].values()
    np.testing.assert_array_equal(got, np.histogram(mass / 2, bins=10, range=(0, 100))[0])


@pytest.mark.parametrize("storage", [hist.storage.Int64(), hist.storage.AtomicInt64()])
@pytest.mark.parametrize("weight", ["M", True])
def test_a_weighted_histogram_with_integer_storage_is_refused(storage: Any, weight: Any) -> None:
    proc = ef.Process("hists", weight="M")
    template = hist.Hist(hist.axis.Regular(10, 0, 200), storage=storage)
    with pytest.raises(
        ef.errors.ConfigurationError, match=rf"histogram 'wm'.*{type(storage).__name__} storage"
    ):
        proc.histogram("wm", column="M", hist=template, weight=weight)
    # Unweighted, an integer storage counts the entries exactly.
    proc.histogram("m", column="M", hist=template)


@pytest.mark.parametrize("step_size", [100_000, 97])
def test_a_weighted_template_keeps_its_storage(zmumu_file: Path, step_size: int) -> None:
    mass = _mass(zmumu_file)
    weights = uproot.open(zmumu_file)["events"]["E1"].array(library="np")
    proc = _process(zmumu_file, step_size)
    proc.histogram("double", column="M", hist=hist.Hist.new.Reg(10, 0, 200).Double(), weight="E1")
    proc.histogram("weight", column="M", hist=hist.Hist.new.Reg(10, 0, 200).Weight(), weight="E1")
    result = proc.run()
    sums = np.histogram(mass, bins=10, range=(0, 200), weights=weights)[0]
    squares = np.histogram(mass, bins=10, range=(0, 200), weights=weights**2)[0]
    double = result.histograms["double"]
    np.testing.assert_allclose(double.values(), sums, rtol=1e-12)
    assert double.variances() is None  # a Double storage keeps no variances of weights
    weight = result.histograms["weight"]
    np.testing.assert_allclose(weight.values(), sums, rtol=1e-12)
    np.testing.assert_allclose(weight.variances(), squares, rtol=1e-12)
