//! # evflow-sim
//!
//! A discrete-event simulation of an evflow job on `cores` cores. It drives
//! the engine's **own** decision logic ([`evflow_core::schedule::Coordinator`])
//! — the same code the threaded executor runs — with a simulated clock:
//! a module task occupies a core for the time its cost model gives, instead
//! of running. Filters decide by their decision model (synthetic filters
//! have one; others pass).
//!
//! ```
//! use evflow_core::{EmptySource, Process};
//! use evflow_workloads::{self as synthetic, Timing, Work};
//! use evflow_sim::{simulate, SimOptions};
//!
//! let mut p = Process::new("two-step");
//! p.set_source(EmptySource::new(100));
//! p.add(synthetic::producer("a", Timing::constant(0.010, Work::Busy), &[], &[""]));
//! p.add(synthetic::producer("b", Timing::constant(0.010, Work::Busy), &[], &[""]));
//! p.add(synthetic::filter("f", Timing::constant(0.0, Work::Busy), &["a", "b"], 1.0, 0));
//! p.path("p", ["f"]);
//! let sim = simulate(p, &SimOptions { cores: 2, events_in_flight: 1, ..SimOptions::default() }).unwrap();
//! // a and b run side by side: 20 ms of work per event in 10 ms.
//! assert!((sim.report.throughput_ev_s - 100.0).abs() < 1.0);
//! assert!((sim.bounds.critical_path_s - 0.010).abs() < 1e-6);
//! ```

// Public types print in tests and users' logs.
#![warn(missing_debug_implementations)]

mod bounds;
mod clock;
mod core_set;
mod device;
mod machine;
mod options;
mod queues;
mod simulate;
mod time;

pub use bounds::{Bounds, Limiter};
pub use options::SimOptions;
pub use simulate::{SimError, Simulation, simulate};
