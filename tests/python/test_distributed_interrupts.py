"""Ctrl-C during a distributed run (the 2-worker cluster of conftest's `client`): a
first interrupt gives the partial result of the chunks handed out, as a
single-process run does; a second one aborts and no chunk still running
leaves a part that a later run or a reader takes for its own. Also: a
corrupt input basket raises the single-process run's error class."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import cloudpickle
import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import evflow as ef
from evflow.distributed import MANIFEST, read_skim

distributed = pytest.importorskip("distributed")

# The analyses below are shipped by value: workers need not import this module.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

EVENTS, STEP, CHUNK = 8_000, 500, 1_000  # 8 chunks of 2 batches


def _analysis(skim: Path | None, delay: float) -> ef.Process:
    proc = ef.Process("slow")
    proc.source = ef.source.synthetic(EVENTS, step_size=STEP, seed=5)

    @proc.producer(consumes=["MET_pt"], produces=["m"])
    def m(ev: ef.Events) -> np.ndarray:
        time.sleep(delay)
        return np.asarray(ev.MET_pt, dtype=np.float64)

    proc.histogram("m", bins=20, range=(0, 200))
    if skim is not None:
        proc.output(ef.output.parquet(str(skim), columns=["m"]))
    return proc


def _run(proc: ef.Process, c: Any, signals: int) -> tuple[BaseException | None, Any]:
    """Runs ``proc`` on ``c``, sending this process ``signals`` SIGINTs when
    the first chunk is done; returns what it raised (a KeyboardInterrupt is
    caught here: pytest would end the session) and the result, if any."""
    sent = []

    def progress(chunks: int, _events: int) -> None:
        if chunks >= 1 and not sent:
            sent.append(True)
            for _ in range(signals):
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)  # the handler runs between the two

    try:
        return None, proc.run(client=c, chunk_size=CHUNK, progress=progress)
    except KeyboardInterrupt as e:
        return e, None


def _idle(c: Any, timeout: float = 30.0) -> None:
    """Waits until no task executes on the workers (cancelled chunks that
    were running go on there after the client gave up on them)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        busy = c.run(lambda dask_worker: len(dask_worker.state.executing))
        if not any(busy.values()):
            return
        time.sleep(0.1)
    raise AssertionError("the workers are still busy")


def _visible(d: Path) -> list[str]:
    return sorted(n for n in os.listdir(d) if not n.startswith("."))


def test_first_interrupt_gives_the_partial_result_and_its_skim(client: Any, tmp_path: Path) -> None:
    skim = tmp_path / "skim"
    error, _ = _run(_analysis(skim, 0.3), client, signals=1)
    assert isinstance(error, ef.Interrupted), f"{type(error).__name__}: {error}"
    res = error.result
    assert res.report["interrupted"] is True
    chunks = res.report["distributed"]["chunks"]
    assert [c["chunk"] for c in chunks] == list(range(len(chunks))), "the chunks handed out, in order"
    assert 0 < res.events == sum(c["events"] for c in chunks) < EVENTS, "no chunk after the interrupt"
    assert res.histograms["m"].sum(flow=True) == res.events
    # The skim holds those events' rows exactly: the manifest, the parts, any reader.
    with open(skim / MANIFEST) as f:
        manifest = json.load(f)
    assert manifest["rows"] == res.events == res.outputs[str(skim)]
    assert _visible(skim) == sorted([MANIFEST, *(p["file"] for p in manifest["parts"] if p["file"])])
    full = _analysis(tmp_path / "one.parquet", 0.0).run(threads=1)
    want = pq.read_table(tmp_path / "one.parquet").column("m").to_numpy()[: res.events]
    assert np.array_equal(read_skim(str(skim)).column("m").to_numpy(), want)
    assert ds.dataset(skim, format="parquet").to_table().num_rows == res.events
    h = res.histograms["m"].copy()
    h.reset()
    h.fill(want)  # the histogram of those events (as one process fills it)
    assert np.array_equal(h.values(flow=True), res.histograms["m"].values(flow=True))
    assert full.events == EVENTS


def test_second_interrupt_aborts_and_no_running_chunk_leaves_a_part(client: Any, tmp_path: Path) -> None:
    skim = tmp_path / "skim"
    first = _analysis(skim, 0.0).run(client=client, chunk_size=CHUNK)  # an earlier skim there
    assert first.events == EVENTS and len(_visible(skim)) == 1 + EVENTS // CHUNK
    error, _ = _run(_analysis(skim, 0.3), client, signals=2)
    assert isinstance(error, KeyboardInterrupt), error
    _idle(client)  # the chunks that were running when it aborted ended
    assert _visible(skim) == [], "no part of the aborted run (nor of the earlier skim) under a part's name"
    assert isinstance(error, ef.errors.Aborted), f"{type(error).__name__}: {error}"
    assert ds.dataset(skim, format="parquet").count_rows() == 0
    # A later run into the directory: what it lists is what is there.
    again = _analysis(skim, 0.0).run(client=client, chunk_size=2 * CHUNK)
    _idle(client)
    with open(skim / MANIFEST) as f:
        manifest = json.load(f)
    assert _visible(skim) == sorted([MANIFEST, *(p["file"] for p in manifest["parts"])])
    assert ds.dataset(skim, format="parquet").count_rows() == again.events == EVENTS
    assert read_skim(str(skim)).num_rows == EVENTS


def test_finish_skim_keeps_only_the_parts_of_its_manifest(tmp_path: Path) -> None:
    """Files named as parts but not in the manifest (an earlier run's late
    part, a staged part of another run) are removed when a run finishes;
    the run's own staged parts take their final names."""
    from evflow.distributed.skims import finish_skim

    d = tmp_path / "skim"
    d.mkdir()
    table = pa.table({"q": pa.array([1.0, 2.0])})
    schema = bytes(table.schema.serialize().to_pybytes())
    pq.write_table(table, d / "part-00000.parquet")
    pq.write_table(table, d / "part-00030.parquet")  # an interrupted run's late part
    parts = [{"chunk": 0, "file": "part-00000.parquet", "rows": 2, "entries": []}]
    assert finish_skim(str(d), ef.Process("p"), ["q"], parts, schema) == 2
    assert sorted(os.listdir(d)) == [MANIFEST, "part-00000.parquet"]
    assert ds.dataset(d, format="parquet").count_rows() == 2

    from evflow.distributed.task import staged_name

    pq.write_table(table, d / staged_name("part-00001.parquet", "1234567890123456"))
    pq.write_table(table, d / staged_name("part-00002.parquet", "9999999999999999"))  # another run's
    parts = [{"chunk": 1, "file": "part-00001.parquet", "rows": 2, "entries": []}]
    assert finish_skim(str(d), ef.Process("p"), ["q"], parts, schema, "1234567890123456") == 2
    assert sorted(os.listdir(d)) == [MANIFEST, "part-00001.parquet"]
    assert read_skim(str(d)).num_rows == ds.dataset(d, format="parquet").count_rows() == 2


def _corrupt_root(path: Path) -> Path:
    """A ROOT file of 10 baskets of 100 entries whose fourth basket of
    branch 'x' is corrupt (its compressed bytes overwritten)."""
    import uproot

    with uproot.recreate(path, compression=uproot.ZLIB(1)) as f:
        f.mktree("events", {"x": np.float64})
        for s in range(0, 1_000, 100):
            f["events"].extend({"x": (np.arange(s, s + 100) % 37) * 1.5})
    seek = int(uproot.open(path)["events"]["x"].member("fBasketSeek")[3])
    data = bytearray(path.read_bytes())
    data[seek + 120 : seek + 160] = b"Z" * 40
    path.write_bytes(bytes(data))
    return path


def test_a_corrupt_basket_raises_the_single_process_error_class(client: Any, tmp_path: Path) -> None:
    path = _corrupt_root(tmp_path / "bad.root")

    def proc() -> ef.Process:
        p = ef.Process("bad")
        p.source = ef.source.root([str(path)], tree="events", step_size=100)
        p.histogram("x", bins=10, range=(0, 60))
        return p

    with pytest.raises(ef.JobError) as one:
        proc().run(threads=1)
    with pytest.raises(ef.JobError, match=r"entries 300-399") as dist:
        proc().run(client=client)
    assert type(one.value) is type(dist.value) is ef.errors.SourceError
    assert dist.value.kind == one.value.kind == "source"
