//! The simulated cores' idle list and work-stealing deques ([`Queues`]):
//! [`Indexed`], which finds an idle core or a core to steal from by a
//! [`CoreSet`] search, and (in tests) [`Scan`], the plain scans it replaced,
//! kept as the reference it must agree with step by step.

use std::collections::VecDeque;

use evflow_core::schedule::Task;

use crate::core_set::CoreSet;

/// Idle cores and per-core deques of the simulated machine.
///
/// Idle cores are handed out in this order: the cores made idle since the
/// last [`Queues::settle_idle`], newest first, then the others lowest
/// number first. A core steals from the first core after it, going round,
/// whose deque is not empty.
pub(crate) trait Queues {
    /// `cores` cores, every one idle, no task queued.
    fn new(cores: usize) -> Self;
    /// `core` has nothing to run.
    fn push_idle(&mut self, core: usize);
    fn pop_idle(&mut self) -> Option<usize>;
    /// Every idle core joins the ordered ones (lowest number first).
    fn settle_idle(&mut self);
    fn push_tasks(&mut self, core: usize, tasks: impl Iterator<Item = Task>);
    /// The newest task of `core`'s own deque.
    fn pop_own(&mut self, core: usize) -> Option<Task>;
    /// `core`'s own deque holds no task.
    fn own_empty(&self, core: usize) -> bool;
    /// The oldest task of the next core with queued tasks after `core`.
    fn steal(&mut self, core: usize) -> Option<Task>;
    /// No deque holds a task.
    fn no_tasks(&self) -> bool;
    /// Cores and bitmap words looked at so far to answer the calls above
    /// (the work of keeping the machine's books, which must not grow with
    /// the number of cores).
    fn looked_at(&self) -> u64;
}

/// Idle cores and non-empty deques kept in [`CoreSet`]s.
pub(crate) struct Indexed {
    /// Made idle since the last settle (newest last).
    recent: Vec<usize>,
    /// The other idle cores.
    idle: CoreSet,
    deques: Vec<VecDeque<Task>>,
    /// Cores whose deque is not empty.
    queued: CoreSet,
    looked_at: u64,
}

impl Queues for Indexed {
    fn new(cores: usize) -> Self {
        Self {
            recent: Vec::new(),
            idle: CoreSet::full(cores),
            deques: (0..cores).map(|_| VecDeque::new()).collect(),
            queued: CoreSet::new(cores),
            looked_at: 0,
        }
    }

    fn push_idle(&mut self, core: usize) {
        self.recent.push(core);
    }

    fn pop_idle(&mut self) -> Option<usize> {
        self.looked_at += 1;
        self.recent.pop().or_else(|| self.idle.pop_first())
    }

    fn settle_idle(&mut self) {
        for core in self.recent.drain(..) {
            self.idle.insert(core);
        }
    }

    fn push_tasks(&mut self, core: usize, tasks: impl Iterator<Item = Task>) {
        let deque = &mut self.deques[core];
        deque.extend(tasks);
        if !deque.is_empty() {
            self.queued.insert(core);
        }
    }

    fn pop_own(&mut self, core: usize) -> Option<Task> {
        self.looked_at += 1;
        let task = self.deques[core].pop_back()?;
        if self.deques[core].is_empty() {
            self.queued.remove(core);
        }
        Some(task)
    }

    fn own_empty(&self, core: usize) -> bool {
        self.deques[core].is_empty()
    }

    fn steal(&mut self, core: usize) -> Option<Task> {
        let victim = self.queued.next_after(core)?;
        self.looked_at += 1;
        let task = self.deques[victim].pop_front();
        if self.deques[victim].is_empty() {
            self.queued.remove(victim);
        }
        task
    }

    fn no_tasks(&self) -> bool {
        self.queued.is_empty()
    }

    fn looked_at(&self) -> u64 {
        self.looked_at + self.idle.visits() + self.queued.visits()
    }
}

/// The plain version: a sorted list of idle cores, and a scan of every
/// deque for a task to steal. Its cost per step grows with the cores.
#[cfg(test)]
pub(crate) struct Scan {
    idle: Vec<usize>,
    deques: Vec<VecDeque<Task>>,
    looked_at: std::cell::Cell<u64>,
}

#[cfg(test)]
impl Queues for Scan {
    fn new(cores: usize) -> Self {
        Self {
            idle: (0..cores).rev().collect(),
            deques: vec![VecDeque::new(); cores],
            looked_at: Default::default(),
        }
    }

    fn push_idle(&mut self, core: usize) {
        self.idle.push(core);
    }

    fn pop_idle(&mut self) -> Option<usize> {
        self.looked_at.set(self.looked_at.get() + 1);
        self.idle.pop()
    }

    fn settle_idle(&mut self) {
        self.looked_at
            .set(self.looked_at.get() + self.idle.len() as u64);
        self.idle.sort_unstable_by(|a, b| b.cmp(a));
    }

    fn push_tasks(&mut self, core: usize, tasks: impl Iterator<Item = Task>) {
        self.deques[core].extend(tasks);
    }

    fn pop_own(&mut self, core: usize) -> Option<Task> {
        self.looked_at.set(self.looked_at.get() + 1);
        self.deques[core].pop_back()
    }

    fn own_empty(&self, core: usize) -> bool {
        self.deques[core].is_empty()
    }

    fn steal(&mut self, core: usize) -> Option<Task> {
        let n = self.deques.len();
        for offset in 1..n {
            self.looked_at.set(self.looked_at.get() + 1);
            if let Some(task) = self.deques[(core + offset) % n].pop_front() {
                return Some(task);
            }
        }
        None
    }

    fn no_tasks(&self) -> bool {
        self.deques.iter().all(|d| {
            self.looked_at.set(self.looked_at.get() + 1);
            d.is_empty()
        })
    }

    fn looked_at(&self) -> u64 {
        self.looked_at.get()
    }
}
