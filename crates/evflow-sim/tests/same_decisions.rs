//! The simulator and the threaded executor take the same scheduling
//! decisions: they share the coordinator, and the simulated cores follow the
//! threaded executor's task order (inline first follow-up, own deque newest
//! first, steal oldest).

use std::collections::BTreeMap;

use evflow_core::{Concurrency, EmptySource, Process, Report, RunOptions};
use evflow_sim::{SimOptions, simulate};
use evflow_workloads::{self as synthetic, Timing, Work};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A random process: producers in a DAG, some serial, cloned or exclusive,
/// filters on two paths (one shared between them), an output on an end path.
fn random_process(seed: u64, events: u64, seconds: f64) -> Process {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut p = Process::new("random");
    p.set_source(EmptySource::new(events).events_per_lumi(7).lumis_per_run(3));
    let n = rng.gen_range(6..20);
    let labels: Vec<String> = (0..n).map(|i| format!("m{i}")).collect();
    let timing = Timing::constant(seconds, Work::Busy);
    for i in 0..n {
        let mut consumes: Vec<&str> = Vec::new();
        for earlier in &labels[..i] {
            if rng.gen_bool(0.25) {
                consumes.push(earlier);
            }
        }
        let desc = match rng.gen_range(0..6) {
            0 => synthetic::producer(&labels[i], timing.clone(), &consumes, &[""])
                .concurrency(Concurrency::Serial),
            1 => synthetic::producer(&labels[i], timing.clone(), &consumes, &[""])
                .concurrency(Concurrency::Exclusive(vec!["legacy".into()])),
            2 => synthetic::cloned_producer(&labels[i], 2, timing.clone(), &consumes, &[""]),
            _ => synthetic::producer(&labels[i], timing.clone(), &consumes, &[""]),
        };
        p.add(desc);
    }
    let pick = |rng: &mut ChaCha8Rng| labels[rng.gen_range(0..n)].clone();
    let (a, b, c) = (pick(&mut rng), pick(&mut rng), pick(&mut rng));
    p.add(synthetic::filter("fa", timing.clone(), &[&a], 0.7, 1));
    p.add(synthetic::filter("fb", timing.clone(), &[&b], 0.5, 2));
    p.add(synthetic::filter("fc", timing.clone(), &[&c], 0.8, 3));
    p.path("p1", ["fa", "fb"]);
    p.path("p2", ["fc", "fa"]);
    let (out, _) = synthetic::output_with_tally("out", timing, &[&a, &c]);
    p.add(out.select_events(["p1"]).concurrency(Concurrency::Serial));
    p.end_path("e", ["out"]);
    p
}

fn execution_order(report: &Report) -> Vec<(String, u64)> {
    report
        .trace
        .iter()
        .filter(|s| s.category == "module")
        .map(|s| (s.name.to_string(), s.event.map(|e| e.event).unwrap_or(0)))
        .collect()
}

fn executions_per_event(report: &Report) -> BTreeMap<u64, Vec<String>> {
    let mut map: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for (name, event) in execution_order(report) {
        map.entry(event).or_default().push(name);
    }
    for v in map.values_mut() {
        v.sort();
    }
    map
}

/// (label, visited, passed) of one path step.
type StepCounts = (String, u64, u64);

fn path_counts(report: &Report) -> Vec<(String, u64, u64, Vec<StepCounts>)> {
    report
        .paths
        .iter()
        .map(|p| {
            let steps = p
                .filters
                .iter()
                .map(|f| (f.label.clone(), f.visited, f.passed))
                .collect();
            (p.name.clone(), p.visited, p.passed, steps)
        })
        .collect()
}

#[test]
fn one_core_executes_tasks_in_the_threaded_executors_order() {
    for seed in 0..20 {
        for k in [1, 2, 4] {
            let run_opts = RunOptions {
                threads: 1,
                events_in_flight: k,
                trace: true,
                ..RunOptions::default()
            };
            let real = evflow_core::run(random_process(seed, 30, 0.0), &run_opts).unwrap();
            let sim_opts = SimOptions {
                cores: 1,
                events_in_flight: k,
                trace: true,
                ..SimOptions::default()
            };
            let sim = simulate(random_process(seed, 30, 0.0), &sim_opts).unwrap();
            assert_eq!(
                execution_order(&real),
                execution_order(&sim.report),
                "seed {seed}, {k} events in flight: the simulated order differs"
            );
            assert_eq!(path_counts(&real), path_counts(&sim.report), "seed {seed}");
        }
    }
}

#[test]
fn many_cores_run_the_same_modules_for_every_event() {
    for seed in 20..35 {
        let run_opts = RunOptions {
            threads: 4,
            events_in_flight: 6,
            trace: true,
            ..RunOptions::default()
        };
        let real = evflow_core::run(random_process(seed, 40, 20e-6), &run_opts).unwrap();
        let sim_opts = SimOptions {
            cores: 4,
            events_in_flight: 6,
            trace: true,
            ..SimOptions::default()
        };
        let sim = simulate(random_process(seed, 40, 20e-6), &sim_opts).unwrap();
        assert_eq!(
            executions_per_event(&real),
            executions_per_event(&sim.report),
            "seed {seed}"
        );
        assert_eq!(path_counts(&real), path_counts(&sim.report), "seed {seed}");
        let calls = |r: &Report| {
            r.modules
                .iter()
                .map(|m| (m.label.clone(), m.calls))
                .collect::<Vec<_>>()
        };
        assert_eq!(calls(&real), calls(&sim.report), "seed {seed}");
        assert!(sim.report.peak_events_in_flight <= 6);
    }
}

#[test]
fn throughput_bounds_hold_for_a_chain_and_a_fan() {
    // A chain of 4 modules of 1 ms: critical path 4 ms, work 4 ms.
    let mut chain = Process::new("chain");
    chain.set_source(EmptySource::new(100));
    let t = Timing::constant(0.001, Work::Busy);
    chain.add(synthetic::producer("a", t.clone(), &[], &[""]));
    chain.add(synthetic::producer("b", t.clone(), &["a"], &[""]));
    chain.add(synthetic::producer("c", t.clone(), &["b"], &[""]));
    chain.add(synthetic::filter("d", t.clone(), &["c"], 1.0, 0));
    chain.path("p", ["d"]);
    let sim = simulate(
        chain,
        &SimOptions {
            cores: 8,
            events_in_flight: 2,
            ..SimOptions::default()
        },
    )
    .unwrap();
    assert!((sim.bounds.critical_path_s - 0.004).abs() < 1e-9);
    assert!((sim.bounds.work_per_event_s - 0.004).abs() < 1e-9);
    // Two events in flight on a 4 ms critical path: 500 events/s at most, and reached.
    assert!(
        (sim.report.throughput_ev_s - 500.0).abs() / 500.0 < 0.02,
        "{}",
        sim.report.throughput_ev_s
    );

    // A serial module of 1 ms limits any machine to 1000 events/s.
    let mut fan = Process::new("fan");
    fan.set_source(EmptySource::new(400));
    fan.add(synthetic::producer("s", t.clone(), &[], &[""]).concurrency(Concurrency::Serial));
    fan.add(synthetic::producer("x", t.clone(), &[], &[""]));
    fan.add(synthetic::filter("f", Timing::zero(), &["s", "x"], 1.0, 0));
    fan.path("p", ["f"]);
    let sim = simulate(
        fan,
        &SimOptions {
            cores: 16,
            events_in_flight: 16,
            ..SimOptions::default()
        },
    )
    .unwrap();
    assert!((sim.bounds.resource_bound_ev_s - 1000.0).abs() < 1e-6);
    assert!(sim.report.throughput_ev_s <= 1000.0 * 1.0001);
    assert!(
        sim.report.throughput_ev_s > 950.0,
        "{}",
        sim.report.throughput_ev_s
    );
    assert!(sim.limiters[0].name.contains("'s'"));
    assert!(sim.limiters[0].busy_fraction > 0.95);
}

/// A planner that changes its mind once per event: the written order when
/// the event starts, the reverse when asked again (just before the path's
/// first step runs, [`evflow_core::schedule::Coordinator::replan`]).
struct SecondThoughts {
    asked: std::sync::Mutex<std::collections::HashSet<(usize, u64)>>,
    steps: Vec<evflow_core::schedule::PathPlan>,
}

impl evflow_core::schedule::Planner for SecondThoughts {
    fn plan(
        &self,
        path: usize,
        event_index: u64,
    ) -> std::sync::Arc<evflow_core::schedule::PathPlan> {
        let again = !self.asked.lock().unwrap().insert((path, event_index));
        let written = self.steps[path].clone();
        let mut order: Vec<usize> = written.groups.iter().flatten().copied().collect();
        if again {
            order.reverse();
        }
        std::sync::Arc::new(evflow_core::schedule::PathPlan::sequence(order))
    }
}

#[test]
fn a_plan_decided_while_the_event_waited_is_taken_alike() {
    let process = || {
        let mut p = Process::new("replan");
        p.set_source(EmptySource::new(20));
        let timing = Timing::constant(0.0, Work::Busy);
        p.add(synthetic::producer("raw", timing.clone(), &[], &[""]));
        // Both filters reject every event: only the first step of the
        // order in force is visited.
        p.add(synthetic::filter("fa", timing.clone(), &["raw"], 0.0, 1));
        p.add(synthetic::filter("fb", timing, &["raw"], 0.0, 2));
        p.add_path(evflow_core::PathDesc::new("p", ["fa", "fb"]).reorderable(true));
        p
    };
    let planner: evflow_core::PlannerFactory = std::sync::Arc::new(|graph: &evflow_core::Graph| {
        let steps = graph
            .paths
            .iter()
            .map(|p| evflow_core::schedule::PathPlan::sequence(p.steps.iter().copied()))
            .collect();
        std::sync::Arc::new(SecondThoughts {
            asked: Default::default(),
            steps,
        }) as std::sync::Arc<dyn evflow_core::schedule::Planner>
    });
    let real = evflow_core::run(
        process(),
        &RunOptions {
            threads: 1,
            events_in_flight: 2,
            planner: Some(planner.clone()),
            ..RunOptions::default()
        },
    )
    .unwrap();
    let sim = simulate(
        process(),
        &SimOptions {
            cores: 1,
            events_in_flight: 2,
            planner: Some(planner),
            ..SimOptions::default()
        },
    )
    .unwrap();
    let counts = path_counts(&real);
    // The replanned order ran: fb first on every event, fa never.
    assert_eq!(
        counts[0].3,
        vec![("fa".to_string(), 0, 0), ("fb".to_string(), 20, 0)]
    );
    assert_eq!(counts, path_counts(&sim.report));
}

/// The adaptive planner, simulated, gets the modelled running times of the
/// steps it asks to time, as a run's executor gives it the measured ones:
/// a costly, unselective cut written first moves behind a cheap, selective
/// one in both, and the simulated time follows the order that ran.
#[test]
fn the_simulated_planner_times_the_steps_and_reorders_as_a_run() {
    let process = || {
        let mut p = Process::new("adaptive");
        p.set_source(EmptySource::new(4_000));
        p.add(synthetic::filter(
            "slow",
            Timing::constant(1e-3, Work::Sleep),
            &[],
            0.95,
            1,
        ));
        p.add(synthetic::filter(
            "fast",
            Timing::constant(1e-6, Work::Sleep),
            &[],
            0.1,
            2,
        ));
        p.add_path(evflow_core::PathDesc::new("sel", ["slow", "fast"]).reorderable(true));
        p
    };
    let adaptive = || {
        Some(
            evflow_core::ordering::OrderingOptions::new(evflow_core::ordering::Policy::Adaptive)
                .factory(),
        )
    };
    let sim = |planner| {
        simulate(
            process(),
            &SimOptions {
                cores: 2,
                events_in_flight: 4,
                planner,
                ..SimOptions::default()
            },
        )
        .unwrap()
    };
    let (written, reordered) = (sim(None), sim(adaptive()));
    assert_eq!(
        reordered.report.orderings.last().unwrap().order,
        ["fast", "slow"],
        "{:?}",
        reordered.report.orderings
    );
    // "slow" runs on the events "fast" passes (a tenth), sampling aside.
    let slow = |r: &Report| r.modules.iter().find(|m| m.label == "slow").unwrap().calls;
    assert!(slow(&reordered.report) < 800, "{}", slow(&reordered.report));
    assert!(reordered.simulated_s < 0.25 * written.simulated_s);
    let real = evflow_core::run(
        process(),
        &RunOptions {
            threads: 2,
            events_in_flight: 4,
            planner: adaptive(),
            ..RunOptions::default()
        },
    )
    .unwrap();
    assert_eq!(real.orderings.last().unwrap().order, ["fast", "slow"]);
}
