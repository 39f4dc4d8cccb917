//! What measuring each step after a rejection costs: the step's running
//! time and that of the producers it needs that the event may not have
//! run.

use super::state::State;

/// Per position, for the order in force `in_force` (positions) and the
/// probability `after_reject` that an event was rejected before each step:
/// what measuring the step costs on an event that runs it for a
/// measurement, and that cost per sampled event (times `after_reject`).
///
/// A step's cost is its measured running time where it exceeds the
/// estimate shrunk towards the other steps' (`costs::shrink`, there to keep
/// one noisy timing from deciding the order): a 1 ms step timed once counts
/// as 1 ms here, not as a quarter of it, and is not measured after every
/// rejection of the warm-up. A step measured so also runs the producers it
/// needs that the event did not run: a shared producer (`State::shared`)
/// whose first step in the order in force comes after the rejection (a
/// 1 µs cut fed by a 100 µs producer costs 101 µs to measure there, even
/// when another cut runs the producer first in the regular plan); and a
/// producer also needed outside the path (`State::outside`) under the same
/// condition, counted in full although another path or an end-path module
/// may have run it on the event already (an upper bound: whether it did
/// depends on the rest of the event, which the planner does not see).
pub(super) fn measurement_costs(
    st: &State,
    in_force: &[usize],
    after_reject: &[f64],
) -> (Vec<f64>, Vec<f64>) {
    let n = after_reject.len();
    let mut measured: Vec<f64> = (0..n)
        .map(|j| st.costs[j].max(st.decided_costs[j]))
        .collect();
    let mut probe: Vec<f64> = (0..n).map(|j| measured[j] * after_reject[j]).collect();
    for s in st.shared.iter().chain(&st.outside) {
        let Some(&first) = in_force.iter().find(|&&j| s.needed_by >> j & 1 == 1) else {
            continue;
        };
        for j in (0..n).filter(|&j| s.needed_by >> j & 1 == 1) {
            probe[j] += s.cost * after_reject[first];
            measured[j] += s.cost;
        }
    }
    (measured, probe)
}
