//! Executors: carry out the [`Task`]s the [`Coordinator`] decides on.
//!
//! [`Engine::execute`] runs one task (a source read, a module, transitions)
//! and reports the result back to the coordinator, which appends the tasks
//! that may start next. The threaded executor spreads those over a
//! work-stealing pool; the sequential executor runs them one after the other
//! on a single thread.

pub(crate) mod sequential;
pub(crate) mod shared_queue;
pub(crate) mod threaded;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::event::EventData;
use crate::graph::{Graph, ModuleIdx};
use crate::module::{Completion, ModuleImpl};
use crate::report::{
    FailedEvent, ModuleReport, PathReport, Report, Stall, StepReport, TraceSlice, transition_name,
};
use crate::schedule::{
    Coordinator, EventState, Observer, Outcome, PathOutcome, PathStatus, Phase, Task, Transition,
};
use crate::source::{Source, SourceProducts};
use crate::{ErrorPolicy, EventId, JobError, RunOptions, TriggerResults};

/// Hands tasks that become ready outside the task loop (completed external
/// work) back to the executor.
pub(crate) trait Submit: Send + Sync {
    fn submit(&self, task: Task);
}

#[derive(Default)]
struct ModuleStats {
    calls: AtomicU64,
    run_ns: AtomicU64,
    wait_ns: AtomicU64,
    queue_ns: AtomicU64,
    failures: AtomicU64,
}

/// Meeting point of an external-work module's two signals.
#[derive(Default)]
struct Rendezvous {
    /// Signals still to come: `acquire` returning, and the completion.
    arrived: AtomicU64,
    acquire_error: Mutex<Option<String>>,
    acquire_returned: Mutex<Option<Instant>>,
    completion: Mutex<Option<(crate::ModuleResult, Instant)>>,
}

impl Rendezvous {
    /// Records one signal; true for the second (who then goes on).
    fn arrive(&self) -> bool {
        self.arrived.fetch_add(1, Ordering::AcqRel) == 1
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The run and luminosity block a module instance has begun and not ended.
#[derive(Clone, Copy, Default)]
struct OpenBlocks {
    run: Option<u32>,
    lumi: Option<(u32, u32)>,
}

/// How many of the longest stalls a report keeps.
const STALLS_KEPT: usize = 20;

/// Everything a running job shares between its threads.
pub(crate) struct Engine {
    graph: Arc<Graph>,
    pub(crate) coordinator: Coordinator,
    instances: Vec<Vec<ModuleImpl>>,
    source: Mutex<Box<dyn Source>>,
    source_products: Vec<usize>,
    slot_data: Vec<Mutex<Option<Arc<EventData>>>>,
    stats: Vec<ModuleStats>,
    /// visited/passed per (path, step), flattened; then per path.
    step_visited: Vec<AtomicU64>,
    step_passed: Vec<AtomicU64>,
    step_offset: Vec<usize>,
    path_visited: Vec<AtomicU64>,
    path_passed: Vec<AtomicU64>,
    events_read: AtomicU64,
    events_done: AtomicU64,
    policy: ErrorPolicy,
    failed_events: Mutex<Vec<FailedEvent>>,
    job_error: Mutex<Option<JobError>>,
    trace: Option<Mutex<Vec<TraceSlice>>>,
    start: Instant,
    progress: Option<crate::ProgressFn>,
    finished: AtomicBool,
    /// When restricted work was queued, by (slot, module).
    queued_at: Mutex<std::collections::HashMap<(usize, ModuleIdx), Instant>>,
    stalls: Mutex<Vec<Stall>>,
    /// Per module and instance: what its hooks have opened.
    open_transitions: Mutex<Vec<Vec<OpenBlocks>>>,
    steady: Mutex<crate::report::SteadyRate>,
}

impl Engine {
    pub(crate) fn new(
        graph: Arc<Graph>,
        instances: Vec<Vec<ModuleImpl>>,
        source: Box<dyn Source>,
        options: &RunOptions,
    ) -> Self {
        let k = options.events_in_flight.max(1);
        let mut step_offset = Vec::new();
        let mut n_steps = 0;
        for p in &graph.paths {
            step_offset.push(n_steps);
            n_steps += p.steps.len();
        }
        let open = instances
            .iter()
            .map(|i| vec![OpenBlocks::default(); i.len()])
            .collect();
        let source_products = graph
            .products
            .iter()
            .enumerate()
            .filter(|(_, p)| p.producer.is_none())
            .map(|(i, _)| i)
            .collect();
        Self {
            coordinator: Coordinator::new(
                graph.clone(),
                k,
                options.planner.as_ref().map(|make| make(&graph)),
            ),
            stats: graph
                .modules
                .iter()
                .map(|_| ModuleStats::default())
                .collect(),
            step_visited: (0..n_steps).map(|_| AtomicU64::new(0)).collect(),
            step_passed: (0..n_steps).map(|_| AtomicU64::new(0)).collect(),
            step_offset,
            path_visited: graph.paths.iter().map(|_| AtomicU64::new(0)).collect(),
            path_passed: graph.paths.iter().map(|_| AtomicU64::new(0)).collect(),
            slot_data: (0..k).map(|_| Mutex::new(None)).collect(),
            graph,
            instances,
            source: Mutex::new(source),
            source_products,
            events_read: AtomicU64::new(0),
            events_done: AtomicU64::new(0),
            policy: options.on_error,
            failed_events: Mutex::new(Vec::new()),
            job_error: Mutex::new(None),
            trace: options.trace.then(|| Mutex::new(Vec::new())),
            start: Instant::now(),
            progress: options.progress.clone(),
            finished: AtomicBool::new(false),
            queued_at: Mutex::new(std::collections::HashMap::new()),
            stalls: Mutex::new(Vec::new()),
            open_transitions: Mutex::new(open),
            steady: Mutex::new(crate::report::SteadyRate::new(k)),
        }
    }

    /// Calls a job-level callback on every module instance.
    pub(crate) fn job_transition(&self, begin: bool) -> Result<(), JobError> {
        for (m, instances) in self.instances.iter().enumerate() {
            for inst in instances {
                let t = inst.transitions();
                let result = catch_unwind(AssertUnwindSafe(|| {
                    if begin { t.begin_job() } else { t.end_job() }
                }));
                if let Some(message) = failure_message(result) {
                    return Err(JobError::Transition {
                        module: self.graph.modules[m].label.clone(),
                        transition: if begin { "beginJob" } else { "endJob" }.into(),
                        message,
                    });
                }
            }
        }
        Ok(())
    }

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

    fn read(&self, slot: usize, out: &mut Vec<Task>, thread: usize) {
        let t0 = Instant::now();
        let mut products = SourceProducts::default();
        let result = {
            let mut source = lock(&self.source);
            catch_unwind(AssertUnwindSafe(|| source.next_event(&mut products)))
                .unwrap_or_else(|panic| Err(crate::ModuleError::msg(panic_message(&panic))))
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
            self.record_slice("source", "source", thread, Some(id), t0);
        }
        self.coordinator.read_done(slot, id, out, self);
    }

    fn store_event(
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
        *lock(&self.slot_data[slot]) = Some(Arc::new(data));
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn run_module(
        self: &Arc<Self>,
        slot: usize,
        module: ModuleIdx,
        instance: u32,
        phase: Phase,
        out: &mut Vec<Task>,
        submit: &Arc<dyn Submit>,
        thread: usize,
    ) {
        let data = lock(&self.slot_data[slot])
            .clone()
            .expect("event data of a running slot");
        if self.coordinator.is_aborting() {
            // Cancelled: the job is stopping.
            self.coordinator
                .module_done(slot, module, instance, Outcome::Failed, out, &**self);
            return;
        }
        if self.graph.modules[module].restricted() {
            self.end_stall(slot, module, data.id, thread);
        }
        let event = crate::Event {
            data: &data,
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
        let stats = &self.stats[module];
        let elapsed = t0.elapsed();
        if phase != Phase::Produce {
            stats.calls.fetch_add(1, Ordering::Relaxed);
        }
        stats
            .run_ns
            .fetch_add(elapsed.as_nanos() as u64, Ordering::Relaxed);
        let planner = self.coordinator.planner();
        if planner.wants_cost(module) {
            planner.observe_cost(module, elapsed.as_secs_f64());
        }
        if self.trace.is_some() {
            self.record_slice(
                &self.graph.modules[module].label,
                "module",
                thread,
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
            (_, message) => self.module_failed(module, data.id, message.unwrap_or_default(), out),
        };
        self.coordinator
            .module_done(slot, module, instance, outcome, out, &**self);
    }

    fn completion(
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
    fn external_ready(
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
            let label = &self.graph.modules[module].label;
            self.record_interval(label, "wait", 1000 + slot, Some(id), returned, completed);
        }
        let failure = lock(&rendezvous.acquire_error)
            .take()
            .or_else(|| result.err().map(|e| e.to_string()));
        match failure {
            None => self
                .coordinator
                .acquire_done(slot, module, instance, out, self),
            Some(message) => {
                self.module_failed(module, id, message, out);
                self.coordinator
                    .module_done(slot, module, instance, Outcome::Failed, out, self);
            }
        }
    }

    fn module_failed(
        &self,
        module: ModuleIdx,
        id: EventId,
        message: String,
        out: &mut Vec<Task>,
    ) -> Outcome {
        self.stats[module].failures.fetch_add(1, Ordering::Relaxed);
        let label = self.graph.modules[module].label.clone();
        match self.policy {
            ErrorPolicy::SkipEvent => {
                let mut failed = lock(&self.failed_events);
                failed.push(FailedEvent {
                    run: id.run,
                    lumi: id.lumi,
                    event: id.event,
                    module: label,
                    message,
                });
            }
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

    fn fail_job(&self, error: JobError, out: &mut Vec<Task>) {
        {
            let mut slot = lock(&self.job_error);
            if slot.is_none() {
                *slot = Some(error);
            }
        }
        self.coordinator.abort(out, self);
    }

    fn transitions(&self, list: &[Transition], out: &mut Vec<Task>, thread: usize) {
        for t in list {
            let t0 = Instant::now();
            let error = match *t {
                Transition::BeginRun(_) | Transition::BeginLumi(..) => self.begin_transition(t),
                Transition::EndLumi(..) | Transition::EndRun(_) => self.end_transition(t),
            };
            self.record_slice(&transition_name(t), "transition", thread, None, t0);
            if let Some(error) = error {
                self.fail_job(error, out);
                break;
            }
        }
        self.coordinator.transitions_done(out, self);
    }

    /// Calls a begin hook on every instance, in module order, up to the
    /// first failure. An instance counts as open once its hook was called.
    fn begin_transition(&self, t: &Transition) -> Option<JobError> {
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
                        state.lumi = Some((r, l));
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
    fn end_transition(&self, t: &Transition) -> Option<JobError> {
        let mut open = lock(&self.open_transitions);
        let mut first_error = None;
        for (m, instances) in self.instances.iter().enumerate() {
            for (i, inst) in instances.iter().enumerate() {
                let hooks = inst.transitions();
                let state = &mut open[m][i];
                let result = match *t {
                    Transition::EndLumi(..) => state
                        .lumi
                        .take()
                        .map(|(r, l)| catch_unwind(AssertUnwindSafe(|| hooks.end_lumi(r, l)))),
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

    fn transition_error(&self, module: ModuleIdx, t: &Transition, message: String) -> JobError {
        JobError::Transition {
            module: self.graph.modules[module].label.clone(),
            transition: transition_name(t),
            message,
        }
    }

    fn end_stall(&self, slot: usize, module: ModuleIdx, id: EventId, thread: usize) {
        let Some(since) = lock(&self.queued_at).remove(&(slot, module)) else {
            return;
        };
        let waited = since.elapsed();
        self.stats[module]
            .queue_ns
            .fetch_add(waited.as_nanos() as u64, Ordering::Relaxed);
        self.record_slice(
            &self.graph.modules[module].label,
            "queued",
            thread,
            Some(id),
            since,
        );
        let node = &self.graph.modules[module];
        let mut stalls = lock(&self.stalls);
        let waited_s = waited.as_secs_f64();
        if stalls.len() < STALLS_KEPT || stalls.last().is_some_and(|s| s.waited_s < waited_s) {
            let reason = if node.resources.is_empty() {
                format!("{} queue", node.concurrency)
            } else {
                let names: Vec<&str> = node
                    .resources
                    .iter()
                    .map(|&r| self.graph.resources[r].as_str())
                    .collect();
                format!("exclusive resource {}", names.join(", "))
            };
            stalls.push(Stall {
                module: node.label.clone(),
                run: id.run,
                lumi: id.lumi,
                event: id.event,
                waited_s,
                reason,
            });
            stalls.sort_by(|a, b| b.waited_s.total_cmp(&a.waited_s));
            stalls.truncate(STALLS_KEPT);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn record_interval(
        &self,
        name: &str,
        category: &'static str,
        thread: usize,
        event: Option<EventId>,
        from: Instant,
        to: Instant,
    ) {
        if let Some(trace) = &self.trace {
            lock(trace).push(TraceSlice {
                name: name.to_string(),
                category,
                thread,
                event,
                start_us: from.saturating_duration_since(self.start).as_secs_f64() * 1e6,
                duration_us: to.saturating_duration_since(from).as_secs_f64() * 1e6,
            });
        }
    }

    /// A trace slice from `t0` to now.
    fn record_slice(
        &self,
        name: &str,
        category: &'static str,
        thread: usize,
        event: Option<EventId>,
        t0: Instant,
    ) {
        if self.trace.is_some() {
            self.record_interval(name, category, thread, event, t0, Instant::now());
        }
    }

    pub(crate) fn take_job_error(&self) -> Option<JobError> {
        lock(&self.job_error).take()
    }

    pub(crate) fn report(&self, executor: &str, threads: usize, events_in_flight: usize) -> Report {
        let wall_s = self.start.elapsed().as_secs_f64();
        let events = self.events_done.load(Ordering::Relaxed);
        let modules = self
            .graph
            .modules
            .iter()
            .zip(&self.stats)
            .map(|(node, s)| ModuleReport {
                label: node.label.clone(),
                kind: node.kind.to_string(),
                concurrency: node.concurrency.to_string(),
                calls: s.calls.load(Ordering::Relaxed),
                run_s: s.run_ns.load(Ordering::Relaxed) as f64 * 1e-9,
                wait_s: s.wait_ns.load(Ordering::Relaxed) as f64 * 1e-9,
                queue_s: s.queue_ns.load(Ordering::Relaxed) as f64 * 1e-9,
                failures: s.failures.load(Ordering::Relaxed),
            })
            .collect::<Vec<_>>();
        let paths = self
            .graph
            .paths
            .iter()
            .enumerate()
            .map(|(p, path)| PathReport {
                name: path.name.clone(),
                visited: self.path_visited[p].load(Ordering::Relaxed),
                passed: self.path_passed[p].load(Ordering::Relaxed),
                filters: path
                    .steps
                    .iter()
                    .enumerate()
                    .map(|(i, &m)| StepReport {
                        label: self.graph.modules[m].label.clone(),
                        visited: self.step_visited[self.step_offset[p] + i].load(Ordering::Relaxed),
                        passed: self.step_passed[self.step_offset[p] + i].load(Ordering::Relaxed),
                    })
                    .collect(),
            })
            .collect();
        let mut failed_events = lock(&self.failed_events).clone();
        failed_events.sort_by_key(|f| (f.run, f.lumi, f.event));
        Report {
            process: self.graph.process_name.clone(),
            executor: executor.into(),
            events,
            wall_s,
            cpu_s: 0.0,
            steady_throughput_ev_s: lock(&self.steady).throughput(),
            throughput_ev_s: if wall_s > 0.0 {
                events as f64 / wall_s
            } else {
                0.0
            },
            threads,
            events_in_flight,
            peak_events_in_flight: self.coordinator.peak_events_in_flight(),
            peak_rss_bytes: 0,
            module_executions: modules.iter().map(|m| m.calls).sum(),
            modules,
            paths,
            failed_events,
            orderings: self.coordinator.planner().history(),
            stalls: lock(&self.stalls).clone(),
            trace: self
                .trace
                .as_ref()
                .map(|t| std::mem::take(&mut *lock(t)))
                .unwrap_or_default(),
        }
    }
}

impl Observer for Engine {
    fn step_counts(&self, slot: usize, module: ModuleIdx) -> Option<(u64, u64)> {
        lock(&self.slot_data[slot])
            .as_ref()
            .and_then(|data| data.step_counts[module].get().copied())
    }

    fn queued(&self, slot: usize, module: ModuleIdx) {
        lock(&self.queued_at).insert((slot, module), Instant::now());
    }

    fn end_path_started(&self, slot: usize, state: &EventState) {
        if let Some(data) = &*lock(&self.slot_data[slot]) {
            let accepted = state
                .path_status()
                .iter()
                .map(|s| *s == PathStatus::Accepted)
                .collect();
            let _ = data
                .trigger_results
                .set(TriggerResults::new(self.graph.clone(), accepted));
        }
    }

    fn event_finished(&self, slot: usize, state: &EventState) {
        let data = lock(&self.slot_data[slot]).take();
        if state.failed() {
            return;
        }
        let mut outcome = PathOutcome::default();
        for (p, path) in self.graph.paths.iter().enumerate() {
            self.path_visited[p].fetch_add(1, Ordering::Relaxed);
            state.path_outcome(p, &mut outcome);
            if outcome.accepted {
                self.path_passed[p].fetch_add(1, Ordering::Relaxed);
            }
            for &(m, passed) in &outcome.steps {
                let i = self.step_offset[p] + path.position(m).expect("a path step");
                self.step_visited[i].fetch_add(1, Ordering::Relaxed);
                if passed {
                    self.step_passed[i].fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        lock(&self.steady).record(self.start.elapsed().as_secs_f64());
        let done = self.events_done.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(progress) = &self.progress {
            progress(done);
        }
        drop(data);
    }
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".into()
    }
}

fn failure_message(result: std::thread::Result<crate::ModuleResult>) -> Option<String> {
    match result {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e.to_string()),
        Err(panic) => Some(format!("panic: {}", panic_message(&panic))),
    }
}
