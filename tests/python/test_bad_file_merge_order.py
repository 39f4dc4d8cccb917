"""The client side of ``skip_bad_files`` on a cluster, whatever order the
chunks finish in: :class:`FileFeed` cuts chunks at file boundaries and
hands out no chunk of a file left out; :class:`FileMerger` takes back a
file's chunks merged before its failure, so the weighted sums of the other
files are bit for bit those of a merge without the file."""

from __future__ import annotations

import itertools
from typing import Any

import hist
import numpy as np

from evflow.distributed.bad_files import FileFeed, FileMerger
from evflow.distributed.chunks import Chunk, ChunkFeed
from evflow.distributed.merge import Merger
from evflow.errors import JobError
from evflow.source._common import unreadable


def _chunk_result(seed: int, chunk: Chunk) -> dict[str, Any]:
    """A chunk's result: one weighted histogram part per batch (random
    float weights: the order of the additions shows in the bits)."""
    rng = np.random.default_rng(seed)
    parts = []
    for k in range(len(chunk.steps)):
        h = hist.Hist.new.Reg(10, 0, 1).Weight()
        h.fill(rng.uniform(size=200), weight=rng.uniform(0.1, 3.0, size=200))
        parts.append((k, h))
    n = len(chunk.steps)
    return {
        "raw": {
            "batches": [(k, 10, 10.0) for k in range(n)],
            "records": [(k, 0, 0, 0, 10, 5, 10.0, 5.0) for k in range(n)],
            "finals": [(k, [(5, 5.0)]) for k in range(n)],
            "failed": [],
            "hist_parts": {"h": parts},
        },
        "skims": [(f"part-{chunk.index}", 5 * n)],
        "events": 10 * n,
        "report": {},
        "worker": "w",
        "wall_s": 0.0,
        "order": {},
    }


def _chunks(files: str) -> list[Chunk]:
    """One chunk of two batches per letter of ``files`` (a file's chunks in a row)."""
    out: list[Chunk] = []
    for f in files:
        start = sum(1 for c in out if c.steps[0][0] == f) * 2000
        steps = ((f, start, start + 1000), (f, start + 1000, start + 2000))
        out.append(Chunk(len(out), steps, "root", first_batch=2 * len(out)))
    return out


def _failure(file: str) -> JobError:
    e = JobError("reading input failed", kind="source")
    e.__cause__ = unreadable(f"reading file '{file}': corrupt", file, 1000, 2000)
    return e


def test_a_file_is_taken_back_whatever_order_its_chunks_finish_in() -> None:
    """Files a, b, c (two chunks each); b's second chunk fails on its data.
    Every order of arrival of the six chunks gives the totals, events,
    cut-flow records and skim parts of merging a and c alone."""
    import os

    chunks = _chunks("aabbcc")
    clean = Merger(["h"], 1)
    for i, ch in enumerate(c for c in chunks if c.steps[0][0] != "b"):
        clean.add(Chunk(i, ch.steps, ch.kind, first_batch=ch.first_batch), _chunk_result(ch.index, ch))
    expected = clean.totals["h"]

    for order in itertools.permutations(range(6)):
        # A merge adds into the first part it gets: fresh results each time.
        results = {ch.index: _chunk_result(ch.index, ch) for ch in chunks}
        merger = FileMerger(["h"], 1)
        for i in order:
            if i == 3:
                assert merger.leave_out(chunks[i], _failure("b")) == []  # nothing to run again
            else:
                merger.add(chunks[i], results[i])
        got = merger.totals["h"]
        assert np.array_equal(got.values(flow=True), expected.values(flow=True)), order
        assert np.array_equal(got.variances(flow=True), expected.variances(flow=True)), order
        assert merger.events == clean.events == 80, order
        assert len(merger.records) == len(clean.records) and len(merger.batches) == 8, order
        assert [p["file"] for p in merger.skims[0]] == ["part-0", "part-1", "part-4", "part-5"], order
        assert [s["chunk"] for s in merger.summaries] == [0, 1, 4, 5], order
        assert merger.bad_files == {os.path.abspath("b")}
        assert [s["entries"] for s in merger.left_out] == [[1000, 2000]], order


def test_a_failure_of_another_kind_or_file_is_not_a_bad_file() -> None:
    chunk = _chunks("a")[0]
    merger = FileMerger(["h"], 0)
    assert merger.leave_out(chunk, JobError("module 'm' failed", kind="module")) is None
    assert merger.leave_out(chunk, _failure("elsewhere")) is None
    assert merger.bad_files == set() and merger.pending == {}


def test_chunks_are_cut_at_file_boundaries_and_a_bad_file_is_not_handed_out() -> None:
    steps = [(f, a, a + 10) for f in "abc" for a in range(0, 30, 10)]  # three batches per file
    plan = [Chunk(0, tuple(steps[0:4]), "root", 0), Chunk(1, tuple(steps[4:8]), "root", 4)]
    plan.append(Chunk(2, tuple(steps[8:]), "root", 8))  # a a a b | b b c c | c
    feed = ChunkFeed(steps, "root", fixed=plan)
    merger = FileMerger(["h"], 0)
    cut = FileFeed(feed, merger)
    first = [cut.next() for _ in range(2)]
    assert [(c.index, c.first_batch, [s[0] for s in c.steps]) for c in first if c] == [
        (0, 0, ["a", "a", "a"]),
        (1, 3, ["b"]),
    ]
    assert first[1] is not None and merger.leave_out(first[1], _failure("b")) == []
    rest = list(iter(cut.next, None))
    # b's other batches are never handed out; the numbering goes on.
    assert [(c.index, c.first_batch, [s[0] for s in c.steps]) for c in rest] == [
        (2, 6, ["c", "c"]),
        (3, 8, ["c"]),
    ]
    assert cut.total_events == 90  # the feed's own figures


def test_whole_small_files_stay_in_one_chunk_and_a_bad_one_runs_again_without_it() -> None:
    """Files a-e of one batch each, planned as chunks a b c | d e: the
    chunks stay as planned (no chunk per file); b failing in the first
    gives that chunk to run again, in its place, without b."""
    steps = [(f, 0, 10) for f in "abcde"]
    plan = [Chunk(0, tuple(steps[:3]), "root", 0), Chunk(1, tuple(steps[3:]), "root", 3)]
    merger = FileMerger(["h"], 1)
    cut = FileFeed(ChunkFeed(steps, "root", fixed=plan), merger)
    first = cut.next()
    assert first is not None and [s[0] for s in first.steps] == ["a", "b", "c"]
    (again,) = merger.leave_out(first, _failure("b")) or [None]
    assert again is not None and (again.index, again.first_batch) == (0, 0)
    assert [s[0] for s in again.steps] == ["a", "c"]
    assert merger.pending == {}  # nothing merged for it yet: its replacement comes in its place
    second = cut.next()
    assert second is not None and (second.index, [s[0] for s in second.steps]) == (1, ["d", "e"])
    assert cut.next() is None
    # A second bad file in the chunk run again: run again without both.
    (third,) = merger.leave_out(again, _failure("c")) or [None]
    assert third is not None and [s[0] for s in third.steps] == ["a"]
    merger.add(third, _chunk_result(0, third))
    merger.add(second, _chunk_result(1, second))
    assert merger.events == 30 and [s["chunk"] for s in merger.summaries] == [0, 1]
