//! One event through a path's plan, as the engine runs it: for the tests
//! that drive the ordering planner with synthetic decisions and timings.

use evflow_core::schedule::{PathOutcome, PathPlan};

/// Runs `plan` on one event: group by group, leaving out the groups the
/// plan skips after a rejection, and stopping at the first rejection
/// unless the plan evaluates every step (a sampled event). `step(m,
/// after_rejection)` runs module `m` and says whether it passed;
/// `after_rejection`: it runs only to be measured. Fills `outcome` (steps,
/// accepted, sampled) for [`Planner::observe`](evflow_core::schedule::Planner::observe).
pub fn walk(plan: &PathPlan, outcome: &mut PathOutcome, mut step: impl FnMut(usize, bool) -> bool) {
    outcome.steps.clear();
    let mut rejected_at = None;
    for (g, group) in plan.groups.iter().enumerate() {
        if rejected_at.is_some_and(|k| plan.skips_after_reject(k, g)) {
            continue;
        }
        let mut group_ok = true;
        for &m in group {
            let pass = step(m, rejected_at.is_some());
            outcome.steps.push((m, pass));
            group_ok &= pass;
        }
        if !group_ok {
            rejected_at.get_or_insert(g);
            if !plan.evaluate_all {
                break;
            }
        }
    }
    outcome.accepted = rejected_at.is_none();
    outcome.sampled = plan.evaluate_all;
}
