//! Verifying a change of order: the new order's own stop counts against
//! the pass rates its choice predicted, and undoing a change they refute.
//!
//! A change rests on the estimate of the joint pass distribution, in which
//! the decisions that were never measured (steps not sampled after a
//! rejection) are imputed. Once the new order runs, every event measures
//! exactly the pass rate of each step on the events reaching it there.
//! When that of a step whose place changed (the set of steps before it
//! differs) contradicts the prediction beyond doubt, the prediction no
//! longer stands for the change, and the two orders are compared on what
//! their events cost: the work of the steps whose place changed, per event,
//! in each order's own stop counts (exact, up to the sampling noise of the
//! events each order ran on). The change is undone when the new order costs
//! more beyond that noise; the refuted order is not taken again until the
//! samples have doubled (or the data drift).

use super::OrderingPlanner;
use super::state::*;
use super::stats::*;
use crate::ordering::model;

/// A prediction is refuted at `VERIFY_Z` standard deviations
/// (likelihood-ratio test) and a difference of pass rate beyond
/// `VERIFY_MIN_DIFF`, on at least `VERIFY_MIN_EVENTS` events reaching the
/// step.
pub(super) const VERIFY_Z: f64 = 4.0;
pub(super) const VERIFY_MIN_DIFF: f64 = 0.05;
pub(super) const VERIFY_MIN_EVENTS: u64 = 30;
/// A refuted change is undone when the new order's cost exceeds the
/// previous one's by this many standard errors of the difference.
pub(super) const UNDO_Z: f64 = 2.0;

/// The one-sample likelihood-ratio (G) statistic of `passed` of `reached`
/// events against a pass rate `p`: chi-squared with one degree of freedom
/// when `p` is the true rate.
pub(super) fn g_against(passed: u64, reached: u64, p: f64) -> f64 {
    let p = p.clamp(1e-9, 1.0 - 1e-9);
    let (x, r) = (passed as f64, reached as f64);
    let term = |o: f64, e: f64| if o > 0.0 { o * (o / e).ln() } else { 0.0 };
    2.0 * (term(x, r * p) + term(r - x, r * (1.0 - p)))
}

/// The first position of `order` among the steps `tested` whose pass rate
/// measured by the stop counts (`n + 1` entries, the last: accepted)
/// refutes its prediction: (position, events reaching it, measured rate).
pub(super) fn refuted_at(
    stops: &[u64],
    order: &[usize],
    predicted: &[f64],
    tested: u64,
) -> Option<(usize, u64, f64)> {
    let mut reached: u64 = stops.iter().sum();
    for (i, (&j, &p)) in order.iter().zip(predicted).enumerate() {
        if reached < VERIFY_MIN_EVENTS {
            return None;
        }
        let passed = reached - stops[i];
        let rate = passed as f64 / reached as f64;
        if tested >> j & 1 == 1
            && (rate - p).abs() > VERIFY_MIN_DIFF
            && g_against(passed, reached, p) > VERIFY_Z * VERIFY_Z
        {
            return Some((i, reached, rate));
        }
        reached = passed;
    }
    None
}

/// The work per event of the steps `counted` of `order`, over the events
/// of its stop counts: (mean, variance of the mean). An event rejected at
/// position `s` ran the steps up to `s`. The variance counts half an
/// event more at every position, so that a rare, costly outcome that a
/// short period happened not to see still counts as possible (a few dozen
/// events rarely reach a step that 2% of the events reach).
pub(super) fn counted_cost(
    stops: &[u64],
    order: &[usize],
    costs: &[f64],
    counted: u64,
) -> (f64, f64) {
    let events: u64 = stops.iter().sum();
    if events == 0 {
        return (0.0, f64::INFINITY);
    }
    let mut spent = 0.0;
    let per_stop: Vec<f64> = (0..stops.len())
        .map(|s| {
            if let Some(&j) = order.get(s)
                && counted >> j & 1 == 1
            {
                spent += costs[j];
            }
            spent
        })
        .collect();
    let n = events as f64;
    let mean = stops
        .iter()
        .zip(&per_stop)
        .map(|(&c, &x)| c as f64 * x)
        .sum::<f64>()
        / n;
    let smoothed = n + 0.5 * stops.len() as f64;
    let var = stops
        .iter()
        .zip(&per_stop)
        .map(|(&c, &x)| (c as f64 + 0.5) * (x - mean).powi(2))
        .sum::<f64>()
        / smoothed;
    (mean, var / n)
}

impl OrderingPlanner {
    /// Checks the order on trial against its stop counts; undoes it when
    /// refuted and costlier than the order it replaced by what both
    /// measured.
    pub(super) fn verify_change(&self, d: &Dyn, st: &mut State, n_obs: u64) {
        let Some(trial) = &mut st.trial else {
            return;
        };
        let n = d.steps.len();
        let stops = d.stops.snapshot(n + 1);
        if trial.refuted.is_none() {
            let Some((i, reached, rate)) =
                refuted_at(&stops, &trial.order, &trial.predicted, trial.moved)
            else {
                return;
            };
            let label = &self.labels[d.steps[trial.order[i]]];
            trial.refuted = Some(format!(
                "'{label}' passed {:.1}% of the {reached} events reaching it in the new order, {:.1}% predicted",
                100.0 * rate,
                100.0 * trial.predicted[i],
            ));
        }
        let previous: Vec<usize> = trial.previous.iter().flatten().copied().collect();
        // A step whose place changed may be the first to need a shared
        // producer in one order and not in the other: each order charges
        // its own.
        let charged = |order: &[usize]| model::charged_costs(&st.costs, &st.shared, order);
        let (after, after_var) =
            counted_cost(&stops, &trial.order, &charged(&trial.order), trial.moved);
        let (before, before_var) = counted_cost(
            &trial.previous_stops,
            &previous,
            &charged(&previous),
            trial.moved,
        );
        if after - before <= UNDO_Z * (after_var + before_var).sqrt() {
            return;
        }
        let reason = format!(
            "the change at the previous decision is undone: {}; the steps whose place changed cost {} per event in the new order, {} in the previous one",
            trial.refuted.as_deref().unwrap_or_default(),
            micros(after),
            micros(before),
        );
        let samples = lock(&d.samples).total;
        st.refuted.push(Refuted {
            order: trial.order.clone(),
            until_samples: samples.max(1) * 2,
        });
        let groups = trial.previous.clone();
        let previous_stops = trial.previous_stops.clone();
        let cur = read(&d.current).clone();
        st.archive_epoch(Epoch {
            order: cur.order.clone(),
            stops,
        });
        st.trial = None;
        st.drift = DriftState::default();
        let current = make_current(&d.steps, groups, &st.rates, st.targets(&d.preds()));
        self.install(d, current, n_obs, reason);
        // The order back in force ran before the trial: its stop counts of
        // then are its own, and the drift test compares the events to come
        // with them. Without them a drift during the trial (which a
        // refuted prediction may well be) became the new reference and was
        // never seen: the order of before the drift ran to the end.
        for (i, &count) in previous_stops.iter().enumerate() {
            d.stops.add(i, count);
        }
        st.stable = 0;
        st.interval = self.tuning.min_interval.max(1);
        st.next_decision = n_obs + obs_for(st.interval, d.per_obs());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g_statistic_against_a_rate_is_zero_at_the_rate_and_grows_with_the_gap() {
        assert!(g_against(50, 100, 0.5).abs() < 1e-9);
        assert!(g_against(60, 100, 0.5) < g_against(70, 100, 0.5));
        assert!(g_against(0, 100, 0.5).is_finite());
        assert!(g_against(100, 100, 0.999_999) < 1e-3);
    }

    #[test]
    fn a_prediction_is_refuted_only_beyond_noise_and_the_minimum_difference() {
        // 1000 events; the second step passes 90% where 50% was predicted.
        let stops = [500, 50, 450];
        let order = [0, 1];
        assert_eq!(refuted_at(&stops, &order, &[0.5, 0.9], 0b11), None);
        let (i, reached, rate) = refuted_at(&stops, &order, &[0.5, 0.5], 0b11).expect("refuted");
        assert_eq!((i, reached), (1, 500));
        assert!((rate - 0.9).abs() < 1e-12);
        // Only the steps whose place changed are tested.
        assert_eq!(refuted_at(&stops, &order, &[0.5, 0.5], 0b01), None);
        // The same gap on 20 events is not enough.
        assert_eq!(refuted_at(&[10, 1, 9], &order, &[0.5, 0.5], 0b11), None);
        // A significant gap below the minimum difference is not either.
        assert_eq!(
            refuted_at(&[48_000, 0, 52_000], &order, &[0.5, 1.0], 0b11),
            None
        );
    }

    #[test]
    fn counted_cost_is_the_mean_work_of_the_counted_steps() {
        // Step 1 (3 µs) then step 0 (2 µs); 10 events: 4 stop at step 1,
        // 6 run both. Counting only step 0: 6 of 10 events spend 2 µs.
        let (mean, var) = counted_cost(&[4, 0, 6], &[1, 0], &[2.0, 3.0], 0b01);
        assert!((mean - 1.2).abs() < 1e-12);
        // Per event: 0 µs for 4.5 of 11.5 (smoothed), 2 µs for 7.
        let per_event = (4.5 * 1.44 + 0.5 * 0.64 + 6.5 * 0.64) / 11.5;
        assert!((var - per_event / 10.0).abs() < 1e-12, "{var}");
        // A period that never saw an outcome still allows for it.
        let (_, unseen) = counted_cost(&[32, 0, 0], &[0, 1], &[1.0, 100.0], 0b11);
        assert!(unseen.sqrt() > 2.0, "{unseen}");
        let (all, _) = counted_cost(&[4, 0, 6], &[1, 0], &[2.0, 3.0], 0b11);
        assert!((all - 4.2).abs() < 1e-12);
        assert_eq!(
            counted_cost(&[0, 0, 0], &[1, 0], &[2.0, 3.0], 0b11).1,
            f64::INFINITY
        );
    }
}
