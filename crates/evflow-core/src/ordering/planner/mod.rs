//! [`OrderingPlanner`]: the `fixed`, `adaptive` and `hepframe` policies
//! behind the engine's [`Planner`] interface.
//!
//! Hot paths (called per event or per module execution) touch only atomics
//! and thread-local data: `plan` hashes the event index and clones an `Arc`
//! from the thread's copy of the plans in force; `observe` adds one count
//! per event to the thread's stripe (a decision vector to a small window for
//! the sampled events); `wants_cost` selects every execution of a module
//! until it has 64, then one in eight, which `observe_cost` records.
//! Everything else happens at checkpoints, under a per-path mutex that
//! observers only `try_lock`.
//!
//! `adaptive` estimates the joint pass distribution by *post-stratifying*
//! the sampled decision vectors on the events' first rejecting step in
//! each order run, whose distribution every event measures, and raking
//! the estimate to those stop counts (see `docs/filter-ordering.md`).

//!
//! The files of this module, each one concept:
//! * `stats`: the counters of the hot paths, the sampled decision vectors,
//!   the pass model and the sampling rates (statistics and sampling);
//! * `state`: the plans in force of each path and its checkpoint state;
//! * `needs`: the producers only one step needs, those several do, and
//!   those also needed outside the path;
//! * `measure`: what measuring each step after a rejection costs;
//! * `outside`: how often producers also needed outside a path ran for
//!   something outside it (exact counts);
//! * `probe`: the first decision, from a probe before a batch's path;
//! * `estimate`: the joint pass distribution, from the samples completed
//!   where undecided and post-stratified on the stop counts;
//! * `adaptive`: the checkpoint and the decision algorithms (the exact DP
//!   over feasible prefix sets, the rank rule, A-Greedy, via `model`);
//! * `drift`: the drift test and re-learning;
//! * `verify`: a change of order checked against the new order's own stop
//!   counts, and undone when they refute it;
//! * `hepframe`: the HEP-Frame baseline policy;
//! * `report`: the planner's account for the job report.

mod adaptive;
mod drift;
mod estimate;
mod exchange;
mod hepframe;
mod measure;
mod needs;
mod outside;
mod probe;
mod report;
mod robust;
mod state;
mod stats;
impl std::fmt::Debug for OrderingPlanner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OrderingPlanner")
            .field("paths", &self.paths.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
mod verify;

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use self::needs::*;
use self::state::*;
use self::stats::*;
use super::costs::{self, Ring};
use super::model::Ideals;
use super::policy::{OrderingOptions, Policy, Tuning};
use crate::graph::{Graph, ModuleIdx, PathIdx};
use crate::hash::mix;
use crate::schedule::{OrderChange, PathOutcome, PathPlan, Planner};

/// The planner of every path of a job; see the module documentation of
/// [`ordering`](super).
pub struct OrderingPlanner {
    paths: Vec<Slot>,
    /// The name of each path of the job (index: `PathIdx`).
    path_names: Vec<String>,
    /// Per timed module: its most recent recorded running times, from which
    /// decisions take robust estimates (see [`costs`](super::costs)).
    pub(super) rings: Vec<Option<Ring>>,
    /// Per timed module: its most recent timings on batches, per event seen
    /// with their events (`costs::pack_batch`), which are comparable only
    /// per event.
    batch_rings: Vec<Option<Ring>>,
    /// Per module (read-mostly): whether its running time is wanted
    /// (`COST_NONE`, `COST_EVERY` execution, or one in `COST_STRIDE`).
    cost_mode: Vec<AtomicU8>,
    /// Per module: the ring's count of measurements up to which every
    /// execution is timed (`COST_EARLY_CALLS` at first; that many more after
    /// a genuine change of its running time).
    every_until: Vec<AtomicU64>,
    labels: Vec<String>,
    /// Executions of the producers also needed outside a path.
    runs: outside::Runs,
    /// Measured time spent in the planner itself (ns): the hot paths
    /// extrapolated from one call in 256 with the clock's own cost
    /// subtracted, and the checkpoints (decisions in thread CPU time).
    hot_ns: AtomicI64,
    decide_ns: AtomicI64,
    history: Mutex<Vec<OrderChange>>,
    tuning: Tuning,
}

impl OrderingPlanner {
    pub fn new(graph: &Graph, options: &OrderingOptions) -> Self {
        let n_modules = graph.modules.len();
        let owners = private_owners(graph);
        let mut wants = vec![false; n_modules];
        let tuning = &options.tuning;
        let dynamic: Vec<bool> = graph
            .paths
            .iter()
            .map(|p| options.policy_of(p) != Policy::Fixed && (2..=64).contains(&p.steps.len()))
            .collect();
        // Only `adaptive` charges the producers its steps share.
        let adaptive: Vec<PathIdx> = (0..graph.paths.len())
            .filter(|&p| dynamic[p] && options.policy_of(&graph.paths[p]) == Policy::Adaptive)
            .collect();
        let steps: Vec<&[ModuleIdx]> = adaptive
            .iter()
            .map(|&p| &graph.paths[p].steps[..])
            .collect();
        let mut shared_of = shared_producers(graph, &steps).into_iter();
        let mut outside_of = outside_producers(graph, &adaptive).into_iter();
        let paths = graph
            .paths
            .iter()
            .enumerate()
            .map(|(p, path)| {
                let n = path.steps.len();
                let policy = options.policy_of(path);
                let mut preds = vec![0u64; n];
                if n <= 64 {
                    for &(a, b) in &path.precedence {
                        preds[b] |= 1 << a;
                    }
                }
                let initial = topological_written(&preds);
                if !dynamic[p] {
                    let plan = if path.reorderable && n <= 64 {
                        PathPlan::sequence(initial.iter().map(|&i| path.steps[i]))
                    } else {
                        PathPlan::sequence(path.steps.iter().copied())
                    };
                    return Slot::Static(Arc::new(plan));
                }
                let mut pos_of = vec![u8::MAX; n_modules];
                for (i, &m) in path.steps.iter().enumerate() {
                    pos_of[m] = i as u8;
                }
                let attributed: Vec<Vec<ModuleIdx>> = path
                    .steps
                    .iter()
                    .map(|&s| {
                        let mut list = vec![s];
                        list.extend((0..n_modules).filter(|&m| owners[m] == Some(s) && m != s));
                        list
                    })
                    .collect();
                let (
                    shared,
                    Outside {
                        counted: outside,
                        always,
                    },
                ) = match policy {
                    Policy::Adaptive => (
                        shared_of.next().unwrap_or_default(),
                        outside_of.next().unwrap_or_default(),
                    ),
                    _ => (Vec::new(), Outside::default()),
                };
                for list in &attributed {
                    for &m in list {
                        wants[m] = true;
                    }
                }
                for &(m, _) in shared.iter().chain(&outside) {
                    wants[m] = true;
                }
                let groups: Vec<Vec<usize>> = initial.iter().map(|&i| vec![i]).collect();
                // Before any cost is known: `hepframe` samples every event
                // fully during its warm-up; `adaptive` treats every step as
                // possibly expensive (measured after a rejection in one
                // event in 16) until the first checkpoint measured it.
                let first_rates = match policy {
                    Policy::HepFrame => vec![1.0; n],
                    _ => vec![tuning.max_sample_rate; n],
                };
                let current = make_current(&path.steps, groups, &first_rates, Targets::NONE);
                let ideals = (policy == Policy::Adaptive)
                    .then(|| Ideals::new(&preds, tuning.max_dp_states))
                    .flatten();
                Slot::Dynamic(Box::new(Dyn {
                    name: path.name.clone(),
                    policy,
                    steps: path.steps.clone(),
                    preds: RwLock::new(Arc::new(preds)),
                    pos_of,
                    seed: mix(tuning.seed ^ mix(p as u64 + 1)),
                    ideals: RwLock::new(ideals.map(Arc::new)),
                    order_now: current.order.iter().map(|&i| AtomicU8::new(i)).collect(),
                    sampled_below: AtomicU64::new(current.sampled_below),
                    current: RwLock::new(Arc::new(current)),
                    id: NEXT_PATH_ID.fetch_add(1, Relaxed),
                    generation: AtomicU64::new(0),
                    observed: AtomicU64::new(0),
                    seen: Striped::new(1),
                    next_check: AtomicU64::new(first_decision(policy, tuning, None)),
                    stops: Striped::new(n + 1),
                    batch_seen: (0..n).map(|_| AtomicU64::new(0)).collect(),
                    batch_runs: (0..n).map(|_| AtomicU64::new(0)).collect(),
                    batch_obs: AtomicU64::new(0),
                    batch_events: AtomicU64::new(0),
                    reached: (0..n).map(|_| AtomicU64::new(0)).collect(),
                    passed: (0..n).map(|_| AtomicU64::new(0)).collect(),
                    imported: AtomicBool::new(false),
                    added: Mutex::new(Vec::new()),
                    samples: Mutex::new(Samples {
                        ring: Vec::new(),
                        next: 0,
                        capacity: tuning.window.max(1),
                        total: 0,
                        extra_log: Vec::new(),
                    }),
                    state: Mutex::new(State::new(
                        n,
                        policy,
                        tuning,
                        first_rates,
                        &shared,
                        &outside,
                    )),
                    attributed,
                    shared,
                    outside_needed: Striped::new(outside.len() + 1),
                    outside,
                    always_outside: always,
                }))
            })
            .collect::<Vec<Slot>>();
        let runs = outside::Runs::new(
            graph,
            paths.iter().flat_map(|s| match s {
                Slot::Dynamic(d) => d.outside.iter().map(|&(m, _)| m).collect(),
                Slot::Static(_) => Vec::new(),
            }),
        );
        Self {
            runs,
            paths,
            path_names: graph.paths.iter().map(|p| p.name.clone()).collect(),
            rings: wants.iter().map(|&w| w.then(Ring::new)).collect(),
            batch_rings: wants.iter().map(|&w| w.then(Ring::new)).collect(),
            every_until: wants
                .iter()
                .map(|_| AtomicU64::new(COST_EARLY_CALLS))
                .collect(),
            cost_mode: wants
                .iter()
                .map(|&w| AtomicU8::new(if w { COST_EVERY } else { COST_NONE }))
                .collect(),
            labels: graph.modules.iter().map(|m| m.label.clone()).collect(),
            hot_ns: AtomicI64::new(0),
            decide_ns: AtomicI64::new(0),
            history: Mutex::new(Vec::new()),
            tuning: options.tuning.clone(),
        }
    }

    /// Seconds spent in the planner: (statistics on the hot paths,
    /// estimated from one call in 256 with the clock's cost subtracted;
    /// decisions at checkpoints).
    pub fn overhead_s(&self) -> (f64, f64) {
        (
            self.hot_ns.load(Relaxed).max(0) as f64 * 1e-9,
            self.decide_ns.load(Relaxed).max(0) as f64 * 1e-9,
        )
    }

    /// Whether the event `event_index` is sampled on `path` (its plan
    /// measures the steps after a rejection): a module that processes
    /// batches then reports per-event decisions of a subsample of the
    /// batch's events ([`observe_event_samples`](Self::observe_event_samples)).
    pub fn is_sampled(&self, path: PathIdx, event_index: u64) -> bool {
        match &self.paths[path] {
            Slot::Static(_) => false,
            Slot::Dynamic(d) => {
                d.policy == Policy::Adaptive
                    && mix(event_index ^ d.seed) < d.sampled_below.load(Relaxed)
            }
        }
    }

    /// Whether a batch (event `event_index` of a columnar analysis) should
    /// report per-event decisions of a subsample on `path`
    /// ([`observe_event_samples`](Self::observe_event_samples)): when it is
    /// sampled, and every batch until the first samples of the path came
    /// in (their cost is bounded by the subsample; the first decision
    /// comes from the first batch that finishes, not the first one that
    /// happens to be sampled).
    pub fn wants_event_samples(&self, path: PathIdx, event_index: u64) -> bool {
        match &self.paths[path] {
            Slot::Dynamic(d) if d.policy == Policy::Adaptive => {
                (lock(&d.samples).total == 0 && !d.imported.load(Relaxed))
                    || self.is_sampled(path, event_index)
            }
            _ => false,
        }
    }

    /// Per-event decision vectors of `path`'s steps on events of a batch
    /// (the events entering the path, a subsample of them): `(known,
    /// passed)` bit masks by step position in the written order (bit `j`:
    /// `path.steps[j]`). They join the samples from which the joint pass
    /// distribution is estimated (post-stratified on the exact stop
    /// counts), so that correlations between cuts are seen event by event.
    pub fn observe_event_samples(&self, path: PathIdx, samples: &[(u64, u64)]) {
        let Slot::Dynamic(d) = &self.paths[path] else {
            return;
        };
        let full = if d.steps.len() == 64 {
            u64::MAX
        } else {
            (1u64 << d.steps.len()) - 1
        };
        let first = {
            let mut s = lock(&d.samples);
            let before = s.total;
            for &(known, pass) in samples {
                let known = known & full;
                if known != 0 {
                    s.push(Sample {
                        known,
                        pass: pass & known,
                    });
                }
            }
            before == 0 && s.total > 0
        };
        if first {
            self.decide_soon(d);
        }
    }

    /// Keeps a timing of `module` run on a batch (per event seen, with the
    /// events as its weight); returns its ring, or `None` when the module
    /// is not timed or the timing says nothing.
    pub(super) fn push_batch_timing(
        &self,
        module: ModuleIdx,
        seconds: f64,
        events: u64,
    ) -> Option<&Ring> {
        if events == 0 || !seconds.is_finite() || seconds < 0.0 {
            return None;
        }
        let ring = self.batch_rings[module].as_ref()?;
        ring.push(costs::pack_batch(seconds, events));
        Some(ring)
    }

    /// The order (module labels, in execution order) now in use on `path`.
    pub fn current_order(&self, path: PathIdx) -> Vec<String> {
        match &self.paths[path] {
            Slot::Static(plan) => plan.order().map(|m| self.labels[m].clone()).collect(),
            Slot::Dynamic(d) => {
                let cur = read(&d.current);
                cur.plan.order().map(|m| self.labels[m].clone()).collect()
            }
        }
    }

    /// Adds the time of one timed hot-path call, extrapolated to the calls
    /// not timed. The clock's own cost is measured right after, in the same
    /// conditions, by timing nothing, and subtracted (the difference is an
    /// unbiased estimate of the call's cost even below the clock's
    /// resolution); the two timings themselves count once, as they are
    /// spent on this call only.
    fn add_hot(&self, t0: Instant) {
        let call = (t0.elapsed().as_nanos() as i64).min(HOT_CALL_CAP_NS);
        let t1 = Instant::now();
        let clock = (t1.elapsed().as_nanos() as i64).min(HOT_CALL_CAP_NS);
        self.hot_ns.fetch_add(
            (call - clock) * (TIMING_MASK as i64 + 1) + 2 * clock,
            Relaxed,
        );
    }
}

impl Planner for OrderingPlanner {
    fn plan(&self, path: PathIdx, event_index: u64) -> Arc<PathPlan> {
        match &self.paths[path] {
            Slot::Static(plan) => plan.clone(),
            Slot::Dynamic(d) => {
                let timed = (event_index & TIMING_MASK == 0).then(Instant::now);
                let u = mix(event_index ^ d.seed);
                let plan = d.cached_plan(u);
                if let Some(t0) = timed {
                    self.add_hot(t0);
                }
                plan
            }
        }
    }

    fn observe(&self, path: PathIdx, event_index: u64, outcome: &PathOutcome) {
        let Slot::Dynamic(d) = &self.paths[path] else {
            return;
        };
        let timed = (event_index & TIMING_MASK == 0).then(Instant::now);
        let n = d.steps.len();
        // The planner's clock: events are observed in about the order of
        // their index.
        let n_obs = event_index + 1;
        d.seen.raise(0, n_obs);
        let batch = outcome.counts.iter().any(Option::is_some);
        if batch {
            if record_batch(d, outcome) {
                self.batches_began(d, n_obs);
            }
        } else if d.policy == Policy::HepFrame {
            for &(m, pass) in &outcome.steps {
                let i = d.pos_of[m] as usize;
                d.reached[i].fetch_add(1, Relaxed);
                if pass {
                    d.passed[i].fetch_add(1, Relaxed);
                }
            }
        }
        // The step that rejected the event, in the order in force (steps
        // run in that order up to the first rejection).
        let mut stop = n;
        let mut consistent = true;
        for (k, &(m, pass)) in outcome.steps.iter().enumerate() {
            if d.order_now.get(k).map(|o| o.load(Relaxed)) != Some(d.pos_of[m]) {
                consistent = false;
                break;
            }
            if !pass {
                stop = k;
                break;
            }
        }
        if !batch && consistent && (stop < n || outcome.steps.len() == n) {
            d.stops.add(stop, 1);
        }
        if !batch && !d.outside.is_empty() {
            outside::count_needs(d, outcome);
        }
        if outcome.sampled && !batch {
            let (mut known, mut pass, mut extra) = (0u64, 0u64, 0u64);
            let mut rejected = false;
            for &(m, p) in &outcome.steps {
                let bit = 1u64 << d.pos_of[m];
                known |= bit;
                if p {
                    pass |= bit;
                }
                if rejected {
                    extra |= bit;
                }
                rejected |= !p;
            }
            // An event sampled only for a targeted rate tells nothing beyond
            // the stop counts unless a step ran after its rejection.
            if extra != 0 || mix(event_index ^ d.seed) < d.sampled_below.load(Relaxed) {
                let mut s = lock(&d.samples);
                s.push(Sample { known, pass });
                if extra != 0 && s.extra_log.len() < EXTRA_LOG_CAP {
                    s.extra_log.push((event_index, extra));
                }
            }
        }
        if let Some(t0) = timed {
            d.observed.fetch_max(n_obs, Relaxed);
            self.add_hot(t0);
        }
        if n_obs >= d.next_check.load(Relaxed) {
            d.observed.fetch_max(n_obs, Relaxed);
            self.checkpoint(d, n_obs);
        }
    }

    /// Records an execution `wants_cost` selected: with weight 1 while
    /// every execution of the module is recorded, else `COST_STRIDE`.
    fn observe_cost(&self, module: ModuleIdx, seconds: f64) {
        let timed = (thread_random() >> 32 & TIMING_MASK == 0).then(Instant::now);
        let weight = match self.cost_mode[module].load(Relaxed) {
            COST_NONE => 0,
            COST_EVERY => 1,
            _ => COST_STRIDE,
        };
        if weight > 0
            && let Some(ring) = &self.rings[module]
        {
            // Every recorded execution stands for as many: the ring holds a
            // uniform sample of the executions, early or strided.
            ring.push((seconds * 1e9) as u64);
            if weight == 1 && ring.pushed() >= self.every_until[module].load(Relaxed) {
                self.cost_mode[module].store(COST_STRIDED, Relaxed);
            }
        }
        if let Some(t0) = timed {
            self.add_hot(t0);
        }
    }

    /// A timing of a step run on a batch: kept per event seen, with the
    /// events as its weight (timings of batches of different sizes are
    /// comparable only per event).
    fn observe_batch_cost(&self, module: ModuleIdx, seconds: f64, events: u64) {
        if let Some(ring) = self.push_batch_timing(module, seconds, events)
            && self.cost_mode[module].load(Relaxed) == COST_EVERY
            && ring.pushed() >= self.every_until[module].load(Relaxed)
        {
            self.cost_mode[module].store(COST_STRIDED, Relaxed);
        }
    }

    /// Every execution of a step (or of a producer only it needs) for its
    /// first `COST_EARLY_CALLS` executions, then one in `COST_STRIDE`, at
    /// random.
    fn wants_cost(&self, module: ModuleIdx) -> bool {
        self.runs.called(module);
        let mode = self.cost_mode[module].load(Relaxed);
        if mode == COST_NONE {
            return false;
        }
        let r = thread_random();
        let timed = (r >> 32 & TIMING_MASK == 0).then(Instant::now);
        let wanted = mode == COST_EVERY || r & COST_STRIDE_MASK == 0;
        if let Some(t0) = timed {
            self.add_hot(t0);
        }
        wanted
    }

    fn history(&self) -> Vec<OrderChange> {
        let mut out = lock(&self.history).clone();
        for slot in &self.paths {
            if let Slot::Dynamic(d) = slot {
                out.push(self.final_entry(d));
            }
        }
        out
    }
}

/// A batch of events (a columnar analysis) whose steps narrowed it in the
/// order in force: the events each step saw and rejected are stop counts of
/// that order, and HEP-Frame's reached and passed counts. A batch adds no
/// batch-level pass vector to the samples (a step "passes" a batch when
/// some event survives it, which says nothing of correlations between
/// events' decisions): per-event vectors of a subsample of its events come
/// through [`OrderingPlanner::observe_event_samples`]. Returns whether it
/// is the first batch observed on the path.
fn record_batch(d: &Dyn, outcome: &PathOutcome) -> bool {
    let n = d.steps.len();
    if !outcome.steps.is_empty() {
        d.batch_events.fetch_add(outcome.step_counts(0).0, Relaxed);
    }
    let first = d.batch_obs.fetch_add(1, Relaxed) == 0;
    let consistent = outcome
        .steps
        .iter()
        .enumerate()
        .all(|(k, &(m, _))| d.order_now.get(k).map(|o| o.load(Relaxed)) == Some(d.pos_of[m]));
    for (k, &(m, _)) in outcome.steps.iter().enumerate() {
        let (seen, passed) = outcome.step_counts(k);
        let i = d.pos_of[m] as usize;
        d.batch_seen[i].fetch_add(seen, Relaxed);
        d.batch_runs[i].fetch_add(1, Relaxed);
        if d.policy == Policy::HepFrame {
            d.reached[i].fetch_add(seen, Relaxed);
            d.passed[i].fetch_add(passed, Relaxed);
        }
        if consistent {
            d.stops.add(k, seen - passed);
        }
    }
    if consistent && n > 0 && outcome.steps.len() == n {
        d.stops.add(n, outcome.step_counts(n - 1).1);
    }
    first
}
