"""``after=`` guards a cut: the adaptive ordering's probes (the first one
before the path, and those of sampled batches) run the guarded filter only
on the events its guard passed, as the path does. Before, they ran it on
every probed event: a guard like ``nJet >= 2`` before ``Jet_pt[:, 1]``
raised IndexError in the default mode, or with ``on_error="skip"`` dropped
batches silently."""

from __future__ import annotations

from pathlib import Path

import awkward as ak
import numpy as np
import pyarrow.parquet as pq
import pytest

import evflow as ef


def _events(path: Path, n: int = 60_000) -> None:
    rng = np.random.default_rng(11)
    counts = rng.integers(0, 5, n)
    pt = ak.unflatten(rng.exponential(40.0, int(counts.sum())), counts)
    met = rng.exponential(30.0, n)
    pq.write_table(
        ak.to_arrow_table(ak.zip({"Jet_pt": pt, "MET_pt": met}, depth_limit=1)),
        path,
        row_group_size=2_000,
    )


@pytest.mark.parametrize("filter_order", ["adaptive", "fixed", "hepframe"])
def test_a_guarded_cut_never_sees_events_its_guard_rejected(tmp_path: Path, filter_order: str) -> None:
    data = tmp_path / "jets.parquet"
    _events(data)
    seen_unguarded: list[int] = []
    proc = ef.Process("guarded")
    proc.source = ef.source.parquet(str(data), step_size=2_000)

    @proc.producer(consumes=["Jet_pt"], produces=["nJet"])
    def n_jet(ev: ef.Events) -> np.ndarray:
        return ak.to_numpy(ak.num(ev.Jet_pt))

    @proc.filter(consumes=["nJet"])
    def two_jets(ev: ef.Events) -> np.ndarray:
        return ev.nJet >= 2

    @proc.filter(consumes=["Jet_pt", "nJet"])
    def sublead_pt(ev: ef.Events, seen: list[int] = seen_unguarded) -> np.ndarray:
        seen.append(int(np.sum(ev.nJet < 2)))
        return ak.to_numpy(ev.Jet_pt[:, 1] > 30)  # IndexError on an unguarded event

    @proc.filter(consumes=["MET_pt"])
    def met(ev: ef.Events) -> np.ndarray:
        return ev.MET_pt > 20

    # Written worst first: the planner wants to move the cheap cuts around.
    proc.path("sr", [sublead_pt, met, two_jets], reorderable=True, after=[(sublead_pt, two_jets)])
    result = proc.run(threads=2, filter_order=filter_order)
    table = pq.read_table(data)
    pt = ak.from_arrow(table["Jet_pt"])
    njet = ak.to_numpy(ak.num(pt))
    met_pt = table["MET_pt"].to_numpy()
    sub = np.zeros(len(njet), dtype=bool)
    sub[njet >= 2] = ak.to_numpy(pt[njet >= 2][:, 1]) > 30
    expected = int(np.sum((njet >= 2) & sub & (met_pt > 20)))
    assert result.cutflow["sr"].passed == expected
    assert sum(seen_unguarded) == 0, "the guarded cut saw events its guard rejected"


def test_cutflow_answers_membership_and_histogram_edges_are_checked() -> None:
    proc = ef.Process("small")
    proc.source = ef.source.synthetic(events=100, step_size=50)

    @proc.filter(consumes=["MET_pt"])
    def met(ev: ef.Events) -> np.ndarray:
        return ev.MET_pt > 20

    proc.path("sr", [met])
    result = proc.run(threads=1)
    assert "sr" in result.cutflow and "cr" not in result.cutflow
    assert result.cutflow.keys() == ["sr"]
    assert [name for name, _ in result.cutflow.items()] == ["sr"]
    for bad in ([0, 10, 5], [0, 10, 10, 20], [5], [0, float("nan"), 1]):
        with pytest.raises(
            ef.ConfigurationError, match=r"histogram 'h': edges= must be at least two strictly"
        ):
            proc.histogram("h", column="MET_pt", edges=bad)


def test_the_cutflow_order_is_one_the_batches_ran() -> None:
    """Batches rejected early run a prefix of their order: the order shown
    is built from those prefixes, never a written order no batch ran."""
    from evflow.cutflow import representative_order

    # Three filters; no batch ran all three: two ran 2 > 1 (rejected
    # there), one ran 2 > 0.
    assert representative_order([[2, 1], [2, 1], [2, 0]], 3) == [2, 1, 0]
    # 32 of 40 batches ran 1 > 0 > 2 in full; 8 stopped after 2 > 0.
    assert representative_order([[1, 0, 2]] * 32 + [[2, 0]] * 8, 3) == [1, 0, 2]
    # Nothing ran: the written order; ties go to the filter written first.
    assert representative_order([], 3) == [0, 1, 2]
    assert representative_order([[1], [0]], 2) == [0, 1]


def test_the_reasons_of_an_order_fit_the_policy_and_the_batches(tmp_path: Path) -> None:
    data = tmp_path / "jets.parquet"
    _events(data, n=20_000)

    def run(policy: str, step: int = 1_000) -> ef.Result:
        proc = ef.Process("why")
        proc.source = ef.source.parquet(str(data), step_size=step)

        @proc.filter(consumes=["MET_pt"])
        def met(ev: ef.Events) -> np.ndarray:
            return ev.MET_pt > 20

        @proc.filter(consumes=["MET_pt"])
        def met_hi(ev: ef.Events) -> np.ndarray:
            return ev.MET_pt > 60

        proc.path("sr", [met, met_hi], reorderable=True)
        return proc.run(threads=1, filter_order=policy)

    # 2 batches: fewer than HEP-Frame's warm-up (4 batches); 20: it decided
    # after the fourth.
    kept = run("hepframe", step=10_000).cutflow["sr"].why
    assert kept.startswith("hepframe: the written order was kept (HEP-Frame"), kept
    assert run("hepframe").cutflow["sr"].why.startswith("hepframe: chosen after 4 batches: HEP-Frame")
    final = [c["reason"] for c in run("adaptive").report["orderings"] if c["reason"].startswith("in use")]
    assert final and "batches)" in final[-1] and "%)" not in final[-1].split("sampled events")[1][:40]
