//! When restricted work (serial, cloned, exclusive-resource modules) was
//! queued at the arbiter, for the queue-time statistics and stalls.
//!
//! Every run of a restricted module asks "was I queued?". A table with one
//! cell per (event slot, restricted module) answers with one atomic swap on
//! the slot's own row — no lock shared by all threads — and is written only
//! on the rare queued path.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::graph::{Graph, ModuleIdx};

pub(crate) struct QueuedSince {
    start: Instant,
    /// Per module: its column in the table, `None` for shared modules.
    column: Vec<Option<usize>>,
    columns: usize,
    /// Nanoseconds since `start` plus one; 0: not queued.
    cells: Vec<AtomicU64>,
}

impl QueuedSince {
    pub(crate) fn new(graph: &Graph, slots: usize, start: Instant) -> Self {
        let mut columns = 0;
        let column = graph
            .modules
            .iter()
            .map(|m| {
                m.restricted().then(|| {
                    columns += 1;
                    columns - 1
                })
            })
            .collect();
        Self {
            start,
            column,
            columns,
            cells: (0..slots * columns).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// `module` was queued for the event in `slot` now.
    pub(crate) fn mark(&self, slot: usize, module: ModuleIdx) {
        if let Some(cell) = self.cell(slot, module) {
            let ns = self.start.elapsed().as_nanos() as u64;
            // Relaxed: the grant that later runs the module passes through
            // the arbiter's lock, which orders this store before the take.
            cell.store(ns + 1, Ordering::Relaxed);
        }
    }

    /// When `module` was queued for the event in `slot`, if it was; clears
    /// the mark.
    pub(crate) fn take(&self, slot: usize, module: ModuleIdx) -> Option<Instant> {
        let cell = self.cell(slot, module)?;
        match cell.swap(0, Ordering::Relaxed) {
            0 => None,
            ns => Some(self.start + Duration::from_nanos(ns - 1)),
        }
    }

    fn cell(&self, slot: usize, module: ModuleIdx) -> Option<&AtomicU64> {
        let column = self.column[module]?;
        self.cells.get(slot * self.columns + column)
    }
}
