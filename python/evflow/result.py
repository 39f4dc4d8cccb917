"""What a run returns."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .cutflow import CutFlow

#: The files :meth:`Result.save` writes into its directory.
SAVED = {
    "report": "report.json",
    "cutflow": "cutflow.json",
    "cutflow_text": "cutflow.txt",
    "histograms": "histograms.pkl",
    "result": "result.json",
}


def _restored(data: Any) -> dict[str, Any]:
    """The attributes ``result.json`` holds, checked (``TypeError`` /
    ``ValueError`` for a file that is not one :meth:`Result.save` wrote)."""
    if not isinstance(data, dict):
        raise TypeError(f"result.json holds {type(data).__name__}, not an object")
    out: dict[str, Any] = {}
    if "process" in data:
        out["process"] = str(data["process"])
    if "events" in data:
        out["events"] = int(data["events"])
    if "wall_s" in data:
        out["wall_s"] = float(data["wall_s"])
    out["outputs"] = {str(k): int(v) for k, v in dict(data.get("outputs", {})).items()}
    out["failed_batches"] = [int(b) for b in data.get("failed_batches", [])]
    out["skipped_files"] = [str(f) for f in data.get("skipped_files", [])]
    out["skipped_chunks"] = [dict(c) for c in data.get("skipped_chunks", [])]
    return out


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

    def plot(
        self, directory: str | os.PathLike[str] = ".", *, names: str | Sequence[str] | None = None
    ) -> list[str]:
        """Writes one PNG per histogram into ``directory`` (only those
        ``names``: one name or a list; an unknown name is refused); returns
        the paths."""
        from .errors import ConfigurationError
        from .plot import plot_histograms

        if names is None:
            chosen = dict(self.histograms)
        else:
            wanted = [names] if isinstance(names, str) else list(names)
            missing = [n for n in wanted if n not in self.histograms]
            if missing:
                raise ConfigurationError(
                    f"Result.plot: no histogram {', '.join(repr(n) for n in missing)} "
                    f"(histograms: {', '.join(self.histograms) or 'none'})"
                )
            chosen = {n: self.histograms[n] for n in dict.fromkeys(wanted)}
        return plot_histograms(chosen, directory, title_prefix=self.process)

    def save(self, directory: str | os.PathLike[str]) -> dict[str, str]:
        """Writes ``report.json``, ``cutflow.json``, ``cutflow.txt``,
        ``histograms.pkl`` and ``result.json`` (process, events, wall time,
        outputs, failed batches, skipped files and chunks) into
        ``directory`` (made if needed; files of those names there are
        replaced). ``python -m evflow plot DIRECTORY`` draws the histograms
        saved there."""
        import pickle

        from . import _report_json as report_json
        from ._out_files import make_directory
        from .errors import EvflowError

        d = make_directory(os.fspath(directory), "Result.save")
        files = {key: os.path.join(d, name) for key, name in SAVED.items()}
        writers: dict[str, Any] = {
            "report": lambda f: f.write(report_json.dumps(self.report, indent=2).encode()),
            "cutflow": lambda f: f.write(json.dumps(self.cutflow.to_dict(), indent=2).encode()),
            "cutflow_text": lambda f: f.write(self.cutflow.table().encode()),
            "result": lambda f: f.write(json.dumps(self._fields(), indent=2, default=str).encode()),
            "histograms": lambda f: pickle.dump(self.histograms, f),
        }
        # Every file is written beside its final name first and renamed once
        # all are written: a save that fails (a full disk) leaves the
        # directory as it was, never one result's report beside another's
        # histograms.
        staged = {key: f"{path}.partial-{os.getpid()}" for key, path in files.items()}
        try:
            for key, write in writers.items():
                try:
                    with open(staged[key], "wb") as f:
                        write(f)
                except OSError as e:
                    raise EvflowError(f"Result.save: cannot write '{files[key]}': {e.strerror or e}") from e
            for key, path in files.items():
                os.replace(staged[key], path)
        finally:
            for tmp in staged.values():
                if os.path.exists(tmp):
                    os.remove(tmp)
        return files

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> Result:
        """The result :meth:`save` wrote into ``directory``: its cut-flow,
        histograms, report, outputs, failed batches and skipped files and
        chunks (a directory saved without ``result.json``, by an earlier
        version: events and wall time from the report, the rest empty). The
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
            fields: dict[str, Any] = {}
            if os.path.isfile(files["result"]):
                with open(files["result"]) as f:
                    fields = _restored(json.load(f))
        except (OSError, ValueError, KeyError, TypeError, pickle.UnpicklingError) as e:
            raise InputError(f"cannot read the saved result in '{d}': {type(e).__name__}: {e}") from None
        return cls(
            **{
                "process": str(report.get("process", "")),
                "cutflow": cutflow,
                "histograms": histograms,
                "report": report,
                # The engine's "events" are batches; the run's events and wall
                # time are kept beside them.
                "events": int(report.get("events_processed", report.get("events", 0)) or 0),
                "wall_s": float(report.get("wall_s_python", report.get("wall_s", 0.0)) or 0.0),
                **fields,
            }
        )

    def _fields(self) -> dict[str, Any]:
        """What ``result.json`` keeps: the attributes the report does not."""
        return {
            "process": self.process,
            "events": self.events,
            "wall_s": self.wall_s,
            "outputs": self.outputs,
            "failed_batches": self.failed_batches,
            "skipped_files": self.skipped_files,
            "skipped_chunks": self.skipped_chunks,
        }

    def summary(self) -> str:
        """A short text summary: events, throughput, cut-flow (and why each
        reorderable path ran in its order)."""
        r = self.report
        lines = [
            f"process '{self.process}': {self.events} events in {self.wall_s:.3f} s "
            f"({self.throughput:,.0f} ev/s) on "
            + (_count(r["processes"], "process", "processes") + " × " if "processes" in r else "")
            + _count(r.get("threads"), "thread", "threads")
            + ", "
            f"{_count(r.get('batches'), 'batch', 'batches')}, peak RSS {r.get('peak_rss_bytes', 0) / 2**20:.0f} MiB"
            + (" (interrupted: reading stopped early)" if r.get("interrupted") else ""),
        ]
        if len(self.cutflow):
            lines.append(self.cutflow.table().rstrip())
        # The engine chose these orders: say why, as the report would.
        lines.extend(f"order of path '{p.path}': {p.why}" for p in self.cutflow if p.reorderable and p.why)
        failed = r.get("failed_events") or []
        if failed:
            # on_error="skip": a failed module drops its whole batch.
            were = "was" if len(failed) == 1 else "were"
            lines.append(
                f"{_count(len(failed), 'batch', 'batches')} failed and {were} left out (on_error='skip'):"
            )
            lines.extend(
                f"  module '{f.get('module')}'"
                + (f" on path '{f['path']}'" if f.get("path") else "")
                + f": {f.get('message')}"
                for f in failed[:10]
            )
            if len(failed) > 10:
                lines.append(f"  ... and {len(failed) - 10} more (result.report['failed_events'])")
        lines.extend(left_out_lines(self))
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


def left_out_lines(result: Result) -> list[str]:
    """What a run left out, for its summary: the chunks skipped
    (``on_error="skip-chunk"``), each with its files' entries and error,
    and the input files left out (``skip_bad_files``), each with the
    entries that could not be read, if it opened, and why."""
    lines = []
    chunks = result.skipped_chunks
    if chunks:
        events = sum(int(b) - int(a) for ch in chunks for _f, a, b in ch.get("entries", []))
        were = "was" if len(chunks) == 1 else "were"
        lines.append(
            f"{_count(len(chunks), 'chunk', 'chunks')} {were} left out (on_error='skip-chunk'), {events} events:"
        )
        for ch in chunks:
            where = "; ".join(f"file '{f}', entries {a}-{int(b) - 1}" for f, a, b in ch.get("entries", []))
            lines.append(f"  chunk {ch.get('chunk')} ({where}): {ch.get('error')}")
    files = result.skipped_files
    if files:
        were = "was" if len(files) == 1 else "were"
        lines.append(f"{_count(len(files), 'input file', 'input files')} {were} left out (skip_bad_files):")
        entries = result.report.get("skipped_files") or []
        if len(entries) != len(files) or not all(isinstance(e, dict) for e in entries):
            entries = [{"file": f} for f in files]
        for e in entries:
            span = e.get("entries")
            where = f" (entries {span[0]}-{span[1] - 1} could not be read)" if span and len(span) == 2 else ""
            why = f": {e['error']}" if e.get("error") else ""
            lines.append(f"  {e.get('file')}{where}{why}")
    return lines
