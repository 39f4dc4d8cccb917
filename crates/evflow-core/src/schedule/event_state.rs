//! Per-event decisions: which module of one event may run next.
//!
//! Pure state machine over the [`Graph`]: no threads, no clocks. Modules are
//! *requested* when a path step or end-path module needs them (directly or
//! through products), and *dispatched* once everything they consume exists.
//! Producers nobody requests never run; a module requested by several paths
//! or consumers runs once.

use std::sync::Arc;

use super::plan::{PathOutcome, PathPlan};
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

/// The steps of one path that must follow others, each with those steps.
type PathGuards = Vec<(ModuleIdx, Vec<ModuleIdx>)>;

/// `EventState::rejected_at` of a path no step has rejected.
const NOT_REJECTED: u32 = u32::MAX;

/// The scheduling state of one event in flight.
#[derive(Clone, Debug)]
pub struct EventState {
    status: Vec<Status>,
    pending: Vec<u32>,
    passed: Vec<bool>,
    /// Per path: index of the current group of its plan.
    cursor: Vec<u32>,
    plans: Vec<Arc<PathPlan>>,
    /// Per path: the group whose step was the first to reject the event
    /// while evaluating all steps (sampling), `NOT_REJECTED` before.
    rejected_at: Vec<u32>,
    path_status: Vec<PathStatus>,
    undecided_paths: usize,
    end_started: bool,
    end_pending: usize,
    dispatched: usize,
    failed: bool,
    index: u64,
    /// Requested only to measure steps of a sampled path after its
    /// rejection (with the producers they alone need): a failure there
    /// fails nothing. Cleared once anything else needs the module.
    measuring: Vec<bool>,
    /// Measurements that failed: done, not passed, reported by no path; a
    /// module needed otherwise runs again (and fails the event if it fails).
    lost: Vec<bool>,
    /// Per path: each step that must follow others (`after`, or a product
    /// it needs), with those steps. See [`Self::guard_rejected`].
    guards: Arc<[PathGuards]>,
    /// Reused buffer for the coordinator (saves an allocation per module).
    pub(crate) scratch: Vec<ModuleIdx>,
}

impl EventState {
    pub fn new(graph: &Graph) -> Self {
        let n = graph.modules.len();
        Self {
            status: vec![Status::Idle; n],
            pending: vec![0; n],
            passed: vec![false; n],
            cursor: vec![0; graph.paths.len()],
            plans: graph
                .paths
                .iter()
                .map(|p| Arc::new(PathPlan::sequence(p.steps.iter().copied())))
                .collect(),
            rejected_at: vec![NOT_REJECTED; graph.paths.len()],
            path_status: vec![PathStatus::Running; graph.paths.len()],
            undecided_paths: graph.paths.len(),
            end_started: false,
            end_pending: 0,
            dispatched: 0,
            failed: false,
            index: 0,
            measuring: vec![false; n],
            lost: vec![false; n],
            guards: graph
                .paths
                .iter()
                .map(|path| {
                    path.steps
                        .iter()
                        .enumerate()
                        .filter_map(|(b, &m)| {
                            let before: Vec<ModuleIdx> = path
                                .precedence
                                .iter()
                                .filter(|&&(_, later)| later == b)
                                .map(|&(a, _)| path.steps[a])
                                .collect();
                            (!before.is_empty()).then_some((m, before))
                        })
                        .collect()
                })
                .collect(),
            scratch: Vec::new(),
        }
    }

    /// Resets the state for a new event and pushes the first modules to run.
    /// `plan(p)` gives the plan of path `p` for this event.
    pub fn start(
        &mut self,
        graph: &Graph,
        index: u64,
        mut plan: impl FnMut(PathIdx) -> Arc<PathPlan>,
        ready: &mut Vec<ModuleIdx>,
    ) {
        self.index = index;
        self.status.fill(Status::Idle);
        self.passed.fill(false);
        self.cursor.fill(0);
        self.rejected_at.fill(NOT_REJECTED);
        for (p, slot) in self.plans.iter_mut().enumerate() {
            *slot = plan(p);
        }
        self.path_status.fill(PathStatus::Running);
        self.undecided_paths = graph.paths.len();
        self.end_started = false;
        self.end_pending = 0;
        self.dispatched = 0;
        self.failed = false;
        self.measuring.fill(false);
        self.lost.fill(false);
        for p in 0..graph.paths.len() {
            self.advance(graph, p, ready);
        }
        if graph.paths.is_empty() {
            self.start_end_path(graph, ready);
        }
    }

    /// Records that `module` ended with `outcome`; pushes what may run now.
    pub fn module_done(
        &mut self,
        graph: &Graph,
        module: ModuleIdx,
        outcome: Outcome,
        ready: &mut Vec<ModuleIdx>,
    ) {
        debug_assert_eq!(
            self.status[module],
            Status::Dispatched,
            "module {module} completed twice"
        );
        self.dispatched -= 1;
        self.status[module] = Status::Done;
        match outcome {
            Outcome::Pass => self.passed[module] = true,
            Outcome::Reject => self.passed[module] = false,
            Outcome::Failed if self.lost[module] && !self.failed => {
                self.lose(graph, module, ready);
                return;
            }
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
            if self.path_status[p] == PathStatus::Running
                && self.plans[p]
                    .groups
                    .get(self.cursor[p] as usize)
                    .is_some_and(|g| g.contains(&module))
            {
                self.advance(graph, p, ready);
            }
        }
        if graph.modules[module].end_path {
            self.end_pending -= 1;
        }
    }

    /// `module`, running, failed: whether it ran only to measure steps after
    /// a rejection (`measuring`), then a lost measurement that
    /// fails nothing (the caller reports no failure; `module_done` follows).
    /// Also on an event failed meanwhile: what fails it is reported once,
    /// whatever the timing of the measurements.
    pub fn measurement_failed(&mut self, module: ModuleIdx) -> bool {
        self.lost[module] = self.measuring[module];
        self.lost[module]
    }

    /// A lost measurement: `m` counts as done, passed by no path, and so do
    /// the measurements waiting for its products. A module that something
    /// else needs meanwhile runs again, as it would have without sampling.
    fn lose(&mut self, graph: &Graph, m: ModuleIdx, ready: &mut Vec<ModuleIdx>) {
        self.status[m] = Status::Done;
        (self.passed[m], self.lost[m], self.measuring[m]) = (false, true, false);
        let consumers = &graph.modules[m].consumers;
        if consumers
            .iter()
            .any(|&c| self.status[c] == Status::Waiting && !self.measuring[c])
        {
            // Claimed after it failed: it runs for real (the measurements
            // waiting for it wait for that run).
            self.revive(graph, m, ready);
            return;
        }
        for &c in consumers {
            // Losing one may move a path on to a measurement that asks for
            // `m` again: the rest then wait for that run.
            if self.status[m] != Status::Done {
                return;
            }
            if self.status[c] == Status::Waiting {
                self.lose(graph, c, ready);
            }
        }
        for &p in &graph.modules[m].paths {
            if self.status[m] == Status::Done
                && self.path_status[p] == PathStatus::Running
                && self.plans[p]
                    .groups
                    .get(self.cursor[p] as usize)
                    .is_some_and(|g| g.contains(&m))
            {
                self.advance(graph, p, ready);
            }
        }
    }

    /// Runs a lost measurement again, for what needs it now.
    fn revive(&mut self, graph: &Graph, m: ModuleIdx, ready: &mut Vec<ModuleIdx>) {
        (self.status[m], self.lost[m]) = (Status::Idle, false);
        self.request(graph, m, false, ready);
    }

    /// Something other than a measurement needs `m`: it and the producers
    /// it waits for are measurements no more.
    fn claim(&mut self, graph: &Graph, m: ModuleIdx) {
        // A stack of its own, not the thread's: a chain of prerequisites
        // may be as long as the graph.
        let mut todo = vec![m];
        while let Some(m) = todo.pop() {
            if std::mem::replace(&mut self.measuring[m], false) {
                for &p in &graph.modules[m].prereqs {
                    if self.status[p] != Status::Done {
                        todo.push(p);
                    }
                }
            }
        }
    }

    /// The one path whose next step is `module`, dispatched but not yet
    /// run, and nothing of the path done: a path that may still take
    /// another plan ([`replan`](Self::replan)).
    pub fn unstarted_path(&self, graph: &Graph, module: ModuleIdx) -> Option<PathIdx> {
        let node = &graph.modules[module];
        let &[p] = node.paths.as_slice() else {
            return None;
        };
        let fresh = !self.failed
            && self.cursor[p] == 0
            && self.path_status[p] == PathStatus::Running
            && self.status[module] == Status::Dispatched
            && self.plans[p].groups.first().is_some_and(|g| g == &[module]);
        fresh.then_some(p)
    }

    /// Gives path `p`, not started ([`unstarted_path`](Self::unstarted_path)
    /// of `module`), the plan `plan`, decided since the event started.
    /// Returns whether `module` still runs now: not when the new plan starts
    /// with another step and nothing else of the event needs `module` (it
    /// is withdrawn, and the new first step pushed to `ready`).
    pub fn replan(
        &mut self,
        graph: &Graph,
        p: PathIdx,
        module: ModuleIdx,
        plan: Arc<PathPlan>,
        ready: &mut Vec<ModuleIdx>,
    ) -> bool {
        if plan.groups.first().is_some_and(|g| g == &[module]) {
            self.plans[p] = plan;
            return true;
        }
        let node = &graph.modules[module];
        let needed = node.end_path
            || node
                .consumers
                .iter()
                .any(|&c| matches!(self.status[c], Status::Waiting | Status::Dispatched));
        if needed || !plan.order().any(|m| m == module) {
            return true;
        }
        self.status[module] = Status::Idle;
        self.dispatched -= 1;
        self.plans[p] = plan;
        self.advance(graph, p, ready);
        false
    }

    /// Stops dispatching anything more for this event (job abort).
    pub fn cancel(&mut self) {
        self.failed = true;
    }

    /// True once nothing of this event runs or will run.
    pub fn is_finished(&self) -> bool {
        self.dispatched == 0 && (self.failed || (self.end_started && self.end_pending == 0))
    }

    /// Job index of the event (its position in the order started).
    pub fn index(&self) -> u64 {
        self.index
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

    /// What the event did on path `p`: the steps that ran for it, in
    /// execution order, with their decisions.
    pub fn path_outcome(&self, p: PathIdx, out: &mut PathOutcome) {
        out.steps.clear();
        out.counts.clear();
        let plan = &self.plans[p];
        let reached = (self.cursor[p] as usize + 1).min(plan.groups.len());
        let mut rejected_at = None;
        out.decided_after = usize::MAX;
        for (g, group) in plan.groups[..reached].iter().enumerate() {
            if out.decided_after == usize::MAX && rejected_at.is_some_and(|k| k < g) {
                out.decided_after = out.steps.len();
            }
            if rejected_at.is_some_and(|k| plan.skips_after_reject(k, g)) {
                continue;
            }
            for &m in group {
                if plan.evaluate_all && self.guard_rejected(p, m) {
                    // Not the path's step on this event (another path may
                    // have run the module).
                    continue;
                }
                if self.status[m] == Status::Done && !self.lost[m] {
                    out.steps.push((m, self.passed[m]));
                    out.counts.push(None);
                    if !self.passed[m] && rejected_at.is_none() {
                        rejected_at = Some(g);
                    }
                }
            }
        }
        out.decided_after = out.decided_after.min(out.steps.len());
        out.accepted = self.path_status[p] == PathStatus::Accepted;
        out.sampled = plan.evaluate_all;
    }

    fn advance(&mut self, graph: &Graph, p: PathIdx, ready: &mut Vec<ModuleIdx>) {
        let plan = self.plans[p].clone();
        loop {
            let g = self.cursor[p] as usize;
            let Some(group) = plan.groups.get(g) else {
                let decision = if self.rejected_at[p] != NOT_REJECTED {
                    PathStatus::Rejected
                } else {
                    PathStatus::Accepted
                };
                self.decide(graph, p, decision, ready);
                return;
            };
            let k = self.rejected_at[p];
            if k != NOT_REJECTED && plan.skips_after_reject(k as usize, g) {
                self.cursor[p] += 1;
                continue;
            }
            let mut complete = true;
            let measure = k != NOT_REJECTED;
            for &m in group {
                if plan.evaluate_all && self.guard_rejected(p, m) {
                    continue;
                }
                match self.status[m] {
                    Status::Done if self.lost[m] && !measure => {
                        self.revive(graph, m, ready);
                        complete = false;
                    }
                    Status::Done if self.passed[m] => {}
                    Status::Done if plan.evaluate_all => {
                        if self.rejected_at[p] == NOT_REJECTED {
                            self.rejected_at[p] = g as u32;
                        }
                    }
                    Status::Done => {
                        self.decide(graph, p, PathStatus::Rejected, ready);
                        return;
                    }
                    Status::Idle => {
                        self.request(graph, m, measure, ready);
                        complete = false;
                    }
                    Status::Waiting | Status::Dispatched => {
                        if !measure {
                            self.claim(graph, m);
                        }
                        complete = false;
                    }
                }
            }
            if !complete {
                return;
            }
            self.cursor[p] += 1;
        }
    }

    /// On an event that evaluates every step of path `p` (sampling):
    /// whether step `m` must not run for the path because a step it must
    /// follow did not run and pass on it. A step declared `after` another
    /// is guarded by it (`nJet >= 2` before `Jet_pt[:, 1] > 30`): no order
    /// the planner may choose runs it on an event the other rejected, so
    /// measuring it there tells nothing and may fail. The steps `m` must
    /// follow are in earlier groups, which the path is past: one not done
    /// was left out by the path (a rejected guard of its own, or a group
    /// skipped after a rejection), even if another path runs it now.
    fn guard_rejected(&self, p: PathIdx, m: ModuleIdx) -> bool {
        let Some((_, before)) = self.guards[p].iter().find(|(step, _)| *step == m) else {
            return false;
        };
        let plan = &self.plans[p];
        let group_of = |x: ModuleIdx| plan.groups.iter().position(|g| g.contains(&x));
        let mine = group_of(m);
        before.iter().any(|&a| match self.status[a] {
            Status::Done => !self.passed[a] || self.guard_rejected(p, a),
            Status::Idle | Status::Waiting | Status::Dispatched => group_of(a) < mine,
        })
    }

    fn decide(
        &mut self,
        graph: &Graph,
        p: PathIdx,
        decision: PathStatus,
        ready: &mut Vec<ModuleIdx>,
    ) {
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
                || step
                    .select
                    .iter()
                    .any(|&p| self.path_status[p] == PathStatus::Accepted);
            if selected && self.status[step.module] == Status::Idle {
                self.end_pending += 1;
                self.request(graph, step.module, false, ready);
            }
        }
    }

    /// `measure`: only to measure a step after the path's rejection.
    fn request(&mut self, graph: &Graph, m: ModuleIdx, measure: bool, ready: &mut Vec<ModuleIdx>) {
        debug_assert_eq!(self.status[m], Status::Idle);
        if self.failed {
            return;
        }
        // Depth first, in the order of each module's prerequisites, on a
        // stack of its own: a chain of prerequisites may be as long as the
        // graph (50 000 producers overflowed a worker thread's stack when
        // this recursed). Each frame: the module, its next prerequisite,
        // and how many of those seen are not done.
        let mut frames: Vec<(ModuleIdx, usize, u32)> = Vec::new();
        self.status[m] = Status::Waiting;
        self.measuring[m] = measure;
        frames.push((m, 0, 0));
        while let Some(&mut (m, ref mut next, ref mut pending)) = frames.last_mut() {
            if let Some(&p) = graph.modules[m].prereqs.get(*next) {
                *next += 1;
                if self.status[p] == Status::Done && self.lost[p] {
                    (self.status[p], self.lost[p]) = (Status::Idle, false);
                }
                if self.status[p] == Status::Idle {
                    self.status[p] = Status::Waiting;
                    self.measuring[p] = measure;
                    frames.push((p, 0, 0));
                    continue;
                }
                if !measure {
                    self.claim(graph, p);
                }
                if self.status[p] != Status::Done {
                    *pending += 1;
                }
                continue;
            }
            let pending = *pending;
            frames.pop();
            self.pending[m] = pending;
            if pending == 0 {
                self.dispatch(m, ready);
            }
            // Back in the module that requested `m`: one more prerequisite
            // seen, not done (requested just now, so not done yet).
            if let Some((_, _, parent_pending)) = frames.last_mut()
                && self.status[m] != Status::Done
            {
                *parent_pending += 1;
            }
        }
    }

    fn dispatch(&mut self, m: ModuleIdx, ready: &mut Vec<ModuleIdx>) {
        self.status[m] = Status::Dispatched;
        self.dispatched += 1;
        ready.push(m);
    }
}

#[cfg(test)]
mod tests;
