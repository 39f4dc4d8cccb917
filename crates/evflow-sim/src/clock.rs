//! The simulated clock: executes the coordinator's tasks in simulated time.
//!
//! Like the threaded executor on rayon, a core that finishes a task goes on
//! with the first task that completion made ready and pushes the others on
//! its own deque; a core without work takes its own newest task, else steals
//! the oldest task of another core, else takes from the injector.

use std::cmp::Reverse;
use std::sync::Arc;

use evflow_core::graph::{Graph, ModuleIdx};
use evflow_core::schedule::{Coordinator, EventState, Observer, Outcome, PathOutcome, Phase, Task};
use evflow_core::{
    CostModel, DecisionModel, EventId, ModuleKind, ModuleReport, PathReport, Report, RunError,
    Source, SourceProducts, StepReport, TraceSlice,
};

use crate::machine::{Costs, Machine};
use crate::options::SimOptions;
use crate::queues::{Indexed, Queues};
use crate::time::Time;

#[cfg(test)]
mod tests;

/// What the simulation knows about the modules and the input.
pub(crate) struct Model {
    pub costs: Vec<Option<CostModel>>,
    /// Parallel-for ranges of each module's call (1: none).
    pub ranges: Vec<u32>,
    pub decisions: Vec<Option<DecisionModel>>,
    pub source: Box<dyn Source>,
}

/// Event ids a run keeps ([`ClockRun::event_ids`]).
pub(crate) const KEPT_EVENT_IDS: usize = 1024;

/// The raw results of one simulated job.
pub(crate) struct ClockRun {
    pub report: Report,
    pub simulated_s: f64,
    pub busy_s: f64,
    /// Seconds with exactly i module tasks running.
    pub profile: Vec<f64>,
    /// Per module: total simulated running time.
    pub module_busy_s: Vec<f64>,
    /// Predicted figures of the device modules (none without a device).
    pub devices: Vec<evflow_device::DeviceModuleReport>,
    pub events: u64,
    /// The ids of the first [`KEPT_EVENT_IDS`] events read (the
    /// critical-path bound replays them; keeping all would grow with the
    /// job).
    pub event_ids: Vec<EventId>,
    /// Task completions the clock went through.
    #[cfg_attr(not(test), allow(dead_code))]
    pub steps: u64,
    /// Cores and bitmap words looked at to hand out tasks ([`Queues::looked_at`]).
    #[cfg_attr(not(test), allow(dead_code))]
    pub looked_at: u64,
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
    /// When a module of an event was queued for its serial queue, clone or
    /// exclusive resource (its admission queue time ends when it starts).
    queued_at: std::cell::RefCell<std::collections::HashMap<(usize, ModuleIdx), f64>>,
}

impl Observer for Tally {
    fn queued(&self, slot: usize, module: ModuleIdx) {
        self.queued_at
            .borrow_mut()
            .insert((slot, module), self.now.get());
    }
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
            for &(m, passed) in outcome.decisive_steps() {
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
    model: Model,
    options: &SimOptions,
) -> Result<ClockRun, RunError> {
    run_on::<Indexed>(graph, model, options)
}

/// [`run`] with the given bookkeeping of idle cores and deques.
pub(crate) fn run_on<Q: Queues>(
    graph: Arc<Graph>,
    mut model: Model,
    options: &SimOptions,
) -> Result<ClockRun, RunError> {
    let k = options.events_in_flight;
    let mut coordinator = Coordinator::new(
        graph.clone(),
        k,
        options.planner.as_ref().map(|make| make(&graph)),
    )
    .with_concurrent_lumis(options.concurrent_lumis);
    if let Some(stop) = &options.stop {
        coordinator = coordinator.with_stop(stop.clone());
    }
    let tally = Tally {
        graph: graph.clone(),
        now: std::cell::Cell::new(0.0),
        steady: std::cell::RefCell::new(evflow_core::SteadyRate::new(k)),
        events: std::cell::Cell::new(0),
        queued_at: std::cell::RefCell::new(std::collections::HashMap::new()),
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
    // As the engine reports them: admission queue time, and the wait of
    // external work from the end of its acquire step to its completion.
    let mut queue_s = vec![0f64; n_modules];
    let mut wait_s = vec![0f64; n_modules];
    let mut acquired_at: std::collections::HashMap<(usize, ModuleIdx), f64> =
        std::collections::HashMap::new();
    let slot_index = vec![0u64; k];
    let slot_id = vec![EventId::new(0, 0, 0); k];
    let mut event_ids = Vec::new();
    let mut reads = 0u64;

    let mut machine = Machine::<Q>::new(options.cores, options.trace);
    // A trace's slices share their module's name (millions of slices).
    let trace_names: Vec<std::sync::Arc<str>> = if options.trace {
        graph
            .modules
            .iter()
            .map(|m| m.label.as_str().into())
            .collect()
    } else {
        Vec::new()
    };
    let bad_cost = std::cell::Cell::new(None);
    let mut steps = 0u64;
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
        .and_then(|d| crate::device::SimDevice::new(d, &graph, k, &options.device_launches));

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
                ranges: &model.ranges,
                slot_index: &ctx_index,
                options,
                device: device.as_ref(),
                bad_cost: &bad_cost,
            };
            machine.assign_idle(now, &ctx, &mut module_busy_s, &mut admit);
        }
        // No core busy: what is gathered for a device starts now.
        if machine.heap.is_empty()
            && let Some(dev) = device.as_mut()
        {
            dev.idle(now);
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
                // The wait ends with the external work, as a run counts it,
                // not when a core is free for `produce`.
                if let Some(t) = acquired_at.remove(&(slot, module)) {
                    wait_s[module] += (now - t).max(0.0);
                }
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
        steps += 1;
        now = t;
        tally.now.set(now);
        accumulate(&mut profile, machine.modules_running, now - last);
        last = now;
        if machine.range_done(core, now, &mut module_busy_s) {
            continue;
        }
        let (task, started) = machine.running[core]
            .take()
            .expect("a finishing core runs a task");
        let starts_event = matches!(task, Task::Read { .. });
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
                    if event_ids.len() < KEPT_EVENT_IDS {
                        event_ids.push(id);
                    }
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
                    if let Some(t) = tally.queued_at.borrow_mut().remove(&(slot, module)) {
                        queue_s[module] += (started - t).max(0.0);
                    }
                }
                if let Some(trace) = &mut machine.trace {
                    trace.push(TraceSlice {
                        name: std::sync::Arc::clone(&trace_names[module]),
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
                // The ordering planner times the executions it asks for, as
                // the executors time them: its modelled running time,
                // without the framework's overhead. (Without it, adaptive
                // ordering saw every step as free and kept the written
                // order: the prediction of a run whose order it changes.)
                // Every phase is an execution, as there: a device module's
                // acquire and its device-side produce count, so that its
                // cost is its mean over both sides, not its host time.
                let planner = coordinator.planner();
                if planner.wants_cost(module) {
                    planner.observe_cost(module, (now - started - options.overhead_s).max(0.0));
                }
                if phase == Phase::Acquire {
                    let host = match device.as_mut() {
                        Some(d) if on_device => d.acquire(now, slot, module, instance),
                        _ => true,
                    };
                    if host {
                        coordinator.acquire_done(slot, module, instance, &mut out, &tally);
                    } else {
                        acquired_at.insert((slot, module), now);
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
        // Like the threaded executor: a new event's first modules queue
        // behind older work waiting here or handed in (the injector), and
        // the core looks for work.
        if starts_event
            && !out.is_empty()
            && !(machine.queues.own_empty(core) && machine.injector.is_empty())
        {
            // A read among them (the source's next) stays, as there.
            let (reads, others): (Vec<Task>, Vec<Task>) =
                out.drain(..).partition(|t| matches!(t, Task::Read { .. }));
            machine.injector.extend(others);
            out.extend(reads);
            if out.is_empty() {
                machine.queues.push_idle(core);
                continue;
            }
        }
        // Like the threaded executor: go on with the first follow-up, leave
        // the others on this core's deque for it (newest first) or thieves.
        let mut follow_ups = out.drain(..);
        match follow_ups.next() {
            Some(next) => {
                let ctx = Costs {
                    costs: &model.costs,
                    ranges: &model.ranges,
                    slot_index: &ctx_index,
                    options,
                    device: device.as_ref(),
                    bad_cost: &bad_cost,
                };
                machine.start(core, next, now, &ctx, &mut module_busy_s, &mut admit);
            }
            None => machine.queues.push_idle(core),
        }
        machine.queues.push_tasks(core, follow_ups);
    }
    if let Some((module, index, seconds)) = bad_cost.get() {
        return Err(RunError::Config(evflow_core::ConfigError::InvalidModule {
            module: graph.modules[module].label.clone(),
            reason: format!(
                "its cost model gave {seconds} s for the event at position {index}: a duration \
                 is a number of seconds >= 0"
            ),
        }));
    }
    let busy_s = machine.busy_s;
    let trace = evflow_core::Trace::from(machine.trace.take().unwrap_or_default());
    let devices = device.as_ref().map(|d| d.reports()).unwrap_or_default();

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
                wait_s: wait_s[m],
                queue_s: queue_s[m],
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
        devices,
        events,
        event_ids,
        steps,
        looked_at: machine.queues.looked_at(),
    })
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
