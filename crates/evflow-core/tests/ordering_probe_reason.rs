//! The reason of the first decision of a path observed in batches (the
//! Python face), taken on a probe of the first batch before any batch
//! entered the path: it says so, rather than "post-stratified on 0
//! events" as if stop counts had been used.

use evflow_core::ordering::{OrderingOptions, OrderingPlanner, Policy};
use evflow_core::schedule::Planner;
use evflow_core::*;

mod driven;

use driven::Idle;

#[test]
fn a_decision_on_the_first_probe_says_no_events_were_counted_yet() {
    let mut proc = Process::new("probed");
    proc.set_source(EmptySource::new(1));
    for label in ["f0", "f1"] {
        proc.add(ModuleDesc::filter(label, Idle));
    }
    proc.add_path(PathDesc::new("sel", ["f0", "f1"]).reorderable(true));
    let planner = OrderingPlanner::new(
        &proc.compile().unwrap(),
        &OrderingOptions::new(Policy::Adaptive),
    );
    assert!(planner.wants_first_probe(0));
    // f0 lets every event through, f1 one in ten; both cost 10 µs per
    // event: f1 first saves 45%.
    let rows: Vec<(u64, u64)> = (0..256u64)
        .map(|k| (0b11, 0b01 | u64::from(k % 10 == 0) << 1))
        .collect();
    let timings = vec![vec![(10e-6 * 256.0, 256u64); 4]; 2];
    planner.decide_from_probe(0, &rows, &timings, &[]);
    assert_eq!(planner.current_order(0), ["f1", "f0"]);
    let history = planner.history();
    let change = history
        .iter()
        .find(|c| !c.reason.starts_with("in use at the end"))
        .expect("a change of order");
    assert_eq!(change.at_event, 0);
    assert!(
        change
            .reason
            .contains("256 samples from a probe of events run through every step before any event was counted on the path (no stop counts yet to post-stratify on)"),
        "{}",
        change.reason
    );
    assert!(!change.reason.contains("on 0 events"), "{}", change.reason);
}
