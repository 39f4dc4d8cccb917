//! Adaptive ordering with a producer that several steps need (issue 14): a
//! costly `jets` producer feeds two cheap jet cuts, beside selective cuts
//! that need nothing. The producer runs once per event, with the first jet
//! cut; charged to no step, it made the jet cuts look cheap, and adaptive
//! ran them first and paid the producer on every event.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use evflow_core::ordering::model::{self, Joint, SharedCost};
use evflow_core::ordering::{
    OrderingOptions, OrderingPlanner, OrderingStatistics, Policy, ProbedProducer,
    SharedProducerCost, StepCost, merge_statistics,
};
use evflow_core::schedule::{PathOutcome, Planner};
use evflow_core::*;
use evflow_workloads::{self as synthetic, Timing, Work};

mod walk;

/// The cuts in written order: label, cost (s), pass fraction, needs jets.
/// The selective, jet-free cuts are written first (the user's order); `iso`
/// is cheap and selective but written last, so that the best order is not
/// the written one.
const CUTS: [(&str, f64, f64, bool); 5] = [
    ("met", 5e-6, 0.5, false),
    ("lepton", 5e-6, 0.5, false),
    ("jetPt", 1e-6, 0.8, true),
    ("jetEta", 1e-6, 0.8, true),
    ("iso", 2e-6, 0.7, false),
];
const JETS_S: f64 = 100e-6;

fn passes_id(j: usize, id: EventId) -> bool {
    synthetic::passes_id(id, CUTS[j].2, 300 + j as u64)
}

fn passes(j: usize, event: u64) -> bool {
    passes_id(j, EventId::new(1, 1, event + 1))
}

/// The path's process: `jets` and the cuts, each spending `timing` of its
/// cost.
fn process(events: u64, jets: ModuleDesc, timing: impl Fn(f64) -> Timing) -> Process {
    let mut p = Process::new("shared-producer");
    p.set_source(EmptySource::new(events));
    p.add(jets);
    for (j, &(label, cost, _, jets)) in CUTS.iter().enumerate() {
        let consumes: &[&str] = if jets { &["jets"] } else { &[] };
        p.add(synthetic::filter_with_decision(
            label,
            timing(cost),
            consumes,
            Arc::new(move |id: EventId| passes_id(j, id)),
        ));
    }
    p.add_path(PathDesc::new("sel", CUTS.map(|c| c.0)).reorderable(true));
    p
}

/// The model of the path: step costs, the producer shared by the jet
/// cuts, and the decision vectors of `events` events.
fn model_of(events: u64) -> (Vec<f64>, Vec<SharedCost>, Joint) {
    let costs = CUTS.iter().map(|c| c.1).collect();
    let needed_by = (0..CUTS.len())
        .filter(|&j| CUTS[j].3)
        .fold(0u64, |m, j| m | 1 << j);
    let shared = vec![SharedCost {
        needed_by,
        cost: JETS_S,
    }];
    let joint = Joint::from_masks(
        (0..events).map(|e| (0..CUTS.len()).fold(0u64, |m, j| m | u64::from(passes(j, e)) << j)),
    );
    (costs, shared, joint)
}

/// Runs `events` events through an `adaptive` planner of the path as the
/// engine would (the plan's groups in order, the sampled events measuring
/// steps after a rejection as their plan says), the producer run once per
/// event with the first jet cut and timed like any module the planner
/// wants timed. Returns per event its work (s) and whether the producer
/// ran, and the planner.
fn drive(events: u64) -> (Vec<(f64, bool)>, OrderingPlanner) {
    let jets = synthetic::producer("jets", Timing::zero(), &[], &[""]);
    let graph = process(1, jets, |_| Timing::zero()).compile().unwrap();
    let planner = OrderingPlanner::new(&graph, &OrderingOptions::new(Policy::Adaptive));
    let index = |label: &str| graph.modules.iter().position(|m| m.label == label).unwrap();
    let jets = index("jets");
    let step: Vec<usize> = CUTS.iter().map(|c| index(c.0)).collect();
    let cut_of = |m: usize| step.iter().position(|&s| s == m).unwrap();
    let mut out = Vec::with_capacity(events as usize);
    let mut outcome = PathOutcome::default();
    for e in 0..events {
        let plan = planner.plan(0, e);
        let (mut work, mut jets_ran) = (0.0, false);
        walk::walk(&plan, &mut outcome, |m, _| {
            let j = cut_of(m);
            if CUTS[j].3 && !std::mem::replace(&mut jets_ran, true) {
                work += JETS_S;
                if planner.wants_cost(jets) {
                    planner.observe_cost(jets, JETS_S);
                }
            }
            if planner.wants_cost(m) {
                planner.observe_cost(m, CUTS[j].1);
            }
            work += CUTS[j].1;
            passes(j, e)
        });
        planner.observe(0, e, &outcome);
        out.push((work, jets_ran));
    }
    (out, planner)
}

/// After 2% of the events, adaptive's work per event (sampling included)
/// is within 5% of the oracle's (the exact optimum, the producer charged
/// once per event at first need) and below the written order's; the
/// producer runs on about as many events as under the oracle's order.
/// Blind to the producer, the planner ran the jet cuts first: about 3.5
/// times the written order's work, and the producer on every event.
#[test]
fn adaptive_charges_a_shared_producer_to_the_first_step_that_needs_it() {
    let events = 20_000u64;
    let (used, planner) = drive(events);
    let (costs, shared, joint) = model_of(events);
    let oracle = model::best_order(&costs, &shared, &[0; 5], &joint, 1 << 20).unwrap();
    let written: Vec<usize> = (0..CUTS.len()).collect();
    let written_cost = model::expected_cost_order(&costs, &shared, &written, &joint);
    // The test is not trivial: the written order is 30% worse than the
    // oracle's, and the order blind to the producer far worse still.
    assert!(
        written_cost > 1.25 * oracle.cost,
        "{written_cost} {oracle:?}"
    );
    let blind = model::best_order(&costs, &[], &[0; 5], &joint, 1 << 20).unwrap();
    let blind_cost = model::expected_cost_order(&costs, &shared, &blind.order, &joint);
    assert!(blind_cost > 3.0 * written_cost, "{blind:?}: {blind_cost}");

    let start = (events / 50) as usize;
    let tail = &used[start..];
    let work = tail.iter().map(|u| u.0).sum::<f64>() / tail.len() as f64;
    let history = planner.history();
    assert!(
        work <= 1.05 * oracle.cost && work < written_cost,
        "adaptive {work:e} vs oracle {:e} {:?}, written {written_cost:e}; history {history:#?}",
        oracle.cost,
        oracle.order
    );
    // The producer ran on about the events reaching the first jet cut of
    // the oracle's order.
    let first_jet = oracle.order.iter().position(|&j| CUTS[j].3).unwrap();
    let passed_before = oracle.order[..first_jet]
        .iter()
        .fold(0u64, |m, &j| m | 1 << j);
    let oracle_jets = joint.pass_all(passed_before);
    let jets = tail.iter().filter(|u| u.1).count() as f64 / tail.len() as f64;
    assert!(
        jets <= 1.1 * oracle_jets,
        "jets on {jets} of the events, oracle {oracle_jets}"
    );
    // The report names the producer and the steps it is charged to.
    let last = &history.last().unwrap().reason;
    assert!(
        last.contains("charged to the first step that needs them: jets 9")
            && last.contains("(for jetPt, jetEta)"),
        "{last}"
    );
}

/// A producer that counts its executions.
struct Counted {
    runs: Arc<AtomicU64>,
    spin: std::time::Duration,
}
impl Transitions for Counted {}
impl Producer for Counted {
    fn produce(&self, ev: &Event<'_>) -> ModuleResult {
        self.runs.fetch_add(1, Relaxed);
        let t0 = std::time::Instant::now();
        while t0.elapsed() < self.spin {
            std::hint::spin_loop();
        }
        ev.put("", 1u64)
    }
}

/// The same path in the engine, with busy-waiting modules: the order the
/// planner settles on runs the producer on the events that pass the
/// jet-free cuts, not on every event (counted executions; the timings are
/// the engine's own, so the bound leaves room for a loaded machine).
#[test]
fn the_engine_runs_a_shared_producer_on_the_events_reaching_the_jet_cuts() {
    let events = 3000u64;
    let runs = Arc::new(AtomicU64::new(0));
    let jets = ModuleDesc::producer(
        "jets",
        Counted {
            runs: runs.clone(),
            spin: std::time::Duration::from_secs_f64(JETS_S),
        },
    )
    .produces([""]);
    let p = process(events, jets, |s| Timing::constant(s, Work::Busy));
    let report = run(
        p,
        &RunOptions {
            threads: 1,
            planner: Some(OrderingOptions::new(Policy::Adaptive).factory()),
            ..RunOptions::default()
        },
    )
    .unwrap();
    let order = &report.orderings.last().unwrap().order;
    let pos = |l: &str| order.iter().position(|x| x == l).unwrap();
    assert!(
        pos("met") < pos("jetPt") && pos("lepton") < pos("jetPt"),
        "{:#?}",
        report.orderings
    );
    // met and lepton pass a quarter of the events: the producer runs on
    // about that many (the learning phase and sampling add a few).
    let ran = runs.load(Relaxed) as f64 / events as f64;
    assert!(
        ran < 0.45,
        "jets ran on {ran} of the events; {:#?}",
        report.orderings
    );
}

/// The labels of a planner's order on path 0, as step positions of `CUTS`.
fn order_of(planner: &OrderingPlanner) -> Vec<usize> {
    planner
        .current_order(0)
        .iter()
        .map(|l| CUTS.iter().position(|c| c.0 == l).unwrap())
        .collect()
}

/// A planner's exported statistics hold the shared producer's cost per
/// execution, with the steps that need it; they survive the exchange
/// format (JSON), merge by label, and statistics written before shared
/// producers were exchanged still read (as none).
#[test]
fn shared_producer_costs_round_trip_through_the_exchange() {
    let (_, planner) = drive(4_000);
    let stats = planner.statistics();
    let sel = &stats["sel"];
    assert_eq!(sel.shared.len(), 1, "{:?}", sel.shared);
    let jets = &sel.shared[0];
    assert_eq!(jets.producer, "jets");
    assert_eq!(jets.steps, ["jetPt", "jetEta"]);
    assert!(
        (jets.cost.mean_s / JETS_S - 1.0).abs() < 0.01 && jets.cost.measurements > 0,
        "{jets:?}"
    );

    let text = serde_json::to_string(&stats).unwrap();
    assert!(
        text.contains("\"shared\":[{\"producer\":\"jets\""),
        "{text}"
    );
    let back: OrderingStatistics = serde_json::from_str(&text).unwrap();
    assert_eq!(back, stats);

    // Merged by label, costs weighted by their measurements.
    let mut other = stats.clone();
    let o = other.get_mut("sel").unwrap();
    o.shared[0].cost = StepCost {
        mean_s: 3.0 * JETS_S,
        se_s: 0.0,
        measurements: jets.cost.measurements,
    };
    o.shared[0].steps.reverse();
    let merged = merge_statistics([&stats, &other]).unwrap();
    let m = &merged["sel"].shared;
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].steps, ["jetPt", "jetEta"]);
    assert_eq!(m[0].cost.measurements, 2 * jets.cost.measurements);
    assert!(
        (m[0].cost.mean_s / (2.0 * JETS_S) - 1.0).abs() < 0.01,
        "{m:?}"
    );

    // Written without shared producers: read as none, and written so again.
    let mut old = stats.clone();
    old.get_mut("sel").unwrap().shared.clear();
    let old_text = serde_json::to_string(&old).unwrap();
    assert!(!old_text.contains("shared"), "{old_text}");
    let read: OrderingStatistics = serde_json::from_str(&old_text).unwrap();
    assert!(read["sel"].shared.is_empty());

    // Bad statistics are refused by path and producer.
    let bad = |f: &dyn Fn(&mut SharedProducerCost)| {
        let mut s = stats.clone();
        f(&mut s.get_mut("sel").unwrap().shared[0]);
        merge_statistics([&s]).unwrap_err().to_string()
    };
    assert_eq!(
        bad(&|s| s.steps[1] = "nope".into()),
        "ordering statistics of path 'sel': shared producer 'jets' is needed by 'nope', \
         which is not a step of the path"
    );
    assert!(
        bad(&|s| s.steps.truncate(1)).contains("must name two or more distinct steps"),
        "{}",
        bad(&|s| s.steps.truncate(1))
    );
    assert!(bad(&|s| s.cost.mean_s = f64::NAN).contains("is not a duration"));
    assert!(bad(&|s| s.producer = "met".into()).contains("is a step of the path"));
    let mut twice = stats.clone();
    let t = twice.get_mut("sel").unwrap();
    t.shared.push(t.shared[0].clone());
    assert!(
        merge_statistics([&twice])
            .unwrap_err()
            .to_string()
            .contains("shared producer 'jets' is listed twice")
    );
    let planner = OrderingPlanner::new(&graph(), &OrderingOptions::new(Policy::Adaptive));
    let mut s = stats.clone();
    s.get_mut("sel").unwrap().shared[0].steps[0] = "nope".into();
    assert!(planner.import_statistics(&s).is_err());
    assert!(planner.wants_first_probe(0), "nothing was imported");
}

/// The compiled path, with a `jets` producer the jet cuts share.
fn graph() -> Graph {
    let jets = synthetic::producer("jets", Timing::zero(), &[], &[""]);
    process(1, jets, |_| Timing::zero()).compile().unwrap()
}

/// A planner seeded with another's statistics decides at once, before
/// its first event: with the shared producer's cost it puts the jet-free
/// selective cuts first (the oracle's order, or within 2% of it); the same
/// statistics without it leave the producer free until it is timed, and
/// the first decision runs a cheap jet cut first, paying the producer on
/// every event.
#[test]
fn a_seeded_planner_charges_the_shared_producer_at_its_first_decision() {
    let events = 4_000;
    let (_, measured) = drive(events);
    let stats = measured.statistics();
    let (costs, shared, joint) = model_of(events);
    let oracle = model::best_order(&costs, &shared, &[0; 5], &joint, 1 << 20).unwrap();
    let cost = |order: &[usize]| model::expected_cost_order(&costs, &shared, order, &joint);

    let seeded = OrderingPlanner::new(&graph(), &OrderingOptions::new(Policy::Adaptive));
    assert_eq!(seeded.import_statistics(&stats).unwrap(), ["sel"]);
    let order = order_of(&seeded);
    assert!(
        cost(&order) <= 1.02 * oracle.cost && !CUTS[order[0]].3,
        "{order:?} against the oracle's {:?}; {:#?}",
        oracle.order,
        seeded.history()
    );

    let mut blind_stats = stats.clone();
    blind_stats.get_mut("sel").unwrap().shared.clear();
    let blind = OrderingPlanner::new(&graph(), &OrderingOptions::new(Policy::Adaptive));
    blind.import_statistics(&blind_stats).unwrap();
    let order = order_of(&blind);
    assert!(
        CUTS[order[0]].3 && cost(&order) > 2.0 * oracle.cost,
        "{order:?}"
    );
}

/// The first decision of a path observed in batches, from a probe before
/// the path: the probe reports the shared producer's running time apart
/// from the steps' (`ProbedProducer`), and the planner charges it to the
/// first jet cut of each order it weighs: the jet-free selective cuts come
/// first at once. Folded into the step that needed it first in the probe
/// (`jetPt`, as the probe did), `jetEta` looked cheap and ran first.
#[test]
fn a_first_probe_charges_a_shared_producer_to_the_first_step_that_needs_it() {
    let events = 4096u64;
    let rows: Vec<(u64, u64)> = (0..events)
        .map(|e| {
            let pass = (0..CUTS.len()).fold(0u64, |m, j| m | u64::from(passes(j, e)) << j);
            ((1 << CUTS.len()) - 1, pass)
        })
        .collect();
    let chunk = events / 4;
    let timings = |jets_on: Option<usize>| -> Vec<Vec<(f64, u64)>> {
        (0..CUTS.len())
            .map(|j| {
                let per = CUTS[j].1 + if jets_on == Some(j) { JETS_S } else { 0.0 };
                vec![(per * chunk as f64, chunk); 4]
            })
            .collect()
    };
    let (costs, shared, joint) = model_of(events);
    let oracle = model::best_order(&costs, &shared, &[0; 5], &joint, 1 << 20).unwrap();
    let cost = |order: &[usize]| model::expected_cost_order(&costs, &shared, order, &joint);

    let planner = OrderingPlanner::new(&graph(), &OrderingOptions::new(Policy::Adaptive));
    let jets = [ProbedProducer {
        label: "jets".into(),
        seconds: JETS_S * events as f64,
        events,
    }];
    planner.decide_from_probe(0, &rows, &timings(None), &jets);
    let order = order_of(&planner);
    assert!(
        cost(&order) <= 1.02 * oracle.cost && !CUTS[order[0]].3,
        "{order:?} against the oracle's {:?}; {:#?}",
        oracle.order,
        planner.history()
    );

    let folded = OrderingPlanner::new(&graph(), &OrderingOptions::new(Policy::Adaptive));
    folded.decide_from_probe(0, &rows, &timings(Some(2)), &[]);
    let order = order_of(&folded);
    assert!(
        order[0] == 3 && cost(&order) > 2.0 * oracle.cost,
        "{order:?}"
    );
}

/// `hepframe` keeps HEP-Frame's published rule, a weight per step from its
/// own pass fraction and running time, and does not charge shared
/// producers (docs/filter-ordering.md, "`hepframe`"): by default a level's
/// steps are requested together and all run once the level is reached, so
/// the producer runs once on every event reaching the level whichever way
/// the level is sorted, and a first-need charge could not change the
/// work. Here the five unconstrained cuts form one level: after the
/// warm-up every plan is that one group, and the producer runs on every
/// event, as under any order of the level.
#[test]
fn hepframe_runs_a_level_at_once_so_a_shared_producer_costs_the_same_in_any_order() {
    let graph = graph();
    let planner = OrderingPlanner::new(&graph, &OrderingOptions::new(Policy::HepFrame));
    let index = |label: &str| graph.modules.iter().position(|m| m.label == label).unwrap();
    let step: Vec<usize> = CUTS.iter().map(|c| index(c.0)).collect();
    let mut outcome = PathOutcome::default();
    let mut jets_runs = 0u64;
    let events = 2_000u64;
    for e in 0..events {
        let plan = planner.plan(0, e);
        if e >= 200 {
            assert_eq!(plan.groups.len(), 1, "event {e}: {plan:?}");
        }
        let mut jets_ran = false;
        walk::walk(&plan, &mut outcome, |m, _| {
            let j = step.iter().position(|&s| s == m).unwrap();
            jets_ran |= CUTS[j].3;
            if planner.wants_cost(m) {
                planner.observe_cost(m, CUTS[j].1);
            }
            passes(j, e)
        });
        jets_runs += u64::from(jets_ran);
        planner.observe(0, e, &outcome);
    }
    assert_eq!(jets_runs, events);
}
