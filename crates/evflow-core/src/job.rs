//! Running a job: [`run`] compiles the process, builds the engine's state,
//! runs the job's begin transition, hands the engine to the executor the
//! options choose, runs the end transition and returns the report.

use std::sync::Arc;

use crate::compile::ConfigError;
use crate::error::JobError;
use crate::exec;
use crate::options::{ExecutorKind, RunOptions};
use crate::process::Process;
use crate::report::Report;

/// The error of [`run`].
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("configuration error: {0}")]
    Config(#[from] ConfigError),
    /// The job started and failed; the report covers what ran.
    #[error("{error}")]
    Failed {
        error: JobError,
        report: Box<Report>,
    },
}

/// Runs a process to the end of its source.
pub fn run(mut process: Process, options: &RunOptions) -> Result<Report, RunError> {
    options.check()?;
    let graph = Arc::new(process.compile()?);
    let source = process.source.take().ok_or(ConfigError::NoSource)?;
    let instances = std::mem::take(&mut process.modules)
        .into_iter()
        .map(|m| m.instances)
        .collect();
    let threads = match options.executor {
        ExecutorKind::Threaded => options.threads.max(1),
        ExecutorKind::Sequential => 1,
    };
    let engine = Arc::new(exec::Engine::new(graph, instances, source, options));
    let failed = |engine: &exec::Engine, error: JobError| RunError::Failed {
        error,
        report: Box::new(engine.report(
            executor_name(options.executor),
            threads,
            options.events_in_flight,
        )),
    };
    if let Err(error) = engine.job_transition(true) {
        return Err(failed(&engine, error));
    }
    let executed = match options.executor {
        ExecutorKind::Threaded if threads > OVERSUBSCRIBED * cores() => {
            exec::shared_queue::run(engine.clone(), threads)
        }
        ExecutorKind::Threaded => exec::threaded::run(engine.clone(), threads),
        ExecutorKind::Sequential => exec::sequential::run(engine.clone()),
    };
    if let Err(message) = executed {
        return Err(failed(&engine, JobError::Executor(message)));
    }
    let end = engine.job_transition(false);
    if let Some(error) = engine.take_job_error() {
        return Err(failed(&engine, error));
    }
    if let Err(error) = end {
        return Err(failed(&engine, error));
    }
    Ok(engine.report(
        executor_name(options.executor),
        threads,
        options.events_in_flight.max(1),
    ))
}

/// Above this many threads per core, the threaded executor shares one queue
/// among its threads instead of work-stealing deques (see
/// `exec/shared_queue.rs`): such pools exist only when modules block.
pub const OVERSUBSCRIBED: usize = 8;

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn executor_name(kind: ExecutorKind) -> &'static str {
    match kind {
        ExecutorKind::Threaded => "threaded",
        ExecutorKind::Sequential => "sequential",
    }
}
