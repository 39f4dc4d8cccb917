"""Command line: ``python -m evflow run analysis.py`` (also ``evflow-py``).

``run`` executes a Python analysis file, finds the :class:`~evflow.Process`
it defines (a module-level ``proc``, or the only Process), runs it with the
given options and prints the summary and cut-flow. The options follow the
core ``evflow run``: ``--threads/-j``, ``--events-in-flight/-k``,
``--events/-n``, ``--executor``, ``--on-error``, ``--report``, ``--trace``,
``--quiet/-q``; ``--processes N`` or ``--scheduler tcp://host:port`` run
it on Dask (see docs/distributed.md).

``plot`` writes PNG histograms from the ``histograms.pkl`` that
``run --save DIR`` (or :meth:`Result.save`) wrote.

``data`` is the dataset tool (see ``python -m evflow.data --help``).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import threading
from collections.abc import Sequence
from typing import Any

from . import _report_json as report_json


def _load_process(path: str, name: str | None) -> Any:
    """The Process of the analysis file (see :func:`._analysis_file.load_analysis`)."""
    from ._analysis_file import load_analysis

    return load_analysis(path, name)


def _check_written(args: argparse.Namespace) -> None:
    """What the run writes at its end can be written: checked before the
    job starts (a long job must not end without its report)."""
    from ._out_files import check_directories, check_files
    from .result import SAVED

    inputs = [("analysis file", args.analysis)] + [("input file", f) for f in args.input or []]
    saved = [("--save", os.path.join(args.save, name)) for name in SAVED.values()] if args.save else []
    check_files([("--report", args.report), ("--trace", args.trace)], inputs, saved)
    check_directories([("--save", args.save), ("--plot", args.plot)])


def _check_not_a_skim(args: argparse.Namespace, proc: Any) -> None:
    """``--report`` and ``--trace`` name no skim of the analysis (written
    last, either would replace it)."""
    from .errors import ConfigurationError

    skims = {os.path.realpath(out.path): out.path for out, _sel in proc.outputs}
    for option, path in [("--report", args.report), ("--trace", args.trace)]:
        if path and os.path.realpath(path) in skims:
            raise ConfigurationError(
                f"{option} {path} is the skim '{skims[os.path.realpath(path)]}' the analysis writes: "
                "it would be overwritten"
            )


def _run(args: argparse.Namespace) -> int:
    from ._out_files import write_text
    from .errors import ConfigurationError, Interrupted

    _check_written(args)
    proc = _load_process(args.analysis, args.process)
    _check_not_a_skim(args, proc)
    src = proc.source
    if src is not None:
        if args.input:
            from . import source as sources

            if hasattr(src, "tree"):
                proc.source = sources.auto(args.input, tree=src.tree, step_size=src.step_size)
            else:
                proc.source = sources.auto(args.input, step_size=src.step_size)
            src = proc.source
        if args.step_size is not None:
            src.step_size = args.step_size
        if args.events is not None:
            if hasattr(src, "events"):
                src.events = min(src.events, args.events)
            else:
                src.max_events = args.events
    on_error = {"skip-event": "skip", "skip-chunk": "skip-chunk"}.get(args.on_error, "fail")
    show = not args.quiet and sys.stderr.isatty() if args.progress is None else args.progress
    if args.processes is not None or args.scheduler is not None:
        from ._analysis_file import AnalysisFile
        from .distributed import run as run_distributed

        if args.trace:
            raise ConfigurationError("--trace is not available with --processes / --scheduler")
        if args.device != "auto" or args.device_split != "adaptive":
            # As proc.run refuses them there: they were silently dropped.
            raise ConfigurationError(
                "--device and --device-split apply to single-process runs: with --processes / --scheduler "
                "each worker runs device modules on its own device (as --device auto, adaptive split)"
            )
        # The workers load the analysis file themselves (its modules need
        # not be picklable), from its current contents (the factory pickles
        # with their fingerprint); the chunks come from the source set up here.
        job = functools.partial(
            run_distributed,
            proc,
            client=args.scheduler,
            processes=args.processes,
            threads=args.threads,
            events_in_flight=args.events_in_flight,
            progress=show,
            executor=args.executor,
            on_error=on_error,
            filter_order=args.filter_order,
            chunk_size=args.chunk_size,
            skip_bad_files=args.skip_bad_files,
            factory=AnalysisFile(args.analysis, args.process),
            dashboard=not args.quiet,
        )
    else:
        if args.on_error == "skip-chunk" or args.chunk_size:
            raise ConfigurationError("--on-error skip-chunk and --chunk-size need --processes or --scheduler")
        job = functools.partial(
            proc.run,
            threads=args.threads,
            events_in_flight=args.events_in_flight,
            progress=show,
            executor=args.executor,
            on_error=on_error,
            trace=args.trace is not None,
            filter_order=args.filter_order,
            device=args.device,
            device_split=args.device_split,
            skip_bad_files=args.skip_bad_files,
        )
    try:
        result = job()
        interrupted = False
    except Interrupted as stopped:
        # Ctrl-C: the batches read (the chunks handed out) were finished;
        # what they made is reported, saved and plotted as after a whole
        # run (the report says "interrupted"), then the exit status says so.
        result = stopped.result
        interrupted = True
    if not args.quiet:
        print(result.summary())  # with the chunks and files left out
    if args.report:
        write_text(
            args.report, report_json.dumps({k: v for k, v in result.report.items() if k != "trace"}, indent=2)
        )
    if args.trace:
        write_text(args.trace, json.dumps(result.report.get("trace", {"traceEvents": []})))
    if args.save:
        result.save(args.save)
    if args.plot:
        files = result.plot(args.plot)
        if not args.quiet:
            for p in files:
                print(f"wrote {p}")
    if interrupted:
        print(
            f"evflow: interrupted after {result.events} events; what they made is complete", file=sys.stderr
        )
        return 130
    return 0


def _plot(args: argparse.Namespace) -> int:
    import pickle

    from .errors import ConfigurationError
    from .plot import plot_histograms

    src = args.results
    if os.path.isdir(src):
        src = os.path.join(src, "histograms.pkl")
    if not os.path.isfile(src):
        raise ConfigurationError(
            f"no saved histograms at '{src}' (write them with 'run ... --save DIR' or Result.save(DIR))"
        )
    with open(src, "rb") as f:
        hists = pickle.load(f)
    if args.names:
        missing = [n for n in args.names if n not in hists]
        if missing:
            print(f"evflow: error: no histogram {missing} in {src} (have {sorted(hists)})", file=sys.stderr)
            return 2
        hists = {n: hists[n] for n in args.names}
    for p in plot_histograms(hists, args.output):
        print(f"wrote {p}")
    return 0


def _count(least: int) -> Any:
    """An argparse type: an integer of at least ``least``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, not {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}, not {value}")
        return value

    parse.__name__ = "count"
    return parse


def parser() -> argparse.ArgumentParser:
    # `evflow run x.py` (the core command line) hands over with its own name.
    prog = os.environ.get("EVFLOW_PROG") or "evflow-py"
    p = argparse.ArgumentParser(prog=prog, description="Run evflow Python analyses.")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="run a Python analysis file")
    r.add_argument("analysis", help="Python file defining an evflow Process (e.g. proc = ef.Process(...))")
    r.add_argument(
        "-j", "--threads", type=_count(1), default=None, help="worker threads (default: every core)"
    )
    r.add_argument(
        "-k",
        "--events-in-flight",
        type=_count(1),
        default=None,
        help="batches in flight (default: threads+2)",
    )
    r.add_argument("-n", "--events", type=_count(0), default=None, help="process at most this many events")
    r.add_argument(
        "--step-size", type=_count(1), default=None, help="events per batch (overrides the analysis)"
    )
    r.add_argument("--input", nargs="+", default=None, help="replace the source's files (.root or .parquet)")
    r.add_argument("--executor", choices=["threaded", "sequential"], default="threaded")
    r.add_argument(
        "--on-error",
        choices=["fail", "skip-event", "skip-chunk"],
        default="fail",
        help="fail: stop at the first module error; skip-event: leave out the failed module's whole batch "
        "(of --step-size events; listed in the summary); skip-chunk: leave out a failed chunk (with --processes "
        "or --scheduler)",
    )
    r.add_argument(
        "--processes", type=_count(1), default=None, help="run on a local Dask cluster of N worker processes"
    )
    r.add_argument(
        "--scheduler", default=None, metavar="ADDRESS", help="run on the Dask cluster at tcp://host:port"
    )
    r.add_argument(
        "--chunk-size", type=_count(1), default=None, help="events per Dask task (distributed runs)"
    )
    r.add_argument(
        "--skip-bad-files",
        action="store_true",
        help="leave out input files that cannot be read or lack a branch the job reads",
    )
    r.add_argument(
        "--filter-order",
        choices=["fixed", "adaptive", "hepframe"],
        default="adaptive",
        help="ordering policy of reorderable paths (default: adaptive)",
    )
    r.add_argument(
        "--device",
        choices=["auto", "cuda", "emulated", "none"],
        default="auto",
        help="device of modules with a device implementation (default: auto)",
    )
    r.add_argument("--device-split", default="adaptive", help="'adaptive' (default) or 'fixed:P'")
    r.add_argument(
        "--process", default=None, help="which Process of the file to run (variable or process name)"
    )
    r.add_argument("--report", default=None, help="write the JSON report here")
    r.add_argument("--trace", default=None, help="write a Chrome trace-event JSON (for Perfetto) here")
    r.add_argument("--plot", default=None, metavar="DIR", help="write PNG histograms into DIR")
    r.add_argument(
        "--save", default=None, metavar="DIR", help="write report, cut-flow and histograms into DIR"
    )
    g = r.add_mutually_exclusive_group()
    g.add_argument(
        "--progress", dest="progress", action="store_true", default=None, help="show a progress line"
    )
    g.add_argument("--no-progress", dest="progress", action="store_false")
    r.add_argument("-q", "--quiet", action="store_true", help="print only errors")
    r.set_defaults(func=_run)

    pl = sub.add_parser("plot", help="write PNG histograms saved by 'run --save DIR'")
    pl.add_argument("results", help="directory written by --save (or its histograms.pkl)")
    pl.add_argument("-o", "--output", default="plots", help="output directory (default: plots)")
    pl.add_argument("--only", dest="names", nargs="+", default=None, help="histograms to plot (default: all)")
    pl.set_defaults(func=_plot)

    sub.add_parser(
        "data", help="dataset tool: python -m evflow data resample ... (see --help)", add_help=False
    )
    return p


def _sigterm_as_interrupt() -> None:
    """SIGTERM (a batch system's, or ``kill``) stops a run as Ctrl-C does:
    gracefully first, a second one aborts (as the core ``evflow run``)."""
    import signal

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.default_int_handler)


def main(argv: Sequence[str] | None = None) -> int:
    from .errors import Aborted, EvflowError

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["data"]:
        from .data import main as data_main

        return data_main(argv[1:], prog=f"{os.environ.get('EVFLOW_PROG') or 'python -m evflow'} data")
    args = parser().parse_args(argv)
    _sigterm_as_interrupt()
    try:
        return int(args.func(args))
    except EvflowError as e:
        print(f"evflow: error: {e}", file=sys.stderr)
        cause = e.__cause__
        if cause is not None and os.environ.get("EVFLOW_TRACEBACK"):
            import traceback

            traceback.print_exception(cause)
        elif cause is not None:
            print("  (set EVFLOW_TRACEBACK=1 for the Python traceback of the cause)", file=sys.stderr)
        return 1
    except Aborted:
        print("evflow: aborted by a second interrupt; the run's outputs were removed", file=sys.stderr)
        return 134
    except KeyboardInterrupt:
        print("evflow: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
