//! Robust running-time statistics of the steps of reorderable paths.
//!
//! A shared analysis machine takes threads off their cores: a 5 µs filter
//! then measures milliseconds once in a while, and a plain mean (even capped)
//! is dragged by those few. Each timed module keeps a ring of its most recent
//! measured running times (lock-free: one atomic per slot); a decision takes
//! a *Hampel-filtered mean* of the ring: measurements more than
//! `max(6 · 1.4826 · MAD, DESCHEDULED_NS)` above the median are a thread
//! descheduled during the step (the running time of a step is not lowered
//! by the load, only raised), the others are averaged. The mean of what is
//! kept stays unbiased for genuinely variable costs (no symmetric trimming),
//! and its standard error is the estimate's uncertainty, which the planner
//! weighs before it changes an order.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Measurements kept per module and thread stripe (the most recent).
pub(crate) const RING: usize = 128;

/// Thread stripes of a ring: each thread pushes into its own (threads
/// beyond share them), so that recording a running time touches no cache
/// line another thread writes.
const RING_STRIPES: usize = 4;

/// A measurement at least this much (ns) above the median is a thread
/// taken off its core (the scheduler's time slices are longer), whatever
/// the spread.
pub(crate) const DESCHEDULED_NS: f64 = 200_000.0;

/// Spread of a measurement (in robust standard deviations) beyond which it
/// is an outlier.
const HAMPEL_K: f64 = 6.0;

static NEXT_RING_STRIPE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static RING_STRIPE: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// The ring stripe of the calling thread (assigned round-robin).
fn ring_stripe() -> usize {
    RING_STRIPE.with(|s| {
        let v = s.get();
        if v != usize::MAX {
            return v;
        }
        let v = NEXT_RING_STRIPE.fetch_add(1, Relaxed) % RING_STRIPES;
        s.set(v);
        v
    })
}

/// The most recent measured running times of one module, per thread
/// stripe.
pub(crate) struct Ring {
    stripes: Box<[Stripe]>,
}

#[repr(align(64))]
struct Stripe {
    next: AtomicU64,
    /// Nanoseconds plus one (0: empty slot).
    slots: Box<[AtomicU64]>,
}

impl Ring {
    pub(crate) fn new() -> Self {
        Self {
            stripes: (0..RING_STRIPES)
                .map(|_| Stripe {
                    next: AtomicU64::new(0),
                    slots: (0..RING).map(|_| AtomicU64::new(0)).collect(),
                })
                .collect(),
        }
    }

    pub(crate) fn push(&self, ns: u64) {
        let s = &self.stripes[ring_stripe()];
        let i = s.next.fetch_add(1, Relaxed) as usize % RING;
        s.slots[i].store(ns.saturating_add(1), Relaxed);
    }

    /// The measurements now in the ring (every stripe), into `out`.
    pub(crate) fn snapshot(&self, out: &mut Vec<u64>) {
        self.recent(RING, out);
    }

    /// The `k` most recent measurements of each stripe, into `out`.
    pub(crate) fn recent(&self, k: usize, out: &mut Vec<u64>) {
        out.clear();
        for s in self.stripes.iter() {
            let pushed = s.next.load(Relaxed) as usize;
            for back in 1..=k.min(pushed).min(RING) {
                let v = s.slots[(pushed - back) % RING].load(Relaxed);
                if v > 0 {
                    out.push(v - 1);
                }
            }
        }
    }

    /// Forgets all but the `k` most recent measurements of each stripe
    /// (after a genuine change of cost, the older ones describe another
    /// regime).
    pub(crate) fn keep_recent(&self, k: usize) {
        for s in self.stripes.iter() {
            let pushed = s.next.load(Relaxed) as usize;
            for back in k + 1..=pushed.min(RING) {
                s.slots[(pushed - back) % RING].store(0, Relaxed);
            }
        }
    }

    /// Measurements pushed so far.
    pub(crate) fn pushed(&self) -> u64 {
        self.stripes.iter().map(|s| s.next.load(Relaxed)).sum()
    }
}

/// A robust estimate of the mean running time (seconds).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CostEstimate {
    pub mean_s: f64,
    /// Standard error of `mean_s`.
    pub se_s: f64,
    /// Measurements kept, and those rejected as descheduled.
    pub kept: usize,
    pub rejected: usize,
}

/// The Hampel-filtered mean of measured running times (ns), with its
/// standard error; `None` without measurements. `values` is reordered.
///
/// ```
/// use evflow_core::ordering::robust_cost;
/// // 5 µs with ±10% jitter, and two threads descheduled for milliseconds.
/// let mut ns: Vec<u64> = (0..40).map(|i| 4_500 + (i * 25) % 1_000).collect();
/// ns.extend([3_000_000, 1_200_000]);
/// let e = robust_cost(&mut ns).unwrap();
/// assert_eq!(e.rejected, 2);
/// assert!((e.mean_s - 5.0e-6).abs() < 0.2e-6 && e.se_s < 0.2e-6);
/// ```
pub fn robust_cost(values: &mut [u64]) -> Option<CostEstimate> {
    if values.is_empty() {
        return None;
    }
    values.sort_unstable();
    let n = values.len();
    let median = quantile_sorted(values, 0.5);
    let mut dev: Vec<f64> = values.iter().map(|&v| (v as f64 - median).abs()).collect();
    dev.sort_unstable_by(f64::total_cmp);
    let mad = if n % 2 == 1 {
        dev[n / 2]
    } else {
        0.5 * (dev[n / 2 - 1] + dev[n / 2])
    };
    // A floor on the spread: measurements identical to the clock's
    // resolution must not make every slightly longer one an outlier.
    let spread = (1.4826 * mad).max(0.05 * median);
    let fence = median + (HAMPEL_K * spread).max(DESCHEDULED_NS);
    let kept: &[u64] = &values[..values.partition_point(|&v| v as f64 <= fence)];
    let k = kept.len();
    let mean = kept.iter().map(|&v| v as f64).sum::<f64>() / k as f64;
    let var = if k > 1 {
        kept.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / (k - 1) as f64
    } else {
        // One measurement: as uncertain as its own size.
        mean * mean
    };
    Some(CostEstimate {
        mean_s: mean * 1e-9,
        se_s: (var / k as f64).sqrt() * 1e-9,
        kept: k,
        rejected: n - k,
    })
}

/// Bits of a ring slot that hold the events of a batch timing (the rest:
/// its running time per event, in picoseconds).
const BATCH_EVENT_BITS: u32 = 24;
const BATCH_COST_BITS: u32 = 64 - BATCH_EVENT_BITS;

/// One timing of a step run on a batch, packed for a [`Ring`]: the running
/// time per event seen and the events (its weight, capped at 2^24).
pub(crate) fn pack_batch(seconds: f64, events: u64) -> u64 {
    let ps = (seconds * 1e12 / events.max(1) as f64)
        .round()
        .clamp(0.0, ((1u64 << BATCH_COST_BITS) - 1) as f64) as u64;
    events.clamp(1, (1 << BATCH_EVENT_BITS) - 1) << BATCH_COST_BITS | ps
}

/// The (seconds per event, events) of a [`pack_batch`] value.
pub(crate) fn unpack_batch(v: u64) -> (f64, u64) {
    (
        (v & ((1u64 << BATCH_COST_BITS) - 1)) as f64 * 1e-12,
        v >> BATCH_COST_BITS,
    )
}

/// A batch timing per event more than this fraction above the median (and
/// above `BATCH_HAMPEL_K` robust deviations) was slowed by other processes.
const BATCH_SLOWER: f64 = 0.2;
const BATCH_HAMPEL_K: f64 = 3.0;

/// One timing of a batch counts as at most this many timings of one event
/// (a single one is trusted to 10%).
pub(crate) const BATCH_TIMING_WEIGHT: f64 = 100.0;

/// The robust cost per event of a step run on batches, from its timings
/// `(seconds per event, events)`, with the weight it has as timings of
/// single events (for the shrinking towards the other steps' estimates); `None` without timings. `values` is
/// reordered (and cleared of empty timings).
///
/// Timings of batches of different sizes are only comparable per event,
/// and other processes only ever add time (a descheduled thread, a late
/// wake-up, a lock held elsewhere: milliseconds that a 4 ms call of a cut on
/// few events cannot average away): a timing more than
/// `max(BATCH_SLOWER · median, BATCH_HAMPEL_K · 1.4826 · MAD)` above the
/// events-weighted median per event is left out, and the others give the
/// events-weighted mean (total time over total events).
///
/// ```
/// use evflow_core::ordering::robust_batch_cost;
/// // About 0.4 µs per event on two batches; a call on 20 000 events 4 ms
/// // late; a probe of 4096 events in four chunks, one of them slowed.
/// let mut t = vec![(0.40e-6, 100_000), (0.41e-6, 100_000), (0.60e-6, 20_000)];
/// t.extend([(0.40e-6, 1024), (0.41e-6, 1024), (0.39e-6, 1024), (0.9e-6, 1024)]);
/// let (e, _) = robust_batch_cost(&mut t).unwrap();
/// assert_eq!(e.rejected, 2);
/// assert!((e.mean_s - 0.405e-6).abs() < 0.005e-6);
/// ```
pub fn robust_batch_cost(values: &mut Vec<(f64, u64)>) -> Option<(CostEstimate, f64)> {
    // Timings without events or with a non-finite time say nothing.
    values.retain(|&(x, e)| e > 0 && x.is_finite() && x >= 0.0);
    if values.is_empty() {
        return None;
    }
    values.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
    let median = weighted_median(values.iter().copied());
    let mut dev: Vec<(f64, u64)> = values
        .iter()
        .map(|&(x, e)| ((x - median).abs(), e))
        .collect();
    dev.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
    let mad = weighted_median(dev.into_iter());
    let fence = median + (BATCH_SLOWER * median).max(BATCH_HAMPEL_K * 1.4826 * mad);
    let k = values.partition_point(|&(x, _)| x <= fence);
    let kept = &values[..k];
    let w: f64 = kept.iter().map(|&(_, e)| e as f64).sum();
    let mean = kept.iter().map(|&(x, e)| x * e as f64).sum::<f64>() / w;
    let pseudo: f64 = kept
        .iter()
        .map(|&(_, e)| (e as f64).min(BATCH_TIMING_WEIGHT))
        .sum();
    let se = if k > 1 {
        // Weighted by events: the effective number of timings.
        let w2: f64 = kept.iter().map(|&(_, e)| (e as f64).powi(2)).sum();
        let n_eff = w * w / w2;
        let var = kept
            .iter()
            .map(|&(x, e)| e as f64 * (x - mean).powi(2))
            .sum::<f64>()
            / w
            * n_eff
            / (n_eff - 1.0).max(1e-9);
        (var / n_eff).sqrt()
    } else {
        // One timing averages its events: as uncertain as its size over the
        // square root of its weight.
        mean / pseudo.sqrt()
    };
    Some((
        CostEstimate {
            mean_s: mean,
            se_s: se,
            kept: k,
            rejected: values.len() - k,
        },
        pseudo,
    ))
}

/// The events-weighted median of `(value, events)` pairs sorted by value.
fn weighted_median(sorted: impl Iterator<Item = (f64, u64)> + Clone) -> f64 {
    let total: u64 = sorted.clone().map(|(_, e)| e).sum();
    let mut acc = 0u64;
    let mut last = 0.0;
    for (x, e) in sorted {
        acc += e;
        last = x;
        if 2 * acc >= total {
            break;
        }
    }
    last
}

fn quantile_sorted(sorted: &[u64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let f = pos - lo as f64;
    sorted[lo] as f64 * (1.0 - f) + sorted[hi] as f64 * f
}

/// A producer's running time in a first probe before a path (see
/// [`OrderingPlanner::decide_from_probe`](super::OrderingPlanner::decide_from_probe)):
/// computed once on `events` events of the probe, for the steps that
/// needed it.
#[derive(Clone, Debug, PartialEq)]
pub struct ProbedProducer {
    /// The producer's module label.
    pub label: String,
    /// Its running time (seconds), its own only (not that of the
    /// producers it consumes, which are reported apart).
    pub seconds: f64,
    /// The events it computed.
    pub events: u64,
}

/// A step's measured cost: (mean, standard error, measurements of the step
/// itself), in seconds; `None` for a step never timed.
pub(crate) type Measured = Option<(f64, f64, usize)>;

/// Shrinks step cost estimates measured on few executions towards the
/// median of all the steps' estimates (`PRIOR_MEASUREMENTS` pseudo
/// measurements): while timings are few, the order is decided mostly by
/// the pass rates, which are exact counts, and a single noisy timing cannot
/// send a step to the end of the path. Returns (cost, standard error) per
/// step; a step without measurement gets the pooled value, with an
/// uncertainty as large as it.
pub(crate) fn shrink(estimates: &[Measured]) -> Vec<(f64, f64)> {
    let pool = pool(estimates);
    estimates.iter().map(|e| shrink_towards(*e, pool)).collect()
}

/// The pooled cost of [`shrink`]: the median of the measured estimates
/// (1 µs when none is).
pub(crate) fn pool(estimates: &[Measured]) -> f64 {
    let mut known: Vec<f64> = estimates.iter().flatten().map(|e| e.0).collect();
    known.sort_unstable_by(f64::total_cmp);
    if known.is_empty() {
        1e-6
    } else {
        known[(known.len() - 1) / 2]
    }
}

/// One estimate shrunk towards `pool` as in [`shrink`].
pub(crate) fn shrink_towards(estimate: Measured, pool: f64) -> (f64, f64) {
    match estimate {
        None => (pool, pool),
        Some((mean, se, n)) => {
            let n = n as f64;
            let w = n / (n + PRIOR_MEASUREMENTS);
            let c = w * mean + (1.0 - w) * pool;
            // The pooled part is uncertain by the distance it moved.
            let se = (w * se).hypot((1.0 - w) * (pool - mean).abs());
            (c.max(1e-9), se)
        }
    }
}

/// Pseudo measurements of the pooled cost in [`shrink`].
const PRIOR_MEASUREMENTS: f64 = 3.0;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descheduled_measurements_are_rejected_and_variable_costs_kept() {
        // A cost that is genuinely variable (1 to 3 µs, uniform) keeps its
        // mean of 2 µs.
        let mut v: Vec<u64> = (0..200).map(|i| 1_000 + (i * 37 % 200) * 10).collect();
        let true_mean = v.iter().sum::<u64>() as f64 / 200.0;
        v.extend([800_000, 2_500_000, 6_000_000]);
        let e = robust_cost(&mut v).unwrap();
        assert_eq!(e.rejected, 3);
        assert!((e.mean_s * 1e9 - true_mean).abs() < 1.0);
        // A skewed but real tail (a tenth of the events 20 times costlier,
        // below the descheduling floor) is kept: the mean is unbiased.
        let mut v: Vec<u64> = (0..100)
            .map(|i| if i % 10 == 0 { 100_000 } else { 5_000 })
            .collect();
        let e = robust_cost(&mut v).unwrap();
        assert_eq!(e.rejected, 0);
        assert!((e.mean_s - 14.5e-6).abs() < 1e-9);
    }

    #[test]
    fn the_ring_keeps_the_most_recent_measurements() {
        let r = Ring::new();
        for i in 0..(RING as u64 + 10) {
            r.push(i);
        }
        let mut out = Vec::new();
        r.snapshot(&mut out);
        assert_eq!(out.len(), RING);
        assert_eq!(*out.iter().min().unwrap(), 10);
        assert_eq!(r.pushed(), RING as u64 + 10);
        r.recent(3, &mut out);
        // One thread: one stripe.
        assert_eq!(out, [RING as u64 + 9, RING as u64 + 8, RING as u64 + 7]);
        r.keep_recent(3);
        r.snapshot(&mut out);
        out.sort_unstable();
        assert_eq!(out, [RING as u64 + 7, RING as u64 + 8, RING as u64 + 9]);
    }

    #[test]
    fn few_measurements_are_shrunk_towards_the_others() {
        let est = [Some((4e-3, 0.0, 1)), Some((5e-6, 1e-7, 100)), None];
        let s = shrink(&est);
        // One 4 ms timing of a step that others measure at 5 µs: a quarter of it.
        assert!(s[0].0 < 1.1e-3 && s[0].0 > 0.9e-3 && s[0].1 > 0.5e-3);
        assert!((s[1].0 - 5e-6).abs() < 1e-9);
        assert_eq!(s[2], (5e-6, 5e-6));
    }
}
