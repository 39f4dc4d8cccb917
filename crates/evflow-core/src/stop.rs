//! Graceful stop: a request, from any thread, to end a job early and
//! cleanly.
//!
//! Once a [`StopHandle`] is requested, the source reads no further event;
//! the events in flight finish normally, the end transitions run (end lumi,
//! end run, end job), outputs close, and the report says
//! `"interrupted": true` with the events done. The decision is taken by the
//! scheduling logic ([`crate::schedule::Coordinator`]), so every executor
//! and the simulator stop the same way. Front ends turn their own signals
//! into a request: the `evflow` command a first SIGINT/SIGTERM, the Python
//! package a `KeyboardInterrupt`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Asks a running job to stop reading and finish what is in flight.
///
/// Clones share one request. A signal handler may set the flag returned by
/// [`StopHandle::flag`] directly (setting an atomic is async-signal-safe).
///
/// ```
/// use evflow_core::*;
/// use evflow_workloads as synthetic;
///
/// // A source that asks its own job to stop after 10 events.
/// struct Stopping { stop: StopHandle, next: u64 }
/// impl Source for Stopping {
///     fn next_event(&mut self, _: &mut SourceProducts) -> Result<Option<EventId>, ModuleError> {
///         self.next += 1;
///         if self.next == 10 {
///             self.stop.request();
///         }
///         Ok(Some(EventId::new(1, 1, self.next)))
///     }
///     fn describe(&self) -> String { "endless".into() }
/// }
///
/// let stop = StopHandle::new();
/// let mut p = Process::new("stopped");
/// p.set_source(Stopping { stop: stop.clone(), next: 0 });
/// p.add(synthetic::analyzer("count", synthetic::Timing::zero(), &[]));
/// p.end_path("e", ["count"]);
/// let options = RunOptions { stop: Some(stop), ..RunOptions::default() };
/// let report = run(p, &options).unwrap();
/// assert!(report.interrupted);
/// assert_eq!(report.events, 10);
/// ```
#[derive(Clone, Debug, Default)]
pub struct StopHandle(Arc<AtomicBool>);

impl StopHandle {
    pub fn new() -> Self {
        Self::default()
    }

    /// Requests the stop; later requests change nothing.
    pub fn request(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub fn is_requested(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// The shared flag itself, for registering with a signal handler
    /// (`signal_hook::flag::register`).
    pub fn flag(&self) -> &Arc<AtomicBool> {
        &self.0
    }
}
