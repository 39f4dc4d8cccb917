//! [`simulate`]: runs the engine's decision logic on the simulated clock,
//! then derives the bounds and limiters of the prediction.

use std::sync::Arc;

use evflow_core::{Process, Report, RunError};
use serde::Serialize;

use crate::bounds::{self, Bounds, Limiter};
use crate::clock;
use crate::options::SimOptions;

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
    /// Per device module (emulated device): the predicted host and device
    /// calls, launches and split, as `evflow run --report` writes them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<evflow_device::DeviceModuleReport>,
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
    if options.cores == 0 || options.events_in_flight == 0 || options.concurrent_lumis == 0 {
        return Err(SimError::Options(
            "cores, events in flight and concurrent luminosity blocks must be at least 1".into(),
        ));
    }
    let seconds = |s: f64| s.is_finite() && s >= 0.0;
    if !(seconds(options.overhead_s) && seconds(options.read_s)) {
        return Err(SimError::Options(format!(
            "overhead and read time must be finite and >= 0, not {:e} s and {:e} s",
            options.overhead_s, options.read_s
        )));
    }
    let graph = Arc::new(process.compile().map_err(RunError::from)?);
    let model = clock::Model {
        costs: process.cost_models(),
        ranges: process.parallel_ranges(),
        decisions: process.decision_models(),
        source: process
            .take_source()
            .ok_or(RunError::Config(evflow_core::ConfigError::NoSource))?,
    };
    let started = std::time::Instant::now();
    let costs_only = clock::Model {
        costs: model.costs.clone(),
        ranges: model.ranges.clone(),
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
        devices: run.devices,
        bounds,
        limiters,
        simulation_wall_s,
    })
}
