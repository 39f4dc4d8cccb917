//! Ordering policies for reorderable paths: `fixed`, `adaptive` and
//! `hepframe`, each a [`Planner`](crate::schedule::Planner).
//!
//! * `fixed`: the written order.
//! * `adaptive`: measures each step's cost per visited event, where every
//!   event stops along the order in force, and the joint pass distribution
//!   of the path's steps on a small, cost-budgeted sample of events that go
//!   on after a rejection (through the cheap steps always, the expensive
//!   ones rarely), post-stratified on where events stop; at checkpoints
//!   whose interval doubles while the order is stable, it chooses the order
//!   of least expected cost (exact dynamic programming over the feasible
//!   prefix sets, A-Greedy when that is too large). The stop counts are
//!   tested for changes continuously; a significant change (drift) restarts
//!   learning.
//! * `hepframe`: HEP-Frame's published heuristic, as a baseline: the levels
//!   of the constraint DAG one after the other (a barrier between levels),
//!   each level ordered by `0.7 × pass fraction + 0.3 × normalised time`
//!   and, by default, evaluated concurrently.
//!
//! See `docs/filter-ordering.md` for the algorithms and their guarantees.
//!
//! ```
//! use evflow_core::*;
//! use evflow_core::ordering::{OrderingOptions, Policy};
//! use evflow_core::synthetic::{self, Timing, Work};
//!
//! let mut p = Process::new("cuts");
//! p.set_source(EmptySource::new(2000));
//! p.add(synthetic::filter("slow", Timing::constant(20e-6, Work::Busy), &[], 0.9, 1));
//! p.add(synthetic::filter("fast", Timing::constant(1e-6, Work::Busy), &[], 0.2, 2));
//! p.add_path(PathDesc::new("sel", ["slow", "fast"]).reorderable(true));
//! let options = RunOptions {
//!     planner: Some(OrderingOptions::new(Policy::Adaptive).factory()),
//!     ..RunOptions::default()
//! };
//! let report = run(p, &options).unwrap();
//! // "fast" rejects 80% of the events for a twentieth of the cost: it moved first.
//! assert_eq!(report.orderings.last().unwrap().order, ["fast", "slow"]);
//! ```

pub mod model;
mod planner;

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

pub use planner::OrderingPlanner;

use crate::PlannerFactory;

/// How a path's steps are ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Policy {
    /// As written.
    Fixed,
    /// Least expected cost from measured statistics.
    Adaptive,
    /// HEP-Frame's weighted levels.
    HepFrame,
}

impl Policy {
    pub fn name(self) -> &'static str {
        match self {
            Policy::Fixed => "fixed",
            Policy::Adaptive => "adaptive",
            Policy::HepFrame => "hepframe",
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fixed" => Ok(Policy::Fixed),
            "adaptive" => Ok(Policy::Adaptive),
            "hepframe" => Ok(Policy::HepFrame),
            other => Err(format!(
                "unknown filter order '{other}' (known: fixed, adaptive, hepframe)"
            )),
        }
    }
}

/// Tuning of the `adaptive` and `hepframe` policies. The defaults are the
/// measured ones of `docs/filter-ordering.md`.
#[derive(Clone, Debug, PartialEq)]
pub struct Tuning {
    /// Seed of the choice of sampled events (deterministic given the seed).
    pub seed: u64,
    /// Length of the learning phase at the start and after a drift: every
    /// event is sampled (expensive steps at their own, budgeted rate), and
    /// decisions come after 1/32, 1/16, …, 1/2 and all of it.
    pub warmup_events: u64,
    /// Share of the expected cost that sampling may add (exploration
    /// budget): cheap steps are sampled after a rejection at
    /// `budget × C / Σ c_j P(rejected before j)` (half the budget when some
    /// steps are expensive; each of those gets an equal share of the other
    /// half). Halved once the order stays for 4 decisions, quartered after 8.
    pub sample_budget: f64,
    /// Sampling never goes below this rate (never stop exploring); for an
    /// expensive step, below this share of the expected cost.
    pub min_sample_rate: f64,
    /// Nor above this one after the warm-up.
    pub max_sample_rate: f64,
    /// Samples kept (sliding window).
    pub window: usize,
    /// First interval between decisions, in events; doubles while the
    /// order is stable, back to this after a change.
    pub min_interval: u64,
    pub max_interval: u64,
    /// Regular events per drift check.
    pub drift_block: u64,
    /// A new order must be expected to save this fraction to replace the
    /// current one (hysteresis; more while there are few samples:
    /// `0.2/√samples`).
    pub min_gain: f64,
    /// Exact dynamic programming up to this many feasible prefix sets;
    /// A-Greedy beyond.
    pub max_dp_states: usize,
    /// `adaptive`: consecutive independent steps whose cost per event is at
    /// least this many seconds form one group, evaluated concurrently on
    /// the event (`None`: never; the default).
    pub concurrent_above_s: Option<f64>,
    /// `hepframe`: the steps of a level form one concurrent group (as
    /// published) rather than a sequence.
    pub hepframe_concurrent: bool,
}

impl Default for Tuning {
    fn default() -> Self {
        Self {
            seed: 0x5eed,
            warmup_events: 64,
            sample_budget: 0.01,
            min_sample_rate: 1.0 / 4096.0,
            max_sample_rate: 1.0 / 16.0,
            window: 4096,
            min_interval: 64,
            max_interval: 1 << 16,
            drift_block: 256,
            min_gain: 0.01,
            max_dp_states: 1 << 18,
            concurrent_above_s: None,
            hepframe_concurrent: true,
        }
    }
}

/// Which policy each path uses, and the tuning.
#[derive(Clone, Debug, PartialEq)]
pub struct OrderingOptions {
    /// Policy of reorderable paths not named in `per_path`.
    pub default: Policy,
    /// Policy of individual paths, by name.
    pub per_path: HashMap<String, Policy>,
    pub tuning: Tuning,
}

impl Default for OrderingOptions {
    fn default() -> Self {
        Self::new(Policy::Adaptive)
    }
}

impl OrderingOptions {
    pub fn new(default: Policy) -> Self {
        Self {
            default,
            per_path: HashMap::new(),
            tuning: Tuning::default(),
        }
    }

    /// The policy of a path (non-reorderable paths are always `fixed`).
    pub fn policy_of(&self, path: &crate::graph::PathNode) -> Policy {
        if !path.reorderable {
            return Policy::Fixed;
        }
        self.per_path
            .get(&path.name)
            .copied()
            .unwrap_or(self.default)
    }

    /// The factory to put in [`RunOptions::planner`](crate::RunOptions) or
    /// `SimOptions::planner`.
    pub fn factory(self) -> PlannerFactory {
        let options = Arc::new(self);
        Arc::new(move |graph| Arc::new(OrderingPlanner::new(graph, &options)))
    }
}
