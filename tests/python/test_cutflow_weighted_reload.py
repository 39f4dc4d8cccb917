"""A saved result says whether its run was weighted: a weighted run whose
weights sum to its event count (here 0.5 and 1.5 in turn) reloads with its
weighted columns. Before, ``CutFlow.from_dict`` guessed from the sums
differing from the counts; a result saved before the flag still loads so."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import evflow as ef
from evflow.result import Result


def _run(tmp_path: Path, weights: np.ndarray) -> Result:
    n = len(weights)
    data = tmp_path / "events.parquet"
    pq.write_table(pa.table({"x": np.arange(n, dtype=np.float64), "w": weights}), data)
    proc = ef.Process("weighted", weight="w")
    proc.source = ef.source.parquet(str(data), step_size=64)

    @proc.filter(consumes=["x"])
    def low(ev: ef.Events) -> np.ndarray:
        return ev.x < n // 2

    proc.path("sel", [low])
    return proc.run()


def test_a_weighted_run_whose_weights_sum_to_the_count_reloads_weighted(tmp_path: Path) -> None:
    weights = np.tile([0.5, 1.5], 100)
    result = _run(tmp_path, weights)
    flow = result.cutflow["sel"]
    assert result.cutflow.weighted
    assert flow.weighted_events == flow.events == 200
    assert flow.weighted_passed == float(weights[:100].sum())
    result.save(tmp_path / "saved")
    back = Result.load(tmp_path / "saved")
    assert back.cutflow.weighted
    assert back.cutflow.to_dict() == result.cutflow.to_dict()
    assert back.cutflow.table() == result.cutflow.table()


def test_a_result_saved_without_the_flag_still_loads(tmp_path: Path) -> None:
    result = _run(tmp_path, np.tile([0.5, 2.0], 100))
    result.save(tmp_path / "saved")
    path = tmp_path / "saved" / "cutflow.json"
    saved = json.loads(path.read_text())
    for p in saved.values():
        p.pop("weighted", None)
    path.write_text(json.dumps(saved))
    back = Result.load(tmp_path / "saved")
    assert back.cutflow.weighted  # the sums differ from the counts
    assert back.cutflow.table() == result.cutflow.table()
