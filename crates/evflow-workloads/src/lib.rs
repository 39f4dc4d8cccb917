//! # evflow-workloads
//!
//! Synthetic workloads for evflow's benchmarks, tests, configuration files
//! and simulator: modules that spend a configured time per event (busy
//! arithmetic or sleep), filters that pass a deterministic fraction of
//! events (independent, correlated with another, or drifting during the
//! job), and event tables whose columns filters cut on.
//!
//! They live outside the engine (`evflow-core`), which users link, and use
//! only its public API: a synthetic module is an ordinary module.
//!
//! * [`timing`]: [`Timing`] and [`Work`], how a module spends its time;
//! * [`modules`]: producers, filters, analyzers and outputs, and the
//!   decision models of filters;
//! * [`table`]: event tables read from CSV files, and cuts on their columns;
//! * [`ranges`]: a parallel-for within one module call (the call's time in
//!   ranges that idle cores help with).
//!
//! ```
//! use evflow_core::{EmptySource, Process, RunOptions, run};
//! use evflow_workloads::{self as synthetic, Timing, Work};
//!
//! let mut p = Process::new("demo");
//! p.set_source(EmptySource::new(100));
//! let work = Timing::constant(0.0, Work::Busy);
//! p.add(synthetic::producer("a", work.clone(), &[], &[""]));
//! p.add(synthetic::filter("keepHalf", work, &["a"], 0.5, 7));
//! p.path("p", ["keepHalf"]);
//! let report = run(p, &RunOptions::default()).unwrap();
//! let passed = report.paths[0].passed;
//! assert!(passed > 30 && passed < 70, "{passed}");
//! ```

// Public types print in tests and users' logs.
#![warn(missing_debug_implementations)]

pub mod modules;
pub mod ranges;
pub mod table;
pub mod timing;

pub use evflow_core::hash::mix;
pub use modules::{
    Tally, analyzer, analyzer_with_tally, cloned_producer, consumed_digest, correlated_decision,
    drifting_decision, event_key, filter, filter_with_decision, fraction_decision,
    output_with_tally, passes, passes_id, producer,
};
pub use ranges::{
    EmulatedCore, RANGE_GRAIN_S, SLEEPING_HELPERS, effective_ranges, for_each_range,
    for_each_sleeping_range, hold_emulated_core, set_emulated_cores,
};
pub use timing::{
    Timing, Work, busy_iterations_per_second, busy_work, configured_failure, sleep_work,
};
