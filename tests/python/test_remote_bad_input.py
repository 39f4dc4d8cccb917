"""A remote producer given bad input says what is wrong instead of running
on with a surprise: an option of the wrong type is refused when the
``Remote`` is made, a remote implementation that cannot be pickled is
refused before any event runs, and one the cluster cannot load (a module
the scheduler or the workers do not have) fails its batches once, named,
instead of being retried and quietly run locally request after request."""

from __future__ import annotations

import importlib
import sys
import threading
import warnings
from typing import Any

import cloudpickle
import numpy as np
import pytest

import evflow as ef
from conftest import remote_analysis
from evflow.remote import Remote

distributed = pytest.importorskip("distributed")

# Shipped by value: the workers need not import this module.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"timeout_s": "5"}, r"Remote\(timeout_s='5'\) takes a number of seconds, not str"),
        ({"timeout_s": float("nan")}, r"Remote\(timeout_s=nan\) takes a number of seconds"),
        ({"max_in_flight": "2"}, r"Remote\(max_in_flight='2'\) takes a whole number, not str"),
        ({"max_in_flight": 1.5}, r"Remote\(max_in_flight=1.5\) takes a whole number, not float"),
        ({"combine": True}, r"Remote\(combine=True\) takes a whole number, not bool"),
        ({"retries": 0.5}, r"Remote\(retries=0.5\) takes a whole number"),
        ({"retries": -1}, r"Remote\(retries=-1\) must be 0 or more"),
        ({"max_payload_bytes": "1GB"}, r"Remote\(max_payload_bytes='1GB'\) takes a whole number"),
        ({"required": "no"}, r"Remote\(required='no'\) takes True or False"),
        ({"resources": ["GPU"]}, r"Remote\(resources=\['GPU'\]\) takes a mapping of resource names"),
        ({"resources": {"GPU": "1"}}, r"'GPU': '1' is not a resource name with a positive amount"),
    ],
)
def test_an_option_of_the_wrong_type_is_refused_naming_it(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ef.ConfigurationError, match=message):
        Remote(resources=options.pop("resources", {"GPU": 1}), **options)


def test_numpy_numbers_are_accepted() -> None:
    spec = Remote(resources={"GPU": np.int64(1)}, max_in_flight=np.int32(3), timeout_s=np.float64(2.5))
    assert (spec.max_in_flight, spec.timeout_s) == (3, 2.5)


def test_a_remote_implementation_that_cannot_be_pickled_is_refused_before_any_event(gpu_cluster: Any) -> None:
    lock = threading.Lock()
    calls: list[int] = []

    def with_lock(ev: Any) -> Any:
        calls.append(len(ev))
        with lock:
            return np.asarray(ev.MET_pt, dtype=np.float64) * 2

    with distributed.Client(gpu_cluster, set_as_default=False) as c:
        spec = Remote(resources={"GPU": 1}, mode="remote", client=c, fn=with_lock)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no RemoteNotice: refused, not run locally
            with pytest.raises(
                ef.ConfigurationError,
                match=r"module 'met2': its remote implementation '.*with_lock' cannot be sent to a Dask "
                r"worker: it cannot be pickled \(TypeError: cannot pickle '_thread.lock' object\)",
            ):
                remote_analysis(spec).run(threads=1)
    assert calls == []


class _NeedsAbsentModule:
    """A remote implementation whose pickle refers to a module the cluster
    lacks (as a function of the analysis file when the scheduler cannot
    import that file): it pickles here, and fails to load on the cluster."""

    def __call__(self, ev: Any) -> Any:
        return np.asarray(ev.MET_pt, dtype=np.float64) * 2

    def __reduce__(self) -> tuple[Any, ...]:
        return (importlib.import_module, ("evflow_trial_absent_module",))


def test_a_remote_implementation_the_cluster_cannot_load_fails_once_named(gpu_cluster: Any) -> None:
    with distributed.Client(gpu_cluster, set_as_default=False) as c:
        spec = Remote(resources={"GPU": 1}, mode="remote", client=c, fn=_NeedsAbsentModule(), combine=1)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            with pytest.raises(ef.ModuleError) as e:
                remote_analysis(spec).run(threads=1)
    text = str(e.value)
    assert "module 'met2': the Dask cluster could not load its remote implementation" in text
    assert "ModuleNotFoundError: No module named 'evflow_trial_absent_module'" in text
    assert "not retried" in text
    assert not [w for w in seen if issubclass(w.category, ef.remote.RemoteNotice)], "not run locally"
