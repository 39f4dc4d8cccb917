"""What a run returns."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from .cutflow import CutFlow

#: The files :meth:`Result.save` writes into its directory.
SAVED = {
    "report": "report.json",
    "cutflow": "cutflow.json",
    "cutflow_text": "cutflow.txt",
    "histograms": "histograms.pkl",
}


def _count(n: object, one: str, many: str) -> str:
    """``1 thread``, ``2 threads``."""
    return f"{n} {one if n == 1 else many}"


@dataclass
class Result:
    """The outcome of :meth:`evflow.Process.run`.

    Attributes:
        cutflow: per path and filter, events seen and passed (:class:`~evflow.cutflow.CutFlow`).
        histograms: ``{name: hist.Hist}``, merged over every batch.
        report: the engine's report (``dict``): throughput, per-module calls and
            time (``calls`` counts batches), per-path batch counts, CPU time, peak RSS.
        outputs: ``{path: rows written}`` of the Parquet skims.
        failed_batches: batches left out with ``on_error="skip"``.
        events: events processed.
        wall_s: wall-clock seconds of the run.
        skipped_files: input files left out (``skip_bad_files=True``).
        skipped_chunks: chunks left out (distributed run with ``on_error="skip-chunk"``):
            one dict per chunk with its index, files and entry ranges, and the error.
    """

    process: str
    cutflow: CutFlow
    histograms: dict[str, Any]
    report: dict[str, Any]
    outputs: dict[str, int] = field(default_factory=dict)
    failed_batches: list[int] = field(default_factory=list)
    events: int = 0
    wall_s: float = 0.0
    skipped_files: list[str] = field(default_factory=list)
    skipped_chunks: list[dict[str, Any]] = field(default_factory=list)
    #: engine records and histogram parts per batch (``run_process(raw=True)``)
    raw: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def throughput(self) -> float:
        """Events per second of wall time."""
        return self.events / self.wall_s if self.wall_s > 0 else 0.0

    def plot(self, directory: str | os.PathLike[str] = ".", *, names: list[str] | None = None) -> list[str]:
        """Writes one PNG per histogram into ``directory``; returns the paths."""
        from .plot import plot_histograms

        chosen = {k: v for k, v in self.histograms.items() if names is None or k in names}
        return plot_histograms(chosen, directory, title_prefix=self.process)

    def save(self, directory: str | os.PathLike[str]) -> dict[str, str]:
        """Writes ``report.json``, ``cutflow.json``, ``cutflow.txt`` and
        ``histograms.pkl`` into ``directory`` (made if needed; files of
        those names there are replaced). ``python -m evflow plot DIRECTORY``
        draws the histograms saved there."""
        import pickle

        from ._out_files import make_directory

        d = make_directory(os.fspath(directory), "Result.save")
        files = {key: os.path.join(d, name) for key, name in SAVED.items()}
        with open(files["report"], "w") as f:
            json.dump(self.report, f, indent=2)
        with open(files["cutflow"], "w") as f:
            json.dump(self.cutflow.to_dict(), f, indent=2)
        with open(files["cutflow_text"], "w") as f:
            f.write(self.cutflow.table())
        tmp = files["histograms"] + ".partial"
        with open(tmp, "wb") as f:
            pickle.dump(self.histograms, f)
        os.replace(tmp, files["histograms"])
        return files

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> Result:
        """The result :meth:`save` wrote into ``directory``: its cut-flow,
        histograms and report (events and wall time from the report). The
        histograms are a pickle: load only directories you trust."""
        import pickle

        from .errors import InputError

        d = os.fspath(directory)
        files = {key: os.path.join(d, name) for key, name in SAVED.items()}
        missing = [files[k] for k in ("report", "cutflow", "histograms") if not os.path.isfile(files[k])]
        if missing:
            raise InputError(f"'{d}' is not a saved result (Result.save): no {', '.join(missing)}")
        try:
            with open(files["report"]) as f:
                report = json.load(f)
            with open(files["cutflow"]) as f:
                cutflow = CutFlow.from_dict(json.load(f))
            with open(files["histograms"], "rb") as f:
                histograms = pickle.load(f)
        except (OSError, ValueError, KeyError, TypeError, pickle.UnpicklingError) as e:
            raise InputError(f"cannot read the saved result in '{d}': {type(e).__name__}: {e}") from None
        return cls(
            process=str(report.get("process", "")),
            cutflow=cutflow,
            histograms=histograms,
            report=report,
            # The engine's "events" are batches; the run's events and wall
            # time are kept beside them.
            events=int(report.get("events_processed", report.get("events", 0)) or 0),
            wall_s=float(report.get("wall_s_python", report.get("wall_s", 0.0)) or 0.0),
        )

    def summary(self) -> str:
        """A short text summary: events, throughput, cut-flow."""
        r = self.report
        lines = [
            f"process '{self.process}': {self.events} events in {self.wall_s:.3f} s "
            f"({self.throughput:,.0f} ev/s) on "
            + (_count(r["processes"], "process", "processes") + " × " if "processes" in r else "")
            + _count(r.get("threads"), "thread", "threads")
            + ", "
            f"{r.get('batches')} batches, peak RSS {r.get('peak_rss_bytes', 0) / 2**20:.0f} MiB"
            + (" (interrupted: reading stopped early)" if r.get("interrupted") else ""),
        ]
        if len(self.cutflow):
            lines.append(self.cutflow.table().rstrip())
        failed = r.get("failed_events") or []
        if failed:
            # on_error="skip": a failed module drops its whole batch.
            lines.append(f"{len(failed)} batches failed and were left out (on_error='skip'):")
            lines.extend(f"  module '{f.get('module')}': {f.get('message')}" for f in failed[:10])
            if len(failed) > 10:
                lines.append(f"  ... and {len(failed) - 10} more (result.report['failed_events'])")
        devices = r.get("devices") or {}
        if devices.get("notice"):
            lines.append(devices["notice"])
        for label, m in (devices.get("modules") or {}).items():
            lines.append(
                f"device module '{label}' on {devices['device']} ({m['split_mode']}, device fraction now "
                f"{m['device_fraction']:.0%}): {m['host_events']} events on the host, {m['device_events']} on "
                f"the device in {m['launches']} launches, {(m['bytes_in'] + m['bytes_out']) / 1e6:.1f} MB moved, "
                f"device busy {m['device_s']:.3f} s"
            )
        for path, rows in self.outputs.items():
            lines.append(f"wrote {rows} events to {path}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"<Result '{self.process}': {self.events} events, {len(self.cutflow)} paths, "
            f"histograms {sorted(self.histograms)}, outputs {sorted(self.outputs)}>"
        )
