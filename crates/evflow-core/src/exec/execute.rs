//! Executing one task: reading an event from the source, running a module
//! on an event (handing external work to `external`), and recording
//! failures according to the error policy.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::external::*;
use super::observe::SliceName;
use super::state::*;
use super::trace::Track;
use crate::error::JobError;
use crate::event::EventData;
use crate::graph::ModuleIdx;
use crate::ids::EventId;
use crate::module::ModuleImpl;
use crate::options::ErrorPolicy;
use crate::report::FailedEvent;
use crate::schedule::{Outcome, Phase, Task};
use crate::source::SourceProducts;

impl Engine {
    /// Runs one task; appends the tasks that may start next. Returns true
    /// when the job is finished.
    pub(crate) fn execute(
        self: &Arc<Self>,
        task: Task,
        out: &mut Vec<Task>,
        submit: &Arc<dyn Submit>,
        thread: usize,
    ) -> bool {
        match task {
            Task::Read { slot } => self.read(slot, out, thread),
            Task::Module {
                slot,
                module,
                instance,
                phase,
            } => self.run_module(slot, module, instance, phase, out, submit, thread),
            Task::Transitions(list) => self.transitions(&list, out, thread),
            Task::Finished => {
                self.finished.store(true, Ordering::SeqCst);
                return true;
            }
        }
        false
    }

    pub(super) fn read(&self, slot: usize, out: &mut Vec<Task>, thread: usize) {
        let t0 = Instant::now();
        let mut products = SourceProducts::default();
        let result = {
            let mut source = lock(&self.source);
            catch_unwind(AssertUnwindSafe(|| source.next_event(&mut products)))
                .unwrap_or_else(|panic| Err(crate::error::ModuleError::msg(panic_message(&panic))))
                .map_err(|e| format!("{}: {e}", source.describe()))
        };
        let id = match result {
            Ok(Some(id)) => match self.store_event(slot, id, products) {
                Ok(()) => Some(id),
                Err(message) => {
                    self.fail_job(JobError::Source { message }, out);
                    None
                }
            },
            Ok(None) => None,
            Err(message) => {
                self.fail_job(JobError::Source { message }, out);
                None
            }
        };
        if let Some(id) = id {
            self.record_slice(
                SliceName::Source,
                "source",
                Track::Worker(thread),
                Some(id),
                t0,
            );
        }
        self.coordinator.read_done(slot, id, out, self);
    }

    pub(super) fn store_event(
        &self,
        slot: usize,
        id: EventId,
        products: SourceProducts,
    ) -> Result<(), String> {
        let index = self.events_read.fetch_add(1, Ordering::Relaxed);
        let data = EventData::new(
            id,
            index,
            self.graph.products.len(),
            self.graph.modules.len(),
        );
        for (instance, value) in products.items {
            let Some(&p) = self
                .source_products
                .iter()
                .find(|&&p| self.graph.products[p].tag.instance == instance)
            else {
                return Err(format!(
                    "the source put undeclared product instance '{instance}' in {id}"
                ));
            };
            if data.products[p].set(value).is_err() {
                return Err(format!("the source put product '{instance}' twice in {id}"));
            }
        }
        self.slot_data[slot].store(Some(Arc::new(data)));
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn run_module(
        self: &Arc<Self>,
        slot: usize,
        module: ModuleIdx,
        instance: u32,
        phase: Phase,
        out: &mut Vec<Task>,
        submit: &Arc<dyn Submit>,
        thread: usize,
    ) {
        let guard = self.slot_data[slot].load();
        let data: &Arc<EventData> = guard.as_ref().expect("event data of a running slot");
        if self.coordinator.is_aborting() {
            // Cancelled: the job is stopping.
            self.coordinator
                .module_done(slot, module, instance, Outcome::Failed, out, &**self);
            return;
        }
        if self.graph.modules[module].restricted() {
            self.end_stall(slot, module, data.id, thread);
        }
        if phase != Phase::Produce
            && !self
                .coordinator
                .replan(slot, module, instance, out, &**self)
        {
            return;
        }
        let event = crate::event::Event {
            data,
            graph: &self.graph,
            module,
        };
        // External work goes on only once acquire returned *and* the work
        // completed, in whichever order.
        let rendezvous = (phase == Phase::Acquire).then(|| Arc::new(Rendezvous::default()));
        let t0 = Instant::now();
        let result = catch_unwind(AssertUnwindSafe(|| {
            match (&self.instances[module][instance as usize], phase) {
                (ModuleImpl::Producer(p), Phase::Acquire) => {
                    let rendezvous = rendezvous.clone().expect("acquire has a rendezvous");
                    let completion = self.completion(
                        slot,
                        module,
                        instance,
                        data.id,
                        rendezvous,
                        submit.clone(),
                    );
                    p.acquire(&event, completion).map(|()| Outcome::Pass)
                }
                (ModuleImpl::Producer(p), _) => p.produce(&event).map(|()| Outcome::Pass),
                (ModuleImpl::Filter(f), _) => f
                    .filter(&event)
                    .map(|pass| if pass { Outcome::Pass } else { Outcome::Reject }),
                (ModuleImpl::Analyzer(a), _) => a.analyze(&event).map(|()| Outcome::Pass),
                (ModuleImpl::Output(o), _) => {
                    let results = data
                        .trigger_results
                        .get()
                        .expect("trigger results are set before end paths run");
                    o.write(&event, results).map(|()| Outcome::Pass)
                }
            }
        }));
        let elapsed = t0.elapsed();
        let calls = u64::from(phase != Phase::Produce);
        self.counts
            .record(thread, module, calls, elapsed.as_nanos() as u64);
        let planner = self.coordinator.planner();
        if planner.wants_cost(module) {
            match data.step_counts[module].get() {
                Some(&(seen, _)) => planner.observe_batch_cost(module, elapsed.as_secs_f64(), seen),
                None => planner.observe_cost(module, elapsed.as_secs_f64()),
            }
        }
        if self.trace.is_some() {
            self.record_slice(
                SliceName::Module(module),
                "module",
                Track::Worker(thread),
                Some(data.id),
                t0,
            );
        }
        let failure = match &result {
            Ok(Ok(_)) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(panic) => Some(format!("panic: {}", panic_message(panic))),
        };
        if let Some(rendezvous) = rendezvous {
            *lock(&rendezvous.acquire_error) = failure;
            *lock(&rendezvous.acquire_returned) = Some(Instant::now());
            if rendezvous.arrive() {
                self.external_ready(slot, module, instance, data.id, &rendezvous, out);
            }
            return;
        }
        let outcome = match (result, failure) {
            (Ok(Ok(outcome)), _) => outcome,
            (_, message) => {
                self.module_failed(slot, module, data.id, message.unwrap_or_default(), out)
            }
        };
        self.coordinator
            .module_done(slot, module, instance, outcome, out, &**self);
    }

    pub(super) fn module_failed(
        &self,
        slot: usize,
        module: ModuleIdx,
        id: EventId,
        message: String,
        out: &mut Vec<Task>,
    ) -> Outcome {
        // A module run only to measure steps after the event's rejection,
        // for the ordering planner: the event's decision is made, and the
        // failure fails nothing (`EventState::measurement_failed`).
        if self.coordinator.measurement_failed(slot, module) {
            return Outcome::Failed;
        }
        self.stats[module].failures.fetch_add(1, Ordering::Relaxed);
        let label = self.graph.modules[module].label.clone();
        // Under either policy the report lists the event: the report of a
        // job that stopped on a failure says which event and module it was.
        lock(&self.failed_events).push(FailedEvent {
            run: id.run,
            lumi: id.lumi,
            event: id.event,
            module: label.clone(),
            message: message.clone(),
        });
        match self.policy {
            ErrorPolicy::SkipEvent => {}
            ErrorPolicy::Fail => self.fail_job(
                JobError::Module {
                    module: label,
                    event: id,
                    message,
                },
                out,
            ),
        }
        Outcome::Failed
    }

    pub(super) fn fail_job(&self, error: JobError, out: &mut Vec<Task>) {
        {
            let mut slot = lock(&self.job_error);
            if slot.is_none() {
                *slot = Some(error);
            }
        }
        self.coordinator.abort(out, self);
    }
}
