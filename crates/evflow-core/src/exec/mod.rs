//! Executors: carry out the [`Task`]s the [`Coordinator`] decides on.
//!
//! [`Engine::execute`] runs one task (a source read, a module, transitions)
//! and reports the result back to the coordinator, which appends the tasks
//! that may start next. The threaded executor spreads those over a
//! work-stealing pool; the sequential executor runs them one after the other
//! on a single thread.
//!
//! The files: `state` (the [`Engine`] a job shares between its threads),
//! `execute` (one task), `external` (external work's rendezvous),
//! `transitions` (job, run and luminosity-block callbacks), `observe`
//! (stalls, trace, report), `trace` (the trace's per-thread buffers), and the executors `threaded`, `shared_queue`
//! and `sequential`.

mod execute;
mod external;
mod observe;
mod queued;
pub(crate) mod sequential;
pub(crate) mod shared_queue;
mod state;
pub(crate) mod threaded;
mod trace;
mod transitions;

pub(crate) use state::{Engine, Submit};
