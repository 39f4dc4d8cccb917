"""``on_error="skip"``: a batch on which a module fails contributes nothing
to any histogram, cut-flow or skim, whichever end-path modules ran on it
before or after the failure; checked against plain numpy/awkward on the
input without that batch's events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import awkward as ak
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import evflow as ef
from conftest import without_rows
from evflow._ordered import Commit

STEP = 1_000
#: row groups of the input file: one batch each at ``step_size=STEP``
GROUPS = 6
#: (batch, entries) that fail: in a histogram's fill, in a user analyzer
FILL_FAILS = 1
ANALYZER_FAILS = 4


@pytest.fixture(scope="module")
def events_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("skip") / "events.parquet"
    writer = None
    for i in range(GROUPS):
        cols = ef.source.synthetic(0).generate(i, i * STEP, STEP)
        table = pa.Table.from_arrays(
            [ak.to_arrow(v, extensionarray=False) for v in cols.values()], names=list(cols)
        )
        writer = writer or pq.ParquetWriter(path, table.schema)
        writer.write_table(table, row_group_size=STEP)
    assert writer is not None
    writer.close()
    return str(path)


def _analysis(path: str, skim: str) -> ef.Process:
    """A cut, a weighted histogram of the selection, a histogram of every
    event whose fill fails on one batch, a user analyzer that fails on
    another, and a skim of the selection."""
    proc = ef.Process("skip", weight="genWeight")
    proc.source = ef.source.parquet(path, step_size=STEP)

    @proc.analyzer(consumes=["nMuon"])
    def audit(ev: ef.Events) -> None:
        if ev.info.index == ANALYZER_FAILS:
            raise RuntimeError("bad analyzer batch")

    @proc.filter(consumes=["MET_pt"])
    def met_cut(ev: ef.Events) -> np.ndarray:
        return ev.MET_pt > 10

    def jets(ev: ef.Events) -> Any:
        if ev.info.index == FILL_FAILS:
            raise ValueError("bad fill batch")
        return ev.Jet_pt

    proc.path("sel", [met_cut])
    proc.histogram("met", column="MET_pt", bins=50, range=(0, 200), after="sel", weight=True)
    proc.histogram("jet_pt", fill=jets, consumes=["Jet_pt"], bins=40, range=(0, 200))
    proc.histogram("nmuon", column="nMuon", bins=8, range=(0, 8), after="sel")
    proc.output(ef.output.parquet(skim, columns=["event", "MET_pt", "Jet_pt"]), select="sel")
    return proc


def _reference(path: str) -> dict[str, Any]:
    """numpy/awkward on the file without the failed batches' rows."""
    failed = (FILL_FAILS, ANALYZER_FAILS)
    ev = without_rows(ak.from_parquet(path), [(b * STEP, (b + 1) * STEP) for b in failed])
    met = ak.to_numpy(ev.MET_pt)
    sel = met > 10
    w = ak.to_numpy(ev.genWeight).astype(np.float64)
    return {
        "events": len(ev),
        "passed": int(sel.sum()),
        "met": np.histogram(met[sel], bins=50, range=(0, 200), weights=w[sel])[0],
        "jet_pt": np.histogram(ak.to_numpy(ak.flatten(ev.Jet_pt)), bins=40, range=(0, 200))[0],
        "nmuon": np.histogram(ak.to_numpy(ev.nMuon)[sel], bins=8, range=(0, 8))[0],
        "event": ak.to_numpy(ev.event)[sel],
        "jets": ev.Jet_pt[sel],
    }


def check_against_reference(r: ef.Result, ref: dict[str, Any], skim: Any) -> None:
    assert sorted(r.failed_batches) == sorted((FILL_FAILS, ANALYZER_FAILS))
    assert r.events == ref["events"] == r.cutflow["sel"].events
    assert r.cutflow["sel"].passed == ref["passed"]
    assert np.allclose(r.histograms["met"].values(), ref["met"], rtol=1e-12, atol=0)
    assert np.array_equal(r.histograms["jet_pt"].values(), ref["jet_pt"])
    assert np.array_equal(r.histograms["nmuon"].values(), ref["nmuon"])
    # The skim: row for row the selected events of the batches that succeeded.
    assert skim.num_rows == ref["passed"]
    assert np.array_equal(skim.column("event").to_numpy(), ref["event"])
    assert skim.column("Jet_pt").to_pylist() == ak.to_list(ref["jets"])


@pytest.mark.parametrize(
    "options",
    [
        {"threads": 1, "executor": "sequential"},
        {"threads": 1},
        {"threads": 3, "events_in_flight": 6},
    ],
)
def test_skipped_batch_contributes_nothing(events_file: str, tmp_path: Path, options: dict[str, Any]) -> None:
    skim = tmp_path / "skim.parquet"
    r = _analysis(events_file, str(skim)).run(on_error="skip", **options)
    table = pq.read_table(skim)  # complete and valid
    assert r.outputs[str(skim)] == table.num_rows
    assert pq.ParquetFile(skim).metadata.num_rows == table.num_rows
    check_against_reference(r, _reference(events_file), table)
    # The summary says which batches were left out, and why.
    summary = r.summary()
    assert f"{len(r.failed_batches)} batches failed and were left out" in summary, summary
    for f in r.report["failed_events"]:
        assert f["message"] in summary


def test_commit_holds_parts_until_every_end_module_ran() -> None:
    """The batch-level bookkeeping alone: parts of a batch reach their
    accumulators only once every end module ran on it; a failed batch's
    parts, also those handed in after the failure, never do."""
    got: dict[str, list[tuple[int, Any]]] = {"a": [], "b": []}
    commit = Commit()
    a = commit.ordered(lambda i, p: got["a"].append((i, p)))
    b = commit.ordered(lambda i, p: got["b"].append((i, p)))
    commit.end_module()  # an analyzer
    commit.add(a, 0, "a0")
    commit.add(b, 1, "b1")
    commit.add(a, 1, "a1")
    commit.add(None, 1, None)
    # Batch 0 is held; batch 1, committed, waits for it in the accumulators.
    assert got == {"a": [], "b": []} and commit.held == 1
    commit.skip(0)  # batch 0 failed after 'a' ran on it
    commit.add(b, 0, "b0")  # an end module still running on the failed batch
    commit.add(None, 0, None)
    assert got == {"a": [(1, "a1")], "b": [(1, "b1")]} and commit.held == 0
    commit.add(a, 2, "a2")  # batch 2 never finishes
    commit.finish()
    assert got == {"a": [(1, "a1")], "b": [(1, "b1")]}
