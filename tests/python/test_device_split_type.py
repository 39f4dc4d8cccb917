"""``device_split=`` of the wrong type is refused before anything runs,
naming the option and the form it takes, as a wrong string is (the native
split controller alone only said "'int' object is not an instance of
'str'")."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import evflow as ef


def _process() -> ef.Process:
    proc = ef.Process("split_type")
    proc.source = ef.source.synthetic(2_000, step_size=1_000, seed=5)

    def met2_device(ev: Any, xp: Any) -> Any:
        return xp.asarray(ev.MET_pt, dtype=xp.float64) * 2

    @proc.producer(consumes=["MET_pt"], produces=["met2"], device=met2_device)
    def met2(ev: ef.Events) -> np.ndarray:
        return np.asarray(ev.MET_pt, dtype=np.float64) * 2

    proc.histogram("met2", bins=10, range=(0, 400))
    return proc


@pytest.mark.parametrize(
    ("split", "kind"), [(35, "int"), (0.35, "float"), (None, "NoneType"), (("fixed", 35), "tuple")]
)
def test_a_device_split_that_is_not_a_string_is_named(split: Any, kind: str) -> None:
    expected = re.escape(f"device_split={split!r}: expected 'adaptive' or 'fixed:P'") + rf".*, not {kind}$"
    with pytest.raises(ef.ConfigurationError, match=expected):
        _process().run(threads=2, device="emulated", device_split=split)


def test_a_device_split_string_still_runs() -> None:
    r = _process().run(threads=2, device="emulated", device_split="fixed:35")
    assert r.report["devices"]["modules"]["met2"]["split_mode"] == "fixed:35"
    assert r.histograms["met2"].sum(flow=True) == 2_000
