//! The sequential executor: the simplest loop over the same decisions, on
//! one thread. It is the reference that the threaded executor is measured
//! and checked against.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use super::{Engine, Submit};
use crate::schedule::Task;

struct ChannelSubmit(Mutex<mpsc::Sender<Task>>);

impl Submit for ChannelSubmit {
    fn submit(&self, task: Task) {
        // The receiver lives until the job ends; a send after that is moot.
        let _ = self.0.lock().unwrap_or_else(|p| p.into_inner()).send(task);
    }
}

/// Runs the job on the calling thread (inside a one-thread pool, so that
/// modules using intra-module parallelism stay on it too).
pub(crate) fn run(engine: Arc<Engine>) -> Result<(), String> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .thread_name(|_| "evflow-sequential".into())
        .build()
        .map_err(|e| format!("cannot start the sequential executor's thread: {e}"))?;
    pool.install(|| {
        let (sender, receiver) = mpsc::channel();
        let submit: Arc<dyn Submit> = Arc::new(ChannelSubmit(Mutex::new(sender)));
        let mut stack = Vec::new();
        engine.coordinator.begin(&mut stack);
        stack.reverse();
        loop {
            let task = match stack.pop() {
                Some(task) => task,
                None => match receiver.try_recv() {
                    Ok(task) => task,
                    Err(_) => {
                        // Only external work can still be under way: let
                        // what is gathered for it start, then wait for it.
                        engine.idle(&mut stack);
                        if !stack.is_empty() {
                            stack.reverse();
                            continue;
                        }
                        receiver
                            .recv()
                            .map_err(|_| "external work never completed".to_string())?
                    }
                },
            };
            let before = stack.len();
            if engine.execute(task, &mut stack, &submit, 0) {
                return Ok(());
            }
            // Run follow-ups in the order they were decided.
            stack[before..].reverse();
        }
    })
}
