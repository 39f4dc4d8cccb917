//! The module traits for `Arc<T>`: a module handed to the engine inside an
//! `Arc` stays readable by the caller after [`run`](crate::run) has
//! consumed the process (results an analyzer accumulated, state to check).
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicU64, Ordering};
//! use evflow_core::*;
//!
//! #[derive(Default)]
//! struct Count(AtomicU64);
//! impl Transitions for Count {}
//! impl Analyzer for Count {
//!     fn analyze(&self, _: &Event<'_>) -> ModuleResult {
//!         self.0.fetch_add(1, Ordering::Relaxed);
//!         Ok(())
//!     }
//! }
//!
//! let count = Arc::new(Count::default());
//! let mut p = Process::new("count");
//! p.set_source(EmptySource::new(5));
//! p.add(ModuleDesc::analyzer("count", Arc::clone(&count)));
//! p.end_path("e", ["count"]);
//! run(p, &RunOptions::default())?;
//! assert_eq!(count.0.load(Ordering::Relaxed), 5);
//! # Ok::<(), RunError>(())
//! ```

use std::sync::Arc;

use crate::error::ModuleResult;
use crate::event::Event;
use crate::ids::Concurrency;
use crate::module::{Analyzer, Completion, Filter, Output, Producer, Transitions};
use crate::trigger::TriggerResults;

impl<T: Transitions + ?Sized> Transitions for Arc<T> {
    fn begin_job(&self) -> ModuleResult {
        (**self).begin_job()
    }
    fn end_job(&self) -> ModuleResult {
        (**self).end_job()
    }
    fn begin_run(&self, run: u32) -> ModuleResult {
        (**self).begin_run(run)
    }
    fn end_run(&self, run: u32) -> ModuleResult {
        (**self).end_run(run)
    }
    fn begin_lumi(&self, run: u32, lumi: u32) -> ModuleResult {
        (**self).begin_lumi(run, lumi)
    }
    fn end_lumi(&self, run: u32, lumi: u32) -> ModuleResult {
        (**self).end_lumi(run, lumi)
    }
}

impl<T: Producer + ?Sized> Producer for Arc<T> {
    fn produce(&self, event: &Event<'_>) -> ModuleResult {
        (**self).produce(event)
    }
    fn acquire(&self, event: &Event<'_>, done: Completion) -> ModuleResult {
        (**self).acquire(event, done)
    }
    fn set_concurrency(&self, concurrency: &Concurrency) {
        (**self).set_concurrency(concurrency)
    }
    fn engine_idle(&self) {
        (**self).engine_idle()
    }
}

impl<T: Filter + ?Sized> Filter for Arc<T> {
    fn filter(&self, event: &Event<'_>) -> ModuleResult<bool> {
        (**self).filter(event)
    }
}

impl<T: Analyzer + ?Sized> Analyzer for Arc<T> {
    fn analyze(&self, event: &Event<'_>) -> ModuleResult {
        (**self).analyze(event)
    }
}

impl<T: Output + ?Sized> Output for Arc<T> {
    fn write(&self, event: &Event<'_>, results: &TriggerResults) -> ModuleResult {
        (**self).write(event, results)
    }
}
