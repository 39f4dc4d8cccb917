//! The exact search: dynamic programming over the feasible prefix sets
//! ([`Ideals`]) of the precedence constraints.

use super::joint::Joint;
use super::shared::{SharedCost, by_step, shared_charge};

/// Outcome of [`best_order`].
#[derive(Clone, Debug, PartialEq)]
pub struct DpResult {
    pub order: Vec<usize>,
    /// Expected cost per event of `order` under the joint distribution.
    pub cost: f64,
    /// Number of feasible prefix sets (order ideals) visited.
    pub states: usize,
}

/// The exact optimum: the order respecting `preds` of least expected cost
/// under `joint`, by dynamic programming over the feasible prefix sets
/// (the order ideals of the precedence DAG: at most `2^n`). `None` when
/// there are more than `max_states` of them (or `n > 63`).
///
/// Exact: for the given costs (`shared`: the producers several steps need,
/// charged to the first of them to run) and distribution, no order
/// respecting the constraints has a lower expected cost. Ties are broken
/// towards the written order (lower step index first).
pub fn best_order(
    costs: &[f64],
    shared: &[SharedCost],
    preds: &[u64],
    joint: &Joint,
    max_states: usize,
) -> Option<DpResult> {
    let ideals = Ideals::new(preds, max_states)?;
    let pass = ideals.pass_table(joint);
    Some(ideals.best_order(costs, shared, &pass))
}

/// The feasible prefix sets (order ideals) of a precedence DAG and the
/// transitions between them, built once per path so that each decision
/// only fills a pass table and runs the dynamic programme.
#[derive(Clone, Debug)]
pub struct Ideals {
    n: usize,
    /// Every ideal, layer by layer (by size), each layer sorted.
    sets: Vec<u64>,
    /// `sets[layer_start[k]..layer_start[k + 1]]`: the ideals of size `k`.
    layer_start: Vec<usize>,
    /// Transitions of ideal `i`: `edges[edge_start[i]..edge_start[i + 1]]`,
    /// (step added, index of the successor ideal), by ascending step.
    edge_start: Vec<u32>,
    edges: Vec<(u8, u32)>,
    /// Per ideal but the empty one: an ideal of the previous layer and the
    /// step that extends it to this one.
    parent: Vec<(u32, u8)>,
}

/// The incremental pass table keeps one bit set (over the distinct decision
/// vectors) per ideal of two layers; beyond this many 64-bit words it scans.
const MAX_BITSET_WORDS: usize = 1 << 22;

impl Ideals {
    /// `None` when there are more than `max_states` ideals, `n > 63`, or
    /// the constraints have a cycle.
    pub fn new(preds: &[u64], max_states: usize) -> Option<Self> {
        let n = preds.len();
        if n > 63 {
            return None;
        }
        let mut sets = vec![0u64];
        let mut layer_start = vec![0usize, 1];
        for k in 0..n {
            let (from, to) = (layer_start[k], layer_start[k + 1]);
            let mut next = Vec::new();
            for &a in &sets[from..to] {
                for (j, &p) in preds.iter().enumerate() {
                    if a & 1 << j == 0 && p & !a == 0 {
                        next.push(a | 1 << j);
                    }
                }
            }
            next.sort_unstable();
            next.dedup();
            if next.is_empty() || sets.len() + next.len() > max_states {
                // A cycle (no full ideal reachable), or too many states.
                return None;
            }
            sets.extend(next);
            layer_start.push(sets.len());
        }
        let mut edge_start = Vec::with_capacity(sets.len() + 1);
        let mut edges = Vec::new();
        for k in 0..=n {
            for i in layer_start[k]..layer_start[k + 1] {
                edge_start.push(edges.len() as u32);
                if k == n {
                    continue;
                }
                let a = sets[i];
                let next = &sets[layer_start[k + 1]..layer_start[k + 2]];
                for (j, &p) in preds.iter().enumerate() {
                    if a & 1 << j == 0 && p & !a == 0 {
                        let t = next
                            .binary_search(&(a | 1 << j))
                            .expect("a successor ideal is in the next layer");
                        edges.push((j as u8, (layer_start[k + 1] + t) as u32));
                    }
                }
            }
        }
        edge_start.push(edges.len() as u32);
        let mut parent = vec![(u32::MAX, u8::MAX); sets.len()];
        for i in 0..sets.len() {
            for &(j, t) in &edges[edge_start[i] as usize..edge_start[i + 1] as usize] {
                if parent[t as usize].0 == u32::MAX {
                    parent[t as usize] = (i as u32, j);
                }
            }
        }
        Some(Self {
            n,
            sets,
            layer_start,
            edge_start,
            edges,
            parent,
        })
    }

    /// Number of ideals (feasible prefix sets), the empty and full sets
    /// included.
    pub fn len(&self) -> usize {
        self.sets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sets.is_empty()
    }

    /// The ideals, layer by layer.
    pub fn sets(&self) -> &[u64] {
        &self.sets
    }

    /// Index of the ideal `set` (`None` when it is not one).
    pub fn index_of(&self, set: u64) -> Option<usize> {
        let k = set.count_ones() as usize;
        if k > self.n {
            return None;
        }
        let (from, to) = (self.layer_start[k], self.layer_start[k + 1]);
        self.sets[from..to]
            .binary_search(&set)
            .ok()
            .map(|i| from + i)
    }

    /// `P̂(pass all of A)` for every ideal `A` (1 when `joint` is empty):
    /// by superset sums over all `2^n` subsets when that is cheaper, else
    /// incrementally along the layers, an ideal's weight being its parent's
    /// minus that of the vectors failing the step that extends it (tracked
    /// as bit sets over the distinct vectors), so that each vector is
    /// visited about once per ideal where it first fails.
    pub fn pass_table(&self, joint: &Joint) -> Vec<f64> {
        let n = self.n;
        if joint.total <= 0.0 {
            return vec![1.0; self.sets.len()];
        }
        let distinct = joint.distinct().max(1);
        if n <= 22 && (n << n) < self.sets.len().saturating_mul(distinct) {
            let dense = joint.superset_table(n);
            return self.sets.iter().map(|&a| dense[a as usize]).collect();
        }
        let words = distinct.div_ceil(64);
        let widest = (0..=n)
            .map(|k| self.layer_start[k + 1] - self.layer_start[k])
            .max()
            .unwrap_or(1);
        let mut table = vec![0.0f64; self.sets.len()];
        if widest.saturating_mul(words) > MAX_BITSET_WORDS {
            // Too large for bit sets: one pass over the vectors per ideal.
            for &(m, w) in &joint.masks {
                let not_m = !m;
                for (t, &a) in table.iter_mut().zip(&self.sets) {
                    if a & not_m == 0 {
                        *t += w;
                    }
                }
            }
        } else {
            // Per step: the vectors in which it fails.
            let mut fails = vec![0u64; n * words];
            for (v, &(m, _)) in joint.masks.iter().enumerate() {
                for j in 0..n {
                    if m >> j & 1 == 0 {
                        fails[j * words + v / 64] |= 1 << (v % 64);
                    }
                }
            }
            // Per ideal of the previous and current layers: the vectors
            // failing some step of it.
            let mut prev = vec![0u64; words];
            let mut cur: Vec<u64> = Vec::new();
            table[0] = joint.total;
            for k in 0..n {
                let (from, to) = (self.layer_start[k], self.layer_start[k + 1]);
                let (next_from, next_to) = (to, self.layer_start[k + 2]);
                cur.clear();
                cur.resize((next_to - next_from) * words, 0);
                for t in next_from..next_to {
                    let (i, j) = self.parent[t];
                    let (i, j) = (i as usize, j as usize);
                    let base = &prev[(i - from) * words..(i - from + 1) * words];
                    let step = &fails[j * words..(j + 1) * words];
                    let out = &mut cur[(t - next_from) * words..(t - next_from + 1) * words];
                    let mut lost = 0.0;
                    for w in 0..words {
                        let mut new = step[w] & !base[w];
                        out[w] = base[w] | step[w];
                        while new != 0 {
                            let b = new.trailing_zeros() as usize;
                            new &= new - 1;
                            lost += joint.masks[w * 64 + b].1;
                        }
                    }
                    table[t] = table[i] - lost;
                }
                std::mem::swap(&mut prev, &mut cur);
            }
        }
        let total = joint.total;
        for v in &mut table {
            *v = (*v / total).clamp(0.0, 1.0);
        }
        table
    }

    /// `Π_{j ∈ A} q_j` for every ideal `A`: the pass table of independent
    /// decisions with pass rates `q`.
    pub fn independent_table(&self, q: &[f64]) -> Vec<f64> {
        let mut table = vec![1.0f64; self.sets.len()];
        for t in 1..self.sets.len() {
            let (i, j) = self.parent[t];
            table[t] = table[i as usize] * q[j as usize];
        }
        table
    }

    /// The exact optimum given a pass table (from [`pass_table`](Self::pass_table)
    /// or any other estimate of `P(pass all of A)` per ideal). Ties are
    /// broken towards the lower step index.
    ///
    /// Adding step `j` to the ideal `A` costs `P(pass A)` times `j`'s cost
    /// and that of the shared producers it needs that no step of `A` needs:
    /// the cost depends on `A` only, so the programme stays exact.
    pub fn best_order(&self, costs: &[f64], shared: &[SharedCost], pass: &[f64]) -> DpResult {
        let n = self.n;
        let states = self.sets.len();
        if n == 0 {
            return DpResult {
                order: Vec::new(),
                cost: 0.0,
                states,
            };
        }
        let needs = by_step(n, shared);
        let mut f = vec![f64::INFINITY; states];
        let mut last = vec![u8::MAX; states];
        f[0] = 0.0;
        for i in 0..self.layer_start[n] {
            let base = f[i];
            if !base.is_finite() {
                continue;
            }
            let s = pass[i];
            let a = self.sets[i];
            let (from, to) = (self.edge_start[i] as usize, self.edge_start[i + 1] as usize);
            for &(j, t) in &self.edges[from..to] {
                let t = t as usize;
                let first_need: f64 = needs[j as usize]
                    .iter()
                    .filter(|(by, _)| by & a == 0)
                    .map(|(_, c)| c)
                    .sum();
                let value = base + (costs[j as usize] + first_need) * s;
                let current = f[t];
                // Strictly better, or equal within rounding and an earlier step.
                if value < current {
                    if value < current - 1e-15 * current.abs().max(1e-30) || j < last[t] {
                        f[t] = value;
                        last[t] = j;
                    }
                } else if j < last[t] && value <= current + 1e-15 * current.abs() {
                    f[t] = value;
                    last[t] = j;
                }
            }
        }
        let full = states - 1;
        let cost = f[full];
        let mut order = Vec::with_capacity(n);
        let mut a = self.sets[full];
        for _ in 0..n {
            let i = self.index_of(a).expect("an ideal on the path");
            let j = last[i] as usize;
            order.push(j);
            a &= !(1 << j);
        }
        order.reverse();
        DpResult {
            order,
            cost,
            states,
        }
    }

    /// Expected cost per event of a sequential order (which must respect
    /// the constraints) given a pass table.
    pub fn order_cost(
        &self,
        costs: &[f64],
        shared: &[SharedCost],
        pass: &[f64],
        order: &[usize],
    ) -> f64 {
        let mut done = 0u64;
        let mut cost = 0.0;
        for &j in order {
            let s = self.index_of(done).map_or(0.0, |i| pass[i]);
            cost += (costs[j] + shared_charge(shared, done, 1 << j)) * s;
            done |= 1 << j;
        }
        cost
    }
}
