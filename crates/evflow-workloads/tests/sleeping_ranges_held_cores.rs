//! Helpers of sleeping ranges take only idle cores of the emulated machine:
//! a core that another thread's sleeping call holds is not idle, as a
//! busy module's core is not on a real machine. Its own process, one test:
//! the emulated cores are fixed by the first sleeping range, and the cores
//! held are the process's.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use evflow_workloads::EmulatedCore;

/// Runs `ranges` sleeping ranges whose first frees `held` (a core another
/// call held) and waits (up to `wait`) for a second range to start;
/// returns the most ranges that ran at once.
fn most_at_once(ranges: u32, wait: Duration, held: Option<EmulatedCore>) -> usize {
    let (running, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let started = Mutex::new(0u32);
    let changed = Condvar::new();
    let held = Mutex::new(held);
    evflow_workloads::for_each_sleeping_range(ranges, |_| {
        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
        most.fetch_max(now, Ordering::SeqCst);
        drop(held.lock().unwrap().take());
        let mut n = started.lock().unwrap();
        *n += 1;
        changed.notify_all();
        if *n == 1 {
            drop(changed.wait_timeout_while(n, wait, |n| *n < 2).unwrap());
        }
        running.fetch_sub(1, Ordering::SeqCst);
    });
    most.into_inner()
}

#[test]
fn helpers_take_only_the_cores_no_other_sleeping_call_holds() {
    assert!(evflow_workloads::set_emulated_cores(2));
    // Another engine thread sleeps in its module: with the caller's, both
    // cores are held, and no helper may start a range beside the caller's
    // (one did: 2 at once, 3 sleeping on a machine of 2 cores).
    let other = evflow_workloads::hold_emulated_core();
    assert_eq!(most_at_once(4, Duration::from_millis(500), None), 1);
    // Once it is done, its core is idle and a helper takes ranges there.
    drop(other);
    assert_eq!(most_at_once(4, Duration::from_secs(30), None), 2);
    // A core freed during the call is taken by a helper that found none at
    // the start, as an idle thread steals a range when it becomes idle.
    let other = evflow_workloads::hold_emulated_core();
    assert_eq!(most_at_once(4, Duration::from_secs(30), Some(other)), 2);
}
