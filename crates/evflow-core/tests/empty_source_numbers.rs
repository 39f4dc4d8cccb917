//! `EmptySource::check_numbers` refuses, before any event is read, a job
//! whose run or luminosity-block numbers would pass 32 bits, naming the
//! first event that would.

use evflow_core::{EmptySource, Source, SourceProducts};

/// The first event (numbered from 1) whose numbers the source refuses,
/// found by reading every event: the independent reference.
fn first_refused(source: &EmptySource) -> Option<u64> {
    let mut s = source.clone();
    let mut products = SourceProducts::default();
    let mut n = 0;
    loop {
        n += 1;
        match s.next_event(&mut products) {
            Ok(Some(_)) => {}
            Ok(None) => return None,
            Err(_) => return Some(n),
        }
    }
}

#[test]
fn the_first_event_beyond_the_largest_run_is_named() {
    // Runs of 2 blocks of 3 events from run u32::MAX - 1: runs MAX - 1 and
    // MAX hold 12 events, the 13th would be in run 2^32.
    for events in [12, 13, 20] {
        let source = EmptySource::new(events)
            .first_run(u32::MAX - 1)
            .lumis_per_run(2)
            .events_per_lumi(3);
        match (source.check_numbers(), first_refused(&source)) {
            (Ok(()), None) => assert_eq!(events, 12),
            (Err(e), Some(first)) => {
                assert_eq!(first, 13);
                assert!(e.contains("event 13 would be in run 4294967296"), "{e}");
            }
            (got, reference) => panic!("{events} events: {got:?} against {reference:?}"),
        }
    }
}

#[test]
fn a_block_number_beyond_32_bits_is_refused_too() {
    // One run of unbounded blocks, one event each: the block after
    // u32::MAX overflows. The check names it without reading the events.
    let source = EmptySource::new(u64::from(u32::MAX) + 5).events_per_lumi(1);
    let e = source.check_numbers().unwrap_err();
    assert!(
        e.contains(&format!(
            "event {} would be in run 1, luminosity block 4294967296",
            u64::from(u32::MAX) + 1
        )),
        "{e}"
    );
    assert!(
        EmptySource::new(u64::from(u32::MAX))
            .events_per_lumi(1)
            .check_numbers()
            .is_ok()
    );
}

#[test]
fn numbers_in_range_pass() {
    assert!(EmptySource::new(u64::MAX).check_numbers().is_ok());
    assert!(
        EmptySource::new(1000)
            .first_run(u32::MAX)
            .lumis_per_run(1000)
            .events_per_lumi(1)
            .check_numbers()
            .is_ok()
    );
}
