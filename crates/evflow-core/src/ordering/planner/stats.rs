//! Statistics and sampling: the striped counters of the hot paths, the
//! window of sampled decision vectors, the stop counts of past orders, the
//! pass model of the checkpoint's estimate, and the sampling schedule and
//! rates.

use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

use crate::ordering::model::{Ideals, Joint, SharedCost, shared_charge};
use crate::ordering::policy::{Policy, Tuning};

/// After its first [`COST_EARLY_CALLS`] executions, one execution of a
/// module in `COST_STRIDE` is recorded (with weight `COST_STRIDE`): chosen
/// by `wants_cost`, so that the engine does not even time the others.
pub(super) const COST_STRIDE_MASK: u64 = 7;
pub(super) const COST_STRIDE: u64 = COST_STRIDE_MASK + 1;
pub(super) const COST_EARLY_CALLS: u64 = 64;
/// `OrderingPlanner::cost_mode` values.
pub(super) const COST_NONE: u8 = 0;
pub(super) const COST_EVERY: u8 = 1;
pub(super) const COST_STRIDED: u8 = 2;
/// One call in 256 of the hot paths is timed, to report the planner's own
/// overhead (the calibrated cost of reading the clock subtracted).
pub(super) const TIMING_MASK: u64 = 255;
/// A timed hot-path call longer than this was descheduled or waited for a
/// lock (parked, using no CPU): it counts as this long. The longest
/// legitimate call, refreshing a thread's copy of the plans, takes about
/// 1 µs.
pub(super) const HOT_CALL_CAP_NS: i64 = 2_000;
/// A drift check (with the checkpoint's bookkeeping) that took longer than
/// this was descheduled: it counts as this long.
pub(super) const CHECK_CAP_NS: i64 = 50_000;
/// Undecided steps of a sampled vector are imputed by expanding every
/// combination up to this many of them (by the likelier decision beyond).
pub(super) const MAX_IMPUTED_BITS: u32 = 4;
/// A new order must be expected to save `NOISE_GAIN / √samples` (or
/// `min_gain` when larger).
pub(super) const NOISE_GAIN: f64 = 0.2;
/// Fewest sampled vectors before the order may change.
pub(super) const MIN_SAMPLES_TO_REORDER: usize = 8;
/// Sampled events logged for the report's account of the sampling work.
pub(super) const EXTRA_LOG_CAP: usize = 1 << 20;

/// Counters updated on the hot paths, one copy per stripe: each thread adds
/// to the copy of its stripe (cache lines apart from the other stripes), a
/// checkpoint sums them.
pub(super) struct Striped {
    pub(super) width: usize,
    pub(super) cells: Box<[AtomicU64]>,
}

/// Stripes of [`Striped`] counters (threads beyond share them).
pub(super) const STRIPES: usize = 8;

pub(super) static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static STRIPE: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// The stripe of the calling thread.
pub(super) fn stripe() -> usize {
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
    pub(super) fn new(len: usize) -> Self {
        // Whole cache lines per stripe, and one more between stripes (the
        // allocation need not start on a line).
        let width = len.div_ceil(8) * 8 + 8;
        Self {
            width,
            cells: (0..width * STRIPES).map(|_| AtomicU64::new(0)).collect(),
        }
    }
    pub(super) fn add(&self, i: usize, v: u64) {
        self.cells[stripe() * self.width + i].fetch_add(v, Relaxed);
    }
    pub(super) fn get(&self, i: usize) -> u64 {
        (0..STRIPES)
            .map(|s| self.cells[s * self.width + i].load(Relaxed))
            .sum()
    }
    /// Raises counter `i` of the calling thread's stripe to `v`: with
    /// [`highest`](Self::highest), a maximum kept without contention.
    pub(super) fn raise(&self, i: usize, v: u64) {
        self.cells[stripe() * self.width + i].fetch_max(v, Relaxed);
    }
    pub(super) fn highest(&self, i: usize) -> u64 {
        (0..STRIPES)
            .map(|s| self.cells[s * self.width + i].load(Relaxed))
            .max()
            .unwrap_or(0)
    }
    pub(super) fn snapshot(&self, len: usize) -> Vec<u64> {
        (0..len).map(|i| self.get(i)).collect()
    }
    pub(super) fn reset(&self) {
        for c in self.cells.iter() {
            c.store(0, Relaxed);
        }
    }
}

/// A sampled event: the steps whose decision is known (all that ran for
/// the path) and those that passed.
#[derive(Clone, Copy, Debug)]
pub(super) struct Sample {
    pub(super) known: u64,
    pub(super) pass: u64,
}

/// A sliding window of the sampled events.
pub(super) struct Samples {
    pub(super) ring: Vec<Sample>,
    pub(super) next: usize,
    pub(super) capacity: usize,
    pub(super) total: u64,
    /// (event index, steps run after the rejection) of sampled events.
    pub(super) extra_log: Vec<(u64, u64)>,
}

impl Samples {
    pub(super) fn push(&mut self, s: Sample) {
        if self.ring.len() < self.capacity {
            self.ring.push(s);
        } else {
            self.ring[self.next] = s;
        }
        self.next = (self.next + 1) % self.capacity;
        self.total += 1;
    }
    pub(super) fn clear(&mut self) {
        self.ring.clear();
        self.next = 0;
    }
}

/// The stop counts of the events observed under one order.
#[derive(Clone, Debug)]
pub(super) struct Epoch {
    pub(super) order: Vec<u8>,
    pub(super) stops: Vec<u64>,
}

/// Orders whose stop counts are kept for the estimate.
pub(super) const MAX_EPOCHS: usize = 8;

/// The stop counts at the last drift check and the recent blocks.
#[derive(Default)]
pub(super) struct DriftState {
    pub(super) seen: Vec<u64>,
    pub(super) recent: VecDeque<Vec<u64>>,
}

thread_local! {
    static RNG: Cell<u64> = const { Cell::new(0x2545_f491_4f6c_dd1d) };
}

pub(super) fn thread_random() -> u64 {
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
pub(super) fn thread_cpu_ns() -> Option<u64> {
    if cfg!(target_os = "linux") {
        let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
        stat.split_whitespace().next()?.parse().ok()
    } else {
        None
    }
}

pub(super) fn rate_threshold(rate: f64) -> u64 {
    if rate >= 1.0 {
        u64::MAX
    } else if rate <= 0.0 {
        0
    } else {
        (rate * u64::MAX as f64) as u64
    }
}

pub(super) fn micros(s: f64) -> String {
    if s >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else {
        format!("{:.2} µs", s * 1e6)
    }
}

pub(super) fn percent(rate: f64) -> String {
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
pub(super) struct PassModel<'a> {
    pub(super) joint: Joint,
    pub(super) ideals: Option<&'a Ideals>,
    pub(super) table: Vec<f64>,
    pub(super) q: Vec<f64>,
    pub(super) prior: f64,
}

/// The independence prior counts as this many samples.
pub(super) const PRIOR_SAMPLES: f64 = 4.0;

impl<'a> PassModel<'a> {
    pub(super) fn new(joint: Joint, ideals: Option<&'a Ideals>, q: Vec<f64>, prior: f64) -> Self {
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
    pub(super) fn pass(&self, set: u64) -> f64 {
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
    /// Expected cost per event of running `groups` one after the other, a
    /// shared producer charged to the first group that needs it.
    pub(super) fn cost(&self, costs: &[f64], shared: &[SharedCost], groups: &[Vec<usize>]) -> f64 {
        let mut passed = 0u64;
        let mut cost = 0.0;
        for group in groups {
            let reach = self.pass(passed);
            let bits = group.iter().fold(0u64, |b, &j| b | 1 << j);
            let own = group.iter().map(|&j| costs[j]).sum::<f64>();
            cost += reach * (own + shared_charge(shared, passed, bits));
            passed |= bits;
        }
        cost
    }
}

/// Fewest batches in a warm-up, on a path whose observations are batches
/// of events (a columnar analysis): their pass statistics are exact counts
/// of all their events, and each timing averages a step's running time
/// over many events, so a few of them measure what `warmup_events` single
/// events do; the warm-up still sees more than one batch per thread, so
/// that the timings are not those of one stretch of the job.
pub(super) const MIN_WARMUP_BATCHES: u64 = 4;

/// The observations that carry `events` events: as many when each is one
/// event, else the batches of `per_obs` mean events that hold them (at
/// least one). The tuning's warm-up and intervals are counts of events.
pub(super) fn obs_for(events: u64, per_obs: Option<f64>) -> u64 {
    match per_obs {
        Some(mean) if mean > 1.0 => ((events as f64 / mean).ceil() as u64).max(1),
        _ => events,
    }
}

/// Observations in a learning phase: `warmup_events` events, and for
/// batches at least [`MIN_WARMUP_BATCHES`] of them.
pub(super) fn warmup_obs(t: &Tuning, per_obs: Option<f64>) -> u64 {
    let events = t.warmup_events.max(1);
    match per_obs {
        None => events,
        Some(_) => obs_for(events, per_obs).max(MIN_WARMUP_BATCHES),
    }
}

pub(super) fn first_decision(policy: Policy, t: &Tuning, per_obs: Option<f64>) -> u64 {
    match policy {
        Policy::HepFrame => warmup_obs(t, per_obs),
        _ => first_step(t, per_obs),
    }
}

/// The first decision of a learning phase, after 1/32 of the warm-up (in
/// observations; the first batch for batches of `warmup_events / 32`
/// events or more).
pub(super) fn first_step(t: &Tuning, per_obs: Option<f64>) -> u64 {
    (warmup_obs(t, per_obs) / 32).max(1)
}

/// The share of the sampling budget spent once the order has stayed for
/// `stable` decisions in a row: all of it, half after 4, a quarter after 8
/// (the drift checks, on every event, do not depend on it).
pub(super) fn stable_factor(stable: u32) -> f64 {
    match stable {
        0..4 => 1.0,
        4..8 => 0.5,
        _ => 0.25,
    }
}

/// Learning: one-off, each expensive step measured after a rejection costs
/// at most this share of the expected cost of the warm-up's events.
pub(super) const LEARNING_HEAVY_SHARE: f64 = 0.1;

/// The rate at which an expensive step (`probe`: its cost per sampled
/// event) is measured after a rejection: an equal share of half the
/// sampling budget (or, while learning, `LEARNING_HEAVY_SHARE`).
pub(super) fn heavy_rate(
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

/// Makes the sampling rates after a rejection respect the precedence
/// constraints (`preds`: bit sets of positions): a sampled event runs a
/// step after a rejection only if the steps it must follow ran too (their
/// products, or their order, are what the constraint protects). Where a
/// step's rate exceeds a predecessor's, a cheap predecessor is raised to
/// it (measuring it costs little), and otherwise (`heavy[k]`) the step is
/// capped at the predecessor's rate.
pub(super) fn settle_constraints(rates: &mut [f64], preds: &[u64], heavy: &[bool]) {
    // Constraints chain: repeat until nothing changes; the last pass only
    // caps, so that the rule holds whatever the chains.
    for pass in 0..=rates.len() {
        let mut changed = false;
        for j in 0..rates.len() {
            let mut p = preds[j];
            while p != 0 {
                let k = p.trailing_zeros() as usize;
                p &= p - 1;
                if rates[k] < rates[j] {
                    if heavy[k] || pass == rates.len() {
                        rates[j] = rates[k];
                    } else {
                        rates[k] = rates[j];
                    }
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_is_sampled_no_more_often_than_the_steps_it_follows() {
        // 2 after 1, 3 after 2; 1 is expensive: the cap follows the chain.
        let mut rates = [0.5, 0.1, 0.3, 0.4];
        settle_constraints(
            &mut rates,
            &[0, 0, 0b0010, 0b0100],
            &[false, true, false, false],
        );
        assert_eq!(rates, [0.5, 0.1, 0.1, 0.1]);
        // 1 after 0, both cheap: 0 is raised to 1's rate.
        let mut cheap = [0.1, 0.5];
        settle_constraints(&mut cheap, &[0, 0b01], &[false, false]);
        assert_eq!(cheap, [0.5, 0.5]);
        let mut free = [0.5, 0.1];
        settle_constraints(&mut free, &[0, 0], &[false, false]);
        assert_eq!(free, [0.5, 0.1]);
    }
}
