//! The simulated clock: executes the coordinator's tasks in simulated time.
//!
//! Like the threaded executor, a core that finishes a task goes on with the
//! first task that completion made ready and leaves the others to idle cores
//! (here: a shared FIFO queue, the order in which thieves steal).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;

use evflow_core::graph::Graph;
use evflow_core::schedule::{Coordinator, EventState, Observer, Outcome, PathOutcome, Phase, Task};
use evflow_core::{
    CostModel, DecisionModel, EventId, ModuleKind, ModuleReport, PathReport, Report, RunError,
    Source, SourceProducts, StepReport,
};

use crate::SimOptions;

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

/// A simulated instant, totally ordered for the event heap.
struct Time(f64);
impl PartialEq for Time {
    fn eq(&self, other: &Self) -> bool {
        self.0.total_cmp(&other.0).is_eq()
    }
}
impl Eq for Time {}
impl PartialOrd for Time {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Time {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
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
    );
    let tally = Tally {
        graph: graph.clone(),
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
    let mut slot_index = vec![0u64; k];
    let mut slot_id = vec![EventId::new(0, 0, 0); k];
    let mut event_ids = Vec::new();
    let mut reads = 0u64;

    // (finish time, sequence for determinism, core), and what each core runs.
    let mut heap: BinaryHeap<Reverse<(Time, u64, usize)>> = BinaryHeap::new();
    let mut running: Vec<Option<Task>> = vec![None; options.cores];
    let mut idle: Vec<usize> = (0..options.cores).rev().collect();
    let mut queue: VecDeque<Task> = VecDeque::new();
    let mut sequence = 0u64;
    let mut now = 0.0f64;
    let mut last = 0.0f64;
    let mut modules_running = 0usize;
    let mut profile = vec![0f64; 1];
    let mut busy_s = 0.0;
    let mut first = Vec::new();
    coordinator.begin(&mut first);
    queue.extend(first);
    let mut out = Vec::new();
    let mut finished = false;

    while !finished {
        // Hand queued tasks to idle cores.
        while let (Some(&core), false) = (idle.last(), queue.is_empty()) {
            idle.pop();
            let task = queue.pop_front().expect("checked non-empty");
            let duration = start(&task, &model, &slot_index, options, &mut modules_running);
            if let Task::Module { module, .. } = task {
                module_busy_s[module] += duration;
            }
            busy_s += duration;
            heap.push(Reverse((Time(now + duration), sequence, core)));
            sequence += 1;
            running[core] = Some(task);
        }
        let Some(Reverse((Time(t), _, core))) = heap.pop() else {
            return Err(RunError::Failed {
                error: evflow_core::JobError::Executor(
                    "simulation stalled: no task can run".into(),
                ),
                report: Box::default(),
            });
        };
        now = t;
        accumulate(&mut profile, modules_running, now - last);
        last = now;
        let task = running[core].take().expect("a finishing core runs a task");
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
                    slot_index[slot] = reads;
                    slot_id[slot] = id;
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
                modules_running -= 1;
                if phase != Phase::Produce {
                    calls[module] += 1;
                }
                let outcome = match (&model.decisions[module], graph.modules[module].kind) {
                    (Some(decide), ModuleKind::Filter) if !decide(slot_id[slot]) => Outcome::Reject,
                    _ => Outcome::Pass,
                };
                if phase == Phase::Acquire {
                    coordinator.acquire_done(slot, module, instance, &mut out, &tally);
                } else {
                    coordinator.module_done(slot, module, instance, outcome, &mut out, &tally);
                }
            }
            Task::Transitions(_) => coordinator.transitions_done(&mut out, &tally),
            Task::Finished => finished = true,
        }
        if let Some(pos) = out.iter().position(|t| *t == Task::Finished) {
            out.remove(pos);
            queue.push_front(Task::Finished);
        }
        let mut follow_ups = out.drain(..);
        match follow_ups.next() {
            Some(next) => {
                let duration = start(&next, &model, &slot_index, options, &mut modules_running);
                if let Task::Module { module, .. } = next {
                    module_busy_s[module] += duration;
                }
                busy_s += duration;
                heap.push(Reverse((Time(now + duration), sequence, core)));
                sequence += 1;
                running[core] = Some(next);
            }
            None => idle.push(core),
        }
        queue.extend(follow_ups);
    }

    let events = tally.events.get();
    let paths = tally.paths.into_inner();
    let report = Report {
        process: graph.process_name.clone(),
        executor: "simulated".into(),
        events,
        wall_s: now,
        cpu_s: busy_s,
        throughput_ev_s: if now > 0.0 { events as f64 / now } else { 0.0 },
        threads: options.cores,
        events_in_flight: k,
        peak_events_in_flight: coordinator.peak_events_in_flight(),
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
        trace: Vec::new(),
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

/// Duration of a task that starts now.
fn start(
    task: &Task,
    model: &Model,
    slot_index: &[u64],
    options: &SimOptions,
    running: &mut usize,
) -> f64 {
    match *task {
        Task::Read { .. } => options.read_s,
        Task::Module {
            slot,
            module,
            phase,
            ..
        } => {
            *running += 1;
            if phase == Phase::Acquire {
                return options.overhead_s;
            }
            model.costs[module]
                .as_ref()
                .map_or(0.0, |cost| cost(slot_index[slot]))
                + options.overhead_s
        }
        Task::Transitions(_) | Task::Finished => 0.0,
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
