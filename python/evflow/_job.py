"""Turns a :class:`~evflow.Process` into a native engine job, runs it, and
collects the results."""

from __future__ import annotations

import json
import resource
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import _device_runner as dr
from . import _runtime as rt
from ._bad_files import bad_files_left_out, with_skipped
from ._file_gate import undo_hist
from ._fill import add_into, check_weights, describe, fill_values, flatten
from ._first_probe import FirstProbe, Steps
from ._guard_inference import announce, applied, report_inferred, union
from ._modules import Analyzer, Filter, Producer
from ._nothing_processed import fail_if_nothing_processed
from ._order_hint import with_failed_hints, with_order_hint
from ._ordered import Commit
from ._producer_events import mark_producer_events
from ._progress import _Progress
from ._report_labels import user_error, user_labels, user_name
from ._shared_probe import shared_probe
from ._shared_work import share_products
from .errors import Aborted, ConfigurationError, Interrupted, MissingBranchError, job_error, with_product_hint
from .source import Source

if TYPE_CHECKING:
    from ._device_runner import SplitRunner
    from ._modules import Histogram
    from ._process import Process
    from .device import Device
    from .output import ParquetOutput
    from .remote import Offloader
    from .result import Result


def _cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class _Plan:
    """The compiled description: engine modules, branches to read,
    accumulators."""

    def __init__(
        self,
        proc: Process,
        keep_parts: bool = False,
        *,
        device: Device | None = None,
        device_split: str = "adaptive",
        threads: int = 1,
    ) -> None:
        self.proc = proc
        #: modules with a device implementation run split between host and ``device``
        self.device = device
        self.device_split = device_split
        self.threads = threads
        self.split_runners: dict[str, SplitRunner] = {}
        #: keep every batch's histogram part (a chunk of a distributed run
        #: hands them over, to be added in the single-process order)
        self.keep_parts = keep_parts
        if proc.source is None:
            raise ConfigurationError(
                f"process '{proc.name}' has no source (set proc.source = ef.source.root(...))"
            )
        if not isinstance(proc.source, Source):
            raise ConfigurationError(
                f"process '{proc.name}': proc.source is a {type(proc.source).__name__}, not a source; "
                "set it to ef.source.root(files, tree=...), ef.source.parquet(files), "
                "ef.source.auto(files) or ef.source.synthetic(events)"
            )
        self.path_index = {name: i for i, name in enumerate(proc.paths)}

        # Products: name -> producer label (and that producer's name for it:
        # a duplicate producer runs no module of its own, see _shared_work).
        self.product_of, self.product_name, self.shared_with = share_products(proc.modules.values())
        self.branches: list[str] = []
        self._branch_set: set[str] = set()
        if proc.weight is not None:
            if proc.weight in self.product_of:
                raise ConfigurationError(
                    f"the process weight '{proc.weight}' is a product of '{self.product_of[proc.weight]}': "
                    "the process weight (of the cut-flow) is a column of the input; a computed weight "
                    f"weights histograms through histogram(..., weight='{proc.weight}')"
                )
            self._branch(proc.weight)

        # Filters: one engine module per (path, filter) occurrence.
        occurrences: dict[str, list[str]] = {}
        for path in proc.paths.values():
            for f in path.filters:
                occurrences.setdefault(f.label, []).append(path.name)
        for m in proc.modules.values():
            if isinstance(m, Filter) and m.label not in occurrences:
                raise ConfigurationError(f"filter '{m.label}' is on no path (add it with proc.path(...))")
        #: per path index, per step (written order): the filter's runner and
        #: the engine tags of the products it consumes (for the first probe)
        self.path_steps: dict[int, Steps] = {}
        self.engine_label: dict[tuple[str, str], str] = {}
        for label, paths in occurrences.items():
            for p in paths:
                self.engine_label[(p, label)] = label if len(paths) == 1 else f"{label}@{p}"

        self.modules: list[dict[str, Any]] = []
        #: holds each batch's parts until the batch succeeded
        self.commit = Commit()
        self.hists: dict[str, Any] = {}
        self.outputs: list[ParquetOutput] = []
        self.offloaders: list[Offloader] = []
        used = set(proc.modules)

        for m in proc.modules.values():
            if isinstance(m, Producer) and m.label in self.shared_with:
                continue
            if isinstance(m, Producer):
                products, names = self._consumes(m.label, m.consumes)
                if m.device is not None and self.device is not None:
                    split = self._split_runner("producer", m.label)
                    runner = dr.producer_runner(m.label, m.fn, m.device, names, products, m.produces, split)
                else:
                    runner = rt.producer_runner(m.label, m.fn, names, products, m.produces)
                self._add("producer", m.label, runner, products, m.produces, m.concurrency, m.resources)
                if m.remote is not None:
                    from .remote import Offloader

                    off = Offloader(m.label, m.remote, m.fn, names, products, m.produces)
                    self.offloaders.append(off)
                    self.modules[-1]["remote"] = off
            elif isinstance(m, Analyzer):
                products, names = self._consumes(m.label, m.consumes)
                runner = rt.analyzer_runner(m.label, m.fn, names, products, self.commit)
                self._add(
                    "analyzer", m.label, runner, products, [], m.concurrency, m.resources, after=m.after
                )
        probes: dict[str, Any] = {}  # per filter on several paths: its one probe
        for path in proc.paths.values():
            for step, f in enumerate(path.filters):
                products, names = self._consumes(f.label, f.consumes)
                engine_label = self.engine_label[(path.name, f.label)]
                if f.device is not None and self.device is not None:
                    split = self._split_runner("filter", engine_label)
                    runner = dr.filter_runner(f.label, f.fn, f.device, names, products, split)
                else:
                    runner = rt.filter_runner(f.label, f.fn, names, products)
                if len(occurrences[f.label]) > 1:  # the first probe times its own calls
                    runner.timed_probe = runner.probe  # type: ignore[attr-defined]
                    runner.probe = probes.setdefault(f.label, shared_probe(runner.probe))  # type: ignore[attr-defined]
                conc, res = f.concurrency, f.resources
                if len(occurrences[f.label]) > 1 and conc == "serial":
                    conc, res = "exclusive", [f"evflow.filter.{f.label}"]
                index = self.path_index[path.name]
                self._add("filter", engine_label, runner, products, [], conc, res, path=index, step=step)
                # The first probe calls the runner with the products it consumes.
                self.path_steps.setdefault(index, []).append((runner, self.modules[-1]["consumes"]))
        for h in proc.histograms.values():
            label = f"hist.{h.name}"
            if label in used:
                raise ConfigurationError(f"module label '{label}' clashes with histogram '{h.name}'")
            self._add_histogram(label, h)
        for i, (out, select) in enumerate(proc.outputs):
            label = f"output{i}"
            if label in used:
                raise ConfigurationError(f"module label '{label}' clashes with an output")
            self._add_output(label, out, select)
        mark_producer_events(self.modules)

    def _split_runner(self, kind: str, label: str) -> SplitRunner:
        from . import _evflow

        assert self.device is not None
        split = _evflow.SplitController(self.device_split, self.threads)
        r = dr.SplitRunner(kind, label, self.device, split)
        self.split_runners[label] = r
        return r

    def _branch(self, name: str) -> None:
        if name not in self._branch_set:
            self._branch_set.add(name)
            self.branches.append(name)

    def _consumes(self, label: str, consumes: list[str]) -> tuple[list[str], frozenset[str]]:
        """(product names, every readable name); branches are noted."""
        products = []
        for c in consumes:
            if c in self.product_of:
                if self.product_of[c] == label:
                    raise ConfigurationError(f"module '{label}' consumes its own product '{c}'")
                products.append(c)
            else:
                self._branch(c)
        return products, frozenset(consumes)

    def _after(self, label: str, after: list[str] | None) -> list[int] | None:
        if after is None:
            return None
        if not after:
            what = user_name(label, self.proc, self.outputs)
            raise ConfigurationError(f"{what}: after= / select= lists no path")
        for name in after:
            if name not in self.path_index:
                what, known = user_name(label, self.proc, self.outputs), ", ".join(self.path_index) or "none"
                raise ConfigurationError(f"{what} follows unknown path '{name}' (paths: {known})")
        return [self.path_index[name] for name in after]

    def _add(
        self,
        kind: str,
        label: str,
        runner: Callable[..., Any],
        products: list[str],
        produces: list[str],
        concurrency: str,
        resources: list[str],
        *,
        path: int = 0,
        step: int = 0,
        after: list[str] | None = None,
    ) -> None:
        self.modules.append(
            {
                "kind": kind,
                "label": label,
                "runner": runner,
                "consumes": [f"{self.product_of[p]}:{self.product_name[p]}" for p in products],
                "produces": produces,
                "concurrency": concurrency,
                "resources": resources,
                "path": path,
                "step": step,
                "after": self._after(label, after),
                "remote": None,
            }
        )

    def _add_histogram(self, label: str, h: Histogram) -> None:
        proc = self.proc
        weight_col: str | None
        if h.weight is True:
            if proc.weight is None:
                raise ConfigurationError(
                    f"histogram '{h.name}': weight=True but the process has no weight column"
                )
            weight_col = proc.weight
        else:
            weight_col = h.weight or None
        reads = list(h.consumes) + ([weight_col] if weight_col and weight_col not in h.consumes else [])
        products, names = self._consumes(label, reads)
        template = h.template()
        if h.fill is None and len(h.columns) != len(template.axes):
            raise ConfigurationError(
                f"histogram '{h.name}' has {len(template.axes)} axes but {len(h.columns)} columns"
            )
        state: dict[str, Any] = {"total": None, "parts": []}
        keep = self.keep_parts

        def consume(_index: int, part: Any) -> None:
            if keep:
                state["parts"].append((_index, part))
            if state["total"] is None:
                # The total is added to in place: a kept part stays the batch's own.
                state["total"] = part.copy() if keep else part
            else:
                add_into(state["total"], part)

        commit = self.commit
        ordered = commit.ordered(consume, label, undo_hist(state))
        self.hists[h.name] = (state, template)
        fill_fn = h.fill
        columns = h.columns
        name = h.name

        def run(data: rt.BatchData, index: int, sel: rt.Selection, raw: list[Any]) -> None:
            n = data.n if sel is None else len(sel)
            part = template.copy()
            if n:
                ev = rt.Events(label, data, sel, names, dict(zip(products, raw, strict=True)))
                if fill_fn is not None:
                    got = fill_fn(ev)
                    values = fill_values(got, part)
                else:
                    values = [ev[c] for c in columns]
                w = ev[weight_col] if weight_col else None
                try:
                    flat, fw = flatten(values, w)
                    check_weights(values, w, fw, name, str(weight_col), data.entry_start, sel)
                    part.fill(*flat, weight=fw) if fw is not None else part.fill(*flat)
                except rt.ModuleOutputError:
                    raise
                except Exception as e:
                    what = ", ".join(describe(v) for v in values)
                    weighted = f" and weights {describe(w)}" if w is not None else ""
                    raise rt.ModuleOutputError(
                        f"histogram '{name}' of {len(part.axes)} axes: cannot fill with {len(values)} "
                        f"value(s) ({what}){weighted} for {n} events: {type(e).__name__}: {e}"
                    ) from e
            commit.add(ordered, index, part, data.where)

        self._add("analyzer", label, run, products, [], "shared", [], after=h.after)

    def _add_output(self, label: str, out: ParquetOutput, select: list[str] | None) -> None:
        products, names = self._consumes(label, out.columns)
        commit = self.commit
        ordered = commit.ordered(lambda _i, table: out._write(table), label)
        self.outputs.append(out)

        def run(data: rt.BatchData, index: int, sel: rt.Selection, raw: list[Any]) -> None:
            n = data.n if sel is None else len(sel)
            ev = rt.Events(label, data, sel, names, dict(zip(products, raw, strict=True)))
            if n == 0:
                out._note_types(ev)
                commit.add(ordered, index, None)
                return
            commit.add(ordered, index, out._table(ev), data.where)

        self._add("output", label, run, products, [], "serial", [], after=select)

    def skip(self, index: int) -> None:
        self.commit.skip(index)


def _weight_sum(data: rt.BatchData, sel: Any) -> float:
    if data.weights is None:
        return float(len(sel))
    return float(data.weights[sel].sum())


def run_process(
    proc: Process,
    *,
    threads: int,
    events_in_flight: int | None,
    progress: bool | Callable[[int, int], None],
    executor: str,
    on_error: str,
    trace: bool,
    filter_order: str = "adaptive",
    raw: bool = False,
    device: str | Device | None = "auto",
    device_split: str = "adaptive",
    first_batch: int = 0,
    ordering_stats: str | None = None,
    print_notice: bool = True,
    skip_bad_files: bool = False,
) -> Result:
    """Runs ``proc``; with ``raw`` the result also holds the engine's
    per-batch records and histogram parts (``result.raw``), from which
    :mod:`evflow.distributed` merges chunks, and what the adaptive filter
    ordering measured (``result.raw["ordering_stats"]``, JSON text).
    ``first_batch``: the number of the source's first batch in a larger job
    (what ``ev.info.index`` counts from). ``ordering_stats``: statistics
    measured before (merged by ``_evflow.merge_ordering_stats``) that the
    reorderable paths start from instead of learning from scratch.
    ``print_notice``: print the notice of a missing device (else it is only
    in ``result.report["devices"]``) and that of the ``after=`` pairs the
    probe inferred (else only in ``result.report["inferred_after"]``)."""
    if executor not in ("threaded", "sequential"):
        raise ConfigurationError(f"executor must be 'threaded' or 'sequential', not {executor!r}")
    if filter_order not in ("fixed", "adaptive", "hepframe"):
        raise ConfigurationError(
            f"filter_order must be 'fixed', 'adaptive' or 'hepframe', not {filter_order!r}"
        )
    if on_error not in ("fail", "skip"):
        raise ConfigurationError(f"on_error must be 'fail' or 'skip', not {on_error!r}")
    dev, notice, own_device = dr.choose_device(proc, device, device_split)
    try:
        plan = _Plan(proc, keep_parts=raw, device=dev, device_split=device_split, threads=threads)
        if notice and print_notice:  # a distributed chunk's goes to its client
            print(notice, file=sys.stderr)
        with bad_files_left_out(proc, plan.branches, skip_bad_files) as skipped:
            result = _run_plan(
                plan,
                proc,
                threads,
                events_in_flight,
                progress,
                executor,
                on_error,
                trace,
                filter_order,
                raw,
                notice,
                first_batch,
                ordering_stats,
                print_notice,
            )
        return with_skipped(result, skipped)
    finally:
        if own_device and dev is not None:
            dev.close()


def _run_plan(
    plan: _Plan,
    proc: Process,
    threads: int,
    events_in_flight: int | None,
    progress: bool | Callable[[int, int], None],
    executor: str,
    on_error: str,
    trace: bool,
    filter_order: str,
    raw: bool,
    notice: str,
    first_batch: int = 0,
    ordering_stats: str | None = None,
    print_notice: bool = True,
) -> Result:
    from . import _evflow
    from .cutflow import build
    from .result import Result
    from .source import ParquetSource
    from .source._common import _TypesWhenEmpty

    source = proc.source
    assert source is not None
    if (watch := getattr(source, "bad_watch", None)) is not None:  # skip_bad_files, no second pass
        plan.commit.watch_files(watch)
    job = _evflow.Job(proc.name)
    try:  # a branch missing in a later ROOT file is found when the reader opens it
        source.check(plan.branches)
        # An input of no event still runs one batch of none with the columns'
        # types (the native reader has no such batch: the Python one runs it).
        native = isinstance(source, ParquetSource) and source.engine == "native"
        if native and source.total_events() != 0:
            job.set_parquet_source(
                source.files,
                plan.branches,
                source.step_size,
                rt.numbered_build(source.build(proc.weight), first_batch),
                prefetch=source.prefetch,
                entry_stop=source.max_events,
                entry_start=source.entry_start,
                watch=None if watch is None else watch.native(),
            )
        else:
            branches = list(plan.branches)
            reader = _TypesWhenEmpty(
                source.reader(branches, proc.weight), lambda: source.empty_batch(branches, proc.weight)
            )
            job.set_python_source(
                rt.Numbered(reader, first_batch) if first_batch else reader, source.describe()
            )
    except MissingBranchError as e:
        raise with_product_hint(e, plan.product_of, proc) from None
    for m in plan.modules:
        job.add_module(**m)
    for path in proc.paths.values():
        job.add_path(
            path.name,
            [plan.engine_label[(path.name, f.label)] for f in path.filters],
            reorderable=path.reorderable,
            after=[
                (plan.engine_label[(path.name, a)], plan.engine_label[(path.name, b)]) for a, b in path.after
            ],
        )

    k = events_in_flight or threads + 2
    show: _Progress | None = None
    callback: Callable[[int, int], None] | None
    if progress is True:
        show = _Progress(source.total_events())
        callback = show
    elif callable(progress):
        callback = progress
    else:
        callback = None

    outputs = plan.outputs
    try:
        for off in plan.offloaders:
            off.start(threads, k)
    except BaseException:
        for off in plan.offloaders:
            off.close()
        raise
    for out in outputs:
        out._open()
    cpu0 = _cpu_seconds()
    t0 = time.perf_counter()
    try:
        res = job.run(
            rt.union,
            rt.intersect,
            _weight_sum,
            threads=threads,
            events_in_flight=k,
            sequential=executor == "sequential",
            skip_failed=on_error == "skip",
            progress=callback,
            on_batch_failed=plan.skip,
            trace=trace,
            filter_order=filter_order,
            probe=rt.probe_indices,
            first_probe=(first := FirstProbe.of(plan, proc)),
            ordering_stats=ordering_stats,
            first_batch=first_batch,
        )
    except BaseException:
        for out in outputs:
            out._abort()
        if show is not None:
            show.close()
        raise
    finally:
        remote = {off.label: off.close() for off in plan.offloaders}
    res = watch.without_bad(res) if watch is not None else res
    if print_notice:  # a distributed chunk's: its client says it once for the job
        announce(first.inferred, proc.paths)
    try:
        # The engine reports progress every 0.2 s while it runs: the last
        # call gives the totals (also of a job shorter than that).
        if callback is not None:
            callback(len(res["batches"]), sum(b[1] for b in res["batches"]))
    except BaseException:
        for out in outputs:
            out._abort()
        raise
    finally:
        if show is not None:
            show.close()
    wall = time.perf_counter() - t0
    report = user_labels(json.loads(res["report"]), plan.engine_label) if res["report"] else None
    if report is not None and remote:
        report["remote"] = remote

    if res["aborted"]:  # a second interrupt cancelled the batches in flight
        for out in outputs:
            out._abort()
        raise Aborted("evflow run aborted; partial outputs were removed")
    if not res["ok"]:
        for out in outputs:
            out._abort()
        raise job_error(with_order_hint(user_error(res, plan.engine_label), proc, filter_order), report)
    try:
        fail_if_nothing_processed(res, report, raw)  # its outputs removed below, as a failed job's
        plan.commit.finish()
        written = {out.path: out._rows for out in outputs}
        for out in outputs:
            out._close()
    except BaseException:
        for out in outputs:
            out._abort()
        raise

    assert report is not None
    with_failed_hints(report, res["records"], proc, filter_order)
    if res.get("trace"):
        report["trace"] = json.loads(res["trace"])
    report["cpu_s"] = _cpu_seconds() - cpu0
    report["peak_rss_bytes"] = _peak_rss_bytes()
    report["wall_s_python"] = wall
    events = sum(b[1] for b in res["batches"] if b[0] not in set(res["failed"]))
    report["batches"] = len(res["batches"])
    report["events_processed"] = events
    report["devices"] = dr.report(plan.device, notice, plan.split_runners)  # also host only
    cutflow = build(
        [(p.name, [f.label for f in p.filters], p.reorderable) for p in proc.paths.values()],
        res["records"],
        res["batches"],
        res["finals"],
        res["failed"],
        proc.weight is not None,
        filter_order,
        report.get("orderings", []),
    )
    # Its probe's, and those imported (a later chunk of a distributed run takes no probe).
    pairs = union([first.inferred, applied(res["ordering_stats"], plan.engine_label)])
    report_inferred(report, cutflow, pairs)
    histograms = {}
    for name, (state, template) in plan.hists.items():
        histograms[name] = state["total"] if state["total"] is not None else template.copy()
    result = Result(
        process=proc.name,
        cutflow=cutflow,
        histograms=histograms,
        report=report,
        outputs=written,
        failed_batches=list(res["failed"]),
        events=events,
        wall_s=wall,
    )
    if raw:
        result.raw = {
            **{k: res[k] for k in ("records", "batches", "finals", "failed", "ordering_stats")},
            "hist_parts": {name: state["parts"] for name, (state, _t) in plan.hists.items()},
        }
    if res["interrupted"]:
        raise Interrupted(result)
    return result
