//! `evflow simulate`: predicted throughput on a machine we do not have.

use std::collections::HashMap;
use std::path::PathBuf;

use crate::{FilterOrderArg, WorkArg, run::write_json};

#[derive(clap::Args, Debug)]
pub struct SimulateArgs {
    /// The process configuration.
    pub config: PathBuf,
    /// Cores (threads) of the simulated machine.
    #[arg(long, default_value_t = 1)]
    pub cores: usize,
    /// Events processed at once.
    #[arg(long, short = 'k', default_value_t = 1)]
    pub events_in_flight: usize,
    #[arg(long, short = 'n')]
    pub events: Option<u64>,
    #[arg(long, default_value_t = 1.0)]
    pub time_scale: f64,
    /// Accepted for symmetry with `evflow run`: both kinds of work occupy a thread.
    #[arg(long, value_enum)]
    pub work: Option<WorkArg>,
    /// Scheduling overhead per module execution, in nanoseconds (see docs/performance.md).
    #[arg(long, default_value_t = 300.0)]
    pub overhead_ns: f64,
    /// Take module times (mean per call) from a report or trace of a real run instead of the configuration.
    #[arg(long)]
    pub times_from: Option<PathBuf>,
    /// Write the predicted report (same fields as `evflow run --report`) here.
    #[arg(long)]
    pub report: Option<PathBuf>,
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Order of the filters of reorderable paths (default: the configuration's, else adaptive).
    #[arg(long, value_enum)]
    pub filter_order: Option<FilterOrderArg>,
}

pub fn simulate(args: &SimulateArgs) -> Result<(), String> {
    if !args.time_scale.is_finite() || args.time_scale < 0.0 {
        return Err(format!(
            "--time-scale must be a finite number >= 0, not {}",
            args.time_scale
        ));
    }
    if !args.overhead_ns.is_finite() || args.overhead_ns < 0.0 {
        return Err(format!(
            "--overhead-ns must be a finite number >= 0, not {}",
            args.overhead_ns
        ));
    }
    let load = evflow_config::LoadOptions {
        events: args.events,
        time_scale: args.time_scale,
        work: None,
    };
    let mut loaded = evflow_config::load_file(&args.config, &load).map_err(|e| e.to_string())?;
    if let Some(path) = &args.times_from {
        let times = crate::inspect::mean_module_times(path)?;
        apply_times(&mut loaded.process, &times, args.time_scale);
    }
    let options = evflow_sim::SimOptions {
        cores: args.cores,
        events_in_flight: args.events_in_flight,
        overhead_s: args.overhead_ns * 1e-9,
        read_s: 0.0,
        planner: Some(FilterOrderArg::apply(args.filter_order, loaded.ordering.clone()).factory()),
        trace: false,
    };
    let sim = evflow_sim::simulate(loaded.process, &options)
        .map_err(|e| format!("{}: {e}", args.config.display()))?;
    if let Some(path) = &args.report {
        write_json(path, &sim)?;
    }
    if !args.quiet {
        print(&sim);
    }
    Ok(())
}

/// Replaces every module's cost by the measured mean time per call.
fn apply_times(process: &mut evflow_core::Process, times: &HashMap<String, f64>, scale: f64) {
    for m in process.modules_mut() {
        if let Some(&t) = times.get(m.label()) {
            let seconds = t * scale;
            m.set_cost_model(std::sync::Arc::new(move |_| seconds));
        }
    }
}

fn print(sim: &evflow_sim::Simulation) {
    let r = &sim.report;
    let b = &sim.bounds;
    println!(
        "predicted: {:.2} events/s on {} cores with {} events in flight ({} events, {:.3} s simulated in {:.3} s: {:.0}x real time)",
        r.throughput_ev_s,
        sim.cores,
        r.events_in_flight,
        r.events,
        sim.simulated_s,
        sim.simulation_wall_s,
        sim.simulated_s / sim.simulation_wall_s.max(1e-9),
    );
    println!("core utilisation: {:.1}%", 100.0 * sim.core_utilisation);
    println!("bounds (events/s):");
    println!(
        "  work / cores:                 {:>12.2}   ({:.6} s of work per event)",
        b.work_bound_ev_s, b.work_per_event_s
    );
    println!(
        "  events in flight / crit.path: {:>12.2}   ({:.6} s critical path per event)",
        b.critical_path_bound_ev_s, b.critical_path_s
    );
    match &b.busiest_resource {
        Some(name) => println!(
            "  busiest serial resource:      {:>12.2}   ({name}: {:.6} s per event)",
            b.resource_bound_ev_s, b.busiest_resource_s
        ),
        None => println!("  busiest serial resource:      (none: every module is shared)"),
    }
    println!(
        "  => at most {:.2} events/s; predicted {:.1}% of it",
        b.bound_ev_s,
        100.0 * r.throughput_ev_s / b.bound_ev_s
    );
    if !sim.limiters.is_empty() {
        println!("serial and exclusive limiters (busy fraction):");
        for l in sim.limiters.iter().take(5) {
            println!(
                "  {:<60} {:>6.1}%  {:.6} s per event",
                l.name,
                100.0 * l.busy_fraction,
                l.seconds_per_event
            );
        }
    }
    println!("concurrency profile (fraction of time with n modules running):");
    let profile = &sim.concurrency_profile;
    let mean: f64 = profile.iter().enumerate().map(|(n, f)| n as f64 * f).sum();
    let peak = profile.iter().rposition(|&f| f > 0.0).unwrap_or(0);
    println!("  mean {mean:.2}, peak {peak}");
    for (n, f) in profile.iter().enumerate().filter(|(_, f)| **f >= 0.01) {
        println!(
            "  {n:>5} {:>6.1}% {}",
            100.0 * f,
            "#".repeat((f * 50.0).round() as usize)
        );
    }
}
