"""``report["modules"]`` has one entry per filter label, as the core
``evflow run`` report has for a filter on several paths, with each path's
occurrence inside (``paths``); a distributed run merges it to the same
section as one process."""

from __future__ import annotations

import threading
from typing import Any

import evflow as ef
from evflow.distributed.merge import merge_reports

SUMS = ("calls", "run_s", "wait_s", "queue_s", "failures")


class Calls:
    """Counts the calls of a module's function (from any thread)."""

    def __init__(self) -> None:
        self.n = 0
        self._lock = threading.Lock()

    def add(self) -> None:
        with self._lock:
            self.n += 1


def _two_paths(calls: dict[str, Calls] | None = None) -> ef.Process:
    """``njet`` and ``met`` sit on both paths; ``nmu`` on one."""
    count = calls if calls is not None else {}
    proc = ef.Process("modules_by_label")
    proc.source = ef.source.synthetic(12_000, step_size=1000, seed=4)

    @proc.filter(consumes=["nJet"])
    def njet(ev: ef.Events) -> Any:
        if "njet" in count:
            count["njet"].add()
        return ev.nJet >= 2

    @proc.filter(consumes=["MET_pt"])
    def met(ev: ef.Events) -> Any:
        if "met" in count:
            count["met"].add()
        return ev.MET_pt > 30

    @proc.filter(consumes=["nMuon"])
    def nmu(ev: ef.Events) -> Any:
        return ev.nMuon >= 1

    proc.path("sel", [njet, met, nmu], reorderable=True)
    proc.path("ctl", [met, njet], reorderable=True)
    proc.histogram("MET_pt", bins=10, range=(0, 200), after="sel")
    return proc


def _section(report: dict[str, Any]) -> dict[str, Any]:
    """The deterministic part of ``modules``: per label its kind,
    concurrency, calls and failures, and per path the same counts."""
    return {
        m["label"]: (
            m["kind"],
            m["concurrency"],
            m["calls"],
            m["failures"],
            {p: (own["calls"], own["failures"]) for p, own in (m.get("paths") or {}).items()},
        )
        for m in report["modules"]
    }


def test_a_filter_on_two_paths_is_one_module_entry_with_its_paths_inside() -> None:
    calls = {"njet": Calls(), "met": Calls()}
    # Fixed order: no sampled subsample calls the functions beside the engine's calls.
    report = _two_paths(calls).run(threads=2, filter_order="fixed").report
    filters = {m["label"]: m for m in report["modules"] if m["kind"] == "filter"}
    assert sorted(filters) == ["met", "njet", "nmu"]
    assert not any("@" in m["label"] for m in report["modules"])
    for label in ("njet", "met"):
        m = filters[label]
        assert set(m["paths"]) == {"sel", "ctl"}
        # The entry's calls are the function's calls, summed over the paths.
        assert m["calls"] == calls[label].n
        for k in SUMS:
            assert m[k] == sum(own[k] for own in m["paths"].values()), (label, k)
        assert all(own["calls"] > 0 for own in m["paths"].values())
    assert set(filters["nmu"]["paths"]) == {"sel"}
    assert filters["nmu"]["paths"]["sel"]["calls"] == filters["nmu"]["calls"]


def test_a_distributed_report_has_the_modules_section_of_one_process(client: Any) -> None:
    single = _two_paths().run(threads=1, filter_order="fixed").report
    merged = _two_paths().run(client=client, chunk_size=3000, filter_order="fixed").report
    assert _section(merged) == _section(single)
    assert {"njet", "met", "nmu", "hist.MET_pt"} <= set(_section(single))


def test_merging_sums_each_paths_occurrence_over_chunks() -> None:
    def chunk(sel: int, ctl: int) -> dict[str, Any]:
        paths = {
            p: {"calls": n, "run_s": 0.5 * n, "wait_s": 0.0, "queue_s": 0.0, "failures": 0}
            for p, n in (("sel", sel), ("ctl", ctl))
        }
        return {
            "events": 2,
            "modules": [
                {
                    "label": "njet",
                    "kind": "filter",
                    "concurrency": "shared",
                    "calls": sel + ctl,
                    "run_s": 0.5 * (sel + ctl),
                    "wait_s": 0.0,
                    "queue_s": 0.0,
                    "failures": 0,
                    "paths": paths,
                }
            ],
        }

    out = merge_reports([chunk(2, 1), chunk(3, 0)], [0, 2], [0, 1])
    (m,) = out["modules"]
    assert m["calls"] == 6 and m["run_s"] == 3.0
    assert m["paths"]["sel"]["calls"] == 5 and m["paths"]["ctl"]["calls"] == 1
    assert m["paths"]["sel"]["run_s"] == 2.5
