"""evflow: columnar HEP analyses on a multi-threaded event-processing engine.

Quick start::

    import evflow as ef

    proc = ef.Process("zmumu")
    proc.source = ef.source.root("uproot-Zmumu.root", tree="events", step_size=50_000)

    @proc.filter(consumes=["Q1", "Q2"])
    def opposite_charge(ev):
        return ev.Q1 * ev.Q2 < 0

    proc.path("selection", [opposite_charge])
    proc.histogram("M", bins=60, range=(60, 120), after="selection", label="m(μμ) [GeV]")
    result = proc.run(threads=2)
    print(result.cutflow)

See docs/python.md for the full guide.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import errors, output, source
from ._process import Analyzer, Filter, Histogram, Path, Process, Producer
from .errors import (
    Aborted,
    ConfigurationError,
    DeviceError,
    EvflowError,
    InputError,
    Interrupted,
    JobError,
    MissingBranchError,
    MissingFileError,
    MissingTreeError,
    ModuleError,
    ModuleOutputError,
    SourceError,
)

if TYPE_CHECKING:
    from ._runtime import BatchData, Events
    from .cutflow import CutFlow
    from .result import Result

__version__ = "0.1.0"

__all__ = [
    "Aborted",
    "Analyzer",
    "BatchData",
    "ConfigurationError",
    "CutFlow",
    "DeviceError",
    "Events",
    "EvflowError",
    "Filter",
    "Histogram",
    "InputError",
    "Interrupted",
    "JobError",
    "MissingBranchError",
    "MissingFileError",
    "MissingTreeError",
    "ModuleError",
    "ModuleOutputError",
    "Path",
    "Process",
    "Producer",
    "Result",
    "SourceError",
    "data",
    "device",
    "distributed",
    "errors",
    "output",
    "remote",
    "source",
]


def __getattr__(name: str) -> Any:
    # Heavy modules (numpy, awkward) load only when used.
    if name == "Events":
        from ._runtime import Events

        return Events
    if name == "BatchData":  # what the reader of a custom source returns
        from ._runtime import BatchData

        return BatchData
    if name == "CutFlow":
        from .cutflow import CutFlow

        return CutFlow
    if name == "Result":
        from .result import Result

        return Result
    if name in ("data", "plot", "cli", "cutflow", "result", "distributed", "remote", "device"):
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'evflow' has no attribute {name!r}")
