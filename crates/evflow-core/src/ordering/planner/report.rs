//! The planner's account for the job report: the final entry of each
//! path's ordering history.

use std::sync::atomic::Ordering::Relaxed;

use super::OrderingPlanner;
use super::state::*;
use super::stats::*;
use crate::ordering::model;
use crate::ordering::policy::Policy;
use crate::schedule::OrderChange;

impl OrderingPlanner {
    pub(super) fn final_entry(&self, d: &Dyn) -> OrderChange {
        let st = lock(&d.state);
        let cur = read(&d.current).clone();
        let (sampled, extra) = {
            let s = lock(&d.samples);
            // Steps run by sampled events beyond the regular plan, after
            // the first 2% of the events (a warm-up of at most 2%).
            let observed = observed(d);
            let mut extra = vec![0u64; d.steps.len()];
            for &(index, mask) in &s.extra_log {
                if index >= observed / 50 {
                    for (j, e) in extra.iter_mut().enumerate() {
                        *e += mask >> j & 1;
                    }
                }
            }
            (s.total, extra)
        };
        let observed = observed(d);
        let (hot, decide) = self.overhead_s();
        let flow: Vec<String> = cur
            .order
            .iter()
            .map(|&i| {
                let i = i as usize;
                format!("{} {}", self.labels[d.steps[i]], micros(st.costs[i]))
            })
            .collect();
        // The rejected timings are the steps': said before the producers.
        let mut flow = format!(
            "{} ({} timings rejected as descheduled)",
            flow.join(", "),
            st.rejected.iter().sum::<u64>()
        );
        // The producers timed apart from the steps, with the steps needing
        // them.
        // Each with what it adds to its parenthesis (`notes[k]`, may be
        // empty).
        let listed = |list: &[(usize, u64)], costs: &[f64], notes: &[String]| -> String {
            let items: Vec<String> = list
                .iter()
                .zip(costs)
                .enumerate()
                .map(|(k, (&(m, by), &c))| {
                    let steps: Vec<&str> = (0..d.steps.len())
                        .filter(|&i| by >> i & 1 == 1)
                        .map(|i| self.labels[d.steps[i]].as_str())
                        .collect();
                    let note = notes.get(k).filter(|n| !n.is_empty());
                    format!(
                        "{} {} (for {}{})",
                        self.labels[m],
                        micros(c),
                        steps.join(", "),
                        note.map_or(String::new(), |n| format!("; {n}"))
                    )
                })
                .collect();
            items.join(", ")
        };
        if !d.shared.is_empty() {
            let costs: Vec<f64> = st.shared.iter().map(|c| c.cost).collect();
            flow = format!(
                "{flow}; shared producers, charged to the first step that needs them: {}",
                listed(&d.shared, &costs, &[])
            );
        }
        if !d.outside.is_empty() {
            let costs: Vec<f64> = st.outside.iter().map(|c| c.cost).collect();
            // Each producer's share beside it, not in a list after them all.
            let shares: Vec<String> = st
                .outside_share
                .iter()
                .map(|&f| format!("run outside the path on {}", percent(f)))
                .collect();
            flow = format!(
                "{flow}; producers also needed outside the path, charged to the first step that needs them where nothing outside ran them: {}",
                listed(&d.outside, &costs, &shares)
            );
        }
        if !d.always_outside.is_empty() {
            // Not a share measured as 0% for lack of events without them:
            // the graph says they run on every event, for something else.
            let names: Vec<&str> = d
                .always_outside
                .iter()
                .map(|&(m, _)| self.labels[m].as_str())
                .collect();
            flow = format!(
                "{flow}; producers always run outside the path (on every event, by an end path without select_events or another path), charged to no step: {}",
                elided(&names, ALWAYS_LISTED)
            );
        }
        let extra_list: Vec<String> = cur
            .order
            .iter()
            .map(|&i| i as usize)
            .filter(|&i| extra[i] > 0)
            .map(|i| format!("{} {}", self.labels[d.steps[i]], extra[i]))
            .collect();
        let mut rates: Vec<(f64, Vec<&str>)> = Vec::new();
        for &i in &cur.order {
            let i = i as usize;
            let r = st.rates[i];
            match rates.iter_mut().find(|(x, _)| *x == r) {
                Some((_, names)) => names.push(&self.labels[d.steps[i]]),
                None => rates.push((r, vec![&self.labels[d.steps[i]]])),
            }
        }
        rates.sort_by(|a, b| b.0.total_cmp(&a.0));
        let rates: Vec<String> = rates
            .iter()
            .map(|(r, names)| {
                if names.len() > 3 {
                    format!("{} for {} steps", percent(*r), names.len())
                } else {
                    format!("{} for {}", percent(*r), names.join(", "))
                }
            })
            .collect();
        // An open question at the end: the steps measured after the
        // rejections of the steps they would jump.
        let targeted: Vec<String> = st
            .targeted
            .iter()
            .enumerate()
            .filter(|(_, (by, _))| *by != 0)
            .map(|(j, &(by, rate))| {
                let jumped: Vec<&str> = (0..d.steps.len())
                    .filter(|&i| by >> i & 1 == 1)
                    .map(|i| self.labels[d.steps[i]].as_str())
                    .collect();
                format!(
                    "{} {} after rejections by {}",
                    self.labels[d.steps[j]],
                    percent(rate),
                    jumped.join(", ")
                )
            })
            .collect();
        let rates = if targeted.is_empty() {
            rates.join(", ")
        } else {
            format!(
                "{} (open question: {})",
                rates.join(", "),
                targeted.join("; ")
            )
        };
        OrderChange {
            path: d.name.clone(),
            at_event: observed,
            order: cur.plan.order().map(|m| self.labels[m].clone()).collect(),
            reason: format!(
                "in use at the end ({} policy{}): {} decisions, {} sampled events{}, {}; cost per step: {}; sampling after a rejection: {}; steps run by sampled events beyond the plan after the first 2% of the events: [{}]; planner time {:.3} ms (statistics {:.3} ms, decisions {:.3} ms)",
                d.policy,
                match &st.imported {
                    Some(imp) => format!(
                        ", started from imported statistics: {} sampled events, stop counts of {} events",
                        imp.samples.len(),
                        imp.events()
                    ),
                    None => String::new(),
                },
                st.decisions,
                sampled,
                // Batches (the Python face) are sampled event by event:
                // then a share of the engine's events means nothing.
                if d.batch_obs.load(Relaxed) == 0 {
                    format!(" ({:.2}%)", 100.0 * sampled as f64 / observed.max(1) as f64)
                } else {
                    format!(" (event by event, in {observed} batches)")
                },
                if d.policy == Policy::Adaptive {
                    match expected_from_stops(d, &st, &cur) {
                        Some((cost, events)) => format!(
                            "expected {} per event (the stop counts of its {events} events; the pass model at the last decision: {})",
                            micros(cost),
                            micros(st.expected_s)
                        ),
                        None => format!("expected {} per event", micros(st.expected_s)),
                    }
                } else {
                    "weights from pass rates on the events reaching each step".to_string()
                },
                flow,
                rates,
                extra_list.join(", "),
                (hot + decide) * 1e3,
                hot * 1e3,
                decide * 1e3
            ),
        }
    }
}

/// How many producers always run outside a path its report names.
const ALWAYS_LISTED: usize = 6;

/// `names`, the first `max` of them and how many more.
fn elided(names: &[&str], max: usize) -> String {
    if names.len() <= max {
        names.join(", ")
    } else {
        format!("{}, … {} more", names[..max].join(", "), names.len() - max)
    }
}

/// Events (or batches) observed on the path by the end: the planner's
/// clock moves on one event in 256 and at decisions only.
/// The expected cost per event of the order in force, from its own stop
/// counts (every event it ran, merged with its earlier periods since the
/// last drift): each step's cost, with the shared producers it is the
/// first to need, times the share of the events that reached its group.
/// Exact for the measured costs, where the pass model of the last decision
/// (`State::expected_s`), which the report gave before, rests on the
/// samples and their prior (26.5 µs per event once, where these counts
/// gave 32). With the events counted; `None` when there are none.
pub(super) fn expected_from_stops(d: &Dyn, st: &State, cur: &Current) -> Option<(f64, u64)> {
    let n = d.steps.len();
    let mut stops = d.stops.snapshot(n + 1);
    for e in st.archive.iter().filter(|e| e.order == cur.order) {
        stops.iter_mut().zip(&e.stops).for_each(|(a, b)| *a += b);
    }
    let events: u64 = stops.iter().sum();
    if events == 0 {
        return None;
    }
    let order: Vec<usize> = cur.order.iter().map(|&i| i as usize).collect();
    let charged = model::charged_costs(&st.costs, &st.shared, &order);
    let (mut cost, mut stopped, mut k) = (0.0, 0u64, 0usize);
    for g in &cur.groups {
        let reach = (events - stopped) as f64 / events as f64;
        cost += g.iter().map(|&j| charged[j]).sum::<f64>() * reach;
        stopped += stops[k..k + g.len()].iter().sum::<u64>();
        k += g.len();
    }
    Some((cost, events))
}

fn observed(d: &Dyn) -> u64 {
    d.observed.load(Relaxed).max(d.seen.highest(0))
}
