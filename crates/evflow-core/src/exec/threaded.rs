//! The threaded executor: one task loop per pool thread, each with its own
//! work-stealing deque (crossbeam-deque). A finished task keeps its first
//! follow-up on the same thread (cache-warm, no queue round trip) and pushes
//! the others onto the thread's deque, from which idle threads steal. No
//! thread ever waits for another task: an idle thread spins briefly, then
//! sleeps until a task is pushed.
//!
//! Why not rayon's `spawn` or `scope`: measured on 16 cores at
//! `--time-scale 0` (docs/performance.md, many cores), every spawned rayon
//! job increments and decrements one counter shared by the whole pool (the
//! scope's latch, or the registry's termination count) — a third of all
//! CPU time at 16 threads. Here nothing shared is written per task: the
//! deques are per thread, the sleep counter is only read when a task is
//! pushed, and the end of the job is known from the coordinator
//! (`Task::Finished`), not counted.
//!
//! The loops run *on* the rayon pool's threads (one broadcast job each), so
//! modules that split their own work with [`crate::parallel`] still run
//! their pieces on the engine's pool: an idle loop executes pending rayon
//! jobs before it sleeps.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering, fence};
use std::sync::{Arc, Condvar, Mutex};

use crossbeam_deque::{Injector, Steal, Stealer, Worker};
use crossbeam_utils::CachePadded;

use super::{Engine, Submit};
use crate::schedule::Task;

/// What every task loop of the job shares.
struct Pool {
    engine: Arc<Engine>,
    /// Tasks handed in from outside the loops: the first tasks of the job
    /// and completed external work.
    injector: Injector<Task>,
    stealers: Vec<Stealer<Task>>,
    /// Each loop's own deque, taken by the loop when it starts.
    workers: Vec<Mutex<Option<Worker<Task>>>>,
    sleep: Sleep,
    finished: CachePadded<AtomicBool>,
}

/// Idle loops sleep here. A pusher reads `sleepers` after a full fence and
/// takes the lock only when some loop sleeps; a loop about to sleep counts
/// itself in under the lock, fences, and looks for work once more (the two
/// fences make sure one of them sees the other: no lost wake-up).
#[derive(Default)]
struct Sleep {
    sleepers: CachePadded<AtomicUsize>,
    /// Counts the loops that stopped sleeping.
    lock: Mutex<u64>,
    signal: Condvar,
}

impl Sleep {
    /// Wakes up to `tasks` sleeping loops (none when none sleeps: then this
    /// is a fence and one read of a line that is rarely written).
    fn wake(&self, tasks: usize) {
        fence(Ordering::SeqCst);
        let sleepers = self.sleepers.load(Ordering::Relaxed);
        if sleepers == 0 {
            return;
        }
        // Taking the lock orders this wake-up after a sleeper's last look
        // for work: it is then waiting, and is woken.
        drop(lock(&self.lock));
        for _ in 0..tasks.min(sleepers) {
            self.signal.notify_one();
        }
    }

    /// Wakes every loop (`ready` must hold for good from now on).
    fn wake_all(&self) {
        drop(lock(&self.lock));
        self.signal.notify_all();
    }

    /// Sleeps until `ready` holds (checked when counted in as sleeping and
    /// at every wake-up). `ready` must become true before the matching
    /// `wake`.
    fn sleep_unless(&self, ready: impl Fn() -> bool) {
        self.sleep_unless_or_last(ready, usize::MAX, || {});
    }

    /// Like [`Self::sleep_unless`]; the loop that would make `loops` loops
    /// asleep (the whole pool idle) first runs `last` without the lock (it
    /// may push work and wake loops), then sleeps unless `ready` holds.
    /// Counting in under the lock makes one loop, the last one, see it; if
    /// another loop woke and went back to sleep while `last` ran (it was
    /// not the last then: this one was not counted), the pool went through
    /// another idle spell, and `last` runs again.
    fn sleep_unless_or_last(&self, ready: impl Fn() -> bool, loops: usize, mut last: impl FnMut()) {
        let mut guard = lock(&self.lock);
        let mut asleep = self.sleepers.fetch_add(1, Ordering::SeqCst) + 1;
        fence(Ordering::SeqCst);
        let mut seen = None;
        while asleep >= loops && seen != Some(*guard) && !ready() {
            seen = Some(*guard);
            self.sleepers.fetch_sub(1, Ordering::SeqCst);
            drop(guard);
            last();
            guard = lock(&self.lock);
            asleep = self.sleepers.fetch_add(1, Ordering::SeqCst) + 1;
            fence(Ordering::SeqCst);
        }
        while !ready() {
            guard = self.signal.wait(guard).unwrap_or_else(|p| p.into_inner());
        }
        // Counted out under the lock, so that a loop running `last` sees
        // every wake-up that happened meanwhile.
        *guard += 1;
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Completed external work comes back through the injector.
struct PoolSubmit(Arc<Pool>);

impl Submit for PoolSubmit {
    fn submit(&self, task: Task) {
        if self.0.finished.load(Ordering::Acquire) {
            return;
        }
        self.0.injector.push(task);
        self.0.sleep.wake(1);
    }
}

impl Pool {
    fn finish(&self) {
        self.finished.store(true, Ordering::SeqCst);
        self.sleep.wake_all();
    }

    fn ready(&self) -> bool {
        self.finished.load(Ordering::SeqCst) || self.has_work()
    }

    fn has_work(&self) -> bool {
        !self.injector.is_empty() || self.stealers.iter().any(|s| !s.is_empty())
    }

    /// A task from the injector or another loop's deque (the oldest there:
    /// the work that has waited longest).
    fn steal(&self, me: usize) -> Option<Task> {
        loop {
            let mut retry = false;
            // One task, the oldest handed in: a batch moved into this
            // loop's deque would wait there, behind newer work, while this
            // thread is off its core (new events queue in the injector).
            match self.injector.steal() {
                Steal::Success(task) => return Some(task),
                Steal::Retry => retry = true,
                Steal::Empty => {}
            }
            let n = self.stealers.len();
            for k in 1..n {
                match self.stealers[(me + k) % n].steal() {
                    Steal::Success(task) => return Some(task),
                    Steal::Retry => retry = true,
                    Steal::Empty => {}
                }
            }
            if !retry {
                return None;
            }
        }
    }

    /// Waits until there may be work (or the job is finished): spins a
    /// little, running pending rayon jobs of modules' nested loops, then
    /// sleeps.
    fn idle(&self) {
        // Short: a loop that found nothing soon sleeps, so that an idle
        // pool leaves the cores to other processes (measured on 16 cores:
        // 256 rounds instead of 32 gained nothing).
        const SPINS: u32 = 32;
        for round in 0..SPINS {
            if self.ready() {
                return;
            }
            if let Some(rayon::Yield::Executed) = rayon::yield_now() {
                return;
            }
            if round < SPINS / 2 {
                for _ in 0..(1 << (round / 2)) {
                    std::hint::spin_loop();
                }
            } else {
                std::thread::yield_now();
            }
        }
        if !self.engine.has_external_work() {
            self.sleep.sleep_unless(|| self.ready());
            return;
        }
        // The whole pool idle: what is gathered for external work (a device
        // module's combined launch) need not wait for its time-out.
        let last = || {
            let mut out = Vec::new();
            self.engine.idle(&mut out);
            let tasks = out.len();
            for task in out {
                self.injector.push(task);
            }
            self.sleep.wake(tasks);
        };
        self.sleep
            .sleep_unless_or_last(|| self.ready(), self.stealers.len(), last);
    }

    /// One pool thread's task loop, until the job is finished and no task
    /// is left anywhere.
    fn work(&self, me: usize, submit: &Arc<dyn Submit>) {
        let local = lock(&self.workers[me])
            .take()
            .expect("each pool thread runs one task loop");
        // If a task loop itself panicked (not a module: those are caught),
        // the other loops must not sleep forever.
        let _guard = FinishOnUnwind(self);
        let mut out = Vec::new();
        loop {
            let Some(mut task) = local.pop().or_else(|| self.steal(me)) else {
                if self.finished.load(Ordering::Acquire) {
                    return;
                }
                self.idle();
                continue;
            };
            loop {
                let starts_event = matches!(task, Task::Read { .. });
                if self.engine.execute(task, &mut out, submit, me) {
                    self.finish();
                    break;
                }
                if starts_event
                    && !out.is_empty()
                    && !(local.is_empty() && self.injector.is_empty())
                {
                    // A new event's first modules queue behind the work of
                    // the events already in flight: a loop that kept them
                    // would go on reading and running new events while
                    // older ones waited in its deque until the end of the
                    // job (their latency, their luminosity block's end).
                    // With no older work waiting here or in the injector
                    // the loop goes on with the new event (cache-warm). A
                    // read among them (the source's next) stays: reads come
                    // first, the source being every job's serial stage.
                    let mut diverted = 0;
                    let mut reads = Vec::new();
                    for t in out.drain(..) {
                        if matches!(t, Task::Read { .. }) {
                            reads.push(t);
                        } else {
                            self.injector.push(t);
                            diverted += 1;
                        }
                    }
                    self.sleep.wake(diverted);
                    out.append(&mut reads);
                    if out.is_empty() {
                        break;
                    }
                }
                // Keep the first follow-up here (depth first: an event's next
                // module runs while its products are warm; a run granted a
                // serial resource, or else a read, is decided first and runs
                // at once); this loop takes the newest of the rest next (a
                // read decided last after a grant), idle threads the oldest.
                let mut follow_ups = out.drain(..);
                let Some(first) = follow_ups.next() else {
                    break;
                };
                let mut pushed = 0;
                for other in follow_ups {
                    local.push(other);
                    pushed += 1;
                }
                if pushed > 0 {
                    self.sleep.wake(pushed);
                }
                task = first;
            }
        }
    }
}

struct FinishOnUnwind<'a>(&'a Pool);

impl Drop for FinishOnUnwind<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.finish();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs the job on `threads` pool threads and returns when it is finished.
pub(crate) fn run(engine: Arc<Engine>, threads: usize) -> Result<(), String> {
    let threads = threads.max(1);
    let rayon_pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("evflow-worker-{i}"))
        .build()
        .map_err(|e| format!("cannot start {threads} threads: {e}"))?;
    let deques: Vec<Worker<Task>> = (0..threads).map(|_| Worker::new_lifo()).collect();
    let pool = Arc::new(Pool {
        engine,
        injector: Injector::new(),
        stealers: deques.iter().map(Worker::stealer).collect(),
        workers: deques.into_iter().map(|w| Mutex::new(Some(w))).collect(),
        sleep: Sleep::default(),
        finished: CachePadded::new(AtomicBool::new(false)),
    });
    let submit: Arc<dyn Submit> = Arc::new(PoolSubmit(pool.clone()));
    let mut first = Vec::new();
    pool.engine.coordinator.begin(&mut first);
    for task in first {
        pool.injector.push(task);
    }
    rayon_pool.broadcast(|context| pool.work(context.index(), &submit));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sleep protocol's two sides, raced from many threads: every
    /// pushed item is taken, and no thread sleeps through a push (a lost
    /// wake-up would hang this test).
    #[test]
    fn no_wake_up_is_lost() {
        let sleep = Sleep::default();
        let queue = Injector::<u32>::new();
        let taken = AtomicUsize::new(0);
        let done = AtomicBool::new(false);
        const ITEMS: usize = 20_000;
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    loop {
                        match queue.steal() {
                            Steal::Success(_) => {
                                taken.fetch_add(1, Ordering::SeqCst);
                                continue;
                            }
                            Steal::Retry => continue,
                            Steal::Empty => {}
                        }
                        if done.load(Ordering::SeqCst) && queue.is_empty() {
                            return;
                        }
                        sleep.sleep_unless(|| done.load(Ordering::SeqCst) || !queue.is_empty());
                    }
                });
            }
            for i in 0..ITEMS {
                queue.push(i as u32);
                sleep.wake(1);
                if i % 64 == 0 {
                    // Let the takers drain the queue and fall asleep.
                    while !queue.is_empty() {
                        std::thread::yield_now();
                    }
                }
            }
            while taken.load(Ordering::SeqCst) < ITEMS {
                std::thread::yield_now();
            }
            done.store(true, Ordering::SeqCst);
            sleep.wake_all();
        });
        assert_eq!(taken.load(Ordering::SeqCst), ITEMS);
    }

    /// Loops that run out of work in rounds: in each round exactly one of
    /// them, the last, runs the hook, and work the hook hands in wakes
    /// every loop (as an idle pool's external work does).
    #[test]
    fn the_last_loop_to_sleep_runs_the_hook_once_per_idle_spell() {
        const LOOPS: usize = 4;
        const ROUNDS: u32 = 200;
        let sleep = Sleep::default();
        let queue = Injector::<u32>::new();
        let hooks = AtomicUsize::new(0);
        let done = AtomicBool::new(false);
        // Each round's hook hands in one task per loop; the last round's
        // ends the test.
        let round = AtomicUsize::new(0);
        let (finished, watch) = std::sync::mpsc::channel::<()>();
        let mut hung = false;
        std::thread::scope(|s| {
            // A lost hook would leave every loop asleep: stop them, fail.
            let (sleep, done, hung) = (&sleep, &done, &mut hung);
            s.spawn(move || {
                if watch
                    .recv_timeout(std::time::Duration::from_secs(30))
                    .is_err()
                {
                    *hung = true;
                    done.store(true, Ordering::SeqCst);
                    sleep.wake_all();
                }
            });
            let mut loops = Vec::new();
            for _ in 0..LOOPS {
                loops.push(s.spawn(|| {
                    loop {
                        if let Steal::Success(_) = queue.steal() {
                            continue;
                        }
                        if done.load(Ordering::SeqCst) {
                            return;
                        }
                        let ready = || done.load(Ordering::SeqCst) || !queue.is_empty();
                        sleep.sleep_unless_or_last(ready, LOOPS, || {
                            hooks.fetch_add(1, Ordering::SeqCst);
                            if round.fetch_add(1, Ordering::SeqCst) + 1 == ROUNDS as usize {
                                done.store(true, Ordering::SeqCst);
                                sleep.wake_all();
                            } else {
                                for i in 0..LOOPS as u32 {
                                    queue.push(i);
                                }
                                sleep.wake(LOOPS);
                            }
                        });
                    }
                }));
            }
            for l in loops {
                l.join().unwrap();
            }
            finished.send(()).unwrap();
        });
        assert!(!hung, "every loop slept, no hook ran");
        // A round ends only when every loop is out of work again, and only
        // the last one's hook runs: one per round.
        assert_eq!(hooks.load(Ordering::SeqCst), ROUNDS as usize);
    }

    /// Rounds of one task per sleeping loop: each round's wake-ups must
    /// reach every sleeper, however the earlier rounds' wake-ups were taken
    /// (a wake-up counted but not taken must not silence later ones).
    #[test]
    fn every_sleeper_is_woken_round_after_round() {
        const LOOPS: usize = 4;
        const ROUNDS: usize = 300;
        let sleep = Sleep::default();
        let queue = Injector::<u32>::new();
        let done = AtomicBool::new(false);
        let (took, receipts) = std::sync::mpsc::channel();
        // On failure too: the loops stop instead of sleeping for ever.
        struct Stop<'a>(&'a Sleep, &'a AtomicBool);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.1.store(true, Ordering::SeqCst);
                self.0.wake_all();
            }
        }
        std::thread::scope(|s| {
            let _stop = Stop(&sleep, &done);
            let mut go = Vec::new();
            for _ in 0..LOOPS {
                let took = took.clone();
                let (next_round, wait_round) = std::sync::mpsc::channel::<()>();
                go.push(next_round);
                let (sleep, queue, done) = (&sleep, &queue, &done);
                s.spawn(move || {
                    loop {
                        sleep.sleep_unless(|| done.load(Ordering::SeqCst) || !queue.is_empty());
                        if let Steal::Success(_) = queue.steal() {
                            took.send(()).unwrap();
                            // One task per loop and round.
                            if wait_round.recv().is_err() {
                                return;
                            }
                        } else if done.load(Ordering::SeqCst) {
                            return;
                        }
                    }
                });
            }
            for round in 0..ROUNDS {
                for i in 0..LOOPS {
                    queue.push(i as u32);
                }
                sleep.wake(LOOPS);
                for _ in 0..LOOPS {
                    receipts
                        .recv_timeout(std::time::Duration::from_secs(20))
                        .unwrap_or_else(|_| {
                            panic!("round {round}: a sleeping loop was never woken")
                        });
                }
                if round + 1 == ROUNDS {
                    done.store(true, Ordering::SeqCst);
                }
                for g in &go {
                    g.send(()).unwrap();
                }
            }
        });
    }
}
