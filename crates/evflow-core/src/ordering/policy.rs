//! What the ordering planner is asked to do: the [`Policy`] of each path
//! and the [`Tuning`] of the `adaptive` and `hepframe` policies.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

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
}
