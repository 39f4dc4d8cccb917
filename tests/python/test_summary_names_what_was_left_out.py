"""``result.summary()`` says what a run left out: the chunks skipped with
``on_error="skip-chunk"`` (their files, entries and errors) and the input
files left out with ``skip_bad_files`` (and the entries that could not be
read), not only the events counted; a saved result's summary says it too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import evflow as ef

pytest.importorskip("distributed")
uproot = pytest.importorskip("uproot")


def _files(d: Path) -> list[str]:
    out = []
    for k in range(3):
        path = d / f"f{k}.root"
        with uproot.recreate(path) as f:
            f["t"] = {"event": np.arange(k * 2000, (k + 1) * 2000, dtype=np.int64)}
        out.append(str(path))
    return out


def _analysis(files: list[str], bad_event: int) -> ef.Process:
    proc = ef.Process("left_out")
    proc.source = ef.source.root(files, tree="t", step_size=500)

    @proc.filter(consumes=["event"])
    def picky(ev: ef.Events) -> Any:
        if np.any(ev.event == bad_event):
            raise ValueError(f"cannot handle event {bad_event}")
        return ev.event % 2 == 0

    proc.path("sel", [picky])
    proc.histogram("event", bins=10, range=(0, 6000), after="sel")
    return proc


def test_skipped_chunks_are_in_the_summary(client: Any, tmp_path: Path) -> None:
    files = _files(tmp_path)
    result = _analysis(files, 2_700).run(client=client, chunk_size=1000, on_error="skip-chunk")
    (chunk,) = result.skipped_chunks
    text = result.summary()
    assert "1 chunk was left out (on_error='skip-chunk'), 1000 events:" in text, text
    ((file, start, stop),) = chunk["entries"]
    assert file == files[1] and start <= 700 < stop, chunk
    assert f"chunk {chunk['chunk']} (file '{files[1]}', entries {start}-{stop - 1}): " in text, text
    assert "ValueError: cannot handle event 2700" in text, text
    result.save(str(tmp_path / "saved"))
    assert "1 chunk was left out" in ef.Result.load(str(tmp_path / "saved")).summary()


def test_skipped_files_are_in_the_summary(tmp_path: Path) -> None:
    files = _files(tmp_path)
    missing = str(tmp_path / "missing.root")
    result = _analysis([files[0], missing, files[2]], -1).run(threads=1, skip_bad_files=True)
    text = result.summary()
    assert "1 input file was left out (skip_bad_files):" in text, text
    assert f"  {missing}: " in text and "does not exist" in text, text
