//! The estimate of the joint pass distribution from the sampled decision
//! vectors and the exact stop counts: the samples, undecided steps
//! imputed, post-stratified on where events stop in each order, then raked
//! to those stop counts.

use super::robust::Donors;
use super::stats::*;
use crate::ordering::model::Joint;

/// The estimate of the joint pass distribution: the sampled decision
/// vectors, their undecided steps (not sampled after a rejection) imputed
/// from the samples that measured them and agree with the sample
/// ([`Donors`]) and the pass rate of the step on the events that reach it,
/// post-stratified on the step that rejected the event in each order of
/// `epochs` (whose stop counts measure the distribution of that step on
/// every event observed under the order), then raked to every epoch's stop
/// counts, the order in force last ([`rake`]). Returns the estimate and
/// those pass rates.
///
/// A sample falls in a stratum with the probability of its imputed
/// decisions: one that did not decide a step before the one that rejected
/// it (a warm-up sample under another order, an expensive step not
/// measured) may stop there. Stratified on its known failure alone, its
/// imputed failures moved weight from later strata to earlier ones, and
/// the estimate no longer reproduced the stop counts it was weighted by:
/// on a held-out pipeline it expected 47 µs per event for the order in
/// force, whose 40 000 events' stop counts gave 58 µs, and kept it.
///
/// With `T` the events of all epochs plus the samples, a sample weighs
/// `1/T` (the samples alone) plus, per epoch and per stratum `k` of that
/// epoch's order, `p_k N_k / (T m_k)`, where `p_k` is the probability
/// that it stops at `k`, `N_k` the events stopped there and `m_k` the sum
/// of the samples' `p_k`; within the stratum, its steps before `k` pass,
/// `k` fails and its undecided later steps are imputed. A stratum no
/// sample can reach contributes `N_k / T` to a vector in which the steps
/// before pass, the rejecting one fails and the later ones pass.
pub(super) fn estimate(n: usize, epochs: &[Epoch], samples: &[Sample]) -> (Joint, Vec<f64>) {
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
    let q = pass_rates(n, epochs, samples);
    let imputed = impute(n, full, samples, &q);
    let mut list: Vec<(u64, f64)> = Vec::new();
    // The samples alone.
    for s in &imputed {
        expand(n, s.pass, s.unknown, &s.rates, s.count / total, &mut list);
    }
    let mut parts: Vec<(usize, u64, u64, f64, usize)> = Vec::new();
    for e in epochs {
        // Per sample, the probability of each stratum (its first failure
        // along the order) under its imputed decisions, and the decisions
        // that stratum fixes.
        parts.clear();
        let mut mass = vec![0.0f64; n + 1];
        for (i, s) in imputed.iter().enumerate() {
            let mut before = s.count;
            let mut passed = s.pass;
            let mut unknown = s.unknown;
            let mut stopped = false;
            for (k, &j) in e.order.iter().enumerate() {
                let j = j as usize;
                let bit = 1u64 << j;
                if unknown & bit == 0 {
                    if s.pass & bit == 0 {
                        parts.push((k, passed, unknown, before, i));
                        mass[k] += before;
                        stopped = true;
                        break;
                    }
                    continue;
                }
                unknown &= !bit;
                let fail = before * (1.0 - s.rates[j]);
                if fail > 0.0 {
                    parts.push((k, passed, unknown, fail, i));
                    mass[k] += fail;
                }
                before *= s.rates[j];
                passed |= bit;
                if before <= 0.0 {
                    stopped = true;
                    break;
                }
            }
            if !stopped {
                parts.push((n, passed, unknown, before, i));
                mass[n] += before;
            }
        }
        for &(k, passed, unknown, p, i) in &parts {
            let w = p * e.stops[k] as f64 / (total * mass[k]);
            expand(n, passed, unknown, &imputed[i].rates, w, &mut list);
        }
        for (k, (&m, &stops)) in mass.iter().zip(&e.stops).enumerate() {
            if m <= 0.0 && stops > 0 {
                let mask = match e.order.get(k) {
                    Some(&j) => full & !(1u64 << j),
                    None => full,
                };
                list.push((mask, stops as f64 / total));
            }
        }
    }
    rake(&mut list, epochs, samples.len() as f64);
    (Joint::from_weighted(list), q)
}

/// Sweeps of [`rake`] over the epochs.
const RAKE_SWEEPS: usize = 4;

/// Rakes the estimate (`list`, weighted vectors) to the stop counts of
/// every epoch, oldest first and the order in force last: the weights of
/// the vectors that a step of the epoch's order rejects first are scaled
/// so that their share is the epoch's share of events rejected there,
/// shrunk towards the estimate's own share with the weight of `prior`
/// events for the order in force, and of `prior` plus every other epoch's
/// events for an earlier one (an epoch of a few events moves it little).
/// With the samples' weight alone, an order that ran on 64 events before
/// 40 000 of the next kept the composition of a stratum of the order in
/// force that its few events happened to see (3 of 3 events that a costly
/// step rejected passed the cheap cuts it had run before, where 26% of
/// such events do), and with it a wrong order to the end
/// (`tests/ordering_earlier_orders.rs`). The post-stratified
/// mixture gives each epoch's counts a share of the estimate only, and the
/// pass rates along the order in force were those of its events mixed
/// with the samples' view of the earlier orders' events; raked, the
/// estimate reproduces them (nearly exactly once the order has run on
/// many more events than there are samples), and the earlier orders'
/// counts as far as they agree.
fn rake(list: &mut Vec<(u64, f64)>, epochs: &[Epoch], prior: f64) {
    list.sort_unstable_by_key(|&(m, _)| m);
    list.dedup_by(|a, b| {
        if a.0 == b.0 {
            b.1 += a.1;
            true
        } else {
            false
        }
    });
    let n = epochs.first().map_or(0, |e| e.order.len());
    let strata: Vec<Vec<usize>> = epochs
        .iter()
        .map(|e| {
            list.iter()
                .map(|&(mask, _)| {
                    e.order
                        .iter()
                        .position(|&j| mask >> j & 1 == 0)
                        .unwrap_or(n)
                })
                .collect()
        })
        .collect();
    let mut mass = vec![0.0f64; n + 1];
    let counted: u64 = epochs.iter().map(|e| e.stops.iter().sum::<u64>()).sum();
    let last = epochs.len().saturating_sub(1);
    for _ in 0..RAKE_SWEEPS {
        for (i, (e, strata)) in epochs.iter().zip(&strata).enumerate() {
            let events: u64 = e.stops.iter().sum();
            if events == 0 {
                continue;
            }
            // An earlier order's counts weigh against every other event
            // the estimate rests on, not against the samples alone.
            let prior = if i == last {
                prior
            } else {
                prior + (counted - events) as f64
            };
            mass.iter_mut().for_each(|m| *m = 0.0);
            for (&(_, w), &k) in list.iter().zip(strata) {
                mass[k] += w;
            }
            let total: f64 = mass.iter().sum();
            if total <= 0.0 {
                return;
            }
            let scale: Vec<f64> = mass
                .iter()
                .zip(&e.stops)
                .map(|(&m, &stops)| {
                    if m <= 0.0 {
                        return 1.0;
                    }
                    let share = m / total;
                    let target = (stops as f64 + prior * share) / (events as f64 + prior);
                    target / share
                })
                .collect();
            for (entry, &k) in list.iter_mut().zip(strata) {
                entry.1 *= scale[k];
            }
        }
    }
}

/// Per step: its pass rate on the events reaching it, in every epoch, and
/// in the samples in which it was decided (with one pass in two events as
/// a prior).
fn pass_rates(n: usize, epochs: &[Epoch], samples: &[Sample]) -> Vec<f64> {
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
    for e in epochs {
        let mut reached = e.stops[n];
        for i in (0..n).rev() {
            reached += e.stops[i];
            let j = e.order[i] as usize;
            reach[j] += reached as f64;
            pass[j] += (reached - e.stops[i]) as f64;
        }
    }
    pass.iter().zip(&reach).map(|(p, r)| p / r).collect()
}

/// A distinct sampled decision vector, its count, its undecided steps
/// and their imputed pass rates.
struct Imputed {
    pass: u64,
    unknown: u64,
    count: f64,
    rates: Vec<f64>,
}

/// The distinct samples with their counts, each undecided step's pass rate
/// imputed from the samples that agree with it ([`Donors`]).
fn impute(n: usize, full: u64, samples: &[Sample], q: &[f64]) -> Vec<Imputed> {
    let mut keys: Vec<(u64, u64)> = samples
        .iter()
        .map(|s| (s.known & full, s.pass & s.known & full))
        .collect();
    keys.sort_unstable();
    let mut distinct: Vec<(Sample, f64)> = Vec::new();
    for (known, pass) in keys {
        match distinct.last_mut() {
            Some((s, count)) if s.known == known && s.pass == pass => *count += 1.0,
            _ => distinct.push((Sample { known, pass }, 1.0)),
        }
    }
    let donors = Donors::new(n, samples);
    distinct
        .into_iter()
        .map(|(s, count)| {
            let unknown = full & !s.known;
            let mut rates = q.to_vec();
            if unknown != 0 {
                donors.conditional(&s, unknown, q, &mut rates);
            }
            Imputed {
                pass: s.pass,
                unknown,
                count,
                rates,
            }
        })
        .collect()
}

/// Adds to `list` the vectors of a sample whose `unknown` steps are
/// undecided (the others pass where `passed` says), weighing `w` in all:
/// every combination of the undecided steps (up to `MAX_IMPUTED_BITS`; the
/// likelier decision of each beyond), weighted by the product of their
/// pass rates `rates`.
fn expand(n: usize, passed: u64, unknown: u64, rates: &[f64], w: f64, list: &mut Vec<(u64, f64)>) {
    if w <= 0.0 {
        return;
    }
    if unknown.count_ones() > MAX_IMPUTED_BITS {
        let likely = (0..n)
            .filter(|&j| unknown >> j & 1 == 1 && rates[j] >= 0.5)
            .fold(0u64, |m, j| m | 1 << j);
        list.push((passed | likely, w));
        return;
    }
    let mut sub = unknown;
    loop {
        let mut p = w;
        let mut rest = unknown;
        while rest != 0 {
            let j = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            p *= if sub >> j & 1 == 1 {
                rates[j]
            } else {
                1.0 - rates[j]
            };
        }
        list.push((passed | sub, p));
        if sub == 0 {
            break;
        }
        sub = (sub - 1) & unknown;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An order `0 > 1 > 2` ran on 1000 events: 500 rejected by step 0,
    /// 300 by step 1, 100 by step 2, 100 accepted. Its samples decided
    /// every step; those of an earlier order `2 > 1 > 0`, whose step 0 cost
    /// too much to be measured after a rejection, were rejected by step 2
    /// and left step 0 undecided (imputed as failing in half of them).
    /// Stratified on their known failure (step 2), their imputed failures
    /// of step 0 moved weight from the events that pass step 0 to those
    /// that fail it; on their completions, the estimate reproduces the pass
    /// rates along the order that the stop counts measure.
    #[test]
    fn the_estimate_reproduces_the_stop_counts_of_the_order_it_is_weighted_by() {
        let complete = |pass: u64| Sample { known: 0b111, pass };
        let mut samples = vec![
            complete(0b000),
            complete(0b110),
            complete(0b001),
            complete(0b011),
            complete(0b111),
        ];
        samples.extend((0..20).map(|_| Sample {
            known: 0b110,
            pass: 0b010,
        }));
        let epochs = [Epoch {
            order: vec![0, 1, 2],
            stops: vec![500, 300, 100, 100],
        }];
        let (joint, _) = estimate(3, &epochs, &samples);
        // The samples themselves weigh 25 of 1025 events.
        let along = [
            (0b001, 500.0 / 1000.0),
            (0b011, 200.0 / 1000.0),
            (0b111, 100.0 / 1000.0),
        ];
        for (set, exact) in along {
            let p = joint.pass_all(set);
            assert!(
                (p - exact).abs() < 0.02 * exact,
                "P(pass {set:03b}) = {p}, the stop counts say {exact}"
            );
        }
    }

    /// Step 0 (`mass`, 40% pass) and step 1 (a jet cut, 30%) are
    /// independent; 20 complete samples say so. The order in force,
    /// `0 > 1 > 2`, ran on 30 000 events; an earlier one, `1 > 0 > 2`, on
    /// 64, of which 25 passed step 1 and failed step 0 (11.5 expected).
    /// Raked to those 64 events with the weight of the 20 samples, the
    /// estimate had 60% of the events step 0 rejects pass step 1; weighed
    /// against every event counted, it keeps the samples' 30%.
    #[test]
    fn an_earlier_orders_few_events_do_not_decide_a_stratum_of_the_order_in_force() {
        let complete =
            |pass: u64, count: usize| std::iter::repeat_n(Sample { known: 0b111, pass }, count);
        let samples: Vec<Sample> = complete(0b111, 2)
            .chain(complete(0b101, 6))
            .chain(complete(0b110, 4))
            .chain(complete(0b100, 8))
            .collect();
        let epochs = [
            Epoch {
                order: vec![1, 0, 2],
                stops: vec![35, 25, 0, 4],
            },
            Epoch {
                order: vec![0, 1, 2],
                stops: vec![18_000, 8_400, 0, 3_600],
            },
        ];
        let (joint, _) = estimate(3, &epochs, &samples);
        let failed_0 = 1.0 - joint.pass_all(0b001);
        let failed_0_passed_1 = joint.pass_all(0b010) - joint.pass_all(0b011);
        let share = failed_0_passed_1 / failed_0;
        assert!(
            (share - 0.3).abs() < 0.05,
            "{share:.3} of the events step 0 rejects pass step 1"
        );
        assert!((failed_0 - 0.6).abs() < 0.01, "P(fail 0) = {failed_0}");
    }
}
