//! The filter-ordering problem and its solvers: pure functions on costs,
//! precedence masks and an empirical joint pass distribution. No clocks, no
//! threads, no engine types: the planners call them at checkpoints, the
//! tests and the benchmark's oracle call them directly.
//!
//! A path of `n` steps is ordered. Step `j` costs `costs[j]` seconds each
//! time it runs; `preds[j]` is the bit mask of the steps that must run
//! before it. An event runs the steps in order and stops at the first
//! rejection, so the expected cost per event of an order `π` is
//! `Σ_k c(π_k) · P(the event passes π_1 … π_{k-1})`.

/// The empirical joint pass distribution: a weighted list of distinct
/// decision vectors (bit `j` set when step `j` passes), one per measured
/// event ("sample").
#[derive(Clone, Debug, Default)]
pub struct Joint {
    /// Distinct masks and their weights, sorted by mask.
    masks: Vec<(u64, f64)>,
    total: f64,
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
/// after the first group with a rejection.
pub fn expected_cost(costs: &[f64], groups: &[Vec<usize>], joint: &Joint) -> f64 {
    let mut passed = 0u64;
    let mut cost = 0.0;
    for group in groups {
        let reach = joint.pass_all(passed);
        cost += reach * group.iter().map(|&j| costs[j]).sum::<f64>();
        for &j in group {
            passed |= 1 << j;
        }
    }
    cost
}

/// Expected cost per event of a sequential order.
pub fn expected_cost_order(costs: &[f64], order: &[usize], joint: &Joint) -> f64 {
    let mut passed = 0u64;
    let mut cost = 0.0;
    for &j in order {
        cost += joint.pass_all(passed) * costs[j];
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
/// Exact: for the given costs and distribution, no order respecting the
/// constraints has a lower expected cost. Ties are broken towards the
/// written order (lower step index first).
pub fn best_order(
    costs: &[f64],
    preds: &[u64],
    joint: &Joint,
    max_states: usize,
) -> Option<DpResult> {
    let ideals = Ideals::new(preds, max_states)?;
    let pass = ideals.pass_table(joint);
    Some(ideals.best_order(costs, &pass))
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
    pub fn best_order(&self, costs: &[f64], pass: &[f64]) -> DpResult {
        let n = self.n;
        let states = self.sets.len();
        if n == 0 {
            return DpResult {
                order: Vec::new(),
                cost: 0.0,
                states,
            };
        }
        let mut f = vec![f64::INFINITY; states];
        let mut last = vec![u8::MAX; states];
        f[0] = 0.0;
        for i in 0..self.layer_start[n] {
            let base = f[i];
            if !base.is_finite() {
                continue;
            }
            let s = pass[i];
            let (from, to) = (self.edge_start[i] as usize, self.edge_start[i + 1] as usize);
            for &(j, t) in &self.edges[from..to] {
                let t = t as usize;
                let value = base + costs[j as usize] * s;
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
    pub fn order_cost(&self, costs: &[f64], pass: &[f64], order: &[usize]) -> f64 {
        let mut done = 0u64;
        let mut cost = 0.0;
        for &j in order {
            let s = self.index_of(done).map_or(0.0, |i| pass[i]);
            cost += costs[j] * s;
            done |= 1 << j;
        }
        cost
    }
}

/// A-Greedy (Babu et al., SIGMOD 2004), with precedence: repeatedly runs
/// next the available step (all its predecessors placed) with the highest
/// conditional drop rate per unit cost, `(1 − P(pass | passed the steps
/// placed so far)) / cost`, estimated on the samples that passed the steps
/// placed so far. Without constraints this is the greedy 4-approximation of
/// Munagala et al. (ICDT 2005); with constraints it carries no guarantee.
pub fn greedy_order(costs: &[f64], preds: &[u64], joint: &Joint) -> Vec<usize> {
    let n = costs.len();
    let mut alive: Vec<(u64, f64)> = joint.masks.clone();
    let mut placed = 0u64;
    let mut order = Vec::with_capacity(n);
    while order.len() < n {
        let weight: f64 = alive.iter().map(|(_, w)| w).sum();
        let mut best: Option<(f64, usize)> = None;
        for j in 0..n {
            if placed & 1 << j != 0 || preds[j] & !placed != 0 {
                continue;
            }
            let drop = if weight > 0.0 {
                let pass: f64 = alive
                    .iter()
                    .filter(|(m, _)| m & 1 << j != 0)
                    .map(|(_, w)| w)
                    .sum();
                1.0 - pass / weight
            } else {
                0.0
            };
            // Score: drop per cost; free steps first; then cheapest.
            let score = if costs[j] > 0.0 {
                drop / costs[j]
            } else {
                f64::INFINITY
            };
            let score = if weight > 0.0 && drop > 0.0 {
                score
            } else {
                -costs[j]
            };
            if best.is_none_or(|(s, _)| score > s) {
                best = Some((score, j));
            }
        }
        let Some((_, j)) = best else {
            break; // a cycle: cannot happen for compiled paths
        };
        order.push(j);
        placed |= 1 << j;
        alive.retain(|(m, _)| m & 1 << j != 0);
    }
    order
}

/// Under independence: sorts by rank `cost / (1 − pass)` (ascending),
/// which is optimal without constraints; with constraints whose transitive
/// reduction is a forest of out-trees, merges each step into its parent by
/// the Monma–Sidney / KBZ rule (optimal for such constraints under
/// independence). Returns `None` when the constraints are not an
/// out-forest.
pub fn rank_order(costs: &[f64], pass: &[f64], preds: &[u64]) -> Option<Vec<usize>> {
    let n = costs.len();
    let reduced = transitive_reduction(preds);
    let mut parent = vec![usize::MAX; n];
    for j in 0..n {
        match reduced[j].count_ones() {
            0 => {}
            1 => parent[j] = reduced[j].trailing_zeros() as usize,
            _ => return None,
        }
    }
    // KBZ: the chain of a subtree is its root followed by its children's
    // chains merged by rank, the head combined with its successors while
    // its rank is worse (it cannot move later on its own).
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
    for j in 0..n {
        if parent[j] != usize::MAX {
            children[parent[j]].push(j);
        }
    }
    let job = |j: usize| Job {
        seq: vec![j],
        cost: costs[j],
        pass: pass[j].clamp(0.0, 1.0),
    };
    // Children before parents: reverse of a topological order.
    let topo = topological(preds)?;
    let mut chains: Vec<Option<Vec<Job>>> = (0..n).map(|_| None).collect();
    for &v in topo.iter().rev() {
        let mut merged: Vec<Job> = Vec::new();
        for &c in &children[v] {
            merged.extend(chains[c].take().expect("child chain built"));
        }
        merged.sort_by(|a, b| rank_of(a).total_cmp(&rank_of(b)));
        let mut head = job(v);
        let mut rest = merged.into_iter().peekable();
        while rest
            .peek()
            .is_some_and(|next| rank_of(&head) > rank_of(next))
        {
            let next = rest.next().expect("peeked");
            head.cost += head.pass * next.cost;
            head.pass *= next.pass;
            head.seq.extend(next.seq);
        }
        let mut chain = vec![head];
        chain.extend(rest);
        chains[v] = Some(chain);
    }
    let mut all: Vec<Job> = (0..n)
        .filter(|&j| parent[j] == usize::MAX)
        .flat_map(|j| chains[j].take().expect("root chain built"))
        .collect();
    all.sort_by(|a, b| rank_of(a).total_cmp(&rank_of(b)));
    Some(all.into_iter().flat_map(|j| j.seq).collect())
}

/// A composite job of [`rank_order`].
struct Job {
    seq: Vec<usize>,
    cost: f64,
    pass: f64,
}

fn rank_of(job: &Job) -> f64 {
    let drop = 1.0 - job.pass;
    if drop <= 0.0 {
        f64::INFINITY
    } else {
        job.cost / drop
    }
}

/// A topological order (earliest index first), `None` on a cycle.
fn topological(preds: &[u64]) -> Option<Vec<usize>> {
    let n = preds.len();
    let mut placed = 0u64;
    let mut order = Vec::with_capacity(n);
    while order.len() < n {
        let j = (0..n).find(|&j| placed & 1 << j == 0 && preds[j] & !placed == 0)?;
        order.push(j);
        placed |= 1 << j;
    }
    Some(order)
}

/// Removes the constraints implied by others (`preds` must be acyclic).
#[allow(clippy::needless_range_loop)]
pub fn transitive_reduction(preds: &[u64]) -> Vec<u64> {
    let n = preds.len();
    let closure = transitive_closure(preds);
    (0..n)
        .map(|j| {
            let mut keep = preds[j];
            for i in 0..n {
                if preds[j] & 1 << i != 0 {
                    // i is implied when another predecessor k already needs i.
                    for k in 0..n {
                        if k != i && preds[j] & 1 << k != 0 && closure[k] & 1 << i != 0 {
                            keep &= !(1 << i);
                            break;
                        }
                    }
                }
            }
            keep
        })
        .collect()
}

/// All (transitive) predecessors of each step (`preds` must be acyclic).
pub fn transitive_closure(preds: &[u64]) -> Vec<u64> {
    let mut closure = preds.to_vec();
    loop {
        let mut changed = false;
        for j in 0..closure.len() {
            let mut all = closure[j];
            let mut rest = closure[j];
            while rest != 0 {
                let i = rest.trailing_zeros() as usize;
                rest &= rest - 1;
                all |= closure[i];
            }
            if all != closure[j] {
                closure[j] = all;
                changed = true;
            }
        }
        if !changed {
            return closure;
        }
    }
}

/// Levels of the precedence DAG: level 0 has no predecessors, level `k`
/// steps have a predecessor at level `k − 1` and none later.
pub fn levels(preds: &[u64]) -> Vec<Vec<usize>> {
    let n = preds.len();
    let mut level = vec![usize::MAX; n];
    let mut placed = 0u64;
    let mut out: Vec<Vec<usize>> = Vec::new();
    while placed.count_ones() as usize != n {
        let this: Vec<usize> = (0..n)
            .filter(|&j| placed & 1 << j == 0 && preds[j] & !placed == 0)
            .collect();
        if this.is_empty() {
            break; // cycle: cannot happen for compiled paths
        }
        for &j in &this {
            level[j] = out.len();
        }
        for &j in &this {
            placed |= 1 << j;
        }
        out.push(this);
    }
    out
}

/// HEP-Frame's weight of a step: `0.7 × pass fraction + 0.3 × cost /
/// max cost`; lower runs first, so filters that discard many events and
/// run fast come first (see docs/filter-ordering.md on the reading of the
/// published formula).
pub fn hepframe_weight(pass: f64, cost: f64, max_cost: f64) -> f64 {
    let normalised = if max_cost > 0.0 { cost / max_cost } else { 0.0 };
    0.7 * pass + 0.3 * normalised
}

/// HEP-Frame's plan: the levels of the DAG one after the other, each sorted
/// by [`hepframe_weight`].
pub fn hepframe_levels(costs: &[f64], pass: &[f64], preds: &[u64]) -> Vec<Vec<usize>> {
    let max_cost = costs.iter().copied().fold(0.0, f64::max);
    let mut out = levels(preds);
    for level in &mut out {
        level.sort_by(|&a, &b| {
            hepframe_weight(pass[a], costs[a], max_cost)
                .total_cmp(&hepframe_weight(pass[b], costs[b], max_cost))
                .then(a.cmp(&b))
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brute_force(costs: &[f64], preds: &[u64], joint: &Joint) -> f64 {
        fn rec(costs: &[f64], preds: &[u64], joint: &Joint, done: u64, acc: f64, best: &mut f64) {
            let n = costs.len();
            if done.count_ones() as usize == n {
                *best = best.min(acc);
                return;
            }
            for j in 0..n {
                if done & 1 << j == 0 && preds[j] & !done == 0 {
                    let c = acc + costs[j] * joint.pass_all(done);
                    rec(costs, preds, joint, done | 1 << j, c, best);
                }
            }
        }
        let mut best = f64::INFINITY;
        rec(costs, preds, joint, 0, 0.0, &mut best);
        best
    }

    fn lcg(state: &mut u64) -> u64 {
        *state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *state >> 11
    }

    #[test]
    #[allow(clippy::needless_range_loop)]
    fn dp_matches_brute_force_on_random_problems() {
        let mut s = 7u64;
        for case in 0..60 {
            let n = 1 + case % 7;
            let costs: Vec<f64> = (0..n).map(|_| 1.0 + (lcg(&mut s) % 100) as f64).collect();
            let mut preds = vec![0u64; n];
            for j in 0..n {
                for i in 0..j {
                    if lcg(&mut s).is_multiple_of(5) {
                        preds[j] |= 1 << i;
                    }
                }
            }
            let masks: Vec<u64> = (0..50).map(|_| lcg(&mut s) & ((1 << n) - 1)).collect();
            let joint = Joint::from_masks(masks);
            let dp = best_order(&costs, &preds, &joint, 1 << 20).unwrap();
            assert!(respects(&dp.order, &preds));
            let bf = brute_force(&costs, &preds, &joint);
            assert!((dp.cost - bf).abs() < 1e-9 * bf.max(1.0), "{dp:?} vs {bf}");
            let recomputed = expected_cost_order(&costs, &dp.order, &joint);
            assert!((recomputed - dp.cost).abs() < 1e-9 * bf.max(1.0));
            let g = greedy_order(&costs, &preds, &joint);
            assert!(respects(&g, &preds));
            assert!(expected_cost_order(&costs, &g, &joint) >= bf - 1e-9);
        }
    }

    #[test]
    fn incremental_pass_table_matches_a_scan() {
        // 30 steps in three chains of ten: 11^3 ideals, too many steps for
        // the dense table, so the incremental one runs.
        let n = 30;
        let preds: Vec<u64> = (0..n)
            .map(|j| if j % 10 == 0 { 0 } else { 1u64 << (j - 1) })
            .collect();
        let ideals = Ideals::new(&preds, 1 << 20).unwrap();
        assert_eq!(ideals.len(), 11 * 11 * 11);
        let mut s = 3u64;
        let masks: Vec<(u64, f64)> = (0..300)
            .map(|_| {
                // Mostly passing decisions, as in practice.
                let fail = lcg(&mut s) & lcg(&mut s) & lcg(&mut s) & ((1 << n) - 1);
                (!fail & ((1 << n) - 1), 1.0 + (lcg(&mut s) % 3) as f64)
            })
            .collect();
        let joint = Joint::from_weighted(masks);
        let table = ideals.pass_table(&joint);
        for (i, &a) in ideals.sets().iter().enumerate() {
            assert!((table[i] - joint.pass_all(a)).abs() < 1e-12, "ideal {a:b}");
            assert_eq!(ideals.index_of(a), Some(i));
        }
        // The optimum from the table is the brute-force optimum's cost.
        let costs: Vec<f64> = (0..n).map(|_| 1.0 + (lcg(&mut s) % 50) as f64).collect();
        let dp = ideals.best_order(&costs, &table);
        assert!(respects(&dp.order, &preds));
        let recomputed = expected_cost_order(&costs, &dp.order, &joint);
        assert!((recomputed - dp.cost).abs() < 1e-9 * dp.cost);
        assert!((ideals.order_cost(&costs, &table, &dp.order) - dp.cost).abs() < 1e-9 * dp.cost);
    }

    #[test]
    fn dense_and_sparse_pass_tables_agree() {
        let joint = Joint::from_masks([0b101, 0b111, 0b001, 0b110, 0b111]);
        let t = joint.superset_table(3);
        for a in 0..8u64 {
            assert!((t[a as usize] - joint.pass_all(a)).abs() < 1e-12);
        }
    }

    #[test]
    fn rank_order_is_optimal_under_independence_for_out_forests() {
        // Independent decisions: build the exact product distribution.
        let pass = [0.9, 0.3, 0.6, 0.95, 0.5];
        let costs = [1.0, 4.0, 2.0, 0.5, 3.0];
        let preds = [0, 1 << 0, 1 << 0, 1 << 2, 0];
        let n = pass.len();
        let joint = Joint::from_weighted((0..1u64 << n).map(|m| {
            let w: f64 = (0..n)
                .map(|j| {
                    if m & 1 << j != 0 {
                        pass[j]
                    } else {
                        1.0 - pass[j]
                    }
                })
                .product();
            (m, w)
        }));
        let order = rank_order(&costs, &pass, &preds).unwrap();
        assert!(respects(&order, &preds));
        let best = brute_force(&costs, &preds, &joint);
        let got = expected_cost_order(&costs, &order, &joint);
        assert!((got - best).abs() < 1e-9, "{order:?}: {got} vs {best}");
        // Not a forest: a step with two unrelated predecessors.
        assert!(rank_order(&costs, &pass, &[0, 0, 0b11, 0, 0]).is_none());
    }

    #[test]
    fn levels_and_reduction() {
        let preds = [0, 0b1, 0b11, 0];
        assert_eq!(levels(&preds), vec![vec![0, 3], vec![1], vec![2]]);
        assert_eq!(transitive_reduction(&preds), vec![0, 0b1, 0b10, 0]);
    }
}
