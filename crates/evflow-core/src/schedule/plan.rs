//! Path plans: in which order (and grouping) the steps of a path run for
//! one event. Non-reorderable paths always use their written order; a
//! [`Planner`] may choose another order for reorderable paths, per event,
//! from what it observed on earlier events.

use std::sync::Arc;

use crate::graph::{Graph, ModuleIdx, PathIdx};

/// The order of one path for one event: groups of steps, run one group
/// after the other; the steps of a group are requested together and may run
/// concurrently on the event. The path is rejected by the first failing
/// step, unless `evaluate_all` is set (a *sampled* event that measures every
/// filter): then every step runs and the path is accepted when all pass.
/// A sampled event may measure only some of the steps that follow a
/// rejection, and which ones may depend on where it was rejected:
/// `skip_after_reject[k * groups.len() + g]` skips group `g` once a step of
/// group `k` was the first to reject the event (the decision is made by
/// then; a missing entry runs the group).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathPlan {
    pub groups: Vec<Vec<ModuleIdx>>,
    pub evaluate_all: bool,
    pub skip_after_reject: Vec<bool>,
}

impl PathPlan {
    /// One step after the other, in the given order.
    pub fn sequence(order: impl IntoIterator<Item = ModuleIdx>) -> Self {
        Self {
            groups: order.into_iter().map(|m| vec![m]).collect(),
            evaluate_all: false,
            skip_after_reject: Vec::new(),
        }
    }
    /// Whether group `g` is skipped once a step of group `rejected_at` was
    /// the first to reject the event.
    pub fn skips_after_reject(&self, rejected_at: usize, g: usize) -> bool {
        self.evaluate_all
            && self
                .skip_after_reject
                .get(rejected_at * self.groups.len() + g)
                .copied()
                .unwrap_or(false)
    }
    /// The modules in execution order.
    pub fn order(&self) -> impl Iterator<Item = ModuleIdx> + '_ {
        self.groups.iter().flatten().copied()
    }
}

/// What one event did on one path, in execution order: every step that
/// ran for the path, with its decision (steps of groups skipped after a
/// rejection are left out even when another path ran them).
#[derive(Clone, Debug, Default)]
pub struct PathOutcome {
    pub steps: Vec<(ModuleIdx, bool)>,
    /// Parallel to `steps`: for a module that processes many events at once
    /// (a batch of a columnar analysis), the events it saw and let through
    /// ([`Event::set_filter_counts`](crate::Event::set_filter_counts));
    /// `None` for a per-event module, which counts as (1, passed).
    pub counts: Vec<Option<(u64, u64)>>,
    pub accepted: bool,
    pub sampled: bool,
    /// How many of `steps` the path ran to decide: up to the group of the
    /// first rejection (all when none rejected). A sampled event's steps
    /// after it are measurements for the planner, not the path's cut-flow
    /// (counted there, a step could be visited by more events than the
    /// step before it passed).
    pub decided_after: usize,
}

impl PathOutcome {
    /// The steps that decided the event on the path, with their decisions:
    /// the path's cut-flow.
    pub fn decisive_steps(&self) -> &[(ModuleIdx, bool)] {
        &self.steps[..self.decided_after.min(self.steps.len())]
    }

    /// (events seen, events passed) by the `i`-th step that ran.
    pub fn step_counts(&self, i: usize) -> (u64, u64) {
        self.counts
            .get(i)
            .copied()
            .flatten()
            .unwrap_or((1, u64::from(self.steps[i].1)))
    }
}

/// Chooses path plans. Shared by every executor and by the simulator, so
/// implementations are thread-safe and cheap to call per event.
pub trait Planner: Send + Sync {
    /// The plan of path `path` for the event with job index `event_index`.
    fn plan(&self, path: PathIdx, event_index: u64) -> Arc<PathPlan>;
    /// Called once per finished (not failed) event and path.
    fn observe(&self, _path: PathIdx, _event_index: u64, _outcome: &PathOutcome) {}
    /// Running time of one execution of `module` (a step of a reorderable
    /// path), excluding external-work waits.
    fn observe_cost(&self, _module: ModuleIdx, _seconds: f64) {}
    /// Running time of one execution of `module` that processed `events`
    /// events at once (a batch of a columnar analysis, which reported its
    /// filter counts): comparable between calls per event only. By default
    /// the same as [`observe_cost`](Planner::observe_cost).
    fn observe_batch_cost(&self, module: ModuleIdx, seconds: f64, _events: u64) {
        self.observe_cost(module, seconds);
    }
    /// Whether [`observe_cost`](Planner::observe_cost) is wanted for `module`.
    fn wants_cost(&self, _module: ModuleIdx) -> bool {
        false
    }
    /// A human-readable log of order changes, for reports.
    fn history(&self) -> Vec<OrderChange> {
        Vec::new()
    }
}

/// One change of a path's order, for reports.
#[derive(Clone, Debug, serde::Serialize)]
pub struct OrderChange {
    pub path: String,
    /// Number of events observed on the path when the order changed.
    pub at_event: u64,
    pub order: Vec<String>,
    pub reason: String,
}

/// Every path in its written order, always (`--filter-order fixed`).
pub struct FixedPlanner {
    plans: Vec<Arc<PathPlan>>,
}

impl FixedPlanner {
    pub fn new(graph: &Graph) -> Self {
        Self {
            plans: graph
                .paths
                .iter()
                .map(|p| Arc::new(PathPlan::sequence(p.steps.iter().copied())))
                .collect(),
        }
    }
}

impl Planner for FixedPlanner {
    fn plan(&self, path: PathIdx, _: u64) -> Arc<PathPlan> {
        self.plans[path].clone()
    }
}

impl std::fmt::Debug for FixedPlanner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FixedPlanner")
            .field("paths", &self.plans.len())
            .finish()
    }
}
