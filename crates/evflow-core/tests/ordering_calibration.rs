//! The pass model of the order in force agrees with that order's exact
//! stop counts (issue 14). The planner is driven directly,
//! single-threaded and deterministic, as in `ordering_noise.rs`.

use evflow_core::ordering::model::{self, Joint};
use evflow_core::ordering::{OrderingOptions, OrderingPlanner, Policy};
use evflow_core::schedule::{OrderChange, PathOutcome, Planner};
use evflow_core::*;

mod driven;
mod walk;

use driven::{driven_graph, mix, unit};

/// Filters with known costs and pass decisions from uniform variables
/// (`twin`: the step reads the variable of another, smeared), precedence
/// constraints and the data's seed.
struct Pipeline {
    costs: Vec<f64>,
    rates: Vec<f64>,
    twin: Vec<Option<usize>>,
    after: Vec<(usize, usize)>,
    seed: u64,
}

impl Pipeline {
    fn variable(&self, j: usize, e: u64) -> f64 {
        let key = |v: u64| e.wrapping_mul(0x1000_0000_01b3) ^ mix(self.seed ^ mix(v));
        match self.twin[j] {
            Some(t) => unit(key(t as u64)) + 0.1 * (unit(key(1000 + j as u64)) - 0.5),
            None => unit(key(j as u64)),
        }
    }
    fn passes(&self, j: usize, e: u64) -> bool {
        self.variable(j, e) > 1.0 - self.rates[j]
    }
    fn preds(&self) -> Vec<u64> {
        let mut preds = vec![0u64; self.costs.len()];
        for &(later, earlier) in &self.after {
            preds[later] |= 1 << earlier;
        }
        preds
    }
    fn joint(&self, events: u64) -> Joint {
        Joint::from_masks((0..events).map(|e| {
            (0..self.costs.len()).fold(0u64, |m, j| m | (u64::from(self.passes(j, e)) << j))
        }))
    }
    fn graph(&self) -> Graph {
        driven_graph(self.costs.len(), &self.after)
    }
}

/// Runs `events` events as the engine would, every timing exact; returns
/// the work per event and the planner.
fn drive(p: &Pipeline, events: u64) -> (Vec<f64>, OrderingPlanner) {
    let planner = OrderingPlanner::new(&p.graph(), &OrderingOptions::new(Policy::Adaptive));
    let mut outcome = PathOutcome::default();
    let mut work = Vec::with_capacity(events as usize);
    for e in 0..events {
        let plan = planner.plan(0, e);
        let mut w = 0.0;
        walk::walk(&plan, &mut outcome, |m, _| {
            if planner.wants_cost(m) {
                planner.observe_cost(m, p.costs[m]);
            }
            w += p.costs[m];
            p.passes(m, e)
        });
        planner.observe(0, e, &outcome);
        work.push(w);
    }
    (work, planner)
}

/// The final entry's two figures for the order in force: from its stop
/// counts, and from the pass model of the last decision (µs).
fn expected(history: &[OrderChange]) -> (f64, f64) {
    let last = history.last().unwrap();
    let num = |after: &str| -> f64 {
        let at = last.reason.find(after).unwrap() + after.len();
        let rest = &last.reason[at..];
        rest[..rest.find(' ').unwrap()].parse().unwrap()
    };
    (num("expected "), num("the last decision: "))
}

/// Ten filters like a user's selection (costs 5 µs to 300 µs, two twin
/// pairs, two precedence constraints, the costliest written first), eight
/// draws of the data. The warm-up's samples do not decide every step
/// (a step not yet timed is measured after a rejection in one sampled
/// event in 16), and later ones are few (0.3–0.8% of the events). The pass
/// model at the last decision expects, for the order in force, the cost
/// per event that the order's own stop counts give (within 5%).
/// The counts the report gives run to the end of the job, up to 8192
/// events past the last decision (the longest interval), and a period's
/// cost per event varies by itself (24–32 µs over blocks of 2000 events
/// of one draw, the same order): over 20 000 events the events after the
/// last decision were up to 44% of the counts, which alone moved the
/// comparison by a few per cent (the model 25.68 µs against 25.66 µs
/// from the counts it was raked to, 27.41 µs at the end); over 40 000 the
/// model is within 0.8% of them in every draw.
/// Post-stratified on the samples' known failures, their imputed failures
/// of undecided steps moved weight from later steps to earlier ones: the
/// model expected 7–35% less than the stop counts in six of the eight
/// draws, and kept orders up to 10% above the oracle's.
#[test]
fn the_pass_model_of_the_order_in_force_agrees_with_its_stop_counts() {
    for seed in 0..8u64 {
        let p = Pipeline {
            costs: driven::TWIN_COSTS.to_vec(),
            rates: driven::TWIN_RATES.to_vec(),
            twin: driven::TWINS.to_vec(),
            after: driven::TWIN_AFTER.to_vec(),
            seed,
        };
        let events = 40_000u64;
        let (work, planner) = drive(&p, events);
        let history = planner.history();
        let (stops, model) = expected(&history);
        let joint = p.joint(events);
        let oracle = model::best_order(&p.costs, &[], &p.preds(), &joint, 1 << 20).unwrap();
        // Not trivial: the written order costs far more than the oracle's.
        let written: Vec<usize> = (0..p.costs.len()).collect();
        assert!(model::expected_cost_order(&p.costs, &[], &written, &joint) > 3.0 * oracle.cost);
        let mean = work.iter().sum::<f64>() / events as f64;
        assert!(
            (model / stops - 1.0).abs() <= 0.05,
            "seed {seed}: the pass model expected {model} µs per event, the stop counts \
             give {stops} µs (run {:.3} × the oracle); {history:#?}",
            mean / oracle.cost
        );
    }
}
