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
//! use evflow_core::{EmptySource, Process, synthetic::{self, Timing, Work}};
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

mod bounds;
mod clock;

use std::sync::Arc;

pub use bounds::{Bounds, Limiter};
use evflow_core::{Process, Report, RunError};
use serde::Serialize;

/// How to simulate.
#[derive(Clone)]
pub struct SimOptions {
    /// Cores (threads) of the simulated machine.
    pub cores: usize,
    pub events_in_flight: usize,
    /// Scheduling overhead added to every module execution, in seconds
    /// (measured by `bench/core.py` benchmark 1: a few hundred ns).
    pub overhead_s: f64,
    /// Time to read one event from the source.
    pub read_s: f64,
    /// Order reorderable paths with this planner (default: written order).
    pub planner: Option<evflow_core::PlannerFactory>,
    /// Record every simulated module execution in `report.trace`.
    pub trace: bool,
}

impl std::fmt::Debug for SimOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimOptions")
            .field("cores", &self.cores)
            .field("events_in_flight", &self.events_in_flight)
            .field("overhead_s", &self.overhead_s)
            .field("read_s", &self.read_s)
            .finish()
    }
}

impl Default for SimOptions {
    fn default() -> Self {
        Self {
            cores: 1,
            events_in_flight: 1,
            overhead_s: 0.0,
            read_s: 0.0,
            planner: None,
            trace: false,
        }
    }
}

/// A prediction.
#[derive(Clone, Debug, Serialize)]
pub struct Simulation {
    /// The same report `evflow run` writes, with simulated times.
    pub report: Report,
    pub cores: usize,
    /// Simulated seconds.
    pub simulated_s: f64,
    /// Busy core time / (cores × simulated time).
    pub core_utilisation: f64,
    /// `concurrency_profile[i]`: fraction of the simulated time during which
    /// exactly `i` module tasks were running.
    pub concurrency_profile: Vec<f64>,
    pub bounds: Bounds,
    /// Serial and exclusive modules or resources, busiest first, with the
    /// fraction of time they were busy: a value near 1 limits scaling.
    pub limiters: Vec<Limiter>,
    /// Wall-clock seconds the simulation itself took.
    pub simulation_wall_s: f64,
}

/// The errors of [`simulate`].
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error(transparent)]
    Run(#[from] RunError),
    #[error("invalid simulation options: {0}")]
    Options(String),
}

/// Simulates `process` on the machine described by `options`.
pub fn simulate(mut process: Process, options: &SimOptions) -> Result<Simulation, SimError> {
    if options.cores == 0 || options.events_in_flight == 0 {
        return Err(SimError::Options(
            "cores and events in flight must be at least 1".into(),
        ));
    }
    if !(options.overhead_s >= 0.0 && options.read_s >= 0.0) {
        return Err(SimError::Options(
            "overhead and read time must be >= 0".into(),
        ));
    }
    let graph = Arc::new(process.compile().map_err(RunError::from)?);
    let model = clock::Model {
        costs: process.cost_models(),
        decisions: process.decision_models(),
        source: process
            .take_source()
            .ok_or(RunError::Config(evflow_core::ConfigError::NoSource))?,
    };
    let started = std::time::Instant::now();
    let costs_only = clock::Model {
        costs: model.costs.clone(),
        decisions: model.decisions.clone(),
        source: Box::new(clock::Replay(Vec::new().into_iter())),
    };
    let run = clock::run(graph.clone(), model, options)?;
    let simulation_wall_s = started.elapsed().as_secs_f64();
    let bounds = bounds::compute(&graph, &run, &costs_only, options);
    let limiters = bounds::limiters(&graph, &run);
    Ok(Simulation {
        cores: options.cores,
        simulated_s: run.simulated_s,
        core_utilisation: run.busy_s
            / (options.cores as f64 * run.simulated_s.max(f64::MIN_POSITIVE)),
        concurrency_profile: run
            .profile
            .iter()
            .map(|t| t / run.simulated_s.max(f64::MIN_POSITIVE))
            .collect(),
        report: run.report,
        bounds,
        limiters,
        simulation_wall_s,
    })
}
