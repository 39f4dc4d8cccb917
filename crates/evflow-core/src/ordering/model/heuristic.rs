//! Orders without the exact search: A-Greedy, the rank rule, HEP-Frame's
//! levels, and the precedence utilities (closure, reduction, levels).

use super::joint::Joint;
use super::shared::{SharedCost, step_cost};

/// A-Greedy (Babu et al., SIGMOD 2004), with precedence: repeatedly runs
/// next the available step (all its predecessors placed) with the highest
/// conditional drop rate per unit cost, `(1 − P(pass | passed the steps
/// placed so far)) / cost`, estimated on the samples that passed the steps
/// placed so far. Without constraints this is the greedy 4-approximation of
/// Munagala et al. (ICDT 2005); with constraints it carries no guarantee.
/// A step's cost includes the shared producers it would be the first to
/// need (`shared`), given the steps placed so far.
pub fn greedy_order(
    costs: &[f64],
    shared: &[SharedCost],
    preds: &[u64],
    joint: &Joint,
) -> Vec<usize> {
    let n = costs.len();
    let mut alive: Vec<(u64, f64)> = joint.masks.clone();
    let mut placed = 0u64;
    let mut order = Vec::with_capacity(n);
    while order.len() < n {
        let weight: f64 = alive.iter().map(|(_, w)| w).sum();
        let mut best: Option<(f64, usize)> = None;
        for (j, &p) in preds.iter().enumerate().take(n) {
            if placed & 1 << j != 0 || p & !placed != 0 {
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
            let cost = step_cost(costs, shared, placed, j);
            let score = if cost > 0.0 {
                drop / cost
            } else {
                f64::INFINITY
            };
            let score = if weight > 0.0 && drop > 0.0 {
                score
            } else {
                -cost
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

/// The rank rule ([`rank_order`]) with the producers
/// that several steps need. Each producer becomes a job of its own that
/// passes every event and must run before each step that needs it: in
/// any order of those jobs, moving a producer to just before its first
/// step costs no more (it rejects nothing), and there it costs what
/// [`step_cost`] charges that step. So the rule, optimal under independence
/// for constraints forming an out-forest, stays optimal with the first-need
/// charge when the constraints with the producers' edges still form one
/// (each step needing at most one producer that its constraining step does
/// not need). Returns `None` otherwise, or beyond 64 steps and producers.
pub fn rank_order_shared(
    costs: &[f64],
    shared: &[SharedCost],
    pass: &[f64],
    preds: &[u64],
) -> Option<Vec<usize>> {
    let n = costs.len();
    if n + shared.len() > 64 {
        return None;
    }
    let (mut costs, mut pass, mut preds) = (costs.to_vec(), pass.to_vec(), preds.to_vec());
    for (k, s) in shared.iter().enumerate() {
        costs.push(s.cost);
        pass.push(1.0);
        preds.push(0);
        for (j, p) in preds.iter_mut().enumerate().take(n) {
            if s.needed_by >> j & 1 == 1 {
                *p |= 1 << (n + k);
            }
        }
    }
    let order = rank_order(&costs, &pass, &preds)?;
    Some(order.into_iter().filter(|&j| j < n).collect())
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
