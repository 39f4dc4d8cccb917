"""The offload decision rule and its measurements, without a cluster."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evflow.errors import ConfigurationError
from evflow.remote import Remote
from evflow.remote._policy import Measurements, Policy
from evflow.remote._worker import RemoteEvents, concat, run_request


def test_round_trip_fit_recovers_overhead_and_rate() -> None:
    m = Measurements()
    m.observe_remote(100, 5.0)  # warm-up request: provisional only
    rng = np.random.default_rng(1)
    for n in rng.integers(100, 10_000, 30):
        m.observe_remote(int(n), 0.003 + 2e-6 * n)
    assert m.overhead_s == pytest.approx(0.003, rel=1e-6)
    assert m.remote_s_per_event == pytest.approx(2e-6, rel=1e-6)
    m.observe_local(1000, 0.02)  # 20 us per event
    assert m.break_even_events() == pytest.approx(0.003 / (20e-6 - 2e-6))


def measured(o: float, b: float, c: float) -> Measurements:
    m = Measurements()
    m.observe_remote(1, 1.0)
    for n in (10, 1000, 10, 1000, 500):
        m.observe_remote(n, o + b * n)
    m.observe_local(100, 100 * c)
    return m


def test_decision_balances_the_two_sides() -> None:
    m = measured(0.005, 1e-6, 10e-6)
    p = Policy("adaptive", m, probe_every=10**9)
    p.configure(cores=2, events_in_flight=8, max_in_flight=2)
    # remote: 1e-6 + 0.005 / (5000 * 2) = 1.5 us per event; local: 2 cores at 10 us
    f = p.share(5000)
    assert f == pytest.approx((1 / 1.5e-6) / (1 / 1.5e-6 + 2 / 10e-6))
    sides = [p.choose(5000, 0, True) for _ in range(200)]
    assert sides.count("remote") / 200 == pytest.approx(f, abs=0.02)
    # batches out fill the slots beyond one per core: the next stays local
    assert p.choose(5000, 6, True) == "local"
    assert p.choose(5000, 0, False) == "local"
    m.observe_send(5000, 5000 * 1e-6)  # sending costs 1 us of the 10 us saved
    assert p.share(5000) == pytest.approx(10e-6 / (2 * 1.5e-6 + 10e-6 - 1e-6))


def test_sending_dearer_than_computing_stays_local() -> None:
    m = measured(0.005, 1e-9, 10e-9)  # a task of 10 ns per event
    m.observe_send(1000, 1000 * 50e-9)  # preparing the payload costs 50 ns per event
    p = Policy("adaptive", m, probe_every=10**9)
    p.configure(cores=2, events_in_flight=8, max_in_flight=2)
    assert [p.choose(10**6, 0, True) for _ in range(20)] == ["local"] * 20


def test_decision_explores_both_sides() -> None:
    m = Measurements()
    p = Policy("adaptive", m, probe_every=4)
    assert p.choose(100, 0, True) == "local"  # nothing measured: measure locally first
    m.observe_local(100, 1.0)
    assert p.choose(100, 1, True) == "local"  # a probe is out: wait for its answer
    assert p.choose(100, 0, True) == "remote"  # then probe the remote
    m.observe_remote(100, 0.5)
    m.observe_remote(100, 50.0)  # remote now very slow
    sides = [p.choose(100, 0, True) for _ in range(10)]
    assert sides.count("local") >= 7 and "remote" in sides, "a probe keeps the remote estimate current"
    assert p.summary()["target_remote_share"] < 0.05


def test_fixed_modes() -> None:
    m = Measurements()
    assert Policy("remote", m).choose(1, 10**9, True) == "remote"
    assert Policy("local", m).choose(10**9, 0, True) == "local"
    assert Policy("remote", m).choose(1, 0, False) == "local"


def test_remote_spec_is_checked() -> None:
    with pytest.raises(ConfigurationError, match="mode"):
        Remote(mode="gpu")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="max_in_flight"):
        Remote(max_in_flight=0)
    with pytest.raises(ConfigurationError, match="GPU"):
        Remote(resources={"GPU": 0})


def test_worker_side_concatenates_and_splits() -> None:
    import awkward as ak

    parts = [
        (2, {"x": np.array([1.0, 2.0]), "j": ak.Array([[1.0], [2.0, 3.0]])}),
        (1, {"x": np.array([3.0]), "j": ak.Array([[]])}),
    ]

    def fn(ev: RemoteEvents) -> dict[str, object]:
        assert len(ev) == 3 and ev.fields == ["j", "x"]
        return {"a": ev.x * 2, "b": ak.num(ev.j)}

    out = run_request(fn, "m", ["a", "b"], parts)
    assert [list(v[0]) for v in out["values"]] == [[2.0, 4.0], [6.0]]
    assert [ak.to_list(v[1]) for v in out["values"]] == [[1, 2], [0]]
    assert isinstance(concat([np.zeros(2), np.ones(1)]), np.ndarray)
    bad = run_request(lambda ev: ev.x[:1], "m", ["a"], parts)
    assert "1 entries for 3 events" in bad["error"]
    missing = run_request(lambda ev: ev.y, "m", ["a"], parts)
    assert "did not declare" in missing["error"]


def test_queueing_behind_another_request_is_not_overhead() -> None:
    m = Measurements()
    m.observe_remote(1, 1.0, 0.5)  # warm-up
    m.observe_remote(1000, 0.013, 0.010, alone=True)  # 3 ms on the wire, 10 us per event on the worker
    m.observe_remote(1000, 0.023, 0.010, alone=False)  # waited 10 ms behind another request
    assert m.wire_s == pytest.approx(0.003)
    assert m.compute_s_per_event == pytest.approx(1e-5)
    m.observe_local(1000, 0.04)
    p = Policy("adaptive", m)
    p.configure(cores=1, events_in_flight=4, max_in_flight=1)
    remote_rate, local_rate = 1 / (1e-5 + 0.003 / 1000), 1 / 4e-5
    assert p.share(1000) == pytest.approx(remote_rate / (remote_rate + local_rate))


def test_break_even_is_the_batch_size_above_which_offload_pays() -> None:
    """``o / (c − b − s)`` of the fitted values: an idle remote returns a
    batch of more events sooner than a core computes it, of fewer later."""
    m = measured(0.004, 2e-6, 10e-6)
    m.observe_send(1000, 1000 * 1e-6)
    o, b, c, s = m.overhead_s, m.remote_s_per_event, m.local_s_per_event, m.send_s_per_event
    assert (o, b) == (pytest.approx(0.004), pytest.approx(2e-6))
    n = m.break_even_events()
    assert n == pytest.approx(o / (c - b - s)) and n == pytest.approx(0.004 / 7e-6)
    for size, pays in ((0.9 * n, False), (1.1 * n, True)):
        assert (s * size + m.remote_time(int(size)) < c * size) is pays
    assert Policy("adaptive", m).summary()["break_even_events"] == n, "the report shows the same value"


def test_break_even_never_and_unknown() -> None:
    never = measured(0.004, 12e-6, 10e-6)  # the remote costs more per event than a core
    assert never.break_even_events() == math.inf
    dear = measured(0.004, 2e-6, 10e-6)
    dear.observe_send(1000, 1000 * 9e-6)  # sending eats the gain
    assert dear.break_even_events() == math.inf
    assert measured(0.0, 2e-6, 10e-6).break_even_events() == pytest.approx(0.0, abs=1e-6), (
        "no overhead: all pay"
    )
    remote_only = Measurements()  # mode="remote": no local call
    for n in (1, 100, 300, 100):
        remote_only.observe_remote(n, 0.004 + 1e-5 * n)
    assert remote_only.break_even_events() is None
    warm_up_only = Measurements()
    warm_up_only.observe_local(100, 1e-3)
    warm_up_only.observe_remote(100, 5.0)
    assert warm_up_only.break_even_events() is None, "the warm-up request alone is no fit"


def test_break_even_of_requests_all_of_one_size() -> None:
    """A round trip longer than computing the batch locally (6 ms against
    2 ms) need not mean that offloading never pays: with the worker's
    compute reported, the fit keeps the 1 us per event it costs and counts
    the rest as overhead, so batches above 5000 events pay."""
    m = Measurements()
    for _ in range(6):  # the first is the warm-up
        m.observe_remote(1000, 0.006, compute_s=0.001)
    m.observe_local(1000, 0.002)
    assert m.remote_s_per_event == pytest.approx(1e-6) and m.overhead_s == pytest.approx(0.005)
    assert m.break_even_events() == pytest.approx(5000)


def test_policy_docstring_example() -> None:
    import doctest

    from evflow.remote import _policy

    failures, tried = doctest.testmod(_policy, verbose=False)[:2]
    assert tried > 0 and failures == 0
