//! The simulated clock: executes the coordinator's tasks in simulated time.
//!
//! Like the threaded executor on rayon, a core that finishes a task goes on
//! with the first task that completion made ready and pushes the others on
//! its own deque; a core without work takes its own newest task, else steals
//! the oldest task of another core, else takes from the injector.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;

use evflow_core::graph::Graph;
use evflow_core::schedule::{Coordinator, EventState, Observer, Outcome, PathOutcome, Phase, Task};
use evflow_core::{
    CostModel, DecisionModel, EventId, ModuleKind, ModuleReport, PathReport, Report, RunError,
    Source, SourceProducts, StepReport, TraceSlice,
};

use crate::options::SimOptions;
use crate::time::Time;

/// What the simulation knows about the modules and the input.
pub(crate) struct Model {
    pub costs: Vec<Option<CostModel>>,
    pub decisions: Vec<Option<DecisionModel>>,
    pub source: Box<dyn Source>,
}

/// The raw results of one simulated job.
pub(crate) struct ClockRun {
    pub report: Report,
    pub simulated_s: f64,
    pub busy_s: f64,
    /// Seconds with exactly i module tasks running.
    pub profile: Vec<f64>,
    /// Per module: total simulated running time.
    pub module_busy_s: Vec<f64>,
    pub events: u64,
    pub event_ids: Vec<EventId>,
}

/// Events visited and passed, per path, with the same per step.
#[derive(Clone, Default)]
struct PathTally {
    visited: u64,
    passed: u64,
    steps: Vec<(u64, u64)>,
}

/// Counts finished events and path statistics, like the engine does.
struct Tally {
    graph: Arc<Graph>,
    now: std::cell::Cell<f64>,
    steady: std::cell::RefCell<evflow_core::SteadyRate>,
    events: std::cell::Cell<u64>,
    paths: std::cell::RefCell<Vec<PathTally>>,
}

impl Observer for Tally {
    fn end_path_started(&self, _: usize, _: &EventState) {}
    fn event_finished(&self, _: usize, state: &EventState) {
        if state.failed() {
            return;
        }
        self.events.set(self.events.get() + 1);
        self.steady.borrow_mut().record(self.now.get());
        let mut paths = self.paths.borrow_mut();
        let mut outcome = PathOutcome::default();
        for (p, path) in self.graph.paths.iter().enumerate() {
            state.path_outcome(p, &mut outcome);
            let entry = &mut paths[p];
            entry.visited += 1;
            entry.passed += u64::from(outcome.accepted);
            for &(m, passed) in &outcome.steps {
                if let Some(i) = path.position(m) {
                    entry.steps[i].0 += 1;
                    entry.steps[i].1 += u64::from(passed);
                }
            }
        }
    }
}

pub(crate) fn run(
    graph: Arc<Graph>,
    mut model: Model,
    options: &SimOptions,
) -> Result<ClockRun, RunError> {
    let k = options.events_in_flight;
    let coordinator = Coordinator::new(
        graph.clone(),
        k,
        options.planner.as_ref().map(|make| make(&graph)),
    )
    .with_concurrent_lumis(options.concurrent_lumis);
    let tally = Tally {
        graph: graph.clone(),
        now: std::cell::Cell::new(0.0),
        steady: std::cell::RefCell::new(evflow_core::SteadyRate::new(k)),
        events: std::cell::Cell::new(0),
        paths: std::cell::RefCell::new(
            graph
                .paths
                .iter()
                .map(|p| PathTally {
                    steps: vec![(0, 0); p.steps.len()],
                    ..PathTally::default()
                })
                .collect(),
        ),
    };
    let n_modules = graph.modules.len();
    let mut calls = vec![0u64; n_modules];
    let mut module_busy_s = vec![0f64; n_modules];
    let slot_index = vec![0u64; k];
    let slot_id = vec![EventId::new(0, 0, 0); k];
    let mut event_ids = Vec::new();
    let mut reads = 0u64;

    let mut machine = Machine::new(options.cores, options.trace);
    let mut now = 0.0f64;
    let mut last = 0.0f64;
    let mut profile = vec![0f64; 1];
    let mut first = Vec::new();
    coordinator.begin(&mut first);
    machine.injector.extend(first);
    let mut out = Vec::new();
    let mut finished = false;
    let mut ctx_index = slot_index;
    let mut ctx_id = slot_id;
    let mut device = options
        .devices
        .as_ref()
        .and_then(|d| crate::device::SimDevice::new(d, &graph, k));

    // What the engine asks before a module's first phase runs: the same
    // decision, so that simulated and real runs replan alike.
    let mut admit = |task: &Task, instead: &mut Vec<Task>| match *task {
        Task::Module {
            slot,
            module,
            instance,
            phase,
        } if phase != Phase::Produce => coordinator.replan(slot, module, instance, instead, &tally),
        _ => true,
    };
    while !finished {
        {
            let ctx = Costs {
                costs: &model.costs,
                slot_index: &ctx_index,
                options,
                device: device.as_ref(),
            };
            machine.assign_idle(now, &ctx, &mut module_busy_s, &mut admit);
        }
        // A device event (a launch landing, a combining deadline) before the
        // next task completion: the device's external work completes.
        let next_core = machine.heap.peek().map(|Reverse((Time(t), _, _))| *t);
        if let Some(dev) = device.as_mut()
            && let Some(t) = dev.next_time()
            && next_core.is_none_or(|c| t <= c)
        {
            now = now.max(t);
            tally.now.set(now);
            accumulate(&mut profile, machine.modules_running, now - last);
            last = now;
            for (module, slot, instance) in dev.pop(now) {
                out.clear();
                coordinator.acquire_done(slot, module, instance, &mut out, &tally);
                machine.injector.extend(out.drain(..));
            }
            continue;
        }
        let Some(Reverse((Time(t), _, core))) = machine.heap.pop() else {
            return Err(RunError::Failed {
                error: evflow_core::JobError::Executor(
                    "simulation stalled: no task can run".into(),
                ),
                report: Box::default(),
            });
        };
        now = t;
        tally.now.set(now);
        accumulate(&mut profile, machine.modules_running, now - last);
        last = now;
        let (task, started) = machine.running[core]
            .take()
            .expect("a finishing core runs a task");
        out.clear();
        match task {
            Task::Read { slot } => {
                let mut products = SourceProducts::default();
                let id = model
                    .source
                    .next_event(&mut products)
                    .map_err(|e| RunError::Failed {
                        error: evflow_core::JobError::Source {
                            message: e.to_string(),
                        },
                        report: Box::default(),
                    })?;
                if let Some(id) = id {
                    ctx_index[slot] = reads;
                    ctx_id[slot] = id;
                    event_ids.push(id);
                    reads += 1;
                }
                coordinator.read_done(slot, id, &mut out, &tally);
            }
            Task::Module {
                slot,
                module,
                instance,
                phase,
            } => {
                machine.modules_running -= 1;
                if phase != Phase::Produce {
                    calls[module] += 1;
                }
                if let Some(trace) = &mut machine.trace {
                    trace.push(TraceSlice {
                        name: graph.modules[module].label.clone(),
                        category: "module",
                        thread: core,
                        event: Some(ctx_id[slot]),
                        start_us: started * 1e6,
                        duration_us: (now - started) * 1e6,
                    });
                }
                let outcome = match (&model.decisions[module], graph.modules[module].kind) {
                    (Some(decide), ModuleKind::Filter) if !decide(ctx_id[slot]) => Outcome::Reject,
                    _ => Outcome::Pass,
                };
                let on_device = device.as_ref().is_some_and(|d| d.handles(module));
                if phase == Phase::Acquire {
                    let host = match device.as_mut() {
                        Some(d) if on_device => d.acquire(now, slot, module, instance),
                        _ => true,
                    };
                    if host {
                        coordinator.acquire_done(slot, module, instance, &mut out, &tally);
                    }
                } else {
                    if let Some(d) = device.as_mut().filter(|_| on_device)
                        && !d.on_device(slot, module)
                    {
                        d.host_done(now, module, now - started - options.overhead_s);
                    }
                    coordinator.module_done(slot, module, instance, outcome, &mut out, &tally);
                }
            }
            Task::Transitions(_) => coordinator.transitions_done(&mut out, &tally),
            Task::Finished => finished = true,
        }
        // Like the threaded executor: go on with the first follow-up, leave
        // the others on this core's deque for it (newest first) or thieves.
        let mut follow_ups = out.drain(..);
        match follow_ups.next() {
            Some(next) => {
                let ctx = Costs {
                    costs: &model.costs,
                    slot_index: &ctx_index,
                    options,
                    device: device.as_ref(),
                };
                machine.start(core, next, now, &ctx, &mut module_busy_s, &mut admit);
            }
            None => machine.idle.push(core),
        }
        machine.deques[core].extend(follow_ups);
    }
    let busy_s = machine.busy_s;
    let trace = machine.trace.take().unwrap_or_default();

    let events = tally.events.get();
    let paths = tally.paths.into_inner();
    let report = Report {
        process: graph.process_name.clone(),
        executor: "simulated".into(),
        events,
        interrupted: coordinator.interrupted(),
        wall_s: now,
        cpu_s: busy_s,
        throughput_ev_s: if now > 0.0 { events as f64 / now } else { 0.0 },
        steady_throughput_ev_s: tally.steady.borrow().throughput(),
        threads: options.cores,
        events_in_flight: k,
        peak_events_in_flight: coordinator.peak_events_in_flight(),
        concurrent_lumis: options.concurrent_lumis,
        peak_concurrent_lumis: coordinator.peak_lumis(),
        peak_rss_bytes: 0,
        module_executions: calls.iter().sum(),
        modules: graph
            .modules
            .iter()
            .enumerate()
            .map(|(m, node)| ModuleReport {
                label: node.label.clone(),
                kind: node.kind.to_string(),
                concurrency: node.concurrency.to_string(),
                calls: calls[m],
                run_s: module_busy_s[m],
                wait_s: 0.0,
                queue_s: 0.0,
                failures: 0,
            })
            .collect(),
        paths: graph
            .paths
            .iter()
            .zip(paths)
            .map(|(path, tally)| PathReport {
                name: path.name.clone(),
                visited: tally.visited,
                passed: tally.passed,
                filters: path
                    .steps
                    .iter()
                    .zip(tally.steps)
                    .map(|(&m, (visited, passed))| StepReport {
                        label: graph.modules[m].label.clone(),
                        visited,
                        passed,
                    })
                    .collect(),
            })
            .collect(),
        failed_events: Vec::new(),
        orderings: coordinator.planner().history(),
        stalls: Vec::new(),
        trace,
    };
    Ok(ClockRun {
        report,
        simulated_s: now,
        busy_s,
        profile,
        module_busy_s,
        events,
        event_ids,
    })
}

/// What a task's duration depends on.
#[derive(Clone, Copy)]
struct Costs<'a> {
    costs: &'a [Option<CostModel>],
    slot_index: &'a [u64],
    options: &'a SimOptions,
    /// Device invocations put their products only: no host cost.
    device: Option<&'a crate::device::SimDevice>,
}

impl Costs<'_> {
    /// Duration of a task that starts now.
    fn duration(&self, task: &Task) -> f64 {
        match *task {
            Task::Read { .. } => self.options.read_s,
            Task::Module {
                phase: Phase::Acquire,
                ..
            } => self.options.overhead_s,
            Task::Module { slot, module, .. }
                if self.device.is_some_and(|d| d.on_device(slot, module)) =>
            {
                self.options.overhead_s
            }
            Task::Module { slot, module, .. } => {
                self.costs[module]
                    .as_ref()
                    .map_or(0.0, |cost| cost(self.slot_index[slot]))
                    + self.options.overhead_s
            }
            Task::Transitions(_) | Task::Finished => 0.0,
        }
    }
}

/// The simulated cores: what each runs (and since when), their deques of
/// spawned tasks, the injector for tasks from outside, and the clock's
/// pending completions.
struct Machine {
    heap: BinaryHeap<Reverse<(Time, u64, usize)>>,
    running: Vec<Option<(Task, f64)>>,
    idle: Vec<usize>,
    deques: Vec<VecDeque<Task>>,
    injector: VecDeque<Task>,
    sequence: u64,
    modules_running: usize,
    busy_s: f64,
    trace: Option<Vec<TraceSlice>>,
}

/// Whether a task may start; if not, the tasks to run instead are pushed.
type Admit<'a> = dyn FnMut(&Task, &mut Vec<Task>) -> bool + 'a;

impl Machine {
    fn new(cores: usize, trace: bool) -> Self {
        Self {
            heap: BinaryHeap::new(),
            running: vec![None; cores],
            idle: (0..cores).rev().collect(),
            deques: vec![VecDeque::new(); cores],
            injector: VecDeque::new(),
            sequence: 0,
            modules_running: 0,
            busy_s: 0.0,
            trace: trace.then(Vec::new),
        }
    }

    /// Starts `task` on `core`, unless `admit` withdraws it (a path that
    /// had not started took a newer plan, [`Coordinator::replan`]): then the
    /// core goes on with the first task of the new plan, as a thread does.
    fn start(
        &mut self,
        core: usize,
        mut task: Task,
        now: f64,
        costs: &Costs<'_>,
        module_busy_s: &mut [f64],
        admit: &mut Admit<'_>,
    ) {
        let mut instead = Vec::new();
        while !admit(&task, &mut instead) {
            let mut tasks = instead.drain(..);
            let Some(next) = tasks.next() else {
                self.idle.push(core);
                return;
            };
            self.deques[core].extend(tasks);
            task = next;
        }
        let duration = costs.duration(&task);
        if let Task::Module { module, .. } = task {
            self.modules_running += 1;
            module_busy_s[module] += duration;
            self.busy_s += duration;
        }
        self.heap
            .push(Reverse((Time(now + duration), self.sequence, core)));
        self.sequence += 1;
        self.running[core] = Some((task, now));
    }

    /// Work-stealing order of a rayon worker: its own deque newest first,
    /// then the oldest task of another core, then the injector.
    fn find_work(&mut self, core: usize) -> Option<Task> {
        if let Some(task) = self.deques[core].pop_back() {
            return Some(task);
        }
        let n = self.deques.len();
        for offset in 1..n {
            if let Some(task) = self.deques[(core + offset) % n].pop_front() {
                return Some(task);
            }
        }
        self.injector.pop_front()
    }

    fn assign_idle(
        &mut self,
        now: f64,
        costs: &Costs<'_>,
        module_busy_s: &mut [f64],
        admit: &mut Admit<'_>,
    ) {
        let mut still_idle = Vec::new();
        while let Some(core) = self.idle.pop() {
            match self.find_work(core) {
                Some(task) => self.start(core, task, now, costs, module_busy_s, admit),
                None => {
                    still_idle.push(core);
                    // Nothing queued anywhere: the other idle cores find nothing either.
                    if self.injector.is_empty() && self.deques.iter().all(VecDeque::is_empty) {
                        break;
                    }
                }
            }
        }
        // Keep the lowest-numbered idle core first, for determinism.
        self.idle.extend(still_idle.into_iter().rev());
        self.idle.sort_unstable_by(|a, b| b.cmp(a));
    }
}

fn accumulate(profile: &mut Vec<f64>, running: usize, dt: f64) {
    if profile.len() <= running {
        profile.resize(running + 1, 0.0);
    }
    profile[running] += dt;
}

/// Replays recorded event ids (for the critical-path run).
pub(crate) struct Replay(pub std::vec::IntoIter<EventId>);

impl Source for Replay {
    fn next_event(
        &mut self,
        _: &mut SourceProducts,
    ) -> Result<Option<EventId>, evflow_core::ModuleError> {
        Ok(self.0.next())
    }
}
