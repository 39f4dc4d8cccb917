"""The client side of a distributed run: connect, plan chunks, submit one
task per chunk, merge the results in chunk order, write the skims'
manifests."""

from __future__ import annotations

import contextlib
import copy
import hashlib
import os
import sys
import time
import uuid
import warnings
from collections import Counter, deque
from collections.abc import Callable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Any

from .._dist_support import new_directories, pickled, remove_created
from .._guard_inference import announce, report_inferred, union
from .._nothing_processed import nothing_processed
from .._progress import ChunkProgress
from .._skim_checks import check_skims
from .._skim_types import schema_of
from ..errors import Aborted, ConfigurationError, EvflowError, Interrupted, with_product_hint
from ..output import MANIFEST
from ..remote import RemoteNotice
from ..remote._distributed import merge_remote, shared_cluster_remotes
from ..remote._distributed import notice as remote_notice
from ._stop import Interrupts, chunk_error, task_exception, task_failure
from ._watch import completed
from .bad_files import FileFeed, FileMerger, as_given
from .chunks import (
    Chunk,
    ChunkFeed,
    FileMeta,
    batch_steps,
    chunk_starts,
    gather_meta,
    plan_chunks,
    read_meta,
    source_kind,
)
from .merge import Merger, merge_reports
from .skims import finish_skim, input_types, prepare_skim_dir, skim_dir
from .statistics import ChunkStatistics
from .task import run_chunk

if TYPE_CHECKING:
    from .._process import Process
    from ..result import Result

__all__ = ["MANIFEST", "run"]

#: An analysis pickled to at most this many bytes travels inside each chunk
#: task (no dependency ties the chunks to one worker); a larger one is
#: computed once and copied to every worker.
INLINE_PAYLOAD = 256 * 1024
#: Chunks in flight per worker thread: one running, the next queued.
IN_FLIGHT = 2


#: How long a failed job with skims waits for the chunks already handed out
#: to end before it removes their parts.
DRAIN_TIMEOUT_S = 120.0


def _probe() -> str:
    import evflow

    return evflow.__version__


def _waiting(futures: dict[Any, Chunk]) -> str:
    chunks = sorted(futures.values(), key=lambda ch: ch.index)
    return (chunks[0].describe() if chunks else "no chunk") + (
        f" and {len(chunks) - 1} more" if len(chunks) > 1 else ""
    )


def _is_process(obj: Any) -> bool:
    return all(hasattr(obj, a) for a in ("modules", "paths", "histograms", "outputs", "source", "run"))


def _payload_task(payload: bytes) -> bytes:
    # The analysis as a task result: a worker that dies loses nothing the
    # scheduler cannot recompute (scattered data could not be).
    return payload


@contextlib.contextmanager
def _connect(client: Any, processes: int | None) -> Iterator[Any]:
    """The Dask client to use: the one given, one connected to an address,
    or one on a new local cluster of ``processes`` worker processes."""
    try:
        from distributed import Client
    except ImportError as e:
        raise ConfigurationError(
            "a distributed run needs Dask: pip install 'evflow[distributed]' (dask[distributed])"
        ) from e
    from .._dist_support import connect, local_cluster

    if client is not None and processes is not None:
        raise ConfigurationError("give client= (or a scheduler address) or processes=, not both")
    if client is not None and not isinstance(client, str):
        if isinstance(client, Client) or (hasattr(client, "submit") and hasattr(client, "nthreads")):
            yield client
            return
        if hasattr(client, "scheduler_address") and hasattr(client, "scale"):
            # A Dask cluster object (LocalCluster, dask-jobqueue, Gateway):
            # a client of our own on it.
            c = Client(client)
            try:
                yield c
            finally:
                c.close()
            return
        raise ConfigurationError(
            f"client= must be a distributed.Client, a Dask cluster or a scheduler address "
            f"('tcp://host:8786'), not {type(client).__name__} {client!r}"
        )
    if isinstance(client, str):
        c = connect(client)
        try:
            yield c
        finally:
            c.close()
        return
    if processes is None or processes < 1:
        raise ConfigurationError(f"processes must be a positive integer, not {processes!r}")
    with local_cluster(processes) as c:
        yield c


#: Workers (addresses) known to import evflow: each is asked once.
_PROBED: set[str] = set()


def _check_workers(client: Any) -> tuple[int, int]:
    """Every worker imports evflow (a clear error instead of failing tasks);
    returns the number of workers and of their threads (at least 1 each)."""
    try:
        nthreads = client.nthreads()
        workers = set(nthreads)
        new = sorted(workers - _PROBED)
        if new:
            client.run(_probe, workers=new)
            _PROBED.update(new)
    except Exception as e:
        raise EvflowError(
            f"a Dask worker cannot run evflow ({type(e).__name__}: {e}); install evflow and the "
            "analysis's dependencies in the workers' environment"
        ) from e
    return max(1, len(workers)), max(1, sum(nthreads.values()))


def _host_slots(client: Any) -> dict[str, int]:
    """The task slots (worker threads) of each host of the cluster, summed
    over its worker processes: a chunk task's share of its host's cores."""
    from distributed.comm.addressing import get_address_host

    slots: dict[str, int] = {}
    try:
        nthreads = client.nthreads()
    except Exception:
        return {}
    for address, n in nthreads.items():
        try:
            host = get_address_host(address)
        except ValueError:  # an address whose host cannot be told: its worker counts its own
            continue
        slots[host] = slots.get(host, 0) + max(1, int(n))
    return slots


def _slots(client: Any) -> int | None:
    """The cluster's threads now (workers come and go), or None if unknown."""
    try:
        return max(1, sum(client.nthreads().values()))
    except Exception:
        return None


def _absolute(source: Any) -> Any:
    """Input paths as absolute paths (workers may run elsewhere)."""
    s = copy.copy(source)
    if hasattr(s, "files"):
        s.files = [os.path.abspath(f) if os.path.exists(f) else f for f in s.files]
    return s


def _warn_analyzers(proc: Process) -> None:
    """Analyzers of the user's own run in the worker processes: what they
    accumulate stays there, unlike histograms, cut-flows and skims."""
    from .._modules import Analyzer

    labels = [m.label for m in proc.modules.values() if isinstance(m, Analyzer)]
    if labels:
        warnings.warn(
            f"analyzer(s) {', '.join(repr(x) for x in labels)} run in the Dask worker processes: what they "
            "accumulate in Python objects stays there and is not returned (histograms, cut-flows and skims "
            "are merged); fill a proc.histogram, write a skim, or run in one process",
            RuntimeWarning,
            stacklevel=4,
        )


def run(
    target: Process | Callable[[], Process],
    *,
    client: Any = None,
    processes: int | None = None,
    threads: int | None = None,
    events_in_flight: int | None = None,
    progress: bool | Callable[[int, int], None] = False,
    executor: str = "threaded",
    on_error: str = "fail",
    filter_order: str = "adaptive",
    chunk_size: int | None = None,
    skip_bad_files: bool = False,
    factory: Callable[[], Process] | None = None,
    dashboard: bool | None = None,
) -> Result:
    """Runs an analysis on a Dask cluster; see :mod:`evflow.distributed`.

    ``target`` is the Process, or a callable returning it (called here to
    plan the chunks, and on each worker to build the modules). ``factory``
    rebuilds the analysis on the workers instead of pickling ``target``
    (e.g. by loading the analysis file there); the source is always the
    client's ``target``'s. ``dashboard``: print the Dask dashboard's
    address on stderr when the job starts (default: with ``progress=True``)."""
    from .._job import _Plan
    from .._modules import check_counts, check_flag, check_progress
    from ..cutflow import build
    from ..result import Result

    # A Process is not callable; a factory is. (Process itself is not
    # imported here: it imports this module.)
    proc = target() if callable(target) else target
    if not _is_process(proc):
        raise ConfigurationError(f"the process factory returned {type(proc).__name__}, not an evflow Process")
    check_counts(
        threads=threads, events_in_flight=events_in_flight, processes=processes, chunk_size=chunk_size
    )
    check_progress(progress)
    check_flag(skip_bad_files, "skip_bad_files")
    if on_error not in ("fail", "skip", "skip-chunk"):
        raise ConfigurationError(f"on_error must be 'fail', 'skip' or 'skip-chunk', not {on_error!r}")
    if executor not in ("threaded", "sequential"):
        raise ConfigurationError(f"executor must be 'threaded' or 'sequential', not {executor!r}")
    if filter_order not in ("fixed", "adaptive", "hepframe"):  # as a single-process run, before any cluster
        raise ConfigurationError(
            f"filter_order must be 'fixed', 'adaptive' or 'hepframe', not {filter_order!r}"
        )
    shared_cluster_remotes(proc, None)  # a required remote producer without a cluster of its own
    plan = _Plan(proc)  # checks the description before anything is submitted
    check_skims(proc)  # before any skim directory is prepared: a refusal deletes nothing
    assert proc.source is not None
    source = _absolute(proc.source)
    kind = source_kind(source)
    templates = {name: t for name, (_s, t) in plan.hists.items()}

    shipped: Any
    if factory is not None:
        shipped = factory
    elif not callable(target):
        shipped = copy.copy(proc)
        shipped.source = None
    else:
        shipped = target
    payload = pickled(shipped, proc)  # an error names the module that cannot be pickled
    token = hashlib.sha1(payload).hexdigest()[:16]  # the analysis (workers keep it built)
    job = uuid.uuid4().hex[:12]  # this run (task keys must not collide with an earlier run's)

    t0 = time.perf_counter()
    with _connect(client, processes) as c:
        from distributed import as_completed  # after _connect: it says when Dask is missing

        workers, slots = _check_workers(c)
        timing = {"connect_s": time.perf_counter() - t0}
        # Remote producers whose requests would queue behind the chunks: local in the chunks.
        run_locally = shared_cluster_remotes(proc, getattr(getattr(c, "scheduler", None), "address", None))
        if run_locally:
            warnings.warn(remote_notice(run_locally), RemoteNotice, stacklevel=3)
        link = getattr(c, "dashboard_link", None)
        if link and (progress is True if dashboard is None else dashboard):
            print(f"evflow: Dask dashboard at {link}", file=sys.stderr, flush=True)

        skipped_files: list[dict[str, str]] = []
        metas: list[FileMeta] = []
        if kind != "synthetic":

            def mapper(paths: list[str]) -> list[FileMeta]:
                read = partial(read_meta, source, columns=plan.branches)
                keys = [f"evflow-meta-{job}-{i}" for i in range(len(paths))]
                futs = c.map(read, paths, key=keys, pure=False)
                # Not a bare gather: a cluster left without a worker is an error, not a wait.
                what = f"reading the metadata of {len(paths)} file(s)"
                got = dict(completed(as_completed(futs, with_results=True), c, lambda: (what, futs)))
                return [got[f] for f in futs]

            metas = gather_meta(source, plan.branches, mapper)
            for m in metas:
                if m.error is not None:
                    if not skip_bad_files:
                        raise with_product_hint(m.error, plan.product_of, proc)
                    skipped_files.append({"file": m.path, "error": str(m.error)})
        steps = batch_steps(source, metas)
        fixed = (
            plan_chunks(source, metas, chunk_size=chunk_size, workers=slots)
            if chunk_size is not None
            else None
        )
        feed = ChunkFeed(steps, kind, chunk_starts(source, metas, steps), workers=slots, fixed=fixed)
        timing["plan_s"] = time.perf_counter() - t0 - timing["connect_s"]
        template = copy.copy(source)  # each task gets its chunk's files
        if hasattr(template, "files"):
            template.files = []

        skim_paths = [os.path.abspath(out.path) for out, _sel in proc.outputs]
        skim_dirs = [skim_dir(p) for p in skim_paths]
        created = new_directories(skim_dirs)  # removed again, if empty, by a failed run
        for d in skim_dirs:
            prepare_skim_dir(d)
        # Adaptive ordering: a chunk starts from the orders the chunks finished
        # before it was dispatched chose and, with `adaptive`, from what their
        # planners measured, merged (handed in with the task: no lookup).
        _warn_analyzers(proc)
        seeding = filter_order in ("adaptive", "hepframe") and any(p.reorderable for p in proc.paths.values())
        tally: dict[str, Counter[tuple[str, ...]]] = {}
        published: dict[str, list[str]] = {}
        measured = ChunkStatistics()  # merged in chunk order, whatever order the chunks finish in
        statistics: str | None = None
        options = {
            "threads": threads or 1,
            # Each chunk task reads with at most its share of its host's cores.
            "host_slots": _host_slots(c),
            "events_in_flight": events_in_flight,
            "executor": executor,
            "on_error": "skip" if on_error == "skip" else "fail",
            "filter_order": filter_order,
            "skims": skim_dirs,
            # the types of branches that differ between files: every part writes them so
            "skim_types": [schema_of(out._declared, out.columns) for out, _sel in proc.outputs],
            "local_remote": run_locally,
            # Parts are written under staged names of this run, renamed by
            # finish_skim: a chunk of an interrupted run cannot leave a part.
            "stage": str(10**15 + int(job, 16)),
        }
        merger = (FileMerger if skip_bad_files else Merger)(
            list(templates), [out.path for out, _sel in proc.outputs]
        )
        if isinstance(merger, FileMerger):  # a file whose data fail to be read: left out as the job goes on
            feed = FileFeed(feed, merger)  # type: ignore[assignment]
        show: Callable[[int, int], None] | None = None
        bar: ChunkProgress | None = None
        if progress is True:
            bar = ChunkProgress(feed.total_events)
            show = bar
        elif callable(progress):
            show = progress
        skipped_chunks: list[dict[str, Any]] = []
        payload_arg: Any = payload
        payload_future = None
        if len(payload) > INLINE_PAYLOAD:
            payload_future = c.submit(_payload_task, payload, key=f"evflow-analysis-{job}", pure=False)
            c.replicate([payload_future])  # on every worker: the chunks follow no single one
            payload_arg = payload_future
        # Results are fetched in the background as chunks finish (batched),
        # not one round trip per chunk.
        running = as_completed(with_results=True, raise_errors=False)
        futures: dict[Any, Chunk] = {}
        stop = Interrupts()  # a first Ctrl-C: no more chunks; those handed out finish

        # Chunks whose worker died while running or holding them: each runs
        # again alone, once the others in flight ended. A worker's death
        # fails every chunk it held, so only a chunk whose worker dies when
        # it runs alone is the one that kills it (an innocent chunk queued
        # beside it was skipped, or blamed, before).
        suspects: deque[Chunk] = deque()
        alone: set[int] = set()

        def submit(ch: Chunk, key: str) -> None:
            opts = {**options, "seed": published, "statistics": statistics} if published else options
            fut = c.submit(run_chunk, payload_arg, token, template, ch, opts, pure=False,
                           key=key, priority=-ch.index)  # fmt: skip
            futures[fut] = ch
            running.add(fut)

        def dispatch() -> None:
            """Keeps IN_FLIGHT chunks per worker thread submitted, in order
            (none after a first interrupt); a suspect alone."""
            if suspects and not stop.requested:
                if not futures:
                    ch = suspects.popleft()
                    alone.add(ch.index)
                    submit(ch, f"evflow-chunk-{job}-{ch.index:05d}-alone")
                return
            while not stop.requested and len(futures) < IN_FLIGHT * feed.workers:
                if (ch := feed.next()) is None:
                    return
                submit(ch, f"evflow-chunk-{job}-{ch.index:05d}")

        done_chunks = done_events = 0
        noticed = False
        merge_s = 0.0
        polled = time.perf_counter()
        try:
            with stop.catching():
                dispatch()
                while True:
                    try:
                        for fut, r in completed(running, c, lambda: (_waiting(futures), list(futures))):
                            ch = futures.pop(fut)
                            fut.release()
                            r = task_exception(r)
                            if isinstance(r, ImportError):
                                raise EvflowError(
                                    f"a Dask worker cannot import what {ch.describe()} needs ({r}); install evflow "
                                    "and the analysis's dependencies in the workers' environment"
                                ) from r
                            # The chunk failed: in the analysis (it returns the error), or
                            # the task itself (its worker died each time it ran it).
                            lost = isinstance(r, BaseException)
                            if lost and type(r).__name__ == "KilledWorker" and ch.index not in alone:
                                suspects.append(ch)
                                dispatch()
                                continue
                            failure = (
                                task_failure(ch, r)
                                if lost
                                else chunk_error(r["error"])
                                if "error" in r
                                else None
                            )
                            if failure is not None:
                                if on_error != "skip-chunk" and lost:
                                    raise failure from r
                                again = (
                                    merger.leave_out(ch, failure) if isinstance(merger, FileMerger) else None
                                )
                                if again is not None:  # a file left out: the chunk's other files run again
                                    for k in again:
                                        submit(k, f"evflow-chunk-{job}-{k.index:05d}-{len(merger.left_out)}")
                                elif on_error != "skip-chunk":
                                    raise failure  # its __cause__: the module's own exception
                                else:
                                    skipped_chunks.append(
                                        {
                                            "chunk": ch.index,
                                            "entries": [[p.file, p.start, p.stop] for p in ch.pieces],
                                            "error": str(failure),
                                        }
                                    )
                                    merger.add(ch, None)
                                    measured.add(ch.index, None)
                                    done_events += ch.events  # handled: as one process counts a batch skipped
                            else:
                                notice = (r["report"].get("devices") or {}).get("notice")
                                if notice and not noticed:  # each worker says it; the client says it once
                                    print(notice, file=sys.stderr)
                                    noticed = True
                                feed.observe(ch.events, float(r["wall_s"]), r.get("overhead_s"))
                                if feed.left_events and time.perf_counter() - polled > 1.0:
                                    polled = time.perf_counter()  # workers may have come or gone
                                    feed.set_workers(_slots(c) or feed.workers)
                                if seeding:
                                    for name, order in r["order"].items():
                                        tally.setdefault(name, Counter())[tuple(order)] += r["events"]
                                    published = {
                                        name: list(t.most_common(1)[0][0]) for name, t in tally.items()
                                    }
                                    measured.add(ch.index, r["raw"].get("ordering_stats"))
                                    statistics = measured.merged
                                dispatch()  # the next chunk before this one is merged
                                m0 = time.perf_counter()
                                merger.add(ch, r)
                                merge_s += time.perf_counter() - m0
                                done_events += int(r["events"])
                            dispatch()
                            done_chunks += 1
                            if show is not None:
                                show(done_chunks, done_events)
                        break
                    except KeyboardInterrupt as e:  # not through the handler (a callback's)
                        stop.interrupt(e)  # the first stops the run; a second is raised
            if not stop.requested and merger.events == 0 and (merger.failed or skipped_chunks):
                firsts, chunks = ([s[k] for s in merger.summaries] for k in ("first_batch", "chunk"))
                report = merge_reports(merger.reports, firsts, chunks)  # the first failure, numbered
                error = nothing_processed(report, 0, merger.failed, skipped_chunks)
                assert error is not None  # no event, and batches failed or chunks were left out
                raise error  # its skims removed below, as a failed job's
        except BaseException as failure:
            if skim_dirs and futures and not isinstance(failure, KeyboardInterrupt):
                # A cancelled task already running on a worker still finishes
                # and writes its part: let the chunks already handed out end
                # (at most two per worker thread, each a few seconds of work)
                # before the directories are cleaned, so that no part lands
                # after the cleanup.
                from distributed import wait

                with contextlib.suppress(Exception):
                    wait(list(futures), timeout=DRAIN_TIMEOUT_S)
            for fut in futures:
                fut.cancel()
            for d, p in zip(skim_dirs, skim_paths, strict=True):  # no partial skim survives a failed job
                with contextlib.suppress(OSError):
                    prepare_skim_dir(d)
                    if d != p:
                        os.rmdir(d)
            remove_created(skim_dirs, created)
            if isinstance(failure, KeyboardInterrupt) and stop.requested:
                raise Aborted(
                    "evflow run aborted by a second interrupt: the chunks running were cancelled and the "
                    "skims removed"
                ) from None
            raise
        finally:
            if payload_future is not None:
                payload_future.release()
            if bar is not None:
                bar.close()
        scheduler = getattr(getattr(c, "scheduler", None), "address", None)
        timing["chunks_s"] = time.perf_counter() - t0 - timing["connect_s"] - timing["plan_s"]
        timing["merge_s"] = merge_s  # on the client, while later chunks run

    written = {}
    for i, ((out, _sel), d, p) in enumerate(zip(proc.outputs, skim_dirs, skim_paths, strict=True)):
        schema = merger.skim_schema(i) or input_types(source, list(out.columns), out._declared)
        # Keyed by the path as given, as a single-process run keys them.
        written[out.path] = finish_skim(d, proc, list(out.columns), merger.skims[i], schema, options["stage"])
        if d != p:  # the single-process skim that was there
            os.remove(p)
            os.replace(d, p)
    wall = time.perf_counter() - t0
    summaries = merger.summaries
    report = merge_reports(
        merger.reports, [s["first_batch"] for s in summaries], [s["chunk"] for s in summaries]
    )
    remote = merge_remote([r.get("remote") for r in merger.reports])
    if remote is not None:  # as a single-process run reports its remote producers
        if run_locally:
            for label in run_locally:
                if label in remote:
                    remote[label]["notices"].insert(0, remote_notice([label]))
        report["remote"] = remote
    report.update(
        interrupted=stop.requested,  # the chunks handed out before a first Ctrl-C, finished
        wall_s=wall,
        wall_s_python=wall,
        threads=options["threads"],
        processes=workers,
        batches=len(merger.batches),
        events_processed=merger.events,
        throughput_ev_s=len(merger.batches) / wall if wall > 0 else 0.0,
        distributed={
            "scheduler": scheduler,
            "dashboard": link,
            "workers": workers,
            "chunks": summaries,
            "skipped_files": skipped_files,
            "skipped_chunks": skipped_chunks,
            "timing": timing,
        },
    )
    # Those that did not open, then those whose data could not be read.
    left_out = as_given([*skipped_files, *getattr(merger, "left_out", [])], proc.source, source)
    if left_out:  # where one process lists them, so that the report reads alike
        report["skipped_files"] = left_out
    cutflow = build(
        [(p.name, [f.label for f in p.filters], p.reorderable) for p in proc.paths.values()],
        merger.records,
        merger.batches,
        merger.finals,
        merger.failed,
        proc.weight is not None,
        filter_order,
        report.get("orderings", []),
    )
    inferred = union(r.get("inferred_after", {}) for r in merger.reports)  # in chunk order
    report_inferred(report, cutflow, inferred)
    announce(inferred, proc.paths)  # once, here: the chunks' go to their workers' logs
    histograms = {n: (h if h is not None else templates[n].copy()) for n, h in merger.totals.items()}
    result = Result(
        process=proc.name,
        cutflow=cutflow,
        histograms=histograms,
        report=report,
        outputs=written,
        failed_batches=list(merger.failed),
        events=merger.events,
        wall_s=wall,
        skipped_files=[s["file"] for s in left_out],
        skipped_chunks=skipped_chunks,
    )
    if stop.requested:
        raise Interrupted(result)
    return result
