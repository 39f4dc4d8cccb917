"""The report names a filter on several paths as the cut-flow does (its
label; the path is the entry's own field), in one process and on Dask, and
every report has a ``devices`` section, ``device="none"`` included."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import evflow as ef
from evflow._report_labels import user_labels


def _two_paths(events: int = 12_000) -> ef.Process:
    """``njet`` and ``met`` sit on both paths."""
    proc = ef.Process("two_paths")
    proc.source = ef.source.synthetic(events, step_size=1000, seed=4)

    @proc.filter(consumes=["nJet"])
    def njet(ev: ef.Events) -> Any:
        return ev.nJet >= 2

    @proc.filter(consumes=["MET_pt"])
    def met(ev: ef.Events) -> Any:
        return ev.MET_pt > 30

    @proc.filter(consumes=["nMuon"])
    def nmu(ev: ef.Events) -> Any:
        return ev.nMuon >= 1

    proc.path("sel", [njet, met, nmu], reorderable=True)
    proc.path("ctl", [met, njet], reorderable=True)
    return proc


def _check_names(result: ef.Result) -> None:
    filters = {"sel": {"njet", "met", "nmu"}, "ctl": {"met", "njet"}}
    orderings = result.report["orderings"]
    assert {c["path"] for c in orderings} == {"sel", "ctl"}
    for c in orderings:
        assert set(c["order"]) == filters[c["path"]], c
        assert "@" not in c["reason"], c["reason"]
    for p in result.report["paths"]:
        assert {f["label"] for f in p["filters"]} == filters[p["name"]]
    for name, path in result.cutflow.items():
        assert set(path.order) == filters[name]
        assert set(path.keys()) == filters[name]
    # One module entry per filter, its occurrences per path inside.
    modules = {m["label"]: m for m in result.report["modules"] if m["kind"] == "filter"}
    assert sorted(modules) == ["met", "njet", "nmu"]
    assert {name: set(m["paths"]) for name, m in modules.items()} == {
        "met": {"sel", "ctl"},
        "njet": {"sel", "ctl"},
        "nmu": {"sel"},
    }


def test_a_filter_on_two_paths_has_one_name_in_report_and_cutflow() -> None:
    _check_names(_two_paths().run(threads=2))


def test_a_filter_on_two_paths_has_one_name_in_a_distributed_report(client: Any) -> None:
    _check_names(_two_paths().run(client=client, chunk_size=3000))


def test_a_reason_names_the_filters_by_label_and_leaves_longer_labels() -> None:
    report = {
        "orderings": [
            {
                "path": "sel",
                "at_event": 3,
                "order": ["njet@sel", "njet2"],
                "reason": "[njet@sel 0.5, njet2 0.7]",
            },
            {"path": "ctl", "at_event": 3, "order": ["njet@ctl"], "reason": "njet@ctl; xnjet@ctl"},
        ],
        "paths": [{"name": "sel", "filters": [{"label": "njet@sel"}, {"label": "njet2"}]}],
    }
    engine = {("sel", "njet"): "njet@sel", ("ctl", "njet"): "njet@ctl", ("sel", "njet2"): "njet2"}
    out = user_labels(report, engine)
    assert out["orderings"][0] == {
        "path": "sel",
        "at_event": 3,
        "order": ["njet", "njet2"],
        "reason": "[njet 0.5, njet2 0.7]",
    }
    assert out["orderings"][1]["reason"] == "njet; xnjet@ctl"
    assert [f["label"] for f in out["paths"][0]["filters"]] == ["njet", "njet2"]


def _device_process() -> ef.Process:
    proc = ef.Process("dev")
    proc.source = ef.source.synthetic(3000, step_size=1000, seed=5)

    @proc.producer(consumes=["MET_pt"], produces=["met2"], device=lambda ev, xp: ev.MET_pt * 2)
    def met2(ev: ef.Events) -> Any:
        return ev.MET_pt * 2

    proc.histogram("met2", bins=20, range=(0, 400))
    return proc


def test_device_none_reports_a_host_only_devices_section() -> None:
    result = _device_process().run(threads=2, device="none")
    assert result.report["devices"] == {"device": None, "notice": None, "modules": {}}
    emulated = _device_process().run(threads=2, device="emulated")
    assert set(result.report["devices"]) == set(emulated.report["devices"])
    assert np.array_equal(result.histograms["met2"].values(), emulated.histograms["met2"].values())


@pytest.mark.parametrize("device", ["none", "auto", "emulated"])
def test_a_job_without_device_modules_reports_host_only(device: str) -> None:
    result = _two_paths(2000).run(threads=1, device=device)
    assert result.report["devices"] == {"device": None, "notice": None, "modules": {}}
    assert not re.search(r"device module", result.summary())
