//! The empirical joint pass distribution of a path's steps, and the
//! expected cost of an order under it.

use super::shared::{SharedCost, shared_charge};

/// The empirical joint pass distribution: a weighted list of distinct
/// decision vectors (bit `j` set when step `j` passes), one per measured
/// event ("sample").
#[derive(Clone, Debug, Default)]
pub struct Joint {
    /// Distinct masks and their weights, sorted by mask.
    pub(super) masks: Vec<(u64, f64)>,
    pub(super) total: f64,
}

impl Joint {
    /// Builds the distribution from decision vectors (each of weight 1).
    pub fn from_masks(masks: impl IntoIterator<Item = u64>) -> Self {
        Self::from_weighted(masks.into_iter().map(|m| (m, 1.0)))
    }

    /// Builds the distribution from weighted decision vectors.
    pub fn from_weighted(masks: impl IntoIterator<Item = (u64, f64)>) -> Self {
        let mut list: Vec<(u64, f64)> = masks.into_iter().filter(|(_, w)| *w > 0.0).collect();
        list.sort_unstable_by_key(|(m, _)| *m);
        let mut masks: Vec<(u64, f64)> = Vec::with_capacity(list.len());
        for (m, w) in list {
            match masks.last_mut() {
                Some(last) if last.0 == m => last.1 += w,
                _ => masks.push((m, w)),
            }
        }
        let total = masks.iter().map(|(_, w)| w).sum();
        Self { masks, total }
    }

    /// Total weight (number of samples when unweighted).
    pub fn total(&self) -> f64 {
        self.total
    }

    /// Number of distinct decision vectors.
    pub fn distinct(&self) -> usize {
        self.masks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.total <= 0.0
    }

    /// Weight of the samples that pass every step of `set`.
    pub fn weight_passing(&self, set: u64) -> f64 {
        self.masks
            .iter()
            .filter(|(m, _)| m & set == set)
            .map(|(_, w)| w)
            .sum()
    }

    /// Fraction of the samples that pass every step of `set` (1 when empty).
    pub fn pass_all(&self, set: u64) -> f64 {
        if self.total <= 0.0 {
            return 1.0;
        }
        self.weight_passing(set) / self.total
    }

    /// P(step `j` passes | every step of `given` passed), with a uniform
    /// prior of `prior` pseudo-samples at `p0` so that an unobserved
    /// condition gives `p0` rather than 0/0.
    pub fn conditional(&self, given: u64, j: usize, prior: f64, p0: f64) -> f64 {
        let base = self.weight_passing(given);
        let both = self.weight_passing(given | 1 << j);
        (both + prior * p0) / (base + prior)
    }

    /// Marginal pass rate of step `j`.
    pub fn marginal(&self, j: usize) -> f64 {
        self.pass_all(1 << j)
    }

    /// `S[A] = P(pass all of A)` for every subset `A` of `n` steps, by
    /// superset sums (`n · 2^n` additions).
    pub fn superset_table(&self, n: usize) -> Vec<f64> {
        let size = 1usize << n;
        let full = (size - 1) as u64;
        let mut table = vec![0.0f64; size];
        for &(m, w) in &self.masks {
            table[(m & full) as usize] += w;
        }
        for j in 0..n {
            let bit = 1usize << j;
            for a in 0..size {
                if a & bit == 0 {
                    table[a] += table[a | bit];
                }
            }
        }
        let total = self.total.max(f64::MIN_POSITIVE);
        for v in &mut table {
            *v /= total;
        }
        table
    }
}

/// Expected cost per event of running `groups` one after the other (the
/// steps of a group all run once the group is reached), the event stopping
/// after the first group with a rejection; a shared producer costs once,
/// with the first group that needs it.
pub fn expected_cost(
    costs: &[f64],
    shared: &[SharedCost],
    groups: &[Vec<usize>],
    joint: &Joint,
) -> f64 {
    let mut passed = 0u64;
    let mut cost = 0.0;
    for group in groups {
        let reach = joint.pass_all(passed);
        let bits = group.iter().fold(0u64, |b, &j| b | 1 << j);
        let own = group.iter().map(|&j| costs[j]).sum::<f64>();
        cost += reach * (own + shared_charge(shared, passed, bits));
        passed |= bits;
    }
    cost
}

/// Expected cost per event of a sequential order.
pub fn expected_cost_order(
    costs: &[f64],
    shared: &[SharedCost],
    order: &[usize],
    joint: &Joint,
) -> f64 {
    let mut passed = 0u64;
    let mut cost = 0.0;
    for &j in order {
        cost += joint.pass_all(passed) * (costs[j] + shared_charge(shared, passed, 1 << j));
        passed |= 1 << j;
    }
    cost
}

/// True when `order` is a permutation of `0..n` that respects `preds`.
pub fn respects(order: &[usize], preds: &[u64]) -> bool {
    let mut done = 0u64;
    for &j in order {
        if j >= preds.len() || done & 1 << j != 0 || preds[j] & !done != 0 {
            return false;
        }
        done |= 1 << j;
    }
    order.len() == preds.len()
}
