//! Producers also needed outside the path (`Dyn::outside`): a step of the
//! path that needs one runs it only on the events where nothing outside
//! the path (a step of another path, an end-path module) ran it. How often
//! something outside did is counted exactly: every execution of the
//! producer (`wants_cost`, asked before each execution) and, per path, the
//! events observed and those on which a step of the path that needs it
//! ran. On the events the path did not need it, every execution was for
//! something outside: the fraction of those events that ran it is what the
//! search takes as the share of events on which the producer is free for
//! the path, and it charges the rest like a producer only the path's steps
//! need (to the first of its steps to run).

use super::OrderingPlanner;
use super::state::{Dyn, State};
use super::stats::Striped;
use crate::graph::{Graph, ModuleIdx};
use crate::schedule::PathOutcome;

/// Executions of the producers that some path needs also outside it.
pub(super) struct Runs {
    /// Per module: its counter (`u32::MAX`: not counted).
    slot: Vec<u32>,
    /// Per counter: calls per execution (a module with external work is
    /// called twice per event, acquire and produce).
    phases: Vec<u64>,
    counts: Striped,
}

impl Runs {
    pub(super) fn new(graph: &Graph, producers: impl IntoIterator<Item = ModuleIdx>) -> Self {
        let mut slot = vec![u32::MAX; graph.modules.len()];
        let mut phases = Vec::new();
        for m in producers {
            if slot[m] == u32::MAX {
                slot[m] = phases.len() as u32;
                phases.push(1 + u64::from(graph.modules[m].external_work));
            }
        }
        Self {
            slot,
            counts: Striped::new(phases.len().max(1)),
            phases,
        }
    }

    /// Counts a call of `module` (hot path: one load for other modules).
    pub(super) fn called(&self, module: ModuleIdx) {
        let s = self.slot[module];
        if s != u32::MAX {
            self.counts.add(s as usize, 1);
        }
    }

    /// Executions of `module` so far.
    fn executions(&self, module: ModuleIdx) -> u64 {
        match self.slot[module] {
            u32::MAX => 0,
            s => self.counts.get(s as usize) / self.phases[s as usize],
        }
    }
}

/// Counts, for an event observed on path `d` (one event, not a batch), the
/// producers of `d.outside` that a step of the path ran for (the plan's
/// steps or a measurement after the rejection), and the event itself.
pub(super) fn count_needs(d: &Dyn, outcome: &PathOutcome) {
    let mut ran = 0u64;
    for &(m, _) in &outcome.steps {
        ran |= 1u64 << d.pos_of[m];
    }
    for (k, &(_, by)) in d.outside.iter().enumerate() {
        if by & ran != 0 {
            d.outside_needed.add(k, 1);
        }
    }
    d.outside_needed.add(d.outside.len(), 1);
}

impl OrderingPlanner {
    /// Per producer of `d.outside`, this planner's own counts: (events of
    /// the path on which no step of it needed the producer, those of them
    /// on which something outside the path ran it). Exact, up to the
    /// events still in flight (the executions are counted when they run,
    /// the events when they finish) and the failed events (not observed).
    pub(super) fn outside_counts(&self, d: &Dyn) -> Vec<(u64, u64)> {
        let observed = d.outside_needed.get(d.outside.len());
        d.outside
            .iter()
            .enumerate()
            .map(|(k, &(m, _))| {
                let needed = d.outside_needed.get(k);
                let without = observed.saturating_sub(needed);
                // Each event runs the producer once: on the events the path
                // needed it, for the path or for both.
                let ran = self.runs.executions(m).saturating_sub(needed);
                (without, ran.min(without))
            })
            .collect()
    }

    /// Per producer of `d.outside`: the share of the path's events on which
    /// something outside the path ran it (its own counts and the imported
    /// ones). Batches (a columnar analysis) are not counted per event: a
    /// path observed in batches takes the producer as run outside (free,
    /// charged to no step). Without counts yet, it is taken as never run
    /// outside (charged in full).
    pub(super) fn outside_share(&self, d: &Dyn, st: &State) -> Vec<f64> {
        let batches = d.batch_obs.load(std::sync::atomic::Ordering::Relaxed) > 0;
        self.outside_counts(d)
            .into_iter()
            .enumerate()
            .map(|(k, (mut without, mut ran))| {
                if batches {
                    return 1.0;
                }
                if let Some(Some(imp)) = st.imported.as_ref().and_then(|i| i.outside.get(k)) {
                    without += imp.events;
                    ran += imp.ran_outside.min(imp.events);
                }
                if without == 0 {
                    0.0
                } else {
                    ran as f64 / without as f64
                }
            })
            .collect()
    }
}
