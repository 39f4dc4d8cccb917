//! The module interfaces users implement: producers, filters, analyzers and
//! outputs, their transition callbacks, and how thread-safe each one is.

use std::fmt;

use serde::Serialize;

use crate::{Event, TriggerResults};

/// An error returned by a module. The engine adds the module label and the
/// event id when it reports it.
///
/// Any `std::error::Error` converts into it, so `?` works inside modules:
///
/// ```
/// use evflow_core::ModuleError;
/// fn parse(s: &str) -> Result<i32, ModuleError> {
///     Ok(s.parse::<i32>()?)
/// }
/// assert!(parse("x").is_err());
/// assert_eq!(ModuleError::msg("no jets").to_string(), "no jets");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleError {
    message: String,
}

impl ModuleError {
    pub fn msg(message: impl fmt::Display) -> Self {
        Self {
            message: message.to_string(),
        }
    }
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ModuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for ModuleError {
    fn from(e: E) -> Self {
        Self::msg(e)
    }
}

/// Result type of module callbacks.
pub type ModuleResult<T = ()> = Result<T, ModuleError>;

/// Callbacks at job, run and luminosity-block boundaries. Every method has an
/// empty default. The engine calls them one module at a time, with no event
/// of a run (luminosity block) in flight before `begin_run` (`begin_lumi`)
/// or after `end_run` (`end_lumi`).
pub trait Transitions: Send + Sync {
    fn begin_job(&self) -> ModuleResult {
        Ok(())
    }
    fn end_job(&self) -> ModuleResult {
        Ok(())
    }
    fn begin_run(&self, _run: u32) -> ModuleResult {
        Ok(())
    }
    fn end_run(&self, _run: u32) -> ModuleResult {
        Ok(())
    }
    fn begin_lumi(&self, _run: u32, _lumi: u32) -> ModuleResult {
        Ok(())
    }
    fn end_lumi(&self, _run: u32, _lumi: u32) -> ModuleResult {
        Ok(())
    }
}

/// Makes new data products from the products it consumes.
///
/// Methods take `&self`: a [`Concurrency::Shared`] module is called for
/// several events at once, so any state it keeps needs interior mutability.
/// For a [`Concurrency::Serial`] module the engine guarantees one call at a
/// time, so a `Mutex` inside it is never contended.
pub trait Producer: Transitions {
    fn produce(&self, event: &Event<'_>) -> ModuleResult;

    /// First step of *external work* (declared with
    /// [`ModuleDesc::external_work`](crate::ModuleDesc::external_work)):
    /// start work elsewhere (an accelerator, a remote service) and return at
    /// once. Call [`Completion::finish`] when it is done, from any thread;
    /// once `acquire` has returned and the work is done, the engine calls
    /// [`Producer::produce`] on the same instance. No engine thread waits in
    /// between; a serial, cloned or exclusive module keeps its instance (and
    /// resources) during the wait.
    fn acquire(&self, _event: &Event<'_>, done: Completion) -> ModuleResult {
        done.finish(Ok(()));
        Ok(())
    }
}

/// Decides whether an event goes on along a path. May also put products.
pub trait Filter: Transitions {
    fn filter(&self, event: &Event<'_>) -> ModuleResult<bool>;
}

/// Reads products and accumulates results across events (histograms, sums).
pub trait Analyzer: Transitions {
    fn analyze(&self, event: &Event<'_>) -> ModuleResult;
}

/// Receives the events selected by named paths, with every path's decision.
pub trait Output: Transitions {
    fn write(&self, event: &Event<'_>, results: &TriggerResults) -> ModuleResult;
}

/// One instance of a user module, of any kind.
pub enum ModuleImpl {
    Producer(Box<dyn Producer>),
    Filter(Box<dyn Filter>),
    Analyzer(Box<dyn Analyzer>),
    Output(Box<dyn Output>),
}

impl ModuleImpl {
    pub fn kind(&self) -> ModuleKind {
        match self {
            ModuleImpl::Producer(_) => ModuleKind::Producer,
            ModuleImpl::Filter(_) => ModuleKind::Filter,
            ModuleImpl::Analyzer(_) => ModuleKind::Analyzer,
            ModuleImpl::Output(_) => ModuleKind::Output,
        }
    }
    pub(crate) fn transitions(&self) -> &dyn Transitions {
        match self {
            ModuleImpl::Producer(m) => m.as_ref(),
            ModuleImpl::Filter(m) => m.as_ref(),
            ModuleImpl::Analyzer(m) => m.as_ref(),
            ModuleImpl::Output(m) => m.as_ref(),
        }
    }
}

/// The four kinds of module.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ModuleKind {
    Producer,
    Filter,
    Analyzer,
    Output,
}

impl fmt::Display for ModuleKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ModuleKind::Producer => "producer",
            ModuleKind::Filter => "filter",
            ModuleKind::Analyzer => "analyzer",
            ModuleKind::Output => "output",
        })
    }
}

/// How thread-safe a module is, i.e. what the engine must guarantee for it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Concurrency {
    /// One instance may process several events at once.
    Shared,
    /// One event at a time for this instance. Work waiting for it is queued
    /// and holds no thread.
    Serial,
    /// Never runs at the same time as any other module naming one of the
    /// same resources (nor as itself): for thread-unsafe legacy code or
    /// libraries.
    Exclusive(Vec<String>),
    /// `n` instances, each serial; the engine hands out a free one.
    Cloned(u32),
}

impl fmt::Display for Concurrency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Concurrency::Shared => f.write_str("shared"),
            Concurrency::Serial => f.write_str("serial"),
            Concurrency::Exclusive(r) => write!(f, "exclusive({})", r.join(",")),
            Concurrency::Cloned(n) => write!(f, "cloned({n})"),
        }
    }
}

/// Handed to [`Producer::acquire`]: call [`finish`](Completion::finish) once
/// the external work is done. Dropping it unfinished reports an error rather
/// than leaving the event waiting forever.
pub struct Completion {
    notify: Option<Box<dyn FnOnce(ModuleResult) + Send>>,
}

impl Completion {
    pub(crate) fn new(notify: impl FnOnce(ModuleResult) + Send + 'static) -> Self {
        Self {
            notify: Some(Box::new(notify)),
        }
    }

    /// Signals that the external work ended, successfully or not.
    pub fn finish(mut self, result: ModuleResult) {
        if let Some(notify) = self.notify.take() {
            notify(result);
        }
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        if let Some(notify) = self.notify.take() {
            notify(Err(ModuleError::msg(
                "external work was dropped without calling Completion::finish",
            )));
        }
    }
}
