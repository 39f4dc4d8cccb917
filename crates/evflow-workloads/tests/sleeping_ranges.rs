//! Sleeping parallel-for ranges emulate a machine of `cores` cores: no more
//! than `cores` ranges of one call run at once (the calling thread counts).
//! Its own process: the emulated cores are fixed by the first sleeping range.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

#[test]
fn no_more_ranges_sleep_at_once_than_the_emulated_machine_has_cores() {
    assert!(evflow_workloads::set_emulated_cores(3));
    let (running, most, done) = (
        AtomicUsize::new(0),
        AtomicUsize::new(0),
        AtomicUsize::new(0),
    );
    evflow_workloads::for_each_sleeping_range(12, |_| {
        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
        most.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(5));
        running.fetch_sub(1, Ordering::SeqCst);
        done.fetch_add(1, Ordering::SeqCst);
    });
    assert_eq!(done.into_inner(), 12);
    // Four before: a helper per core, and the calling thread besides.
    let most = most.into_inner();
    assert!(
        (1..=3).contains(&most),
        "{most} ranges at once on 3 emulated cores"
    );
}
