"""Runners of modules with a device implementation: each batch is split
between the host and the device by evflow-device's split controller.

The first ``k`` events of the batch's selection (``k`` chosen by the
controller) go to the device implementation, the others to the host one;
the results are concatenated in event order. The device part is submitted
to the device's thread first, the host part then runs on the engine thread,
and the engine thread joins the device part: the two overlap, and with the
split at the floor of the bathtub both finish together, so the join waits
little.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import awkward as ak
import numpy as np

from . import _runtime as rt
from .device import Device, Launch, LaunchStats, select
from .errors import ConfigurationError, DeviceError

if TYPE_CHECKING:
    from ._process import Process

T_out = Any


def choose_device(
    proc: Process, device: str | Device | None, device_split: str
) -> tuple[Device | None, str, bool]:
    """The job's device, the notice to print, and whether the job made it
    (and closes it)."""
    from . import _evflow

    if not isinstance(device_split, str):
        # The native controller would only say "'int' object is not an instance of 'str'".
        raise ConfigurationError(
            f"device_split={device_split!r}: expected 'adaptive' or 'fixed:P' with P in 0..=100, as a string "
            f"(e.g. device_split='fixed:35'), not {type(device_split).__name__}"
        )
    try:
        _evflow.SplitController(device_split, 1)
    except ValueError as e:
        raise ConfigurationError(str(e)) from None
    if not (isinstance(device, Device) or device in (None, "auto", "cuda", "emulated", "none")):
        select(device, [])  # the error naming the choices
    modules = [m for m in proc.modules.values() if m.device is not None]
    if not modules:
        return None, "", False
    dev, notice = select(device, [m.label for m in modules if m.device_required])
    return dev, notice, not isinstance(device, Device)


def report(device: Device | None, notice: str, runners: dict[str, SplitRunner]) -> dict[str, Any]:
    """The ``devices`` section of every job's report: on the host only (no
    device module, ``device="none"``, no device found) ``device`` is None and
    ``modules`` is empty."""
    return {
        "device": device.name if device is not None else None,
        "notice": notice or None,
        "modules": {label: r.report() for label, r in runners.items()},
    }


class DeviceEvents(rt.ItemAttributes):
    """The events of the device part of a batch, as a device implementation
    sees them: ``ev.name`` is the column moved to the device (an ``xp``
    array; jagged columns are awkward arrays on the device's backend).
    Each column moves once per launch."""

    __slots__ = ("_cache", "_events", "_launch")

    def __init__(self, events: rt.Events, launch: Launch) -> None:
        self._events = events
        self._launch = launch
        self._cache: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._cache:
            self._cache[name] = self._launch.to_device(self._events[name])
        return self._cache[name]

    def __len__(self) -> int:
        return len(self._events)

    @property
    def fields(self) -> list[str]:
        return self._events.fields

    @property
    def info(self) -> rt.BatchInfo:
        return self._events.info

    @property
    def weight(self) -> Any:
        return self._launch.to_device(self._events.weight)

    def zip(self, prefix: str, *, with_name: str | None = None) -> ak.Array:
        """As :meth:`evflow.Events.zip`, of the columns on the device."""
        start = prefix + "_"
        fields = {n[len(start) :]: self[n] for n in self.fields if n.startswith(start)}
        if not fields:
            raise KeyError(f"{self._events!r} consumes no column starting with '{start}'")
        return ak.zip(fields, with_name=with_name)

    def __repr__(self) -> str:
        return f"<DeviceEvents on {self._launch.device.name}: {self._events!r}>"


class DeviceModuleStats:
    """Per module: what ran where, what the device cost."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.lock = threading.Lock()
        self.batches = 0
        self.host_events = 0
        self.device_events = 0
        self.launches = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.host_s = 0.0
        self.device_s = 0.0
        self.transfer_s = 0.0
        self.kernel_s = 0.0
        self.failed_launches = 0

    def add(self, host_events: int, host_s: float, device_events: int, st: LaunchStats | None) -> None:
        with self.lock:
            self.batches += 1
            self.host_events += host_events
            self.host_s += host_s
            if st is not None:
                self.device_events += device_events
                self.launches += 1
                self.bytes_in += st.bytes_in
                self.bytes_out += st.bytes_out
                self.device_s += st.busy_s
                self.transfer_s += st.transfer_s
                self.kernel_s += st.kernel_s

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if k != "lock"}


class WallClock:
    """The clock of the split controllers: a batch's host part and the job's
    time so far, as they measure them. A device may name another one
    (``Device._split_clock``): tests script host and device costs on a
    virtual clock, so that an adaptive split's decisions follow from the
    costs, not from the load of the machine."""

    def now(self) -> float:
        return time.perf_counter()

    def reached(self, t: float) -> None:
        """The batch's device part, joined, ended at ``t`` (its start plus
        its busy time): the wall clock is past it already."""


WALL_CLOCK = WallClock()


class SplitRunner:
    """Splits one module's batches between host and device."""

    def __init__(self, kind: str, label: str, device: Device, split: Any) -> None:
        self.what = f"{kind} '{label}'"
        self.label = label
        self.device = device
        self.split = split  # evflow._evflow.SplitController
        self.clock: WallClock = device._split_clock or WALL_CLOCK
        self.t0 = self.clock.now()
        # A device object may serve several jobs: the controller sees this job's busy time.
        self.busy0 = device.busy_s
        self.stats = DeviceModuleStats(kind)

    def report(self) -> dict[str, Any]:
        return {
            **self.stats.to_dict(),
            "split_mode": self.split.mode,
            "device_fraction": self.split.device_fraction,
            "kept_fraction": self.split.kept_fraction,
            "split_history": self.split.history(),
        }

    def run(
        self,
        data: rt.BatchData,
        sel: rt.Selection,
        host: Callable[[rt.Selection], T_out],
        device: Callable[[rt.Selection, Launch], T_out],
    ) -> tuple[T_out | None, T_out | None, int]:
        """Runs the batch's device part (its first ``k`` selected events) on
        the device and the rest on the host, overlapped; returns ``(device
        result, host result, k)``."""
        n = data.n if sel is None else len(sel)
        k = self.split.route(n)
        idx = (np.arange(n) if sel is None else sel) if 0 < k < n else sel
        dev_sel = idx if k == n else (None if k == 0 else idx[:k])  # type: ignore[index]
        host_sel = idx if k == 0 else (None if k == n else idx[k:])  # type: ignore[index]
        clock = self.clock
        fut: Future[tuple[T_out, LaunchStats]] | None = None
        submitted = clock.now()
        if k:
            fut = self.device.submit(lambda launch: device(dev_sel, launch))
        host_out: T_out | None = None
        host_s = 0.0
        try:
            if k < n:
                t = clock.now()
                host_out = host(host_sel)
                host_s = clock.now() - t
        finally:
            # Even when the host part failed, the device part ends before the batch does.
            dev_out, st = self._join(fut, data, k) if fut is not None else (None, None)
        self.stats.add(n - k, host_s, k, st)
        self.split.record_host(n - k, host_s)
        if st is not None:
            clock.reached(submitted + st.busy_s)
            self.split.record_device(k, st.busy_s)
        self.split.update(clock.now() - self.t0, self.device.busy_s - self.busy0)
        return dev_out, host_out, k

    def _join(
        self, fut: Future[tuple[T_out, LaunchStats]], data: rt.BatchData, k: int
    ) -> tuple[T_out, LaunchStats]:
        try:
            return fut.result()
        except Exception as e:
            with self.stats.lock:
                self.stats.failed_launches += 1
            raise DeviceError(
                f"device implementation of {self.what} failed on device '{self.device.name}' for batch "
                f"{data.first_batch + data.index} ({k} events of {data.where}): {type(e).__name__}: {e}"
            ) from e


def _concat(what: str, parts: list[Any]) -> Any:
    if all(isinstance(p, np.ndarray) for p in parts):
        return np.concatenate(parts)
    try:
        return ak.concatenate([ak.Array(p) if isinstance(p, np.ndarray) else p for p in parts])
    except Exception as e:
        raise rt.ModuleOutputError(f"{what}: the device and host results cannot be concatenated: {e}") from e


def producer_runner(
    label: str,
    fn: Callable[[rt.Events], Any],
    fn_device: Callable[[Any, Any], Any],
    names: frozenset[str],
    products: Sequence[str],
    produces: Sequence[str],
    runner: SplitRunner,
) -> Callable[[rt.BatchData, rt.Selection, list[tuple[rt.Selection, Any]]], list[Any]]:
    what = f"producer '{label}'"

    def run(data: rt.BatchData, sel: rt.Selection, raw: list[tuple[rt.Selection, Any]]) -> list[Any]:
        n = data.n if sel is None else len(sel)
        if n == 0:
            return [None] * len(produces)
        inputs = rt._inputs(products, raw)

        def checked(s: rt.Selection, values: list[Any], where: str) -> list[Any]:
            m = data.n if s is None else len(s)
            w = f"{what} ({where})"
            return [rt.check_array(w, f"'{p}'", v, m) for p, v in zip(produces, values, strict=True)]

        def host(s: rt.Selection) -> list[Any]:
            out = fn(rt.Events(label, data, s, names, inputs))
            return checked(s, rt.producer_values(f"{what} (host)", out, produces), "host")

        def device(s: rt.Selection, launch: Launch) -> list[Any]:
            out = fn_device(DeviceEvents(rt.Events(label, data, s, names, inputs), launch), launch.xp)
            values = rt.producer_values(f"{what} (device)", out, produces)
            return checked(s, [launch.to_host(v) for v in values], "device")

        dev, hst, _k = runner.run(data, sel, host, device)
        if dev is None or hst is None:
            return dev if hst is None else hst
        return [_concat(what, [d, h]) for d, h in zip(dev, hst, strict=True)]

    return run


def filter_runner(
    label: str,
    fn: Callable[[rt.Events], Any],
    fn_device: Callable[[Any, Any], Any],
    names: frozenset[str],
    products: Sequence[str],
    runner: SplitRunner,
) -> Callable[
    [rt.BatchData, rt.Selection, list[tuple[rt.Selection, Any]]], tuple[rt.Selection, int, float, float]
]:
    what = f"filter '{label}'"

    def run(
        data: rt.BatchData, sel: rt.Selection, raw: list[tuple[rt.Selection, Any]]
    ) -> tuple[rt.Selection, int, float, float]:
        inputs = rt._inputs(products, raw) if raw else {}

        def host(s: rt.Selection) -> np.ndarray:
            ev = rt.Events(label, data, s, names, inputs)
            return rt.as_mask(f"{what} (host)", fn(ev), len(ev))

        def device(s: rt.Selection, launch: Launch) -> np.ndarray:
            ev = rt.Events(label, data, s, names, inputs)
            mask = launch.to_host(fn_device(DeviceEvents(ev, launch), launch.xp))
            return rt.as_mask(f"{what} (device)", mask, len(ev))

        dev, hst, _k = runner.run(data, sel, host, device)
        parts = [m for m in (dev, hst) if m is not None]
        mask = parts[0] if len(parts) == 1 else np.concatenate(parts)
        return rt.narrow(data, sel, mask)

    # The decisions on a sampled batch's subsample (the planner's joint
    # statistics) come from the host implementation: a probe launches no
    # kernel of its own, and both implementations decide alike.
    run.probe = rt.filter_probe(label, fn, names, products)  # type: ignore[attr-defined]
    return run
