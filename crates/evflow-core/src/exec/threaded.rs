//! The threaded executor: tasks run on a work-stealing pool (rayon). A
//! finished task keeps one follow-up task on the same thread (cache-warm,
//! no queue round trip) and spawns the others, which idle threads steal.
//! No pool thread ever waits for another task: only the caller's thread
//! waits, for the end of the job.

use std::sync::{Arc, Condvar, Mutex, Weak};

use super::{Engine, Submit};
use crate::schedule::Task;

struct Pool {
    engine: Arc<Engine>,
    pool: rayon::ThreadPool,
    done: Mutex<bool>,
    done_signal: Condvar,
    /// The pool itself, for completions of external work (a weak link: no
    /// cycle keeps the pool alive after the job).
    me: Weak<Pool>,
}

impl Submit for Pool {
    fn submit(&self, task: Task) {
        if let Some(pool) = self.me.upgrade() {
            spawn(&pool, task);
        }
    }
}

fn spawn(pool: &Arc<Pool>, task: Task) {
    let this = pool.clone();
    pool.pool.spawn(move || run_loop(&this, task));
}

fn run_loop(pool: &Arc<Pool>, first: Task) {
    // No allocation per task: the pool is its own submitter.
    let submit: Arc<dyn Submit> = pool.clone();
    let thread = rayon::current_thread_index().unwrap_or(0);
    // The follow-up buffer is the thread's own, reused from task to task
    // (taken, not borrowed: a module using rayon may run another loop here).
    let mut out = FOLLOW_UPS.with(|v| std::mem::take(&mut *v.borrow_mut()));
    let mut next = Some(first);
    while let Some(task) = next.take() {
        if pool.engine.execute(task, &mut out, &submit, thread) {
            *pool.done.lock().unwrap_or_else(|p| p.into_inner()) = true;
            pool.done_signal.notify_all();
            break;
        }
        // Keep the first follow-up here (depth first: an event's next module
        // runs while its products are warm); let idle threads steal the rest.
        let mut follow_ups = out.drain(..);
        next = follow_ups.next();
        for task in follow_ups {
            spawn(pool, task);
        }
    }
    out.clear();
    FOLLOW_UPS.with(|v| *v.borrow_mut() = out);
}

thread_local! {
    static FOLLOW_UPS: std::cell::RefCell<Vec<Task>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs the job on `threads` pool threads and returns when it is finished.
pub(crate) fn run(engine: Arc<Engine>, threads: usize) -> Result<(), String> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads.max(1))
        .thread_name(|i| format!("evflow-worker-{i}"))
        .build()
        .map_err(|e| format!("cannot start {threads} threads: {e}"))?;
    let pool = Arc::new_cyclic(|me| Pool {
        engine,
        pool,
        done: Mutex::new(false),
        done_signal: Condvar::new(),
        me: me.clone(),
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
