"""The cut-flow's ``cumulative`` column under batches that ran different
orders (adaptive warm-up, ``hepframe`` levels run at once): a row is exact
(``cumulative_exact``) when every batch counted the events passing exactly
the filters of the rows up to it, and otherwise the least upper bound the
batches' counts give, marked ``~`` in the table. Either way the column
never rises from a row to the next. Before, it was each filter's own
``passed`` over the path's events, which rose where a later row's filter
had run first on some batches.

Checked against the cumulative counts numpy computes from every event's
decisions: on seeded random batches that run random orders (steps in
sequence or together, finishing in any order), and on real jobs.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import awkward as ak
import numpy as np
import pytest
import uproot

import evflow as ef
from evflow.cutflow import CutFlow, build

Record = tuple[int, int, int, int, int, int, float, float]


def _run_batch(
    batch: int, decisions: np.ndarray, groups: list[list[int]], rng: random.Random
) -> tuple[list[Record], int]:
    """What the engine records of one batch on a path whose steps run in
    ``groups`` (each group's steps read the path at once and narrow it in a
    random order, as ``Batch::narrow`` does); returns the records and the
    events the path accepted."""
    sel = np.ones(len(decisions), dtype=bool)
    done = 0
    records: list[Record] = []
    for group in groups:
        if not sel.any():
            break  # a filter that kept no event rejected the batch: the path stops
        read, position = sel.copy(), done
        for step in rng.sample(group, len(group)):
            seen, passed = int(read.sum()), int((read & decisions[:, step]).sum())
            records.append((batch, 0, step, position, seen, passed, float(seen), float(passed)))
            sel &= decisions[:, step]
            done += 1
    return records, int(sel.sum())


def _random_job(seed: int) -> tuple[list[np.ndarray], list[Record], list[tuple[int, int, float]], list[Any]]:
    rng = random.Random(seed)
    gen = np.random.default_rng(seed)
    n_steps = rng.randint(2, 5)
    rates = gen.uniform(0.2, 0.95, n_steps)
    decisions, records, batches, finals = [], [], [], []
    for b in range(rng.randint(1, 12)):
        n = rng.choice([0, 1, 7, 50, 200])
        # Correlated decisions: a shared latent value per event.
        latent = gen.uniform(size=(n, 1))
        d = (0.5 * latent + 0.5 * gen.uniform(size=(n, n_steps))) < rates
        order = rng.sample(range(n_steps), n_steps)
        groups: list[list[int]] = []
        for step in order:  # sometimes run with the previous step, at once
            if groups and rng.random() < 0.3:
                groups[-1].append(step)
            else:
                groups.append([step])
        recs, accepted = _run_batch(b, d, groups, rng)
        decisions.append(d)
        records += recs
        batches.append((b, n, float(n)))
        finals.append((b, [(accepted, float(accepted))]))
    return decisions, records, batches, finals


@pytest.mark.parametrize("seed", range(60))
def test_cumulative_matches_numpy_on_random_orders(seed: int) -> None:
    decisions, records, batches, finals = _random_job(seed)
    n_steps = decisions[0].shape[1]
    names = [f"f{i}" for i in range(n_steps)]
    flow = build([("p", names, True)], records, batches, finals, [], False, "hepframe")
    path = flow["p"]
    every = np.concatenate(decisions)
    events = len(every)
    passing = np.ones(events, dtype=bool)
    previous = 1.0
    for step in path.shown():
        passing &= every[:, names.index(step.filter)]
        want = passing.sum() / events if events else 1.0
        if step.cumulative_exact:
            assert step.cumulative == pytest.approx(want, abs=1e-12), (seed, step.filter)
        else:
            assert step.cumulative >= want - 1e-12, (seed, step.filter)
        assert step.cumulative <= previous + 1e-12, (seed, "the column rose")
        previous = step.cumulative
    # The last row is the path's accepted events, always known.
    assert path.shown()[-1].cumulative_exact
    assert path.shown()[-1].cumulative == pytest.approx(path.efficiency)


def test_rows_are_exact_where_every_batch_counted_them() -> None:
    """Two batches ran a > b > c, one b > a > c: the row ``a`` alone is not
    known on the third (it never counted the events passing ``a`` alone),
    the rows ``a, b`` and ``a, b, c`` are."""
    records = [
        (0, 0, 0, 0, 100, 60, 100.0, 60.0),
        (0, 0, 1, 1, 60, 30, 60.0, 30.0),
        (0, 0, 2, 2, 30, 10, 30.0, 10.0),
        (1, 0, 0, 0, 100, 50, 100.0, 50.0),
        (1, 0, 1, 1, 50, 20, 50.0, 20.0),
        (1, 0, 2, 2, 20, 5, 20.0, 5.0),
        (2, 0, 1, 0, 100, 40, 100.0, 40.0),
        (2, 0, 0, 1, 40, 25, 40.0, 25.0),
        (2, 0, 2, 2, 25, 8, 25.0, 8.0),
    ]
    batches = [(b, 100, 100.0) for b in range(3)]
    finals = [(0, [(10, 10.0)]), (1, [(5, 5.0)]), (2, [(8, 8.0)])]
    flow = build([("p", ["a", "b", "c"], True)], records, batches, finals, [], False, "adaptive")
    path = flow["p"]
    assert path.order == ["a", "b", "c"]
    shown = [(s.filter, s.cumulative, s.cumulative_exact) for s in path.shown()]
    # Row a: 60 + 50 + at most 85 on batch 2: the 25 passing b and a, and the 60 that b rejected.
    assert shown == [("a", 195 / 300, False), ("b", 75 / 300, True), ("c", 23 / 300, True)]
    table = flow.table()
    assert "~65.00%" in table and "~ not exact" in table
    assert " 25.00%" in table
    saved = CutFlow.from_dict(flow.to_dict())
    assert [s.cumulative_exact for s in saved["p"].shown()] == [False, True, True]


def test_a_count_of_zero_is_exact_for_every_row_after_it() -> None:
    """A batch whose path kept no event after ``b`` knows that no event
    passes any set of filters holding ``b``."""
    records = [
        (0, 0, 0, 0, 10, 6, 10.0, 6.0),
        (0, 0, 1, 1, 6, 3, 6.0, 3.0),
        (1, 0, 1, 0, 10, 0, 10.0, 0.0),
    ]
    batches = [(0, 10, 10.0), (1, 10, 10.0)]
    finals = [(0, [(3, 3.0)]), (1, [(0, 0.0)])]
    flow = build([("p", ["a", "b"], True)], records, batches, finals, [], False, "adaptive")
    a, b = flow["p"].shown()
    assert (a.filter, a.cumulative_exact) == ("a", False)
    assert (b.filter, b.cumulative, b.cumulative_exact) == ("b", 3 / 20, True)


def _hzz_decisions(path: Path) -> dict[str, np.ndarray]:
    t = uproot.open(path)["events"].arrays(["NJet", "NMuon", "MET_px", "MET_py", "Jet_Px"])
    met = np.hypot(ak.to_numpy(t.MET_px), ak.to_numpy(t.MET_py))
    ht = ak.to_numpy(ak.sum(np.abs(t.Jet_Px), axis=1))
    return {
        "jets": ak.to_numpy(t.NJet) >= 1,
        "muons": ak.to_numpy(t.NMuon) >= 1,
        "met": met > 20,
        "ht": ht > 30,
    }


@pytest.mark.parametrize("filter_order", ["hepframe", "adaptive", "fixed"])
def test_cumulative_of_a_real_job_matches_numpy(hzz_file: Path, filter_order: str) -> None:
    proc = ef.Process("cumulative")
    proc.source = ef.source.root(str(hzz_file), tree="events", step_size=100)

    @proc.filter(consumes=["NJet"])
    def jets(ev: ef.Events) -> np.ndarray:
        return ev.NJet >= 1

    @proc.filter(consumes=["NMuon"])
    def muons(ev: ef.Events) -> np.ndarray:
        return ev.NMuon >= 1

    @proc.filter(consumes=["MET_px", "MET_py"])
    def met(ev: ef.Events) -> np.ndarray:
        return np.hypot(ev.MET_px, ev.MET_py) > 20

    @proc.filter(consumes=["Jet_Px"])
    def ht(ev: ef.Events) -> np.ndarray:
        return ak.to_numpy(ak.sum(np.abs(ev.Jet_Px), axis=1)) > 30

    proc.path("sel", [ht, met, jets, muons], reorderable=True)
    result = proc.run(threads=2, filter_order=filter_order)
    decisions = _hzz_decisions(hzz_file)
    path = result.cutflow["sel"]
    passing = np.ones(path.events, dtype=bool)
    previous = 1.0
    for step in path.shown():
        passing &= decisions[step.filter]
        want = passing.sum() / path.events
        if step.cumulative_exact:
            assert step.cumulative == want, step.filter
        else:
            assert step.cumulative >= want, step.filter
        assert step.cumulative <= previous
        previous = step.cumulative
    if filter_order == "fixed":
        assert all(s.cumulative_exact for s in path.steps)


def test_a_cut_flow_saved_before_the_flag_loads_flagged_where_orders_may_differ() -> None:
    """A saved cut-flow without ``cumulative_exact``: rows of paths whose
    batches all ran one order (not reorderable, ``fixed``) are exact, those
    of ``adaptive`` and ``hepframe`` paths are not said to be."""

    def saved(policy: str, reorderable: bool) -> dict[str, Any]:
        step = {"filter": "a", "seen": 10, "passed": 5, "weighted_seen": 10.0, "weighted_passed": 5.0}
        return {
            "events": 10,
            "passed": 5,
            "weighted_events": 10.0,
            "weighted_passed": 5.0,
            "reorderable": reorderable,
            "order": ["a"],
            "policy": policy,
            "filters": [{**step, "cumulative": 0.5}],
        }

    flow = CutFlow.from_dict(
        {
            "written": saved("written", False),
            "fixed": saved("fixed", True),
            "adaptive": saved("adaptive", True),
            "hepframe": saved("hepframe", True),
        }
    )
    exact = {p.path: p["a"].cumulative_exact for p in flow}
    assert exact == {"written": True, "fixed": True, "adaptive": False, "hepframe": False}
    assert "~50.00%" in flow.table()
