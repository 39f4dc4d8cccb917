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
    /// Duration of a task that starts now; for a parallel-for call (more
    /// than one range) the range to run instead: its seconds of work split
    /// in ranges, and the framework's overhead.
    fn duration(&self, task: &Task) -> Duration {
        let whole = |seconds| Duration::Whole(seconds);
        match *task {
            Task::Read { .. } => whole(self.options.read_s),
            Task::Module {
                phase: Phase::Acquire,
                ..
            } => whole(self.options.overhead_s),
            Task::Module { slot, module, .. }
                if self.device.is_some_and(|d| d.on_device(slot, module)) =>
            {
                whole(self.options.overhead_s)
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
                let ranges = if ranges > 1 {
                    effective_ranges(seconds, ranges)
                } else {
                    1
                };
                if ranges > 1 {
                    Duration::Ranged {
                        module,
                        seconds,
                        ranges,
                        overhead_s: self.options.overhead_s,
                    }
                } else {
                    whole(seconds + self.options.overhead_s)
                }
            }
            Task::Transitions(_) | Task::Finished => whole(0.0),
        }
    }
}

/// How long a task keeps its core.
enum Duration {
    Whole(f64),
    /// A parallel-for call: `seconds` of work in equal `ranges`, taken one
    /// by one by its core and by cores that find no task ([`RangedCalls`]).
    Ranged {
        module: usize,
        seconds: f64,
        ranges: u32,
        overhead_s: f64,
    },
}

/// The parallel-for calls in progress. A call's core takes its ranges one
/// by one; a core that finds no task takes the oldest call's next range
/// and is idle again after it, as an idle thread steals a range in TBB
/// (so a core freed during a call helps it, and a helper never keeps a
/// task waiting for more than a range). The call ends, on its core, when
/// every range is done.
#[derive(Default)]
struct RangedCalls {
    calls: Vec<Option<RangedCall>>,
    /// Calls with ranges not yet taken, oldest first.
    open: VecDeque<usize>,
    /// Per core: the call whose range it runs, and whether it is the
    /// call's own core.
    range_of: Vec<Option<(usize, bool)>>,
}

struct RangedCall {
    module: usize,
    /// The call's own core.
    core: usize,
    started: f64,
    range_s: f64,
    /// Ranges not yet taken.
    untaken: u32,
    /// Ranges running now.
    running: u32,
}

impl RangedCalls {
    /// Starts a call on `core`: its id.
    fn start(&mut self, core: usize, call: RangedCall) -> usize {
        let id = match self.calls.iter().position(Option::is_none) {
            Some(free) => free,
            None => {
                self.calls.push(None);
                self.calls.len() - 1
            }
        };
        if call.untaken > 0 {
            self.open.push_back(id);
        }
        self.calls[id] = Some(call);
        self.range_of[core] = Some((id, true));
        id
    }

    /// Takes the next range of call `id` on `core` (its own or a helper):
    /// the range's seconds.
    fn take(&mut self, id: usize, core: usize, own: bool) -> f64 {
        let call = self.calls[id].as_mut().expect("a call in progress");
        call.untaken -= 1;
        call.running += 1;
        if call.untaken == 0 {
            self.open.retain(|&open| open != id);
        }
        self.range_of[core] = Some((id, own));
        call.range_s
    }
}

/// The simulated cores: what each runs (and since when), their idle list
/// and deques of spawned tasks ([`Queues`]), the injector for tasks from
/// outside, and the clock's pending completions.
pub(crate) struct Machine<Q> {
    pub heap: BinaryHeap<Reverse<(Time, u64, usize)>>,
    pub running: Vec<Option<(Task, f64)>>,
    ranged: RangedCalls,
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
            ranged: RangedCalls {
                range_of: vec![None; cores],
                ..RangedCalls::default()
            },
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
        // The first stretch on this core, and the CPU seconds of the task.
        let (duration, cpu_s) = match costs.duration(&task) {
            Duration::Whole(seconds) => {
                if let Task::Module { module, .. } = task {
                    module_busy_s[module] += seconds;
                }
                (seconds, seconds)
            }
            Duration::Ranged {
                module,
                seconds,
                ranges,
                overhead_s,
            } => {
                // The overhead is the call's core's, before its first
                // range; the call's running time is counted when it ends.
                let id = self.ranged.start(
                    core,
                    RangedCall {
                        module,
                        core,
                        started: now,
                        range_s: seconds / f64::from(ranges),
                        untaken: ranges,
                        running: 0,
                    },
                );
                let range_s = self.ranged.take(id, core, true);
                (overhead_s + range_s, seconds + overhead_s)
            }
        };
        if let Task::Module { .. } = task {
            self.modules_running += 1;
            self.busy_s += cpu_s;
        }
        self.heap
            .push(Reverse((Time(now + duration), self.sequence, core)));
        self.sequence += 1;
        self.running[core] = Some((task, now));
    }

    /// A range ended on `core` at `now`. False: no range ran there, the
    /// core's task ends. True: the core goes on with the call's next range,
    /// waits for its helpers' ranges, or (a helper) is idle again.
    pub fn range_done(&mut self, core: usize, now: f64, module_busy_s: &mut [f64]) -> bool {
        let Some((id, own)) = self.ranged.range_of[core] else {
            return false;
        };
        let call = self.ranged.calls[id].as_mut().expect("a call in progress");
        call.running -= 1;
        if own && call.untaken > 0 {
            let range_s = self.ranged.take(id, core, true);
            self.push_completion(core, now + range_s);
            return true;
        }
        let all_done = call.untaken == 0 && call.running == 0;
        if own && !all_done {
            // The call's core waits for its helpers' last ranges.
            return true;
        }
        if !own {
            self.ranged.range_of[core] = None;
            self.queues.push_idle(core);
        }
        if all_done {
            let call = self.ranged.calls[id].take().expect("a call in progress");
            module_busy_s[call.module] += now - call.started;
            let caller = call.core;
            self.ranged.range_of[caller] = None;
            if !own {
                // The call's core was waiting: its task ends now.
                self.push_completion(caller, now);
            }
            return !own;
        }
        true
    }

    fn push_completion(&mut self, core: usize, at: f64) {
        self.heap.push(Reverse((Time(at), self.sequence, core)));
        self.sequence += 1;
    }

    /// A core that found no task takes the oldest call's next range.
    fn help(&mut self, core: usize, now: f64) -> bool {
        let Some(&id) = self.ranged.open.front() else {
            return false;
        };
        let range_s = self.ranged.take(id, core, false);
        self.push_completion(core, now + range_s);
        true
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
                None if self.help(core, now) => {}
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
