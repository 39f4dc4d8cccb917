//! A module whose call is a parallel-for: the simulated clock shortens the
//! call by the cores idle when it starts.

use evflow_core::{Concurrency, EmptySource, Process};
use evflow_sim::{SimOptions, simulate};
use evflow_workloads::{self as synthetic, Timing, Work};

/// A 2 ms producer and a serial 20 ms filter run in `ranges` ranges: the
/// simulated events per second on `cores` cores.
fn throughput(ranges: u32, cores: usize) -> f64 {
    let mut p = Process::new("ranges");
    p.set_source(EmptySource::new(200));
    p.add(synthetic::producer(
        "reco",
        Timing::constant(0.002, Work::Sleep),
        &[],
        &[""],
    ));
    p.add(
        synthetic::filter(
            "output",
            Timing::constant(0.02, Work::Sleep).with_ranges(ranges),
            &["reco"],
            1.0,
            1,
        )
        .concurrency(Concurrency::Serial),
    );
    p.path("o", ["output"]);
    let options = SimOptions {
        cores,
        events_in_flight: cores,
        ..SimOptions::default()
    };
    let sim = simulate(p, &options).unwrap();
    assert_eq!(sim.report.events, 200);
    sim.report.throughput_ev_s
}

#[test]
fn a_serial_parallel_for_module_is_shortened_by_the_idle_cores() {
    // One range: the serial 20 ms filter bounds the job at 50 events/s
    // from 2 cores on (one core also runs the 2 ms producer).
    for cores in [2, 4, 8] {
        let t = throughput(1, cores);
        assert!((t - 50.0).abs() < 1.0, "{cores} cores: {t}");
    }
    let one_core = 1.0 / 0.022;
    assert!((throughput(1, 1) - one_core).abs() < 1.0);
    // Ten ranges: on one core nothing changes; on 4 and 8 cores the
    // filter's call runs on its core and the idle ones.
    assert!((throughput(10, 1) - one_core).abs() < 1.0);
    let four = throughput(10, 4);
    let eight = throughput(10, 8);
    assert!(four > 2.5 * 50.0, "{four}");
    assert!(eight > four * 1.3, "{eight} vs {four}");
    // Never beyond the ranges: 10 ranges of 2 ms, plus the producer.
    assert!(eight < 1.0 / 0.002 + 1.0, "{eight}");
}

#[test]
fn a_parallel_for_call_holds_the_cores_that_take_its_ranges() {
    // Two cores and 22 ms of work per event (the 2 ms producer and the
    // 20 ms filter in ten ranges): at most 2 / 22 ms = 90.9 events/s. A
    // core taking the filter's ranges runs no producer meanwhile.
    let bound = 2.0 / 0.022;
    let two = throughput(10, 2);
    assert!(
        two <= bound * 1.001,
        "{two} events/s beyond the {bound} that 2 cores can do"
    );
    // The ranges still use the idle core: beyond the one-range 50 events/s.
    assert!(two > 1.5 * 50.0, "{two}");
}
