"""Devices for Python modules with a device implementation.

A device runs *launches*: one call of a module's device implementation on
the device part of a batch. A launch runs on the device's own worker thread
(so the host part of the same batch runs meanwhile on the engine thread),
moves the columns it reads to the device, runs the function written against
the array module ``xp``, and moves the results back, counting bytes.

* :class:`CupyDevice`: a CUDA GPU through CuPy (an optional import; evflow
  does not depend on it). ``xp`` is ``cupy``.
* :class:`EmulatedDevice`: for machines without a GPU (tests, CI). ``xp`` is
  ``numpy``; a launch takes a modelled launch latency, transfer time
  (bytes / bandwidth) and kernel time (measured time / speed-up), so the
  split has real costs to measure.

``Process.run(device=...)`` chooses: ``"auto"`` (default: a GPU when CuPy
finds one, else the host with a one-line notice), ``"cuda"`` (a GPU or a
clear error), ``"emulated"``, ``"none"`` (host only), or a device object.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

from .errors import DeviceError

T = TypeVar("T")


@dataclass
class LaunchStats:
    """What one launch cost."""

    bytes_in: int = 0
    bytes_out: int = 0
    #: seconds the device was busy with the launch (its whole modelled or measured span)
    busy_s: float = 0.0
    #: seconds of it spent moving data (modelled on the emulated device, 0 = not measured apart)
    transfer_s: float = 0.0
    #: seconds of it running the device implementation
    kernel_s: float = 0.0


def _nbytes(x: Any) -> int:
    n = getattr(x, "nbytes", None)
    return int(n) if n is not None else 0


class Launch:
    """Handed to a launch's body: the array module and the transfers, which
    are counted in :attr:`stats`."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.xp = device.xp
        self.stats = LaunchStats()

    def to_device(self, x: Any) -> Any:
        self.stats.bytes_in += _nbytes(x)
        return self.device._to_device(x)

    def to_host(self, x: Any) -> Any:
        out = self.device._to_host(x)
        self.stats.bytes_out += _nbytes(out)
        return out


class Device:
    """A device: a worker thread running launches in submission order
    (like one CUDA stream), and the device's busy time."""

    #: name used in reports and messages
    name = "device"
    #: the array module of device implementations
    xp: ModuleType
    #: private: the clock the split controllers of this device's modules
    #: measure with (``evflow._device_runner.WallClock``); None: the wall
    #: clock. Tests set a virtual one to script the costs of both sides.
    _split_clock: Any = None

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Callable[[Launch], Any], Future[Any]] | None] = (
            queue.SimpleQueue()
        )
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        #: seconds the device was busy, every module together
        self.busy_s = 0.0
        self.launches = 0

    def submit(self, body: Callable[[Launch], T]) -> Future[tuple[T, LaunchStats]]:
        """Queues ``body(launch)``; the future gives ``(its result, the
        launch's stats)`` or the exception it raised."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name=f"evflow-{self.name}", daemon=True)
                self._thread.start()
        fut: Future[Any] = Future()
        self._queue.put((body, fut))
        return fut

    def close(self) -> None:
        """Stops the worker thread after the queued launches."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join()

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            body, fut = item
            if not fut.set_running_or_notify_cancel():
                continue
            launch = Launch(self)
            error: BaseException | None = None
            result: Any = None
            try:
                result = self._run(body, launch)
            except BaseException as e:
                error = e
            # Counted before the waiting thread wakes: its split controller
            # reads the busy time right after.
            self.busy_s += launch.stats.busy_s
            self.launches += 1
            if error is not None:
                fut.set_exception(error)
            else:
                fut.set_result((result, launch.stats))

    def _run(self, body: Callable[[Launch], T], launch: Launch) -> T:
        t0 = time.perf_counter()
        try:
            return body(launch)
        finally:
            launch.stats.busy_s = launch.stats.kernel_s = time.perf_counter() - t0

    def _to_device(self, x: Any) -> Any:
        raise NotImplementedError

    def _to_host(self, x: Any) -> Any:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} '{self.name}'>"


# The command line's bounds: the longest latency 10^6 s (what a clock holds;
# the longest module time a configuration takes), the smallest rate 10^-6.
_MAX_MICROS = 1e12
_MIN_RATE = 1e-6


def _check_emulated(latency_us: Any, transfer_latency_us: Any, bandwidth_gbs: Any, speedup: Any) -> None:
    """Refuses what no device time can be made of (NaN, inf, booleans,
    negative latencies, rates of zero), naming the argument."""
    import math

    def number(name: str, v: Any) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"EmulatedDevice: {name} must be a finite number, not {v!r}")
        return float(v)

    for name, v in [("latency_us", latency_us), ("transfer_latency_us", transfer_latency_us)]:
        if not 0 <= number(name, v) <= _MAX_MICROS:
            raise ValueError(f"EmulatedDevice: {name} must be from 0 to {_MAX_MICROS:g} µs, not {v!r}")
    for name, v in [("bandwidth_gbs", bandwidth_gbs), ("speedup", speedup)]:
        if number(name, v) < _MIN_RATE:
            raise ValueError(f"EmulatedDevice: {name} must be at least {_MIN_RATE:g}, not {v!r}")


class EmulatedDevice(Device):
    """A device emulated with numpy on its own thread.

    A launch costs ``latency_us`` + ``2 × transfer_latency_us`` + bytes moved
    / ``bandwidth_gbs`` + (the device implementation's measured numpy time)
    / ``speedup``; the device thread sleeps out the modelled time. The
    numpy work itself cannot run faster than it does, so with ``speedup >
    1`` a launch lasts at least the real numpy time.
    """

    name = "emulated"

    def __init__(
        self,
        *,
        latency_us: float = 10.0,
        transfer_latency_us: float = 5.0,
        bandwidth_gbs: float = 12.0,
        speedup: float = 1.0,
    ) -> None:
        super().__init__()
        _check_emulated(latency_us, transfer_latency_us, bandwidth_gbs, speedup)
        import numpy

        self.xp = numpy
        self.latency_s = latency_us * 1e-6
        self.transfer_latency_s = transfer_latency_us * 1e-6
        self.bandwidth = bandwidth_gbs * 1e9
        self.speedup = speedup

    def _run(self, body: Callable[[Launch], T], launch: Launch) -> T:
        t0 = time.perf_counter()
        try:
            return body(launch)
        finally:
            real = time.perf_counter() - t0
            st = launch.stats
            st.transfer_s = 2 * self.transfer_latency_s + (st.bytes_in + st.bytes_out) / self.bandwidth
            st.kernel_s = real / self.speedup
            modelled = self.latency_s + st.transfer_s + st.kernel_s
            if modelled > real:
                time.sleep(modelled - real)
            st.busy_s = max(modelled, time.perf_counter() - t0)

    def _to_device(self, x: Any) -> Any:
        # A copy, as a real transfer makes: a device implementation that
        # writes into its input must not change the host's column.
        return x.copy() if hasattr(x, "copy") and not _is_awkward(x) else x

    def _to_host(self, x: Any) -> Any:
        return x

    def __repr__(self) -> str:
        return (
            f"<EmulatedDevice latency={self.latency_s * 1e6:g} µs, bandwidth={self.bandwidth / 1e9:g} GB/s, "
            f"speedup={self.speedup:g}>"
        )


def _is_awkward(x: Any) -> bool:
    return type(x).__module__.startswith("awkward")


class CupyDevice(Device):
    """A CUDA GPU through CuPy: launches run on one non-blocking CUDA stream
    from the device thread, which synchronises the stream before handing
    the results back."""

    def __init__(self, cupy: ModuleType, device_id: int = 0) -> None:
        super().__init__()
        self.xp = cupy
        self.device_id = device_id
        self.name = f"cuda:{device_id}"
        self._stream: Any = None

    def _run(self, body: Callable[[Launch], T], launch: Launch) -> T:
        cp = self.xp
        t0 = time.perf_counter()
        try:
            with cp.cuda.Device(self.device_id):
                if self._stream is None:
                    self._stream = cp.cuda.Stream(non_blocking=True)
                with self._stream:
                    out = body(launch)
                self._stream.synchronize()
                return out
        finally:
            launch.stats.busy_s = launch.stats.kernel_s = time.perf_counter() - t0

    def _to_device(self, x: Any) -> Any:
        if _is_awkward(x):
            import awkward as ak

            return ak.to_backend(x, "cuda")
        return self.xp.asarray(x)

    def _to_host(self, x: Any) -> Any:
        if _is_awkward(x):
            import awkward as ak

            return ak.to_backend(x, "cpu")
        if isinstance(x, self.xp.ndarray):
            return self.xp.asnumpy(x, stream=self._stream)
        return x


def probe_cupy() -> tuple[ModuleType | None, str]:
    """``(cupy, "")`` when CuPy imports and sees a GPU, else ``(None, why)``."""
    try:
        import cupy
    except ImportError:
        return None, "CuPy is not installed"
    except Exception as e:  # a broken CUDA installation raises anything
        return None, f"CuPy does not load: {type(e).__name__}: {e}"
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as e:
        return None, f"CuPy finds no GPU: {type(e).__name__}: {e}"
    if count == 0:
        return None, "CuPy finds no GPU"
    return cupy, ""


DeviceSpec = str | Device | None


def select(spec: DeviceSpec, required_by: list[str]) -> tuple[Device | None, str]:
    """The job's device for ``Process.run(device=spec)``: ``(device or None,
    notice)``; the notice (one line) says why device modules run on the
    host, empty when nothing needs saying. ``required_by``: modules declared
    with ``device_required=True``; without a device they make it an error."""
    if isinstance(spec, Device):
        return spec, ""
    if spec in (None, "none"):
        if required_by:
            raise DeviceError(
                f"device='none', but module(s) {', '.join(map(repr, required_by))} require a device "
                "(device_required=True)"
            )
        return None, ""
    if spec == "emulated":
        return EmulatedDevice(), ""
    if spec in ("auto", "cuda"):
        cupy, why = probe_cupy()
        if cupy is not None:
            return CupyDevice(cupy), ""
        if spec == "cuda":
            raise DeviceError(f"device='cuda' was demanded but no GPU can be used: {why}")
        if required_by:
            raise DeviceError(
                f"module(s) {', '.join(map(repr, required_by))} require a device (device_required=True) "
                f"but no GPU can be used: {why}"
            )
        return None, f"evflow: no device ({why}): device modules run on the host"
    raise DeviceError(
        f"unknown device {spec!r}: use 'auto', 'cuda', 'emulated', 'none' or an evflow.device.Device"
    )


__all__ = ["CupyDevice", "Device", "EmulatedDevice", "Launch", "LaunchStats", "probe_cupy", "select"]
