//! The threaded executor: tasks run on a work-stealing pool (rayon). A
//! finished task keeps one follow-up task on the same thread (cache-warm,
//! no queue round trip) and spawns the others, which idle threads steal.
//! No pool thread ever waits for another task: only the caller's thread
//! waits, for the end of the job and for work completed outside the pool.
//!
//! The tasks are spawned into a rayon *scope* that lives as long as the job:
//! a spawned task borrows the job's state instead of holding a reference
//! count. Measured on 16 cores (docs/performance.md, many cores), the
//! reference counts of the pool and of rayon's registry, cloned and dropped
//! by every thread for every task, were the most contended cache lines of
//! the engine at `--time-scale 0`.

use std::sync::{Arc, Condvar, Mutex};

use super::{Engine, Submit};
use crate::schedule::Task;

/// Tasks handed back from outside the pool (completed external work), and
/// whether the job is finished. The caller's thread spawns them.
#[derive(Default)]
struct Inbox {
    state: Mutex<InboxState>,
    signal: Condvar,
}

#[derive(Default)]
struct InboxState {
    tasks: Vec<Task>,
    finished: bool,
}

impl Inbox {
    fn lock(&self) -> std::sync::MutexGuard<'_, InboxState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn finish(&self) {
        self.lock().finished = true;
        self.signal.notify_all();
    }
}

impl Submit for Inbox {
    fn submit(&self, task: Task) {
        let mut state = self.lock();
        if state.finished {
            return;
        }
        state.tasks.push(task);
        drop(state);
        self.signal.notify_all();
    }
}

/// What every task of the job borrows.
struct Job {
    engine: Arc<Engine>,
    inbox: Arc<Inbox>,
    /// The inbox as the engine's submitter, made once (cloned only for the
    /// first step of an external-work module).
    submit: Arc<dyn Submit>,
}

fn run_loop<'s>(job: &'s Job, scope: &rayon::Scope<'s>, first: Task) {
    let thread = rayon::current_thread_index().unwrap_or(0);
    // The follow-up buffer is the thread's own, reused from task to task
    // (taken, not borrowed: a module using rayon may run another loop here).
    let mut out = FOLLOW_UPS.with(|v| std::mem::take(&mut *v.borrow_mut()));
    let mut next = Some(first);
    while let Some(task) = next.take() {
        if job.engine.execute(task, &mut out, &job.submit, thread) {
            job.inbox.finish();
            break;
        }
        // Keep the first follow-up here (depth first: an event's next module
        // runs while its products are warm); let idle threads steal the rest.
        let mut follow_ups = out.drain(..);
        next = follow_ups.next();
        for task in follow_ups {
            scope.spawn(move |scope| run_loop(job, scope, task));
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
    let inbox = Arc::new(Inbox::default());
    let job = Job {
        engine,
        submit: inbox.clone(),
        inbox,
    };
    let mut first = Vec::new();
    job.engine.coordinator.begin(&mut first);
    pool.in_place_scope(|scope| {
        let job = &job;
        for task in first {
            scope.spawn(move |scope| run_loop(job, scope, task));
        }
        // The caller's thread: spawn what comes back from outside the pool
        // until the job is finished; the scope then waits for the tasks
        // still returning.
        let mut state = job.inbox.lock();
        loop {
            for task in state.tasks.drain(..) {
                scope.spawn(move |scope| run_loop(job, scope, task));
            }
            if state.finished {
                break;
            }
            state = job
                .inbox
                .signal
                .wait(state)
                .unwrap_or_else(|p| p.into_inner());
        }
    });
    Ok(())
}
