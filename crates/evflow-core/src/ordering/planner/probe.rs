//! The first decision of an `adaptive` path observed in batches: a probe
//! of the first batch's events through every step (and the producers they
//! need) before the batch enters the path, whose per-event vectors and
//! timings decide the order at once (see `docs/filter-ordering.md`, "The
//! first decision: a probe before the path").

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use super::OrderingPlanner;
use super::state::*;
use crate::graph::PathIdx;
use crate::ordering::costs::ProbedProducer;
use crate::ordering::model::{self, Ideals};
use crate::ordering::policy::Policy;
use crate::ordering::precedence::PrecedenceRefused;

impl OrderingPlanner {
    /// Adds precedence constraints to `path`, `(earlier, later)` positions
    /// in its written order, as if the path had been declared with them:
    /// only before its first decision (an `adaptive` path without samples,
    /// see [`wants_first_probe`](Self::wants_first_probe)), and refused,
    /// leaving the path as it was, when they make a cycle or the order in
    /// force breaks them. The probe before the first decision infers them
    /// for a cut that fails where a cut written before it did not pass
    /// (`Muon_pt[:, 0]` after `nMuon >= 1`).
    pub fn add_precedence(
        &self,
        path: PathIdx,
        pairs: &[(usize, usize)],
    ) -> Result<(), PrecedenceRefused> {
        if !self.wants_first_probe(path) {
            return Err(PrecedenceRefused::Decided);
        }
        let Slot::Dynamic(d) = &self.paths[path] else {
            return Err(PrecedenceRefused::Decided);
        };
        let preds = constrained(&d.preds(), pairs)?;
        let order: Vec<usize> = d
            .order_now
            .iter()
            .map(|o| o.load(Relaxed) as usize)
            .collect();
        if !model::respects(&order, &preds) {
            return Err(PrecedenceRefused::OrderInForce);
        }
        self.set_precedence(d, preds, pairs);
        Ok(())
    }

    /// The precedence constraints in force on `path`: per step (position
    /// in the written order), the steps it must follow (a bit set), the
    /// written ones and those added since
    /// ([`add_precedence`](Self::add_precedence), or imported with
    /// statistics); empty for a path the planner does not reorder (or
    /// none of that index).
    pub fn precedence(&self, path: PathIdx) -> Vec<u64> {
        match self.paths.get(path) {
            Some(Slot::Dynamic(d)) => d.preds().as_ref().clone(),
            _ => Vec::new(),
        }
    }

    /// Puts `preds` (the path's constraints with `pairs` added) in force,
    /// and notes the pairs that were not there yet (exported with the
    /// statistics).
    pub(super) fn set_precedence(&self, d: &Dyn, preds: Vec<u64>, pairs: &[(usize, usize)]) {
        let before = d.preds();
        {
            let mut added = lock(&d.added);
            for &(a, b) in pairs {
                if before[b] >> a & 1 == 0 && !added.contains(&(a, b)) {
                    added.push((a, b));
                }
            }
        }
        // The exact search walks the feasible prefix sets: fewer now.
        let ideals = if d.policy == Policy::Adaptive {
            Ideals::new(&preds, self.tuning.max_dp_states).map(Arc::new)
        } else {
            None
        };
        *d.ideals.write().unwrap_or_else(|e| e.into_inner()) = ideals;
        *d.preds.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(preds);
    }

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

/// `preds` (per step, the steps it must follow) with the pairs
/// `(earlier, later)` added; refused when a pair is not one of two steps
/// or closes a cycle.
pub(super) fn constrained(
    preds: &[u64],
    pairs: &[(usize, usize)],
) -> Result<Vec<u64>, PrecedenceRefused> {
    let mut preds = preds.to_vec();
    for &(a, b) in pairs {
        if a >= preds.len().min(64) || b >= preds.len().min(64) || a == b {
            return Err(PrecedenceRefused::Position(a, b));
        }
        preds[b] |= 1 << a;
        let closure = model::transitive_closure(&preds);
        if closure.iter().enumerate().any(|(j, &c)| c & 1 << j != 0) {
            return Err(PrecedenceRefused::Cycle(a, b));
        }
    }
    Ok(preds)
}

#[cfg(test)]
mod tests {
    use crate::ordering::OrderingPlanner;
    use crate::ordering::PrecedenceRefused;
    use crate::ordering::planner::state::Slot;
    use crate::ordering::policy::{OrderingOptions, Policy};
    use crate::{
        EmptySource, Event, Filter, ModuleDesc, ModuleResult, PathDesc, Process, Transitions,
    };

    struct Driven;
    impl Transitions for Driven {}
    impl Filter for Driven {
        fn filter(&self, _: &Event<'_>) -> ModuleResult<bool> {
            unreachable!("the planner is driven by hand")
        }
    }

    /// One reorderable `adaptive` path written `guard > cut > other`.
    fn planner() -> OrderingPlanner {
        written(["guard", "cut", "other"])
    }

    /// The path `sel` of the three steps written in the order `steps`.
    fn written(steps: [&str; 3]) -> OrderingPlanner {
        let mut proc = Process::new("guarded");
        proc.set_source(EmptySource::new(1));
        for label in steps {
            proc.add(ModuleDesc::filter(label, Driven));
        }
        proc.add_path(PathDesc::new("sel", steps).reorderable(true));
        OrderingPlanner::new(
            &proc.compile().unwrap(),
            &OrderingOptions::new(Policy::Adaptive),
        )
    }

    /// A probe on which `cut` (10% pass, 1 µs) would go first, before
    /// `guard` (90%, 2 µs) and `other` (50%, 3 µs).
    fn decide(planner: &OrderingPlanner) {
        let rows: Vec<(u64, u64)> = (0..4096u64)
            .map(|k| {
                let pass = u64::from(k % 10 != 0) | u64::from(k % 10 == 0) << 1 | (k % 2) << 2;
                (0b111, pass)
            })
            .collect();
        let chunks = |s: f64| vec![(s, 1024); 4];
        planner.decide_from_probe(0, &rows, &[chunks(2e-3), chunks(1e-3), chunks(3e-3)], &[]);
    }

    /// Constraints added before the first decision bind it as declared
    /// ones do: the cut stays after its guard, where without them it
    /// would run first.
    #[test]
    fn an_added_constraint_binds_the_first_decision() {
        let free = planner();
        decide(&free);
        assert_eq!(free.current_order(0)[0], "cut");

        let guarded = planner();
        assert_eq!(guarded.add_precedence(0, &[(0, 1)]), Ok(()));
        decide(&guarded);
        let order = guarded.current_order(0);
        let at = |l: &str| order.iter().position(|o| o == l).unwrap();
        assert!(at("guard") < at("cut"), "{order:?}");
        // After the first decision the path's constraints are final.
        assert_eq!(
            guarded.add_precedence(0, &[(2, 1)]),
            Err(PrecedenceRefused::Decided)
        );
    }

    /// A cycle (with the constraints added before, or among the new ones)
    /// is refused as a whole and leaves the path as it was.
    #[test]
    fn a_cycle_is_refused_and_changes_nothing() {
        let planner = planner();
        assert_eq!(planner.add_precedence(0, &[(0, 1)]), Ok(()));
        assert_eq!(
            planner.add_precedence(0, &[(1, 2), (2, 0)]),
            Err(PrecedenceRefused::Cycle(2, 0))
        );
        assert_eq!(
            planner.add_precedence(0, &[(0, 3)]),
            Err(PrecedenceRefused::Position(0, 3))
        );
        // The refused (1, 2) was not kept.
        let Slot::Dynamic(d) = &planner.paths[0] else {
            panic!("a dynamic path");
        };
        assert_eq!(d.preds().as_slice(), [0, 0b001, 0]);
    }

    /// Pairs inferred by one planner's probe travel with its statistics:
    /// another planner of the path takes them before its first decision,
    /// with no probe, also when its written order puts the cut first, and
    /// exports them again.
    #[test]
    fn inferred_pairs_bind_the_planners_that_import_them() {
        let first = planner();
        assert_eq!(first.add_precedence(0, &[(0, 1)]), Ok(()));
        decide(&first);
        let stats = first.statistics();
        let pair = [("cut".to_string(), "guard".to_string())];
        assert_eq!(stats["sel"].after, pair);
        for steps in [["guard", "cut", "other"], ["cut", "other", "guard"]] {
            let later = written(steps);
            later.import_statistics(&stats).unwrap();
            assert!(!later.wants_first_probe(0));
            let order = later.current_order(0);
            let at = |l: &str| order.iter().position(|o| o == l).unwrap();
            assert!(at("guard") < at("cut"), "{steps:?}: {order:?}");
            let guard = steps.iter().position(|&s| s == "guard").unwrap();
            let cut = steps.iter().position(|&s| s == "cut").unwrap();
            assert_eq!(later.precedence(0)[cut], 1 << guard, "{steps:?}");
            assert_eq!(later.statistics()["sel"].after, pair);
        }
        // Without samples to decide from, the cut written first still
        // waits for its guard.
        let mut few = stats.clone();
        few.get_mut("sel").unwrap().samples.truncate(3);
        let later = written(["cut", "other", "guard"]);
        later.import_statistics(&few).unwrap();
        let order = later.current_order(0);
        assert_eq!(order, ["other", "guard", "cut"]);
    }
}
