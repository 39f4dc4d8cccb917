"""Distributed runs on a 2-worker Dask LocalCluster (worker processes):
results identical to the single-process run and to a plain numpy/awkward
reference, a worker killed mid-run, skims without lost or duplicated rows,
bad files, module errors."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import awkward as ak
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import evflow as ef
from conftest import without_rows
from evflow.distributed import MANIFEST, read_skim

distributed = pytest.importorskip("distributed")

EVENTS = 9_000
STEP = 1_000


def _columns(start: int, n: int, index: int) -> dict[str, Any]:
    return ef.source.synthetic(0).generate(index, start, n)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """Two Parquet files (row groups of 1000, one of 2500) and two ROOT
    files (clusters of 1000 and 1500), NanoAOD-like synthetic events."""
    import uproot

    from evflow.data import _root_groups

    d = tmp_path_factory.mktemp("dist")
    out: dict[str, list[str]] = {"parquet": [], "root": []}
    layouts = [[1000, 1000, 2500, 500], [1000] * 4 + [1000]]
    start = 0
    for k, groups in enumerate(layouts):
        path = d / f"events{k}.parquet"
        writer = None
        for i, n in enumerate(groups):
            cols = _columns(start, n, 100 * k + i)
            table = pa.Table.from_arrays(
                [ak.to_arrow(v, extensionarray=False) for v in cols.values()], names=list(cols)
            )
            writer = writer or pq.ParquetWriter(path, table.schema)
            writer.write_table(table, row_group_size=n)
            start += n
        assert writer is not None
        writer.close()
        out["parquet"].append(str(path))
    for k, clusters in enumerate([[1000, 1500, 1000], [1500, 1500]]):
        path = d / f"events{k}.root"
        with uproot.recreate(path) as f:
            for i, n in enumerate(clusters):
                grouped, _ = _root_groups(_columns(start, n, 200 + 10 * k + i))
                if i == 0:  # mktree with arrays writes them: the first cluster
                    tree = f.mktree("Events", grouped)
                else:
                    tree.extend(grouped)
                start += n
        out["root"].append(str(path))
    return out


def _analysis(source: ef.source.Source, skim: str | None = None, *, kill: tuple[str, int, str, int] | None = None,
              fail_at: int | None = None, written: tuple[str, str] = ("two_muons", "met_cut")) -> ef.Process:  # fmt: skip
    """Two reorderable cuts, a producer, weighted and jagged histograms, an
    optional skim. ``kill=(file, entry, marker, pid)``: the filter kills its
    own worker process once on that batch; ``fail_at``: raises there."""
    proc = ef.Process("dist", weight="genWeight")
    proc.source = source

    @proc.producer(consumes=["Muon_pt", "Muon_eta", "Muon_phi"], produces=["mll"])
    def mll(ev: ef.Events) -> np.ndarray:
        pt, eta, phi = (ak.pad_none(ev[c], 2)[:, :2] for c in ("Muon_pt", "Muon_eta", "Muon_phi"))
        m2 = 2 * pt[:, 0] * pt[:, 1] * (np.cosh(eta[:, 0] - eta[:, 1]) - np.cos(phi[:, 0] - phi[:, 1]))
        return ak.to_numpy(ak.fill_none(np.sqrt(m2), -1.0)).astype(np.float64)

    @proc.filter(consumes=["nMuon"])
    def two_muons(ev: ef.Events) -> np.ndarray:
        if kill is not None:
            file, entry, marker, parent = kill
            info = ev.info
            here = info.file == file and info.entry_start == entry and os.getpid() != parent
            if here and not os.path.exists(marker):
                Path(marker).touch()
                os.kill(os.getpid(), signal.SIGKILL)
        if fail_at is not None and ev.info.entry_start == fail_at:
            raise ValueError("broken calibration")
        return ev.nMuon >= 2

    @proc.filter(consumes=["MET_pt"])
    def met_cut(ev: ef.Events) -> np.ndarray:
        return ev.MET_pt > 10

    proc.path("sel", list(written), reorderable=True)
    proc.histogram("mll", bins=60, range=(0, 150), after="sel", weight=True)
    proc.histogram("jet_pt", column="Jet_pt", bins=40, range=(0, 200))
    proc.histogram("met", column="MET_pt", bins=50, range=(0, 200), after="sel")
    if skim is not None:
        proc.output(ef.output.parquet(skim, columns=["event", "mll", "Jet_pt"]), select="sel")
    return proc


#: Comparisons of whole cut-flows pin the written order: under the adaptive
#: default, a reorderable path's per-filter counts are those of the order
#: each run chose from its timings (what passes and every histogram are
#: identical under any order; test_adaptive_orders_seed_later_chunks).
FIXED = "fixed"


def _same(a: ef.Result, b: ef.Result) -> None:
    assert a.events == b.events
    assert a.cutflow.to_dict() == b.cutflow.to_dict()
    assert a.histograms.keys() == b.histograms.keys()
    for name, h in a.histograms.items():
        other = b.histograms[name]
        assert np.array_equal(h.values(flow=True), other.values(flow=True)), name
        assert (h.variances() is None) == (other.variances() is None), name
        if h.variances() is not None:
            assert np.array_equal(h.variances(flow=True), other.variances(flow=True)), name


def _reference(paths: list[str], exclude: tuple[int, int] | None = None) -> dict[str, Any]:
    """Plain numpy/awkward on the whole files (without the events
    ``exclude[0]`` to ``exclude[1] - 1`` of their concatenation): the
    selection and histograms."""
    import uproot

    parts = []
    for p in paths:
        if p.endswith(".parquet"):
            parts.append(ak.from_parquet(p))
        else:
            parts.append(uproot.open(p)["Events"].arrays())
    ev = ak.concatenate(parts)
    if exclude is not None:
        ev = without_rows(ev, [exclude])
    muon = (
        ak.pad_none(ev.Muon_pt, 2)[:, :2],
        ak.pad_none(ev.Muon_eta, 2)[:, :2],
        ak.pad_none(ev.Muon_phi, 2)[:, :2],
    )
    pt, eta, phi = muon
    m2 = 2 * pt[:, 0] * pt[:, 1] * (np.cosh(eta[:, 0] - eta[:, 1]) - np.cos(phi[:, 0] - phi[:, 1]))
    mll = ak.to_numpy(ak.fill_none(np.sqrt(m2), -1.0)).astype(np.float64)
    sel = (ak.to_numpy(ev.nMuon) >= 2) & (ak.to_numpy(ev.MET_pt) > 10)
    w = ak.to_numpy(ev.genWeight).astype(np.float64)
    return {
        "events": len(ev),
        "passed": int(sel.sum()),
        "mll": np.histogram(mll[sel], bins=60, range=(0, 150), weights=w[sel])[0],
        "jet_pt": np.histogram(ak.to_numpy(ak.flatten(ev.Jet_pt)), bins=40, range=(0, 200))[0],
        "met": np.histogram(ak.to_numpy(ev.MET_pt)[sel], bins=50, range=(0, 200))[0],
        "event": ak.to_numpy(ev.event)[sel],
    }


def _matches_reference(dist: ef.Result, ref: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """The distributed histograms and skim against the numpy reference and
    the single-process skim (`single.parquet`); returns the skim's manifest."""
    assert np.array_equal(dist.histograms["jet_pt"].values(), ref["jet_pt"])
    assert np.array_equal(dist.histograms["met"].values(), ref["met"])
    assert np.allclose(dist.histograms["mll"].values(), ref["mll"], rtol=1e-12, atol=0)
    # The skim: every selected event once, in the single-process order.
    rows = read_skim(str(tmp_path / "skim"))
    assert rows.equals(pq.read_table(tmp_path / "single.parquet"))
    assert np.array_equal(rows.column("event").to_numpy(), ref["event"])
    manifest: dict[str, Any] = json.loads((tmp_path / "skim" / MANIFEST).read_text())
    assert manifest["rows"] == len(ref["event"])
    # The skim directory is an input as it stands: its parts, in order.
    parts = [str(tmp_path / "skim" / p["file"]) for p in manifest["parts"] if p["file"]]
    assert ef.source.parquet(tmp_path / "skim").files == parts
    return manifest


@pytest.mark.parametrize("kind", ["parquet", "root"])
def test_identical_to_single_process_and_reference(client: Any, files: dict[str, list[str]], kind: str,
                                                   tmp_path: Path) -> None:  # fmt: skip
    src = ef.source.auto(files[kind], step_size=STEP)
    single = _analysis(src, str(tmp_path / "single.parquet")).run(threads=2, filter_order=FIXED)
    dist = _analysis(src, str(tmp_path / "skim")).run(client=client, chunk_size=2 * STEP, filter_order=FIXED)
    _same(single, dist)
    assert len(dist.report["distributed"]["chunks"]) >= 3
    ref = _reference(files[kind])
    assert dist.events == ref["events"] and dist.cutflow["sel"].passed == ref["passed"]
    manifest = _matches_reference(dist, ref, tmp_path)
    assert manifest["rows"] == dist.outputs[str(tmp_path / "skim")]
    assert sorted(os.listdir(tmp_path / "skim")) == sorted(
        [MANIFEST] + [p["file"] for p in manifest["parts"] if p["file"]]
    )


@pytest.mark.parametrize("kind", ["parquet", "root", "synthetic"])
def test_batch_info_numbers_batches_as_a_single_process_run(
    client: Any, files: dict[str, list[str]], kind: str
) -> None:
    """``ev.info`` names the same batch (number, file, entries) in a chunk
    of a distributed run as in a single-process run of the job."""
    src = (
        ef.source.synthetic(EVENTS, step_size=STEP)
        if kind == "synthetic"
        else ef.source.auto(files[kind], step_size=STEP)
    )

    def analysis() -> ef.Process:
        proc = ef.Process("info")
        proc.source = src
        for name, field, top in (("batch", "index", 20), ("start", "entry_start", 20_000)):
            proc.histogram(
                name,
                fill=lambda ev, field=field: np.full(len(ev), getattr(ev.info, field)),
                consumes=["event"],
                bins=20,
                range=(0, top),
            )
        return proc

    single = analysis().run(threads=1)
    dist = analysis().run(client=client, chunk_size=2 * STEP)
    assert len(dist.report["distributed"]["chunks"]) >= 3
    for name in ("batch", "start"):
        assert np.array_equal(
            single.histograms[name].values(flow=True), dist.histograms[name].values(flow=True)
        )
    assert single.histograms["batch"].values(flow=True)[-1] == 0  # fewer than 20 batches


@pytest.mark.parametrize("option", [{"threads": -1}, {"events_in_flight": 0}, {"chunk_size": -10}])
def test_distributed_counts_are_checked_before_the_cluster_starts(option: dict[str, int]) -> None:
    proc = _analysis(ef.source.synthetic(1_000, step_size=STEP))
    ((name, value),) = option.items()
    with pytest.raises(ef.ConfigurationError, match=rf"{name} must be a positive integer, not {value}"):
        proc.run(processes=2, **option)


def test_mistyped_product_is_named_on_a_cluster(client: Any, files: dict[str, list[str]]) -> None:
    proc = _analysis(ef.source.auto(files["root"], step_size=STEP))
    proc.histogram("mll_typo", column="mlll", bins=10, range=(0, 100))
    with pytest.raises(
        ef.MissingBranchError, match=r"branch 'mlll' not found.*did you mean the product 'mll'\?"
    ):
        proc.run(client=client)


def test_chunks_are_the_single_process_batches(files: dict[str, list[str]]) -> None:
    """The planned steps are exactly the batches a single-process run reads
    (row groups grouped up to the step, a large one cut, the event limit)."""
    from evflow.distributed.chunks import gather_meta, plan_chunks, read_meta

    for kind, step, limit in [("parquet", 2_000, None), ("parquet", 1_500, 7_300), ("root", 2_000, 5_200)]:
        src = ef.source.auto(files[kind], step_size=step, max_events=limit)
        seen: list[tuple[str, int, int]] = []
        proc = ef.Process("batches")
        proc.source = src

        @proc.analyzer(consumes=["nJet"])
        def record(ev: ef.Events, seen: list[tuple[str, int, int]] = seen) -> None:
            seen.append((ev.info.file, ev.info.entry_start, ev.info.entry_stop))

        proc.run(threads=1)
        metas = gather_meta(src, ["nJet"], lambda paths, s=src: [read_meta(s, p, ["nJet"]) for p in paths])
        chunks = plan_chunks(src, metas, chunk_size=None, workers=1)
        planned = [s for ch in chunks for s in ch.steps]
        assert planned == seen, (kind, step, limit)


def test_worker_killed_mid_run(client: Any, files: dict[str, list[str]], tmp_path: Path) -> None:
    src = ef.source.parquet(files["parquet"], step_size=STEP)
    marker = str(tmp_path / "killed")
    undisturbed = _analysis(src, str(tmp_path / "a")).run(client=client, chunk_size=STEP, filter_order=FIXED)
    kill = (files["parquet"][1], 2000, marker, os.getpid())
    hit = _analysis(src, str(tmp_path / "b"), kill=kill).run(
        client=client, chunk_size=STEP, filter_order=FIXED
    )
    assert os.path.exists(marker)  # a worker process did die on that batch
    _same(undisturbed, hit)
    assert read_skim(str(tmp_path / "b")).equals(read_skim(str(tmp_path / "a")))
    client.wait_for_workers(2, timeout=60)


def test_bad_files_fail_clearly_or_are_skipped(
    client: Any, files: dict[str, list[str]], tmp_path: Path
) -> None:
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"not a parquet file at all")
    missing = str(tmp_path / "missing.parquet")
    good = files["parquet"]
    with pytest.raises(ef.MissingFileError, match=r"missing\.parquet"):
        _analysis(ef.source.parquet([good[0], missing], step_size=STEP)).run(client=client)
    with pytest.raises(ef.InputError, match=r"broken\.parquet"):
        _analysis(ef.source.parquet([str(broken), good[1]], step_size=STEP)).run(client=client)
    src = ef.source.parquet([good[0], str(broken), missing, good[1]], step_size=STEP)
    r = _analysis(src).run(client=client, skip_bad_files=True, filter_order=FIXED)
    assert r.skipped_files == [str(broken), missing]
    _same(r, _analysis(ef.source.parquet(good, step_size=STEP)).run(threads=1, filter_order=FIXED))


def test_module_error_names_module_file_and_entries(client: Any, files: dict[str, list[str]]) -> None:
    root = files["root"]
    src = ef.source.root(root, step_size=STEP)
    with pytest.raises(ef.ModuleError) as info:
        _analysis(src, fail_at=1000).run(client=client, chunk_size=STEP)
    text = str(info.value)
    assert "two_muons" in text and os.path.basename(root[0]) in text and "entries 1000-" in text, text
    assert info.value.module == "two_muons" and info.value.batch == 1  # the single-process batch number
    assert isinstance(info.value.__cause__, ValueError)
    # skip-chunk: the job finishes without the chunk and lists it.
    r = _analysis(src, fail_at=1000).run(client=client, chunk_size=STEP, on_error="skip-chunk")
    assert len(r.skipped_chunks) == 1 and "broken calibration" in r.skipped_chunks[0]["error"]
    [(file, start, stop)] = r.skipped_chunks[0]["entries"]
    assert file == root[0] and start == 1000
    assert r.events == 6_500 - (stop - start)


def test_a_chunk_whose_worker_always_dies_is_a_clear_error(files: dict[str, list[str]]) -> None:
    """A chunk whose worker process dies each time it runs it (a crash in
    native code, the out-of-memory killer): a JobError naming the chunk,
    not an internal error; with on_error="skip-chunk" the job finishes
    without it and lists it."""
    import dask

    root = files["root"]
    src = ef.source.root(root, step_size=STEP)
    parent = os.getpid()

    def build() -> ef.Process:
        proc = ef.Process("dies")
        proc.source = src

        @proc.filter(consumes=["nMuon"])
        def crash(ev: ef.Events) -> Any:
            if ev.info.file == root[0] and ev.info.entry_start == STEP and os.getpid() != parent:
                os._exit(3)
            return ev.nMuon >= 1

        proc.path("p", [crash])
        return proc

    # One death is enough for the scheduler to give up on a task. The
    # cluster closes a nanny whose worker was lost lost-worker-timeout ago
    # and is not back: on a loaded machine a timer of an earlier death fires
    # while the nanny restarts the worker after a later one, and the cluster
    # is left without a worker (a run then fails, named, after
    # NO_WORKER_TIMEOUT_S: what test_distributed_no_worker.py checks). The
    # nanny here always restarts its worker: no timer is needed.
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        cluster = distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=50
        )
    with (
        dask.config.set({"distributed.deploy.lost-worker-timeout": "1 hour"}),
        cluster,
        distributed.Client(cluster) as c,
    ):
        with pytest.raises(ef.JobError, match=r"\): the worker process running it died") as info:
            build().run(client=c, chunk_size=STEP)
        # The chunk that kills its worker, not one queued beside it.
        assert f"{os.path.basename(root[0])}', entries {STEP}-" in str(info.value), info.value
        r = build().run(client=c, chunk_size=STEP, on_error="skip-chunk")
    # Exactly the chunk with the crashing batch is left out: a chunk queued
    # on the worker when it died runs again alone and succeeds.
    assert len(r.skipped_chunks) == 1 and "died" in r.skipped_chunks[0]["error"], r.skipped_chunks
    pieces = [tuple(e) for k in r.skipped_chunks for e in k["entries"]]
    assert len(pieces) == 1 and pieces[0][:2] == (root[0], STEP), pieces
    assert r.events == 6_500 - (pieces[0][2] - pieces[0][1])


def test_a_failed_job_leaves_no_skim_part_of_a_chunk_still_running(
    client: Any, files: dict[str, list[str]], tmp_path: Path
) -> None:
    """A chunk that fails while another one still runs: the other one's part
    (written when it ends) must not outlive the failed job's cleanup."""
    src = ef.source.parquet(files["parquet"][:1], step_size=STEP)
    done = tmp_path / "slow-chunk-done"
    skim = tmp_path / "skim"

    proc = ef.Process("late")
    proc.source = src

    @proc.filter(consumes=["nMuon"])
    def sel(ev: ef.Events) -> Any:
        if ev.info.entry_start == 0:
            raise ValueError("broken first batch")
        if ev.info.entry_start == STEP:
            time.sleep(1.0)  # ends well after the first chunk failed
            done.touch()
        return ev.nMuon >= 1

    proc.path("p", [sel])
    proc.output(ef.output.parquet(str(skim), columns=["nMuon"]), select="p")
    with pytest.raises(ef.ModuleError, match="broken first batch"):
        proc.run(client=client, chunk_size=STEP)
    # The job waited for the chunk already running before it cleaned up.
    assert done.exists()
    assert not skim.exists()  # the directory the job created is removed with its parts


def test_outputs_are_keyed_by_the_path_as_given(
    client: Any, files: dict[str, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relative skim path is the key of ``result.outputs`` in one process
    and on a cluster alike (a distributed run keyed it by its absolute path)."""
    monkeypatch.chdir(tmp_path)
    proc = ef.Process("relative")
    proc.source = ef.source.parquet(files["parquet"][:1], step_size=STEP)
    proc.output(ef.output.parquet("single.parquet", columns=["event"]))
    single = proc.run(threads=1).outputs
    proc.outputs.clear()
    proc.output(ef.output.parquet("dist.parquet", columns=["event"]))
    dist = proc.run(client=client, chunk_size=STEP).outputs
    assert list(single) == ["single.parquet"] and list(dist) == ["dist.parquet"]
    assert single["single.parquet"] == dist["dist.parquet"] > 0
    assert (tmp_path / "dist.parquet" / MANIFEST).is_file()


def test_single_process_and_distributed_skims_replace_each_other(
    client: Any, files: dict[str, list[str]], tmp_path: Path
) -> None:
    """The same analysis run in one process and on a cluster, in either
    order, writing its skim to the same path: each run replaces the earlier
    run's skim (a file, or a directory of parts), as a rerun of the same
    kind does; a failed run leaves the earlier skim whole; a directory with
    files of someone else's is refused before the job starts."""
    src = ef.source.parquet(files["parquet"][:1], step_size=STEP)
    skim = tmp_path / "skim.parquet"

    def analysis(fail: bool = False) -> ef.Process:
        proc = ef.Process("either")
        proc.source = src

        @proc.filter(consumes=["nMuon"])
        def sel(ev: ef.Events) -> Any:
            if fail and ev.info.entry_start == 2 * STEP:
                raise ValueError("broken batch")
            return ev.nMuon >= 2

        proc.path("p", [sel])
        proc.output(ef.output.parquet(skim, columns=["event", "nMuon"]), select="p")
        return proc

    single = analysis().run(threads=2)
    rows = single.outputs[str(skim)]
    assert skim.is_file() and pq.read_table(skim).num_rows == rows
    reference = pq.read_table(skim)
    # A failed distributed run leaves the single-process file as it was.
    with pytest.raises(ef.ModuleError, match="broken batch"):
        analysis(fail=True).run(client=client, chunk_size=STEP)
    assert skim.is_file() and pq.read_table(skim).equals(reference)
    assert sorted(os.listdir(tmp_path)) == ["skim.parquet"]
    dist = analysis().run(client=client, chunk_size=STEP)
    assert dist.outputs == {str(skim): rows}
    assert skim.is_dir() and read_skim(str(skim)).equals(reference)
    # A failed single-process run leaves the directory; a good one replaces it.
    with pytest.raises(ef.ModuleError, match="broken batch"):
        analysis(fail=True).run(threads=2)
    assert read_skim(str(skim)).equals(reference)
    again = analysis().run(threads=2)
    assert again.outputs == {str(skim): rows}
    assert skim.is_file() and pq.read_table(skim).equals(reference)
    assert sorted(os.listdir(tmp_path)) == ["skim.parquet"]
    # Someone else's directory: refused by both, before the job, untouched.
    os.remove(skim)
    skim.mkdir()
    (skim / "notes.txt").write_text("mine")
    for run in (lambda p: p.run(threads=2), lambda p: p.run(client=client, chunk_size=STEP)):
        with pytest.raises(ef.ConfigurationError, match="directory with other files"):
            run(analysis())
        assert os.listdir(skim) == ["notes.txt"]


def test_a_skim_of_an_input_without_events_has_the_branch_types_on_a_cluster(
    client: Any, tmp_path: Path
) -> None:
    """An input without events runs no chunk: the manifest still keeps the
    branch columns' types, as the single-process skim of the same input."""
    path = tmp_path / "empty.parquet"
    jets = pa.array([], pa.list_(pa.float32()))
    pq.write_table(pa.table({"MET_pt": pa.array([], pa.float32()), "Jet_pt": jets}), path)

    def analysis(skim: Path) -> ef.Process:
        proc = ef.Process("nothing")
        proc.source = ef.source.parquet(path)

        @proc.producer(consumes=["MET_pt"], produces=["met2"])
        def met2(ev: ef.Events) -> Any:
            return ev.MET_pt * 2

        proc.output(ef.output.parquet(skim, columns=["MET_pt", "Jet_pt", "met2"]))
        return proc

    single = tmp_path / "single.parquet"
    analysis(single).run(threads=1)
    dist = analysis(tmp_path / "dist").run(client=client)
    assert dist.events == 0 and dist.outputs == {str(tmp_path / "dist"): 0}
    types = read_skim(str(tmp_path / "dist")).schema.types
    assert types == pq.read_schema(single).types
    assert types[:2] == [pa.float32(), pa.list_(pa.float32())] and types[2] == pa.null()


def _failing_fill(proc: ef.Process, file: str, entry: int) -> ef.Process:
    """Adds a histogram (an end-path module beside the others and the skim)
    whose fill raises on the batch of ``file`` starting at ``entry``."""

    def jets(ev: ef.Events) -> Any:
        if ev.info.file == file and ev.info.entry_start == entry:
            raise ValueError("bad fill batch")
        return ev.Jet_pt

    proc.histogram("jets_checked", fill=jets, consumes=["Jet_pt"], bins=40, range=(0, 200))
    return proc


def test_skipped_batch_contributes_nothing_on_a_cluster(
    client: Any, files: dict[str, list[str]], tmp_path: Path
) -> None:
    """on_error="skip" on a cluster: the batch whose histogram fill fails
    adds nothing to any histogram, the cut-flow or the skim, as in one
    process and as numpy without that batch's events."""
    paths = files["parquet"]
    src = ef.source.parquet(paths, step_size=STEP)

    def analysis(skim: str) -> ef.Process:
        return _failing_fill(_analysis(src, skim), paths[0], 1000)

    single = analysis(str(tmp_path / "single.parquet")).run(threads=2, on_error="skip", filter_order=FIXED)
    dist = analysis(str(tmp_path / "skim")).run(
        client=client, chunk_size=2 * STEP, on_error="skip", filter_order=FIXED
    )
    assert single.failed_batches == dist.failed_batches == [1]
    _same(single, dist)
    ref = _reference(paths, exclude=(1000, 2000))  # row group 1 of the first file: batch 1
    assert dist.events == ref["events"] == dist.cutflow["sel"].events
    assert dist.cutflow["sel"].passed == ref["passed"]
    assert np.array_equal(dist.histograms["jets_checked"].values(), ref["jet_pt"])
    _matches_reference(dist, ref, tmp_path)


def test_empty_skim_keeps_its_types_on_a_cluster(
    client: Any, files: dict[str, list[str]], tmp_path: Path
) -> None:
    """No event passes: the distributed skim reads back with the columns'
    types, as the single-process skim does, not as null columns."""

    def analysis(skim: str) -> ef.Process:
        proc = ef.Process("none")
        proc.source = ef.source.parquet(files["parquet"], step_size=STEP)

        @proc.filter(consumes=["MET_pt"])
        def nothing(ev: ef.Events) -> np.ndarray:
            return ev.MET_pt < 0

        proc.path("sel", [nothing])
        proc.output(ef.output.parquet(skim, columns=["event", "MET_pt", "Jet_pt"]), select="sel")
        return proc

    single = analysis(str(tmp_path / "single.parquet")).run(threads=1)
    dist = analysis(str(tmp_path / "skim")).run(client=client, chunk_size=2 * STEP)
    assert single.outputs[str(tmp_path / "single.parquet")] == dist.outputs[str(tmp_path / "skim")] == 0
    expected = pq.read_table(tmp_path / "single.parquet")
    rows = read_skim(str(tmp_path / "skim"))
    assert rows.num_rows == 0 and rows.column_names == ["event", "MET_pt", "Jet_pt"]
    assert not any(pa.types.is_null(t) for t in rows.schema.types), rows.schema
    assert rows.schema.equals(expected.schema, check_metadata=False), (rows.schema, expected.schema)
    assert pa.types.is_list(rows.schema.field("Jet_pt").type) or pa.types.is_large_list(
        rows.schema.field("Jet_pt").type
    )


def test_missing_dependency_on_workers_is_a_clear_error(client: Any) -> None:
    def factory() -> ef.Process:
        import evflow_no_such_module  # noqa: F401

        raise AssertionError("unreachable")

    proc = _analysis(ef.source.synthetic(2_000, step_size=STEP))
    with pytest.raises(ef.JobError, match="evflow_no_such_module"):
        ef.distributed.run(proc, client=client, factory=factory)


def test_client_may_be_a_cluster_and_nothing_else(client: Any) -> None:
    """client= takes a Client, a cluster object or an address; anything else
    is refused by name, before any worker is asked anything."""
    src = ef.source.synthetic(2_000, step_size=STEP)
    r = _analysis(src).run(client=client.cluster, filter_order=FIXED)
    _same(r, _analysis(src).run(threads=1, filter_order=FIXED))
    with pytest.raises(ef.ConfigurationError, match=r"client= must be a distributed.Client.*not int 5"):
        _analysis(src).run(client=5)


def test_device_modules_on_workers_without_a_device(client: Any, capfd: pytest.CaptureFixture[str]) -> None:
    """A device module on workers without a device runs on their hosts: the
    client says so once, the report sums the module's device counts over the
    chunks, and the histogram is the single-process one."""
    from evflow.device import probe_cupy

    if probe_cupy()[0] is not None:
        pytest.skip("a GPU is usable here: no host fallback")
    src = ef.source.synthetic(4_000, step_size=STEP, seed=2)

    def build() -> ef.Process:
        proc = ef.Process("dev")
        proc.source = src

        @proc.producer(consumes=["MET_pt"], produces=["met2"], device=lambda ev, xp: ev.MET_pt * 2)
        def met2(ev: ef.Events) -> Any:
            return ev.MET_pt * 2

        proc.histogram("met2", bins=20, range=(0, 400))
        return proc

    single = build().run(threads=1)
    capfd.readouterr()
    r = build().run(client=client, chunk_size=STEP)
    err = capfd.readouterr().err
    assert len([line for line in err.splitlines() if "no device" in line]) == 1, err
    assert np.array_equal(r.histograms["met2"].values(), single.histograms["met2"].values())
    # As in one process: no device, the notice, no module split.
    assert r.report["devices"] == single.report["devices"]
    assert single.report["devices"]["notice"] in r.summary()


def test_analyzers_of_ones_own_are_warned_about(client: Any) -> None:
    """What an analyzer accumulates in Python objects stays in the worker
    processes: the run says so instead of returning empty accumulators."""
    proc = _analysis(ef.source.synthetic(2_000, step_size=STEP))
    totals: list[int] = []

    @proc.analyzer(consumes=["nJet"])
    def count(ev: ef.Events) -> None:
        totals.append(len(ev))

    with pytest.warns(RuntimeWarning, match=r"analyzer\(s\) 'count' run in the Dask worker processes"):
        proc.run(client=client, filter_order=FIXED)
    assert totals == []  # what the warning is about


def test_device_sections_of_chunks_add_up() -> None:
    """The chunks' device sections merge into one: counts and times summed,
    the job's device fraction, each chunk's final split."""
    from evflow.distributed.merge import merge_devices

    def part(host: int, dev: int, frac: float) -> dict[str, Any]:
        m = {"kind": "producer", "split_mode": "adaptive", "device_fraction": frac, "batches": 2,
             "host_events": host, "device_events": dev, "launches": 1, "bytes_in": 10, "bytes_out": 5,
             "host_s": 0.5, "device_s": 0.25, "transfer_s": 0.125, "kernel_s": 0.0625, "failed_launches": 0}  # fmt: skip
        return {"device": "emulated", "notice": None, "modules": {"ht": m}}

    merged = merge_devices([part(300, 100, 0.2), part(100, 500, 0.9)])
    assert merged is not None and merged["device"] == "emulated"
    m = merged["modules"]["ht"]
    assert (m["host_events"], m["device_events"], m["launches"], m["bytes_in"]) == (400, 600, 2, 20)
    assert m["device_fraction"] == 0.6 and m["chunk_fractions"] == [0.2, 0.9]
    assert m["device_s"] == 0.5 and merge_devices([]) is None


def test_processes_and_cli(files: dict[str, list[str]], client: Any, tmp_path: Path) -> None:
    """processes=N starts (and stops) its own cluster; the command line runs
    an analysis file on the fixture's scheduler."""
    src = ef.source.synthetic(6_000, step_size=STEP, seed=3)
    single = _analysis(src).run(threads=1, filter_order=FIXED)
    _same(single, _analysis(src).run(processes=1, chunk_size=2 * STEP, filter_order=FIXED))

    from evflow.cli import main

    analysis = tmp_path / "ana.py"
    analysis.write_text(
        "import evflow as ef\n"
        "proc = ef.Process('cli')\n"
        "proc.source = ef.source.parquet('replaced-by-input.parquet')\n"
        "proc.histogram('MET_pt', bins=20, range=(0, 200))\n"
    )
    save = tmp_path / "saved"
    rc = main(["run", str(analysis), "--input", *files["parquet"], "--step-size", "1000",
               "--scheduler", client.scheduler.address, "--save", str(save), "-q"])  # fmt: skip
    assert rc == 0
    import pickle

    with open(save / "histograms.pkl", "rb") as f:
        h = pickle.load(f)["MET_pt"]
    met = np.concatenate([ak.to_numpy(ak.from_parquet(p).MET_pt) for p in files["parquet"]])
    assert np.array_equal(h.values(), np.histogram(met, bins=20, range=(0, 200))[0])


def test_adaptive_orders_seed_later_chunks(client: Any, files: dict[str, list[str]]) -> None:
    """With adaptive ordering, chunks that start after others finished begin
    with the orders those chose; what passes, and every histogram, is the
    single-process run's."""
    src = ef.source.parquet(files["parquet"], step_size=STEP)
    single = _analysis(src).run(threads=1, filter_order="adaptive")
    dist = _analysis(src).run(client=client, chunk_size=STEP, filter_order="adaptive")
    assert dist.cutflow["sel"].passed == single.cutflow["sel"].passed
    for name, h in single.histograms.items():
        assert np.array_equal(h.values(flow=True), dist.histograms[name].values(flow=True)), name
    chunks = dist.report["distributed"]["chunks"]
    seeded = [c for c in chunks if c["seeded"]]
    assert seeded, "no chunk started from the merged orders"
    finished_orders = {tuple(c["order"]["sel"]) for c in chunks}
    for c in seeded:
        assert tuple(c["seeded"]["sel"]) in finished_orders
    # The cut-flow stays consistent whatever order each chunk ran: every
    # event meets the path's first filter in some order.
    steps = dist.cutflow["sel"].steps
    assert sum(s.seen for s in steps) >= dist.events


def test_later_chunks_start_from_the_merged_statistics(client: Any, files: dict[str, list[str]]) -> None:
    """With adaptive ordering, chunks dispatched after others finished start
    from what those chunks' planners measured (samples, stop counts, step
    costs), merged: they take no first probe and say so in their report;
    results are the single-process run's."""
    src = ef.source.parquet(files["parquet"], step_size=STEP)
    single = _analysis(src).run(threads=1, filter_order=FIXED)
    dist = _analysis(src).run(client=client, chunk_size=STEP, filter_order="adaptive")
    assert dist.cutflow["sel"].passed == single.cutflow["sel"].passed
    for name, h in single.histograms.items():
        assert np.array_equal(h.values(flow=True), dist.histograms[name].values(flow=True)), name
    chunks = dist.report["distributed"]["chunks"]
    started = {c["chunk"] for c in chunks if c["seeded_statistics"]}
    assert started, "no chunk started from the merged statistics"
    assert 0 not in started  # the first chunk has nobody to learn from
    finals = {
        o["chunk"]: o["reason"]
        for o in dist.report["orderings"]
        if o["reason"].startswith("in use at the end") and o["path"] == "sel"
    }
    for k, reason in finals.items():
        assert ("started from imported statistics" in reason) == (k in started), (k, reason)
    # The cut-flow's reason for the order names the chunk whose batches it counts.
    why = dist.cutflow["sel"].why
    assert "the written order was kept" in why or " batches of chunk " in why, why


def test_ordering_statistics_round_trip_and_bad_statistics(files: dict[str, list[str]]) -> None:
    """One run's ordering statistics start another (no first probe: its
    first order change comes before its first batch); statistics of other
    paths or steps are refused by name before anything runs."""
    from evflow import _evflow
    from evflow._job import run_process

    src = ef.source.parquet(files["parquet"], step_size=STEP)
    opts: dict[str, Any] = dict(threads=1, events_in_flight=None, progress=False, executor="threaded",
                                on_error="fail", trace=False, raw=True, filter_order="adaptive")  # fmt: skip
    first = run_process(_analysis(src), **opts)
    assert first.raw is not None
    stats = json.loads(first.raw["ordering_stats"])
    sel = stats["sel"]
    assert sel["steps"] == ["two_muons", "met_cut"]
    assert sum(sum(s["stops"]) for s in sel["stops"]) == first.events
    assert len(sel["samples"]) > 0 and all(c is not None for c in sel["costs"])

    # Written in the other order: matched by label.
    second = run_process(_analysis(src, written=("met_cut", "two_muons")), **opts,
                         ordering_stats=first.raw["ordering_stats"])  # fmt: skip
    assert second.cutflow["sel"].passed == first.cutflow["sel"].passed
    changes = [o for o in second.report["orderings"] if o["path"] == "sel"]
    assert "started from imported statistics" in changes[-1]["reason"]
    own = json.loads(second.raw["ordering_stats"])["sel"]
    assert sum(sum(s["stops"]) for s in own["stops"]) == second.events  # its own events only
    merged = json.loads(
        _evflow.merge_ordering_stats([first.raw["ordering_stats"], second.raw["ordering_stats"]])
    )
    assert sum(sum(s["stops"]) for s in merged["sel"]["stops"]) == first.events + second.events

    bad = {"nope": sel}
    with pytest.raises(ValueError, match="path 'nope': the analysis has no path of this name"):
        run_process(_analysis(src), **opts, ordering_stats=json.dumps(bad))
    other = {"sel": {**sel, "steps": ["two_muons", "x"]}}
    with pytest.raises(ValueError, match="path 'sel': measured on steps"):
        run_process(_analysis(src), **opts, ordering_stats=json.dumps(other))
    with pytest.raises(ValueError, match="ordering statistics"):
        run_process(_analysis(src), **opts, ordering_stats="{not json")


def test_seeded_order_keeps_the_cutflow_by_written_filter(files: dict[str, list[str]]) -> None:
    """A chunk seeded with another order lists the path's filters in that
    order; its cut-flow records, renumbered to the written positions, give
    the cut-flow of a run written in that order, under the written names."""
    import copy

    from evflow._job import run_process
    from evflow.cutflow import build
    from evflow.distributed.task import _reorder, written_steps

    src = ef.source.parquet(files["parquet"], step_size=STEP)
    reversed_run = _analysis(src, written=("met_cut", "two_muons")).run(threads=1, filter_order=FIXED)
    proc = copy.copy(_analysis(src))
    perms = _reorder(proc, {"sel": ["met_cut", "two_muons"]})
    assert perms == {0: [1, 0]}
    res = run_process(proc, threads=1, events_in_flight=None, progress=False, executor="threaded",
                      on_error="fail", trace=False, raw=True, filter_order=FIXED)  # fmt: skip
    assert res.raw is not None
    raw = res.raw
    cutflow = build([("sel", ["two_muons", "met_cut"], True)], written_steps(raw["records"], perms),
                    raw["batches"], raw["finals"], raw["failed"], True)  # fmt: skip
    assert cutflow["sel"].order == ["met_cut", "two_muons"]
    for name in ("two_muons", "met_cut"):
        assert cutflow["sel"][name] == reversed_run.cutflow["sel"][name]
    assert [s.filter for s in cutflow["sel"].steps] == ["two_muons", "met_cut"]


def test_progress_over_the_job_and_dashboard(client: Any, capsys: pytest.CaptureFixture[str]) -> None:
    src = ef.source.synthetic(4_000, step_size=STEP)
    calls: list[tuple[int, int]] = []
    r = _analysis(src).run(client=client, chunk_size=STEP, progress=lambda c, e: calls.append((c, e)))
    assert calls == [(k, STEP * k) for k in range(1, 5)] and r.events == 4_000
    _analysis(src).run(client=client, progress=True)
    err = capsys.readouterr().err
    assert f"Dask dashboard at {client.dashboard_link}" in err
    assert "4000/4000 events" in err and "chunks" in err


def test_feed_tail_every_event_once_and_identical(client: Any, files: dict[str, list[str]]) -> None:
    """The default chunking cuts chunks as they are dispatched: long first,
    short at the tail; every batch is in exactly one chunk, in order, and
    the merged results are the single-process run's."""
    from evflow.distributed.chunks import ChunkFeed, batch_steps, chunk_starts, gather_meta, read_meta

    src = ef.source.parquet(files["parquet"], step_size=500)
    metas = gather_meta(src, ["nJet"], lambda paths: [read_meta(src, p, ["nJet"]) for p in paths])
    steps = batch_steps(src, metas)
    starts = chunk_starts(src, metas, steps)
    for timed in (None, 1e-6, 1e-3):
        feed = ChunkFeed(steps, "parquet", starts, workers=2)
        chunks = []
        while (ch := feed.next()) is not None:
            chunks.append(ch)
            if timed is not None:
                feed.observe(ch.events, ch.events * timed, overhead=0.0)
        assert [s for ch in chunks for s in ch.steps] == steps  # each batch once, in order
        assert [ch.index for ch in chunks] == list(range(len(chunks)))
        assert [ch.first_batch for ch in chunks] == [steps.index(ch.steps[0]) for ch in chunks]
        assert all(starts[ch.first_batch] for ch in chunks)  # at row-group starts
        if timed != 1e-6:  # (cheap work: two chunks of at least min_seconds)
            assert chunks[0].events > chunks[-1].events, [ch.events for ch in chunks]
    # Timed: a chunk is at least min_seconds of work, at most max_seconds.
    feed = ChunkFeed([("f", a, a + 100) for a in range(0, 100_000, 100)], "synthetic", workers=2)
    feed.observe(1000, 1.0)  # 1 ms per event
    feed.min_seconds = 0.5
    sizes = [ch.events for ch in feed]
    assert min(sizes[:-1]) >= 500 and max(sizes) <= 5000 and sum(sizes) == 100_000
    # A run: identical to one process, in several chunks, shrinking at the tail.
    single = _analysis(src).run(threads=1, filter_order=FIXED)
    dist = _analysis(src).run(client=client, filter_order=FIXED)
    _same(single, dist)
    got = dist.report["distributed"]["chunks"]
    assert len(got) >= 4 and got[0]["events"] > got[-1]["events"]
    assert [c["first_batch"] for c in got] == sorted(c["first_batch"] for c in got)


def test_unweighted_histograms_fold_on_the_worker(files: dict[str, list[str]]) -> None:
    """A chunk hands over one part for an unweighted histogram (counts add
    exactly in any grouping) and every batch's part for a weighted one."""
    import cloudpickle

    from evflow.distributed.chunks import Chunk
    from evflow.distributed.task import run_chunk

    src = ef.source.synthetic(4_000, step_size=STEP)
    chunk = Chunk(0, tuple(("<synthetic>", a, a + STEP) for a in range(0, 4_000, STEP)), "synthetic")
    options = {"threads": 1, "skims": []}
    r = run_chunk(cloudpickle.dumps(_analysis(None)), "fold", src, chunk, options)
    parts = r["raw"]["hist_parts"]
    assert len(parts["jet_pt"]) == 1 and len(parts["met"]) == 1 and len(parts["mll"]) == 4
    assert r["overhead_s"] >= 0
    single = _analysis(src).run(threads=1)
    assert np.array_equal(
        parts["jet_pt"][0][1].values(flow=True), single.histograms["jet_pt"].values(flow=True)
    )
    # Dask's nanny sets MALLOC_TRIM_THRESHOLD_: the worker fixes the mmap threshold.
    import platform
    import subprocess
    import sys

    code = "from evflow.distributed.task import tune_malloc; print(tune_malloc())"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    plain = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    nanny = subprocess.run([sys.executable, "-c", code], env={**env, "MALLOC_TRIM_THRESHOLD_": "65536"},
                           capture_output=True, text=True)  # fmt: skip
    assert plain.stdout.strip() == "False"
    glibc = platform.libc_ver()[0] == "glibc"
    assert nanny.stdout.strip() == ("True" if glibc else "False"), nanny.stderr


def test_a_skim_read_back_into_itself_is_refused_and_kept(client: Any, tmp_path: Path) -> None:
    """A distributed skim as both the input and the output of a job: refused
    before the job, no part deleted (it was emptied, then the job failed
    with a part that "does not exist")."""
    data = tmp_path / "in.parquet"
    pq.write_table(pa.table({"met": np.arange(3000.0)}), data, row_group_size=STEP)
    skim = tmp_path / "skim"

    def analysis(source: ef.source.Source) -> ef.Process:
        proc = ef.Process("again")
        proc.source = source
        proc.output(ef.output.parquet(skim, columns=["met"]))
        return proc

    analysis(ef.source.parquet(data, step_size=STEP)).run(client=client, chunk_size=STEP)
    before = sorted(os.listdir(skim))
    assert len(before) == 4 and read_skim(str(skim))["met"].to_numpy().tolist() == list(range(3000))
    for run in (lambda p: p.run(client=client, chunk_size=STEP), lambda p: p.run(threads=1)):
        with pytest.raises(ef.ConfigurationError, match=r"skim '.*skim' is the input directory '.*skim'"):
            run(analysis(ef.source.parquet(skim, step_size=STEP)))
        assert sorted(os.listdir(skim)) == before
    assert read_skim(str(skim))["met"].to_numpy().tolist() == list(range(3000))


def test_skim_parts_of_files_of_different_branch_types_agree(client: Any, tmp_path: Path) -> None:
    """A branch float32 in one file and float64 in the next: every part is
    written as float64 (exact), whatever chunk; a product bool in one chunk
    and int64 in another fails the job at merge, naming both chunks."""
    import uproot

    rng = np.random.default_rng(5)
    files = []
    for name, dtype in (("f32", np.float32), ("f64", np.float64)):
        path = tmp_path / f"{name}.root"
        with uproot.recreate(path) as f:
            f["tr"] = {"met": (rng.random(2000) * 100 + 1e-9).astype(dtype)}
        files.append(str(path))
    proc = ef.Process("types")
    proc.source = ef.source.root(files, tree="tr", step_size=STEP)
    proc.output(ef.output.parquet(tmp_path / "skim", columns=["met"]))
    proc.run(client=client, chunk_size=STEP)
    parts = sorted(p for p in os.listdir(tmp_path / "skim") if p.endswith(".parquet"))
    assert len(parts) == 4
    assert {str(pq.read_schema(tmp_path / "skim" / p).field("met").type) for p in parts} == {"double"}
    ref = np.concatenate([uproot.open(f)["tr"]["met"].array(library="np").astype(np.float64) for f in files])
    assert np.array_equal(read_skim(str(tmp_path / "skim"))["met"].to_numpy(), ref)

    mixed = ef.Process("mixed")
    mixed.source = ef.source.root(files, tree="tr", step_size=STEP)

    @mixed.producer(consumes=["met"], produces=["v"])
    def v(ev: ef.Events) -> Any:
        return ev.met > 50 if ev.info.index == 0 else (ev.met * 10).astype(np.int64)

    mixed.output(ef.output.parquet(tmp_path / "mixed", columns=["v"]))
    with pytest.raises(
        ef.ConfigurationError,
        match=r"column 'v' is bool in the part of chunk 0 but int64 in the part of chunk \d",
    ):
        mixed.run(client=client, chunk_size=STEP)
    assert not (tmp_path / "mixed").exists() or os.listdir(tmp_path / "mixed") == []


def test_skim_parts_of_a_product_of_two_widths_are_widened_as_one_process(
    client: Any, tmp_path: Path
) -> None:
    """A product float32 on the first file's events and float64 on the
    second's: whatever the chunks, the distributed skim is float64 and equals
    the single-process skim (the parts written as float32 are rewritten;
    before, the job failed or passed depending on where chunks were cut)."""
    paths = []
    for name, dtype in (("f32", np.float32), ("f64", np.float64)):
        path = tmp_path / f"{name}.parquet"
        pq.write_table(pa.table({"x": (np.arange(3000) * 0.37).astype(dtype)}), path, row_group_size=STEP)
        paths.append(str(path))

    def make(out: Path) -> ef.Process:
        proc = ef.Process("widths")
        proc.source = ef.source.parquet(paths, step_size=STEP)

        @proc.producer(consumes=["x"], produces=["y"])
        def y(ev: ef.Events) -> Any:
            return ev.x * 2  # the input's width

        proc.output(ef.output.parquet(out, columns=["y"]))
        return proc

    make(tmp_path / "one.parquet").run(threads=1)
    make(tmp_path / "dist").run(client=client, chunk_size=STEP)
    one = pq.read_table(tmp_path / "one.parquet")
    dist = read_skim(str(tmp_path / "dist"))
    assert one.schema.field("y").type == pa.float64()
    assert dist.schema.field("y").type == pa.float64()
    assert np.array_equal(dist["y"].to_numpy(), one["y"].to_numpy())
    parts = [p for p in os.listdir(tmp_path / "dist") if p.endswith(".parquet")]
    assert {str(pq.read_schema(tmp_path / "dist" / p).field("y").type) for p in parts} == {"double"}
    assert all(not p.startswith(".") for p in os.listdir(tmp_path / "dist")), "no temporary file left"
