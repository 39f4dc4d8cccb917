//! The threaded executor's backend for pools much larger than the machine:
//! hundreds of threads that mostly block inside modules (sleeping modules
//! emulating many cores, modules waiting on I/O in their own code).
//!
//! rayon's work-stealing deques reclaim memory with crossbeam's epochs,
//! whose global advance walks every registered thread: with 1000 threads
//! that walk dominated the run (measured: `bench/core.py`, benchmark 5).
//! Here the threads share one FIFO queue under a mutex, and a thread that
//! finishes a task still keeps its first follow-up, so the queue is touched
//! only for the surplus. Modules that use `evflow_core::parallel` in this
//! mode run their nested loops on rayon's global pool.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};

use super::{Engine, Submit};
use crate::schedule::Task;

struct Queue {
    engine: Arc<Engine>,
    threads: usize,
    state: Mutex<State>,
    work_available: Condvar,
    finished: Condvar,
}

struct State {
    tasks: VecDeque<Task>,
    /// Threads waiting for a task.
    idle: usize,
    done: bool,
}

struct QueueSubmit(Arc<Queue>);

impl Submit for QueueSubmit {
    fn submit(&self, task: Task) {
        push(&self.0, std::iter::once(task));
    }
}

fn lock(queue: &Queue) -> std::sync::MutexGuard<'_, State> {
    queue.state.lock().unwrap_or_else(|p| p.into_inner())
}

fn push(queue: &Queue, tasks: impl Iterator<Item = Task>) {
    let mut state = lock(queue);
    let before = state.tasks.len();
    state.tasks.extend(tasks);
    let added = state.tasks.len() - before;
    let wake = added.min(state.idle);
    drop(state);
    for _ in 0..wake {
        queue.work_available.notify_one();
    }
}

fn worker(queue: Arc<Queue>, thread: usize) {
    let submit: Arc<dyn Submit> = Arc::new(QueueSubmit(queue.clone()));
    let mut out = Vec::new();
    loop {
        let mut next = {
            let mut state = lock(&queue);
            let mut told_idle = false;
            loop {
                if state.done {
                    return;
                }
                if let Some(task) = state.tasks.pop_front() {
                    break Some(task);
                }
                // The last thread to run out of work: what is gathered for
                // external work need not wait for its time-out.
                if !told_idle && state.idle + 1 == queue.threads && queue.engine.has_external_work()
                {
                    told_idle = true;
                    drop(state);
                    let mut tasks = Vec::new();
                    queue.engine.idle(&mut tasks);
                    push(&queue, tasks.into_iter());
                    state = lock(&queue);
                    continue;
                }
                state.idle += 1;
                state = queue
                    .work_available
                    .wait(state)
                    .unwrap_or_else(|p| p.into_inner());
                state.idle -= 1;
            }
        };
        while let Some(task) = next.take() {
            let starts_event = matches!(task, Task::Read { .. });
            if queue.engine.execute(task, &mut out, &submit, thread) {
                lock(&queue).done = true;
                queue.work_available.notify_all();
                queue.finished.notify_all();
                return;
            }
            if starts_event {
                // A new event's modules queue behind those of older events
                // (see the threaded executor's task loop).
                push(&queue, out.drain(..));
                break;
            }
            let mut follow_ups = out.drain(..);
            next = follow_ups.next();
            if follow_ups.len() > 0 {
                push(&queue, follow_ups);
            }
        }
    }
}

/// Runs the job on `threads` threads sharing one queue.
pub(crate) fn run(engine: Arc<Engine>, threads: usize) -> Result<(), String> {
    let queue = Arc::new(Queue {
        engine,
        threads,
        state: Mutex::new(State {
            tasks: VecDeque::new(),
            idle: 0,
            done: false,
        }),
        work_available: Condvar::new(),
        finished: Condvar::new(),
    });
    let mut first = Vec::new();
    queue.engine.coordinator.begin(&mut first);
    push(&queue, first.into_iter());
    let mut handles = Vec::with_capacity(threads);
    for thread in 0..threads {
        let queue = queue.clone();
        let handle = std::thread::Builder::new()
            .name(format!("evflow-worker-{thread}"))
            // Modules run on these threads: keep rayon's default stack size.
            .stack_size(2 << 20)
            .spawn(move || worker(queue, thread))
            .map_err(|e| format!("cannot start thread {thread} of {threads}: {e}"))?;
        handles.push(handle);
    }
    {
        let mut state = lock(&queue);
        while !state.done {
            state = queue
                .finished
                .wait(state)
                .unwrap_or_else(|p| p.into_inner());
        }
    }
    for handle in handles {
        handle
            .join()
            .map_err(|_| "a worker thread panicked outside a module".to_string())?;
    }
    Ok(())
}
