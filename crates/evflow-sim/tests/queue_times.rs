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

/// A device module's wait is its external work, from `acquire` to the
/// landing of its launch, as a run's report counts it (`wait_s`): not the
/// time its `produce` then waits for a core. On one core, with a 5 ms
/// producer beside a device-only module of 1 ms launches (launched at
/// once), the landing comes while the core is busy with the producer;
/// the wait counted that too (about 5 ms per call instead of the
/// launch's 1.03 ms).
#[test]
fn a_device_modules_wait_ends_when_its_launch_lands() {
    use evflow_device::{
        CombinePolicy, DeviceChoice, DeviceContext, DeviceOptions, EmulatedConfig, SplitMode,
        SyntheticDevice, synthetic_device,
    };
    let options = DeviceOptions {
        split: SplitMode::Fixed(1.0),
        events_in_flight: 2,
        host_threads: 1,
        combine: CombinePolicy {
            max_events: 1,
            ..CombinePolicy::default()
        },
        ..DeviceOptions::default()
    };
    let ctx = DeviceContext::open(&DeviceChoice::Emulated(EmulatedConfig::default()), options)
        .unwrap()
        .0;
    let spec = SyntheticDevice {
        host: None,
        device_cost_s: 1e-3,
        bytes_in: 64,
        bytes_out: 64,
        fail_on_events: vec![],
    };
    let mut p = Process::new("wait");
    p.set_source(EmptySource::new(20));
    p.add(synthetic_device("tracks", spec, &[], &[""], &ctx).unwrap());
    p.add(synthetic::producer(
        "calo",
        Timing::constant(0.005, Work::Sleep),
        &[],
        &[""],
    ));
    p.add(synthetic::analyzer(
        "use",
        Timing::zero(),
        &["tracks", "calo"],
    ));
    p.end_path("e", ["use"]);
    let options = SimOptions {
        cores: 1,
        events_in_flight: 2,
        devices: Some(ctx),
        ..SimOptions::default()
    };
    let sim = simulate(p, &options).unwrap();
    let tracks = sim.report.module("tracks").unwrap();
    let [device] = sim.devices.as_slice() else {
        panic!("{:?}", sim.devices)
    };
    assert_eq!((tracks.calls, device.launches), (20, 20));
    // Each launch: 10 µs latency, 1 ms kernel, two transfers of 5 µs and
    // 64 bytes.
    let per_call = tracks.wait_s / 20.0;
    assert!(
        (per_call - device.mean_launch_s).abs() < 1e-6,
        "wait per call {per_call} s, launch {} s",
        device.mean_launch_s
    );
    assert_eq!(sim.report.module("calo").unwrap().wait_s, 0.0);
}
