//! The `hepframe` baseline: HEP-Frame's rule, steps sorted by decayed
//! pass rate per unit of cost, without sampling.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use super::OrderingPlanner;
use super::state::*;
use super::stats::obs_for;
use crate::ordering::model;

impl OrderingPlanner {
    pub(super) fn decide_hepframe(&self, d: &Dyn, st: &mut State, n_obs: u64) {
        let t = &self.tuning;
        let n = d.steps.len();
        self.update_costs(d, st);
        for i in 0..n {
            let r = d.reached[i].swap(0, Relaxed) as f64;
            let p = d.passed[i].swap(0, Relaxed) as f64;
            st.hep_reached[i] = st.hep_reached[i] * 0.5 + r;
            st.hep_passed[i] = st.hep_passed[i] * 0.5 + p;
        }
        let pass: Vec<f64> = (0..n)
            .map(|i| {
                if st.hep_reached[i] > 0.0 {
                    st.hep_passed[i] / st.hep_reached[i]
                } else {
                    1.0
                }
            })
            .collect();
        let levels = model::hepframe_levels(&st.costs, &pass, &d.preds());
        let groups: Vec<Vec<usize>> = if t.hepframe_concurrent {
            levels
        } else {
            levels.into_iter().flatten().map(|j| vec![j]).collect()
        };
        st.decisions += 1;
        st.learning = false;
        // HEP-Frame measures on the events that reach each filter; it does
        // not sample after the start.
        st.rates.fill(0.0);
        let cur = read(&d.current).clone();
        if groups != cur.groups {
            let max_cost = st.costs.iter().copied().fold(0.0, f64::max);
            let weights: Vec<String> = groups
                .iter()
                .map(|g| {
                    g.iter()
                        .map(|&j| {
                            format!(
                                "{} {:.3}",
                                self.labels[d.steps[j]],
                                model::hepframe_weight(pass[j], st.costs[j], max_cost)
                            )
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .collect();
            let reason = format!(
                "HEP-Frame weights by level (0.7 pass + 0.3 time/max): [{}]",
                weights.join("] | [")
            );
            let current = make_current(&d.steps, groups, &st.rates, Targets::NONE);
            self.install(d, current, n_obs, reason);
            st.interval = t.min_interval.max(1);
        } else {
            let current = make_current(&d.steps, cur.groups.clone(), &st.rates, Targets::NONE);
            d.set_current(Arc::new(current));
            st.interval = (st.interval * 2).min(t.max_interval.max(1));
        }
        st.next_decision = n_obs + obs_for(st.interval, d.per_obs());
    }
}
