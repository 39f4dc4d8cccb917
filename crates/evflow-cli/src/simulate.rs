//! `evflow simulate`: predicted throughput on a machine we do not have.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::WorkloadArgs;
use crate::output_files::write_json;

#[derive(clap::Args, Debug)]
pub struct SimulateArgs {
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// Cores (threads) of the simulated machine (default: the configuration's threads, else 1);
    /// `-j` / `--threads` as `evflow run` takes them.
    #[arg(long, short = 'j', visible_alias = "threads")]
    pub cores: Option<usize>,
    /// Events processed at once (default: the configuration's, else the number of cores), as `evflow run`.
    #[arg(long, short = 'k')]
    pub events_in_flight: Option<usize>,
    /// Scheduling overhead per module execution, in nanoseconds (see docs/performance.md).
    #[arg(long, default_value_t = 300.0)]
    pub overhead_ns: f64,
    /// Take module times (mean per call) from a report or trace of a real run instead of the
    /// configuration. Measured times are used as they are (`--time-scale` applies only to the
    /// configuration's times of modules the report does not name); a module with per-event
    /// times keeps their variation, scaled to the measured mean.
    #[arg(long)]
    pub times_from: Option<PathBuf>,
}

/// The largest `--overhead-ns`: one second per module execution, far
/// beyond any scheduler (a few hundred ns are measured).
const MAX_OVERHEAD_NS: f64 = 1e9;

pub fn simulate(args: &SimulateArgs) -> Result<ExitCode, String> {
    if !(0.0..=MAX_OVERHEAD_NS).contains(&args.overhead_ns) {
        return Err(format!(
            "--overhead-ns must be a number from 0 to {MAX_OVERHEAD_NS:e} (1 s per module \
             execution), not {}",
            if args.overhead_ns.abs() < 1e15 {
                format!("{}", args.overhead_ns)
            } else {
                format!("{:e}", args.overhead_ns)
            }
        ));
    }
    if args.workload.config.extension().is_some_and(|e| e == "py") {
        return Err(format!(
            "{}: a Python analysis runs with `evflow run`; `evflow simulate` predicts jobs \
             of configuration files (.toml, a CMS task-queue .config/.json)",
            args.workload.config.display()
        ));
    }
    if args.workload.events == Some(0) {
        return Err(
            "--events must be at least 1: a simulation of no events predicts nothing".into(),
        );
    }
    crate::check_parallel(args.cores, "--cores")?;
    crate::check_parallel(args.events_in_flight, "--events-in-flight")?;
    let workload = &args.workload;
    crate::output_files::check_outputs(
        &[("--report", workload.report.as_deref())],
        &[
            ("configuration", Some(&workload.config)),
            ("--times-from file", args.times_from.as_deref()),
        ],
    )?;
    let mut loaded = workload.load()?;
    crate::output_files::check_outputs(
        &[("--report", workload.report.as_deref())],
        &crate::output_files::read_by(&loaded),
    )?;
    let mut device_launches = std::collections::HashMap::new();
    let mut measured = std::collections::HashSet::new();
    if let Some(path) = &args.times_from {
        let applied =
            crate::times_from::apply(path, &mut loaded, &workload.config, workload.quiet)?;
        measured = applied.measured;
        device_launches = applied.device_launches;
    }
    for (label, note) in &loaded.simulation_notes {
        // A measured time stands for what the run did, failures aside.
        let timed = measured.contains(label) && !note.contains("fail_on_events");
        if !timed {
            eprintln!("evflow: warning: {}: {note}", workload.config.display());
        }
    }
    // As `evflow run`: the configuration's suggestions when the options
    // are not given (a CMS file's nSimultaneousEvents, a TOML file's
    // events_in_flight), not one event at a time.
    let cores = args.cores.or(loaded.threads).unwrap_or(1);
    let events_in_flight = args
        .events_in_flight
        .or(loaded.events_in_flight)
        .unwrap_or(cores)
        // No more slots than events: the others would never fill (and the
        // critical-path bound would count them).
        .min(usize::try_from(loaded.events).unwrap_or(usize::MAX).max(1));
    let options = evflow_sim::SimOptions {
        cores,
        events_in_flight,
        overhead_s: args.overhead_ns * 1e-9,
        read_s: 0.0,
        planner: Some(workload.planner(&loaded)),
        trace: false,
        devices: loaded.devices.clone(),
        concurrent_lumis: workload.concurrent_lumis,
        device_launches,
        // Ctrl-C stops a long simulation as it stops a run: the events
        // simulated so far are reported, marked interrupted.
        stop: Some(crate::signals::stop_on_signals()?),
    };
    if let Some(devices) = &loaded.devices {
        devices.set_options(evflow_device::DeviceOptions {
            events_in_flight,
            host_threads: cores,
            ..devices.options()
        });
    }
    let sim = evflow_sim::simulate(loaded.process, &options)
        .map_err(|e| format!("{}: {e}", workload.config.display()))?;
    if let Some(path) = &workload.report {
        write_json(path, &sim)?;
    }
    if !workload.quiet {
        print(&sim);
    }
    if sim.report.interrupted {
        eprintln!(
            "evflow: interrupted: the simulation stopped reading after {} events; the events in \
             flight finished",
            sim.report.events
        );
        return Ok(ExitCode::from(crate::signals::EXIT_INTERRUPTED));
    }
    Ok(ExitCode::SUCCESS)
}

/// An upper bound on throughput, 12 characters wide; none when nothing limits it.
fn bound(events_s: f64) -> String {
    if events_s.is_finite() {
        format!("{events_s:>12.2}")
    } else {
        format!("{:>12}", "none")
    }
}

fn print(sim: &evflow_sim::Simulation) {
    let r = &sim.report;
    let b = &sim.bounds;
    if r.events == 0 {
        println!("no prediction: the configuration has no events to simulate (give --events N)");
        return;
    }
    // No simulated time (modules of time 0, no overhead): the rate is not
    // 0 but has no limit; the report's throughput_ev_s stays 0 (JSON has
    // no infinity).
    let rate = if sim.simulated_s > 0.0 {
        format!("{:.2} events/s", r.throughput_ev_s)
    } else {
        "unbounded events/s (the events take no simulated time)".to_string()
    };
    // "0x real time" said nothing of a job that takes no simulated time.
    let speed = sim.simulated_s / sim.simulation_wall_s.max(1e-9);
    let speed = if speed >= 1.0 {
        format!("{speed:.0}x real time")
    } else if speed > 0.0 {
        format!("{:.0}x slower than real time", 1.0 / speed)
    } else {
        "no simulated time".to_string()
    };
    println!(
        "predicted: {rate} on {} {} with {} events in flight ({} events, {:.3} s simulated in {:.3} s: {speed})",
        sim.cores,
        if sim.cores == 1 { "core" } else { "cores" },
        r.events_in_flight,
        r.events,
        sim.simulated_s,
        sim.simulation_wall_s,
    );
    println!("core utilisation: {:.1}%", 100.0 * sim.core_utilisation);
    println!("bounds (events/s):");
    println!(
        "  work / cores:                 {}   ({:.6} s of work per event)",
        bound(b.work_bound_ev_s),
        b.work_per_event_s
    );
    println!(
        "  events in flight / crit.path: {}   ({:.6} s critical path per event)",
        bound(b.critical_path_bound_ev_s),
        b.critical_path_s
    );
    match &b.busiest_resource {
        Some(name) => println!(
            "  busiest serial resource:      {}   ({name}: {:.6} s per event)",
            bound(b.resource_bound_ev_s),
            b.busiest_resource_s
        ),
        None => println!("  busiest serial resource:      (none: every module is shared)"),
    }
    if b.bound_ev_s.is_finite() {
        println!(
            "  => at most {:.2} events/s; predicted {:.1}% of it",
            b.bound_ev_s,
            100.0 * r.throughput_ev_s / b.bound_ev_s
        );
    } else {
        println!("  => no bound: the events take no simulated time");
    }
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
    // The same lines as `evflow run` prints, from the simulated device.
    if !sim.devices.is_empty() {
        println!("device modules (predicted):");
        crate::device::print_summary(&sim.devices);
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
