//! The module interfaces users implement: producers, filters, analyzers and
//! outputs, their transition callbacks, and how thread-safe each one is.

use crate::error::{ModuleError, ModuleResult};
use crate::event::Event;
use crate::ids::{Concurrency, ModuleKind};
use crate::trigger::TriggerResults;

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
    ///
    /// Without `external_work(true)` on the module's description the
    /// engine never calls `acquire` (the module is a plain producer).
    fn acquire(&self, _event: &Event<'_>, done: Completion) -> ModuleResult {
        done.finish(Ok(()));
        Ok(())
    }

    /// Tells the instance the concurrency its module was given
    /// ([`ModuleDesc::concurrency`](crate::ModuleDesc::concurrency),
    /// [`ModuleDesc::cloned`](crate::ModuleDesc::cloned)). A producer that
    /// gathers the external work of several events (a device module's
    /// combiner) learns from it how many can ever wait at once: one for a
    /// serial, cloned or exclusive instance, which it keeps during the wait.
    fn set_concurrency(&self, _concurrency: &Concurrency) {}

    /// Called on a producer with external work when the engine has no task
    /// left to run: every event in flight waits for external work (of this
    /// or another module), and no more can be read for now. A producer that
    /// gathers several events' work before starting it (a device module's
    /// combiner) should start what it holds unless work it already started
    /// can still bring more: nothing else will arrive before some external
    /// work completes. Called once per idle spell, from any thread, possibly
    /// while another call on the instance runs; it must return at once.
    fn engine_idle(&self) {}
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

/// Handed to [`Producer::acquire`]: call [`finish`](Completion::finish) once
/// the external work is done. Dropping it unfinished reports an error rather
/// than leaving the event waiting forever; keeping it and never finishing
/// it leaves the event in flight, and the job never ends (the engine cannot
/// tell slow work from lost work: a module that may lose work should
/// finish the completion with an error after a time-out of its own).
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

impl std::fmt::Debug for ModuleImpl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ModuleImpl::Producer(_) => "ModuleImpl::Producer(..)",
            ModuleImpl::Filter(_) => "ModuleImpl::Filter(..)",
            ModuleImpl::Analyzer(_) => "ModuleImpl::Analyzer(..)",
            ModuleImpl::Output(_) => "ModuleImpl::Output(..)",
        })
    }
}

impl std::fmt::Debug for Completion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Completion")
            .field("finished", &self.notify.is_none())
            .finish()
    }
}
