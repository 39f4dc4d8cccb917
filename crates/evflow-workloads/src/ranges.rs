//! A parallel-for inside one module call, as the toy framework's `_imt`
//! workloads run their output filter: the call's time is split into ranges
//! that the calling thread and the threads of a helper pool take one by one,
//! so that idle cores help a long serial module (TBB's `parallel_for`, where
//! idle threads steal ranges). The call returns when every range is done.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

/// Shortest range worth handing to another thread: waking a helper (and,
/// for sleeping work, a timer) costs tens of µs, so shorter ranges are
/// merged (as TBB's auto partitioner does).
pub const RANGE_GRAIN_S: f64 = 100e-6;

/// The helper threads: one per core of the machine (the calling thread
/// works too, so a busy range never waits for a core a helper holds idle).
fn helpers() -> &'static rayon::ThreadPool {
    static POOL: OnceLock<rayon::ThreadPool> = OnceLock::new();
    POOL.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        rayon::ThreadPoolBuilder::new()
            .num_threads(cores)
            .thread_name(|i| format!("evflow-ranges-{i}"))
            .build()
            // Without threads the ranges still run, on the calling thread.
            .unwrap_or_else(|_| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(1)
                    .build()
                    .expect("a one-thread pool")
            })
    })
}

/// How many ranges `seconds` of work in `ranges` ranges is run as: at most
/// `ranges`, none shorter than [`RANGE_GRAIN_S`], at least one.
pub fn effective_ranges(seconds: f64, ranges: u32) -> u32 {
    let by_grain = (seconds / RANGE_GRAIN_S).floor();
    let by_grain = if by_grain.is_finite() && by_grain >= 1.0 {
        by_grain.min(f64::from(u32::MAX)) as u32
    } else {
        1
    };
    ranges.clamp(1, by_grain.max(1))
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
    let pool = helpers();
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
    fn ranges_are_merged_down_to_the_grain() {
        assert_eq!(effective_ranges(0.1, 100), 100);
        assert_eq!(effective_ranges(0.001, 100), 10);
        assert_eq!(effective_ranges(0.0, 100), 1);
        assert_eq!(effective_ranges(1.0, 0), 1);
        assert_eq!(effective_ranges(f64::NAN, 8), 1);
    }

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
