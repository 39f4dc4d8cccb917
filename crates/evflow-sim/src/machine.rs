//! [`Machine`]: the simulated cores — what each runs and until when, and
//! how an idle core finds work, in the threaded executor's order.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use evflow_core::parallel_for::effective_ranges;
use evflow_core::schedule::{Phase, Task};
use evflow_core::{CostModel, TraceSlice};

use crate::options::SimOptions;
use crate::queues::Queues;
use crate::time::Time;

/// What a task's duration depends on.
#[derive(Clone, Copy)]
pub(crate) struct Costs<'a> {
    pub costs: &'a [Option<CostModel>],
    /// Parallel-for ranges of each module's call (1: none).
    pub ranges: &'a [u32],
    pub slot_index: &'a [u64],
    pub options: &'a SimOptions,
    /// Device invocations put their products only: no host cost.
    pub device: Option<&'a crate::device::SimDevice>,
    /// The first cost a model gave that is no duration (negative, NaN,
    /// infinite): (module, event index, value). The run fails with it.
    pub bad_cost: &'a std::cell::Cell<Option<(usize, u64, f64)>>,
}

impl Costs<'_> {
    /// Duration of a task that starts now; `idle` counts the other idle
    /// cores (asked only for a module whose call is a parallel-for: its
    /// ranges run on its core and on the cores idle when it starts).
    fn duration(&self, task: &Task, idle: impl FnOnce() -> usize) -> f64 {
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
                let index = self.slot_index[slot];
                let mut seconds = self.costs[module].as_ref().map_or(0.0, |cost| cost(index));
                if !(seconds.is_finite() && seconds >= 0.0) {
                    if self.bad_cost.get().is_none() {
                        self.bad_cost.set(Some((module, index, seconds)));
                    }
                    seconds = 0.0;
                }
                let ranges = self.ranges.get(module).copied().unwrap_or(1);
                let call = if ranges > 1 {
                    // Equal ranges, taken in rounds by this core and the
                    // idle ones: the call lasts its number of rounds.
                    let ranges = effective_ranges(seconds, ranges);
                    let cores = u32::try_from(idle().saturating_add(1)).unwrap_or(u32::MAX);
                    let rounds = ranges.div_ceil(cores.clamp(1, ranges));
                    seconds / f64::from(ranges) * f64::from(rounds)
                } else {
                    seconds
                };
                call + self.options.overhead_s
            }
            Task::Transitions(_) | Task::Finished => 0.0,
        }
    }
}

/// The simulated cores: what each runs (and since when), their idle list
/// and deques of spawned tasks ([`Queues`]), the injector for tasks from
/// outside, and the clock's pending completions.
pub(crate) struct Machine<Q> {
    pub heap: BinaryHeap<Reverse<(Time, u64, usize)>>,
    pub running: Vec<Option<(Task, f64)>>,
    pub queues: Q,
    pub injector: VecDeque<Task>,
    sequence: u64,
    pub modules_running: usize,
    pub busy_s: f64,
    pub trace: Option<Vec<TraceSlice>>,
}

/// Whether a task may start; if not, the tasks to run instead are pushed.
pub(crate) type Admit<'a> = dyn FnMut(&Task, &mut Vec<Task>) -> bool + 'a;

impl<Q: Queues> Machine<Q> {
    pub fn new(cores: usize, trace: bool) -> Self {
        Self {
            heap: BinaryHeap::new(),
            running: vec![None; cores],
            queues: Q::new(cores),
            injector: VecDeque::new(),
            sequence: 0,
            modules_running: 0,
            busy_s: 0.0,
            trace: trace.then(Vec::new),
        }
    }

    /// Starts `task` on `core`, unless `admit` withdraws it (a path that
    /// had not started took a newer plan, `Coordinator::replan`): then the
    /// core goes on with the first task of the new plan, as a thread does.
    pub fn start(
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
                self.queues.push_idle(core);
                return;
            };
            self.queues.push_tasks(core, tasks);
            task = next;
        }
        let running = &self.running;
        let duration = costs.duration(&task, || {
            running
                .iter()
                .filter(|r| r.is_none())
                .count()
                .saturating_sub(1)
        });
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
        self.queues
            .pop_own(core)
            .or_else(|| self.queues.steal(core))
            .or_else(|| self.injector.pop_front())
    }

    pub fn assign_idle(
        &mut self,
        now: f64,
        costs: &Costs<'_>,
        module_busy_s: &mut [f64],
        admit: &mut Admit<'_>,
    ) {
        let mut still_idle = Vec::new();
        while let Some(core) = self.queues.pop_idle() {
            match self.find_work(core) {
                Some(task) => self.start(core, task, now, costs, module_busy_s, admit),
                None => {
                    still_idle.push(core);
                    // Nothing queued anywhere: the other idle cores find nothing either.
                    if self.injector.is_empty() && self.queues.no_tasks() {
                        break;
                    }
                }
            }
        }
        // The lowest-numbered idle core first next time, for determinism.
        for core in still_idle {
            self.queues.push_idle(core);
        }
        self.queues.settle_idle();
    }
}
