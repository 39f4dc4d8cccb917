//! The held-out `shared` pipeline replayed (issue 14): an earlier order's
//! few events do not decide, against the samples, how the events that a
//! step of the order in force rejects pass the steps after it. The planner
//! is driven directly, single-threaded and deterministic, every timing
//! exact, as in `ordering_calibration.rs`.

use std::sync::Arc;

use evflow_core::ordering::model::{self, Joint, SharedCost};
use evflow_core::ordering::{OrderingOptions, OrderingPlanner, Policy};
use evflow_core::schedule::{OrderChange, PathOutcome, Planner};
use evflow_core::*;
use evflow_workloads::{self as synthetic, Timing};

mod driven;
mod walk;

use driven::{mix, unit};

/// `bench/ordering_heldout.py`'s `shared` pipeline in written order:
/// label, cost (s), pass rate, the step whose variable it reads smeared,
/// and the shared producers it needs (bit 0: `jets`, bit 1: `muons`).
const CUTS: [(&str, f64, f64, Option<usize>, u8); 10] = [
    ("jetPt", 6e-6, 0.5, None, 1),
    ("jetEta", 5e-6, 0.6, None, 1),
    ("bTag", 30e-6, 0.55, Some(1), 1),
    ("lepton", 10e-6, 0.3, None, 2),
    ("iso", 8e-6, 0.35, Some(3), 2),
    ("met", 5e-6, 0.5, None, 0),
    ("ht", 40e-6, 0.45, None, 0),
    ("trigger", 5e-6, 0.8, None, 0),
    ("vertex", 15e-6, 0.9, None, 0),
    ("mass", 300e-6, 0.4, None, 0),
];
/// On-demand producers, each run with the first step that needs it.
const PRODUCERS: [(&str, f64); 2] = [("jets", 200e-6), ("muons", 60e-6)];
/// `(later, earlier)`: `bTag` after `jetPt`, `mass` after `lepton`.
const AFTER: [(usize, usize); 2] = [(2, 0), (9, 3)];

fn passes(seed: u64, j: usize, e: u64) -> bool {
    let key = |v: u64| e.wrapping_mul(0x1000_0000_01b3) ^ mix(seed ^ mix(v));
    let x = match CUTS[j].3 {
        Some(t) => unit(key(t as u64)) + 0.1 * (unit(key(1000 + j as u64)) - 0.5),
        None => unit(key(j as u64)),
    };
    x > 1.0 - CUTS[j].2
}

fn needs(j: usize) -> impl Iterator<Item = usize> {
    (0..PRODUCERS.len()).filter(move |b| CUTS[j].4 >> b & 1 == 1)
}

fn graph() -> Graph {
    let mut p = Process::new("shared-heldout");
    p.set_source(EmptySource::new(1));
    for (label, _) in PRODUCERS {
        p.add(synthetic::producer(label, Timing::zero(), &[], &[""]));
    }
    for (j, &(label, ..)) in CUTS.iter().enumerate() {
        let consumes: Vec<&str> = needs(j).map(|b| PRODUCERS[b].0).collect();
        p.add(synthetic::filter_with_decision(
            label,
            Timing::zero(),
            &consumes,
            Arc::new(|_| true),
        ));
    }
    let mut path = PathDesc::new("sel", CUTS.map(|c| c.0)).reorderable(true);
    for (later, earlier) in AFTER {
        path = path.after(CUTS[later].0, CUTS[earlier].0);
    }
    p.add_path(path);
    p.compile().unwrap()
}

struct Run {
    /// Work per event (s), producers included.
    work: Vec<f64>,
    history: Vec<OrderChange>,
}

/// Runs `events` events of draw `seed` as the engine would: the plan's
/// groups in order, a producer with the first step that needs it, every
/// timing the planner asks for exact.
fn drive(seed: u64, events: u64) -> Run {
    let graph = graph();
    let planner = OrderingPlanner::new(&graph, &OrderingOptions::new(Policy::Adaptive));
    let index = |label: &str| graph.modules.iter().position(|m| m.label == label).unwrap();
    let producer: Vec<usize> = PRODUCERS.iter().map(|p| index(p.0)).collect();
    let step: Vec<usize> = CUTS.iter().map(|c| index(c.0)).collect();
    let mut outcome = PathOutcome::default();
    let mut work = Vec::with_capacity(events as usize);
    for e in 0..events {
        let plan = planner.plan(0, e);
        let (mut w, mut ran) = (0.0, 0u8);
        walk::walk(&plan, &mut outcome, |m, _| {
            let j = step.iter().position(|&s| s == m).unwrap();
            for b in needs(j) {
                if ran >> b & 1 == 0 {
                    ran |= 1 << b;
                    w += PRODUCERS[b].1;
                    if planner.wants_cost(producer[b]) {
                        planner.observe_cost(producer[b], PRODUCERS[b].1);
                    }
                }
            }
            if planner.wants_cost(m) {
                planner.observe_cost(m, CUTS[j].1);
            }
            w += CUTS[j].1;
            passes(seed, j, e)
        });
        planner.observe(0, e, &outcome);
        work.push(w);
    }
    Run {
        work,
        history: planner.history(),
    }
}

/// Sixteen draws of the data. In draw 1 the order of events 64–128 ran
/// the jet cuts before `mass`, and all 3 of its events that passed the
/// jet-free cuts and failed `mass` passed the jet cuts (about 0.6
/// expected). The estimate was raked to that order's stop counts, shrunk
/// only with the weight of the ~60 samples, long after it was left: its 3
/// events decided that 75% of the events `mass` rejects pass the jet cuts
/// (26% do), and the order with `mass` before `jets`, installed at event
/// 128, stayed to the end, 40 000 events of exact counts later (1.117 × the
/// oracle, the run 1.134 ×; draw 15 ran an order at 1.116 × from event 256
/// to 33 984, the run 1.117 ×). An earlier order's counts now weigh against
/// every other event counted as well: in every draw the order settled on is
/// within 3% of the oracle and the run within 8%.
#[test]
fn an_earlier_orders_few_events_do_not_hold_the_settled_order() {
    let events = 40_000u64;
    let costs: Vec<f64> = CUTS.iter().map(|c| c.1).collect();
    let shared: Vec<SharedCost> = (0..PRODUCERS.len())
        .map(|b| SharedCost {
            needed_by: (0..CUTS.len())
                .filter(|&j| CUTS[j].4 >> b & 1 == 1)
                .fold(0u64, |m, j| m | 1 << j),
            cost: PRODUCERS[b].1,
        })
        .collect();
    let mut preds = vec![0u64; CUTS.len()];
    for (later, earlier) in AFTER {
        preds[later] |= 1 << earlier;
    }
    let mut worst = (0.0f64, 0.0f64);
    for seed in 0..16u64 {
        let run = drive(seed, events);
        let joint =
            Joint::from_masks((0..events).map(|e| {
                (0..CUTS.len()).fold(0u64, |m, j| m | u64::from(passes(seed, j, e)) << j)
            }));
        let oracle = model::best_order(&costs, &shared, &preds, &joint, 1 << 20).unwrap();
        // Not trivial: the written order runs `jets` on every event.
        let written: Vec<usize> = (0..CUTS.len()).collect();
        assert!(model::expected_cost_order(&costs, &shared, &written, &joint) > 3.0 * oracle.cost);
        let settled: Vec<usize> = run
            .history
            .last()
            .unwrap()
            .order
            .iter()
            .map(|l| CUTS.iter().position(|c| c.0 == l).unwrap())
            .collect();
        let settled = model::expected_cost_order(&costs, &shared, &settled, &joint) / oracle.cost;
        let mean = run.work.iter().sum::<f64>() / events as f64 / oracle.cost;
        assert!(
            settled <= 1.03 && mean <= 1.08,
            "seed {seed}: settled on an order at {settled:.3} × the oracle, the run {mean:.3} ×; {:#?}",
            run.history
        );
        worst = (worst.0.max(settled), worst.1.max(mean));
    }
    println!(
        "worst over 16 draws: settled {:.3} × the oracle, run {:.3} ×",
        worst.0, worst.1
    );
}
