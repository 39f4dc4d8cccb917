//! Adaptive ordering of filters (issue 3): identical results under every
//! policy, constraints never violated, cycles rejected, convergence to the
//! oracle order, drift, determinism.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};

use evflow_core::ordering::model::{self, Joint};
use evflow_core::ordering::{
    OrderingOptions, OrderingPlanner, OrderingStatistics, Policy, Tuning, merge_statistics,
};
use evflow_core::schedule::{PathOutcome, PathPlan, Planner};
use evflow_core::*;
use evflow_workloads::{self as synthetic, Timing};

mod walk;

// ------------------------------------------------------------ instruments

/// Execution log: (label, event number, start ticket, end ticket).
type Log = Arc<Mutex<Vec<(String, u64, u64, u64)>>>;

struct Logged {
    label: String,
    decision: DecisionModel,
    log: Log,
    ticket: Arc<AtomicU64>,
    spin: u32,
}

impl Transitions for Logged {}
impl Filter for Logged {
    fn filter(&self, ev: &Event<'_>) -> ModuleResult<bool> {
        let start = self.ticket.fetch_add(1, SeqCst);
        for _ in 0..self.spin {
            std::hint::spin_loop();
        }
        // Read every consumed product (checks they exist).
        for i in 0..ev.consumes_len() {
            ev.get_nth::<u64>(i)?;
        }
        let end = self.ticket.fetch_add(1, SeqCst);
        self.log
            .lock()
            .unwrap()
            .push((self.label.clone(), ev.id().event, start, end));
        Ok((self.decision)(ev.id()))
    }
}

/// Records each event's trigger results.
struct Recorder(Arc<Mutex<BTreeMap<u64, Vec<bool>>>>);
impl Transitions for Recorder {}
impl Output for Recorder {
    fn write(&self, ev: &Event<'_>, results: &TriggerResults) -> ModuleResult {
        self.0
            .lock()
            .unwrap()
            .insert(ev.id().event, results.iter().map(|(_, a)| a).collect());
        Ok(())
    }
}

struct Job {
    process: Process,
    log: Log,
    decisions: Arc<Mutex<BTreeMap<u64, Vec<bool>>>>,
    tally: synthetic::Tally,
}

/// A reorderable path of 7 filters: hash filters, one correlated with
/// another, one drifting halfway, one consuming a producer's product, one
/// consuming another step's... producer chain; explicit and data
/// constraints; a second, fixed path sharing a filter; an output selecting
/// on the reorderable path.
fn job(events: u64) -> Job {
    let log: Log = Arc::default();
    let ticket = Arc::new(AtomicU64::new(0));
    let mut p = Process::new("ordering");
    p.set_source(EmptySource::new(events).events_per_lumi(97));
    let zero = Timing::zero();
    p.add(synthetic::producer("tracks", zero.clone(), &[], &[""]));
    p.add(synthetic::producer(
        "vertex",
        zero.clone(),
        &["tracks"],
        &[""],
    ));
    let tight = synthetic::fraction_decision(0.3, 11);
    let decisions: Vec<(&str, DecisionModel, &[&str])> = vec![
        ("loose", synthetic::fraction_decision(0.95, 1), &[]),
        ("tight", tight.clone(), &[]),
        (
            "twin",
            synthetic::correlated_decision(tight, 0.1, 3),
            &["tracks"],
        ),
        ("mid", synthetic::fraction_decision(0.6, 4), &["vertex"]),
        (
            "drifty",
            synthetic::drifting_decision(
                synthetic::fraction_decision(0.98, 5),
                synthetic::fraction_decision(0.2, 6),
                events / 2,
            ),
            &[],
        ),
        ("late", synthetic::fraction_decision(0.9, 7), &[]),
        ("vtxCut", synthetic::fraction_decision(0.8, 8), &["vertex"]),
    ];
    for (i, (label, decision, consumes)) in decisions.into_iter().enumerate() {
        p.add(
            ModuleDesc::filter(
                label,
                Logged {
                    label: label.into(),
                    decision,
                    log: log.clone(),
                    ticket: ticket.clone(),
                    spin: 50 * (i as u32 % 3),
                },
            )
            .consumes(consumes.iter().copied()),
        );
    }
    p.add_path(
        PathDesc::new(
            "sel",
            ["late", "loose", "mid", "tight", "twin", "drifty", "vtxCut"],
        )
        .reorderable(true)
        .after("twin", "mid")
        .after("late", "drifty")
        .after("vtxCut", "loose"),
    );
    p.path("other", ["loose", "tight"]);
    let decided = Arc::new(Mutex::new(BTreeMap::new()));
    p.add(ModuleDesc::output("recorder", Recorder(decided.clone())));
    let (out, tally) = synthetic::output_with_tally("writer", zero, &["vertex", "tracks"]);
    p.add(out.select_events(["sel"]));
    p.end_path("out", ["recorder", "writer"]);
    Job {
        process: p,
        log,
        decisions: decided,
        tally,
    }
}

fn options(policy: Policy, tune: impl FnOnce(&mut Tuning)) -> OrderingOptions {
    let mut o = OrderingOptions::new(policy);
    o.tuning.warmup_events = 16;
    o.tuning.min_interval = 16;
    o.tuning.drift_block = 64;
    tune(&mut o.tuning);
    o
}

fn run_job(events: u64, o: OrderingOptions, threads: usize, k: usize) -> (Job, Report) {
    let mut j = job(events);
    let process = std::mem::replace(&mut j.process, Process::new("taken"));
    let report = run(
        process,
        &RunOptions {
            threads,
            events_in_flight: k,
            planner: Some(o.factory()),
            ..RunOptions::default()
        },
    )
    .unwrap();
    (j, report)
}

/// The constraints of path "sel" as (later, earlier) labels, data included.
const CONSTRAINTS: [(&str, &str); 4] = [
    ("twin", "mid"),
    ("late", "drifty"),
    ("vtxCut", "loose"),
    // Data: none between steps here (producers are not steps), so the
    // explicit ones are all.
    ("vtxCut", "loose"),
];

fn check_constraints(log: &[(String, u64, u64, u64)]) {
    let mut by_event: BTreeMap<u64, BTreeMap<&str, (u64, u64)>> = BTreeMap::new();
    for (label, event, start, end) in log {
        let previous = by_event
            .entry(*event)
            .or_default()
            .insert(label.as_str(), (*start, *end));
        assert!(previous.is_none(), "{label} ran twice on event {event}");
    }
    for (event, ran) in &by_event {
        for (later, earlier) in CONSTRAINTS {
            if let Some(&(start, _)) = ran.get(later) {
                // The fixed path "other" runs loose and tight on its own,
                // so only constraints of steps the fixed path does not
                // share are checked strictly.
                let &(_, end) = ran
                    .get(earlier)
                    .unwrap_or_else(|| panic!("event {event}: {later} ran without {earlier}"));
                assert!(
                    end < start,
                    "event {event}: {later} started before {earlier} ended"
                );
            }
        }
    }
}

#[test]
fn results_are_identical_under_every_policy_with_drift_and_constraints() {
    let events = 3000;
    let variants: Vec<(&str, OrderingOptions, usize, usize)> = vec![
        ("fixed", options(Policy::Fixed, |_| {}), 2, 4),
        ("adaptive", options(Policy::Adaptive, |_| {}), 2, 4),
        (
            "adaptive-concurrent",
            options(Policy::Adaptive, |t| t.concurrent_above_s = Some(0.0)),
            2,
            4,
        ),
        ("hepframe", options(Policy::HepFrame, |_| {}), 2, 4),
        (
            "hepframe-seq",
            options(Policy::HepFrame, |t| t.hepframe_concurrent = false),
            1,
            1,
        ),
    ];
    type Results = (BTreeMap<u64, Vec<bool>>, u64, u64, Vec<u64>);
    let mut reference: Option<Results> = None;
    for (name, o, threads, k) in variants {
        let (j, report) = run_job(events, o, threads, k);
        assert_eq!(report.events, events, "{name}");
        check_constraints(&j.log.lock().unwrap());
        let decided = j.decisions.lock().unwrap().clone();
        assert_eq!(decided.len() as u64, events, "{name}");
        let passed: Vec<u64> = report.paths.iter().map(|p| p.passed).collect();
        let got = (decided, j.tally.digest(), j.tally.events(), passed);
        match &reference {
            None => reference = Some(got),
            Some(r) => assert!(*r == got, "{name}: results differ from the fixed order"),
        }
        if name != "fixed" {
            // The order did change during the job (what differed was only the work).
            assert!(
                report.orderings.len() >= 2,
                "{name}: {:#?}",
                report.orderings
            );
        }
    }
}

#[test]
fn cyclic_constraints_are_a_configuration_error() {
    let mut p = Process::new("cycle");
    p.set_source(EmptySource::new(1));
    for l in ["a", "b", "c"] {
        p.add(synthetic::filter(l, Timing::zero(), &[], 0.5, 1));
    }
    p.add_path(
        PathDesc::new("p", ["a", "b", "c"])
            .reorderable(true)
            .after("b", "a")
            .after("c", "b")
            .after("a", "c"),
    );
    // The path, the constraints and the cycle itself, in running order.
    match p.compile() {
        Err(e @ ConfigError::PathCycle { .. }) => assert_eq!(
            e.to_string(),
            "path 'p': the 'after' constraints form a cycle: a -> b -> c -> a"
        ),
        other => panic!("expected a cycle, got {other:?}"),
    }
    // Steps that only wait behind the cycle are not part of it.
    let mut p = Process::new("cycle-and-more");
    p.set_source(EmptySource::new(1));
    for l in ["first", "x", "y", "z", "w"] {
        p.add(synthetic::filter(l, Timing::zero(), &[], 0.5, 1));
    }
    p.add_path(
        PathDesc::new("sel", ["first", "x", "y", "z", "w"])
            .reorderable(true)
            .after("x", "first")
            .after("w", "x")
            .after("z", "y")
            .after("y", "w")
            .after("w", "z"),
    );
    match p.compile() {
        Err(ConfigError::PathCycle { path, cycle, data }) => {
            assert_eq!(path, "sel");
            assert_eq!(cycle, ["y", "z", "w", "y"]);
            assert!(data.is_empty());
        }
        other => panic!("expected a cycle, got {other:?}"),
    }
    // A data dependency against an explicit constraint is a cycle too (a
    // filter may put products; a reorderable path holds only filters).
    let mut p = Process::new("data-cycle");
    p.set_source(EmptySource::new(1));
    p.add(synthetic::filter("a", Timing::zero(), &[], 0.5, 1).produces([""]));
    p.add(synthetic::filter("b", Timing::zero(), &["a"], 0.5, 2));
    p.add_path(
        PathDesc::new("p", ["a", "b"])
            .reorderable(true)
            .after("a", "b"),
    );
    match p.compile() {
        Err(e @ ConfigError::PathCycle { .. }) => assert_eq!(
            e.to_string(),
            "path 'p': the 'after' constraints form a cycle with the data dependencies: \
             a -> b -> a ('b' needs products of 'a')"
        ),
        other => panic!("expected a cycle, got {other:?}"),
    }
    // A step after itself.
    let mut p = Process::new("self");
    p.set_source(EmptySource::new(1));
    p.add(synthetic::filter("a", Timing::zero(), &[], 0.5, 1));
    p.add_path(PathDesc::new("p", ["a"]).reorderable(true).after("a", "a"));
    assert_eq!(
        p.compile().unwrap_err().to_string(),
        "path 'p': the 'after' constraints form a cycle: a -> a"
    );
}

// ------------------------------------------------------------ driving the planner

/// A synthetic pipeline driven straight through a planner, single-threaded
/// and deterministic: known costs, pass decisions by hash with
/// correlations, optional drift.
struct Pipeline {
    costs: Vec<f64>,
    preds_after: Vec<(usize, usize)>,
    decide: Box<dyn Fn(usize, u64) -> bool>,
}

fn pipeline(drift_at: Option<u64>) -> Pipeline {
    // 8 filters: a costly loose one, a cheap tight one, its correlated twin,
    // ...
    let costs = vec![20e-6, 5e-6, 2e-6, 3e-6, 1e-6, 8e-6, 4e-6, 6e-6];
    let fractions = [0.95, 0.3, 0.0, 0.6, 0.98, 0.7, 0.9, 0.5];
    let decide = move |j: usize, e: u64| -> bool {
        let id = EventId::new(1, 1, e);
        let after_drift = drift_at.is_some_and(|d| e >= d);
        match j {
            // twin: passes whenever 1 passes, otherwise 10%.
            2 => synthetic::passes_id(id, 0.3, 101) || synthetic::passes_id(id, 0.1, 3),
            1 => synthetic::passes_id(id, 0.3, 101),
            4 if after_drift => synthetic::passes_id(id, 0.1, 55),
            7 if after_drift => synthetic::passes_id(id, 0.97, 77),
            _ => synthetic::passes_id(id, fractions[j], 100 + j as u64),
        }
    };
    Pipeline {
        costs,
        preds_after: vec![(2, 3), (6, 0), (5, 4)],
        decide: Box::new(decide),
    }
}

fn graph_for(p: &Pipeline) -> Graph {
    graph_written(p, &(0..p.costs.len()).collect::<Vec<_>>())
}

/// The pipeline's graph with the path's steps written in order `written`
/// (module `j` is filter `fj` whatever the written order).
fn graph_written(p: &Pipeline, written: &[usize]) -> Graph {
    let mut proc = Process::new("driven");
    proc.set_source(EmptySource::new(1));
    let labels: Vec<String> = (0..p.costs.len()).map(|j| format!("f{j}")).collect();
    for l in &labels {
        proc.add(synthetic::filter(l, Timing::zero(), &[], 1.0, 0));
    }
    let mut path =
        PathDesc::new("sel", written.iter().map(|&j| labels[j].clone())).reorderable(true);
    for &(later, earlier) in &p.preds_after {
        path = path.after(labels[later].clone(), labels[earlier].clone());
    }
    proc.add_path(path);
    proc.compile().unwrap()
}

/// Runs `events` events through the planner, as the engine would: the plan's
/// groups in order, stopping at the first rejection unless the event is
/// sampled, and then skipping the groups the plan skips after a rejection.
/// Returns per event the plan's order (positions), whether it was sampled,
/// and the work done (seconds).
fn drive(
    p: &Pipeline,
    o: &OrderingOptions,
    events: u64,
) -> (Vec<(Vec<usize>, bool, f64)>, OrderingPlanner) {
    let graph = graph_for(p);
    let planner = OrderingPlanner::new(&graph, o);
    let used = drive_planner(p, &planner, 0..events);
    (used, planner)
}

/// [`drive`] with a given planner, on events `range`.
fn drive_planner(
    p: &Pipeline,
    planner: &OrderingPlanner,
    range: std::ops::Range<u64>,
) -> Vec<(Vec<usize>, bool, f64)> {
    let mut used = Vec::with_capacity((range.end - range.start) as usize);
    let mut outcome = PathOutcome::default();
    for e in range {
        let plan = planner.plan(0, e);
        let mut work = 0.0;
        walk::walk(&plan, &mut outcome, |m, _| {
            if planner.wants_cost(m) {
                planner.observe_cost(m, p.costs[m]);
            }
            work += p.costs[m];
            (p.decide)(m, e + 1)
        });
        planner.observe(0, e, &outcome);
        used.push((plan.order().collect(), plan.evaluate_all, work));
    }
    used
}

fn joint_of(p: &Pipeline, from: u64, to: u64) -> Joint {
    Joint::from_masks(
        (from..to).map(|e| {
            (0..p.costs.len()).fold(0u64, |m, j| m | (u64::from((p.decide)(j, e + 1)) << j))
        }),
    )
}

fn preds_of(p: &Pipeline) -> Vec<u64> {
    let mut preds = vec![0u64; p.costs.len()];
    for &(later, earlier) in &p.preds_after {
        preds[later] |= 1 << earlier;
    }
    preds
}

#[test]
fn adaptive_converges_to_the_oracle_order_within_two_percent_of_the_events() {
    let p = pipeline(None);
    let events = 20_000;
    let o = OrderingOptions::new(Policy::Adaptive);
    let (used, planner) = drive(&p, &o, events);
    let joint = joint_of(&p, 0, events);
    let preds = preds_of(&p);
    let oracle = model::best_order(&p.costs, &[], &preds, &joint, 1 << 20).unwrap();
    // After 2% of the events, the expected cost per event of the orders
    // used, sampled events charged with the work they did, is within 5% of
    // the oracle's.
    let start = (events as f64 * 0.02) as usize;
    let mut total = 0.0;
    for (order, sampled, work) in &used[start..] {
        assert!(model::respects(order, &preds));
        total += if *sampled {
            *work
        } else {
            model::expected_cost_order(&p.costs, &[], order, &joint)
        };
    }
    let mean = total / (used.len() - start) as f64;
    assert!(
        mean <= 1.05 * oracle.cost,
        "adaptive {mean:e} vs oracle {:e} ({:?}); history {:#?}",
        oracle.cost,
        oracle.order,
        planner.history()
    );
    // The written order is much worse: the test is not trivial.
    let written: Vec<usize> = (0..p.costs.len()).collect();
    assert!(model::expected_cost_order(&p.costs, &[], &written, &joint) > 1.5 * oracle.cost);
    // Correlation: the twin (2) is useless once 1 ran, and the oracle knows it.
    let pos = |j| oracle.order.iter().position(|&x| x == j).unwrap();
    assert!(pos(1) < pos(2) || pos(2) < pos(1));
}

#[test]
fn adaptive_follows_drift_to_the_new_oracle() {
    let events = 40_000;
    let half = events / 2;
    let p = pipeline(Some(half + 1));
    let o = OrderingOptions::new(Policy::Adaptive);
    let (used, planner) = drive(&p, &o, events);
    let preds = preds_of(&p);
    let joint2 = joint_of(&p, half, events);
    let oracle2 = model::best_order(&p.costs, &[], &preds, &joint2, 1 << 20).unwrap();
    // From 5% of the events after the change on, the expected cost per
    // event (sampled events charged with the work they did) is within 5% of
    // the new oracle's.
    let settle = half as usize + (events as f64 * 0.05) as usize;
    let costs: Vec<f64> = used[settle..]
        .iter()
        .map(|(order, sampled, work)| {
            if *sampled {
                *work
            } else {
                model::expected_cost_order(&p.costs, &[], order, &joint2)
            }
        })
        .collect();
    let mean = costs.iter().sum::<f64>() / costs.len() as f64;
    assert!(
        mean <= 1.05 * oracle2.cost,
        "mean {mean:e}, new oracle {:e} {:?}; history {:#?}",
        oracle2.cost,
        oracle2.order,
        planner.history()
    );
    // And the change was noticed as a drift.
    assert!(
        planner
            .history()
            .iter()
            .any(|c| c.reason.contains("drift at event"))
    );
}

#[test]
fn planning_is_deterministic_given_the_seed_and_cheap() {
    let p = pipeline(Some(5_001));
    let o = OrderingOptions::new(Policy::Adaptive);
    let (a, pa) = drive(&p, &o, 10_000);
    let (b, pb) = drive(&p, &o, 10_000);
    assert_eq!(a, b);
    let strip = |h: Vec<evflow_core::schedule::OrderChange>| -> Vec<(u64, Vec<String>)> {
        h.into_iter()
            .filter(|c| !c.reason.starts_with("in use at the end"))
            .map(|c| (c.at_event, c.order))
            .collect()
    };
    assert_eq!(strip(pa.history()), strip(pb.history()));
    // The plan of a regular event is the shared current plan: no allocation.
    let x = pa.plan(0, 1_000_001);
    let y = pa.plan(0, 1_000_003);
    if !x.evaluate_all && !y.evaluate_all {
        assert!(Arc::ptr_eq(&x, &y));
    }
    // Sampling never stops entirely, and stays a small share.
    let sampled = a[1000..].iter().filter(|(_, s, _)| *s).count();
    assert!(sampled > 0 && sampled < 500, "{sampled} sampled");
}

#[test]
fn hepframe_orders_levels_by_weight() {
    let p = pipeline(None);
    let o = OrderingOptions::new(Policy::HepFrame);
    let (used, _) = drive(&p, &o, 2_000);
    let preds = preds_of(&p);
    let levels = model::levels(&preds);
    let (last, _, _) = used.last().unwrap();
    // Level by level, every level's steps together.
    let flat: Vec<usize> = last.clone();
    let mut at = 0;
    for level in &levels {
        let mut got = flat[at..at + level.len()].to_vec();
        got.sort();
        let mut want = level.clone();
        want.sort();
        assert_eq!(got, want);
        at += level.len();
    }
    // Within the first level the cheap tight filter (f1) precedes the costly loose one (f0).
    let pos = |j| flat.iter().position(|&x| x == j).unwrap();
    assert!(pos(1) < pos(0), "{flat:?}");
}

#[test]
fn expensive_steps_are_sampled_rarely_after_a_rejection() {
    // f0 (passes 95%, constrained before f6) costs 5 ms, 250 times the
    // others: sampled events measure it after a rejection only at its own,
    // budgeted rate, yet never stop measuring it.
    let mut p = pipeline(None);
    p.costs[0] = 5e-3;
    let events = 20_000;
    let o = OrderingOptions::new(Policy::Adaptive);
    let (used, planner) = drive(&p, &o, events);
    let joint = joint_of(&p, 0, events);
    let preds = preds_of(&p);
    let oracle = model::best_order(&p.costs, &[], &preds, &joint, 1 << 20).unwrap();
    let start = (events as f64 * 0.02) as usize;
    let mut total = 0.0;
    let mut probes = 0;
    let mut cheap_samples = 0;
    for (e, (order, sampled, work)) in used.iter().enumerate().skip(start) {
        let regular = model::expected_cost_order(&p.costs, &[], order, &joint);
        total += if *sampled { *work } else { regular };
        if *sampled {
            cheap_samples += 1;
            // f0 ran after a rejection: the event's work includes it although
            // a step before it rejected the event.
            let before: Vec<usize> = order.iter().copied().take_while(|&j| j != 0).collect();
            let rejected_before = before.iter().any(|&j| !(p.decide)(j, e as u64 + 1));
            if rejected_before && *work >= p.costs[0] {
                probes += 1;
            }
        }
    }
    let mean = total / (used.len() - start) as f64;
    assert!(
        mean <= 1.05 * oracle.cost,
        "adaptive {mean:e} vs oracle {:e}; history {:#?}",
        oracle.cost,
        planner.history()
    );
    // Measuring f0 after a rejection costs at most about half the 1% budget.
    let probe_cost = probes as f64 * p.costs[0] / (used.len() - start) as f64;
    assert!(
        probe_cost <= 0.01 * oracle.cost,
        "{probes} probes of the expensive step cost {probe_cost:e} per event (oracle {:e})",
        oracle.cost
    );
    assert!(probes >= 1, "the expensive step was never measured again");
    // The cheap steps are sampled far more often.
    assert!(
        cheap_samples >= 20 * probes,
        "{cheap_samples} samples, {probes} probes"
    );
}

/// The mean work per event of `used` (sampled events charged what they
/// ran, like every other event).
fn mean_work(used: &[(Vec<usize>, bool, f64)]) -> f64 {
    used.iter().map(|u| u.2).sum::<f64>() / used.len() as f64
}

#[test]
fn a_planner_started_from_another_ones_statistics_decides_before_its_first_event() {
    let p = pipeline(None);
    let o = OrderingOptions::new(Policy::Adaptive);
    let (first_used, first) = drive(&p, &o, 5_000);
    let stats = first.statistics();
    let sel = &stats["sel"];
    // Every event the first planner observed, once, in the stop counts.
    assert_eq!(sel.events(), 5_000);
    assert!(sel.samples.len() >= 64, "{} samples", sel.samples.len());
    assert!(sel.costs.iter().all(|c| c.is_some()));

    // A second process of the same job, its path written in another order:
    // the statistics are matched by label.
    let mut written: Vec<usize> = (0..p.costs.len()).collect();
    written.reverse();
    let second = OrderingPlanner::new(&graph_written(&p, &written), &o);
    assert_eq!(second.import_statistics(&stats).unwrap(), ["sel"]);
    let history = second.history();
    assert!(
        history[0].at_event == 0 && !history[0].reason.starts_with("in use at the end"),
        "{history:#?}"
    );
    let used = drive_planner(&p, &second, 5_000..5_256);

    // Its first events cost what the settled order costs: no warm-up, no
    // written order. The first planner's first events cost far more.
    let joint = joint_of(&p, 5_000, 5_256);
    let oracle = model::best_order(&p.costs, &[], &preds_of(&p), &joint, 1 << 20).unwrap();
    let (warm, seeded) = (mean_work(&first_used[..256]), mean_work(&used));
    assert!(
        seeded <= 1.10 * oracle.cost,
        "seeded {seeded:e} against the oracle's {:e}",
        oracle.cost
    );
    assert!(
        warm > 1.5 * seeded,
        "warm-up {warm:e} against seeded {seeded:e}"
    );
    let last = second.history().pop().unwrap();
    assert!(
        last.reason.contains("started from imported statistics: "),
        "{}",
        last.reason
    );

    // Its export holds its own measurements only: merging the two counts
    // every event once.
    let own = second.statistics();
    assert_eq!(own["sel"].events(), 256);
    let merged = merge_statistics([&stats, &own]).unwrap();
    assert_eq!(merged["sel"].events(), 5_256);
}

#[test]
fn statistics_of_other_paths_or_steps_are_refused_by_name() {
    let p = pipeline(None);
    let o = OrderingOptions::new(Policy::Adaptive);
    let planner = OrderingPlanner::new(&graph_for(&p), &o);
    let (_, other) = drive(&p, &o, 200);
    let mut stats = other.statistics();
    let sel = stats.remove("sel").unwrap();

    let mut unknown = OrderingStatistics::new();
    unknown.insert("nope".into(), sel.clone());
    let e = planner.import_statistics(&unknown).unwrap_err();
    assert_eq!(
        e.to_string(),
        "ordering statistics of path 'nope': the job has no path of this name"
    );

    let mut renamed = sel.clone();
    renamed.steps[0] = "g0".into();
    let mut wrong = OrderingStatistics::new();
    wrong.insert("sel".into(), renamed);
    let e = planner.import_statistics(&wrong).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("ordering statistics of path 'sel': measured on steps"),
        "{e}"
    );
    // Nothing was imported: the planner still learns from scratch (its
    // history holds only the account of the order in use).
    let history = planner.history();
    assert_eq!(history.len(), 1);
    assert!(
        !history[0].reason.contains("imported"),
        "{}",
        history[0].reason
    );

    // A fixed path takes no statistics, and that is no error.
    let fixed = OrderingPlanner::new(&graph_for(&p), &OrderingOptions::new(Policy::Fixed));
    let mut ok = OrderingStatistics::new();
    ok.insert("sel".into(), sel);
    assert!(fixed.import_statistics(&ok).unwrap().is_empty());
}

#[test]
fn no_drift_is_detected_on_stationary_data() {
    // Rare rejections late in the order must not look like a drift.
    let p = pipeline(None);
    let o = OrderingOptions::new(Policy::Adaptive);
    let (_, planner) = drive(&p, &o, 60_000);
    let history = planner.history();
    assert!(
        !history.iter().any(|c| c.reason.contains("drift at event")),
        "{history:#?}"
    );
}

#[test]
fn sampling_part_of_the_steps_keeps_results_identical() {
    // One expensive filter among cheap ones: sampled events skip it after a
    // rejection (a plan with `skip_after_reject`); the selections are those
    // of the written order, and the expensive filter runs on few events
    // beyond those that reach it.
    use evflow_workloads::Work;
    let events = 3000u64;
    let build = || {
        let mut p = Process::new("partial");
        p.set_source(EmptySource::new(events));
        p.add(synthetic::filter(
            "heavy",
            Timing::constant(300e-6, Work::Busy),
            &[],
            0.9,
            1,
        ));
        for (i, f) in [0.5, 0.7, 0.9, 0.95].into_iter().enumerate() {
            p.add(synthetic::filter(
                &format!("cheap{i}"),
                Timing::constant(1e-6, Work::Busy),
                &[],
                f,
                10 + i as u64,
            ));
        }
        p.add_path(
            PathDesc::new("sel", ["heavy", "cheap0", "cheap1", "cheap2", "cheap3"])
                .reorderable(true),
        );
        let decided = Arc::new(Mutex::new(BTreeMap::new()));
        p.add(ModuleDesc::output("recorder", Recorder(decided.clone())));
        p.end_path("out", ["recorder"]);
        (p, decided)
    };
    let mut results = Vec::new();
    for policy in [Policy::Fixed, Policy::Adaptive] {
        let (p, decided) = build();
        let report = run(
            p,
            &RunOptions {
                threads: 2,
                events_in_flight: 4,
                planner: Some(OrderingOptions::new(policy).factory()),
                ..RunOptions::default()
            },
        )
        .unwrap();
        let heavy_calls = report
            .modules
            .iter()
            .find(|m| m.label == "heavy")
            .unwrap()
            .calls;
        let decided = decided.lock().unwrap().clone();
        assert_eq!(decided.len() as u64, events);
        results.push((decided, report.paths[0].passed, heavy_calls, report));
    }
    let (fixed, adaptive) = (&results[0], &results[1]);
    assert!(fixed.0 == adaptive.0, "selections differ");
    assert_eq!(fixed.1, adaptive.1);
    // Written order: the heavy filter runs on every event; adaptive moves
    // it last, where ~30% of the events reach it, and measures it after a
    // rejection on a few more.
    assert_eq!(fixed.2, events);
    let reach_last = (0.5 * 0.7 * 0.9 * 0.95 * events as f64) as u64;
    assert!(
        adaptive.2 < reach_last + events / 10,
        "heavy ran {} times (about {reach_last} events reach it); {:#?}",
        adaptive.2,
        adaptive.3.orderings
    );
    assert_eq!(
        adaptive.3.orderings.last().unwrap().order.last().unwrap(),
        "heavy"
    );
}

/// A filter that rejects the events whose number `rejects` says, and
/// records every event it ran on.
struct ByNumber {
    rejects: fn(u64) -> bool,
    ran: Arc<Mutex<Vec<u64>>>,
}
impl Transitions for ByNumber {}
impl Filter for ByNumber {
    fn filter(&self, ev: &Event<'_>) -> ModuleResult<bool> {
        self.ran.lock().unwrap().push(ev.id().event);
        Ok(!(self.rejects)(ev.id().event))
    }
}

/// Samples every event with a plan whose steps after a rejection depend on
/// which step rejected it: after `f0`'s rejection only `f1` runs, after
/// `f1`'s `f2` runs. Records the outcomes it is told.
struct ByRejection {
    steps: Vec<usize>,
    outcomes: Mutex<BTreeMap<u64, Vec<(usize, bool)>>>,
}
impl Planner for ByRejection {
    fn plan(&self, _path: usize, _event_index: u64) -> Arc<PathPlan> {
        // Row k (the group that rejected first), column g (the group to
        // run): only row 0 skips group 2.
        let mut skip = vec![false; 9];
        skip[2] = true;
        Arc::new(PathPlan {
            groups: self.steps.iter().map(|&m| vec![m]).collect(),
            evaluate_all: true,
            skip_after_reject: skip,
        })
    }
    fn observe(&self, _path: usize, event_index: u64, outcome: &PathOutcome) {
        self.outcomes
            .lock()
            .unwrap()
            .insert(event_index, outcome.steps.clone());
    }
}

#[test]
fn a_sampled_plan_runs_after_a_rejection_what_its_row_for_that_rejection_says() {
    let rules: [fn(u64) -> bool; 3] = [|e| e % 3 == 0, |e| e % 5 == 0, |e| e % 7 == 0];
    let events = 600u64;
    for executor in [ExecutorKind::Threaded, ExecutorKind::Sequential] {
        let ran: Vec<Arc<Mutex<Vec<u64>>>> = (0..3).map(|_| Arc::default()).collect();
        let mut p = Process::new("rows");
        p.set_source(EmptySource::new(events));
        for (i, rejects) in rules.into_iter().enumerate() {
            let ran = ran[i].clone();
            p.add(ModuleDesc::filter(
                format!("f{i}"),
                ByNumber { rejects, ran },
            ));
        }
        p.add_path(PathDesc::new("sel", ["f0", "f1", "f2"]).reorderable(true));
        let decided = Arc::new(Mutex::new(BTreeMap::new()));
        p.add(ModuleDesc::output("recorder", Recorder(decided.clone())));
        p.end_path("out", ["recorder"]);
        let planner: Arc<Mutex<Option<Arc<ByRejection>>>> = Arc::default();
        let keep = planner.clone();
        run(
            p,
            &RunOptions {
                threads: 2,
                events_in_flight: 4,
                executor,
                planner: Some(Arc::new(move |g: &Graph| {
                    let p = Arc::new(ByRejection {
                        steps: g.paths[0].steps.clone(),
                        outcomes: Mutex::default(),
                    });
                    *keep.lock().unwrap() = Some(p.clone());
                    p as Arc<dyn Planner>
                })),
                ..RunOptions::default()
            },
        )
        .unwrap();
        let planner = planner.lock().unwrap().clone().unwrap();
        let outcomes = planner.outcomes.lock().unwrap();
        let ran: Vec<Vec<u64>> = ran.iter().map(|r| r.lock().unwrap().clone()).collect();
        let decided = decided.lock().unwrap();
        for e in 1..=events {
            let [r0, r1, r2] = rules.map(|rejects| rejects(e));
            // f0 and f1 run on every event (f1 after f0's rejection too);
            // f2 on every event but those f0 rejected.
            let expected = [true, true, !r0];
            for (i, &runs) in expected.iter().enumerate() {
                assert_eq!(ran[i].contains(&e), runs, "{executor:?}: event {e}, f{i}");
            }
            let steps = &outcomes[&(e - 1)];
            let decisions: Vec<bool> = steps.iter().map(|&(_, pass)| pass).collect();
            let mut want = vec![!r0, !r1];
            if !r0 {
                want.push(!r2);
            }
            assert_eq!(decisions, want, "{executor:?}: event {e}");
            // The selection is that of the written order.
            assert_eq!(
                decided[&e],
                vec![!(r0 || r1 || r2)],
                "{executor:?}: event {e}"
            );
        }
    }
}

/// The final entry of a short job (all of it in the warm-up, no decision
/// of `hepframe`) counts the events the path saw, and calls them events,
/// not batches: it said "after 1 events" and "75 sampled events (event by
/// event, in 1 batches)" for 75 events.
#[test]
fn the_final_entry_of_a_short_job_counts_its_events() {
    for policy in [Policy::Adaptive, Policy::HepFrame] {
        let (_, report) = run_job(40, options(policy, |t| t.warmup_events = 64), 2, 2);
        let last = report.orderings.last().unwrap();
        assert!(
            last.reason.starts_with("in use at the end"),
            "{}",
            last.reason
        );
        assert_eq!(last.at_event, 40, "{policy:?}: {}", last.reason);
        assert!(!last.reason.contains("batches"), "{}", last.reason);
    }
}
