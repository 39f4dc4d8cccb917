//! Robust decisions of `adaptive`: step costs from the rings of recent
//! timings (robust, shrunk while few; per event seen for batch steps), the
//! uncertainty of the gain of a change of order, changes of cost between
//! decisions, and the imputation of undecided steps from the samples that
//! measured them after the same rejection.

use std::sync::atomic::Ordering::Relaxed;

use super::OrderingPlanner;
use super::state::*;
use super::stats::*;
use crate::graph::ModuleIdx;
use crate::ordering::costs;
use crate::ordering::model::SharedCost;

/// Standard errors of the cost difference between two orders that their
/// expected gain must exceed (on top of the switching cost) for a switch.
pub(super) const SWITCH_Z: f64 = 2.0;
/// A step's robust cost that moved by this fraction (and by
/// `COST_SHIFT_Z` standard errors) since the last decision brings the next
/// decision forward.
const COST_SHIFT: f64 = 0.5;
const COST_SHIFT_Z: f64 = 4.0;
/// Recent measurements per module (and thread stripe) compared with the
/// last decision's cost.
const COST_RECENT: usize = 32;

impl OrderingPlanner {
    /// Whether step `i` runs on batches (its timings are then per event
    /// seen).
    pub(super) fn batch_step(&self, d: &Dyn, i: usize) -> bool {
        d.batch_runs[i].load(Relaxed) > 0
            || self.batch_rings[d.steps[i]]
                .as_ref()
                .is_some_and(|r| r.pushed() > 0)
    }

    /// The robust cost of each step (its own running time plus that of
    /// the producers only it needs) from the recent measurements, and the
    /// measurements rejected as descheduled. A step run on batches: its
    /// cost per event seen (the running time of a columnar cut grows with
    /// the events it sees), so that costs and pass rates are in the same
    /// unit whatever the order.
    pub(super) fn measure_costs(&self, d: &Dyn) -> (Vec<costs::Measured>, Vec<u64>) {
        let mut buf = Vec::with_capacity(costs::RING);
        let mut batch = Vec::with_capacity(costs::RING);
        let mut rejected = vec![0u64; d.steps.len()];
        let est = d
            .attributed
            .iter()
            .enumerate()
            .zip(&mut rejected)
            .map(|((i, list), rej)| {
                let (mut mean, mut var, mut own) = (0.0, 0.0, None);
                // Timings per call of a step run on batches (its producers,
                // or the step without its events known) are spread over
                // the events the step saw per call.
                let seen = d.batch_seen[i].load(Relaxed);
                let per = if seen > 0 {
                    d.batch_runs[i].load(Relaxed) as f64 / seen as f64
                } else {
                    1.0
                };
                for (k, &m) in list.iter().enumerate() {
                    if k == 0
                        && let Some(ring) = &self.batch_rings[m]
                    {
                        ring.snapshot(&mut buf);
                        batch.clear();
                        batch.extend(buf.iter().map(|&v| costs::unpack_batch(v)));
                        if let Some((e, weight)) = costs::robust_batch_cost(&mut batch) {
                            mean += e.mean_s;
                            var += e.se_s * e.se_s;
                            *rej += e.rejected as u64;
                            // Worth as many timings of single events, up to
                            // `BATCH_TIMING_WEIGHT` each (the machine's
                            // noise is common to a batch's events): not
                            // shrunk towards the other steps.
                            own = Some(weight as usize);
                            continue;
                        }
                    }
                    let Some(ring) = &self.rings[m] else { continue };
                    ring.snapshot(&mut buf);
                    if let Some(e) = costs::robust_cost(&mut buf) {
                        let (m_s, mut se) = (e.mean_s * per, e.se_s * per);
                        let mut kept = e.kept;
                        if k == 0 && seen > 0 {
                            // Timings of whole batches without their events
                            // (the average over all of them is the scale).
                            let weight = (1.0 / per).clamp(1.0, costs::BATCH_TIMING_WEIGHT);
                            if kept == 1 {
                                se /= weight.sqrt();
                            }
                            kept = (kept as f64 * weight) as usize;
                        }
                        mean += m_s;
                        var += se * se;
                        *rej += e.rejected as u64;
                        if k == 0 {
                            own = Some(kept);
                        }
                    }
                }
                own.map(|n| (mean, var.sqrt(), n))
            })
            .collect();
        (est, rejected)
    }

    /// The robust cost per execution of each producer of `list`
    /// (`Dyn::shared` or `Dyn::outside`), like a step's own. Its timings
    /// per event seen (a first probe's) and per call are combined, weighted
    /// by their measurements, so that the calls' outweigh the probe's as
    /// they accumulate. On batches, a
    /// call computes the events of the first step that needs it, which saw
    /// the most events per call among its steps: a timing per call is
    /// spread over those, and counts as a batch step's timing does.
    pub(super) fn measure_shared(
        &self,
        d: &Dyn,
        list: &[(ModuleIdx, u64)],
    ) -> Vec<costs::Measured> {
        let mut buf = Vec::with_capacity(costs::RING);
        let mut batch = Vec::with_capacity(costs::RING);
        list.iter()
            .map(|&(m, by)| {
                let probed = self.batch_rings[m].as_ref().and_then(|ring| {
                    ring.snapshot(&mut buf);
                    batch.clear();
                    batch.extend(buf.iter().map(|&v| costs::unpack_batch(v)));
                    let (e, weight) = costs::robust_batch_cost(&mut batch)?;
                    Some((e.mean_s, e.se_s, weight as usize))
                });
                let called = self.rings[m].as_ref().and_then(|ring| {
                    ring.snapshot(&mut buf);
                    let e = costs::robust_cost(&mut buf)?;
                    let per = (0..d.steps.len())
                        .filter(|&i| by >> i & 1 == 1)
                        .filter_map(|i| {
                            let seen = d.batch_seen[i].load(Relaxed);
                            (seen > 0).then(|| d.batch_runs[i].load(Relaxed) as f64 / seen as f64)
                        })
                        .reduce(f64::min);
                    let Some(per) = per else {
                        return Some((e.mean_s, e.se_s, e.kept));
                    };
                    // Timings of whole batches: each worth as many timings
                    // of single events as a batch step's.
                    let weight = (1.0 / per).clamp(1.0, costs::BATCH_TIMING_WEIGHT);
                    let se = if e.kept == 1 {
                        e.se_s / weight.sqrt()
                    } else {
                        e.se_s
                    };
                    Some((e.mean_s * per, se * per, (e.kept as f64 * weight) as usize))
                });
                super::exchange::with_imported_cost(called, super::exchange::step_cost(probed))
            })
            .collect()
    }

    /// Updates the per-step cost estimates (robust, shrunk towards the
    /// other steps while measured on few executions), and those of the
    /// producers several steps need (shrunk towards the steps' alike; one
    /// never timed costs nothing until it is), and what those also needed
    /// outside the path cost to run for a measurement.
    pub(super) fn update_costs(&self, d: &Dyn, st: &mut State) {
        let (mut est, rejected) = self.measure_costs(d);
        if let Some(imp) = &st.imported {
            for (e, &c) in est.iter_mut().zip(&imp.costs) {
                *e = super::exchange::with_imported_cost(*e, c);
            }
        }
        for (i, (c, se)) in costs::shrink(&est).into_iter().enumerate() {
            st.cost_known[i] = est[i].is_some();
            st.costs[i] = c;
            st.cost_se[i] = se;
            st.decided_costs[i] = est[i].map_or(f64::NAN, |e| e.0);
        }
        let pool = costs::pool(&est);
        for (k, mut e) in self.measure_shared(d, &d.shared).into_iter().enumerate() {
            if let Some(imp) = &st.imported {
                e = super::exchange::with_imported_cost(e, imp.shared.get(k).copied().flatten());
            }
            let (c, se) = match e {
                Some(_) => costs::shrink_towards(e, pool),
                None => (0.0, 0.0),
            };
            st.shared[k] = SharedCost {
                needed_by: d.shared[k].1,
                cost: c,
            };
            st.shared_se[k] = se;
            st.decided_shared[k] = e.map_or(f64::NAN, |e| e.0);
        }
        // Producers also needed outside the path: what running one for a
        // measurement costs, as a step's (the larger of the estimate and its
        // shrunk value); and, for the search, charged as the shared ones on
        // the share of the events on which nothing outside ran it.
        st.shared.truncate(st.path_shared);
        st.shared_se.truncate(st.path_shared);
        st.outside_share = self.outside_share(d, st);
        for (k, mut e) in self.measure_shared(d, &d.outside).into_iter().enumerate() {
            if let Some(Some(imp)) = st.imported.as_ref().map(|i| &i.outside[k]) {
                e = super::exchange::with_imported_cost(e, Some(imp.cost));
            }
            st.outside[k].cost = e.map_or(0.0, |m| costs::shrink_towards(e, pool).0.max(m.0));
            let (c, se) = match e {
                Some(_) => costs::shrink_towards(e, pool),
                None => (0.0, 0.0),
            };
            let charged = 1.0 - st.outside_share[k];
            st.shared.push(SharedCost {
                needed_by: d.outside[k].1,
                cost: charged * c,
            });
            st.shared_se.push(charged * se);
        }
        st.rejected = rejected;
    }

    /// Brings the next decision forward when a step's recent running
    /// times (the last `COST_RECENT` measurements of each of its modules,
    /// robust) moved clearly from the cost of the last decision (by
    /// `COST_SHIFT` of it and `COST_SHIFT_Z` standard errors): a genuine
    /// change, not noise, which the robust estimate rejects or averages.
    /// The older measurements of the step are then forgotten, and its
    /// next `COST_EARLY_CALLS` executions are all timed.
    pub(super) fn cost_shift_check(&self, d: &Dyn, st: &mut State, n_obs: u64) {
        let mut buf = Vec::with_capacity(COST_RECENT);
        for (i, list) in d.attributed.iter().enumerate() {
            if self.batch_step(d, i) {
                continue;
            }
            let before = st.decided_costs[i];
            let Some(now) = self.cost_shift(list, before, &mut buf) else {
                continue;
            };
            st.cost_note = Some(format!(
                "running time of '{}' changed from {} to {} at event {n_obs}",
                self.labels[d.steps[i]],
                micros(before),
                micros(now)
            ));
            st.decided_costs[i] = now;
            st.next_decision = st.next_decision.min(n_obs);
            st.interval = self.tuning.min_interval.max(1);
        }
        for (k, &(m, by)) in d.shared.iter().enumerate() {
            if (0..d.steps.len()).any(|i| by >> i & 1 == 1 && self.batch_step(d, i)) {
                continue;
            }
            let before = st.decided_shared[k];
            let Some(now) = self.cost_shift(&[m], before, &mut buf) else {
                continue;
            };
            st.cost_note = Some(format!(
                "running time of the shared producer '{}' changed from {} to {} at event {n_obs}",
                self.labels[m],
                micros(before),
                micros(now)
            ));
            st.decided_shared[k] = now;
            st.next_decision = st.next_decision.min(n_obs);
            st.interval = self.tuning.min_interval.max(1);
        }
    }

    /// The robust cost of the recent measurements of `list` (a step and
    /// its private producers, or a shared producer) when it moved clearly
    /// from `before`; the older measurements are then forgotten and the
    /// next `COST_EARLY_CALLS` executions of each module all timed.
    fn cost_shift(&self, list: &[ModuleIdx], before: f64, buf: &mut Vec<u64>) -> Option<f64> {
        if !before.is_finite() {
            return None;
        }
        let (mut now, mut var, mut kept) = (0.0, 0.0, usize::MAX);
        for (k, &m) in list.iter().enumerate() {
            let Some(ring) = &self.rings[m] else { continue };
            ring.recent(COST_RECENT, buf);
            if let Some(e) = costs::robust_cost(buf) {
                now += e.mean_s;
                var += e.se_s * e.se_s;
                if k == 0 {
                    kept = e.kept;
                }
            }
        }
        if kept < COST_RECENT / 2
            || (now - before).abs() <= (COST_SHIFT * before).max(COST_SHIFT_Z * var.sqrt())
        {
            return None;
        }
        for &m in list {
            if let Some(ring) = &self.rings[m] {
                ring.keep_recent(COST_RECENT);
                // Timed on every execution again for a while, as at the
                // start, so that the new cost is known within tens of
                // executions rather than hundreds of strided ones.
                self.every_until[m].store(ring.pushed() + COST_EARLY_CALLS, Relaxed);
                if self.cost_mode[m].load(Relaxed) == COST_STRIDED {
                    self.cost_mode[m].store(COST_EVERY, Relaxed);
                }
            }
        }
        Some(now)
    }
}

/// Standard error of the difference of the expected costs of two orders
/// due to the cost estimates' uncertainty: the difference is
/// `Σ_j c_j (reach_a(j) − reach_b(j))`, with `reach(j)` the probability
/// that an event reaches step `j` along the order, plus, per shared
/// producer (`shared`, standard errors `shared_se`), its cost times the
/// difference of the reach of the first of its steps in each order.
pub(super) fn gap_sigma(
    pm: &PassModel,
    se: &[f64],
    shared: &[SharedCost],
    shared_se: &[f64],
    a: &[usize],
    b: &[usize],
) -> f64 {
    let reach = |order: &[usize]| {
        let mut r = vec![0.0; se.len()];
        let mut passed = 0u64;
        for &j in order {
            r[j] = pm.pass(passed);
            passed |= 1 << j;
        }
        r
    };
    let (ra, rb) = (reach(a), reach(b));
    // The reach of the first step of `order` among `by`.
    let first = |order: &[usize], r: &[f64], by: u64| {
        order
            .iter()
            .find(|&&j| by >> j & 1 == 1)
            .map_or(0.0, |&j| r[j])
    };
    let steps: f64 = se
        .iter()
        .zip(ra.iter().zip(&rb))
        .map(|(s, (x, y))| (s * (x - y)).powi(2))
        .sum();
    let producers: f64 = shared
        .iter()
        .zip(shared_se)
        .map(|(p, s)| (s * (first(a, &ra, p.needed_by) - first(b, &rb, p.needed_by))).powi(2))
        .sum();
    (steps + producers).sqrt()
}

/// Per step: the steps before it in order `a` that are not before it in
/// order `b` (those it jumps in `b`). A step with any runs, in `b`, on
/// events that `a` stops before it; its pass rates on those events (which
/// `a`'s stop counts cannot show, only samples measuring it after a
/// rejection) decide whether `b` costs less.
pub(super) fn jumped(a: &[usize], b: &[usize]) -> Vec<u64> {
    let (pa, pb) = (prefixes(a), prefixes(b));
    pa.iter().zip(&pb).map(|(x, y)| x & !y).collect()
}

/// The steps preceded by a different set of steps in order `a` than in
/// order `b`: the others are reached by the same events in both.
pub(super) fn prefix_differs(a: &[usize], b: &[usize]) -> u64 {
    let (pa, pb) = (prefixes(a), prefixes(b));
    (0..a.len())
        .filter(|&j| pa[j] != pb[j])
        .fold(0u64, |m, j| m | 1 << j)
}

/// Per step: the set of steps before it in `order`.
fn prefixes(order: &[usize]) -> Vec<u64> {
    let mut before = vec![0u64; order.len()];
    let mut seen = 0u64;
    for &j in order {
        before[j] = seen;
        seen |= 1 << j;
    }
    before
}

/// The distinct decision vectors of the samples, with their counts: the
/// donors from which a sample's undecided steps are imputed.
///
/// A step `j` that a sample `s` did not measure (it was not sampled after a
/// rejection) is imputed from the samples that measured it, failed a step
/// that `s` failed too, and failed none that `s` passed: so that a step
/// correlated with the one that rejected the event (a tighter twin) is not
/// taken for independent of it, and so that a sample that passed `t100`
/// and was rejected by `t5` is not imputed from samples that `t100`
/// rejected as well, on which `t100`'s twin fails with it. The step's pass
/// rate on the events reaching it weighs as `PAIR_PRIOR` samples.
pub(super) struct Donors {
    n: usize,
    patterns: Vec<(Sample, f64)>,
}

/// The step's pass rate on the events reaching it weighs as this many
/// samples in [`Donors::conditional`].
const PAIR_PRIOR: f64 = 2.0;

impl Donors {
    pub(super) fn new(n: usize, samples: &[Sample]) -> Self {
        let full = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
        let mut keys: Vec<(u64, u64)> = if samples.iter().any(|s| s.known & full != full) {
            samples
                .iter()
                .map(|s| (s.known, s.pass & s.known))
                .collect()
        } else {
            Vec::new()
        };
        keys.sort_unstable();
        let mut patterns: Vec<(Sample, f64)> = Vec::new();
        for (known, pass) in keys {
            match patterns.last_mut() {
                Some((p, count)) if p.known == known && p.pass == pass => *count += 1.0,
                _ => patterns.push((Sample { known, pass }, 1.0)),
            }
        }
        Self { n, patterns }
    }

    /// The pass rate of each `unknown` step of sample `s` given the steps
    /// it failed and passed (`q`: the pass rates on the events reaching
    /// each step, the prior), into `out`.
    pub(super) fn conditional(&self, s: &Sample, unknown: u64, q: &[f64], out: &mut [f64]) {
        let failed = s.known & !s.pass;
        let passed = s.known & s.pass;
        let mut measured = vec![0.0f64; self.n];
        let mut passing = vec![0.0f64; self.n];
        for (t, count) in &self.patterns {
            let t_failed = t.known & !t.pass;
            if t_failed & failed == 0 || t_failed & passed != 0 {
                continue;
            }
            let mut m = t.known & unknown;
            while m != 0 {
                let j = m.trailing_zeros() as usize;
                m &= m - 1;
                measured[j] += count;
                if t.pass >> j & 1 == 1 {
                    passing[j] += count;
                }
            }
        }
        let mut rest = unknown;
        while rest != 0 {
            let j = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            out[j] = (passing[j] + PAIR_PRIOR * q[j]) / (measured[j] + PAIR_PRIOR);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jumped_marks_the_steps_run_on_events_stopped_before_them() {
        // 0 > 1 > 2 against 2 > 0 > 1: only 2 runs on events 0 or 1 stop.
        assert_eq!(jumped(&[0, 1, 2], &[2, 0, 1]), [0, 0, 0b011]);
        assert_eq!(jumped(&[0, 1, 2], &[0, 1, 2]), [0, 0, 0]);
        assert_eq!(jumped(&[0, 1, 2], &[1, 0, 2]), [0, 0b001, 0]);
        assert_eq!(prefix_differs(&[0, 1, 2], &[1, 0, 2]), 0b011);
    }

    /// Step 0 and step 2 are twins; step 1 is independent of both. Ten
    /// samples rejected by 0 measured 1 and 2 after it, and both failed. A
    /// sample that passed 0 and was rejected by 1 is imputed on 2 from the
    /// samples that failed 1 and not 0 (none: the pass rate of 2 on the
    /// events reaching it), not from those that its twin rejected; one
    /// rejected by 0 is imputed from those, its twin failing.
    #[test]
    fn undecided_steps_are_imputed_from_samples_consistent_with_them() {
        let mut samples = vec![
            Sample {
                known: 0b111,
                pass: 0
            };
            10
        ];
        samples.push(Sample {
            known: 0b011,
            pass: 0b001,
        });
        let donors = Donors::new(3, &samples);
        let q = [0.5, 0.5, 0.9];
        let mut out = [0.0; 3];
        let s = Sample {
            known: 0b011,
            pass: 0b001,
        };
        donors.conditional(&s, 0b100, &q, &mut out);
        assert!((out[2] - 0.9).abs() < 1e-12, "{out:?}");
        donors.conditional(
            &Sample {
                known: 0b001,
                pass: 0,
            },
            0b110,
            &q,
            &mut out,
        );
        assert!(out[2] < 0.2 && out[1] < 0.2, "{out:?}");
    }
}
