"""The process API on the synthetic source: on-demand producers, narrowing
filters, several paths, analyzers, determinism across threads and executors."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import awkward as ak
import numpy as np
import pyarrow.parquet as pq
import pytest

import evflow as ef


def _process(events: int = 20_000, step: int = 1_500, skim: Path | None = None) -> tuple[ef.Process, dict]:
    calls: dict[str, int] = {"lead": 0, "seen_by_lead": 0}
    proc = ef.Process("synthetic", weight="genWeight")
    proc.source = ef.source.synthetic(events, step_size=step, seed=7)

    @proc.producer(consumes=["Muon_pt"], produces=["lead_pt", "n_mu"])
    def lead(ev):
        calls["lead"] += 1
        calls["seen_by_lead"] += len(ev)
        return {"lead_pt": ak.fill_none(ak.max(ev.Muon_pt, axis=1), 0.0), "n_mu": ak.num(ev.Muon_pt)}

    @proc.filter(consumes=["n_mu"])
    def two_muons(ev):
        return ev.n_mu >= 2

    @proc.filter(consumes=["lead_pt"])
    def hard(ev):
        return ev.lead_pt > 30

    @proc.filter(consumes=["MET_pt"])
    def low_met(ev):
        return ev.MET_pt < 40

    @proc.filter(consumes=["nJet"])
    def jets(ev):
        return ev.nJet >= 3

    proc.path("dimuon", [two_muons, hard, low_met], reorderable=True)
    proc.path("multijet", [jets, low_met])  # low_met on two paths
    proc.histogram("lead_pt", bins=50, range=(0, 200), after="dimuon", weight=True)
    proc.histogram("MET_pt", bins=40, range=(0, 200), after=["dimuon", "multijet"])
    proc.histogram("Jet_pt", bins=40, range=(0, 400))
    if skim is not None:
        proc.output(ef.output.parquet(skim, columns=["event", "lead_pt", "Muon_pt"]), select="dimuon")
    return proc, calls


def _reference(events: int = 20_000, step: int = 1_500) -> dict[str, np.ndarray]:
    src = ef.source.synthetic(events, step_size=step, seed=7)
    parts = [src.generate(i, s, min(step, events - s)) for i, s in enumerate(range(0, events, step))]
    cols = {k: ak.concatenate([p[k] for p in parts]) for k in parts[0]}
    lead = ak.to_numpy(ak.fill_none(ak.max(cols["Muon_pt"], axis=1), 0.0))
    n_mu = ak.to_numpy(ak.num(cols["Muon_pt"]))
    met = ak.to_numpy(cols["MET_pt"])
    dimuon = (n_mu >= 2) & (lead > 30) & (met < 40)
    multijet = (ak.to_numpy(cols["nJet"]) >= 3) & (met < 40)
    return {"lead": lead, "met": met, "dimuon": dimuon, "multijet": multijet, "cols": cols}


def test_paths_histograms_and_skim(tmp_path: Path) -> None:
    skim = tmp_path / "out" / "skim.parquet"
    proc, _ = _process(skim=skim)
    r = proc.run(threads=2)
    ref = _reference()
    assert r.cutflow["dimuon"].passed == ref["dimuon"].sum()
    assert r.cutflow["multijet"].passed == ref["multijet"].sum()
    assert r.cutflow["multijet"]["low_met"].passed == ref["multijet"].sum()
    w = ak.to_numpy(ref["cols"]["genWeight"]).astype(np.float64)
    assert r.cutflow["dimuon"].weighted_passed == pytest.approx(w[ref["dimuon"]].sum(), rel=1e-9)
    either = ref["dimuon"] | ref["multijet"]
    h = r.histograms["MET_pt"]
    assert h.sum() == ((ref["met"][either] >= 0) & (ref["met"][either] < 200)).sum()
    np.testing.assert_allclose(
        r.histograms["lead_pt"].values(),
        np.histogram(ref["lead"][ref["dimuon"]], bins=50, range=(0, 200), weights=w[ref["dimuon"]])[0],
        rtol=1e-9,
    )
    t = pq.read_table(skim)
    np.testing.assert_array_equal(t.column("event").to_numpy(), np.flatnonzero(ref["dimuon"]) + 1)
    assert ak.all(ak.from_arrow(t.column("Muon_pt")) == ref["cols"]["Muon_pt"][ref["dimuon"]])
    # the filter on two paths is one module entry, its paths inside
    modules = {m["label"]: m for m in r.report["modules"]}
    assert {"low_met", "two_muons", "hist.MET_pt", "output0"} <= set(modules)
    assert set(modules["low_met"]["paths"]) == {"dimuon", "multijet"}


def test_deterministic_across_threads_and_executors(tmp_path: Path) -> None:
    results = []
    for threads, executor in [(1, "sequential"), (1, "threaded"), (2, "threaded"), (3, "threaded")]:
        skim = tmp_path / f"skim{threads}{executor}.parquet"
        proc, _ = _process(skim=skim)
        # The written order: a reorderable path's per-filter counts are those
        # of the order that ran, which the adaptive default chooses from
        # timings (accepted events and histograms never depend on it).
        r = proc.run(threads=threads, executor=executor, events_in_flight=threads + 3, filter_order="fixed")
        results.append((r, skim.read_bytes()))
    base, base_bytes = results[0]
    for r, data in results[1:]:
        assert r.cutflow.to_dict() == base.cutflow.to_dict()
        for name, h in base.histograms.items():
            assert np.array_equal(r.histograms[name].values(), h.values())
            assert np.array_equal(r.histograms[name].variances(), h.variances())
        assert data == base_bytes


def test_histograms_of_many_batches_keep_their_variances() -> None:
    """An unweighted histogram summed over many batches is still an
    unweighted fill: its variances are its counts (error bars); a weighted
    one's are the sums of the squared weights."""
    src = ef.source.synthetic(5_000, step_size=500, seed=4)
    proc = ef.Process("variances", weight="genWeight")
    proc.source = src
    proc.histogram("MET_pt", bins=20, range=(0, 200), weight=True)
    plain = ef.Process("variances")
    plain.source = src
    plain.histogram("MET_pt", bins=20, range=(0, 200))
    weighted, unweighted = proc.run(threads=2), plain.run(threads=2)
    parts = [src.generate(i, s, 500) for i, s in enumerate(range(0, 5_000, 500))]
    met = np.concatenate([ak.to_numpy(p["MET_pt"]) for p in parts])
    w = np.concatenate([ak.to_numpy(p["genWeight"]) for p in parts]).astype(np.float64)
    counts = np.histogram(met, bins=20, range=(0, 200))[0]
    h = unweighted.histograms["MET_pt"]
    assert h.variances() is not None, "an unweighted histogram of 10 batches lost its variances"
    assert np.array_equal(h.values(), counts) and np.array_equal(h.variances(), counts)
    np.testing.assert_allclose(
        weighted.histograms["MET_pt"].variances(),
        np.histogram(met, bins=20, range=(0, 200), weights=w * w)[0],
        rtol=1e-9,
    )


def test_producers_run_on_demand_on_the_narrowed_batch() -> None:
    proc = ef.Process("lazy")
    proc.source = ef.source.synthetic(5_000, step_size=1_000)
    seen = {"expensive": 0, "unused": 0}

    @proc.producer(consumes=["MET_pt"], produces=["x"])
    def expensive(ev):
        seen["expensive"] += len(ev)
        return ev.MET_pt * 2

    @proc.producer(consumes=["MET_pt"], produces=["y"])
    def unused(ev):
        seen["unused"] += len(ev)
        return ev.MET_pt

    @proc.filter(consumes=["nJet"])
    def cheap(ev):
        return ev.nJet >= 4

    @proc.filter(consumes=["x"])
    def uses_x(ev):
        return ev.x > 10

    proc.path("p", [cheap, uses_x])
    r = proc.run(threads=2)
    assert seen["unused"] == 0
    assert seen["expensive"] == r.cutflow["p"]["cheap"].passed < 5_000
    assert r.cutflow["p"]["uses_x"].seen == r.cutflow["p"]["cheap"].passed


def test_analyzer_sees_accepted_events_and_zip() -> None:
    proc = ef.Process("an")
    proc.source = ef.source.synthetic(4_000, step_size=1_000)
    got: list[int] = []

    @proc.filter(consumes=["nMuon"])
    def two(ev):
        return ev.nMuon >= 2

    @proc.analyzer(consumes=["Muon_pt", "Muon_eta", "nMuon"], after="p")
    def collect(ev):
        mu = ev.zip("Muon")
        assert set(mu.fields) == {"pt", "eta"}
        assert ak.all(ak.num(mu) >= 2)
        got.append(len(ev))

    proc.path("p", [two])
    r = proc.run(threads=2)
    assert sum(got) == r.cutflow["p"].passed


def test_empty_selection_and_all_rejected(tmp_path: Path) -> None:
    proc = ef.Process("none")
    proc.source = ef.source.synthetic(3_000, step_size=1_000)

    @proc.filter(consumes=["MET_pt"])
    def nothing(ev):
        return ev.MET_pt < 0

    proc.path("p", [nothing])
    proc.histogram("MET_pt", bins=10, range=(0, 100), after="p")
    out = proc.output(ef.output.parquet(tmp_path / "empty.parquet", columns=["MET_pt"]), select="p")
    r = proc.run(threads=2)
    assert r.cutflow["p"].passed == 0
    assert r.histograms["MET_pt"].sum() == 0
    assert pq.read_table(out.path).num_rows == 0


def test_skim_no_event_reaches_keeps_the_column_types(tmp_path: Path) -> None:
    """An empty skim has the columns' types (those of the same skim with
    events in it), where some batch told them: branches, and products
    computed for the path's filters."""
    proc = ef.Process("none")
    proc.source = ef.source.synthetic(3_000, step_size=1_000)

    @proc.producer(consumes=["MET_pt"], produces=["met2"])
    def met2(ev):
        return ev.MET_pt * 2

    @proc.filter(consumes=["met2"])
    def nothing(ev):
        return ev.met2 < 0

    proc.path("p", [nothing])
    columns = ["met2", "Jet_pt", "nJet", "genWeight"]
    empty = proc.output(ef.output.parquet(tmp_path / "empty.parquet", columns=columns), select="p")
    full = proc.output(ef.output.parquet(tmp_path / "full.parquet", columns=columns))
    r = proc.run(threads=2)
    assert r.outputs == {empty.path: 0, full.path: 3_000}
    assert pq.read_table(empty.path).num_rows == 0
    assert pq.read_schema(empty.path).types == pq.read_schema(full.path).types
    assert str(ak.from_parquet(empty.path).type) == "0 * " + str(ak.from_parquet(full.path).type.content)


@pytest.mark.parametrize("kind", ["synthetic", "root", "parquet", "parquet-native"])
def test_an_input_without_events_gives_a_skim_with_the_branch_types(tmp_path: Path, kind: str) -> None:
    """An input of no event (an empty file, a selection upstream that kept
    nothing) gives an empty skim whose branch columns have the types of the
    same skim of an input with events, not untyped (null) ones; no module
    is called on it and every count is zero."""
    import pyarrow as pa
    import uproot

    def source(events: int) -> ef.source.Source:
        if kind == "synthetic":
            return ef.source.synthetic(events, step_size=1_000)
        met = np.arange(events, dtype=np.float32) * 20
        jets = ak.values_astype(ak.Array([[1.5, 2.5]] * events if events else [[1.5]])[:events], np.float32)
        path = tmp_path / f"in{events}.{'root' if kind == 'root' else 'parquet'}"
        if kind == "root":
            with uproot.recreate(path) as f:
                f["Events"] = {"MET_pt": met, "Jet_pt": jets}
            return ef.source.root(path)
        table = pa.table({"MET_pt": pa.array(met), "Jet_pt": ak.to_arrow(jets, extensionarray=False)})
        pq.write_table(table, path)
        return ef.source.parquet(path, engine="native" if kind == "parquet-native" else "pyarrow")

    calls: list[int] = []

    def skim(events: int) -> tuple[ef.Result, str]:
        proc = ef.Process("empty-input")
        proc.source = source(events)

        @proc.filter(consumes=["MET_pt"])
        def cut(ev):
            calls.append(len(ev))
            return ev.MET_pt >= 0

        proc.path("p", [cut])
        proc.histogram("MET_pt", bins=10, range=(0, 100), after="p")
        out = proc.output(
            ef.output.parquet(tmp_path / f"skim{events}.parquet", columns=["MET_pt", "Jet_pt"]), select="p"
        )
        return proc.run(threads=2), out.path

    r, empty = skim(0)
    assert calls == []
    assert r.events == 0 and r.outputs == {empty: 0}
    assert r.cutflow["p"].passed == 0 and r.histograms["MET_pt"].sum() == 0
    _, full = skim(3)
    assert pq.read_table(full).num_rows == 3
    assert pq.read_schema(empty).types == pq.read_schema(full).types
    assert all(t != pa.null() for t in pq.read_schema(empty).types)


def test_progress_function_gets_the_totals_last(tmp_path: Path) -> None:
    """A progress function is called while the job runs and, last, with the
    batches and events of the whole job, however short the job."""
    proc, _ = _process(events=3_000, step=1_000, skim=tmp_path / "skim.parquet")
    calls: list[tuple[int, int]] = []
    r = proc.run(threads=2, progress=lambda batches, events: calls.append((batches, events)))
    assert calls and calls[-1] == (3, 3_000) == (r.report["batches"], r.events)
    assert calls == sorted(calls)

    def broken(batches: int, events: int) -> None:
        raise RuntimeError("progress display failed")

    proc, _ = _process(events=3_000, step=1_000, skim=tmp_path / "skim2.parquet")
    with pytest.raises(RuntimeError, match="progress display failed"):
        proc.run(threads=2, progress=broken)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["skim.parquet"]  # no partial skim left


def test_progress_bar_of_a_source_without_events(capsys: pytest.CaptureFixture[str]) -> None:
    """A source known to hold no event shows a complete bar, not the line
    of a source of unknown size."""
    proc = ef.Process("empty")
    proc.source = ef.source.synthetic(0)
    proc.histogram("MET_pt", bins=10, range=(0, 100))
    assert proc.run(threads=1, progress=True).events == 0
    err = capsys.readouterr().err
    assert "100.0%  0/0 events" in err and "batches" not in err


def test_concurrency_options_and_cutflow_repr() -> None:
    proc = ef.Process("conc")
    proc.source = ef.source.synthetic(3_000, step_size=500)

    @proc.filter(consumes=["nJet"], concurrency="serial")
    def a(ev):
        return ev.nJet > 1

    @proc.filter(consumes=["nJet"], concurrency="exclusive", resources=["legacy"])
    def b(ev):
        return ev.nJet > 2

    proc.path("p", [a, b])
    proc.path("q", [a])
    r = proc.run(threads=2)
    conc = {m["label"]: m["concurrency"] for m in r.report["modules"]}
    assert conc["a"] == "exclusive(evflow.filter.a)"
    assert conc["b"] == "exclusive(legacy)"
    text = str(r.cutflow)
    assert "path 'p'" in text and "all events" in text and "accepted" in text
    assert r.cutflow.to_dict()["q"]["passed"] == r.cutflow["q"].passed


def test_configuration_errors() -> None:
    proc = ef.Process("bad")
    with pytest.raises(ef.ConfigurationError, match="no source"):
        proc.run()
    for wrong in ("events.root", ef.source.root):
        proc.source = wrong  # type: ignore[assignment]
        with pytest.raises(ef.ConfigurationError, match=r"proc.source is a (str|function), not a source"):
            proc.run()
    proc.source = ef.source.synthetic(10)

    @proc.filter(consumes=["nJet"])
    def f(ev):
        return ev.nJet > 0

    with pytest.raises(ef.ConfigurationError, match="on no path"):
        proc.run()
    proc.path("p", [f])
    with pytest.raises(ef.ConfigurationError, match="used more than once"):
        proc.path("p", [f])
    with pytest.raises(ef.ConfigurationError, match="not a filter"):
        proc.path("q", ["nope"])
    for bad in (
        {"bins": 5},
        {"bins": 5, "range": (0, 5), "edges": [0, 1, 5]},
        {"edges": [0, 1, 5], "hist": object()},
        {"bins": 5, "range": (0, 5), "column": "nJet", "fill": lambda ev: ev.nJet, "consumes": ["nJet"]},
    ):
        with pytest.raises(ef.ConfigurationError, match=r"histogram 'h': give (bins=|column=)"):
            proc.histogram("h", **bad)
    assert "h" not in proc.histograms
    proc.histogram("nJet", bins=5, range=(0, 5), after="missing")
    with pytest.raises(ef.ConfigurationError, match="unknown path 'missing'"):
        proc.run()

    proc.output(ef.output.parquet("skim.parquet", columns=["nJet"]), select="p")
    with pytest.raises(ef.ConfigurationError, match=r"two outputs write '\./skim\.parquet'"):
        proc.output(ef.output.parquet("./skim.parquet", columns=["MET_pt"]))

    weighted = ef.Process("weighted", weight="w")
    weighted.source = ef.source.synthetic(10)
    weighted.producer(consumes=["genWeight"], produces=["w"], label="sf")(lambda ev: 2 * ev.genWeight)
    weighted.histogram("MET_pt", bins=5, range=(0, 100), weight=True)
    with pytest.raises(ef.ConfigurationError, match=r"process weight 'w' is a product of 'sf'.*weight='w'"):
        weighted.run()


@pytest.mark.parametrize(
    "options",
    [
        {"threads": -1},
        {"threads": 1.5},
        {"threads": True},
        {"events_in_flight": 0},
        {"events_in_flight": -2},
        {"processes": 2, "threads": -1},
    ],
)
def test_thread_and_batch_counts_are_checked(options: dict) -> None:
    proc = ef.Process("counts")
    proc.source = ef.source.synthetic(10)
    proc.histogram("nJet", bins=5, range=(0, 5))
    name = "events_in_flight" if "events_in_flight" in options else "threads"
    with pytest.raises(
        ef.ConfigurationError, match=rf"{name} must be a positive integer, not {options[name]!r}"
    ):
        proc.run(**options)


def test_import_is_light() -> None:
    code = "import sys, evflow; print(sorted(m for m in ('awkward','uproot','hist','matplotlib','pyarrow') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("policy", ["fixed", "adaptive", "hepframe"])
def test_filter_order_policies_give_identical_results(policy: str) -> None:
    proc, _ = _process(events=30_000, step=500)
    base, _ = _process(events=30_000, step=500)
    r = proc.run(threads=2, filter_order=policy)
    b = base.run(threads=1, filter_order="fixed")
    for name in ("dimuon", "multijet"):
        assert r.cutflow[name].passed == b.cutflow[name].passed
    for name, h in b.histograms.items():
        np.testing.assert_array_equal(r.histograms[name].values(), h.values())


def test_adaptive_order_is_the_default_and_the_result_says_why() -> None:
    # A bad written order: a costly, loose cut first, a cheap tight one last.
    def build() -> ef.Process:
        proc = ef.Process("order")
        proc.source = ef.source.synthetic(60_000, step_size=1_000, seed=3)

        @proc.filter(consumes=["MET_pt"])
        def slow_loose(ev):
            time.sleep(2e-3)
            return ev.MET_pt < 150

        @proc.filter(consumes=["nJet"])
        def fast_tight(ev):
            return ev.nJet >= 5

        proc.path("sel", [slow_loose, fast_tight], reorderable=True)
        proc.path("plain", [fast_tight])
        return proc

    r = build().run(threads=2)
    sel = r.cutflow["sel"]
    assert sel.policy == "adaptive"
    assert sel.order == ["fast_tight", "slow_loose"], sel.why
    assert sel.why.startswith("adaptive: chosen ") and "expected" in sel.why
    assert r.cutflow["plain"].policy == "written"
    assert "adaptive order" in r.cutflow.table()
    f = build().run(threads=2, filter_order="fixed")
    assert f.cutflow["sel"].policy == "fixed"
    assert f.cutflow["sel"].order == ["slow_loose", "fast_tight"]
    assert "written order" in f.cutflow["sel"].why
    assert f.cutflow["sel"].passed == sel.passed
    assert f.cutflow.to_dict()["sel"]["policy"] == "fixed"
    with pytest.raises(ef.ConfigurationError, match="filter_order must be"):
        build().run(filter_order="random")  # type: ignore[arg-type]


def test_producer_for_selected_histograms_runs_after_the_cuts() -> None:
    proc = ef.Process("late")
    proc.source = ef.source.synthetic(6_000, step_size=1_000)
    seen = {"kin": 0, "all": 0}

    @proc.producer(consumes=["Jet_pt"], produces=["ht"])
    def kin(ev):
        seen["kin"] += len(ev)
        return ak.sum(ev.Jet_pt, axis=1)

    @proc.producer(consumes=["Jet_pt"], produces=["nj"])
    def every(ev):
        seen["all"] += len(ev)
        return ak.num(ev.Jet_pt)

    @proc.filter(consumes=["MET_pt"])
    def met(ev):
        return ev.MET_pt > 60

    proc.path("p", [met])
    proc.histogram("ht", bins=10, range=(0, 500), after="p")
    proc.histogram("nj", bins=10, range=(0, 10))  # every event
    r = proc.run(threads=2)
    assert seen["kin"] == r.cutflow["p"].passed < 6_000
    assert seen["all"] == 6_000


def test_histograms_leave_out_missing_values(hzz_file: Path) -> None:
    """Values or weights that are missing (None: the leading muon of an
    event without muons) fill nothing, in 1D and 2D, flat and jagged
    histograms, weighted or not (checked against plain awkward + numpy)."""
    import hist

    proc = ef.Process("hzz", weight="EventWeight")
    proc.source = ef.source.root(hzz_file, tree="events", step_size=500)
    proc.histogram(
        "lead",
        fill=lambda ev: ak.firsts(ev.Muon_Px),
        consumes=["Muon_Px"],
        bins=20,
        range=(-100, 100),
        weight=True,
    )
    two = hist.Hist(hist.axis.Regular(10, -100, 100), hist.axis.Regular(10, -100, 100))
    proc.histogram(
        "lead_jet",
        fill=lambda ev: (ak.firsts(ev.Muon_Px), ev.Jet_Px),
        consumes=["Muon_Px", "Jet_Px"],
        hist=two,
    )
    proc.histogram("jet_px", column="Jet_Px", bins=20, range=(-100, 100), weight="mu_weight", after="has_mu")

    @proc.producer(consumes=["Muon_Px", "EventWeight"], produces=["mu_weight"])
    def mu_weight(ev):
        return ak.mask(ev.EventWeight, ak.num(ev.Muon_Px) > 0)  # None without muons

    @proc.filter(consumes=["Jet_Px"])
    def any_event(ev):
        return ak.num(ev.Jet_Px) >= 0

    proc.path("has_mu", [any_event])
    r = proc.run(threads=2)

    import uproot

    t = uproot.open(hzz_file)["events"].arrays(["Muon_Px", "Jet_Px", "EventWeight"])
    has = ak.to_numpy(ak.num(t.Muon_Px) > 0)
    first = ak.to_numpy(t.Muon_Px[has][:, 0])
    w = ak.to_numpy(t.EventWeight).astype(np.float64)
    h = r.histograms["lead"]
    want, _ = np.histogram(first, bins=20, range=(-100, 100), weights=w[has])
    np.testing.assert_allclose(h.values(), want)
    assert h.sum(flow=True).value == pytest.approx(w[has].sum())
    jets = t.Jet_Px[has]
    pairs = ak.broadcast_arrays(first, jets)
    want2, _, _ = np.histogram2d(
        ak.to_numpy(ak.flatten(pairs[0])), ak.to_numpy(ak.flatten(pairs[1])), bins=10, range=[(-100, 100)] * 2
    )
    np.testing.assert_array_equal(r.histograms["lead_jet"].values(), want2)
    assert r.histograms["lead_jet"].sum(flow=True) == ak.sum(ak.num(jets))
    jw = ak.to_numpy(ak.flatten(ak.broadcast_arrays(w[has], jets)[0]))
    want3, _ = np.histogram(ak.to_numpy(ak.flatten(jets)), bins=20, range=(-100, 100), weights=jw)
    np.testing.assert_allclose(r.histograms["jet_px"].values(), want3)


def test_fixed_size_products_fill_histograms_and_skims(zmumu_file: Path, tmp_path: Path) -> None:
    """A producer may return a numpy array of shape (events, k): one
    fixed-size list per event, which histograms fill entry by entry (with
    the event's weight) and skims write as lists, which the native Parquet
    reader reads back."""
    proc = ef.Process("z", weight="M")
    proc.source = ef.source.root(zmumu_file, tree="events", step_size=500)

    @proc.producer(consumes=["px1", "px2"], produces=["pxs"])
    def pxs(ev):
        return np.stack([ev.px1, ev.px2], axis=1)

    proc.histogram("pxs", bins=10, range=(-100, 100), weight=True)
    out = proc.output(ef.output.parquet(tmp_path / "pxs.parquet", columns=["pxs", "M"]))
    r = proc.run(threads=2)

    import uproot

    t = uproot.open(zmumu_file)["events"].arrays(["px1", "px2", "M"], library="np")
    want, _ = np.histogram(
        np.stack([t["px1"], t["px2"]], axis=1).ravel(),
        bins=10,
        range=(-100, 100),
        weights=np.repeat(t["M"], 2),
    )
    np.testing.assert_allclose(r.histograms["pxs"].values(), want)
    skim = ak.from_parquet(out.path)
    np.testing.assert_array_equal(ak.to_numpy(skim.pxs), np.stack([t["px1"], t["px2"]], axis=1))
    again = ef.Process("again")
    again.source = ef.source.parquet(out.path, engine="native")
    again.histogram("pxs", bins=10, range=(-100, 100))
    assert again.run(threads=1).histograms["pxs"].sum(flow=True) == 2 * len(t["px1"])


def test_cutflow_table_lists_filters_in_the_order_they_ran() -> None:
    """On a reorderable path the table's rows follow the execution order,
    so that the cumulative column falls row by row; ``steps`` keep the
    written order."""
    from evflow.cutflow import build

    # One batch of 100 events; the path's filters ran as c, a, b.
    records = [
        (0, 0, 2, 0, 100, 50, 100.0, 50.0),
        (0, 0, 0, 1, 50, 40, 50.0, 40.0),
        (0, 0, 1, 2, 40, 10, 40.0, 10.0),
    ]
    flow = build([("p", ["a", "b", "c"], True)], records, [(0, 100, 100.0)], [(0, [(10, 10.0)])], [], False)
    path = flow["p"]
    assert path.order == ["c", "a", "b"] and [s.filter for s in path.steps] == ["a", "b", "c"]
    rows = [line.split()[0] for line in flow.table().splitlines()[3:-1]]
    assert rows == ["all", "c", "a", "b"]
    cumulative = [s.cumulative for s in path.shown()]
    assert cumulative == sorted(cumulative, reverse=True) == [0.5, 0.4, 0.1]
    html = flow._repr_html_()
    assert html.index("<td>c</td>") < html.index("<td>a</td>") < html.index("<td>b</td>")


def test_one_filter_or_one_column_need_no_list(tmp_path: Path) -> None:
    """A path of one filter and a skim of one column may name it alone,
    object or label, instead of in a list (a label is not taken letter by
    letter)."""
    proc = ef.Process("one")
    proc.source = ef.source.synthetic(2_000, step_size=1_000)

    @proc.filter(consumes=["nJet"])
    def many_jets(ev):
        return ev.nJet > 2

    assert [f.label for f in proc.path("by_object", many_jets).filters] == ["many_jets"]
    assert [f.label for f in proc.path("by_label", "many_jets").filters] == ["many_jets"]

    @proc.filter(consumes=["MET_pt"])
    def met(ev):
        return ev.MET_pt > 20

    assert proc.path("one_pair", [met, many_jets], reorderable=True, after=(met, many_jets)).after == [
        ("met", "many_jets")
    ]
    with pytest.raises(ef.ConfigurationError, match=r"after= takes pairs \(later, earlier\)"):
        proc.path("bad_pair", [met, many_jets], reorderable=True, after=["met"])
    out = proc.output(ef.output.parquet(tmp_path / "n.parquet", columns="nJet"), select="by_label")
    assert out.columns == ["nJet"]
    r = proc.run(threads=1)
    assert (
        r.cutflow["by_object"].passed == r.cutflow["by_label"].passed == pq.read_table(out.path).num_rows > 0
    )
    with pytest.raises(ef.ConfigurationError, match="are names"):
        ef.output.parquet(tmp_path / "x.parquet", columns=[1])
