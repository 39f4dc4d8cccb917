//! A parallel-for inside one module call, as the toy framework's `_imt`
//! workloads run their output filter: the call's time is split into ranges
//! that the calling thread and the threads of a helper pool take one by one,
//! so that idle cores help a long serial module (TBB's `parallel_for`, where
//! idle threads steal ranges). The call returns when every range is done.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock, PoisonError};

pub use evflow_core::parallel_for::{RANGE_GRAIN_S, effective_ranges};

/// Helper threads for ranges that use the CPU: one per core of the machine
/// (the calling thread works too, so a busy range never waits for a core a
/// helper holds idle). `None` when no thread can be started: the ranges
/// then run on the calling thread.
fn busy_helpers() -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| pool(std::thread::available_parallelism().map_or(1, |n| n.get())))
        .as_ref()
}

/// Helper threads for sleeping ranges, which use no core: one per core of
/// the machine that sleeping work emulates ([`set_emulated_cores`]; the
/// engine's threads) besides the calling thread's, so that at most as many
/// ranges as that machine has cores sleep at once, as they would run there
/// (one helper per core, with the calling thread besides, ran `cores + 1`:
/// on one thread a serial module in 10 ranges went twice as fast as one
/// core can). None on a machine of one core.
fn sleeping_helpers() -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        EMULATED_CORES_FIXED.store(true, Ordering::Relaxed);
        match EMULATED_CORES.load(Ordering::Relaxed) {
            0 | 1 => None,
            cores => pool(cores - 1),
        }
    })
    .as_ref()
}

/// Cores of the machine sleeping work emulates, unless told
/// ([`set_emulated_cores`]).
pub const SLEEPING_HELPERS: usize = 16;

static EMULATED_CORES: AtomicUsize = AtomicUsize::new(SLEEPING_HELPERS);
static EMULATED_CORES_FIXED: AtomicBool = AtomicBool::new(false);

/// Cores of the emulated machine that sleeping work holds now: one per
/// thread in a sleeping call, one per helper sleeping a range. A helper
/// takes a range only on an idle one, waiting for one if need be, as an
/// idle thread steals a range in TBB: the engine's other threads sleeping
/// in their own modules hold theirs, as busy ones would hold real cores
/// (helpers beside them ran a call of 4 ranges in 2.2 instead of 4 ms on
/// 2 threads that were never idle: 17 % faster than the machine it
/// emulates and than `evflow simulate` predicts).
static HELD_CORES: AtomicUsize = AtomicUsize::new(0);

/// Helpers waiting for an idle core wait here (`WAITING` of them); a core
/// freed, or a call whose ranges are all taken, wakes them.
static CORES: Mutex<()> = Mutex::new(());
static CORE_FREED: Condvar = Condvar::new();
static WAITING: AtomicUsize = AtomicUsize::new(0);

fn wake_helpers() {
    // Taking the lock orders the change before a waiter's check of it.
    drop(CORES.lock().unwrap_or_else(PoisonError::into_inner));
    CORE_FREED.notify_all();
}

/// A core of the emulated machine held by sleeping work, until dropped.
#[derive(Debug)]
pub struct EmulatedCore(());

impl Drop for EmulatedCore {
    fn drop(&mut self) {
        HELD_CORES.fetch_sub(1, Ordering::SeqCst);
        // Every sleeping call ends here: the lock only when a helper waits
        // (a waiter counts itself before it looks at the cores held, so it
        // sees this core freed or is counted here).
        if WAITING.load(Ordering::SeqCst) > 0 {
            wake_helpers();
        }
    }
}

/// Holds a core of the emulated machine for the calling thread's sleeping
/// work, idle or not: the thread sleeps anyway ([`for_each_sleeping_range`]
/// holds one for its caller).
pub fn hold_emulated_core() -> EmulatedCore {
    HELD_CORES.fetch_add(1, Ordering::SeqCst);
    EmulatedCore(())
}

/// An idle core of the emulated machine for a helper, once there is one;
/// none once `done` (the call's ranges are all taken).
fn idle_emulated_core(done: impl Fn() -> bool) -> Option<EmulatedCore> {
    let cores = EMULATED_CORES.load(Ordering::Relaxed);
    let mut waiting = CORES.lock().unwrap_or_else(PoisonError::into_inner);
    WAITING.fetch_add(1, Ordering::SeqCst);
    let core = loop {
        if done() {
            break None;
        }
        let taken = HELD_CORES.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |held| {
            (held < cores).then_some(held + 1)
        });
        if taken.is_ok() {
            break Some(EmulatedCore(()));
        }
        waiting = CORE_FREED
            .wait(waiting)
            .unwrap_or_else(PoisonError::into_inner);
    };
    WAITING.fetch_sub(1, Ordering::SeqCst);
    core
}

/// Sets the cores of the machine that sleeping work emulates (a job's
/// engine threads): sleeping ranges get as many helper threads. Takes
/// effect before the first sleeping range of the process runs; returns
/// whether it did.
pub fn set_emulated_cores(cores: usize) -> bool {
    if EMULATED_CORES_FIXED.load(Ordering::Relaxed) {
        return false;
    }
    EMULATED_CORES.store(cores.max(1), Ordering::Relaxed);
    true
}

fn pool(threads: usize) -> Option<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads.max(1))
        .thread_name(|i| format!("evflow-ranges-{i}"))
        .build()
        .ok()
}

/// Calls `range(i)` for every `i` in `0..ranges`, each once, on the calling
/// thread and on helper threads at once; returns when all are done.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use evflow_workloads::for_each_range;
///
/// let sum = AtomicU64::new(0);
/// for_each_range(100, |i| {
///     sum.fetch_add(u64::from(i), Ordering::Relaxed);
/// });
/// assert_eq!(sum.into_inner(), 4950);
/// ```
pub fn for_each_range(ranges: u32, range: impl Fn(u32) + Sync) {
    run_ranges(ranges, busy_helpers(), false, range);
}

/// [`for_each_range`] for ranges that sleep: their helpers are one thread
/// per core of the emulated machine ([`set_emulated_cores`]), not of this
/// one, and each range a helper takes needs an idle core of it: the
/// calling thread holds one for the call, every other thread in a
/// sleeping call one ([`hold_emulated_core`]).
pub fn for_each_sleeping_range(ranges: u32, range: impl Fn(u32) + Sync) {
    let _caller = hold_emulated_core();
    run_ranges(ranges, sleeping_helpers(), true, range);
}

fn run_ranges(
    ranges: u32,
    helpers: Option<&rayon::ThreadPool>,
    sleeping: bool,
    range: impl Fn(u32) + Sync,
) {
    if ranges <= 1 {
        if ranges == 1 {
            range(0);
        }
        return;
    }
    let next = AtomicU32::new(0);
    let take = || {
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= ranges {
                break;
            }
            range(i);
        }
    };
    let Some(pool) = helpers else {
        take();
        return;
    };
    // A helper of sleeping ranges takes each range on an idle core of the
    // emulated machine, waiting for one while ranges are left.
    let help = || {
        if !sleeping {
            take();
            return;
        }
        let done = || next.load(Ordering::Relaxed) >= ranges;
        while let Some(_core) = idle_emulated_core(done) {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= ranges {
                break;
            }
            range(i);
        }
    };
    let wanted = (ranges - 1).min(u32::try_from(pool.current_num_threads()).unwrap_or(u32::MAX));
    pool.in_place_scope(|s| {
        for _ in 0..wanted {
            s.spawn(|_| help());
        }
        take();
        // Every range is taken: helpers still waiting for a core stop.
        if sleeping {
            wake_helpers();
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Condvar, Mutex};
    use std::time::Duration;

    #[test]
    fn every_range_runs_once() {
        for ranges in [0, 1, 2, 7, 64, 1000] {
            let counts: Vec<AtomicU32> = (0..ranges).map(|_| AtomicU32::new(0)).collect();
            for_each_range(ranges, |i| {
                counts[i as usize].fetch_add(1, Ordering::Relaxed);
            });
            assert!(
                counts.iter().all(|c| c.load(Ordering::Relaxed) == 1),
                "{ranges}"
            );
        }
    }

    #[test]
    fn a_helper_runs_ranges_while_the_caller_runs_another() {
        // The first range waits until a second range has started: only a
        // helper thread can start it (the caller is inside the first). A
        // run without helpers never gets there (the wait times out).
        let started = Mutex::new(0u32);
        let changed = Condvar::new();
        let met = Mutex::new(false);
        for_each_range(4, |_| {
            let mut n = started.lock().unwrap();
            *n += 1;
            changed.notify_all();
            let (n, _) = changed
                .wait_timeout_while(n, Duration::from_secs(30), |n| *n < 2)
                .unwrap();
            if *n >= 2 {
                *met.lock().unwrap() = true;
            }
        });
        let met = *met.lock().unwrap();
        assert!(met, "no two ranges ever ran at once");
    }
}
