"""A ROOT source's steps are whole clusters (each basket is read by one
batch only), of about ``step_size`` entries; only a cluster of 1.5 steps or
more is split, into equal parts. Checked on random cluster
layouts and on a file."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import evflow as ef
from evflow.source._root import _cluster_steps


def test_clusters_near_the_step_are_never_cut() -> None:
    # Clusters of 2500 read in steps of 3000: before, the last two clusters
    # were one group cut in equal halves at 7438, inside a cluster.
    bounds = [0, 2500, 5000, 7500, 9876]
    assert _cluster_steps(bounds, 3000, 0, 9876) == [(0, 2500), (2500, 5000), (5000, 7500), (7500, 9876)]
    # A cluster of 1.4 steps stays whole; small clusters group up to about a step.
    assert _cluster_steps([0, 1400, 1700], 1000, 0, 1700) == [(0, 1400), (1400, 1700)]
    assert _cluster_steps(list(range(0, 1001, 100)), 300, 0, 1000) == [
        (0, 300),
        (300, 600),
        (600, 900),
        (900, 1000),
    ]


def test_random_cluster_layouts_give_whole_clusters_of_about_a_step() -> None:
    rng = np.random.default_rng(11)
    for _ in range(500):
        step = int(rng.integers(50, 2000))
        # Clusters below 1.5 steps: none is split.
        sizes = rng.integers(1, (3 * step + 1) // 2, size=int(rng.integers(1, 40)))
        bounds = [0, *np.cumsum(sizes).tolist()]
        n = bounds[-1]
        steps = _cluster_steps(bounds, step, 0, n)
        assert steps[0][0] == 0 and steps[-1][1] == n
        assert all(a < b for a, b in steps)
        assert all(steps[i][1] == steps[i + 1][0] for i in range(len(steps) - 1))
        edges = {b for _, b in steps}
        assert edges <= set(bounds), (step, bounds, steps)
        # No step is longer than twice the step.
        assert max(b - a for a, b in steps) <= 2 * step


def test_a_cluster_of_a_step_and_a_half_or_more_is_split_in_equal_parts() -> None:
    steps = _cluster_steps([0, 300, 10_300, 10_500], 1000, 0, 10_500)
    assert steps[0] == (0, 300) and steps[-1] == (10_300, 10_500)
    inner = steps[1:-1]
    assert len(inner) == 10 and inner[0][0] == 300 and inner[-1][1] == 10_300
    assert {b - a for a, b in inner} == {1000}
    assert _cluster_steps([0, 200, 1700], 1000, 0, 1700) == [(0, 200), (200, 950), (950, 1700)]


@pytest.fixture(scope="module")
def clustered_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, np.ndarray]:
    uproot = pytest.importorskip("uproot")
    path = tmp_path_factory.mktemp("clusters") / "clusters.root"
    x = np.random.default_rng(5).normal(size=9876)
    with uproot.recreate(path) as f:
        f.mktree("t", {"x": np.float64})
        for a in range(0, len(x), 2500):  # clusters of 2500 entries, the last 2376
            f["t"].extend({"x": x[a : a + 2500]})
    return str(path), x


def test_each_batch_of_a_file_is_whole_clusters(clustered_file: tuple[str, np.ndarray]) -> None:
    path, x = clustered_file
    proc = ef.Process("clusters")
    proc.source = ef.source.root(path, tree="t", step_size=3000)
    ranges: list[tuple[int, int]] = []

    @proc.analyzer(consumes=["x"])
    def record(ev: ef.Events) -> Any:
        ranges.append((ev.info.entry_start, ev.info.entry_stop))

    proc.histogram("x", bins=20, range=(-3, 3))
    result = proc.run(threads=1)
    assert sorted(ranges) == [(0, 2500), (2500, 5000), (5000, 7500), (7500, 9876)]
    assert np.array_equal(result.histograms["x"].values(), np.histogram(x, bins=20, range=(-3, 3))[0])
