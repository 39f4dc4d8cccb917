//! The clock's bookkeeping of idle cores and deques ([`Indexed`]) takes
//! exactly the steps of the plain scans it replaced ([`Scan`]), and its work
//! per step does not grow with the number of cores.

use std::path::Path;
use std::sync::Arc;

use evflow_core::{Concurrency, EmptySource, PathDesc, Process};
use evflow_workloads::{self as synthetic, Timing, Work};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use evflow_core::graph::Graph;

use super::{ClockRun, Model, run, run_on};
use crate::options::SimOptions;
use crate::queues::{Indexed, Queues, Scan};

fn graph_and_model(mut process: Process) -> (Arc<Graph>, Model) {
    let graph = Arc::new(process.compile().expect("a valid process"));
    let model = Model {
        costs: process.cost_models(),
        ranges: process.parallel_ranges(),
        decisions: process.decision_models(),
        source: process.take_source().expect("a source"),
    };
    (graph, model)
}

fn simulate_with<Q: Queues>(process: Process, options: &SimOptions) -> ClockRun {
    let (graph, model) = graph_and_model(process);
    run_on::<Q>(graph, model, options).expect("the simulation runs")
}

/// What `evflow simulate` runs.
fn simulate(process: Process, options: &SimOptions) -> ClockRun {
    let (graph, model) = graph_and_model(process);
    run(graph, model, options).expect("the simulation runs")
}

/// A chain of `n` producers of 1 µs, the last read by a filter.
fn chain(n: usize, events: u64) -> Process {
    let mut p = Process::new("chain");
    p.set_source(EmptySource::new(events));
    let t = Timing::constant(1e-6, Work::Busy);
    for i in 0..n {
        let before = format!("m{}", i.wrapping_sub(1));
        let consumes: &[&str] = if i == 0 { &[] } else { &[&before] };
        p.add(synthetic::producer(
            &format!("m{i}"),
            t.clone(),
            consumes,
            &[""],
        ));
    }
    p.add(synthetic::filter("f", t, &[&format!("m{}", n - 1)], 1.0, 0));
    p.path("p", ["f"]);
    p
}

/// A random process: producers in a DAG (some serial, cloned or exclusive,
/// times varying by event), three filters on a reorderable path and two on
/// another, a serial output on an end path, luminosity blocks of 7 events.
fn random_process(seed: u64, events: u64) -> Process {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut p = Process::new("random");
    p.set_source(EmptySource::new(events).events_per_lumi(7).lumis_per_run(3));
    let n = rng.gen_range(5..60);
    let labels: Vec<String> = (0..n).map(|i| format!("m{i}")).collect();
    for i in 0..n {
        let times: Vec<f64> = (0..3).map(|_| rng.gen_range(1e-6..1e-4)).collect();
        let timing = Timing::new(times, 1.0, Work::Busy);
        let consumes: Vec<&str> = labels[..i]
            .iter()
            .filter(|_| rng.gen_bool((3.0 / (i as f64 + 1.0)).min(1.0)))
            .map(String::as_str)
            .collect();
        let desc = match rng.gen_range(0..8) {
            0 => synthetic::producer(&labels[i], timing, &consumes, &[""])
                .concurrency(Concurrency::Serial),
            1 => synthetic::producer(&labels[i], timing, &consumes, &[""])
                .concurrency(Concurrency::Exclusive(vec!["legacy".into()])),
            2 => synthetic::cloned_producer(&labels[i], 2, timing, &consumes, &[""]),
            _ => synthetic::producer(&labels[i], timing, &consumes, &[""]),
        };
        p.add(desc);
    }
    let mut filters = Vec::new();
    for f in 0..5 {
        let label = format!("f{f}");
        let input = labels[rng.gen_range(0..n)].clone();
        let timing = Timing::constant(2e-6 * (f as f64 + 1.0), Work::Busy);
        let pass = rng.gen_range(0.2..0.9);
        p.add(synthetic::filter(&label, timing, &[&input], pass, f));
        filters.push(label);
    }
    p.add_path(PathDesc::new("sel", filters[..3].to_vec()).reorderable(true));
    p.path("other", filters[3..].to_vec());
    let last = labels[n - 1].clone();
    let (out, _) =
        synthetic::output_with_tally("out", Timing::constant(1e-5, Work::Busy), &[&last]);
    p.add(out.select_events(["sel"]).concurrency(Concurrency::Serial));
    p.end_path("e", ["out"]);
    p
}

/// Everything a run produced, as comparable text: the report (with every
/// module execution: core, event, start, duration) and the clock's figures.
/// The planner's reasons quote its own wall-clock time and are left out.
fn figures(run: &ClockRun) -> String {
    let mut report = serde_json::to_value(&run.report).expect("a report");
    for change in report["orderings"].as_array_mut().expect("orderings") {
        change["reason"] = serde_json::Value::Null;
    }
    format!(
        "{report}\nsimulated {:?} busy {:?} events {} steps {}\nprofile {:?}\nmodules {:?}\nids {:?}",
        run.simulated_s.to_bits(),
        run.busy_s.to_bits(),
        run.events,
        run.steps,
        run.profile.iter().map(|t| t.to_bits()).collect::<Vec<_>>(),
        run.module_busy_s
            .iter()
            .map(|t| t.to_bits())
            .collect::<Vec<_>>(),
        run.event_ids,
    )
}

fn assert_same_steps(name: &str, make: &dyn Fn() -> Process, cores: &[usize], ks: &[usize]) {
    let modules = make().compile().expect("a valid process").modules.len();
    for &cores in cores {
        // As the critical-path bound: a core for every module and the source.
        let cores = if cores == 0 { modules + 1 } else { cores };
        for &k in ks {
            let options = SimOptions {
                cores,
                events_in_flight: k,
                overhead_s: 300e-9,
                planner: Some(evflow_core::ordering::OrderingOptions::default().factory()),
                trace: true,
                ..SimOptions::default()
            };
            let indexed = simulate_with::<Indexed>(make(), &options);
            let scanned = simulate_with::<Scan>(make(), &options);
            assert!(indexed.report.module_executions > 0, "{name}: nothing ran");
            assert!(
                figures(&indexed) == figures(&scanned),
                "{name} on {cores} cores, {k} in flight: the simulations differ"
            );
        }
    }
}

#[test]
fn indexed_queues_take_the_steps_of_plain_scans_on_synthetic_graphs() {
    for seed in 0..12 {
        assert_same_steps(
            &format!("random process {seed}"),
            &|| random_process(seed, 40),
            &[1, 3, 16, 0],
            &[1, 4, 12],
        );
    }
    assert_same_steps("chain", &|| chain(50, 20), &[1, 2, 0], &[1, 3]);
}

#[test]
fn indexed_queues_take_the_steps_of_plain_scans_on_the_cms_graphs() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/cms-reco");
    let configs = [
        "reco_hipileup_5_2_0_busywait_perfectIO.config",
        "reco_minbias_busywait.config",
        "reco_minbias_sleeping_betweenmodules.config",
    ];
    if !dir.join(configs[0]).exists() {
        eprintln!(
            "skipped: the CMS graphs are not in {} (the synthetic graphs are compared by \
             indexed_queues_take_the_steps_of_plain_scans_on_synthetic_graphs)",
            dir.display()
        );
        return;
    }
    for config in configs {
        let load = || {
            let options = evflow_config::LoadOptions {
                events: Some(30),
                time_scale: 0.1,
                ..evflow_config::LoadOptions::default()
            };
            evflow_config::load_file(&dir.join(config), &options)
                .expect("the CMS graph loads")
                .process
        };
        assert_same_steps(config, &load, &[1, 16, 0], &[1, 8]);
    }
}

/// Cores and bitmap words looked at per task completion, simulating a
/// chain of `n` modules on `n + 1` cores (as the critical-path bound does).
fn looked_at_per_step(n: usize, simulate: fn(Process, &SimOptions) -> ClockRun) -> f64 {
    let options = SimOptions {
        cores: n + 1,
        events_in_flight: 1,
        ..SimOptions::default()
    };
    let run = simulate(chain(n, 5), &options);
    assert!(run.steps as usize > 5 * n);
    run.looked_at as f64 / run.steps as f64
}

#[test]
fn finding_work_does_not_grow_with_the_cores() {
    let small = looked_at_per_step(100, simulate);
    let large = looked_at_per_step(3000, simulate);
    println!("{small:.2} looked at per step with 101 cores, {large:.2} with 3001");
    assert!(large < 12.0, "{large:.1} looked at per step on 3001 cores");
    assert!(large < small + 3.0, "{small:.1} -> {large:.1} per step");
    // The plain scans look at every core at every step: this test sees it.
    let scanned = looked_at_per_step(3000, simulate_with::<Scan>);
    println!("scanned: {scanned:.2} per step with 3001 cores");
    assert!(scanned > 1000.0, "{scanned:.1}");
}
