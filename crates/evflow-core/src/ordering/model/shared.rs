//! Producers that several steps need. A producer runs on demand, once per
//! event: with the first step that needs it. Its cost therefore belongs to
//! no step in particular but to whichever of its steps runs first, which
//! the set of steps already run decides: an event reaching step `j` after
//! the steps `A` ran every step of `A`, and with them the producers they
//! need, so `j` adds its own cost and that of the shared producers it needs
//! that no step of `A` needs. The cost of an order stays a sum over its
//! prefix sets, which keeps the search over them exact.

/// A producer that several steps of a path need (and nothing outside the
/// path): the steps (bit set) and its running time per execution
/// (seconds).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SharedCost {
    pub needed_by: u64,
    pub cost: f64,
}

/// What the shared producers cost that the steps `next` need and the
/// steps `done` do not (those ran already on an event that ran `done`).
pub fn shared_charge(shared: &[SharedCost], done: u64, next: u64) -> f64 {
    shared
        .iter()
        .filter(|s| s.needed_by & next != 0 && s.needed_by & done == 0)
        .map(|s| s.cost)
        .sum()
}

/// What step `j` costs on an event that ran the steps `done`: its own cost
/// plus the shared producers it is the first to need.
pub fn step_cost(costs: &[f64], shared: &[SharedCost], done: u64, j: usize) -> f64 {
    costs[j] + shared_charge(shared, done, 1 << j)
}

/// Per step: what it costs where `order` runs it (its own cost plus the
/// shared producers it is the first of the order to need).
pub fn charged_costs(costs: &[f64], shared: &[SharedCost], order: &[usize]) -> Vec<f64> {
    let mut out = costs.to_vec();
    let mut done = 0u64;
    for &j in order {
        out[j] = step_cost(costs, shared, done, j);
        done |= 1 << j;
    }
    out
}

/// Per step: the shared producers it needs, as (steps needing it, cost),
/// so that a search charges a step by scanning only its own producers.
pub(super) fn by_step(n: usize, shared: &[SharedCost]) -> Vec<Vec<(u64, f64)>> {
    let mut out = vec![Vec::new(); n];
    for s in shared {
        for (j, list) in out.iter_mut().enumerate() {
            if s.needed_by >> j & 1 == 1 {
                list.push((s.needed_by, s.cost));
            }
        }
    }
    out
}
