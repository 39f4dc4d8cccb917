//! The simulated report gives each module's admission queue time, as a
//! run's report does (it said 0 for every module).

use evflow_core::{Concurrency, EmptySource, Process};
use evflow_sim::{SimOptions, simulate};
use evflow_workloads::{self as synthetic, Timing, Work};

/// Four events at once reach a serial 10 ms analyzer at the same time: one
/// runs, the others wait 10, 20 and 30 ms; every round of four the same.
#[test]
fn a_serial_module_reports_the_time_events_queued_for_it() {
    let mut p = Process::new("queue");
    p.set_source(EmptySource::new(40));
    p.add(synthetic::producer(
        "reco",
        Timing::constant(0.001, Work::Sleep),
        &[],
        &[""],
    ));
    p.add(
        synthetic::analyzer("hist", Timing::constant(0.01, Work::Sleep), &["reco"])
            .concurrency(Concurrency::Serial),
    );
    p.end_path("e", ["hist"]);
    let options = SimOptions {
        cores: 4,
        events_in_flight: 4,
        ..SimOptions::default()
    };
    let sim = simulate(p, &options).unwrap();
    let hist = sim.report.module("hist").unwrap();
    let reco = sim.report.module("reco").unwrap();
    assert_eq!(hist.calls, 40);
    assert_eq!(reco.queue_s, 0.0, "a shared module never queues");
    // The first round waits 10 + 20 + 30 ms; later events arrive while
    // the analyzer is busy, and the serial module runs back to back: the
    // queue holds about three events at any time.
    let per_call = hist.queue_s / 40.0;
    assert!(
        (0.015..0.035).contains(&per_call),
        "queue time per call {per_call} s"
    );
}
