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
//! the sampled decision vectors on the events' first rejecting step in the
//! current order, whose distribution every event measures (see
//! `docs/filter-ordering.md`).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::sync::atomic::{
    AtomicI64, AtomicU8, AtomicU64, AtomicUsize,
    Ordering::{Acquire, Relaxed, Release},
};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use super::model::{self, Ideals, Joint};
use super::{OrderingOptions, Policy, Tuning};
use crate::graph::{Graph, ModuleIdx, PathIdx};
use crate::schedule::{OrderChange, PathOutcome, PathPlan, Planner};
use crate::synthetic::mix;

/// After its first [`COST_EARLY_CALLS`] executions, one execution of a
/// module in `COST_STRIDE` is recorded (with weight `COST_STRIDE`): chosen
/// by `wants_cost`, so that the engine does not even time the others.
const COST_STRIDE_MASK: u64 = 7;
const COST_STRIDE: u64 = COST_STRIDE_MASK + 1;
const COST_EARLY_CALLS: u64 = 64;
/// `OrderingPlanner::cost_mode` values.
const COST_NONE: u8 = 0;
const COST_EVERY: u8 = 1;
const COST_STRIDED: u8 = 2;
/// One call in 256 of the hot paths is timed, to report the planner's own
/// overhead (the calibrated cost of reading the clock subtracted).
const TIMING_MASK: u64 = 255;
/// A timed hot-path call longer than this was descheduled or waited for a
/// lock (parked, using no CPU): it counts as this long. The longest
/// legitimate call, refreshing a thread's copy of the plans, takes about
/// 1 µs.
const HOT_CALL_CAP_NS: i64 = 2_000;
/// A drift check (with the checkpoint's bookkeeping) that took longer than
/// this was descheduled: it counts as this long.
const CHECK_CAP_NS: i64 = 50_000;
/// Drift: the recent window, in blocks, compared with what came before.
const DRIFT_RECENT_BLOCKS: usize = 8;
/// A difference of pass rate is a drift when larger than this and
/// significant at `DRIFT_Z` standard deviations (likelihood-ratio test,
/// better calibrated than a normal approximation for rare rejections).
const DRIFT_MIN_DIFF: f64 = 0.05;
const DRIFT_Z: f64 = 5.0;
/// Fewest events reaching a step, on each side, for a drift test.
const DRIFT_MIN_EVENTS: u64 = 30;
/// Undecided steps of a sampled vector are imputed by expanding every
/// combination up to this many of them (by the likelier decision beyond).
const MAX_IMPUTED_BITS: u32 = 4;
/// A new order must be expected to save `NOISE_GAIN / √samples` (or
/// `min_gain` when larger).
const NOISE_GAIN: f64 = 0.2;
/// Fewest sampled vectors before the order may change.
const MIN_SAMPLES_TO_REORDER: usize = 8;
/// Sampled events logged for the report's account of the sampling work.
const EXTRA_LOG_CAP: usize = 1 << 20;

/// The planner of every path of a job; see the module documentation of
/// [`ordering`](super).
pub struct OrderingPlanner {
    paths: Vec<Slot>,
    /// Per module, per stripe: recorded running time (ns, at `2m`) and
    /// executions (at `2m + 1`, the same cache line).
    cost: Striped,
    /// Per module (read-mostly): whether its running time is wanted
    /// (`COST_NONE`, `COST_EVERY` execution, or one in `COST_STRIDE`); the
    /// cap on recorded times (ns; 0: none yet), three times the current
    /// estimate, so that a thread descheduled during a step does not
    /// distort its cost.
    cost_mode: Vec<AtomicU8>,
    cost_cap_ns: Vec<AtomicU64>,
    labels: Vec<String>,
    /// Measured time spent in the planner itself (ns): the hot paths
    /// extrapolated from one call in 256 with the clock's own cost
    /// subtracted, and the checkpoints (decisions in thread CPU time).
    hot_ns: AtomicI64,
    decide_ns: AtomicI64,
    history: Mutex<Vec<OrderChange>>,
    tuning: Tuning,
}

/// Counters updated on the hot paths, one copy per stripe: each thread adds
/// to the copy of its stripe (cache lines apart from the other stripes), a
/// checkpoint sums them.
struct Striped {
    width: usize,
    cells: Box<[AtomicU64]>,
}

/// Stripes of [`Striped`] counters (threads beyond share them).
const STRIPES: usize = 8;

static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static STRIPE: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// The stripe of the calling thread.
fn stripe() -> usize {
    STRIPE.with(|s| {
        let v = s.get();
        if v != usize::MAX {
            return v;
        }
        let v = NEXT_STRIPE.fetch_add(1, Relaxed) % STRIPES;
        s.set(v);
        v
    })
}

impl Striped {
    fn new(len: usize) -> Self {
        // Whole cache lines per stripe, and one more between stripes (the
        // allocation need not start on a line).
        let width = len.div_ceil(8) * 8 + 8;
        Self {
            width,
            cells: (0..width * STRIPES).map(|_| AtomicU64::new(0)).collect(),
        }
    }
    fn add(&self, i: usize, v: u64) {
        self.cells[stripe() * self.width + i].fetch_add(v, Relaxed);
    }
    fn get(&self, i: usize) -> u64 {
        (0..STRIPES)
            .map(|s| self.cells[s * self.width + i].load(Relaxed))
            .sum()
    }
    fn snapshot(&self, len: usize) -> Vec<u64> {
        (0..len).map(|i| self.get(i)).collect()
    }
    fn reset(&self) {
        for c in self.cells.iter() {
            c.store(0, Relaxed);
        }
    }
}

enum Slot {
    Static(Arc<PathPlan>),
    Dynamic(Box<Dyn>),
}

/// The plans in force for a dynamic path.
struct Current {
    /// Groups of step positions.
    groups: Vec<Vec<usize>>,
    /// Flattened order of positions, as `u8`.
    order: Vec<u8>,
    plan: Arc<PathPlan>,
    /// Sampled plans by ascending threshold: an event whose hash `u` is
    /// below the last threshold is sampled, with the plan of the first
    /// threshold above `u`. Each plan measures, after a rejection, the
    /// steps whose own threshold is at least its own (nested samples).
    sampled: Vec<(u64, Arc<PathPlan>)>,
}

struct Dyn {
    name: String,
    policy: Policy,
    steps: Vec<ModuleIdx>,
    preds: Vec<u64>,
    /// Position of each module of the graph on this path (`u8::MAX`: none).
    pos_of: Vec<u8>,
    /// Per position: the modules whose running time counts as the step's
    /// (the step and the producers only it needs).
    attributed: Vec<Vec<ModuleIdx>>,
    seed: u64,
    /// The feasible prefix sets, for the exact search (`None`: too many,
    /// A-Greedy).
    ideals: Option<Ideals>,
    current: RwLock<Arc<Current>>,
    /// Process-unique identity (key of the threads' plan caches) and the
    /// number of times `current` was replaced.
    id: u64,
    generation: AtomicU64,
    /// The order in force (positions), readable without the lock.
    order_now: Vec<AtomicU8>,
    /// The highest event index seen plus one (updated on one event in 256
    /// and at checkpoints: the count of events observed, about).
    observed: AtomicU64,
    next_check: AtomicU64,
    /// Events since the order was installed, by the position (in that
    /// order) of the step that rejected them; index `n`: accepted.
    stops: Striped,
    /// `hepframe`: per position, events that ran the step and that passed.
    reached: Vec<AtomicU64>,
    passed: Vec<AtomicU64>,
    samples: Mutex<Samples>,
    state: Mutex<State>,
}

static NEXT_PATH_ID: AtomicU64 = AtomicU64::new(0);

/// A thread's copy of the plans of one dynamic path, so that `plan` clones
/// an `Arc` no other thread touches (and takes no lock).
struct CachedPlans {
    id: u64,
    generation: u64,
    plan: Arc<PathPlan>,
    sampled: Vec<(u64, Arc<PathPlan>)>,
}

/// Paths whose plans a thread keeps (the least recently refreshed goes).
const PLAN_CACHE_PATHS: usize = 16;

thread_local! {
    static PLAN_CACHE: RefCell<Vec<CachedPlans>> = const { RefCell::new(Vec::new()) };
}

impl Dyn {
    fn set_current(&self, current: Arc<Current>) {
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = current;
        self.generation.fetch_add(1, Release);
    }

    /// The plan for an event whose hash is `u`, from the thread's copy of
    /// the plans in force.
    fn cached_plan(&self, u: u64) -> Arc<PathPlan> {
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

/// A sampled event: the steps whose decision is known (all that ran for
/// the path) and those that passed.
#[derive(Clone, Copy, Debug)]
struct Sample {
    known: u64,
    pass: u64,
}

/// A sliding window of the sampled events.
struct Samples {
    ring: Vec<Sample>,
    next: usize,
    capacity: usize,
    total: u64,
    /// (event index, steps run after the rejection) of sampled events.
    extra_log: Vec<(u64, u64)>,
}

impl Samples {
    fn push(&mut self, s: Sample) {
        if self.ring.len() < self.capacity {
            self.ring.push(s);
        } else {
            self.ring[self.next] = s;
        }
        self.next = (self.next + 1) % self.capacity;
        self.total += 1;
    }
    fn clear(&mut self) {
        self.ring.clear();
        self.next = 0;
    }
}

/// Checkpoint state of a dynamic path.
struct State {
    interval: u64,
    next_decision: u64,
    decisions: u64,
    /// In warm-up (or re-learning after a drift): every event is sampled.
    learning: bool,
    /// Events observed when the learning phase began.
    phase_start: u64,
    /// Per position and attributed module: decayed (ns, executions) and the
    /// cumulative totals seen last time.
    cost_acc: Vec<Vec<CostAcc>>,
    costs: Vec<f64>,
    /// Per position: whether the step's cost was measured yet.
    cost_known: Vec<bool>,
    /// Per position: the sampling rate after a rejection in force, whether
    /// the step counts as expensive to sample, and what sampling it costs
    /// per sampled event.
    rates: Vec<f64>,
    heavy: Vec<bool>,
    probe: Vec<f64>,
    /// `hepframe`: decayed pass rate estimates per position.
    hep_reached: Vec<f64>,
    hep_passed: Vec<f64>,
    expected_s: f64,
    drift_note: Option<String>,
    drift: DriftState,
    /// Decisions in a row that kept the order (after learning).
    stable: u32,
    /// Stop counts of the orders in force before the current one (most
    /// recent last; merged by order), since the last drift.
    archive: Vec<Epoch>,
}

/// The stop counts of the events observed under one order.
#[derive(Clone, Debug)]
struct Epoch {
    order: Vec<u8>,
    stops: Vec<u64>,
}

/// Orders whose stop counts are kept for the estimate.
const MAX_EPOCHS: usize = 8;

/// The stop counts at the last drift check and the recent blocks.
#[derive(Default)]
struct DriftState {
    seen: Vec<u64>,
    recent: VecDeque<Vec<u64>>,
}

#[derive(Clone, Copy, Default)]
struct CostAcc {
    ns: f64,
    calls: f64,
    seen_ns: u64,
    seen_calls: u64,
}

thread_local! {
    static RNG: Cell<u64> = const { Cell::new(0x2545_f491_4f6c_dd1d) };
}

fn thread_random() -> u64 {
    RNG.with(|r| {
        let mut x = r.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        r.set(x);
        x
    })
}

/// CPU time of the calling thread (ns), where the system tells it.
fn thread_cpu_ns() -> Option<u64> {
    if cfg!(target_os = "linux") {
        let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
        stat.split_whitespace().next()?.parse().ok()
    } else {
        None
    }
}

fn rate_threshold(rate: f64) -> u64 {
    if rate >= 1.0 {
        u64::MAX
    } else if rate <= 0.0 {
        0
    } else {
        (rate * u64::MAX as f64) as u64
    }
}

fn micros(s: f64) -> String {
    if s >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else {
        format!("{:.2} µs", s * 1e6)
    }
}

fn percent(rate: f64) -> String {
    if rate >= 0.01 {
        format!("{:.1}%", 100.0 * rate)
    } else {
        format!("{:.3}%", 100.0 * rate)
    }
}

/// `P̂(pass all of A)` for the checkpoint's estimate: the table over the
/// feasible prefix sets when the exact search applies, else the joint;
/// mixed with weight `prior` with independent decisions at the pass rates
/// `q` (a prior worth `PRIOR_SAMPLES` samples: with few samples, a step
/// never seen rejecting an event that passed the others is not taken as
/// useless there).
struct PassModel<'a> {
    joint: Joint,
    ideals: Option<&'a Ideals>,
    table: Vec<f64>,
    q: Vec<f64>,
    prior: f64,
}

/// The independence prior counts as this many samples.
const PRIOR_SAMPLES: f64 = 4.0;

impl<'a> PassModel<'a> {
    fn new(joint: Joint, ideals: Option<&'a Ideals>, q: Vec<f64>, prior: f64) -> Self {
        let table = match ideals {
            Some(ideals) => {
                let mut table = ideals.pass_table(&joint);
                if prior > 0.0 {
                    for (t, indep) in table.iter_mut().zip(ideals.independent_table(&q)) {
                        *t = (1.0 - prior) * *t + prior * indep;
                    }
                }
                table
            }
            None => Vec::new(),
        };
        Self {
            joint,
            ideals,
            table,
            q,
            prior,
        }
    }
    fn pass(&self, set: u64) -> f64 {
        match self.ideals.and_then(|i| i.index_of(set)) {
            Some(i) => self.table[i],
            None => {
                let indep: f64 = (0..self.q.len())
                    .filter(|&j| set >> j & 1 == 1)
                    .map(|j| self.q[j])
                    .product();
                (1.0 - self.prior) * self.joint.pass_all(set) + self.prior * indep
            }
        }
    }
    /// Expected cost per event of running `groups` one after the other.
    fn cost(&self, costs: &[f64], groups: &[Vec<usize>]) -> f64 {
        let mut passed = 0u64;
        let mut cost = 0.0;
        for group in groups {
            let reach = self.pass(passed);
            cost += reach * group.iter().map(|&j| costs[j]).sum::<f64>();
            for &j in group {
                passed |= 1 << j;
            }
        }
        cost
    }
}

impl OrderingPlanner {
    pub fn new(graph: &Graph, options: &OrderingOptions) -> Self {
        let n_modules = graph.modules.len();
        let owners = private_owners(graph);
        let mut wants = vec![false; n_modules];
        let tuning = &options.tuning;
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
                if policy == Policy::Fixed || !(2..=64).contains(&n) {
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
                for list in &attributed {
                    for &m in list {
                        wants[m] = true;
                    }
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
                let current = make_current(&path.steps, groups, &first_rates);
                let ideals = (policy == Policy::Adaptive)
                    .then(|| Ideals::new(&preds, tuning.max_dp_states))
                    .flatten();
                Slot::Dynamic(Box::new(Dyn {
                    name: path.name.clone(),
                    policy,
                    steps: path.steps.clone(),
                    preds,
                    pos_of,
                    seed: mix(tuning.seed ^ mix(p as u64 + 1)),
                    ideals,
                    order_now: current.order.iter().map(|&i| AtomicU8::new(i)).collect(),
                    current: RwLock::new(Arc::new(current)),
                    id: NEXT_PATH_ID.fetch_add(1, Relaxed),
                    generation: AtomicU64::new(0),
                    observed: AtomicU64::new(0),
                    next_check: AtomicU64::new(first_decision(policy, tuning)),
                    stops: Striped::new(n + 1),
                    reached: (0..n).map(|_| AtomicU64::new(0)).collect(),
                    passed: (0..n).map(|_| AtomicU64::new(0)).collect(),
                    samples: Mutex::new(Samples {
                        ring: Vec::new(),
                        next: 0,
                        capacity: tuning.window.max(1),
                        total: 0,
                        extra_log: Vec::new(),
                    }),
                    state: Mutex::new(State {
                        interval: tuning.min_interval.max(1),
                        next_decision: first_decision(policy, tuning),
                        decisions: 0,
                        learning: true,
                        phase_start: 0,
                        cost_acc: attributed
                            .iter()
                            .map(|l| vec![CostAcc::default(); l.len()])
                            .collect(),
                        costs: vec![0.0; n],
                        cost_known: vec![false; n],
                        rates: first_rates,
                        heavy: vec![true; n],
                        probe: vec![0.0; n],
                        hep_reached: vec![0.0; n],
                        hep_passed: vec![0.0; n],
                        expected_s: 0.0,
                        drift_note: None,
                        drift: DriftState::default(),
                        stable: 0,
                        archive: Vec::new(),
                    }),
                    attributed,
                }))
            })
            .collect();
        Self {
            paths,
            cost: Striped::new(2 * n_modules),
            cost_mode: wants
                .iter()
                .map(|&w| AtomicU8::new(if w { COST_EVERY } else { COST_NONE }))
                .collect(),
            cost_cap_ns: (0..n_modules).map(|_| AtomicU64::new(0)).collect(),
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

    fn checkpoint(&self, d: &Dyn, n_obs: u64) {
        let Ok(mut st) = d.state.try_lock() else {
            return;
        };
        if n_obs < d.next_check.load(Relaxed) {
            return;
        }
        let t0 = Instant::now();
        if d.policy == Policy::Adaptive && !st.learning {
            self.drift_check(d, &mut st, n_obs);
        }
        // A drift check takes a few µs: longer, it was descheduled.
        let check = (t0.elapsed().as_nanos() as i64).min(CHECK_CAP_NS);
        let mut spent = check;
        if n_obs >= st.next_decision {
            // A decision takes long enough (0.1 ms) to be descheduled by
            // other processes: it counts the thread's CPU time when the
            // system tells it.
            let cpu0 = thread_cpu_ns();
            let t1 = Instant::now();
            match d.policy {
                Policy::HepFrame => self.decide_hepframe(d, &mut st, n_obs),
                _ => self.decide_adaptive(d, &mut st, n_obs),
            }
            let wall = t1.elapsed().as_nanos() as i64;
            spent += match (cpu0, thread_cpu_ns()) {
                (Some(a), Some(b)) if b >= a => ((b - a) as i64).min(wall),
                _ => wall,
            };
        }
        let next = if st.learning {
            st.next_decision
        } else {
            st.next_decision.min(n_obs + self.tuning.drift_block.max(1))
        };
        d.next_check.store(next.max(n_obs + 1), Relaxed);
        self.decide_ns.fetch_add(spent, Relaxed);
    }

    /// Updates the per-step cost estimates from the cumulative counters.
    fn update_costs(&self, d: &Dyn, st: &mut State) {
        let n = d.steps.len();
        let mut known = Vec::new();
        for i in 0..n {
            let mut total = 0.0;
            let mut own_known = false;
            for (k, &m) in d.attributed[i].iter().enumerate() {
                let acc = &mut st.cost_acc[i][k];
                let ns = self.cost.get(2 * m);
                let calls = self.cost.get(2 * m + 1);
                let (dn, dc) = (ns - acc.seen_ns, calls - acc.seen_calls);
                acc.seen_ns = ns;
                acc.seen_calls = calls;
                // Halve the weight of older measurements only once there
                // are enough, so that rarely reached steps are not estimated
                // from a handful of executions.
                if acc.calls + dc as f64 > 64.0 {
                    acc.ns *= 0.5;
                    acc.calls *= 0.5;
                }
                acc.ns += dn as f64;
                acc.calls += dc as f64;
                if acc.calls > 0.0 {
                    let mean_ns = acc.ns / acc.calls;
                    self.cost_cap_ns[m].store((3.0 * mean_ns).max(1000.0) as u64, Relaxed);
                    total += mean_ns * 1e-9;
                    if k == 0 {
                        own_known = true;
                    }
                }
            }
            st.costs[i] = if own_known { total } else { f64::NAN };
            st.cost_known[i] = own_known;
            if own_known {
                known.push(total);
            }
        }
        // Steps never timed yet: the mean of the others.
        let fallback = if known.is_empty() {
            1e-6
        } else {
            known.iter().sum::<f64>() / known.len() as f64
        };
        for c in &mut st.costs {
            if !c.is_finite() {
                *c = fallback;
            }
            *c = c.max(1e-9);
        }
    }

    /// The estimate of the joint pass distribution: the sampled decision
    /// vectors, post-stratified on the step that rejected the event in each
    /// order of `epochs` (whose stop counts measure the distribution of
    /// that step on every event observed under the order), with undecided
    /// steps (not sampled after a rejection) imputed from the pass rate of
    /// the step on the events that reach it.
    ///
    /// With `T` the events of all epochs plus the samples, a sample weighs
    /// `1/T` (the samples alone) plus, per epoch, `N_k / (T n_k)` where `k`
    /// is its stratum in that epoch's order, `N_k` the events and `n_k` the
    /// samples in the stratum; a stratum without samples contributes
    /// `N_k / T` to a vector in which the steps before pass, the rejecting
    /// one fails and the later ones pass.
    fn estimate(&self, d: &Dyn, epochs: &[Epoch], samples: &[Sample]) -> (Joint, Vec<f64>) {
        let n = d.steps.len();
        let full = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
        let events: u64 = epochs
            .iter()
            .map(|e| e.stops.iter().sum::<u64>())
            .sum::<u64>()
            + samples.len() as u64;
        if events == 0 {
            return (Joint::default(), vec![1.0; n]);
        }
        let total = events as f64;
        let mut weights = vec![1.0 / total; samples.len()];
        let mut list: Vec<(u64, f64)> = Vec::with_capacity(samples.len() + n + 1);
        // Pass rates for imputation, per step: events reaching the step
        // and passing it, in every epoch, and samples in which it was
        // decided.
        let mut reach = vec![2.0f64; n];
        let mut pass = vec![1.0f64; n];
        for s in samples {
            for j in 0..n {
                if s.known >> j & 1 == 1 {
                    reach[j] += 1.0;
                    pass[j] += (s.pass >> j & 1) as f64;
                }
            }
        }
        let mut strata = vec![0usize; samples.len()];
        for e in epochs {
            let stratum = |s: &Sample| -> usize {
                e.order
                    .iter()
                    .position(|&j| (s.known & !s.pass) >> j & 1 == 1)
                    .unwrap_or(n)
            };
            let mut in_stratum = vec![0u64; n + 1];
            for (k, s) in strata.iter_mut().zip(samples) {
                *k = stratum(s);
                in_stratum[*k] += 1;
            }
            for (w, &k) in weights.iter_mut().zip(&strata) {
                *w += e.stops[k] as f64 / (total * in_stratum[k] as f64);
            }
            let mut reached = e.stops[n];
            for i in (0..n).rev() {
                reached += e.stops[i];
                let j = e.order[i] as usize;
                reach[j] += reached as f64;
                pass[j] += (reached - e.stops[i]) as f64;
                if in_stratum[i] == 0 && e.stops[i] > 0 {
                    list.push((full & !(1u64 << j), e.stops[i] as f64 / total));
                }
            }
            if in_stratum[n] == 0 && e.stops[n] > 0 {
                list.push((full, e.stops[n] as f64 / total));
            }
        }
        let q: Vec<f64> = pass.iter().zip(&reach).map(|(p, r)| p / r).collect();
        for (s, &w) in samples.iter().zip(&weights) {
            let unknown = full & !s.known;
            if unknown == 0 {
                list.push((s.pass, w));
            } else if unknown.count_ones() <= MAX_IMPUTED_BITS {
                // Every combination of the undecided steps, weighted by the
                // product of their pass rates.
                let mut sub = unknown;
                loop {
                    let mut p = w;
                    let mut rest = unknown;
                    while rest != 0 {
                        let j = rest.trailing_zeros() as usize;
                        rest &= rest - 1;
                        p *= if sub >> j & 1 == 1 { q[j] } else { 1.0 - q[j] };
                    }
                    list.push((s.pass | sub, p));
                    if sub == 0 {
                        break;
                    }
                    sub = (sub - 1) & unknown;
                }
            } else {
                let likely = (0..n)
                    .filter(|&j| unknown >> j & 1 == 1 && q[j] >= 0.5)
                    .fold(0u64, |m, j| m | 1 << j);
                list.push((s.pass | likely, w));
            }
        }
        (Joint::from_weighted(list), q)
    }

    fn decide_adaptive(&self, d: &Dyn, st: &mut State, n_obs: u64) {
        let t = &self.tuning;
        self.update_costs(d, st);
        st.decisions += 1;
        let cur = read(&d.current).clone();
        let stops = d.stops.snapshot(d.steps.len() + 1);
        let samples: Vec<Sample> = lock(&d.samples).ring.clone();
        let mut epochs = st.archive.clone();
        epochs.push(Epoch {
            order: cur.order.clone(),
            stops: stops.clone(),
        });
        let (joint, q) = self.estimate(d, &epochs, &samples);
        let learning_done = n_obs.saturating_sub(st.phase_start) >= t.warmup_events.max(1);
        let was_learning = st.learning;
        if joint.is_empty() {
            st.learning = was_learning && !learning_done;
            self.set_rates(d, st, &cur, None);
            self.schedule(st, n_obs, was_learning, learning_done, false);
            return;
        }
        let prior = PRIOR_SAMPLES / (PRIOR_SAMPLES + samples.len() as f64);
        let pm = PassModel::new(joint, d.ideals.as_ref(), q, prior);
        let cur_cost = pm.cost(&st.costs, &cur.groups);
        let mut changed = false;
        let mut in_force = cur.clone();
        let mut cost = cur_cost;
        if samples.len() >= MIN_SAMPLES_TO_REORDER {
            let (order, method) = match &d.ideals {
                Some(ideals) => {
                    let dp = ideals.best_order(&st.costs, &pm.table);
                    (
                        dp.order,
                        format!("exact DP over {} feasible prefix sets", dp.states),
                    )
                }
                None => (
                    model::greedy_order(&st.costs, &d.preds, &pm.joint),
                    "A-Greedy (too many prefix sets for the exact search)".to_string(),
                ),
            };
            let groups = group_expensive(&order, &st.costs, &d.preds, t.concurrent_above_s);
            let new_cost = pm.cost(&st.costs, &groups);
            // Orders compete on their sequential cost; the grouping (a latency
            // option that costs work) is applied to the winner.
            let cur_order: Vec<usize> = cur.order.iter().map(|&i| i as usize).collect();
            let seq =
                |o: &[usize]| pm.cost(&st.costs, &o.iter().map(|&j| vec![j]).collect::<Vec<_>>());
            let (cur_seq, new_seq) = (seq(&cur_order), seq(&order));
            // Hysteresis: at least `min_gain`, and more while few samples
            // make the estimate noisy (about 1/√samples relative error).
            let min_gain = t.min_gain.max(NOISE_GAIN / (samples.len() as f64).sqrt());
            if groups != cur.groups && (new_seq < cur_seq * (1.0 - min_gain) || order == cur_order)
            {
                let reason = format!(
                    "{}{method}, {} samples post-stratified on {} events: expected {} per event (previous order {})",
                    st.drift_note
                        .take()
                        .map(|n| format!("{n}; "))
                        .unwrap_or_default(),
                    samples.len(),
                    epochs
                        .iter()
                        .map(|e| e.stops.iter().sum::<u64>())
                        .sum::<u64>(),
                    micros(new_cost),
                    micros(cur_cost)
                );
                let current = make_current(&d.steps, groups, &st.rates);
                in_force = self.install(d, current, n_obs, reason);
                st.drift = DriftState::default();
                // Keep the counts of the order left (merged with an earlier
                // period under the same order).
                let left = epochs.pop().expect("the current epoch");
                match st.archive.iter().position(|e| e.order == left.order) {
                    Some(i) => {
                        let mut e = st.archive.remove(i);
                        for (a, b) in e.stops.iter_mut().zip(&left.stops) {
                            *a += b;
                        }
                        st.archive.push(e);
                    }
                    None => st.archive.push(left),
                }
                if st.archive.len() > MAX_EPOCHS {
                    st.archive.remove(0);
                }
                cost = new_cost;
                changed = true;
            }
        }
        st.expected_s = cost;
        st.learning = was_learning && !learning_done;
        self.set_rates(d, st, &in_force, Some(&pm));
        self.schedule(st, n_obs, was_learning, learning_done, changed);
    }

    /// The next decision: during learning at 1/32, 1/16, …, 1/2 and all of
    /// the warm-up; afterwards at an interval that doubles while the order
    /// stays, and returns to its minimum after a change.
    fn schedule(&self, st: &mut State, n_obs: u64, was_learning: bool, done: bool, changed: bool) {
        let t = &self.tuning;
        let warmup = t.warmup_events.max(1);
        if was_learning && !done {
            let since = n_obs.saturating_sub(st.phase_start);
            let mut step = first_step(t);
            while step <= since {
                step *= 2;
            }
            st.next_decision = st.phase_start + step.min(warmup);
            return;
        }
        st.learning = false;
        if changed || was_learning {
            st.stable = 0;
            st.interval = t.min_interval.max(1);
        } else {
            st.stable += 1;
            st.interval = (st.interval * 2).min(t.max_interval.max(1));
        }
        st.next_decision = n_obs + st.interval;
    }

    /// Sets the sampling rates and installs them with the plans in force.
    ///
    /// A step is *expensive* when measuring it after a rejection costs more
    /// than measuring all cheaper steps together (or when it was never
    /// measured). Sampled events measure every cheap step after a rejection:
    /// their rate spends the budget (`sample_budget`, less once the order is
    /// stable; half of it when there are expensive steps) of the expected
    /// cost, within `[min_sample_rate, max_sample_rate]`, and every event
    /// while learning. Each expensive step is measured after a rejection at
    /// its own rate, an equal share of the other half of the budget, at most
    /// the cheap steps' rate (nested: an event that measures an expensive
    /// step measures every cheaper one).
    fn set_rates(&self, d: &Dyn, st: &mut State, cur: &Current, pm: Option<&PassModel>) {
        let t = &self.tuning;
        let n = d.steps.len();
        let (lo, hi) = (t.min_sample_rate, t.max_sample_rate.max(t.min_sample_rate));
        // Probability that the event was rejected before each step.
        let mut after_reject = vec![0.5f64; n];
        let mut expected = st.expected_s;
        if let Some(pm) = pm {
            let mut passed = 0u64;
            for g in &cur.groups {
                let reach = pm.pass(passed).clamp(0.0, 1.0);
                for &j in g {
                    after_reject[j] = 1.0 - reach;
                }
                for &j in g {
                    passed |= 1 << j;
                }
            }
            expected = pm.cost(&st.costs, &cur.groups);
        }
        // What measuring each step after a rejection costs per sampled
        // event. From the costliest down, a step is expensive while that
        // exceeds the total of all the steps that cost less (measuring it
        // with them would at least halve their rate); a step never measured
        // is expensive too.
        let probe: Vec<f64> = (0..n).map(|j| st.costs[j] * after_reject[j]).collect();
        let mut by_cost: Vec<usize> = (0..n).filter(|&j| st.cost_known[j]).collect();
        by_cost.sort_by(|&a, &b| probe[b].total_cmp(&probe[a]));
        let mut heavy: Vec<bool> = (0..n).map(|j| !st.cost_known[j]).collect();
        let mut cheaper: f64 = by_cost.iter().map(|&j| probe[j]).sum();
        for &j in &by_cost {
            cheaper -= probe[j];
            if probe[j] <= cheaper || cheaper <= 0.0 {
                cheaper += probe[j];
                break;
            }
            heavy[j] = true;
        }
        let n_heavy = heavy.iter().filter(|&&h| h).count();
        let budget = t.sample_budget * stable_factor(st.stable);
        let cheap_budget = if n_heavy > 0 { budget / 2.0 } else { budget };
        let cheap_rate = if st.learning {
            1.0
        } else if cheaper > 0.0 {
            (cheap_budget * expected / cheaper).clamp(lo, hi)
        } else {
            hi
        };
        for j in 0..n {
            st.rates[j] = if !heavy[j] {
                cheap_rate
            } else if !st.cost_known[j] {
                hi
            } else {
                heavy_rate(t, st.learning, budget, expected, probe[j], n_heavy).min(cheap_rate)
            };
        }
        st.heavy = heavy;
        st.probe = probe;
        let current = make_current(&d.steps, cur.groups.clone(), &st.rates);
        d.set_current(Arc::new(current));
    }

    /// Compares the pass rate of each step on the events reaching it, in
    /// the current order, in the last block and in the recent blocks with
    /// what came before; on a significant difference, forgets the samples
    /// and learns again.
    fn drift_check(&self, d: &Dyn, st: &mut State, n_obs: u64) {
        let n = d.steps.len();
        let counts = d.stops.snapshot(n + 1);
        let ds = &mut st.drift;
        if ds.seen.len() != counts.len() || counts.iter().zip(&ds.seen).any(|(c, s)| c < s) {
            *ds = DriftState {
                seen: counts,
                recent: VecDeque::new(),
            };
            return;
        }
        let delta: Vec<u64> = counts.iter().zip(&ds.seen).map(|(c, s)| c - s).collect();
        if delta.iter().sum::<u64>() == 0 {
            return;
        }
        ds.seen = counts.clone();
        ds.recent.push_back(delta.clone());
        if ds.recent.len() > DRIFT_RECENT_BLOCKS {
            ds.recent.pop_front();
        }
        let before_block: Vec<u64> = counts.iter().zip(&delta).map(|(c, x)| c - x).collect();
        let mut recent = vec![0u64; n + 1];
        for b in &ds.recent {
            for (r, x) in recent.iter_mut().zip(b) {
                *r += x;
            }
        }
        let before_recent: Vec<u64> = counts.iter().zip(&recent).map(|(c, x)| c - x).collect();
        let mut tests = vec![(&delta, &before_block)];
        if ds.recent.len() > 1 {
            tests.push((&recent, &before_recent));
        }
        let cur = read(&d.current).clone();
        for (new, old) in tests {
            let (mut reach_new, mut reach_old) = (new.iter().sum::<u64>(), old.iter().sum::<u64>());
            for i in 0..n {
                if reach_new >= DRIFT_MIN_EVENTS && reach_old >= DRIFT_MIN_EVENTS {
                    let p1 = (reach_new - new[i]) as f64 / reach_new as f64;
                    let p0 = (reach_old - old[i]) as f64 / reach_old as f64;
                    let g = g_statistic([reach_new - new[i], new[i]], [reach_old - old[i], old[i]]);
                    if (p1 - p0).abs() > DRIFT_MIN_DIFF && g > DRIFT_Z * DRIFT_Z {
                        let label = &self.labels[d.steps[cur.order[i] as usize]];
                        let note = format!(
                            "drift at event {n_obs}: '{label}' passed {:.1}% of the last {reach_new} events reaching it, {:.1}% of the {reach_old} before",
                            100.0 * p1,
                            100.0 * p0
                        );
                        self.relearn(d, st, &cur, n_obs, note);
                        return;
                    }
                }
                reach_new -= new[i];
                reach_old -= old[i];
            }
        }
    }

    /// After a drift: forgets the samples and the stop counts, samples
    /// every event again for the warm-up and decides after 1/8 of it.
    fn relearn(&self, d: &Dyn, st: &mut State, cur: &Current, n_obs: u64, note: String) {
        let t = &self.tuning;
        lock(&d.samples).clear();
        d.stops.reset();
        st.drift = DriftState::default();
        st.archive.clear();
        st.stable = 0;
        st.drift_note = Some(note);
        st.learning = true;
        st.phase_start = n_obs;
        st.interval = t.min_interval.max(1);
        st.next_decision = n_obs + first_step(t);
        let n_heavy = st.heavy.iter().filter(|&&h| h).count();
        for j in 0..d.steps.len() {
            if !st.heavy[j] {
                st.rates[j] = 1.0;
            } else if st.cost_known[j] {
                st.rates[j] = heavy_rate(
                    t,
                    true,
                    t.sample_budget,
                    st.expected_s,
                    st.probe[j],
                    n_heavy,
                );
            }
        }
        let current = make_current(&d.steps, cur.groups.clone(), &st.rates);
        d.set_current(Arc::new(current));
    }

    fn decide_hepframe(&self, d: &Dyn, st: &mut State, n_obs: u64) {
        let t = &self.tuning;
        let n = d.steps.len();
        self.update_costs(d, st);
        for i in 0..n {
            let r = d.reached[i].swap(0, Relaxed) as f64;
            let p = d.passed[i].swap(0, Relaxed) as f64;
            st.hep_reached[i] = st.hep_reached[i] * 0.5 + r;
            st.hep_passed[i] = st.hep_passed[i] * 0.5 + p;
        }
        let pass: Vec<f64> = (0..n)
            .map(|i| {
                if st.hep_reached[i] > 0.0 {
                    st.hep_passed[i] / st.hep_reached[i]
                } else {
                    1.0
                }
            })
            .collect();
        let levels = model::hepframe_levels(&st.costs, &pass, &d.preds);
        let groups: Vec<Vec<usize>> = if t.hepframe_concurrent {
            levels
        } else {
            levels.into_iter().flatten().map(|j| vec![j]).collect()
        };
        st.decisions += 1;
        st.learning = false;
        // HEP-Frame measures on the events that reach each filter; it does
        // not sample after the start.
        st.rates.fill(0.0);
        let cur = read(&d.current).clone();
        if groups != cur.groups {
            let max_cost = st.costs.iter().copied().fold(0.0, f64::max);
            let weights: Vec<String> = groups
                .iter()
                .map(|g| {
                    g.iter()
                        .map(|&j| {
                            format!(
                                "{} {:.3}",
                                self.labels[d.steps[j]],
                                model::hepframe_weight(pass[j], st.costs[j], max_cost)
                            )
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .collect();
            let reason = format!(
                "HEP-Frame weights by level (0.7 pass + 0.3 time/max): [{}]",
                weights.join("] | [")
            );
            let current = make_current(&d.steps, groups, &st.rates);
            self.install(d, current, n_obs, reason);
            st.interval = t.min_interval.max(1);
        } else {
            let current = make_current(&d.steps, cur.groups.clone(), &st.rates);
            d.set_current(Arc::new(current));
            st.interval = (st.interval * 2).min(t.max_interval.max(1));
        }
        st.next_decision = n_obs + st.interval;
    }

    /// Puts a new order in force: the plans, the lock-free copy of the
    /// order, fresh stop counts, and the history entry.
    fn install(&self, d: &Dyn, current: Current, n_obs: u64, reason: String) -> Arc<Current> {
        let order = current
            .plan
            .order()
            .map(|m| self.labels[m].clone())
            .collect();
        let current = Arc::new(current);
        d.set_current(current.clone());
        for (slot, &i) in d.order_now.iter().zip(&current.order) {
            slot.store(i, Relaxed);
        }
        d.stops.reset();
        lock(&self.history).push(OrderChange {
            path: d.name.clone(),
            at_event: n_obs,
            order,
            reason,
        });
        current
    }

    fn final_entry(&self, d: &Dyn) -> OrderChange {
        let st = lock(&d.state);
        let cur = read(&d.current).clone();
        let (sampled, extra) = {
            let s = lock(&d.samples);
            // Steps run by sampled events beyond the regular plan, after
            // the first 2% of the events (a warm-up of at most 2%).
            let observed = d.observed.load(Relaxed);
            let mut extra = vec![0u64; d.steps.len()];
            for &(index, mask) in &s.extra_log {
                if index >= observed / 50 {
                    for (j, e) in extra.iter_mut().enumerate() {
                        *e += mask >> j & 1;
                    }
                }
            }
            (s.total, extra)
        };
        let observed = d.observed.load(Relaxed);
        let (hot, decide) = self.overhead_s();
        let flow: Vec<String> = cur
            .order
            .iter()
            .map(|&i| {
                let i = i as usize;
                format!("{} {}", self.labels[d.steps[i]], micros(st.costs[i]))
            })
            .collect();
        let extra_list: Vec<String> = cur
            .order
            .iter()
            .map(|&i| i as usize)
            .filter(|&i| extra[i] > 0)
            .map(|i| format!("{} {}", self.labels[d.steps[i]], extra[i]))
            .collect();
        let mut rates: Vec<(f64, Vec<&str>)> = Vec::new();
        for &i in &cur.order {
            let i = i as usize;
            let r = st.rates[i];
            match rates.iter_mut().find(|(x, _)| *x == r) {
                Some((_, names)) => names.push(&self.labels[d.steps[i]]),
                None => rates.push((r, vec![&self.labels[d.steps[i]]])),
            }
        }
        rates.sort_by(|a, b| b.0.total_cmp(&a.0));
        let rates: Vec<String> = rates
            .iter()
            .map(|(r, names)| {
                if names.len() > 3 {
                    format!("{} for {} steps", percent(*r), names.len())
                } else {
                    format!("{} for {}", percent(*r), names.join(", "))
                }
            })
            .collect();
        OrderChange {
            path: d.name.clone(),
            at_event: observed,
            order: cur.plan.order().map(|m| self.labels[m].clone()).collect(),
            reason: format!(
                "in use at the end ({} policy): {} decisions, {} sampled events ({:.2}%), {}; cost per step: {}; sampling after a rejection: {}; steps run by sampled events beyond the plan after the first 2% of the events: [{}]; planner time {:.3} ms (statistics {:.3} ms, decisions {:.3} ms)",
                d.policy,
                st.decisions,
                sampled,
                100.0 * sampled as f64 / observed.max(1) as f64,
                if d.policy == Policy::Adaptive {
                    format!("expected {} per event", micros(st.expected_s))
                } else {
                    "weights from pass rates on the events reaching each step".to_string()
                },
                flow.join(", "),
                rates.join(", "),
                extra_list.join(", "),
                (hot + decide) * 1e3,
                hot * 1e3,
                decide * 1e3
            ),
        }
    }
}

/// The likelihood-ratio (G) statistic of a 2×2 table of (passed,
/// rejected) counts in two periods; chi-squared with one degree of freedom
/// when the pass rate did not change.
fn g_statistic(a: [u64; 2], b: [u64; 2]) -> f64 {
    let total = (a[0] + a[1] + b[0] + b[1]) as f64;
    if total == 0.0 {
        return 0.0;
    }
    let rows = [(a[0] + a[1]) as f64, (b[0] + b[1]) as f64];
    let cols = [(a[0] + b[0]) as f64, (a[1] + b[1]) as f64];
    let mut g = 0.0;
    for (r, row) in [a, b].iter().enumerate() {
        for (c, &o) in row.iter().enumerate() {
            if o > 0 {
                let o = o as f64;
                g += o * (o * total / (rows[r] * cols[c])).ln();
            }
        }
    }
    2.0 * g
}

fn first_decision(policy: Policy, t: &Tuning) -> u64 {
    match policy {
        Policy::HepFrame => t.warmup_events.max(1),
        _ => first_step(t),
    }
}

/// The first decision of a learning phase, after 1/32 of the warm-up.
fn first_step(t: &Tuning) -> u64 {
    (t.warmup_events.max(1) / 32).max(1)
}

/// The share of the sampling budget spent once the order has stayed for
/// `stable` decisions in a row: all of it, half after 4, a quarter after 8
/// (the drift checks, on every event, do not depend on it).
fn stable_factor(stable: u32) -> f64 {
    match stable {
        0..4 => 1.0,
        4..8 => 0.5,
        _ => 0.25,
    }
}

/// Learning: one-off, each expensive step measured after a rejection costs
/// at most this share of the expected cost of the warm-up's events.
const LEARNING_HEAVY_SHARE: f64 = 0.1;

/// The rate at which an expensive step (`probe`: its cost per sampled
/// event) is measured after a rejection: an equal share of half the
/// sampling budget (or, while learning, `LEARNING_HEAVY_SHARE`).
fn heavy_rate(
    t: &Tuning,
    learning: bool,
    budget: f64,
    expected: f64,
    probe: f64,
    n_heavy: usize,
) -> f64 {
    let hi = t.max_sample_rate.max(t.min_sample_rate);
    let (share, top) = if learning {
        (LEARNING_HEAVY_SHARE, 1.0)
    } else {
        (budget / 2.0 / n_heavy.max(1) as f64, hi)
    };
    if probe > 0.0 {
        // Never below the floor, but a floor that costs at most
        // `min_sample_rate` of the expected cost (still above zero).
        let floor = t.min_sample_rate * (expected / probe).min(1.0);
        (share * expected / probe).max(floor).min(top)
    } else {
        top
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
        let batch = outcome.counts.iter().any(Option::is_some);
        if batch {
            record_batch(d, outcome);
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
        if outcome.sampled {
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
            let mut s = lock(&d.samples);
            s.push(Sample { known, pass });
            if extra != 0 && s.extra_log.len() < EXTRA_LOG_CAP {
                s.extra_log.push((event_index, extra));
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
        if weight > 0 {
            let mut ns = (seconds * 1e9) as u64;
            let cap = self.cost_cap_ns[module].load(Relaxed);
            if cap > 0 {
                ns = ns.min(cap);
            }
            self.cost.add(2 * module, ns * weight);
            self.cost.add(2 * module + 1, weight);
            if weight == 1 && self.cost.get(2 * module + 1) >= COST_EARLY_CALLS {
                self.cost_mode[module].store(COST_STRIDED, Relaxed);
            }
        }
        if let Some(t0) = timed {
            self.add_hot(t0);
        }
    }

    /// Every execution of a step (or of a producer only it needs) for its
    /// first `COST_EARLY_CALLS` executions, then one in `COST_STRIDE`, at
    /// random.
    fn wants_cost(&self, module: ModuleIdx) -> bool {
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

/// The plans of an order: the regular one, and one sampled plan per
/// distinct sampling rate (`rates`, per position: the rate at which a step
/// runs after a rejection; 0: only as part of the regular plan).
fn make_current(steps: &[ModuleIdx], groups: Vec<Vec<usize>>, rates: &[f64]) -> Current {
    let module_groups: Vec<Vec<ModuleIdx>> = groups
        .iter()
        .map(|g| g.iter().map(|&i| steps[i]).collect())
        .collect();
    let thresholds: Vec<u64> = rates.iter().map(|&r| rate_threshold(r)).collect();
    let mut levels: Vec<u64> = thresholds.iter().copied().filter(|&t| t > 0).collect();
    levels.sort_unstable();
    levels.dedup();
    let sampled = levels
        .iter()
        .map(|&limit| {
            let skip: Vec<bool> = groups
                .iter()
                .map(|g| g.iter().all(|&j| thresholds[j] < limit))
                .collect();
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
        groups,
    }
}

/// The written order, minimally changed to respect the constraints: the
/// earliest-written available step first.
pub(crate) fn topological_written(preds: &[u64]) -> Vec<usize> {
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
fn group_expensive(
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

/// For each module: the one path step or end-path module that needs it
/// (directly or through products), when exactly one does.
fn private_owners(graph: &Graph) -> Vec<Option<ModuleIdx>> {
    let n = graph.modules.len();
    let mut owner: Vec<Option<ModuleIdx>> = vec![None; n];
    let mut shared = vec![false; n];
    let mut roots: Vec<ModuleIdx> = graph
        .paths
        .iter()
        .flat_map(|p| p.steps.iter().copied())
        .chain(graph.end_steps.iter().map(|e| e.module))
        .collect();
    roots.sort_unstable();
    roots.dedup();
    for &root in &roots {
        let mut seen = vec![false; n];
        let mut stack = graph.modules[root].prereqs.clone();
        while let Some(m) = stack.pop() {
            if std::mem::replace(&mut seen[m], true) {
                continue;
            }
            match owner[m] {
                None if !shared[m] => owner[m] = Some(root),
                Some(o) if o != root => {
                    owner[m] = None;
                    shared[m] = true;
                }
                _ => {}
            }
            stack.extend(graph.modules[m].prereqs.iter().copied());
        }
    }
    // A module that is itself a root is not a private producer of another.
    for &root in &roots {
        owner[root] = None;
    }
    owner
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn read<T>(m: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(|p| p.into_inner())
}

/// A batch of events (a columnar analysis) whose steps narrowed it in the
/// order in force: the events each step saw and rejected are stop counts of
/// that order, and HEP-Frame's reached and passed counts. (A sampled batch
/// still adds its batch-level pass vector to the samples: a step "passes" a
/// batch when some event survives it.)
fn record_batch(d: &Dyn, outcome: &PathOutcome) {
    let n = d.steps.len();
    let consistent = outcome
        .steps
        .iter()
        .enumerate()
        .all(|(k, &(m, _))| d.order_now.get(k).map(|o| o.load(Relaxed)) == Some(d.pos_of[m]));
    for (k, &(m, _)) in outcome.steps.iter().enumerate() {
        let (seen, passed) = outcome.step_counts(k);
        if d.policy == Policy::HepFrame {
            let i = d.pos_of[m] as usize;
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
