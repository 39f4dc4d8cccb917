//! The first decision of an `adaptive` path observed in batches: a probe
//! of the first batch's events through every step (and the producers they
//! need) before the batch enters the path, whose per-event vectors and
//! timings decide the order at once (see `docs/filter-ordering.md`, "The
//! first decision: a probe before the path").

use std::sync::atomic::Ordering::Relaxed;

use super::OrderingPlanner;
use super::state::*;
use crate::graph::PathIdx;
use crate::ordering::costs::ProbedProducer;
use crate::ordering::policy::Policy;

impl OrderingPlanner {
    /// Whether a batch about to enter `path` should first run a probe of
    /// its events through every step and hand it to
    /// [`decide_from_probe`](Self::decide_from_probe): an `adaptive` path
    /// that has no per-event samples yet, so no order has been decided
    /// from data. Without it the first batches, which start together,
    /// would run the written order on all of their events.
    pub fn wants_first_probe(&self, path: PathIdx) -> bool {
        match &self.paths[path] {
            Slot::Dynamic(d) if d.policy == Policy::Adaptive => {
                lock(&d.samples).total == 0 && !d.imported.load(Relaxed)
            }
            _ => false,
        }
    }

    /// A probe run through every step of `path` before the batch's path
    /// starts: per-event `(known, passed)` vectors as for
    /// [`observe_event_samples`](Self::observe_event_samples), per step
    /// (position in the written order) its own timings on parts of the
    /// probe, `(seconds, events seen)`, and the timings of the producers
    /// the steps needed. The timings join the measurements as a batch's
    /// would (costs per event seen: several of them give the estimate its
    /// uncertainty), the vectors the samples, and the path decides at once
    /// on the calling thread, so that this batch and those read after it
    /// start with an order decided from data. Nobody waits: if another
    /// thread holds the path's decision state, the decision comes at the
    /// next observed batch instead.
    ///
    /// Each producer is charged as the batches' own timings charge it: one
    /// that only one step needs is part of that step's cost (its time per
    /// event is added to each of the step's timings); one that several
    /// steps of the path need, and nothing outside it, is a shared
    /// producer, charged to the first of them in each order considered;
    /// one also needed outside the path is charged to none (its timing
    /// counts only in what measuring its steps after a rejection costs).
    pub fn decide_from_probe(
        &self,
        path: PathIdx,
        samples: &[(u64, u64)],
        timings: &[Vec<(f64, u64)>],
        producers: &[ProbedProducer],
    ) {
        let Slot::Dynamic(d) = &self.paths[path] else {
            return;
        };
        // Per step: the time per event of the producers only it needs.
        let mut private = vec![0.0f64; d.steps.len()];
        let mut private_of = vec![(0.0f64, 0u64); self.labels.len()];
        for p in producers {
            let Some(m) = self.labels.iter().position(|l| *l == p.label) else {
                continue;
            };
            if d.shared.iter().chain(&d.outside).any(|&(s, _)| s == m) {
                self.push_batch_timing(m, p.seconds, p.events);
            } else if p.events > 0 && p.seconds.is_finite() && p.seconds >= 0.0 {
                private_of[m].0 += p.seconds;
                private_of[m].1 += p.events;
            }
        }
        for (j, list) in d.attributed.iter().enumerate() {
            for &m in &list[1..] {
                let (seconds, events) = private_of[m];
                if events > 0 {
                    private[j] += seconds / events as f64;
                }
            }
        }
        for (j, list) in timings.iter().enumerate().take(d.steps.len()) {
            for &(seconds, events) in list {
                let with_private = seconds + private[j] * events as f64;
                self.push_batch_timing(d.steps[j], with_private, events);
            }
        }
        self.observe_event_samples(path, samples);
        d.next_check.store(0, Relaxed);
        self.checkpoint(d, d.observed.load(Relaxed));
    }
}
