//! # evflow-core
//!
//! The engine of evflow: processes many independent events through a graph
//! of user modules, concurrently, with no thread ever blocked waiting.
//!
//! * A [`Process`] holds a [`Source`], modules ([`ModuleDesc`]: producers,
//!   filters, analyzers, outputs), paths and end paths.
//! * [`Process::compile`] checks it and builds the static [`Graph`].
//! * [`schedule::Coordinator`] takes every scheduling decision; executors in
//!   [`exec`](crate::ExecutorKind) only carry them out.
//! * [`run`] executes the job and returns a [`Report`].
//!
//! ```
//! use evflow_core::*;
//!
//! let mut p = Process::new("demo");
//! p.set_source(EmptySource::new(100));
//! let work = synthetic::Timing::constant(0.0, synthetic::Work::Busy);
//! p.add(synthetic::producer("a", work.clone(), &[], &[""]));
//! p.add(synthetic::producer("b", work.clone(), &["a"], &[""]));
//! p.add(synthetic::filter("keepHalf", work, &["b"], 0.5, 7));
//! p.path("p", ["keepHalf"]);
//! let report = run(p, &RunOptions { threads: 2, events_in_flight: 4, ..RunOptions::default() }).unwrap();
//! assert_eq!(report.events, 100);
//! assert_eq!(report.module("a").unwrap().calls, 100);
//! ```
//!
//! ## Intra-module parallelism
//!
//! Module code runs on the engine's own work-stealing pool, so a module may
//! split its own work with [`parallel`] (rayon): the pieces are scheduled on
//! the same threads as other modules' tasks — no extra threads, no
//! oversubscription.
//!
//! ```
//! use evflow_core::*;
//! use evflow_core::parallel::prelude::*;
//!
//! struct SumOfSquares;
//! impl Transitions for SumOfSquares {}
//! impl Producer for SumOfSquares {
//!     fn produce(&self, ev: &Event<'_>) -> ModuleResult {
//!         let n = 1_000 + ev.id().event;
//!         let total: u64 = (0..n).into_par_iter().map(|x| x * x).sum();
//!         ev.put("", total)
//!     }
//! }
//! let mut p = Process::new("nested");
//! p.set_source(EmptySource::new(8));
//! p.add(ModuleDesc::producer("squares", SumOfSquares).produces([""]));
//! p.add(synthetic::analyzer("use", synthetic::Timing::zero(), &["squares"]));
//! p.end_path("e", ["use"]);
//! let report = run(p, &RunOptions { threads: 2, ..RunOptions::default() }).unwrap();
//! assert_eq!(report.module("squares").unwrap().calls, 8);
//! ```

mod event;
mod exec;
pub mod graph;
mod module;
pub mod ordering;
mod process;
mod report;
pub mod schedule;
mod source;
pub mod synthetic;

use std::fmt;
use std::sync::Arc;

pub use event::{Event, EventId};
pub use graph::Graph;
pub use module::{
    Analyzer, Completion, Concurrency, Filter, ModuleError, ModuleImpl, ModuleKind, ModuleResult,
    Output, Producer, Transitions,
};
pub use process::{ConfigError, CostModel, DecisionModel, InputTag, ModuleDesc, PathDesc, Process};
pub use report::{
    ChromeTrace, FailedEvent, ModuleReport, PathReport, Report, Stall, SteadyRate, StepReport,
    TraceSlice,
};
pub use source::{EmptySource, Source, SourceProducts};

/// rayon, re-exported for intra-module parallelism on the engine's pool.
pub use rayon as parallel;

/// Called with the number of events finished so far.
pub type ProgressFn = Arc<dyn Fn(u64) + Send + Sync>;

/// Builds the [`schedule::Planner`] that orders reorderable paths, once the
/// graph is compiled.
pub type PlannerFactory = Arc<dyn Fn(&Graph) -> Arc<dyn schedule::Planner> + Send + Sync>;

/// Which executor carries out the scheduling decisions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ExecutorKind {
    /// A work-stealing pool of `threads` threads.
    #[default]
    Threaded,
    /// One thread, one task after the other: the reference baseline.
    Sequential,
}

/// What to do when a module fails on an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ErrorPolicy {
    /// Stop reading, cancel the work of events in flight, fail the job.
    #[default]
    Fail,
    /// Record the event as failed in the report and go on.
    SkipEvent,
}

/// How to run a job.
#[derive(Clone)]
pub struct RunOptions {
    pub threads: usize,
    /// Maximum number of events processed at once (K); also bounds memory.
    pub events_in_flight: usize,
    pub executor: ExecutorKind,
    pub on_error: ErrorPolicy,
    /// Record a trace of every module execution into [`Report::trace`].
    pub trace: bool,
    pub progress: Option<ProgressFn>,
    /// Orders reorderable paths; `None`: every path in its written order.
    pub planner: Option<PlannerFactory>,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            threads: 1,
            events_in_flight: 1,
            executor: ExecutorKind::Threaded,
            on_error: ErrorPolicy::Fail,
            trace: false,
            progress: None,
            planner: None,
        }
    }
}

impl fmt::Debug for RunOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunOptions")
            .field("threads", &self.threads)
            .field("events_in_flight", &self.events_in_flight)
            .field("executor", &self.executor)
            .field("on_error", &self.on_error)
            .field("trace", &self.trace)
            .finish()
    }
}

/// Why a job stopped before its end.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    #[error("module '{module}' failed on {event}: {message}")]
    Module {
        module: String,
        event: EventId,
        message: String,
    },
    #[error("reading input failed: {message}")]
    Source { message: String },
    #[error("module '{module}' failed in {transition}: {message}")]
    Transition {
        module: String,
        transition: String,
        message: String,
    },
    #[error("executor: {0}")]
    Executor(String),
}

/// The error of [`run`].
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("configuration error: {0}")]
    Config(#[from] ConfigError),
    /// The job started and failed; the report covers what ran.
    #[error("{error}")]
    Failed {
        error: JobError,
        report: Box<Report>,
    },
}

/// Every path's decision for one event, handed to output modules.
#[derive(Clone, Debug)]
pub struct TriggerResults {
    graph: Arc<Graph>,
    accepted: Vec<bool>,
}

impl TriggerResults {
    pub(crate) fn new(graph: Arc<Graph>, accepted: Vec<bool>) -> Self {
        Self { graph, accepted }
    }
    /// Whether the path named `name` accepted the event (`None`: no such path).
    pub fn accepted(&self, name: &str) -> Option<bool> {
        self.graph.path_index(name).map(|p| self.accepted[p])
    }
    /// (path name, accepted) for every path, in declaration order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, bool)> {
        self.graph
            .paths
            .iter()
            .map(|p| p.name.as_str())
            .zip(self.accepted.iter().copied())
    }
}

/// Runs a process to the end of its source.
pub fn run(mut process: Process, options: &RunOptions) -> Result<Report, RunError> {
    let graph = Arc::new(process.compile()?);
    let source = process.source.take().ok_or(ConfigError::NoSource)?;
    let instances = std::mem::take(&mut process.modules)
        .into_iter()
        .map(|m| m.instances)
        .collect();
    let threads = match options.executor {
        ExecutorKind::Threaded => options.threads.max(1),
        ExecutorKind::Sequential => 1,
    };
    let engine = Arc::new(exec::Engine::new(graph, instances, source, options));
    let failed = |engine: &exec::Engine, error: JobError| RunError::Failed {
        error,
        report: Box::new(engine.report(
            executor_name(options.executor),
            threads,
            options.events_in_flight,
        )),
    };
    if let Err(error) = engine.job_transition(true) {
        return Err(failed(&engine, error));
    }
    let executed = match options.executor {
        ExecutorKind::Threaded if threads > OVERSUBSCRIBED * cores() => {
            exec::shared_queue::run(engine.clone(), threads)
        }
        ExecutorKind::Threaded => exec::threaded::run(engine.clone(), threads),
        ExecutorKind::Sequential => exec::sequential::run(engine.clone()),
    };
    if let Err(message) = executed {
        return Err(failed(&engine, JobError::Executor(message)));
    }
    let end = engine.job_transition(false);
    if let Some(error) = engine.take_job_error() {
        return Err(failed(&engine, error));
    }
    if let Err(error) = end {
        return Err(failed(&engine, error));
    }
    Ok(engine.report(
        executor_name(options.executor),
        threads,
        options.events_in_flight.max(1),
    ))
}

/// Above this many threads per core, the threaded executor shares one queue
/// among its threads instead of work-stealing deques (see
/// `exec/shared_queue.rs`): such pools exist only when modules block.
pub const OVERSUBSCRIBED: usize = 8;

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn executor_name(kind: ExecutorKind) -> &'static str {
    match kind {
        ExecutorKind::Threaded => "threaded",
        ExecutorKind::Sequential => "sequential",
    }
}
