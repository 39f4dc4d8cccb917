"""Saved reports are strict JSON: non-finite numbers (``break_even_events``
is ``inf`` where offloading never pays) are written as strings, not as
``Infinity``, which strict readers refuse."""

from __future__ import annotations

import doctest
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

import evflow as ef
from evflow import _report_json


def _strict_load(text: str) -> Any:
    def refuse(name: str) -> None:
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


def test_non_finite_numbers_are_written_as_strings() -> None:
    report = {"remote": [{"break_even_events": math.inf, "x": [1.5, -math.inf, math.nan]}], "n": 3}
    text = _report_json.dumps(report, indent=2)
    back = _strict_load(text)
    assert back == {"remote": [{"break_even_events": "inf", "x": [1.5, "-inf", "nan"]}], "n": 3}
    assert float(back["remote"][0]["break_even_events"]) == math.inf


def test_result_save_writes_a_strict_report(tmp_path: Path) -> None:
    proc = ef.Process("strict")
    proc.source = ef.source.synthetic(1_000, step_size=500, seed=1)

    @proc.filter(consumes=["nMuon"])
    def one_muon(ev: ef.Events) -> np.ndarray:
        return np.asarray(ev.nMuon) >= 1

    proc.path("p", [one_muon])
    result = proc.run(threads=1)
    result.report["offload_check"] = {"break_even_events": math.inf}
    result.save(tmp_path)
    saved = _strict_load((tmp_path / "report.json").read_text())
    assert saved["offload_check"] == {"break_even_events": "inf"}


def test_the_module_examples_hold() -> None:
    failures, tried = doctest.testmod(_report_json, verbose=False)[:2]
    assert tried >= 2 and failures == 0
