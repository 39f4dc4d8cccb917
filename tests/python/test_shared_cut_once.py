"""A costly cut common to several paths (a selection and its systematic
variations), as docs/python.md advises it: its decision computed by a
producer, once per batch on the events some path still holds, and a thin
filter on the product on each path; a filter of its own on every path is
called once per path. Both give the paths the same events, equal to an
independent numpy selection."""

from __future__ import annotations

import awkward as ak
import numpy as np

import evflow as ef

EVENTS = 20_000
STEP = 4_000


def _run(as_producer: bool) -> tuple[ef.Result, list[int]]:
    proc = ef.Process("variations")
    proc.source = ef.source.synthetic(EVENTS, step_size=STEP, seed=5)
    computed: list[int] = []  # events the costly computation saw, per call

    def isolated(ev: ef.Events) -> np.ndarray:
        computed.append(len(ev))
        return ak.to_numpy(ak.all(ev.Muon_pfRelIso04_all < 0.25, axis=1))

    @proc.filter(consumes=["nMuon"])
    def one_muon(ev: ef.Events) -> np.ndarray:
        return ev.nMuon >= 1

    if as_producer:
        proc.producer(consumes=["Muon_pfRelIso04_all"], produces=["mu_isolated"], label="muon_isolation")(
            isolated
        )

        @proc.filter(consumes=["mu_isolated"])
        def mu_iso(ev: ef.Events) -> np.ndarray:
            return ev.mu_isolated
    else:
        mu_iso = proc.filter(consumes=["Muon_pfRelIso04_all"], label="mu_iso")(isolated)

    for name, scale in (("sr", 1.0), ("sr_up", 1.05), ("sr_down", 0.95)):
        jets = proc.filter(consumes=["Jet_pt"], label=f"two_jets_{name}")(
            lambda ev, scale=scale: ak.to_numpy(ak.sum(ev.Jet_pt * scale > 30, axis=1) >= 2)
        )
        proc.path(name, [one_muon, mu_iso, jets])
    return proc.run(threads=1), computed


def test_a_producer_decides_a_cut_common_to_several_paths_once() -> None:
    shared, once = _run(as_producer=True)
    own, per_path = _run(as_producer=False)
    src = ef.source.synthetic(EVENTS, step_size=STEP, seed=5)
    parts = [src.generate(i, s, STEP) for i, s in enumerate(range(0, EVENTS, STEP))]
    n_mu = np.concatenate([ak.to_numpy(p["nMuon"]) for p in parts])
    iso = np.concatenate([ak.to_numpy(ak.all(p["Muon_pfRelIso04_all"] < 0.25, axis=1)) for p in parts])
    jet_pt = ak.concatenate([p["Jet_pt"] for p in parts])
    for name, scale in (("sr", 1.0), ("sr_up", 1.05), ("sr_down", 0.95)):
        jets = ak.to_numpy(ak.sum(jet_pt * scale > 30, axis=1) >= 2)
        expected = int(((n_mu >= 1) & iso & jets).sum())
        assert shared.cutflow[name].passed == own.cutflow[name].passed == expected
    # Written order: each path reaches the isolation with the events of
    # one_muon. The filter decides them once per path; the producer once per
    # batch, on the events some path still held when the first path needed
    # it (every event, where another path had not run one_muon yet).
    assert len(once) == EVENTS // STEP and sum(once) <= EVENTS
    assert sum(per_path) == 3 * int((n_mu >= 1).sum()) > sum(once)
