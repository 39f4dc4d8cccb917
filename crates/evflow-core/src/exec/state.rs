//! The state a running job shares between its threads: the [`Engine`]
//! (module instances, event slots, counters, the report's records) and
//! the [`Submit`] interface through which work finished outside the task
//! loop comes back.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use arc_swap::ArcSwapOption;
use crossbeam_utils::CachePadded;

use crate::error::JobError;
use crate::event::EventData;
use crate::graph::Graph;
use crate::module::ModuleImpl;
use crate::options::{ErrorPolicy, RunOptions};
use crate::report::{FailedEvent, Stall};
use crate::schedule::{Coordinator, Task};
use crate::source::Source;

/// Hands tasks that become ready outside the task loop (completed external
/// work) back to the executor.
pub(crate) trait Submit: Send + Sync {
    fn submit(&self, task: Task);
}

/// What is counted for a module outside its every execution.
#[derive(Default)]
pub(super) struct ModuleStats {
    pub(super) wait_ns: AtomicU64,
    pub(super) queue_ns: AtomicU64,
    pub(super) failures: AtomicU64,
}

/// Calls and run time per module, counted on every module execution: one
/// shard per worker thread, each on its own cache lines, summed for the
/// report. (One shared counter per module was written by every thread that
/// ran the module: measured among the most contended lines on 16 cores.)
pub(super) struct ExecutionCounts {
    shards: Vec<CachePadded<Box<[ModuleCounts]>>>,
}

#[derive(Default)]
struct ModuleCounts {
    calls: AtomicU64,
    run_ns: AtomicU64,
}

impl ExecutionCounts {
    /// More shards than this bring nothing but memory (pools of hundreds of
    /// threads share them).
    const MAX_SHARDS: usize = 64;

    pub(super) fn new(modules: usize, threads: usize) -> Self {
        let shards = threads.clamp(1, Self::MAX_SHARDS);
        Self {
            shards: (0..shards)
                .map(|_| CachePadded::new((0..modules).map(|_| ModuleCounts::default()).collect()))
                .collect(),
        }
    }

    pub(super) fn record(&self, thread: usize, module: usize, calls: u64, run_ns: u64) {
        let counts = &self.shards[thread % self.shards.len()][module];
        if calls > 0 {
            counts.calls.fetch_add(calls, Ordering::Relaxed);
        }
        counts.run_ns.fetch_add(run_ns, Ordering::Relaxed);
    }

    pub(super) fn calls(&self, module: usize) -> u64 {
        self.shards
            .iter()
            .map(|s| s[module].calls.load(Ordering::Relaxed))
            .sum()
    }

    pub(super) fn run_ns(&self, module: usize) -> u64 {
        self.shards
            .iter()
            .map(|s| s[module].run_ns.load(Ordering::Relaxed))
            .sum()
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The run and luminosity blocks a module instance has begun and not ended
/// (several blocks with concurrent luminosity blocks).
#[derive(Clone, Default)]
pub(super) struct OpenBlocks {
    pub(super) run: Option<u32>,
    pub(super) lumis: Vec<(u32, u32)>,
}

/// How many of the longest stalls a report keeps.
pub(super) const STALLS_KEPT: usize = 20;

/// Everything a running job shares between its threads.
pub(crate) struct Engine {
    pub(super) graph: Arc<Graph>,
    pub(crate) coordinator: Coordinator,
    pub(super) instances: Vec<Vec<ModuleImpl>>,
    // Written on every read (the lock) or event (the counters): each on
    // cache lines of its own, away from the fields every task reads.
    pub(super) source: CachePadded<Mutex<Box<dyn Source>>>,
    pub(super) source_products: Vec<usize>,
    /// The data of the event in each slot. Read by every module execution
    /// without a lock or a shared reference count (arc-swap's guards): the
    /// data of a slot is replaced only between events.
    pub(super) slot_data: Vec<CachePadded<ArcSwapOption<EventData>>>,
    pub(super) stats: Vec<ModuleStats>,
    pub(super) counts: ExecutionCounts,
    /// visited/passed per (path, step), flattened; then per path.
    pub(super) step_visited: Vec<AtomicU64>,
    pub(super) step_passed: Vec<AtomicU64>,
    pub(super) step_offset: Vec<usize>,
    pub(super) path_visited: Vec<AtomicU64>,
    pub(super) path_passed: Vec<AtomicU64>,
    pub(super) events_read: CachePadded<AtomicU64>,
    pub(super) events_done: CachePadded<AtomicU64>,
    pub(super) policy: ErrorPolicy,
    pub(super) failed_events: Mutex<Vec<FailedEvent>>,
    pub(super) job_error: Mutex<Option<JobError>>,
    pub(super) trace: Option<super::trace::TraceBuffers>,
    /// The modules' labels as trace slices name them (shared, not copied
    /// per slice), then "source"; empty without a trace.
    pub(super) trace_names: Vec<Arc<str>>,
    pub(super) start: Instant,
    pub(super) progress: Option<crate::options::ProgressFn>,
    pub(super) finished: AtomicBool,
    /// When restricted work was queued, by (slot, module).
    pub(super) queued_at: super::queued::QueuedSince,
    pub(super) stalls: Mutex<Vec<Stall>>,
    /// Per module and instance: what its hooks have opened.
    pub(super) open_transitions: Mutex<Vec<Vec<OpenBlocks>>>,
    pub(super) steady: Mutex<crate::report::SteadyRate>,
    pub(super) concurrent_lumis: usize,
    /// Producers with external work: told when the engine is idle.
    pub(super) external_modules: Vec<crate::graph::ModuleIdx>,
}

impl Engine {
    pub(crate) fn new(
        graph: Arc<Graph>,
        instances: Vec<Vec<ModuleImpl>>,
        source: Box<dyn Source>,
        options: &RunOptions,
    ) -> Self {
        let k = options.events_in_flight.max(1);
        let start = Instant::now();
        let queued_at = super::queued::QueuedSince::new(&graph, k, start);
        let trace_names = if options.trace {
            let labels = graph.modules.iter().map(|m| Arc::from(m.label.as_str()));
            labels.chain([Arc::from("source")]).collect()
        } else {
            Vec::new()
        };
        let mut step_offset = Vec::new();
        let mut n_steps = 0;
        for p in &graph.paths {
            step_offset.push(n_steps);
            n_steps += p.steps.len();
        }
        let open = instances
            .iter()
            .map(|i| vec![OpenBlocks::default(); i.len()])
            .collect();
        let external_modules = graph
            .modules
            .iter()
            .enumerate()
            .filter(|(_, m)| m.external_work)
            .map(|(i, _)| i)
            .collect();
        let source_products = graph
            .products
            .iter()
            .enumerate()
            .filter(|(_, p)| p.producer.is_none())
            .map(|(i, _)| i)
            .collect();
        Self {
            coordinator: {
                let c = Coordinator::new(
                    graph.clone(),
                    k,
                    options.planner.as_ref().map(|make| make(&graph)),
                )
                .with_concurrent_lumis(options.concurrent_lumis);
                match &options.stop {
                    Some(stop) => c.with_stop(stop.clone()),
                    None => c,
                }
            },
            stats: graph
                .modules
                .iter()
                .map(|_| ModuleStats::default())
                .collect(),
            step_visited: (0..n_steps).map(|_| AtomicU64::new(0)).collect(),
            step_passed: (0..n_steps).map(|_| AtomicU64::new(0)).collect(),
            step_offset,
            path_visited: graph.paths.iter().map(|_| AtomicU64::new(0)).collect(),
            path_passed: graph.paths.iter().map(|_| AtomicU64::new(0)).collect(),
            slot_data: (0..k)
                .map(|_| CachePadded::new(ArcSwapOption::empty()))
                .collect(),
            counts: ExecutionCounts::new(graph.modules.len(), options.threads),
            graph,
            instances,
            source: CachePadded::new(Mutex::new(source)),
            source_products,
            events_read: CachePadded::new(AtomicU64::new(0)),
            events_done: CachePadded::new(AtomicU64::new(0)),
            policy: options.on_error,
            failed_events: Mutex::new(Vec::new()),
            job_error: Mutex::new(None),
            trace: options.trace.then(|| {
                use super::trace::TraceBuffers;
                TraceBuffers::new(options.threads, k, TraceBuffers::CHUNK)
            }),
            trace_names,
            start,
            progress: options.progress.clone(),
            finished: AtomicBool::new(false),
            queued_at,
            stalls: Mutex::new(Vec::new()),
            open_transitions: Mutex::new(open),
            steady: Mutex::new(crate::report::SteadyRate::new(k)),
            concurrent_lumis: options.concurrent_lumis.max(1),
            external_modules,
        }
    }

    pub(crate) fn take_job_error(&self) -> Option<JobError> {
        lock(&self.job_error).take()
    }
}

pub(super) fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".into()
    }
}

pub(super) fn failure_message(
    result: std::thread::Result<crate::error::ModuleResult>,
) -> Option<String> {
    match result {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e.to_string()),
        Err(panic) => Some(format!("panic: {}", panic_message(&panic))),
    }
}
