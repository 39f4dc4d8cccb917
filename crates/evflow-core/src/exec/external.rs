//! External work (`Producer::acquire`): the rendezvous of the module's two
//! signals (`acquire` returning, and the completion it was handed), then
//! the event goes on like after any module.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::observe::SliceName;
use super::state::*;
use super::trace::Track;
use crate::error::JobError;
use crate::graph::ModuleIdx;
use crate::ids::EventId;
use crate::module::Completion;
use crate::module::ModuleImpl;
use crate::schedule::{Outcome, Task};

/// Meeting point of an external-work module's two signals.
#[derive(Default)]
pub(super) struct Rendezvous {
    /// Signals still to come: `acquire` returning, and the completion.
    pub(super) arrived: AtomicU64,
    pub(super) acquire_error: Mutex<Option<String>>,
    pub(super) acquire_returned: Mutex<Option<Instant>>,
    pub(super) completion: Mutex<Option<(crate::error::ModuleResult, Instant)>>,
}

impl Rendezvous {
    /// Records one signal; true for the second (who then goes on).
    pub(super) fn arrive(&self) -> bool {
        self.arrived.fetch_add(1, Ordering::AcqRel) == 1
    }
}

impl Engine {
    pub(super) fn completion(
        self: &Arc<Self>,
        slot: usize,
        module: ModuleIdx,
        instance: u32,
        id: EventId,
        rendezvous: Arc<Rendezvous>,
        submit: Arc<dyn Submit>,
    ) -> Completion {
        let engine = self.clone();
        Completion::new(move |result| {
            *lock(&rendezvous.completion) = Some((result, Instant::now()));
            if rendezvous.arrive() {
                let mut out = Vec::new();
                engine.external_ready(slot, module, instance, id, &rendezvous, &mut out);
                for task in out {
                    submit.submit(task);
                }
            }
        })
    }

    /// Both halves of external work are in: schedule `produce` on the same
    /// instance, or fail the event (an error of `acquire` itself wins).
    pub(super) fn external_ready(
        &self,
        slot: usize,
        module: ModuleIdx,
        instance: u32,
        id: EventId,
        rendezvous: &Rendezvous,
        out: &mut Vec<Task>,
    ) {
        let returned = lock(&rendezvous.acquire_returned).expect("acquire returned");
        let (result, completed) = lock(&rendezvous.completion)
            .take()
            .expect("the completion arrived");
        let waited = completed.saturating_duration_since(returned);
        self.stats[module]
            .wait_ns
            .fetch_add(waited.as_nanos() as u64, Ordering::Relaxed);
        if self.trace.is_some() {
            // Waits get one track per event slot, apart from the worker threads.
            let (name, track) = (SliceName::Module(module), Track::Wait(slot));
            self.record_interval(name, "wait", track, Some(id), returned, completed);
        }
        let failure = lock(&rendezvous.acquire_error)
            .take()
            .or_else(|| result.err().map(|e| e.to_string()));
        match failure {
            None => self
                .coordinator
                .acquire_done(slot, module, instance, out, self),
            Some(message) => {
                self.module_failed(slot, module, id, message, out);
                self.coordinator
                    .module_done(slot, module, instance, Outcome::Failed, out, self);
            }
        }
    }

    /// Whether any module hears of idle spells ([`Engine::idle`]).
    pub(super) fn has_external_work(&self) -> bool {
        !self.external_modules.is_empty()
    }

    /// The executor has no task to run: tells every producer with external
    /// work ([`crate::Producer::engine_idle`]), so that work gathered for a
    /// combined start does not wait for a time-out. A panic there fails the
    /// job (its tasks go to `out`).
    pub(super) fn idle(&self, out: &mut Vec<Task>) {
        for &module in &self.external_modules {
            for instance in &self.instances[module] {
                let ModuleImpl::Producer(producer) = instance else {
                    continue;
                };
                let result = catch_unwind(AssertUnwindSafe(|| producer.engine_idle()));
                if let Err(panic) = result {
                    let error = JobError::Transition {
                        module: self.graph.modules[module].label.clone(),
                        transition: "engineIdle".into(),
                        message: format!("panic: {}", panic_message(&panic)),
                    };
                    self.fail_job(error, out);
                    return;
                }
            }
        }
    }
}
