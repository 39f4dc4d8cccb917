//! Cost models that give no duration are refused, naming the module and
//! the event (they were simulated as 0, NaN or infinite seconds, and the
//! prediction came out as 0 events/s or NaN).

use std::sync::Arc;

use evflow_core::{EmptySource, Process};
use evflow_sim::{SimOptions, simulate};
use evflow_workloads::{self as synthetic, Timing, Work};

fn with_cost(cost: f64) -> Result<f64, String> {
    let mut p = Process::new("costs");
    p.set_source(EmptySource::new(20));
    p.add(synthetic::producer(
        "good",
        Timing::constant(0.001, Work::Sleep),
        &[],
        &[""],
    ));
    p.add(
        synthetic::producer("odd", Timing::zero(), &["good"], &[""])
            .cost_model(Arc::new(move |i| if i >= 5 { cost } else { 0.001 })),
    );
    let (an, _) = synthetic::analyzer_with_tally("use", Timing::zero(), &["odd"]);
    p.add(an);
    p.end_path("e", ["use"]);
    let options = SimOptions {
        cores: 2,
        events_in_flight: 2,
        ..SimOptions::default()
    };
    simulate(p, &options)
        .map(|s| s.report.throughput_ev_s)
        .map_err(|e| e.to_string())
}

#[test]
fn a_cost_that_is_no_duration_is_refused_by_module_and_event() {
    for bad in [-1.0, f64::NAN, f64::INFINITY] {
        let e = with_cost(bad).expect_err("refused");
        assert!(
            e.contains("module 'odd'")
                && e.contains(&format!(
                    "its cost model gave {bad} s for the event at position 5"
                )),
            "{e}"
        );
    }
    // The detector works: a zero cost is a duration.
    assert!(with_cost(0.0).unwrap() > 0.0);
}
