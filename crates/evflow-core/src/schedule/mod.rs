//! The scheduling decision logic, shared by every executor.
//!
//! [`Coordinator`] combines three pure state machines — per-event module
//! decisions ([`EventState`]), admission of restricted modules
//! ([`Arbiter`]) and the source with its transitions ([`SourceControl`]) —
//! and turns each completed piece of work into the [`Task`]s that may start
//! next. It never runs anything and never waits: the threaded executor, the
//! sequential executor and the simulated clock only *execute* tasks and
//! report back. Each part sits behind its own short-held lock (uncontended on
//! one thread); no lock is ever held while a module runs.

mod arbiter;
mod event_state;
mod plan;
mod source_control;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_utils::CachePadded;

pub use arbiter::{Arbiter, Grant};
pub use event_state::{EventState, Outcome, PathStatus};
pub use plan::{FixedPlanner, OrderChange, PathOutcome, PathPlan, Planner};
pub use source_control::{SourceControl, SourceStep, Transition};

use crate::graph::{Graph, ModuleIdx};
use crate::ids::EventId;
use crate::stop::StopHandle;

/// Which step of a module execution a task is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// The whole work of an ordinary module.
    Run,
    /// The asynchronous first step of an external-work producer.
    Acquire,
    /// The step after the external work completed.
    Produce,
}

/// A unit of work the executor must carry out, then report back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Task {
    /// Read the next event into `slot`; report with [`Coordinator::read_done`].
    Read { slot: usize },
    /// Run `module` (instance `instance`) on the event in `slot`; report with
    /// [`Coordinator::module_done`] (or [`Coordinator::acquire_done`] after
    /// the asynchronous step).
    Module {
        slot: usize,
        module: ModuleIdx,
        instance: u32,
        phase: Phase,
    },
    /// Run these transitions; report with [`Coordinator::transitions_done`].
    Transitions(Vec<Transition>),
    /// Every event and transition is done.
    Finished,
}

/// Told about event milestones, under the event's lock.
pub trait Observer {
    /// Every path of the event in `slot` is decided; end-path modules may run.
    fn end_path_started(&self, slot: usize, state: &EventState);
    /// Nothing of the event in `slot` runs any more.
    fn event_finished(&self, slot: usize, state: &EventState);
    /// `module` is ready for the event in `slot` but must wait for its
    /// serial queue, a cloned instance or an exclusive resource.
    fn queued(&self, _slot: usize, _module: ModuleIdx) {}
    /// Events seen and passed by `module` on the event in `slot`, when the
    /// module processes many events at once (a batch).
    fn step_counts(&self, _slot: usize, _module: ModuleIdx) -> Option<(u64, u64)> {
        None
    }
}

/// An observer that ignores everything.
#[derive(Debug)]
pub struct NoObserver;
impl Observer for NoObserver {
    fn end_path_started(&self, _: usize, _: &EventState) {}
    fn event_finished(&self, _: usize, _: &EventState) {}
}

/// The one decision logic of evflow. See the module documentation.
pub struct Coordinator {
    graph: Arc<Graph>,
    planner: Arc<dyn Planner>,
    // Each lock on cache lines of its own: different threads take them at
    // once (the events in flight are independent).
    slots: Vec<CachePadded<Mutex<EventState>>>,
    arbiter: CachePadded<Mutex<Arbiter<(usize, Phase)>>>,
    source: CachePadded<Mutex<SourceControl>>,
    aborting: AtomicBool,
}

impl Coordinator {
    pub fn new(
        graph: Arc<Graph>,
        events_in_flight: usize,
        planner: Option<Arc<dyn Planner>>,
    ) -> Self {
        Self {
            planner: planner.unwrap_or_else(|| Arc::new(FixedPlanner::new(&graph))),
            slots: (0..events_in_flight)
                .map(|_| CachePadded::new(Mutex::new(EventState::new(&graph))))
                .collect(),
            arbiter: CachePadded::new(Mutex::new(Arbiter::new(&graph))),
            source: CachePadded::new(Mutex::new(SourceControl::new(events_in_flight))),
            aborting: AtomicBool::new(false),
            graph,
        }
    }

    /// Reading stops gracefully once `stop` is requested (the events in
    /// flight and the end transitions still run).
    pub fn with_stop(self, stop: StopHandle) -> Self {
        lock(&self.source).set_stop(stop);
        self
    }

    /// Lets events of up to `n` luminosity blocks of a run be in flight at
    /// once (see [`SourceControl`]).
    pub fn with_concurrent_lumis(self, n: usize) -> Self {
        lock(&self.source).set_concurrent_lumis(n.max(1));
        self
    }

    /// The most luminosity blocks open at once so far.
    pub fn peak_lumis(&self) -> usize {
        lock(&self.source).peak_lumis()
    }

    /// Whether a stop request ended reading before the end of the input.
    pub fn interrupted(&self) -> bool {
        lock(&self.source).interrupted()
    }

    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    pub fn planner(&self) -> &Arc<dyn Planner> {
        &self.planner
    }

    /// The first tasks of the job.
    pub fn begin(&self, out: &mut Vec<Task>) {
        let mut steps = Vec::new();
        lock(&self.source).poll(&mut steps);
        self.source_steps(steps, out, &NoObserver);
    }

    /// The read into `slot` ended; `None` at the end of input.
    pub fn read_done(
        &self,
        slot: usize,
        event: Option<EventId>,
        out: &mut Vec<Task>,
        obs: &impl Observer,
    ) {
        let mut steps = Vec::new();
        {
            let mut source = lock(&self.source);
            if self.is_aborting() {
                source.stop(&mut steps);
            }
            source.read_done(slot, event, &mut steps);
        }
        self.source_steps(steps, out, obs);
    }

    /// The transitions handed out last are done.
    pub fn transitions_done(&self, out: &mut Vec<Task>, obs: &impl Observer) {
        let mut steps = Vec::new();
        lock(&self.source).transitions_done(&mut steps);
        self.source_steps(steps, out, obs);
    }

    /// A module task ended with `outcome` (for an external-work module, the
    /// `Produce` phase; a failed `Acquire` also reports here).
    pub fn module_done(
        &self,
        slot: usize,
        module: ModuleIdx,
        instance: u32,
        outcome: Outcome,
        out: &mut Vec<Task>,
        obs: &impl Observer,
    ) {
        let before = out.len();
        self.release(module, instance, out);
        let granted = out.len() > before;
        let finished = {
            let mut guard = lock(&self.slots[slot]);
            let state = &mut *guard;
            if self.is_aborting() {
                state.cancel();
            }
            let end_before = state.end_path_started();
            let mut ready = std::mem::take(&mut state.scratch);
            state.module_done(&self.graph, module, outcome, &mut ready);
            self.settle(slot, state, end_before, ready, out, obs)
        };
        if finished {
            self.event_done(slot, out, granted, obs);
        }
    }

    /// `module` failed on the event in `slot`: whether it ran only to
    /// measure steps after a rejection, a failure that fails nothing
    /// ([`EventState::measurement_failed`]).
    pub fn measurement_failed(&self, slot: usize, module: ModuleIdx) -> bool {
        lock(&self.slots[slot]).measurement_failed(module)
    }

    /// Before `module` runs on the event in `slot` (its first phase): when
    /// it is the first step of a reorderable path that has not started on
    /// the event, the path takes the plan in force now (the planner may
    /// have decided since the event started, while the event waited for a
    /// thread: a batch of a columnar analysis in flight). Returns whether
    /// `module` runs; if not, it was withdrawn (its admission released) and
    /// the tasks of the new plan are in `out`.
    pub fn replan(
        &self,
        slot: usize,
        module: ModuleIdx,
        instance: u32,
        out: &mut Vec<Task>,
        obs: &impl Observer,
    ) -> bool {
        match self.graph.modules[module].paths.as_slice() {
            &[p] if self.graph.paths[p].reorderable => {}
            _ => return true,
        }
        let finished = {
            let mut guard = lock(&self.slots[slot]);
            let state = &mut *guard;
            let Some(p) = state.unstarted_path(&self.graph, module) else {
                return true;
            };
            let plan = self.planner.plan(p, state.index());
            let end_before = state.end_path_started();
            let mut ready = std::mem::take(&mut state.scratch);
            if state.replan(&self.graph, p, module, plan, &mut ready) {
                state.scratch = ready;
                return true;
            }
            self.settle(slot, state, end_before, ready, out, obs)
        };
        self.release(module, instance, out);
        if finished {
            self.event_done(slot, out, false, obs);
        }
        false
    }

    /// After a change of the event in `slot` (under its lock): tells the
    /// observer, dispatches `ready`; returns whether the event finished.
    fn settle(
        &self,
        slot: usize,
        state: &mut EventState,
        end_before: bool,
        mut ready: Vec<ModuleIdx>,
        out: &mut Vec<Task>,
        obs: &impl Observer,
    ) -> bool {
        // Before anything of the end path is dispatched: a module queued at
        // the arbiter may be admitted, and run, by another thread at once.
        if !end_before && state.end_path_started() {
            obs.end_path_started(slot, state);
        }
        // Admission takes the arbiter lock inside the event lock; the
        // reverse order never happens.
        self.dispatch(slot, &ready, out, obs);
        ready.clear();
        state.scratch = ready;
        let finished = state.is_finished();
        if finished {
            self.observe_paths(slot, state, obs);
            obs.event_finished(slot, state);
        }
        finished
    }

    /// The event in `slot` finished; `after_grant`: `out` starts with work
    /// granted a serial or exclusive resource (see [`Self::source_steps_after`]).
    fn event_done(&self, slot: usize, out: &mut Vec<Task>, after_grant: bool, obs: &impl Observer) {
        let mut steps = Vec::new();
        lock(&self.source).event_done(slot, &mut steps);
        self.source_steps_after(steps, out, after_grant, obs);
    }

    /// The `Acquire` step of an external-work module succeeded and its
    /// external work completed: the `Produce` step runs on the same
    /// instance, which stayed reserved (with any exclusive resources) during
    /// the wait, so state kept by `acquire` is there for `produce`.
    pub fn acquire_done(
        &self,
        slot: usize,
        module: ModuleIdx,
        instance: u32,
        out: &mut Vec<Task>,
        _obs: &impl Observer,
    ) {
        out.push(Task::Module {
            slot,
            module,
            instance,
            phase: Phase::Produce,
        });
    }

    /// Stops the job: no new event is read, and events in flight stop
    /// dispatching modules.
    pub fn abort(&self, out: &mut Vec<Task>, obs: &impl Observer) {
        if self.aborting.swap(true, Ordering::SeqCst) {
            return;
        }
        let mut steps = Vec::new();
        lock(&self.source).stop(&mut steps);
        self.source_steps(steps, out, obs);
    }

    pub fn is_aborting(&self) -> bool {
        self.aborting.load(Ordering::Relaxed)
    }

    pub fn peak_events_in_flight(&self) -> usize {
        lock(&self.source).peak_processing()
    }

    fn observe_paths(&self, slot: usize, state: &EventState, obs: &impl Observer) {
        if state.failed() {
            return;
        }
        let mut outcome = PathOutcome::default();
        for p in 0..self.graph.paths.len() {
            if self.graph.paths[p].reorderable {
                state.path_outcome(p, &mut outcome);
                for (i, &(m, _)) in outcome.steps.iter().enumerate() {
                    outcome.counts[i] = obs.step_counts(slot, m);
                }
                self.planner.observe(p, state.index(), &outcome);
            }
        }
    }

    fn release(&self, module: ModuleIdx, instance: u32, out: &mut Vec<Task>) {
        if !self.graph.modules[module].restricted() {
            return;
        }
        let mut grants = Vec::new();
        lock(&self.arbiter).release(&self.graph, module, instance, &mut grants);
        for g in grants {
            let (slot, phase) = g.item;
            out.push(Task::Module {
                slot,
                module: g.module,
                instance: g.instance,
                phase,
            });
        }
    }

    fn dispatch(&self, slot: usize, ready: &[ModuleIdx], out: &mut Vec<Task>, obs: &impl Observer) {
        for &m in ready {
            let phase = if self.graph.modules[m].external_work {
                Phase::Acquire
            } else {
                Phase::Run
            };
            self.admit(slot, m, phase, out, obs);
        }
    }

    fn admit(
        &self,
        slot: usize,
        module: ModuleIdx,
        phase: Phase,
        out: &mut Vec<Task>,
        obs: &impl Observer,
    ) {
        if !self.graph.modules[module].restricted() {
            out.push(Task::Module {
                slot,
                module,
                instance: 0,
                phase,
            });
            return;
        }
        let admitted = lock(&self.arbiter).request(&self.graph, module, (slot, phase));
        match admitted {
            Some(instance) => out.push(Task::Module {
                slot,
                module,
                instance,
                phase,
            }),
            None => obs.queued(slot, module),
        }
    }

    fn source_steps(&self, steps: Vec<SourceStep>, out: &mut Vec<Task>, obs: &impl Observer) {
        self.source_steps_after(steps, out, false, obs);
    }

    /// `after_grant`: `out` starts with work just granted a serial or
    /// exclusive resource. That work holds its resource until it runs, so
    /// it stays first (the thread runs it at once) and a read goes last,
    /// where the task loop takes it next (it pops the newest of the rest).
    /// A read first made the thread run the new event's first module before
    /// the granted one: a serial module reserved and idle for that long
    /// (simulated: minbias with a serial output, 16 cores, 0.92 of the
    /// capacity).
    fn source_steps_after(
        &self,
        steps: Vec<SourceStep>,
        out: &mut Vec<Task>,
        after_grant: bool,
        obs: &impl Observer,
    ) {
        for step in steps {
            match step {
                // Reading comes first: the source is the one serial stage
                // of every job, and a read left behind the modules of an
                // event (the thread that decided it runs its first task
                // next) starved the engine of events on many threads:
                // measured, throughput stopped growing at 4 threads.
                SourceStep::Read(slot) if after_grant => out.push(Task::Read { slot }),
                SourceStep::Read(slot) => out.insert(0, Task::Read { slot }),
                SourceStep::Transitions(t) => out.push(Task::Transitions(t)),
                SourceStep::Finished => out.push(Task::Finished),
                SourceStep::Start(slot) => {
                    let mut ready = Vec::new();
                    // Numbered by the source control when it decided the
                    // start (not here: another thread may start the next
                    // event before this line runs).
                    let index = lock(&self.source).event_index(slot);
                    let finished = {
                        let mut state = lock(&self.slots[slot]);
                        state.start(
                            &self.graph,
                            index,
                            |p| self.planner.plan(p, index),
                            &mut ready,
                        );
                        if state.end_path_started() {
                            obs.end_path_started(slot, &state);
                        }
                        let finished = state.is_finished();
                        if finished {
                            self.observe_paths(slot, &state, obs);
                            obs.event_finished(slot, &state);
                        }
                        finished
                    };
                    self.dispatch(slot, &ready, out, obs);
                    if finished {
                        // An event with nothing to run (no paths, nothing selected).
                        let mut more = Vec::new();
                        lock(&self.source).event_done(slot, &mut more);
                        self.source_steps(more, out, obs);
                    }
                }
            }
        }
    }
}

/// Locks a mutex; a poisoned lock is recovered, because module panics are
/// caught before they could poison scheduling state.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl std::fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordinator")
            .field("modules", &self.graph.modules.len())
            .field("paths", &self.graph.paths.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
