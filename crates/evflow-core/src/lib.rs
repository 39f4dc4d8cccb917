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
//! The synthetic modules used below (timed producers and filters) are in
//! the `evflow-workloads` crate.
//!
//! ## Layout
//!
//! This file only declares modules and re-exports; each file holds one
//! concept and the files form a DAG (checked by `tests/layout.rs`):
//! `ids` (names of events, products, module kinds) → `graph` → `event`,
//! `trigger` → `module` → `source` → `process`; `schedule` (decisions),
//! `ordering` (planners), `exec` (executors), `report`, and `job`
//! ([`run`]) on top.
//!
//! ```
//! use evflow_core::*;
//! use evflow_workloads as synthetic;
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
//! split its own work with [`parallel`] (rayon): the pieces run on the same
//! threads as other modules' tasks — no extra threads, no oversubscription.
//! A thread that has no task of its own runs pending pieces before it
//! sleeps; the thread that split the work runs the pieces nobody took.
//!
//! ```
//! use evflow_core::*;
//! use evflow_core::parallel::prelude::*;
//! use evflow_workloads as synthetic;
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

// Public types print in tests and users' logs.
#![warn(missing_debug_implementations)]

mod compile;
mod config_error;
mod error;
mod event;
mod exec;
pub mod graph;
pub mod hash;
mod ids;
mod job;
mod module;
mod module_arc;
mod options;
pub mod ordering;
pub mod parallel_for;
mod process;
mod report;
pub mod schedule;
mod source;
mod stop;
mod trace;
mod trigger;

pub use compile::ConfigError;
pub use error::{JobError, ModuleError, ModuleResult};
pub use event::Event;
pub use graph::Graph;
pub use ids::{Concurrency, EventId, InputTag, ModuleKind};
pub use job::{OVERSUBSCRIBED, RunError, run};
pub use module::{Analyzer, Completion, Filter, ModuleImpl, Output, Producer, Transitions};
pub use options::{
    DEFAULT_CONCURRENT_LUMIS, ErrorPolicy, ExecutorKind, MAX_EVENTS_IN_FLIGHT, PlannerFactory,
    ProgressFn, RunOptions,
};
pub use process::{CostModel, DecisionModel, ModuleDesc, PathDesc, Process};
pub use report::{
    ChromeTrace, EXTERNAL_WAIT_TRACKS, FailedEvent, ModuleReport, PathReport, Report, Stall,
    SteadyRate, StepReport,
};
pub use schedule::OrderChange;
pub use source::{EmptySource, Source, SourceProducts};
pub use stop::StopHandle;
pub use trace::{Iter as TraceIter, Trace, TraceSlice};
pub use trigger::TriggerResults;

/// rayon, re-exported for intra-module parallelism on the engine's pool.
pub use rayon as parallel;

/// The README's Rust example, compiled and run as a test.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeExample;
