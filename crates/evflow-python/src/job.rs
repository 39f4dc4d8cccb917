//! `Job`: the Python-facing description of an analysis (source, modules,
//! paths), turned into an evflow-core process and run with the GIL
//! released.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use evflow_core::{
    Concurrency, ErrorPolicy, ExecutorKind, JobError, ModuleDesc, PathDesc, Process, RunError,
    RunOptions, Source, StopHandle,
};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::batch::Shared;
use crate::modules::{PyCall, PyEndModule, PyFilter, PyProducer};
use crate::remote::PyRemoteProducer;
use evflow_core::ordering::{
    OrderingOptions, OrderingPlanner, OrderingStatistics, Policy, merge_statistics,
};
use evflow_core::schedule::Planner;
use evflow_core::{Graph, PlannerFactory};

/// Name of the end path holding the Python analyzers and outputs.
const END_PATH: &str = "evflow.end";

/// Interrupts this soon after the first are the same request delivered
/// twice; a later one aborts (the core command line's rule).
const SAME_REQUEST: Duration = Duration::from_millis(200);

struct ModuleSpec {
    kind: String,
    label: String,
    runner: Py<PyAny>,
    consumes: Vec<String>,
    produces: Vec<String>,
    concurrency: Concurrency,
    path: usize,
    step: usize,
    after: Option<Vec<usize>>,
    needs_all: bool,
    /// For a producer: the paths whose events it serves (`None`: every
    /// path).
    live_paths: Option<Vec<usize>>,
    /// For a producer: the paths whose filters it feeds (`None`: any).
    probe_paths: Option<Vec<usize>>,
    /// For a producer: the offloader that runs it locally or remotely
    /// (`evflow.remote`), making it an external-work module.
    remote: Option<Py<PyAny>>,
}

enum SourceSpec {
    Python {
        reader: Py<PyAny>,
        description: String,
    },
    Parquet(crate::parquet::ParquetSpec),
}

/// A job under construction: the source, the modules and the paths.
#[pyclass(module = "evflow._evflow")]
pub(crate) struct Job {
    name: String,
    source: Option<SourceSpec>,
    modules: Vec<ModuleSpec>,
    paths: Vec<PathDesc>,
}

fn concurrency(kind: &str, resources: Vec<String>) -> PyResult<Concurrency> {
    match kind {
        "shared" => Ok(Concurrency::Shared),
        "serial" => Ok(Concurrency::Serial),
        "exclusive" => Ok(Concurrency::Exclusive(resources)),
        other => Err(PyValueError::new_err(format!(
            "concurrency must be 'shared', 'serial' or 'exclusive', not {other:?}"
        ))),
    }
}

#[pymethods]
impl Job {
    #[new]
    fn new(name: String) -> Self {
        Self {
            name,
            source: None,
            modules: Vec::new(),
            paths: Vec::new(),
        }
    }

    /// Sets a Python reader: an object with `next_batch()` returning a
    /// `BatchData` or `None` at the end.
    fn set_python_source(&mut self, reader: Py<PyAny>, description: String) {
        self.source = Some(SourceSpec::Python {
            reader,
            description,
        });
    }

    /// Sets the native Parquet reader: `build(columns) -> BatchData` makes
    /// the Python batch from decoded buffers (see `parquet.rs`).
    /// `entry_start` (a row-group boundary of the first file) and
    /// `entry_stop` (events in total) select a part of the files. With a
    /// `watch` (`skip_bad_files`), a file whose row group fails to decode is
    /// left out and reading goes on (see `parquet.rs`).
    #[pyo3(signature = (files, columns, step_size, build, prefetch=2, entry_stop=None, entry_start=0, watch=None))]
    #[allow(clippy::too_many_arguments)]
    fn set_parquet_source(
        &mut self,
        files: Vec<String>,
        columns: Vec<String>,
        step_size: usize,
        build: Py<PyAny>,
        prefetch: usize,
        entry_stop: Option<u64>,
        entry_start: u64,
        watch: Option<Py<PyAny>>,
    ) -> PyResult<()> {
        if step_size == 0 {
            return Err(PyValueError::new_err("step_size must be positive"));
        }
        self.source = Some(SourceSpec::Parquet(crate::parquet::ParquetSpec {
            files,
            columns,
            step_size,
            build,
            prefetch: prefetch.max(1),
            entry_start,
            entry_stop,
            watch,
        }));
        Ok(())
    }

    /// Adds one engine module. `consumes` are engine product tags
    /// (`label:instance`) besides the batch itself. A producer with
    /// `needs_all` computes on every event of a batch (some consumer reads
    /// all events), otherwise on the events one of `live_paths` (the paths
    /// it serves; `None`: every path) still holds, and on
    /// the subsample of a batch sampled on one of `probe_paths` (the paths
    /// whose filters it feeds; `None`: any path).
    /// A producer with a `remote` offloader (`acquire(data, selection,
    /// inputs, done) -> token`, `produce(token) -> values`) runs as
    /// external work: no engine thread waits while its request is out.
    #[pyo3(signature = (kind, label, runner, consumes, produces, concurrency="shared", resources=Vec::new(), path=0, step=0, after=None, needs_all=true, remote=None, probe_paths=None, live_paths=None))]
    #[allow(clippy::too_many_arguments)]
    fn add_module(
        &mut self,
        kind: String,
        label: String,
        runner: Py<PyAny>,
        consumes: Vec<String>,
        produces: Vec<String>,
        concurrency: &str,
        resources: Vec<String>,
        path: usize,
        step: usize,
        after: Option<Vec<usize>>,
        needs_all: bool,
        remote: Option<Py<PyAny>>,
        probe_paths: Option<Vec<usize>>,
        live_paths: Option<Vec<usize>>,
    ) -> PyResult<()> {
        if remote.is_some() && kind != "producer" {
            return Err(PyValueError::new_err(format!(
                "module '{label}': only producers can run remotely"
            )));
        }
        if !matches!(kind.as_str(), "producer" | "filter" | "analyzer" | "output") {
            return Err(PyValueError::new_err(format!(
                "unknown module kind {kind:?}"
            )));
        }
        let concurrency = self::concurrency(concurrency, resources)?;
        self.modules.push(ModuleSpec {
            kind,
            label,
            runner,
            consumes,
            produces,
            concurrency,
            path,
            step,
            after,
            needs_all,
            live_paths,
            probe_paths,
            remote,
        });
        Ok(())
    }

    /// Adds a path: engine labels of its filter steps, in written order;
    /// a reorderable path lets the engine choose the order, within the
    /// `(label, must_run_after_label)` constraints.
    #[pyo3(signature = (name, labels, reorderable=false, after=Vec::new()))]
    fn add_path(
        &mut self,
        name: String,
        labels: Vec<String>,
        reorderable: bool,
        after: Vec<(String, String)>,
    ) {
        let mut path = PathDesc::new(name, labels).reorderable(reorderable);
        for (later, earlier) in after {
            path = path.after(later, earlier);
        }
        self.paths.push(path);
    }

    /// Runs the job; returns a dict with `ok`, `report` (JSON text), `error`,
    /// `cause`, `interrupted` (a KeyboardInterrupt stopped reading: the
    /// batches read were finished), `aborted` (a second one cancelled them),
    /// `records`, `batches`, `failed` and `ordering_stats` (JSON text: what
    /// the `adaptive` planner measured, `None` without one).
    /// `ordering_stats` in: statistics measured before (JSON text, as
    /// returned and merged by `merge_ordering_stats`) that the reorderable
    /// paths start from. `first_batch`: the number of the source's first
    /// batch in a larger job (a chunk's), from which the batches the planner
    /// samples are drawn.
    #[pyo3(signature = (union, intersect, weight_sum, threads=1, events_in_flight=2, sequential=false, skip_failed=false, progress=None, interval_s=0.2, on_batch_failed=None, trace=false, filter_order=None, probe=None, first_probe=None, ordering_stats=None, first_batch=0))]
    #[allow(clippy::too_many_arguments)]
    fn run<'py>(
        &mut self,
        py: Python<'py>,
        union: Py<PyAny>,
        intersect: Py<PyAny>,
        weight_sum: Py<PyAny>,
        threads: usize,
        events_in_flight: usize,
        sequential: bool,
        skip_failed: bool,
        progress: Option<Py<PyAny>>,
        interval_s: f64,
        on_batch_failed: Option<Py<PyAny>>,
        trace: bool,
        filter_order: Option<String>,
        probe: Option<Py<PyAny>>,
        first_probe: Option<Py<PyAny>>,
        ordering_stats: Option<String>,
        first_batch: u64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let policy: Option<Policy> = filter_order
            .map(|name| name.parse().map_err(PyValueError::new_err))
            .transpose()?;
        let imported = match &ordering_stats {
            Some(text) => Some(Arc::new(self.check_statistics(text)?)),
            None => None,
        };
        let Some(source_spec) = self.source.take() else {
            return Err(PyValueError::new_err("the process has no source"));
        };
        let shared = Arc::new(Shared::new(
            self.paths.iter().map(|p| p.modules.len()).collect(),
            self.paths.iter().map(step_predecessors).collect(),
            union,
            intersect,
            weight_sum,
            skip_failed,
            on_batch_failed,
            probe,
            first_probe,
            first_batch,
        ));
        // The planner is kept where the batches find it: they ask it which
        // of them it samples, and report per-event decisions to it.
        let planner: Option<PlannerFactory> = policy.map(|policy| {
            let options = OrderingOptions::new(policy);
            let slot = shared.planner.clone();
            let batches = shared.clone();
            let factory: PlannerFactory = Arc::new(move |graph: &Graph| {
                let planner = Arc::new(OrderingPlanner::new(graph, &options));
                if let Some(stats) = &imported
                    && let Err(e) = planner.import_statistics(stats)
                {
                    // Checked against the paths before the run: not expected.
                    eprintln!("evflow: {e}; the paths learn their order from scratch");
                }
                // Imported `after=` pairs bind the sampled batches' probes
                // as written ones do: a cut decides where its guard passed.
                let mut preds = (batches.step_preds.lock()).unwrap_or_else(|e| e.into_inner());
                for (p, steps) in preds.iter_mut().enumerate() {
                    for (s, bits) in steps.iter_mut().zip(planner.precedence(p)) {
                        *s |= bits;
                    }
                }
                drop(preds);
                let _ = slot.set(planner.clone());
                planner as Arc<dyn Planner>
            });
            factory
        });
        let source: Box<dyn Source> = match source_spec {
            SourceSpec::Python {
                reader,
                description,
            } => Box::new(crate::source::PySource {
                reader,
                shared: shared.clone(),
                next_index: 0,
                description,
            }),
            SourceSpec::Parquet(spec) => {
                Box::new(crate::parquet::ParquetSource::new(spec, shared.clone()))
            }
        };
        let mut process = Process::new(self.name.clone());
        process.set_boxed_source(source);
        let mut end = Vec::new();
        for m in std::mem::take(&mut self.modules) {
            let call = PyCall {
                runner: m.runner,
                n_inputs: m.consumes.len(),
                shared: shared.clone(),
            };
            let consumes = std::iter::once("source:batch".to_string()).chain(m.consumes);
            let desc = match m.kind.as_str() {
                "producer" if m.remote.is_some() => ModuleDesc::producer(
                    m.label.clone(),
                    PyRemoteProducer::new(
                        call,
                        m.produces.clone(),
                        m.needs_all,
                        m.live_paths,
                        m.probe_paths,
                        m.remote.expect("checked"),
                    ),
                )
                .produces(m.produces)
                .external_work(true),
                "producer" => ModuleDesc::producer(
                    m.label.clone(),
                    PyProducer {
                        call,
                        produces: m.produces.clone(),
                        needs_all: m.needs_all,
                        live_paths: m.live_paths,
                        probe_paths: m.probe_paths,
                    },
                )
                .produces(m.produces),
                "filter" => ModuleDesc::filter(
                    m.label.clone(),
                    PyFilter {
                        call,
                        path: m.path,
                        step: m.step,
                    },
                ),
                "analyzer" => {
                    end.push(m.label.clone());
                    ModuleDesc::analyzer(
                        m.label.clone(),
                        PyEndModule {
                            call,
                            after: m.after,
                        },
                    )
                }
                _ => {
                    end.push(m.label.clone());
                    ModuleDesc::output(
                        m.label.clone(),
                        PyEndModule {
                            call,
                            after: m.after,
                        },
                    )
                }
            };
            process.add(desc.consumes(consumes).concurrency(m.concurrency));
        }
        for path in std::mem::take(&mut self.paths) {
            process.add_path(path);
        }
        if !end.is_empty() {
            process.end_path(END_PATH, end);
        }

        // A first KeyboardInterrupt stops reading gracefully; a second cancels
        // the batches in flight.
        let stop = StopHandle::new();
        let mut aborted = false;
        // `..default()` keeps this compiling when the engine gains options.
        #[allow(clippy::needless_update)]
        let options = RunOptions {
            threads: threads.max(1),
            events_in_flight: events_in_flight.max(1),
            executor: if sequential {
                ExecutorKind::Sequential
            } else {
                ExecutorKind::Threaded
            },
            on_error: if skip_failed {
                ErrorPolicy::SkipEvent
            } else {
                ErrorPolicy::Fail
            },
            trace,
            progress: None,
            planner,
            stop: Some(stop.clone()),
            ..RunOptions::default()
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let engine = std::thread::Builder::new()
            .name("evflow-engine".into())
            .spawn(move || {
                let result = evflow_core::run(process, &options);
                let _ = tx.send(result);
            })
            .map_err(|e| PyRuntimeError::new_err(format!("cannot start the engine thread: {e}")))?;

        let rx = std::sync::Mutex::new(rx);
        let interval = Duration::from_secs_f64(interval_s.clamp(0.01, 10.0));
        let mut interrupted: Option<PyErr> = None;
        let mut first_interrupt: Option<Instant> = None;
        let mut progress_error: Option<PyErr> = None;
        let result = loop {
            match py.detach(|| {
                rx.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .recv_timeout(interval)
            }) {
                Ok(result) => break Some(result),
                Err(RecvTimeoutError::Disconnected) => break None,
                Err(RecvTimeoutError::Timeout) => {
                    if let Err(e) = py.check_signals() {
                        if interrupted.is_none() {
                            stop.request();
                            interrupted = Some(e);
                            first_interrupt = Some(Instant::now());
                            eprintln!(
                                "evflow: interrupted: finishing the batches in flight \
                                 (interrupt again to abort)"
                            );
                        } else if first_interrupt.is_some_and(|t| t.elapsed() >= SAME_REQUEST) {
                            shared.cancel.store(true, Ordering::SeqCst);
                            aborted = true;
                        }
                        // Sooner: the same request delivered twice (a
                        // terminal's Ctrl-C reaches the process group, and
                        // `evflow run x.py` forwards it too), as the core
                        // command line takes it.
                    }
                    if let Some(cb) = &progress
                        && progress_error.is_none()
                    {
                        let done = (
                            shared.batches_done.load(Ordering::Relaxed),
                            shared.events_done.load(Ordering::Relaxed),
                        );
                        if let Err(e) = cb.bind(py).call1(done) {
                            shared.cancel.store(true, Ordering::SeqCst);
                            progress_error = Some(e);
                        }
                    }
                }
            }
        };
        let _ = py.detach(|| engine.join());
        if let Some(e) = progress_error {
            return Err(e);
        }

        let out = PyDict::new(py);
        let (ok, report, error) = match result {
            None => (
                false,
                None,
                Some((
                    "executor",
                    String::new(),
                    None,
                    "the engine thread panicked".to_string(),
                )),
            ),
            Some(Ok(report)) => (true, Some(report), None),
            Some(Err(RunError::Config(e))) => (
                false,
                None,
                Some(("config", String::new(), None, e.to_string())),
            ),
            Some(Err(RunError::Failed { error, report })) => {
                let e = match error {
                    JobError::Module {
                        module,
                        event,
                        message,
                    } => (
                        "module",
                        module,
                        Some(event.event.saturating_sub(1)),
                        message,
                    ),
                    JobError::Source { message } => ("source", String::new(), None, message),
                    JobError::Transition {
                        module,
                        transition,
                        message,
                    } => (
                        "transition",
                        module,
                        None,
                        format!("{transition}: {message}"),
                    ),
                    JobError::Executor(message) => ("executor", String::new(), None, message),
                };
                (false, Some(*report), Some(e))
            }
        };
        out.set_item("ok", ok && !aborted)?;
        out.set_item("interrupted", interrupted.is_some())?;
        out.set_item("aborted", aborted)?;
        let report_json = match &report {
            Some(r) => Some(
                serde_json::to_string(r)
                    .map_err(|e| PyRuntimeError::new_err(format!("report serialization: {e}")))?,
            ),
            None => None,
        };
        out.set_item("report", report_json)?;
        let trace_json = match &report {
            Some(r) if trace => Some(
                serde_json::to_string(&r.chrome_trace())
                    .map_err(|e| PyRuntimeError::new_err(format!("trace serialization: {e}")))?,
            ),
            _ => None,
        };
        out.set_item("trace", trace_json)?;
        match error {
            Some((kind, module, batch, message)) => {
                let d = PyDict::new(py);
                d.set_item("kind", kind)?;
                d.set_item("module", module)?;
                d.set_item("batch", batch)?;
                d.set_item("message", message)?;
                out.set_item("error", d)?;
            }
            None => out.set_item("error", py.None())?,
        }
        let cause = shared
            .first_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        out.set_item("cause", cause.map(|e| e.into_value(py)))?;

        let records = PyList::empty(py);
        let mut recs = shared
            .records
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        recs.sort_by_key(|r| (r.batch, r.path, r.position));
        for r in recs {
            records.append((
                r.batch, r.path, r.step, r.position, r.seen, r.passed, r.w_seen, r.w_passed,
            ))?;
        }
        out.set_item("records", records)?;
        let mut batches = shared
            .batches
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        batches.sort_by_key(|b| b.0);
        out.set_item("batches", batches)?;
        let mut finals = shared
            .finals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        finals.sort_by_key(|f| f.0);
        out.set_item("finals", finals)?;
        let mut failed = shared
            .failed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        failed.sort_unstable();
        out.set_item("failed", failed)?;
        let stats = match shared.planner.get() {
            Some(planner) => Some(serde_json::to_string(&planner.statistics()).map_err(|e| {
                PyRuntimeError::new_err(format!("ordering statistics serialization: {e}"))
            })?),
            None => None,
        };
        out.set_item("ordering_stats", stats)?;
        Ok(out)
    }
}

impl Job {
    /// Parses ordering statistics (JSON text) and checks them against the
    /// job's paths: each names a path of the job and lists its steps.
    fn check_statistics(&self, text: &str) -> PyResult<OrderingStatistics> {
        let stats: OrderingStatistics = serde_json::from_str(text)
            .map_err(|e| PyValueError::new_err(format!("ordering statistics: {e}")))?;
        for (name, ps) in &stats {
            ps.validate(name)
                .map_err(|e| PyValueError::new_err(e.to_string()))?;
            let Some(path) = self.paths.iter().find(|p| &p.name == name) else {
                return Err(PyValueError::new_err(format!(
                    "ordering statistics of path '{name}': the analysis has no path of this name"
                )));
            };
            ps.for_steps(name, &path.modules)
                .map_err(|e| PyValueError::new_err(e.to_string()))?;
        }
        Ok(stats)
    }
}

/// Merges ordering statistics (JSON texts, as `Job.run` returns them) in
/// the order given; returns the merged JSON text.
#[pyfunction]
pub fn merge_ordering_stats(parts: Vec<String>) -> PyResult<String> {
    let parsed = parts
        .iter()
        .map(|t| serde_json::from_str::<OrderingStatistics>(t))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| PyValueError::new_err(format!("ordering statistics: {e}")))?;
    let merged = merge_statistics(&parsed).map_err(|e| PyValueError::new_err(e.to_string()))?;
    serde_json::to_string(&merged)
        .map_err(|e| PyRuntimeError::new_err(format!("ordering statistics serialization: {e}")))
}

/// Per step of `path`: the steps (bits, the first 64) it must follow.
fn step_predecessors(path: &PathDesc) -> Vec<u64> {
    let position = |label: &str| path.modules.iter().position(|m| m == label);
    let mut preds = vec![0u64; path.modules.len()];
    for (later, earlier) in &path.after {
        if let (Some(l), Some(e)) = (position(later), position(earlier))
            && e < 64
        {
            preds[l] |= 1 << e;
        }
    }
    preds
}
