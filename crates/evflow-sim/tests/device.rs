//! The simulator with a device: the emulated device's model on the
//! simulated clock, with the same combining and split decisions.

use evflow_core::{EmptySource, ModuleDesc, Process};
use evflow_device::*;
use evflow_sim::{SimOptions, Simulation, simulate};
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
        fail_on_events: vec![],
    };
    simulated_throughput("stencil", spec, EVENTS, ctx)
}

/// Simulated events/s of one device module `label` and a consumer, on
/// `CORES` cores with `K` events in flight.
fn simulated_throughput(
    label: &str,
    spec: SyntheticDevice,
    events: u64,
    ctx: DeviceContext,
) -> f64 {
    let module = synthetic_device(label, spec, &[], &[""], &ctx).unwrap();
    simulate_module(label, module, events, ctx)
        .report
        .throughput_ev_s
}

/// The simulation of `module` (labelled `label`) and a consumer of its
/// product, on `CORES` cores with `K` events in flight.
fn simulate_module(label: &str, module: ModuleDesc, events: u64, ctx: DeviceContext) -> Simulation {
    let mut p = Process::new("sim-device");
    p.set_source(EmptySource::new(events));
    p.add(module);
    p.add(synthetic::analyzer("use", Timing::zero(), &[label]));
    p.end_path("e", ["use"]);
    let options = SimOptions {
        cores: CORES,
        events_in_flight: K,
        devices: Some(ctx),
        ..SimOptions::default()
    };
    let sim = simulate(p, &options).unwrap();
    assert_eq!(sim.report.events, events);
    sim
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

/// The regime measured on a GPU: device round trips of milliseconds and
/// 128 events in flight, with the best static split at an end of the sweep.
struct Regime {
    host_s: f64,
    device_s: f64,
    bytes: usize,
    latency_s: f64,
    bandwidth: f64,
    max_in_flight: usize,
    events: u64,
}

fn predict_regime(r: &Regime, split: SplitMode) -> f64 {
    let config = EmulatedConfig {
        launch_latency_s: r.latency_s,
        bandwidth_bytes_s: r.bandwidth,
        ..EmulatedConfig::default()
    };
    let options = DeviceOptions {
        split,
        events_in_flight: K,
        host_threads: CORES,
        combine: CombinePolicy {
            max_in_flight: r.max_in_flight,
            ..CombinePolicy::default()
        },
        ..DeviceOptions::default()
    };
    let ctx = DeviceContext::open(&DeviceChoice::Emulated(config), options)
        .unwrap()
        .0;
    let spec = SyntheticDevice {
        host: Some(Timing::constant(r.host_s, Work::Sleep)),
        device_cost_s: r.device_s,
        bytes_in: r.bytes,
        bytes_out: r.bytes,
        fail_on_events: vec![],
    };
    simulated_throughput("m", spec, r.events, ctx)
}

/// Static splits 0, 5, 10, 20, ... 100 % and the adaptive split.
fn sweep(r: &Regime) -> (Vec<f64>, f64) {
    let statics: Vec<f64> = [0, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 100]
        .iter()
        .map(|&p| predict_regime(r, SplitMode::Fixed(p as f64 / 100.0)))
        .collect();
    (statics, predict_regime(r, SplitMode::Adaptive))
}

#[test]
fn the_adaptive_split_goes_to_the_host_when_the_device_loses_by_far() {
    // Host 8000 ev/s; the device ~11x slower, 2 ms + 1.3 ms per event each
    // way: device events hold event slots for long round trips.
    let (statics, adaptive) = sweep(&Regime {
        host_s: 1e-3,
        device_s: 1e-3,
        bytes: 65536,
        latency_s: 2e-3,
        bandwidth: 0.05e9,
        max_in_flight: 0,
        events: 8000,
    });
    let best = statics.iter().copied().fold(0.0, f64::max);
    assert_eq!(best, statics[0], "{statics:?}");
    assert!(best > 8.0 * statics[12], "{statics:?}");
    assert!(adaptive > 0.95 * best, "adaptive {adaptive} vs {statics:?}");
}

#[test]
fn the_adaptive_split_goes_to_the_device_when_it_wins() {
    // Host 4000 ev/s; the device several times faster with 0.5 ms per
    // launch, batches held while 3 launches are on the device.
    let (statics, adaptive) = sweep(&Regime {
        host_s: 2e-3,
        device_s: 20e-6,
        bytes: 4096,
        latency_s: 0.5e-3,
        bandwidth: 0.25e9,
        max_in_flight: 3,
        events: 100_000,
    });
    let best = statics.iter().copied().fold(0.0, f64::max);
    assert!(best > 3.0 * statics[0], "{statics:?}");
    // Probes back from 100 % cost a few per cent (0.92 of the best here).
    assert!(adaptive > 0.9 * best, "adaptive {adaptive} vs {statics:?}");
}

/// An emulated device taking every invocation, combined by `combine` for
/// `events_in_flight` events.
fn all_on_device(combine: CombinePolicy, events_in_flight: usize) -> DeviceContext {
    let options = DeviceOptions {
        split: SplitMode::Fixed(1.0),
        events_in_flight,
        host_threads: CORES,
        combine,
        ..DeviceOptions::default()
    };
    DeviceContext::open(&DeviceChoice::Emulated(EmulatedConfig::default()), options)
        .unwrap()
        .0
}

/// 1 ms on the host, `device_cost_s` on the device, 64 bytes each way.
fn small(device_cost_s: f64) -> SyntheticDevice {
    SyntheticDevice {
        host: Some(Timing::constant(1e-3, Work::Sleep)),
        device_cost_s,
        bytes_in: 64,
        bytes_out: 64,
        fail_on_events: vec![],
    }
}

#[test]
fn a_serial_device_module_launches_at_once() {
    // A serial module's instance is kept during its external work: one
    // invocation at a time can wait, so a launch must not wait for the
    // (here 1000 s) time-out. 20 events of 1 ms on the device: well under
    // a second of simulated time.
    let combine = CombinePolicy {
        timeout_s: 1000.0,
        ..CombinePolicy::default()
    };
    let ctx = all_on_device(combine, K);
    let tracks = synthetic_device("tracks", small(1e-3), &[], &[""], &ctx)
        .unwrap()
        .concurrency(evflow_core::Concurrency::Serial);
    let sim = simulate_module("tracks", tracks, 20, ctx);
    assert!(sim.simulated_s < 1.0, "{} s", sim.simulated_s);
}

#[test]
fn a_batch_that_cannot_fill_starts_when_every_event_waits() {
    // 100 events, all on the device, with a count (1000) and a time-out
    // (1000 s) never reached: as in a run, each batch starts once every
    // event in flight waits, and the simulated job takes milliseconds.
    let combine = CombinePolicy {
        max_events: 1000,
        timeout_s: 1000.0,
        ..CombinePolicy::default()
    };
    // The count is not capped by the events in flight here.
    let ctx = all_on_device(combine, 4096);
    let tracks = synthetic_device("tracks", small(1e-4), &[], &[""], &ctx).unwrap();
    let sim = simulate_module("tracks", tracks, 100, ctx);
    let [d] = sim.devices.as_slice() else {
        panic!("{:?}", sim.devices)
    };
    assert!(sim.simulated_s < 1.0, "{} s", sim.simulated_s);
    assert_eq!(d.timed_out_launches, 0, "{d:?}");
    assert_eq!(d.idle_launches, d.launches, "{d:?}");
    assert!(d.max_events_per_launch <= K as u64, "{d:?}");
}

#[test]
fn the_prediction_reports_each_device_module_as_a_run_does() {
    for (split, host) in [
        (SplitMode::Fixed(0.5), true),
        (SplitMode::Adaptive, true),
        (SplitMode::Fixed(0.5), false),
    ] {
        let options = DeviceOptions {
            split,
            events_in_flight: K,
            host_threads: CORES,
            ..DeviceOptions::default()
        };
        let ctx = DeviceContext::open(&DeviceChoice::Emulated(EmulatedConfig::default()), options)
            .unwrap()
            .0;
        let spec = SyntheticDevice {
            host: host.then(|| Timing::constant(1e-3, Work::Sleep)),
            device_cost_s: 1e-4,
            bytes_in: 1000,
            bytes_out: 100,
            fail_on_events: vec![],
        };
        let tracks = synthetic_device("tracks", spec, &[], &[""], &ctx).unwrap();
        let sim = simulate_module("tracks", tracks, 1000, ctx);
        let [d] = sim.devices.as_slice() else {
            panic!("{split:?}: {:?}", sim.devices)
        };
        let case = format!("{split:?} host {host}");
        assert_eq!(d.label, "tracks");
        assert_eq!(d.device.as_deref(), Some("emulated:0"), "{case}");
        assert_eq!(d.host_calls + d.device_calls, 1000, "{case}");
        assert!(d.launches >= 1 && d.launches <= d.device_calls, "{case}");
        assert_eq!(d.bytes_in, d.device_calls * 1000, "{case}");
        assert_eq!(d.bytes_out, d.device_calls * 100, "{case}");
        match (split, host) {
            (_, false) => {
                assert_eq!(d.split, DEVICE_ONLY);
                assert!(d.split_history.is_empty());
                assert_eq!(d.device_calls, 1000);
            }
            (SplitMode::Fixed(_), true) => {
                assert_eq!(d.split, "fixed:50");
                assert_eq!(d.device_calls, 500);
                assert!(d.host_s > 0.0);
            }
            (SplitMode::Adaptive, true) => {
                assert_eq!(d.split, "adaptive");
                assert!(!d.split_history.is_empty());
            }
        }
    }
    // Without a device, nothing to report.
    let sim = simulate(
        {
            let mut p = Process::new("no-device");
            p.set_source(EmptySource::new(10));
            p.add(synthetic::producer("a", Timing::zero(), &[], &[""]));
            p
        },
        &SimOptions::default(),
    )
    .unwrap();
    assert!(sim.devices.is_empty());
    let json = serde_json::to_value(&sim).unwrap();
    assert!(json.get("devices").is_none());
}

/// The adaptive planner times a device module's executions on both sides,
/// in a simulation as in a run: a cut behind a producer of 3 ms on the host
/// that the device takes for 80 % of the events costs little, and runs
/// before a cut behind a 1 ms host producer, in both (were the simulated
/// planner to time the host calls only, it would see 3 ms and keep the
/// written order, predicting a slower job than the run).
#[test]
fn the_planner_times_a_device_module_on_both_sides_as_a_run() {
    let process = |ctx: &DeviceContext| {
        let mut p = Process::new("device-cuts");
        p.set_source(EmptySource::new(1500));
        let spec = SyntheticDevice {
            host: Some(Timing::constant(3e-3, Work::Sleep)),
            device_cost_s: 50e-6,
            bytes_in: 1000,
            bytes_out: 100,
            fail_on_events: vec![],
        };
        p.add(synthetic_device("offloaded", spec, &[], &[""], ctx).unwrap());
        let host = Timing::constant(1e-3, Work::Sleep);
        p.add(synthetic::producer("hosted", host, &[], &[""]));
        let cut = Timing::constant(50e-6, Work::Sleep);
        p.add(synthetic::filter(
            "cutA",
            cut.clone(),
            &["offloaded"],
            0.5,
            1,
        ));
        p.add(synthetic::filter("cutB", cut, &["hosted"], 0.5, 2));
        p.add_path(evflow_core::PathDesc::new("sel", ["cutB", "cutA"]).reorderable(true));
        p
    };
    let context = || {
        let options = DeviceOptions {
            split: SplitMode::Fixed(0.8),
            events_in_flight: 16,
            host_threads: 4,
            ..DeviceOptions::default()
        };
        DeviceContext::open(&DeviceChoice::Emulated(EmulatedConfig::default()), options)
            .unwrap()
            .0
    };
    let adaptive = || {
        Some(
            evflow_core::ordering::OrderingOptions::new(evflow_core::ordering::Policy::Adaptive)
                .factory(),
        )
    };
    let ctx = context();
    let sim = simulate(
        process(&ctx),
        &SimOptions {
            cores: 4,
            events_in_flight: 16,
            devices: Some(ctx),
            planner: adaptive(),
            ..SimOptions::default()
        },
    )
    .unwrap();
    let ctx = context();
    let real = evflow_core::run(
        process(&ctx),
        &evflow_core::RunOptions {
            threads: 4,
            events_in_flight: 16,
            planner: adaptive(),
            ..evflow_core::RunOptions::default()
        },
    )
    .unwrap();
    let last = |r: &evflow_core::Report| r.orderings.last().unwrap().order.clone();
    assert_eq!(last(&real), ["cutA", "cutB"], "{:?}", real.orderings);
    assert_eq!(last(&sim.report), last(&real), "{:?}", sim.report.orderings);
    // The 1 ms producer runs on the events cutA passes (half), sampling aside.
    let hosted = |r: &evflow_core::Report| {
        r.modules
            .iter()
            .find(|m| m.label == "hosted")
            .unwrap()
            .calls
    };
    assert!(hosted(&sim.report) < 1000, "{}", hosted(&sim.report));
}

/// A device-only module behind a producer whose host time jitters (50 µs
/// ± 50 %), on 2 cores with 8 events in flight and a 2 ms launch: the
/// simulated run's device figures.
fn jittered_device_only(hold_small_launches: bool) -> DeviceModuleReport {
    let raw = Timing::constant(50e-6, Work::Sleep).with_jitter(0.5, 7);
    device_only_behind(raw, hold_small_launches)
}

/// The same behind a producer of `raw`'s host time.
fn device_only_behind(raw: Timing, hold_small_launches: bool) -> DeviceModuleReport {
    let config = EmulatedConfig {
        launch_latency_s: 2e-3,
        ..EmulatedConfig::default()
    };
    let options = DeviceOptions {
        split: SplitMode::Fixed(1.0),
        events_in_flight: 8,
        host_threads: 2,
        combine: CombinePolicy {
            hold_small_launches,
            ..CombinePolicy::default()
        },
        ..DeviceOptions::default()
    };
    let ctx = DeviceContext::open(&DeviceChoice::Emulated(config), options)
        .unwrap()
        .0;
    let mut p = Process::new("sim-jitter");
    p.set_source(EmptySource::new(4000));
    p.add(synthetic::producer("raw", raw, &[], &[""]));
    p.add(synthetic_device("tracks", small(1e-5), &["raw"], &[""], &ctx).unwrap());
    p.add(synthetic::analyzer("use", Timing::zero(), &["tracks"]));
    p.end_path("e", ["use"]);
    let options = SimOptions {
        cores: 2,
        events_in_flight: 8,
        devices: Some(ctx),
        ..SimOptions::default()
    };
    let sim = simulate(p, &options).unwrap();
    assert_eq!(sim.report.events, 4000);
    let [d] = sim.devices.as_slice() else {
        panic!("{:?}", sim.devices)
    };
    d.clone()
}

#[test]
fn launches_staggered_by_jitter_realign() {
    // The 8 events of a launch usually come back within the 200 µs
    // time-out, but the jitter sometimes cuts a launch short; its last
    // events then make a launch of their own, and each launch gathers
    // only the events of the one before: the launches stay staggered.
    let staggered = jittered_device_only(false);
    assert!(staggered.events_per_launch < 4.0, "{staggered:?}");
    // Waiting for the events on the device, then a time-out for them to
    // come back, brings full launches back.
    let realigned = jittered_device_only(true);
    assert!(realigned.events_per_launch > 7.0, "{realigned:?}");
    assert!(
        realigned.launches * 2 < staggered.launches,
        "{} launches realigned, {} staggered",
        realigned.launches,
        staggered.launches
    );
}

#[test]
fn launches_all_of_one_size_and_long_fills_reach_full_launches() {
    // A producer of 100 µs: 4 events come back within the time-out every
    // time, launches are all of 4 and the fit cannot tell their fixed
    // cost; one of 200 µs: a full batch's fill (800 µs) is beyond 5
    // time-outs with its margin. Probes for a full launch, and a wait
    // bounded by a launch's fixed cost, take both to full launches.
    for (raw_s, short) in [(100e-6, 4.0), (200e-6, 2.0)] {
        let raw = || Timing::constant(raw_s, Work::Sleep);
        let plain = device_only_behind(raw(), false);
        assert!((plain.events_per_launch - short).abs() < 0.1, "{plain:?}");
        let held = device_only_behind(raw(), true);
        assert!(held.events_per_launch > 7.5, "{raw_s}: {held:?}");
    }
}
