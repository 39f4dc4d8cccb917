//! Transitions: the job-level callbacks, and the begin and end of runs and
//! luminosity blocks on every module instance, in the order the coordinator
//! decides.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

use super::observe::SliceName;
use super::state::*;
use super::trace::Track;
use crate::error::JobError;
use crate::graph::ModuleIdx;
use crate::report::transition_name;
use crate::schedule::{Task, Transition};

impl Engine {
    /// Calls a job-level callback on every module instance.
    pub(crate) fn job_transition(&self, begin: bool) -> Result<(), JobError> {
        // Each instance closes what it opened: after a failed beginJob the
        // instances that began end theirs; a failed endJob does not keep
        // the others from ending. The first failure is the job's error.
        let mut first = None;
        let mut begun = Vec::new();
        'modules: for (m, instances) in self.instances.iter().enumerate() {
            for inst in instances {
                let t = inst.transitions();
                let result = catch_unwind(AssertUnwindSafe(|| {
                    if begin { t.begin_job() } else { t.end_job() }
                }));
                match failure_message(result) {
                    None if begin => begun.push(inst),
                    None => {}
                    Some(message) => {
                        first.get_or_insert(JobError::Transition {
                            module: self.graph.modules[m].label.clone(),
                            transition: if begin { "beginJob" } else { "endJob" }.into(),
                            message,
                        });
                        if begin {
                            break 'modules;
                        }
                    }
                }
            }
        }
        if first.is_some() {
            for inst in begun {
                let t = inst.transitions();
                // Its own failure here is not the job's error (that is the
                // beginJob that failed).
                let _ = catch_unwind(AssertUnwindSafe(|| t.end_job()));
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Runs a list of transitions the coordinator decided together. After a
    /// failure no block or run begins any more, but the ends of the list
    /// still run: the coordinator has already counted those blocks (and the
    /// run) as ended, and each instance must close what it opened.
    pub(super) fn transitions(&self, list: &[Transition], out: &mut Vec<Task>, thread: usize) {
        let mut failed = false;
        for t in list {
            let begin = matches!(t, Transition::BeginRun(_) | Transition::BeginLumi(..));
            if failed && begin {
                continue;
            }
            let t0 = Instant::now();
            let error = if begin {
                self.begin_transition(t)
            } else {
                self.end_transition(t)
            };
            if self.trace.is_some() {
                let name = transition_name(t);
                let track = Track::Worker(thread);
                self.record_slice(SliceName::Transition(&name), "transition", track, None, t0);
            }
            if let Some(error) = error {
                if !failed {
                    self.fail_job(error, out);
                }
                failed = true;
            }
        }
        self.coordinator.transitions_done(out, self);
    }

    /// Calls a begin hook on every instance, in module order, up to the
    /// first failure. An instance counts as open once its hook was called.
    pub(super) fn begin_transition(&self, t: &Transition) -> Option<JobError> {
        let mut open = lock(&self.open_transitions);
        for (m, instances) in self.instances.iter().enumerate() {
            for (i, inst) in instances.iter().enumerate() {
                let hooks = inst.transitions();
                let state = &mut open[m][i];
                let result = catch_unwind(AssertUnwindSafe(|| match *t {
                    Transition::BeginRun(r) => {
                        state.run = Some(r);
                        hooks.begin_run(r)
                    }
                    Transition::BeginLumi(r, l) => {
                        state.lumis.push((r, l));
                        hooks.begin_lumi(r, l)
                    }
                    _ => Ok(()),
                }));
                if let Some(message) = failure_message(result) {
                    return Some(self.transition_error(m, t, message));
                }
            }
        }
        None
    }

    /// Calls an end hook on every instance that has that kind of block open,
    /// with the block it opened; each is ended exactly once, even after
    /// another instance failed.
    pub(super) fn end_transition(&self, t: &Transition) -> Option<JobError> {
        let mut open = lock(&self.open_transitions);
        let mut first_error = None;
        for (m, instances) in self.instances.iter().enumerate() {
            for (i, inst) in instances.iter().enumerate() {
                let hooks = inst.transitions();
                let state = &mut open[m][i];
                let result = match *t {
                    Transition::EndLumi(r, l) => {
                        let open = state.lumis.iter().position(|&b| b == (r, l));
                        open.map(|i| {
                            state.lumis.remove(i);
                            catch_unwind(AssertUnwindSafe(|| hooks.end_lumi(r, l)))
                        })
                    }
                    Transition::EndRun(_) => state
                        .run
                        .take()
                        .map(|r| catch_unwind(AssertUnwindSafe(|| hooks.end_run(r)))),
                    _ => None,
                };
                if let Some(message) = result.and_then(failure_message) {
                    first_error.get_or_insert_with(|| self.transition_error(m, t, message));
                }
            }
        }
        first_error
    }

    pub(super) fn transition_error(
        &self,
        module: ModuleIdx,
        t: &Transition,
        message: String,
    ) -> JobError {
        JobError::Transition {
            module: self.graph.modules[module].label.clone(),
            transition: transition_name(t),
            message,
        }
    }
}
