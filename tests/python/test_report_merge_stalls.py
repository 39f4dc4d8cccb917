"""A distributed report keeps the longest stalls of the whole job, as one
process keeps its own."""

from __future__ import annotations

from typing import Any

from evflow.distributed.merge import merge_reports


def test_merging_keeps_the_longest_stalls_of_all_chunks() -> None:
    """A stall's wait is ``waited_s`` (as the engine reports it): the merged
    report keeps the 10 longest of every chunk, longest first."""

    def chunk(waits: list[float]) -> dict[str, Any]:
        return {
            "events": 1,
            "stalls": [
                {"module": "m", "run": 1, "lumi": 1, "event": 1, "waited_s": w, "reason": "serial queue"}
                for w in waits
            ],
        }

    out = merge_reports([chunk([0.1 * i for i in range(10)]), chunk([5.0, 0.05])], [0, 1], [0, 1])
    assert [s["waited_s"] for s in out["stalls"]] == [5.0, *(0.1 * i for i in range(9, 0, -1))]
