//! [`OrderingPlanner`]: the `fixed`, `adaptive` and `hepframe` policies
//! behind the engine's [`Planner`] interface.
//!
//! Hot paths (called per event or per module execution) touch only atomics
//! and one read lock: `plan` clones the current plan's `Arc`; `observe`
//! adds one count per event (a decision vector to a small window for the
//! rare sampled events); `observe_cost` records one execution in eight.
//! Everything else happens at checkpoints, under a per-path mutex that
//! observers only `try_lock`.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use super::model::{self, Joint};
use super::{OrderingOptions, Policy, Tuning};
use crate::graph::{Graph, ModuleIdx, PathIdx};
use crate::schedule::{OrderChange, PathOutcome, PathPlan, Planner};
use crate::synthetic::mix;

/// One execution in `COST_STRIDE` is timed into the cost statistics.
const COST_STRIDE_MASK: u64 = 7;
/// One call in 64 of the hot paths is timed, to report the planner's own
/// overhead.
const TIMING_MASK: u64 = 63;

/// The planner of every path of a job; see the module documentation of
/// [`ordering`](super).
pub struct OrderingPlanner {
    paths: Vec<Slot>,
    /// Per module: (sum of recorded ns, recorded executions).
    cost_ns: Vec<AtomicU64>,
    cost_calls: Vec<AtomicU64>,
    /// Per module: recorded times are capped at this (ns; 0: no cap yet),
    /// three times the current estimate, so that a thread descheduled
    /// during a step does not distort its cost.
    cost_cap_ns: Vec<AtomicU64>,
    wants: Vec<bool>,
    labels: Vec<String>,
    /// Measured (hot paths: extrapolated from one call in 64) time spent in
    /// the planner itself.
    hot_ns: AtomicU64,
    decide_ns: AtomicU64,
    history: Mutex<Vec<OrderChange>>,
    tuning: Tuning,
}

enum Slot {
    Static(Arc<PathPlan>),
    Dynamic(Box<Dyn>),
}

/// The plan in force for a dynamic path.
struct Current {
    /// Groups of step positions.
    groups: Vec<Vec<usize>>,
    /// Flattened order of positions, as `u8`.
    order: Vec<u8>,
    plan: Arc<PathPlan>,
    sampled: Arc<PathPlan>,
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
    current: RwLock<Arc<Current>>,
    /// An event is sampled when `mix(index ^ seed) < threshold`.
    threshold: AtomicU64,
    observed: AtomicU64,
    next_check: AtomicU64,
    /// Regular events by the position (in the current order) of the step
    /// that rejected them; index `n`: accepted.
    stops: Vec<AtomicU64>,
    /// `hepframe`: per position, events that ran the step and that passed.
    reached: Vec<AtomicU64>,
    passed: Vec<AtomicU64>,
    samples: Mutex<Window>,
    state: Mutex<State>,
}

/// A sliding window of decision vectors of sampled events.
struct Window {
    masks: Vec<u64>,
    next: usize,
    capacity: usize,
    total: u64,
}

impl Window {
    fn push(&mut self, mask: u64) {
        if self.masks.len() < self.capacity {
            self.masks.push(mask);
        } else {
            self.masks[self.next] = mask;
        }
        self.next = (self.next + 1) % self.capacity;
        self.total += 1;
    }
    fn clear(&mut self) {
        self.masks.clear();
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
    /// Per position and attributed module: decayed (ns, executions) and the
    /// cumulative totals seen last time.
    cost_acc: Vec<Vec<CostAcc>>,
    costs: Vec<f64>,
    /// Along the current order: predicted P(pass | passed the earlier
    /// steps) and the sample weight behind it.
    predicted: Vec<f64>,
    support: Vec<f64>,
    /// `hepframe`: decayed pass rate estimates per position.
    hep_reached: Vec<f64>,
    hep_passed: Vec<f64>,
    expected_s: f64,
    drift_note: Option<String>,
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
                let current = make_current(&path.steps, groups);
                Slot::Dynamic(Box::new(Dyn {
                    name: path.name.clone(),
                    policy,
                    steps: path.steps.clone(),
                    preds,
                    pos_of,
                    seed: mix(tuning.seed ^ mix(p as u64 + 1)),
                    current: RwLock::new(Arc::new(current)),
                    threshold: AtomicU64::new(u64::MAX),
                    observed: AtomicU64::new(0),
                    next_check: AtomicU64::new(tuning.warmup_events.max(1)),
                    stops: (0..=n).map(|_| AtomicU64::new(0)).collect(),
                    reached: (0..n).map(|_| AtomicU64::new(0)).collect(),
                    passed: (0..n).map(|_| AtomicU64::new(0)).collect(),
                    samples: Mutex::new(Window {
                        masks: Vec::new(),
                        next: 0,
                        capacity: tuning.window.max(1),
                        total: 0,
                    }),
                    state: Mutex::new(State {
                        interval: tuning.min_interval.max(1),
                        next_decision: tuning.warmup_events.max(1),
                        decisions: 0,
                        learning: true,
                        cost_acc: attributed
                            .iter()
                            .map(|l| vec![CostAcc::default(); l.len()])
                            .collect(),
                        costs: vec![0.0; n],
                        predicted: Vec::new(),
                        support: Vec::new(),
                        hep_reached: vec![0.0; n],
                        hep_passed: vec![0.0; n],
                        expected_s: 0.0,
                        drift_note: None,
                    }),
                    attributed,
                }))
            })
            .collect();
        Self {
            paths,
            cost_ns: (0..n_modules).map(|_| AtomicU64::new(0)).collect(),
            cost_calls: (0..n_modules).map(|_| AtomicU64::new(0)).collect(),
            cost_cap_ns: (0..n_modules).map(|_| AtomicU64::new(0)).collect(),
            wants,
            labels: graph.modules.iter().map(|m| m.label.clone()).collect(),
            hot_ns: AtomicU64::new(0),
            decide_ns: AtomicU64::new(0),
            history: Mutex::new(Vec::new()),
            tuning: options.tuning.clone(),
        }
    }

    /// Seconds spent in the planner: (statistics on the hot paths,
    /// estimated from one call in 64; decisions at checkpoints).
    pub fn overhead_s(&self) -> (f64, f64) {
        (
            self.hot_ns.load(Relaxed) as f64 * 1e-9,
            self.decide_ns.load(Relaxed) as f64 * 1e-9,
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
        if n_obs >= st.next_decision {
            match d.policy {
                Policy::HepFrame => self.decide_hepframe(d, &mut st, n_obs),
                _ => self.decide_adaptive(d, &mut st, n_obs),
            }
        }
        let next = if st.learning {
            st.next_decision
        } else {
            st.next_decision.min(n_obs + self.tuning.drift_block.max(1))
        };
        d.next_check.store(next.max(n_obs + 1), Relaxed);
        self.decide_ns
            .fetch_add(t0.elapsed().as_nanos() as u64, Relaxed);
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
                let ns = self.cost_ns[m].load(Relaxed);
                let calls = self.cost_calls[m].load(Relaxed);
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

    fn decide_adaptive(&self, d: &Dyn, st: &mut State, n_obs: u64) {
        let t = &self.tuning;
        self.update_costs(d, st);
        let joint = {
            let w = lock(&d.samples);
            Joint::from_masks(w.masks.iter().copied())
        };
        st.decisions += 1;
        st.next_decision = n_obs + st.interval;
        if joint.is_empty() {
            return;
        }
        let cur = read(&d.current).clone();
        let cur_cost = model::expected_cost(&st.costs, &cur.groups, &joint);
        let (order, method) = match model::best_order(&st.costs, &d.preds, &joint, t.max_dp_states)
        {
            Some(dp) => (
                dp.order,
                format!("exact DP over {} feasible prefix sets", dp.states),
            ),
            None => (
                model::greedy_order(&st.costs, &d.preds, &joint),
                "A-Greedy (too many prefix sets for the exact search)".to_string(),
            ),
        };
        let groups = group_expensive(&order, &st.costs, &d.preds, t.concurrent_above_s);
        let new_cost = model::expected_cost(&st.costs, &groups, &joint);
        let was_learning = st.learning;
        st.learning = false;
        // Orders compete on their sequential cost; the grouping (a latency
        // option that costs work) is applied to the winner.
        let cur_order: Vec<usize> = cur.order.iter().map(|&i| i as usize).collect();
        let cur_seq = model::expected_cost_order(&st.costs, &cur_order, &joint);
        let new_seq = model::expected_cost_order(&st.costs, &order, &joint);
        let change =
            groups != cur.groups && (new_seq < cur_seq * (1.0 - t.min_gain) || order == cur_order);
        let (groups, cost) = if change {
            let reason = format!(
                "{}{method}, {} samples: expected {} per event (previous order {})",
                st.drift_note
                    .take()
                    .map(|n| format!("{n}; "))
                    .unwrap_or_default(),
                joint.total(),
                micros(new_cost),
                micros(cur_cost)
            );
            self.install(d, groups.clone(), n_obs, reason);
            st.interval = t.min_interval.max(1);
            (groups, new_cost)
        } else {
            if !was_learning {
                st.interval = (st.interval * 2).min(t.max_interval.max(1));
            }
            (cur.groups.clone(), cur_cost)
        };
        st.next_decision = n_obs + st.interval;
        st.expected_s = cost;
        // Predictions along the order in force, for the drift checks.
        let order: Vec<usize> = groups.iter().flatten().copied().collect();
        st.predicted.clear();
        st.support.clear();
        let mut prefix = 0u64;
        for &j in &order {
            st.support.push(joint.weight_passing(prefix));
            st.predicted.push(joint.conditional(prefix, j, 1.0, 0.5));
            prefix |= 1 << j;
        }
        // Sampling rate: a share of the expected cost, within bounds.
        let all: f64 = st.costs.iter().sum();
        let extra = (all - cost).max(1e-15);
        let rate = (t.sample_budget * cost / extra).clamp(t.min_sample_rate, t.max_sample_rate);
        d.threshold.store(rate_threshold(rate), Relaxed);
    }

    /// Compares the pass rates of regular events along the current order
    /// with the predictions; on a significant difference, forgets the
    /// samples and learns again.
    fn drift_check(&self, d: &Dyn, st: &mut State, n_obs: u64) {
        let n = d.steps.len();
        let counts: Vec<u64> = d.stops.iter().map(|c| c.load(Relaxed)).collect();
        let events: u64 = counts.iter().sum();
        if events < self.tuning.drift_block || st.predicted.len() != n {
            return;
        }
        // A window of up to 8 blocks, so that steps late in the order (few
        // events reach them) are tested too.
        if events >= 8 * self.tuning.drift_block {
            for c in &d.stops {
                c.store(0, Relaxed);
            }
        }
        let cur = read(&d.current).clone();
        let mut reached = events;
        for (i, &stopped) in counts.iter().enumerate().take(n) {
            if reached >= 30 {
                let observed = (reached - stopped) as f64 / reached as f64;
                let q = st.predicted[i];
                let ns = st.support[i].max(1.0);
                let var = q * (1.0 - q) * (1.0 / reached as f64 + 1.0 / ns) + 1e-6;
                let z = (observed - q).abs() / var.sqrt();
                if (observed - q).abs() > 0.05 && z > 5.0 {
                    let label = &self.labels[d.steps[cur.order[i] as usize]];
                    st.drift_note = Some(format!(
                        "drift at event {n_obs}: '{label}' passed {:.1}% of the {reached} events reaching it, {:.1}% expected",
                        100.0 * observed,
                        100.0 * q
                    ));
                    lock(&d.samples).clear();
                    st.learning = true;
                    st.interval = self.tuning.min_interval.max(1);
                    st.next_decision = n_obs + self.tuning.warmup_events.max(1);
                    d.threshold.store(u64::MAX, Relaxed);
                    return;
                }
            }
            reached -= stopped;
        }
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
            self.install(d, groups, n_obs, reason);
            st.interval = t.min_interval.max(1);
        } else {
            st.interval = (st.interval * 2).min(t.max_interval.max(1));
        }
        st.next_decision = n_obs + st.interval;
        // HEP-Frame measures on the events that reach each filter; it does
        // not sample after the start.
        d.threshold.store(0, Relaxed);
    }

    fn install(&self, d: &Dyn, groups: Vec<Vec<usize>>, n_obs: u64, reason: String) {
        let current = make_current(&d.steps, groups);
        let order = current
            .plan
            .order()
            .map(|m| self.labels[m].clone())
            .collect();
        *d.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(current);
        for c in &d.stops {
            c.store(0, Relaxed);
        }
        lock(&self.history).push(OrderChange {
            path: d.name.clone(),
            at_event: n_obs,
            order,
            reason,
        });
    }

    fn final_entry(&self, d: &Dyn) -> OrderChange {
        let st = lock(&d.state);
        let cur = read(&d.current).clone();
        let sampled = lock(&d.samples).total;
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
        OrderChange {
            path: d.name.clone(),
            at_event: observed,
            order: cur.plan.order().map(|m| self.labels[m].clone()).collect(),
            reason: format!(
                "in use at the end ({} policy): {} decisions, {} sampled events ({:.2}%), {}; cost per step: {}; planner time {:.3} ms (statistics {:.3} ms, decisions {:.3} ms)",
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
                (hot + decide) * 1e3,
                hot * 1e3,
                decide * 1e3
            ),
        }
    }
}

impl Planner for OrderingPlanner {
    fn plan(&self, path: PathIdx, event_index: u64) -> Arc<PathPlan> {
        match &self.paths[path] {
            Slot::Static(plan) => plan.clone(),
            Slot::Dynamic(d) => {
                let timed = (event_index & TIMING_MASK == 0).then(Instant::now);
                let sampled = mix(event_index ^ d.seed) < d.threshold.load(Relaxed);
                let plan = {
                    let cur = read(&d.current);
                    if sampled {
                        cur.sampled.clone()
                    } else {
                        cur.plan.clone()
                    }
                };
                if let Some(t0) = timed {
                    self.hot_ns.fetch_add(
                        (t0.elapsed().as_nanos() as u64) * (TIMING_MASK + 1),
                        Relaxed,
                    );
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
        let n_obs = d.observed.fetch_add(1, Relaxed) + 1;
        if d.policy == Policy::HepFrame {
            for &(m, pass) in &outcome.steps {
                let i = d.pos_of[m] as usize;
                d.reached[i].fetch_add(1, Relaxed);
                if pass {
                    d.passed[i].fetch_add(1, Relaxed);
                }
            }
        }
        if outcome.sampled {
            if outcome.steps.len() == n {
                let mut mask = 0u64;
                for &(m, pass) in &outcome.steps {
                    if pass {
                        mask |= 1 << d.pos_of[m];
                    }
                }
                lock(&d.samples).push(mask);
            }
        } else {
            let cur = read(&d.current);
            let mut stop = n;
            let mut consistent = true;
            for (k, &(m, pass)) in outcome.steps.iter().enumerate() {
                if cur.order.get(k) != Some(&d.pos_of[m]) {
                    consistent = false;
                    break;
                }
                if !pass && stop == n {
                    stop = k;
                }
            }
            if consistent && (stop < n || outcome.steps.len() == n) {
                d.stops[stop].fetch_add(1, Relaxed);
            }
        }
        if let Some(t0) = timed {
            self.hot_ns.fetch_add(
                (t0.elapsed().as_nanos() as u64) * (TIMING_MASK + 1),
                Relaxed,
            );
        }
        if n_obs >= d.next_check.load(Relaxed) {
            self.checkpoint(d, n_obs);
        }
    }

    fn observe_cost(&self, module: ModuleIdx, seconds: f64) {
        let r = thread_random();
        let timed = (r >> 32 & TIMING_MASK == 0).then(Instant::now);
        if r & COST_STRIDE_MASK == 0 {
            let mut ns = (seconds * 1e9) as u64;
            let cap = self.cost_cap_ns[module].load(Relaxed);
            if cap > 0 {
                ns = ns.min(cap);
            }
            self.cost_ns[module].fetch_add(ns, Relaxed);
            self.cost_calls[module].fetch_add(1, Relaxed);
        }
        if let Some(t0) = timed {
            self.hot_ns.fetch_add(
                (t0.elapsed().as_nanos() as u64) * (TIMING_MASK + 1),
                Relaxed,
            );
        }
    }

    fn wants_cost(&self, module: ModuleIdx) -> bool {
        self.wants[module]
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

fn make_current(steps: &[ModuleIdx], groups: Vec<Vec<usize>>) -> Current {
    let module_groups: Vec<Vec<ModuleIdx>> = groups
        .iter()
        .map(|g| g.iter().map(|&i| steps[i]).collect())
        .collect();
    Current {
        order: groups.iter().flatten().map(|&i| i as u8).collect(),
        plan: Arc::new(PathPlan {
            groups: module_groups.clone(),
            evaluate_all: false,
        }),
        sampled: Arc::new(PathPlan {
            groups: module_groups,
            evaluate_all: true,
        }),
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
