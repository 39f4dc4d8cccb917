//! [`RunOptions`]: how a job runs (threads, events in flight, executor,
//! error policy, tracing, progress, the planner of reorderable paths).

use std::fmt;
use std::sync::Arc;

use crate::graph::Graph;
use crate::schedule;
use crate::stop::StopHandle;

/// Called with the number of events finished so far.
pub type ProgressFn = Arc<dyn Fn(u64) + Send + Sync>;

/// Builds the [`schedule::Planner`] that orders reorderable paths, once the
/// graph is compiled.
pub type PlannerFactory = Arc<dyn Fn(&Graph) -> Arc<dyn schedule::Planner> + Send + Sync>;

/// Which executor carries out the scheduling decisions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ExecutorKind {
    /// A work-stealing pool of `threads` threads.
    #[default]
    Threaded,
    /// One thread, one task after the other: the reference baseline.
    Sequential,
}

/// What to do when a module fails on an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ErrorPolicy {
    /// Stop reading, cancel the work of events in flight, fail the job.
    #[default]
    Fail,
    /// Record the event as failed in the report and go on. The job
    /// returns its report even when every event failed: check
    /// [`Report::failed_events`](crate::Report::failed_events) (the
    /// `evflow` command line then exits with an error).
    SkipEvent,
}

/// How to run a job.
#[derive(Clone)]
pub struct RunOptions {
    /// Threads of the threaded executor (at least 1; the sequential
    /// executor uses one).
    pub threads: usize,
    /// Maximum number of events processed at once (K, from 1 to
    /// [`MAX_EVENTS_IN_FLIGHT`]); also bounds memory: the engine keeps the
    /// state of K events, allocated when the job starts.
    pub events_in_flight: usize,
    pub executor: ExecutorKind,
    pub on_error: ErrorPolicy,
    /// Record a trace of every module execution into [`Report::trace`](crate::report::Report::trace).
    pub trace: bool,
    pub progress: Option<ProgressFn>,
    /// Orders reorderable paths; `None`: every path in its written order.
    pub planner: Option<PlannerFactory>,
    /// A graceful stop request (see [`StopHandle`]); `None`: run to the end.
    pub stop: Option<StopHandle>,
    /// Luminosity blocks whose events may be in flight at once (at least
    /// 1): the next block's events start while the last events of the
    /// previous one finish. Begin-lumi hooks may then run while modules
    /// process events of an older block; every end-lumi comes after all
    /// events of its block, in block order.
    pub concurrent_lumis: usize,
}

/// The largest [`RunOptions::events_in_flight`]: each event in flight
/// holds per-module state allocated when the job starts, so a mistyped
/// value must be an error, not an allocation that aborts the process.
pub const MAX_EVENTS_IN_FLIGHT: usize = 1 << 20;

impl RunOptions {
    /// Checks the values [`run`](crate::job::run) refuses (it calls this).
    ///
    /// ```
    /// use evflow_core::RunOptions;
    ///
    /// assert!(RunOptions::default().check().is_ok());
    /// let zero = RunOptions { threads: 0, ..RunOptions::default() };
    /// assert!(zero.check().unwrap_err().to_string().contains("threads must be at least 1"));
    /// ```
    pub fn check(&self) -> Result<(), crate::config_error::ConfigError> {
        let invalid = |m: String| Err(crate::config_error::ConfigError::InvalidOptions(m));
        if self.threads == 0 {
            return invalid("threads must be at least 1, not 0".into());
        }
        if !(1..=MAX_EVENTS_IN_FLIGHT).contains(&self.events_in_flight) {
            return invalid(format!(
                "events_in_flight must be from 1 to {MAX_EVENTS_IN_FLIGHT}, not {}",
                self.events_in_flight
            ));
        }
        if self.concurrent_lumis == 0 {
            return invalid("concurrent_lumis must be at least 1, not 0".into());
        }
        Ok(())
    }
}

/// Default of [`RunOptions::concurrent_lumis`] (see docs/performance.md,
/// "Many cores, luminosity blocks, graceful stop").
pub const DEFAULT_CONCURRENT_LUMIS: usize = 2;

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            threads: 1,
            events_in_flight: 1,
            executor: ExecutorKind::Threaded,
            on_error: ErrorPolicy::Fail,
            trace: false,
            progress: None,
            planner: None,
            stop: None,
            concurrent_lumis: DEFAULT_CONCURRENT_LUMIS,
        }
    }
}

impl fmt::Debug for RunOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunOptions")
            .field("threads", &self.threads)
            .field("events_in_flight", &self.events_in_flight)
            .field("executor", &self.executor)
            .field("on_error", &self.on_error)
            .field("trace", &self.trace)
            .field("stop", &self.stop)
            .field("concurrent_lumis", &self.concurrent_lumis)
            .finish()
    }
}
