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
/// condition, on the share of the events on which nothing outside the path
/// ran it (`State::outside_share`, counted on the events the path did not
/// need it: whether something outside ran it on a given event depends on
/// the rest of the event, which the rates, set at a decision, do not see).
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
    let outside = st.outside.iter().zip(&st.outside_share);
    let charged = st.shared[..st.path_shared].iter().map(|s| (s, 1.0));
    for (s, share) in charged.chain(outside.map(|(s, &f)| (s, 1.0 - f))) {
        let Some(&first) = in_force.iter().find(|&&j| s.needed_by >> j & 1 == 1) else {
            continue;
        };
        let cost = s.cost * share;
        for j in (0..n).filter(|&j| s.needed_by >> j & 1 == 1) {
            probe[j] += cost * after_reject[first];
            measured[j] += cost;
        }
    }
    (measured, probe)
}
