//! Admission of serial, cloned and exclusive-resource modules.
//!
//! Work that may not run yet is *queued* as data; it holds no thread. When a
//! module finishes, the oldest queued work that fits is admitted.

use std::collections::VecDeque;

use crate::graph::{Graph, ModuleIdx};

/// Admitted work: `item` may run now on instance `instance` of `module`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant<T> {
    pub module: ModuleIdx,
    pub instance: u32,
    pub item: T,
}

/// Decides when restricted modules may run. `T` identifies queued work (the
/// executors use the event slot and the execution phase).
#[derive(Debug)]
pub struct Arbiter<T> {
    running: Vec<u32>,
    free_instances: Vec<Vec<u32>>,
    resource_busy: Vec<bool>,
    modules_of_resource: Vec<Vec<ModuleIdx>>,
    queues: Vec<VecDeque<(u64, T)>>,
    next_ticket: u64,
}

impl<T: Copy> Arbiter<T> {
    pub fn new(graph: &Graph) -> Self {
        let mut modules_of_resource = vec![Vec::new(); graph.resources.len()];
        for (m, node) in graph.modules.iter().enumerate() {
            for &r in &node.resources {
                modules_of_resource[r].push(m);
            }
        }
        Self {
            running: vec![0; graph.modules.len()],
            free_instances: graph
                .modules
                .iter()
                .map(|m| (0..m.instances).rev().collect())
                .collect(),
            resource_busy: vec![false; graph.resources.len()],
            modules_of_resource,
            queues: (0..graph.modules.len()).map(|_| VecDeque::new()).collect(),
            next_ticket: 0,
        }
    }

    /// Asks to run `module` for `item`: the instance to use, or `None` when
    /// the work was queued.
    pub fn request(&mut self, graph: &Graph, module: ModuleIdx, item: T) -> Option<u32> {
        if self.queues[module].is_empty() && self.can_run(graph, module) {
            return Some(self.take(graph, module));
        }
        self.queues[module].push_back((self.next_ticket, item));
        self.next_ticket += 1;
        None
    }

    /// Records that `module` stopped running on `instance`; pushes the work
    /// that this admits, oldest first.
    pub fn release(
        &mut self,
        graph: &Graph,
        module: ModuleIdx,
        instance: u32,
        grants: &mut Vec<Grant<T>>,
    ) {
        self.running[module] -= 1;
        self.free_instances[module].push(instance);
        for &r in &graph.modules[module].resources {
            self.resource_busy[r] = false;
        }
        loop {
            let mut best: Option<(u64, ModuleIdx)> = None;
            let mut consider = |m: ModuleIdx, this: &Self| {
                if let Some(&(ticket, _)) = this.queues[m].front()
                    && best.is_none_or(|(t, _)| ticket < t)
                    && this.can_run(graph, m)
                {
                    best = Some((ticket, m));
                }
            };
            consider(module, self);
            for &r in &graph.modules[module].resources {
                for &m in &self.modules_of_resource[r] {
                    consider(m, self);
                }
            }
            let Some((_, m)) = best else { break };
            let (_, item) = self.queues[m].pop_front().expect("queue checked non-empty");
            let instance = self.take(graph, m);
            grants.push(Grant {
                module: m,
                instance,
                item,
            });
        }
    }

    /// Number of queued executions (for reports and tests).
    pub fn queued(&self) -> usize {
        self.queues.iter().map(VecDeque::len).sum()
    }

    fn can_run(&self, graph: &Graph, m: ModuleIdx) -> bool {
        self.running[m] < graph.modules[m].limit
            && graph.modules[m]
                .resources
                .iter()
                .all(|&r| !self.resource_busy[r])
    }

    fn take(&mut self, graph: &Graph, m: ModuleIdx) -> u32 {
        self.running[m] += 1;
        for &r in &graph.modules[m].resources {
            self.resource_busy[r] = true;
        }
        self.free_instances[m]
            .pop()
            .expect("a running count below the limit leaves a free instance")
    }
}
