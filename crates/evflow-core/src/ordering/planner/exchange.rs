//! The planner's statistics handed to another planner of the same paths
//! ([`PathStatistics`]): exported at the end of a job (what this process
//! measured itself), imported at the start of one (what others measured
//! before), so that a later chunk of a distributed job decides from every
//! finished chunk's measurements instead of learning from scratch.
//!
//! Imported statistics are kept apart from the planner's own: decisions
//! use both (the imported samples and stop counts as older ones, the costs
//! combined by their measurements), the export holds only the planner's
//! own, so that merging the exports of many processes counts every event
//! once. A drift forgets them with the planner's own.

use std::sync::atomic::Ordering::Relaxed;

use super::OrderingPlanner;
use super::probe::constrained;
use super::state::*;
use super::stats::*;
use crate::ordering::costs::Measured;
use crate::ordering::exchange::{
    OrderingStatistics, OutsideProducerCost, PathStatistics, SharedProducerCost, StatisticsError,
    StepCost, StopCounts, combine_costs,
};
use crate::ordering::model::respects;
use crate::ordering::policy::Policy;

impl OrderingPlanner {
    /// What the `adaptive` planner measured itself on each of its dynamic
    /// paths (by path name): the sampled decision vectors of its window, the
    /// stop counts of the orders it ran since the last drift, the robust
    /// cost of each step and of each producer several steps need (those
    /// timed), and of each producer also needed outside the path with how
    /// often something outside ran it. Imported statistics are not
    /// included.
    pub fn statistics(&self) -> OrderingStatistics {
        let mut out = OrderingStatistics::new();
        for slot in &self.paths {
            let Slot::Dynamic(d) = slot else { continue };
            if d.policy != Policy::Adaptive {
                continue;
            }
            // The labels of the steps in a bit set (the steps needing a producer).
            let step_labels = |by: u64| -> Vec<String> {
                (0..d.steps.len())
                    .filter(|&i| by >> i & 1 == 1)
                    .map(|i| self.labels[d.steps[i]].clone())
                    .collect()
            };
            let (own_costs, _) = self.measure_costs(d);
            let shared = d
                .shared
                .iter()
                .zip(self.measure_shared(d, &d.shared))
                .filter_map(|(&(m, by), e)| {
                    Some(SharedProducerCost {
                        producer: self.labels[m].clone(),
                        steps: step_labels(by),
                        cost: step_cost(e)?,
                    })
                })
                .collect();
            let outside = d
                .outside
                .iter()
                .zip(self.measure_shared(d, &d.outside))
                .zip(self.outside_counts(d))
                .filter_map(|((&(m, by), e), (events, ran_outside))| {
                    Some(OutsideProducerCost {
                        producer: self.labels[m].clone(),
                        steps: step_labels(by),
                        cost: step_cost(e)?,
                        events,
                        ran_outside,
                    })
                })
                .collect();
            let st = lock(&d.state);
            let cur = read(&d.current).clone();
            let samples = {
                let s = lock(&d.samples);
                // The ring in the order the samples came in.
                let (newer, older) = s.ring.split_at(s.next.min(s.ring.len()));
                older
                    .iter()
                    .chain(newer)
                    .map(|x| (x.known, x.pass))
                    .collect()
            };
            let mut stops: Vec<StopCounts> = Vec::new();
            let current = Epoch {
                order: cur.order.clone(),
                stops: d.stops.snapshot(d.steps.len() + 1),
            };
            for e in st.archive.iter().chain(std::iter::once(&current)) {
                let order: Vec<usize> = e.order.iter().map(|&i| i as usize).collect();
                match stops.iter_mut().find(|s| s.order == order) {
                    Some(s) => s.stops.iter_mut().zip(&e.stops).for_each(|(a, b)| *a += b),
                    None => stops.push(StopCounts {
                        order,
                        stops: e.stops.clone(),
                    }),
                }
            }
            stops.retain(|s| s.stops.iter().any(|&c| c > 0));
            out.insert(
                d.name.clone(),
                PathStatistics {
                    steps: self.step_labels(d),
                    samples,
                    stops,
                    costs: own_costs.iter().map(|&m| step_cost(m)).collect(),
                    shared,
                    outside,
                    after: lock(&d.added)
                        .iter()
                        .map(|&(e, l)| {
                            (
                                self.labels[d.steps[l]].clone(),
                                self.labels[d.steps[e]].clone(),
                            )
                        })
                        .collect(),
                },
            );
        }
        out
    }

    /// Starts the `adaptive` paths named in `stats` from those statistics
    /// (measured by other planners of the same paths; steps matched by
    /// label, so another written order is fine): with enough samples the
    /// path skips its warm-up and decides its order at once, before the
    /// first event. Paths with another policy ignore them. Fails, changing
    /// nothing, when a path is unknown, is not reorderable, or lists other
    /// steps, or when the statistics are inconsistent.
    ///
    /// Returns the names of the paths that took statistics.
    pub fn import_statistics(
        &self,
        stats: &OrderingStatistics,
    ) -> Result<Vec<String>, StatisticsError> {
        let mut ready = Vec::new();
        for (name, ps) in stats {
            ps.validate(name)?;
            let Some(p) = self.path_names.iter().position(|n| n == name) else {
                return Err(StatisticsError {
                    path: name.clone(),
                    reason: "the job has no path of this name".into(),
                });
            };
            // A path that is not reorderable, or whose policy is `fixed`,
            // has nothing to decide.
            let Slot::Dynamic(d) = &self.paths[p] else {
                continue;
            };
            if d.policy != Policy::Adaptive {
                continue;
            }
            ready.push((d, ps.for_steps(name, &self.step_labels(d))?));
        }
        let mut names = Vec::new();
        for (d, ps) in ready {
            self.import_path(d, &ps);
            names.push(d.name.clone());
        }
        Ok(names)
    }

    fn import_path(&self, d: &Dyn, ps: &PathStatistics) {
        // Validated: no bit beyond the steps, none passed that did not run.
        let skip = ps.samples.len().saturating_sub(self.tuning.window.max(1));
        let imported = Imported {
            samples: ps.samples[skip..]
                .iter()
                .filter(|&&(known, _)| known != 0)
                .map(|&(known, pass)| Sample { known, pass })
                .collect(),
            epochs: ps
                .stops
                .iter()
                .map(|s| Epoch {
                    order: s.order.iter().map(|&j| j as u8).collect(),
                    stops: s.stops.clone(),
                })
                .collect(),
            costs: ps.costs.clone(),
            // By label; a producer that the exporting planner saw needed
            // outside the path and this one does not (or the reverse)
            // gives its cost only.
            shared: d
                .shared
                .iter()
                .map(|&(m, _)| {
                    let label = &self.labels[m];
                    let shared = ps.shared.iter().find(|s| &s.producer == label);
                    let outside = ps.outside.iter().find(|s| &s.producer == label);
                    shared.map(|s| s.cost).or(outside.map(|s| s.cost))
                })
                .collect(),
            outside: d
                .outside
                .iter()
                .map(|&(m, _)| {
                    let label = &self.labels[m];
                    let outside = ps.outside.iter().find(|s| &s.producer == label);
                    let shared = ps.shared.iter().find(|s| &s.producer == label);
                    outside.cloned().or(shared.map(|s| OutsideProducerCost {
                        cost: s.cost,
                        ..Default::default()
                    }))
                })
                .collect(),
        };
        let enough = imported.samples.len() >= MIN_SAMPLES_TO_REORDER;
        let mut st = lock(&d.state);
        let n_obs = d.observed.load(Relaxed);
        self.import_precedence(d, &st, &ps.after, n_obs);
        st.imported = Some(imported);
        d.imported.store(true, Relaxed);
        if enough {
            // The warm-up's job is done: decide now, from the imported
            // statistics, and go on as after a warm-up.
            st.learning = false;
            self.decide_adaptive(d, &mut st, n_obs);
            d.next_check.store(st.next_decision.max(n_obs + 1), Relaxed);
        }
    }

    /// Takes the imported `after` pairs (`(later, earlier)` labels) before
    /// the path's first decision, as if written (a pair that makes a cycle
    /// with the written ones is left out): a cut that another planner's
    /// probe found to fail without its guard runs after it here too, with
    /// no probe. When the order in force (the written one, or a chunk's
    /// seeded one) breaks them, the nearest order that respects them is
    /// put in force before the first event.
    fn import_precedence(&self, d: &Dyn, st: &State, after: &[(String, String)], n_obs: u64) {
        let labels = self.step_labels(d);
        let at = |x: &String| labels.iter().position(|l| l == x);
        let mut preds = d.preds().as_ref().clone();
        let mut taken = Vec::new();
        for (later, earlier) in after {
            let (Some(l), Some(e)) = (at(later), at(earlier)) else {
                continue;
            };
            if let Ok(with) = constrained(&preds, &[(e, l)]) {
                preds = with;
                taken.push((e, l));
            }
        }
        if taken.is_empty() {
            return;
        }
        self.set_precedence(d, preds.clone(), &taken);
        let order: Vec<usize> = read(&d.current).order.iter().map(|&i| i as usize).collect();
        if !respects(&order, &preds) {
            let groups = topological_written(&preds)
                .into_iter()
                .map(|j| vec![j])
                .collect();
            let current = make_current(&d.steps, groups, &st.rates, st.targets(&preds));
            let reason = "the order in force breaks the imported after= pairs: the nearest order that respects them";
            self.install(d, current, n_obs, reason.into());
        }
    }

    /// The labels of the path's steps, in its written order.
    fn step_labels(&self, d: &Dyn) -> Vec<String> {
        d.steps.iter().map(|&m| self.labels[m].clone()).collect()
    }

    /// The samples and the orders' stop counts a decision uses: the
    /// imported ones (older) and the planner's own.
    pub(super) fn with_imported(
        &self,
        st: &State,
        own_samples: Vec<Sample>,
        own_epochs: Vec<Epoch>,
    ) -> (Vec<Sample>, Vec<Epoch>) {
        let Some(imp) = &st.imported else {
            return (own_samples, own_epochs);
        };
        let room = self.tuning.window.max(1).saturating_sub(own_samples.len());
        let skip = imp.samples.len().saturating_sub(room);
        let mut samples = imp.samples[skip..].to_vec();
        samples.extend(own_samples);
        let mut epochs = imp.epochs.clone();
        epochs.extend(own_epochs);
        (samples, epochs)
    }
}

/// A measured cost as exchanged.
pub(super) fn step_cost(m: Measured) -> Option<StepCost> {
    m.map(|(mean_s, se_s, n)| StepCost {
        mean_s,
        se_s,
        measurements: n as u64,
    })
}

/// A measured cost (a step's own, or a shared producer's) combined with
/// another measurement of it (imported, or from other timings), weighted
/// by their measurements.
pub(super) fn with_imported_cost(own: Measured, imported: Option<StepCost>) -> Measured {
    combine_costs(step_cost(own), imported).map(|c| (c.mean_s, c.se_s, c.measurements as usize))
}
