"""One pass for many analyses: a process with several reorderable paths
(a selection and its systematic variations), histograms of each and a skim
asks its source once for the union of the columns they read, and each
batch is read once; the histograms equal those of one process per
variation and an independent numpy computation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import awkward as ak
import numpy as np
import pyarrow.parquet as pq

import evflow as ef

EVENTS = 23_456  # not a multiple of the step: the last batch is short
STEP = 5_000
VARIATIONS = {"nominal": 1.0, "jes_up": 1.05, "jes_down": 0.95}


def _generated() -> dict[str, Any]:
    rng = np.random.default_rng(7)
    n_jet = rng.poisson(3.0, EVENTS)
    n_mu = rng.poisson(1.2, EVENTS)
    return {
        "nMuon": n_mu.astype(np.int32),
        "Jet_pt": ak.unflatten(rng.exponential(40, n_jet.sum()) + 15, n_jet),
        "Muon_pt": ak.unflatten(rng.exponential(25, n_mu.sum()) + 3, n_mu),
        "MET_pt": rng.exponential(35, EVENTS),
        "Electron_pt": ak.unflatten(rng.exponential(20, 2 * EVENTS), np.full(EVENTS, 2)),
    }


class Counting(ef.source.Source):
    """The generated events, counting what the job asks for."""

    def __init__(self) -> None:
        self.columns = _generated()
        self.readers: list[list[str]] = []
        self.batches_read = 0

    def check(self, columns: Sequence[str]) -> None:
        unknown = sorted(set(columns) - set(self.columns))
        if unknown:
            raise ef.InputError(f"{self.describe()} has no column {unknown[0]!r}")

    def reader(self, columns: Sequence[str], weight: str | None) -> Any:
        self.readers.append(sorted(columns))
        source, start = self, [0]

        class Reader:
            def next_batch(self) -> ef.BatchData | None:
                a = start[0]
                if a >= EVENTS:
                    return None
                b = min(a + STEP, EVENTS)
                start[0] = b
                source.batches_read += 1
                cols = {c: source.columns[c][a:b] for c in columns}
                return ef.BatchData(cols, b - a, file="generated", entry_start=a)

        return Reader()

    def describe(self) -> str:
        return f"{EVENTS} generated events"

    def total_events(self) -> int:
        return EVENTS


def _process(source: Counting, variations: Sequence[str], skim: str | None) -> ef.Process:
    proc = ef.Process("variations")
    proc.source = source

    @proc.filter(consumes=["nMuon"])
    def one_muon(ev: ef.Events) -> np.ndarray:
        return ev.nMuon >= 1

    @proc.filter(consumes=["MET_pt"])
    def met(ev: ef.Events) -> np.ndarray:
        return ev.MET_pt > 20

    for name in variations:
        scale = VARIATIONS[name]
        proc.producer(consumes=["Jet_pt"], produces=[f"ht_{name}"], label=f"jets_{name}")(
            lambda ev, scale=scale: ak.to_numpy(ak.sum(ev.Jet_pt * scale, axis=1))
        )
        cut = proc.filter(consumes=[f"ht_{name}"], label=f"ht_cut_{name}")(
            lambda ev, name=name: ev[f"ht_{name}"] > 100
        )
        proc.path(name, [cut, met, one_muon], reorderable=True)
        proc.histogram(f"ht_{name}", bins=20, range=(0, 600), after=name)
    if skim is not None:
        proc.output(ef.output.parquet(skim, columns=["MET_pt", "Muon_pt"]), select="nominal")
    return proc


def test_many_analyses_read_each_batch_once(tmp_path: Any) -> None:
    source = Counting()
    skim = str(tmp_path / "skim.parquet")
    one = _process(source, list(VARIATIONS), skim).run(threads=2)
    assert source.readers == [["Jet_pt", "MET_pt", "Muon_pt", "nMuon"]]  # never Electron_pt
    assert source.batches_read == -(-EVENTS // STEP)

    cols = source.columns
    base = (cols["nMuon"] >= 1) & (cols["MET_pt"] > 20)
    for name, scale in VARIATIONS.items():
        ht = ak.to_numpy(ak.sum(cols["Jet_pt"] * scale, axis=1))
        sel = base & (ht > 100)
        assert one.cutflow[name].passed == int(sel.sum())
        expected = np.histogram(ht[sel], bins=20, range=(0, 600))[0]
        assert np.array_equal(one.histograms[f"ht_{name}"].values(), expected)
        alone = _process(Counting(), [name], None).run(threads=2)
        assert np.array_equal(
            alone.histograms[f"ht_{name}"].values(flow=True), one.histograms[f"ht_{name}"].values(flow=True)
        )
        if name == "nominal":
            assert np.array_equal(pq.read_table(skim)["MET_pt"].to_numpy(), cols["MET_pt"][sel])
