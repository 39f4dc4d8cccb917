//! The state of each dynamic path: the plans in force (and each thread's
//! copy of them), the checkpoint state, and how an order becomes plans.

use std::cell::RefCell;
use std::sync::atomic::{
    AtomicBool, AtomicU8, AtomicU64,
    Ordering::{Acquire, Relaxed, Release},
};
use std::sync::{Arc, Mutex, RwLock};

use super::stats::*;
use crate::graph::ModuleIdx;
use crate::ordering::model::{Ideals, SharedCost};
use crate::ordering::policy::{Policy, Tuning};
use crate::schedule::PathPlan;

pub(super) enum Slot {
    Static(Arc<PathPlan>),
    Dynamic(Box<Dyn>),
}

/// The plans in force for a dynamic path.
pub(super) struct Current {
    /// Groups of step positions.
    pub(super) groups: Vec<Vec<usize>>,
    /// Flattened order of positions, as `u8`.
    pub(super) order: Vec<u8>,
    pub(super) plan: Arc<PathPlan>,
    /// Sampled plans by ascending threshold: an event whose hash `u` is
    /// below the last threshold is sampled, with the plan of the first
    /// threshold above `u`. Each plan measures, after a rejection, the
    /// steps whose own threshold is at least its own (nested samples).
    pub(super) sampled: Vec<(u64, Arc<PathPlan>)>,
    /// Events whose hash is below this are *sampled* (the rates without
    /// targets): they join the samples whatever ran after their rejection.
    /// Above it, an event joins them only if a step ran after its
    /// rejection (a targeted rate).
    pub(super) sampled_below: u64,
}

pub(super) struct Dyn {
    pub(super) name: String,
    pub(super) policy: Policy,
    pub(super) steps: Vec<ModuleIdx>,
    /// Per position: the steps it must follow (bit set); extended only
    /// before the first decision ([`add_precedence`](super::OrderingPlanner::add_precedence)).
    pub(super) preds: RwLock<Arc<Vec<u64>>>,
    /// Position of each module of the graph on this path (`u8::MAX`: none).
    pub(super) pos_of: Vec<u8>,
    /// Per position: the modules whose running time counts as the step's
    /// (the step and the producers only it needs).
    pub(super) attributed: Vec<Vec<ModuleIdx>>,
    /// The producers that several steps need (and nothing outside the
    /// path), with the steps (bit set of positions): timed on their own
    /// and charged to the first of those steps in the order.
    pub(super) shared: Vec<(ModuleIdx, u64)>,
    /// The producers that steps need and something outside the path needs
    /// too on some events, with the steps (bit set of positions): timed on
    /// their own, charged to the first step needing them on the share of
    /// the events on which nothing outside ran them (`super::outside`).
    pub(super) outside: Vec<(ModuleIdx, u64)>,
    /// Those that something outside the path runs on every event (an
    /// end-path module without `select_events`, another path's first
    /// steps): charged to no step, listed in the report only.
    pub(super) always_outside: Vec<(ModuleIdx, u64)>,
    /// Per producer of `outside`: events on which a step of the path that
    /// needs it ran; last: the events observed (one at a time).
    pub(super) outside_needed: Striped,
    pub(super) seed: u64,
    /// The feasible prefix sets, for the exact search (`None`: too many,
    /// A-Greedy).
    pub(super) ideals: RwLock<Option<Arc<Ideals>>>,
    pub(super) current: RwLock<Arc<Current>>,
    /// `Current::sampled_below` of the plans in force.
    pub(super) sampled_below: AtomicU64,
    /// Process-unique identity (key of the threads' plan caches) and the
    /// number of times `current` was replaced.
    pub(super) id: u64,
    pub(super) generation: AtomicU64,
    /// The order in force (positions), readable without the lock.
    pub(super) order_now: Vec<AtomicU8>,
    /// The highest event index seen plus one (updated on one event in 256
    /// and at checkpoints: the count of events observed, about).
    pub(super) observed: AtomicU64,
    /// The highest event index seen plus one, on every event: the count
    /// the final entry reports (a short job may end before `observed`
    /// moves past its first event).
    pub(super) seen: Striped,
    pub(super) next_check: AtomicU64,
    /// Events since the order was installed, by the position (in that
    /// order) of the step that rejected them; index `n`: accepted.
    pub(super) stops: Striped,
    /// Per position, for steps that process batches of events: the events
    /// they saw and their executions (costs are then per event seen).
    pub(super) batch_seen: Vec<AtomicU64>,
    pub(super) batch_runs: Vec<AtomicU64>,
    /// Batches observed, and the events that entered the path in them:
    /// the warm-up and the decision intervals of a path observed in
    /// batches count its events (`Dyn::per_obs`).
    pub(super) batch_obs: AtomicU64,
    pub(super) batch_events: AtomicU64,
    /// `hepframe`: per position, events that ran the step and that passed.
    pub(super) reached: Vec<AtomicU64>,
    pub(super) passed: Vec<AtomicU64>,
    pub(super) samples: Mutex<Samples>,
    /// Statistics were imported (`State::imported`): no first probe.
    pub(super) imported: AtomicBool,
    /// The constraints `(earlier, later)` added to the written ones
    /// (inferred by the first probe, or imported), in the order taken.
    pub(super) added: Mutex<Vec<(usize, usize)>>,
    pub(super) state: Mutex<State>,
}

pub(super) static NEXT_PATH_ID: AtomicU64 = AtomicU64::new(0);

/// A thread's copy of the plans of one dynamic path, so that `plan` clones
/// an `Arc` no other thread touches (and takes no lock).
pub(super) struct CachedPlans {
    pub(super) id: u64,
    pub(super) generation: u64,
    pub(super) plan: Arc<PathPlan>,
    pub(super) sampled: Vec<(u64, Arc<PathPlan>)>,
}

/// Paths whose plans a thread keeps (the least recently refreshed goes).
pub(super) const PLAN_CACHE_PATHS: usize = 16;

thread_local! {
    static PLAN_CACHE: RefCell<Vec<CachedPlans>> = const { RefCell::new(Vec::new()) };
}

impl Dyn {
    /// The precedence constraints in force (bit sets of positions).
    pub(super) fn preds(&self) -> Arc<Vec<u64>> {
        read(&self.preds).clone()
    }

    pub(super) fn ideals(&self) -> Option<Arc<Ideals>> {
        read(&self.ideals).clone()
    }

    /// Puts the order of `groups` in force with `st`'s sampling rates and
    /// measuring targets.
    pub(super) fn put_current(&self, groups: Vec<Vec<usize>>, st: &State) {
        let current = make_current(&self.steps, groups, &st.rates, st.targets(&self.preds()));
        self.set_current(Arc::new(current));
    }

    pub(super) fn set_current(&self, current: Arc<Current>) {
        self.sampled_below.store(current.sampled_below, Release);
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = current;
        self.generation.fetch_add(1, Release);
    }

    /// Mean events per observation when the path's observations are
    /// batches (`None`: one event each, the native engine). Counted from
    /// the batches observed, so it is `None` until the first one.
    pub(super) fn per_obs(&self) -> Option<f64> {
        match self.batch_obs.load(Relaxed) {
            0 => None,
            b => Some(self.batch_events.load(Relaxed) as f64 / b as f64),
        }
    }

    /// The plan for an event whose hash is `u`, from the thread's copy of
    /// the plans in force.
    pub(super) fn cached_plan(&self, u: u64) -> Arc<PathPlan> {
        let generation = self.generation.load(Acquire);
        let pick = |c: &CachedPlans| match c.sampled.iter().find(|(limit, _)| u < *limit) {
            Some((_, plan)) => plan.clone(),
            None => c.plan.clone(),
        };
        PLAN_CACHE.with(|cache| {
            let mut cache = cache.borrow_mut();
            if let Some(c) = cache
                .iter()
                .find(|c| c.id == self.id && c.generation == generation)
            {
                return pick(c);
            }
            let fresh = {
                let cur = read(&self.current);
                CachedPlans {
                    id: self.id,
                    generation,
                    plan: Arc::new((*cur.plan).clone()),
                    sampled: cur
                        .sampled
                        .iter()
                        .map(|(limit, plan)| (*limit, Arc::new((**plan).clone())))
                        .collect(),
                }
            };
            let plan = pick(&fresh);
            cache.retain(|c| c.id != self.id);
            if cache.len() >= PLAN_CACHE_PATHS {
                cache.remove(0);
            }
            cache.push(fresh);
            plan
        })
    }
}

/// Checkpoint state of a dynamic path.
pub(super) struct State {
    pub(super) interval: u64,
    pub(super) next_decision: u64,
    pub(super) decisions: u64,
    /// In warm-up (or re-learning after a drift): every event is sampled.
    pub(super) learning: bool,
    /// Events observed when the learning phase began.
    pub(super) phase_start: u64,
    /// Per position: the estimated cost (robust, shrunk while measured on
    /// few executions) and its standard error.
    pub(super) costs: Vec<f64>,
    pub(super) cost_se: Vec<f64>,
    /// Per position: the robust cost at the last decision (to notice a
    /// genuine change between decisions), and the measurements rejected as
    /// descheduled so far.
    pub(super) decided_costs: Vec<f64>,
    pub(super) rejected: Vec<u64>,
    /// Per position: whether the step's cost was measured yet.
    pub(super) cost_known: Vec<bool>,
    /// Per producer of `Dyn::shared`: its estimated cost (robust, shrunk as
    /// the steps'; 0 until timed), the steps needing it, its standard
    /// error, and its robust cost at the last decision.
    pub(super) shared: Vec<SharedCost>,
    pub(super) shared_se: Vec<f64>,
    pub(super) decided_shared: Vec<f64>,
    /// Per producer of `Dyn::outside`: the steps needing it and its cost
    /// per execution (the larger of the robust estimate and its shrunk
    /// value, as a step's measurement cost; 0 until timed), and the share
    /// of the events on which something outside the path ran it. The
    /// search charges the rest like a shared producer: `shared` holds the
    /// producers of `Dyn::shared` (the first `path_shared`), then those.
    pub(super) outside: Vec<SharedCost>,
    pub(super) outside_share: Vec<f64>,
    pub(super) path_shared: usize,
    /// Per position: the sampling rate after a rejection in force, whether
    /// the step counts as expensive to sample, and what sampling it costs
    /// per sampled event.
    pub(super) rates: Vec<f64>,
    /// Per position: the steps after whose rejections the step is measured
    /// at a rate of its own (empty: none; see `Targets`).
    pub(super) targeted: Vec<(u64, f64)>,
    pub(super) heavy: Vec<bool>,
    pub(super) probe: Vec<f64>,
    /// `hepframe`: decayed pass rate estimates per position.
    pub(super) hep_reached: Vec<f64>,
    pub(super) hep_passed: Vec<f64>,
    pub(super) expected_s: f64,
    pub(super) drift_note: Option<String>,
    /// Why a decision was brought forward by a change of a step's cost.
    pub(super) cost_note: Option<String>,
    pub(super) drift: DriftState,
    /// Decisions in a row that kept the order (after learning).
    pub(super) stable: u32,
    /// A better looking order whose gain is still within its uncertainty
    /// (positions; empty: none): the steps it runs earlier are measured
    /// after the rejections of the steps they would jump (see
    /// `set_rates`) until the two can be told apart.
    pub(super) contender: Vec<usize>,
    /// Stop counts of the orders in force before the current one (most
    /// recent last; merged by order), since the last drift.
    pub(super) archive: Vec<Epoch>,
    /// Statistics measured by other planners of the path, imported at the
    /// start (`exchange`); forgotten at a drift.
    pub(super) imported: Option<Imported>,
    /// The last change of order, until its stop counts confirm it, refute
    /// it or another change replaces it; and the orders refuted so far.
    pub(super) trial: Option<Trial>,
    pub(super) refuted: Vec<Refuted>,
}

/// What a planner imported for one path (`exchange`), in its own
/// positions.
#[derive(Clone, Debug)]
pub(super) struct Imported {
    pub(super) samples: Vec<Sample>,
    pub(super) epochs: Vec<Epoch>,
    pub(super) costs: Vec<Option<crate::ordering::exchange::StepCost>>,
    /// Per producer of `Dyn::shared`: its imported cost per execution.
    pub(super) shared: Vec<Option<crate::ordering::exchange::StepCost>>,
    /// Per producer of `Dyn::outside`: its imported cost and counts.
    pub(super) outside: Vec<Option<crate::ordering::exchange::OutsideProducerCost>>,
}

impl Imported {
    pub(super) fn events(&self) -> u64 {
        self.epochs
            .iter()
            .map(|e| e.stops.iter().sum::<u64>())
            .sum()
    }
}

/// A change of order on trial: what to come back to, and what its choice
/// predicted.
#[derive(Clone, Debug)]
pub(super) struct Trial {
    /// The order left (groups of positions), and its stop counts.
    pub(super) previous: Vec<Vec<usize>>,
    pub(super) previous_stops: Vec<u64>,
    /// The order on trial (positions) and, per position in it, the pass
    /// rate predicted on the events reaching it.
    pub(super) order: Vec<usize>,
    pub(super) predicted: Vec<f64>,
    /// The steps whose place changed (the set of steps before them
    /// differs between the two orders): the only ones tested and costed.
    pub(super) moved: u64,
    /// What refuted the prediction, once it was.
    pub(super) refuted: Option<String>,
}

/// An order refuted by its own stop counts: not taken again before the
/// samples seen reach `until_samples`.
#[derive(Clone, Debug)]
pub(super) struct Refuted {
    pub(super) order: Vec<usize>,
    pub(super) until_samples: u64,
}

impl State {
    /// The state of a path of `n` steps before its first checkpoint.
    pub(super) fn new(
        n: usize,
        policy: Policy,
        tuning: &Tuning,
        first_rates: Vec<f64>,
        shared: &[(ModuleIdx, u64)],
        outside: &[(ModuleIdx, u64)],
    ) -> Self {
        Self {
            interval: tuning.min_interval.max(1),
            next_decision: first_decision(policy, tuning, None),
            decisions: 0,
            learning: true,
            phase_start: 0,
            costs: vec![0.0; n],
            cost_se: vec![0.0; n],
            decided_costs: vec![f64::NAN; n],
            rejected: vec![0; n],
            cost_known: vec![false; n],
            shared: shared
                .iter()
                .map(|&(_, needed_by)| SharedCost {
                    needed_by,
                    cost: 0.0,
                })
                .collect(),
            shared_se: vec![0.0; shared.len()],
            path_shared: shared.len(),
            outside_share: vec![0.0; outside.len()],
            decided_shared: vec![f64::NAN; shared.len()],
            outside: outside
                .iter()
                .map(|&(_, needed_by)| SharedCost {
                    needed_by,
                    cost: 0.0,
                })
                .collect(),
            rates: first_rates,
            targeted: Vec::new(),
            heavy: vec![true; n],
            probe: vec![0.0; n],
            hep_reached: vec![0.0; n],
            hep_passed: vec![0.0; n],
            expected_s: 0.0,
            drift_note: None,
            cost_note: None,
            drift: DriftState::default(),
            stable: 0,
            contender: Vec::new(),
            archive: Vec::new(),
            imported: None,
            trial: None,
            refuted: Vec::new(),
        }
    }

    /// The targeted sampling rates in force.
    pub(super) fn targets<'a>(&'a self, preds: &'a [u64]) -> Targets<'a> {
        Targets {
            after: &self.targeted,
            preds,
        }
    }

    /// Keeps the stop counts of an order left, merged with an earlier
    /// period under the same order; at most `MAX_EPOCHS` orders.
    pub(super) fn archive_epoch(&mut self, left: Epoch) {
        match self.archive.iter().position(|e| e.order == left.order) {
            Some(i) => {
                let mut e = self.archive.remove(i);
                for (a, b) in e.stops.iter_mut().zip(&left.stops) {
                    *a += b;
                }
                self.archive.push(e);
            }
            None => self.archive.push(left),
        }
        if self.archive.len() > MAX_EPOCHS {
            self.archive.remove(0);
        }
    }
}

/// Rates after a rejection that depend on which step rejected the event
/// (`Targets::NONE`: none).
#[derive(Clone, Copy)]
pub(super) struct Targets<'a> {
    /// Per position: the steps (bit set of positions) after whose
    /// rejections the step runs at the given rate rather than its own
    /// (when higher); `(0, _)` or missing: none.
    pub(super) after: &'a [(u64, f64)],
    /// Per position: the steps it must follow (bit sets of positions).
    pub(super) preds: &'a [u64],
}

impl Targets<'_> {
    pub(super) const NONE: Targets<'static> = Targets {
        after: &[],
        preds: &[],
    };
}

/// The plans of an order: the regular one, and one sampled plan per
/// distinct sampling rate (`rates`, per position: the rate at which a step
/// runs after a rejection; 0: only as part of the regular plan). A step
/// `targets` names runs after a rejection by the steps it names at its
/// targeted rate instead, when higher; it never runs after a rejection more
/// often than a step it must follow that runs after the same rejection.
pub(super) fn make_current(
    steps: &[ModuleIdx],
    groups: Vec<Vec<usize>>,
    rates: &[f64],
    targets: Targets,
) -> Current {
    let module_groups: Vec<Vec<ModuleIdx>> = groups
        .iter()
        .map(|g| g.iter().map(|&i| steps[i]).collect())
        .collect();
    let n_groups = groups.len();
    let thresholds: Vec<u64> = rates.iter().map(|&r| rate_threshold(r)).collect();
    // `after[k][j]`: the threshold of the step at position `j` after a first
    // rejection in group `k` (steps of later groups only).
    let mut levels: Vec<u64> = thresholds.iter().copied().filter(|&t| t > 0).collect();
    // The steps of the groups up to the rejecting one, which ran.
    let mut ran_before = 0u64;
    let after: Vec<Vec<u64>> = groups
        .iter()
        .enumerate()
        .map(|(k, rejecting)| {
            let mut row = thresholds.clone();
            let bits = rejecting.iter().fold(0u64, |b, &j| b | 1 << j);
            ran_before |= bits;
            if !targets.after.iter().any(|&(by, _)| by & bits != 0) {
                return row;
            }
            for g in &groups[k + 1..] {
                for &j in g {
                    if let Some(&(by, rate)) = targets.after.get(j)
                        && by & bits != 0
                    {
                        row[j] = row[j].max(rate_threshold(rate));
                    }
                    // Predecessors in earlier groups are final by now.
                    let mut p = targets.preds.get(j).copied().unwrap_or(0) & !ran_before;
                    while p != 0 {
                        let i = p.trailing_zeros() as usize;
                        p &= p - 1;
                        row[j] = row[j].min(row[i]);
                    }
                    if row[j] > 0 {
                        levels.push(row[j]);
                    }
                }
            }
            row
        })
        .collect();
    levels.sort_unstable();
    levels.dedup();
    let sampled = levels
        .iter()
        .map(|&limit| {
            let mut skip = vec![false; n_groups * n_groups];
            for k in 0..n_groups {
                for (g, group) in groups.iter().enumerate().skip(k + 1) {
                    skip[k * n_groups + g] = group.iter().all(|&j| after[k][j] < limit);
                }
            }
            let plan = PathPlan {
                groups: module_groups.clone(),
                evaluate_all: true,
                skip_after_reject: if skip.iter().any(|&s| s) {
                    skip
                } else {
                    Vec::new()
                },
            };
            (limit, Arc::new(plan))
        })
        .collect();
    Current {
        order: groups.iter().flatten().map(|&i| i as u8).collect(),
        plan: Arc::new(PathPlan {
            groups: module_groups,
            evaluate_all: false,
            skip_after_reject: Vec::new(),
        }),
        sampled,
        sampled_below: thresholds.iter().copied().max().unwrap_or(0),
        groups,
    }
}

/// The written order, minimally changed to respect the constraints: the
/// earliest-written available step first.
pub(super) fn topological_written(preds: &[u64]) -> Vec<usize> {
    let n = preds.len();
    let mut placed = 0u64;
    let mut order = Vec::with_capacity(n);
    while order.len() < n {
        let Some(j) = (0..n).find(|&j| placed & 1 << j == 0 && preds[j] & !placed == 0) else {
            // A cycle cannot reach here (compile rejects it); keep the rest.
            order.extend((0..n).filter(|&j| placed & 1 << j == 0));
            break;
        };
        order.push(j);
        placed |= 1 << j;
    }
    order
}

/// Splits an order into groups: consecutive steps costing at least
/// `threshold` seconds, none constrained by another, form one group.
pub(super) fn group_expensive(
    order: &[usize],
    costs: &[f64],
    preds: &[u64],
    threshold: Option<f64>,
) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let Some(threshold) = threshold else {
        return order.iter().map(|&j| vec![j]).collect();
    };
    for &j in order {
        if let Some(last) = groups.last_mut() {
            let expensive = |k: usize| costs[k] >= threshold;
            if expensive(j)
                && last.iter().all(|&k| expensive(k))
                && last.iter().all(|&k| preds[j] & 1 << k == 0)
            {
                last.push(j);
                continue;
            }
        }
        groups.push(vec![j]);
    }
    groups
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub(super) fn read<T>(m: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouping_keeps_constrained_and_cheap_steps_apart() {
        let costs = [1.0, 5.0, 6.0, 7.0, 0.1];
        let preds = [0, 0, 0, 1 << 2, 0];
        let g = group_expensive(&[0, 1, 2, 3, 4], &costs, &preds, Some(2.0));
        assert_eq!(g, vec![vec![0], vec![1, 2], vec![3], vec![4]]);
        let g = group_expensive(&[0, 1], &costs, &preds, None);
        assert_eq!(g, vec![vec![0], vec![1]]);
    }

    #[test]
    fn written_order_is_repaired_minimally() {
        // Step 0 must run after step 2.
        assert_eq!(topological_written(&[1 << 2, 0, 0]), vec![1, 2, 0]);
        assert_eq!(topological_written(&[0, 1, 2]), vec![0, 1, 2]);
    }
}
