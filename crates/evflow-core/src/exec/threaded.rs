//! The threaded executor: tasks run on a work-stealing pool (rayon). A
//! finished task keeps one follow-up task on the same thread (cache-warm,
//! no queue round trip) and spawns the others, which idle threads steal.
//! No pool thread ever waits for another task: only the caller's thread
//! waits, for the end of the job.

use std::sync::{Arc, Condvar, Mutex};

use super::{Engine, Submit};
use crate::schedule::Task;

struct Pool {
    engine: Arc<Engine>,
    pool: rayon::ThreadPool,
    done: Mutex<bool>,
    done_signal: Condvar,
}

struct PoolSubmit(Arc<Pool>);

impl Submit for PoolSubmit {
    fn submit(&self, task: Task) {
        spawn(&self.0, task);
    }
}

fn spawn(pool: &Arc<Pool>, task: Task) {
    let this = pool.clone();
    pool.pool.spawn(move || run_loop(&this, task));
}

fn run_loop(pool: &Arc<Pool>, first: Task) {
    let submit: Arc<dyn Submit> = Arc::new(PoolSubmit(pool.clone()));
    let thread = rayon::current_thread_index().unwrap_or(0);
    let mut out = Vec::new();
    let mut next = Some(first);
    while let Some(task) = next.take() {
        if pool.engine.execute(task, &mut out, &submit, thread) {
            *pool.done.lock().unwrap_or_else(|p| p.into_inner()) = true;
            pool.done_signal.notify_all();
            return;
        }
        // Keep the first follow-up here (depth first: an event's next module
        // runs while its products are warm); let idle threads steal the rest.
        let mut follow_ups = out.drain(..);
        next = follow_ups.next();
        for task in follow_ups {
            spawn(pool, task);
        }
    }
}

/// Runs the job on `threads` pool threads and returns when it is finished.
pub(crate) fn run(engine: Arc<Engine>, threads: usize) -> Result<(), String> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads.max(1))
        .thread_name(|i| format!("evflow-worker-{i}"))
        .build()
        .map_err(|e| format!("cannot start {threads} threads: {e}"))?;
    let pool = Arc::new(Pool {
        engine,
        pool,
        done: Mutex::new(false),
        done_signal: Condvar::new(),
    });
    let mut first = Vec::new();
    pool.engine.coordinator.begin(&mut first);
    for task in first {
        spawn(&pool, task);
    }
    let mut done = pool.done.lock().unwrap_or_else(|p| p.into_inner());
    while !*done {
        done = pool
            .done_signal
            .wait(done)
            .unwrap_or_else(|p| p.into_inner());
    }
    Ok(())
}
