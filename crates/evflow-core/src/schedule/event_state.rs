//! Per-event decisions: which module of one event may run next.
//!
//! Pure state machine over the [`Graph`]: no threads, no clocks. Modules are
//! *requested* when a path step or end-path module needs them (directly or
//! through products), and *dispatched* once everything they consume exists.
//! Producers nobody requests never run; a module requested by several paths
//! or consumers runs once.

use crate::graph::{Graph, ModuleIdx, PathIdx};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Idle,
    /// Requested, waiting for `pending` prerequisites.
    Waiting,
    /// Handed to the executor (possibly queued for a serial or exclusive
    /// resource).
    Dispatched,
    Done,
}

/// Decision of a path for one event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PathStatus {
    Running,
    Accepted,
    Rejected,
}

/// How one module execution ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A producer or analyzer finished, or a filter passed.
    Pass,
    /// A filter rejected the event.
    Reject,
    /// The module failed (or was cancelled): the event stops here.
    Failed,
}

/// The scheduling state of one event in flight.
#[derive(Clone, Debug)]
pub struct EventState {
    status: Vec<Status>,
    pending: Vec<u32>,
    passed: Vec<bool>,
    cursor: Vec<u32>,
    path_status: Vec<PathStatus>,
    undecided_paths: usize,
    end_started: bool,
    end_pending: usize,
    dispatched: usize,
    failed: bool,
}

impl EventState {
    pub fn new(graph: &Graph) -> Self {
        let n = graph.modules.len();
        Self {
            status: vec![Status::Idle; n],
            pending: vec![0; n],
            passed: vec![false; n],
            cursor: vec![0; graph.paths.len()],
            path_status: vec![PathStatus::Running; graph.paths.len()],
            undecided_paths: graph.paths.len(),
            end_started: false,
            end_pending: 0,
            dispatched: 0,
            failed: false,
        }
    }

    /// Resets the state for a new event and pushes the first modules to run.
    pub fn start(&mut self, graph: &Graph, ready: &mut Vec<ModuleIdx>) {
        self.status.fill(Status::Idle);
        self.passed.fill(false);
        self.cursor.fill(0);
        self.path_status.fill(PathStatus::Running);
        self.undecided_paths = graph.paths.len();
        self.end_started = false;
        self.end_pending = 0;
        self.dispatched = 0;
        self.failed = false;
        for p in 0..graph.paths.len() {
            self.advance(graph, p, ready);
        }
        if graph.paths.is_empty() {
            self.start_end_path(graph, ready);
        }
    }

    /// Records that `module` ended with `outcome`; pushes what may run now.
    pub fn module_done(&mut self, graph: &Graph, module: ModuleIdx, outcome: Outcome, ready: &mut Vec<ModuleIdx>) {
        debug_assert_eq!(self.status[module], Status::Dispatched, "module {module} completed twice");
        self.dispatched -= 1;
        self.status[module] = Status::Done;
        match outcome {
            Outcome::Pass => self.passed[module] = true,
            Outcome::Reject => self.passed[module] = false,
            Outcome::Failed => {
                self.failed = true;
                return;
            }
        }
        if self.failed {
            return;
        }
        for &consumer in &graph.modules[module].consumers {
            if self.status[consumer] == Status::Waiting {
                self.pending[consumer] -= 1;
                if self.pending[consumer] == 0 {
                    self.dispatch(consumer, ready);
                }
            }
        }
        for &p in &graph.modules[module].paths {
            if self.path_status[p] == PathStatus::Running && graph.paths[p].steps[self.cursor[p] as usize] == module {
                self.advance(graph, p, ready);
            }
        }
        if graph.modules[module].end_path {
            self.end_pending -= 1;
        }
    }

    /// Stops dispatching anything more for this event (job abort).
    pub fn cancel(&mut self) {
        self.failed = true;
    }

    /// True once nothing of this event runs or will run.
    pub fn is_finished(&self) -> bool {
        self.dispatched == 0 && (self.failed || (self.end_started && self.end_pending == 0))
    }

    pub fn failed(&self) -> bool {
        self.failed
    }

    /// True once every path is decided and the end path started.
    pub fn end_path_started(&self) -> bool {
        self.end_started
    }

    pub fn path_status(&self) -> &[PathStatus] {
        &self.path_status
    }

    /// How far path `p` got: the number of steps that passed.
    pub fn path_cursor(&self, p: PathIdx) -> usize {
        self.cursor[p] as usize
    }

    fn advance(&mut self, graph: &Graph, p: PathIdx, ready: &mut Vec<ModuleIdx>) {
        let steps = &graph.paths[p].steps;
        loop {
            let i = self.cursor[p] as usize;
            if i == steps.len() {
                self.decide(graph, p, PathStatus::Accepted, ready);
                return;
            }
            let m = steps[i];
            match self.status[m] {
                Status::Done if self.passed[m] => self.cursor[p] += 1,
                Status::Done => {
                    self.decide(graph, p, PathStatus::Rejected, ready);
                    return;
                }
                Status::Idle => {
                    self.request(graph, m, ready);
                    return;
                }
                Status::Waiting | Status::Dispatched => return,
            }
        }
    }

    fn decide(&mut self, graph: &Graph, p: PathIdx, decision: PathStatus, ready: &mut Vec<ModuleIdx>) {
        self.path_status[p] = decision;
        self.undecided_paths -= 1;
        if self.undecided_paths == 0 {
            self.start_end_path(graph, ready);
        }
    }

    fn start_end_path(&mut self, graph: &Graph, ready: &mut Vec<ModuleIdx>) {
        self.end_started = true;
        for step in &graph.end_steps {
            let selected = step.select.is_empty()
                || step.select.iter().any(|&p| self.path_status[p] == PathStatus::Accepted);
            if selected && self.status[step.module] == Status::Idle {
                self.end_pending += 1;
                self.request(graph, step.module, ready);
            }
        }
    }

    fn request(&mut self, graph: &Graph, m: ModuleIdx, ready: &mut Vec<ModuleIdx>) {
        debug_assert_eq!(self.status[m], Status::Idle);
        if self.failed {
            return;
        }
        self.status[m] = Status::Waiting;
        let mut pending = 0;
        for &p in &graph.modules[m].prereqs {
            if self.status[p] == Status::Idle {
                self.request(graph, p, ready);
            }
            if self.status[p] != Status::Done {
                pending += 1;
            }
        }
        self.pending[m] = pending;
        if pending == 0 {
            self.dispatch(m, ready);
        }
    }

    fn dispatch(&mut self, m: ModuleIdx, ready: &mut Vec<ModuleIdx>) {
        self.status[m] = Status::Dispatched;
        self.dispatched += 1;
        ready.push(m);
    }
}
