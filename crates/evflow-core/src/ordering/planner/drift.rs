//! Drift: the likelihood-ratio test of the stop counts of recent blocks
//! against what came before, and re-learning when a pass rate moved.

use std::collections::VecDeque;

use super::OrderingPlanner;
use super::state::*;
use super::stats::*;

/// Drift: the recent window, in blocks, compared with what came before.
pub(super) const DRIFT_RECENT_BLOCKS: usize = 8;
/// A difference of pass rate is a drift when larger than this and
/// significant at `DRIFT_Z` standard deviations (likelihood-ratio test,
/// better calibrated than a normal approximation for rare rejections).
pub(super) const DRIFT_MIN_DIFF: f64 = 0.05;
pub(super) const DRIFT_Z: f64 = 5.0;
/// Fewest events reaching a step, on each side, for a drift test.
pub(super) const DRIFT_MIN_EVENTS: u64 = 30;

impl OrderingPlanner {
    /// Compares the pass rate of each step on the events reaching it, in
    /// the current order, in the last block and in the recent blocks with
    /// what came before; on a significant difference, forgets the samples
    /// and learns again.
    pub(super) fn drift_check(&self, d: &Dyn, st: &mut State, n_obs: u64) {
        self.cost_shift_check(d, st, n_obs);
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
    pub(super) fn relearn(&self, d: &Dyn, st: &mut State, cur: &Current, n_obs: u64, note: String) {
        let t = &self.tuning;
        lock(&d.samples).clear();
        d.stops.reset();
        st.drift = DriftState::default();
        st.archive.clear();
        st.imported = None;
        st.trial = None;
        st.refuted.clear();
        st.stable = 0;
        st.drift_note = Some(note);
        st.learning = true;
        st.phase_start = n_obs;
        st.interval = t.min_interval.max(1);
        st.next_decision = n_obs + first_step(t, d.per_obs());
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
        settle_constraints(&mut st.rates, &d.preds(), &st.heavy);
        // Re-learning measures after every rejection alike.
        st.targeted.clear();
        d.put_current(cur.groups.clone(), st);
    }
}

/// The likelihood-ratio (G) statistic of a 2×2 table of (passed,
/// rejected) counts in two periods; chi-squared with one degree of freedom
/// when the pass rate did not change.
pub(super) fn g_statistic(a: [u64; 2], b: [u64; 2]) -> f64 {
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
