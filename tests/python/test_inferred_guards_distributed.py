"""A guarded cut written without ``after=`` (``nMuon >= 1``, then
``Muon_pt[:, 0] > 60``) across chunks: a chunk that starts from the merged
statistics of the chunks finished before it takes no probe, so the pairs
their probes inferred travel with the statistics and bind it before its
first decision. On a 2-worker cluster the job counts as in one process,
as written and as a numpy/awkward reference, and reports the pairs; the
chunks' statistics merge in chunk order whatever order they finish in.
"""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any

import awkward as ak
import numpy as np
import pytest

import evflow as ef
from evflow._job import run_process
from evflow.distributed.task import _reorder

EVENTS = 16_000
STEP = 2_000
PAIR = ["lead_muon", "one_muon"]


@pytest.fixture(scope="module")
def events(tmp_path_factory: pytest.TempPathFactory) -> tuple[ak.Array, dict[str, str]]:
    """Events with 0-3 muons (four in ten without one), in a Parquet file
    (``all``), and their halves (``first``, ``second``) in two more."""
    rng = np.random.default_rng(5)
    n_mu = rng.poisson(0.9, EVENTS).clip(0, 3)
    arr = ak.Array(
        {
            "nMuon": n_mu,
            "Muon_pt": ak.unflatten(rng.exponential(30.0, n_mu.sum()), n_mu),
            "MET_pt": rng.exponential(40.0, EVENTS),
        }
    )
    d = tmp_path_factory.mktemp("guards")
    half = EVENTS // 2
    files = {"all": arr, "first": arr[:half], "second": arr[half:]}
    for name, part in files.items():
        ak.to_parquet(part, d / f"{name}.parquet", row_group_size=STEP)  # a chunk per batch
    return arr, {name: str(d / f"{name}.parquet") for name in files}


def _process(path: str) -> ef.Process:
    """``one_muon`` (costly, loose) written before ``lead_muon`` (cheap,
    selective), which needs it and has no ``after=``: the planner would
    run ``lead_muon`` first."""
    proc = ef.Process("guarded")
    proc.source = ef.source.parquet(path, step_size=STEP)

    @proc.filter(consumes=["nMuon"])
    def one_muon(ev: ef.Events) -> np.ndarray:
        # Costly: the planner wants the selective cheap cut first.
        return np.asarray(ev.nMuon >= 1) & (np.sin(np.arange(len(ev)) * np.ones((200, 1))).sum(0) < 1e9)

    @proc.filter(consumes=["Muon_pt"])
    def lead_muon(ev: ef.Events) -> np.ndarray:
        return ak.to_numpy(ev.Muon_pt[:, 0] > 60)  # no [:, 0] without a muon

    proc.path("sel", [one_muon, lead_muon], reorderable=True)
    proc.histogram("met", "MET_pt", bins=20, range=(0, 200), after="sel")
    return proc


def _run(proc: ef.Process, stats: str | None = None) -> ef.Result:
    return run_process(proc, threads=2, events_in_flight=None, progress=False, executor="threaded",
                       on_error="fail", trace=False, raw=True, ordering_stats=stats, print_notice=False)  # fmt: skip


def _reference(arr: ak.Array) -> tuple[int, list[float]]:
    """The events the path keeps, and their MET histogram, without the framework."""
    keep = ak.to_numpy(arr.nMuon >= 1) & ak.to_numpy(ak.fill_none(ak.firsts(arr.Muon_pt), 0.0) > 60)
    counts, _ = np.histogram(ak.to_numpy(arr.MET_pt)[keep], bins=20, range=(0, 200))
    return int(keep.sum()), [float(c) for c in counts]


def _counts(result: ef.Result) -> tuple[int, list[float]]:
    return result.cutflow["sel"].passed, [float(c) for c in np.asarray(result.histograms["met"])]


def test_a_later_chunk_takes_the_inferred_guard_with_the_statistics(
    events: tuple[ak.Array, dict[str, str]],
) -> None:
    """The first half infers the pair on its probe and exports it; the
    second half, started from those statistics (no probe), runs the cut
    after its guard, also when its written order (a seeded chunk's) puts
    the cut first, and reports the pair."""
    arr, files = events
    first = _run(_process(files["first"]))
    assert first.report["inferred_after"] == {"sel": [PAIR]}
    assert first.raw is not None
    stats = first.raw["ordering_stats"]
    assert json.loads(stats)["sel"]["after"] == [PAIR]
    for seed in (None, ["lead_muon", "one_muon"]):
        proc = _process(files["second"])
        if seed is not None:
            proc = copy.copy(proc)
            assert _reorder(proc, {"sel": seed})  # the cut written first
        later = _run(proc, stats)
        assert _counts(later) == _reference(arr[EVENTS // 2 :]), seed
        order = later.cutflow["sel"].order
        assert order.index("one_muon") < order.index("lead_muon"), (seed, order)
        assert later.report["inferred_after"] == {"sel": [PAIR]}
        finals = [o for o in later.report["orderings"] if o["path"] == "sel"]
        assert "started from imported statistics" in finals[-1]["reason"]
        # Exported again: the next chunk's merge keeps it.
        assert json.loads(later.raw["ordering_stats"])["sel"]["after"] == [PAIR]


def test_a_guarded_cut_without_after_runs_on_a_cluster_as_in_one_process(
    client: Any, events: tuple[ak.Array, dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    arr, files = events
    path = files["all"]
    single = _process(path).run(threads=1)
    fixed = _process(path).run(threads=1, filter_order="fixed")
    capsys.readouterr()
    dist = _process(path).run(client=client, chunk_size=STEP)
    err = capsys.readouterr().err
    assert _counts(dist) == _counts(single) == _counts(fixed) == _reference(arr)
    assert dist.cutflow["sel"].events == single.cutflow["sel"].events == EVENTS
    for name, h in single.histograms.items():
        assert np.array_equal(h.values(flow=True), dist.histograms[name].values(flow=True)), name
    chunks = dist.report["distributed"]["chunks"]
    assert any(c["seeded_statistics"] for c in chunks), "no chunk started from the merged statistics"
    assert dist.report["inferred_after"] == single.report["inferred_after"] == {"sel": [PAIR]}
    assert "after=[('lead_muon', 'one_muon')] inferred" in dist.cutflow["sel"].why
    assert err.count("inferred") == 1  # said once, by the client
    assert "proc.path('sel', ..., after=[('lead_muon', 'one_muon')])" in err


def _stats(after: list[list[str]], sample: list[int]) -> str:
    return json.dumps(
        {
            "sel": {
                "steps": ["a", "b", "c"],
                "samples": [sample],
                "stops": [{"order": [0, 1, 2], "stops": [1, 1, 1, 1]}],
                "costs": [None, None, None],
                "after": after,
            }
        }
    )


def test_chunk_statistics_merge_in_chunk_order_whatever_the_finishing_order() -> None:
    """Chunk 1 inferred ``b`` after ``a``, chunk 2 the opposite (another
    written order): merged as chunk order gives them, ``b`` after ``a``,
    whichever finished first; samples in chunk order too."""
    from evflow.distributed.statistics import ChunkStatistics, merge

    parts = {
        0: _stats([], [1, 1]),
        1: _stats([["b", "a"]], [3, 2]),
        2: _stats([["a", "b"], ["c", "b"]], [7, 4]),
    }
    in_order = merge([parts[0], parts[1], parts[2]])
    assert in_order is not None
    assert json.loads(in_order)["sel"]["after"] == [["b", "a"], ["c", "b"]]
    assert json.loads(in_order)["sel"]["samples"] == [[1, 1], [3, 2], [7, 4]]
    for finished in itertools.permutations(parts):
        s = ChunkStatistics()
        for k in finished:
            s.add(k, parts[k])
        assert s.merged == in_order, finished
    # Before chunk 1 finished: 0 and 2, in chunk order.
    s = ChunkStatistics()
    s.add(2, parts[2])
    s.add(0, parts[0])
    assert s.merged == merge([parts[0], parts[2]])
    # A skipped chunk measured nothing.
    s.add(1, None)
    assert s.merged == merge([parts[0], parts[2]])


def test_pairs_of_the_probe_and_imported_pairs_are_reported_once() -> None:
    from evflow._guard_inference import applied, union

    stats = json.dumps({"sel": {"after": [["lead_muon@sel", "one_muon@sel"]]}, "cr": {}})
    engine = {("sel", "lead_muon"): "lead_muon@sel", ("sel", "one_muon"): "one_muon@sel"}
    assert applied(stats, engine) == {"sel": [("lead_muon", "one_muon")]}
    assert applied(None, engine) == {}
    probe = {"sel": [("lead_muon", "one_muon")]}
    assert union([probe, applied(stats, engine)]) == probe
