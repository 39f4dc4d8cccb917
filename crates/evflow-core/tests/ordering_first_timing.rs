//! A cheap step timed for the first time during the warm-up is measured
//! after rejections from the next event on, not only after the next
//! decision (issue 14). The planner is driven directly, single-threaded
//! and deterministic, as in `ordering_calibration.rs`.

use evflow_core::ordering::model::{self, Joint};
use evflow_core::ordering::{OrderingOptions, OrderingPlanner, Policy};
use evflow_core::schedule::{OrderChange, PathOutcome, Planner};

mod driven;
mod walk;

use driven::{driven_graph, mix, unit};

/// `ordering_calibration.rs`' ten filters: costs 5 µs to 300 µs, the
/// costliest written first; `f2` reads `f1`'s variable and `f4` `f3`'s,
/// smeared (`f4`, 8 µs, passes 35%, nearly every event that the 70 µs
/// `f3` passes, 30%); `f2` after `f0`, `f9` after `f3`.
const COSTS: [f64; 10] = driven::TWIN_COSTS;
const RATES: [f64; 10] = driven::TWIN_RATES;
const TWIN: [Option<usize>; 10] = driven::TWINS;
const AFTER: [(usize, usize); 2] = driven::TWIN_AFTER;

fn passes(seed: u64, j: usize, e: u64) -> bool {
    let key = |v: u64| e.wrapping_mul(0x1000_0000_01b3) ^ mix(seed ^ mix(v));
    let x = match TWIN[j] {
        Some(t) => unit(key(t as u64)) + 0.1 * (unit(key(1000 + j as u64)) - 0.5),
        None => unit(key(j as u64)),
    };
    x > 1.0 - RATES[j]
}

struct Run {
    /// Work per event (s).
    work: Vec<f64>,
    history: Vec<OrderChange>,
    /// Events of the warm-up on which `f3` rejected and `f4` ran after it.
    twin_after_reject: usize,
}

/// Runs `events` events of draw `seed` as the engine would, every timing
/// exact.
fn drive(seed: u64, events: u64) -> Run {
    let planner = OrderingPlanner::new(
        &driven_graph(COSTS.len(), &AFTER),
        &OrderingOptions::new(Policy::Adaptive),
    );
    let mut outcome = PathOutcome::default();
    let mut run = Run {
        work: Vec::with_capacity(events as usize),
        history: Vec::new(),
        twin_after_reject: 0,
    };
    for e in 0..events {
        let plan = planner.plan(0, e);
        let mut w = 0.0;
        let (mut f3_rejected, mut f4_after) = (false, false);
        walk::walk(&plan, &mut outcome, |m, after_rejection| {
            if planner.wants_cost(m) {
                planner.observe_cost(m, COSTS[m]);
            }
            w += COSTS[m];
            let pass = passes(seed, m, e);
            f3_rejected |= m == 3 && !pass;
            f4_after |= m == 4 && after_rejection && f3_rejected;
            pass
        });
        if e < 64 && f4_after {
            run.twin_after_reject += 1;
        }
        planner.observe(0, e, &outcome);
        run.work.push(w);
    }
    run.history = planner.history();
    run
}

fn position(order: &[String], label: &str) -> usize {
    order.iter().position(|l| l == label).unwrap()
}

/// In the written order `f4` runs after `f3`, and the warm-up's first
/// orders keep it there. A step never timed is measured after a rejection
/// on one sampled event in 16 (it might cost 1 ms), and that rate stayed
/// until the next decision even once the step had been timed. In one draw
/// (seed 7) `f4` was first timed at event 39, and the warm-up ended at
/// event 64 with 1 event on which it ran after `f3` rejected; the 37
/// samples that `f3` rejected had `f4` imputed from its pass rate on the
/// events reaching it (after `f3` passed: 72–90%, later 96%), and `f4`
/// stayed after `f3` and the 206 µs `f0` to the end: the whole run 1.47 ×
/// the oracle, the order it settled on 1.41 ×. Now a cheap step is
/// measured after every rejection from the event after its first timing
/// (19 such events in that warm-up), and the cheap twin runs before its
/// partner from event 1024 on in every draw.
#[test]
fn a_cheap_twin_timed_late_in_the_warm_up_is_measured_and_moved_before_its_partner() {
    let events = 20_000u64;
    for seed in 0..8u64 {
        let run = drive(seed, events);
        let joint =
            Joint::from_masks((0..events).map(|e| {
                (0..COSTS.len()).fold(0u64, |m, j| m | u64::from(passes(seed, j, e)) << j)
            }));
        let mut preds = vec![0u64; COSTS.len()];
        for &(later, earlier) in &AFTER {
            preds[later] |= 1 << earlier;
        }
        let oracle = model::best_order(&COSTS, &[], &preds, &joint, 1 << 20).unwrap();
        // The orders in force from event 1024 on: the one installed last
        // before it, and every later one (the final entry repeats the last).
        let from = run
            .history
            .iter()
            .rposition(|h| h.at_event <= 1024)
            .unwrap_or(0);
        for h in &run.history[from..] {
            assert!(
                position(&h.order, "f4") < position(&h.order, "f3"),
                "seed {seed}: from event {} the order in force runs f4 after f3: {:?}",
                h.at_event,
                h.order
            );
        }
        let settled: Vec<usize> = run
            .history
            .last()
            .unwrap()
            .order
            .iter()
            .map(|l| l[1..].parse().unwrap())
            .collect();
        let settled_cost = model::expected_cost_order(&COSTS, &[], &settled, &joint);
        let mean = run.work.iter().sum::<f64>() / events as f64;
        assert!(
            settled_cost <= 1.10 * oracle.cost && mean <= 1.20 * oracle.cost,
            "seed {seed}: settled on {settled:?}, {:.3} × the oracle, the run {:.3} ×",
            settled_cost / oracle.cost,
            mean / oracle.cost
        );
        if seed == 7 {
            assert!(
                run.twin_after_reject >= 10,
                "seed 7: f4 ran after f3's rejection on {} events of the warm-up",
                run.twin_after_reject
            );
        }
    }
}
