//! The simulator with a device: the emulated device's model on the
//! simulated clock, with the same combining and split decisions.

use evflow_core::{EmptySource, Process};
use evflow_device::*;
use evflow_sim::{SimOptions, simulate};
use evflow_workloads::{self as synthetic, Timing, Work};

const EVENTS: u64 = 3000;
const CORES: usize = 8;
const K: usize = 128;

/// Host 1 ms per event on 8 cores: 8000 ev/s. Device: 64 kB each way at
/// 0.25 GB/s, 50 µs kernel: transfers limit it to ~3800 ev/s.
fn predict(split: SplitMode, overlap: bool) -> f64 {
    let config = EmulatedConfig {
        bandwidth_bytes_s: 0.25e9,
        overlap,
        ..EmulatedConfig::default()
    };
    let options = DeviceOptions {
        split,
        events_in_flight: K,
        host_threads: CORES,
        ..DeviceOptions::default()
    };
    let ctx = DeviceContext::open(&DeviceChoice::Emulated(config), options)
        .unwrap()
        .0;
    let spec = SyntheticDevice {
        host: Some(Timing::constant(1e-3, Work::Sleep)),
        device_cost_s: 50e-6,
        bytes_in: 65536,
        bytes_out: 65536,
    };
    let mut p = Process::new("sim-device");
    p.set_source(EmptySource::new(EVENTS));
    p.add(synthetic_device("stencil", spec, &[], &[""], &ctx).unwrap());
    p.add(synthetic::analyzer("use", Timing::zero(), &["stencil"]));
    p.end_path("e", ["use"]);
    let options = SimOptions {
        cores: CORES,
        events_in_flight: K,
        devices: Some(ctx),
        ..SimOptions::default()
    };
    let sim = simulate(p, &options).unwrap();
    assert_eq!(sim.report.events, EVENTS);
    sim.report.throughput_ev_s
}

#[test]
fn host_only_and_device_only_follow_the_model() {
    let host = predict(SplitMode::Fixed(0.0), true);
    assert!((host / 8000.0 - 1.0).abs() < 0.03, "{host}");
    // Copy engines: 65536 B / 0.25 GB/s = 262 µs per event each way, the
    // bound; 128 events in flight are two launches of 64, so the engines
    // idle a little between them.
    let device = predict(SplitMode::Fixed(1.0), true);
    let bound = 0.25e9 / 65536.0;
    assert!(
        device <= bound && device > 0.85 * bound,
        "{device} vs {bound}"
    );
    // Without overlap every launch pays both transfers and the kernel.
    let serial = predict(SplitMode::Fixed(1.0), false);
    assert!(serial < 0.6 * device, "{serial} vs {device}");
}

#[test]
fn the_adaptive_split_finds_the_floor_of_the_bathtub() {
    let statics: Vec<f64> = (0..=10)
        .map(|i| predict(SplitMode::Fixed(i as f64 / 10.0), true))
        .collect();
    let best = statics.iter().copied().fold(0.0, f64::max);
    let host = statics[0];
    assert!(best > 1.3 * host, "{statics:?}");
    let adaptive = predict(SplitMode::Adaptive, true);
    assert!(
        adaptive > 0.97 * best,
        "adaptive {adaptive} vs best static {best}"
    );
}
