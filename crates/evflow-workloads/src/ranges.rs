//! A parallel-for inside one module call, as the toy framework's `_imt`
//! workloads run their output filter: the call's time is split into ranges
//! that the calling thread and the threads of a helper pool take one by one,
//! so that idle cores help a long serial module (TBB's `parallel_for`, where
//! idle threads steal ranges). The call returns when every range is done.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

pub use evflow_core::parallel_for::{RANGE_GRAIN_S, effective_ranges};

/// The helper threads: one per core of the machine (the calling thread
/// works too, so a busy range never waits for a core a helper holds idle).
/// `None` when no thread can be started: the ranges then run on the
/// calling thread.
fn helpers() -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        rayon::ThreadPoolBuilder::new()
            .num_threads(cores)
            .thread_name(|i| format!("evflow-ranges-{i}"))
            .build()
            .ok()
    })
    .as_ref()
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
    let Some(pool) = helpers() else {
        take();
        return;
    };
    let wanted = (ranges - 1).min(u32::try_from(pool.current_num_threads()).unwrap_or(u32::MAX));
    pool.in_place_scope(|s| {
        for _ in 0..wanted {
            s.spawn(|_| take());
        }
        take();
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
