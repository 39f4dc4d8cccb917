//! Device modules in the engine, on the emulated device: same products
//! whichever side runs them, combining, faults. Deterministic: checks
//! invariants that hold whatever the timing (no sleeps-and-hope).

use evflow_core::{
    EmptySource, ErrorPolicy, ExecutorKind, Process, Report, RunError, RunOptions, run,
};
use evflow_device::*;
use evflow_workloads::{self as synthetic, Tally, Timing, Work};

const EVENTS: u64 = 120;

fn spec(host: bool) -> SyntheticDevice {
    SyntheticDevice {
        host: host.then(|| Timing::constant(2e-5, Work::Busy)),
        device_cost_s: 1e-5,
        bytes_in: 256,
        bytes_out: 16,
        fail_on_events: vec![],
    }
}

fn emulated(config: EmulatedConfig, options: DeviceOptions) -> DeviceContext {
    DeviceContext::open(&DeviceChoice::Emulated(config), options)
        .unwrap()
        .0
}

fn options(split: SplitMode, max_events: usize, k: usize) -> DeviceOptions {
    DeviceOptions {
        split,
        combine: CombinePolicy {
            max_events,
            timeout_s: 300e-6,
            ..CombinePolicy::default()
        },
        events_in_flight: k,
        host_threads: 2,
        ..DeviceOptions::default()
    }
}

/// `gen` → `tracks` (device module) → `fit` → analyzer `sum`.
fn job(ctx: Option<&DeviceContext>, spec: SyntheticDevice) -> (Process, Tally) {
    let mut p = Process::new("offload");
    p.set_source(EmptySource::new(EVENTS));
    p.add(synthetic::producer("gen", Timing::zero(), &[], &[""]));
    p.add(match ctx {
        Some(ctx) => synthetic_device("tracks", spec, &["gen"], &["", "pixel"], ctx).unwrap(),
        None => synthetic::producer("tracks", Timing::zero(), &["gen"], &["", "pixel"]),
    });
    p.add(synthetic::producer(
        "fit",
        Timing::zero(),
        &["tracks", "tracks:pixel"],
        &[""],
    ));
    let (sum, tally) = synthetic::analyzer_with_tally("sum", Timing::zero(), &["fit", "tracks"]);
    p.add(sum);
    p.end_path("e", ["sum"]);
    (p, tally)
}

fn run_opts(threads: usize, k: usize, executor: ExecutorKind, on_error: ErrorPolicy) -> RunOptions {
    RunOptions {
        threads,
        events_in_flight: k,
        executor,
        on_error,
        ..RunOptions::default()
    }
}

#[test]
fn products_are_the_same_whichever_side_runs() {
    // The reference: the plain synthetic producer of the same label.
    let (p, reference) = job(None, spec(true));
    run(
        p,
        &run_opts(2, 8, ExecutorKind::Threaded, ErrorPolicy::Fail),
    )
    .unwrap();
    for split in [
        SplitMode::Fixed(0.0),
        SplitMode::Fixed(0.35),
        SplitMode::Fixed(1.0),
        SplitMode::Adaptive,
    ] {
        let ctx = emulated(EmulatedConfig::default(), options(split, 4, 8));
        let (p, tally) = job(Some(&ctx), spec(true));
        run(
            p,
            &run_opts(2, 8, ExecutorKind::Threaded, ErrorPolicy::Fail),
        )
        .unwrap();
        assert_eq!(tally.events(), EVENTS, "{split:?}");
        assert_eq!(tally.digest(), reference.digest(), "{split:?}");
        let r = &ctx.reports()[0];
        assert_eq!(r.host_calls + r.device_calls, EVENTS, "{split:?}");
        if let SplitMode::Fixed(f) = split {
            // The fixed split routes exactly, in order of acquisition.
            assert_eq!(
                r.device_calls,
                (EVENTS as f64 * f).floor() as u64,
                "{split:?}"
            );
        }
        assert_eq!(r.bytes_in, r.device_calls * 256);
        assert_eq!(r.bytes_out, r.device_calls * 16);
    }
}

#[test]
fn device_only_module_runs_on_the_device_and_needs_one() {
    let ctx = emulated(
        EmulatedConfig::default(),
        options(SplitMode::Adaptive, 8, 8),
    );
    let (p, tally) = job(Some(&ctx), spec(false));
    run(
        p,
        &run_opts(2, 8, ExecutorKind::Threaded, ErrorPolicy::Fail),
    )
    .unwrap();
    assert_eq!(tally.events(), EVENTS);
    let r = &ctx.reports()[0];
    assert_eq!(r.device_calls, EVENTS);
    // No split was decided: every call ran on the device.
    assert_eq!(r.split, DEVICE_ONLY);
    assert!(r.split_history.is_empty(), "{:?}", r.split_history);
    // Without a device it cannot be built, and says why.
    let host = DeviceContext::host_only(DeviceOptions::default());
    let err = synthetic_device("tracks", spec(false), &[], &[""], &host)
        .err()
        .unwrap();
    assert!(
        err.to_string()
            .contains("'tracks' has no host implementation"),
        "{err}"
    );
    // When the automatic choice found no device, the error says so and
    // why, and names the remedy (a build with a usable GPU has nothing to
    // say here).
    let (auto, notice) =
        DeviceContext::open(&DeviceChoice::Auto, DeviceOptions::default()).unwrap();
    if auto.device().is_none() {
        let why = auto.fallback().expect("the fallback's reason").to_string();
        assert!(notice.unwrap().contains(&why));
        let err = synthetic_device("tracks", spec(false), &[], &[""], &auto)
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains(&format!("the automatic choice found none ({why})"))
                && err.contains("ask for the emulated device"),
            "{err}"
        );
    }
    assert_eq!(host.fallback(), None);
}

#[test]
fn invocations_are_combined_up_to_the_count() {
    let ctx = emulated(
        EmulatedConfig::default(),
        options(SplitMode::Fixed(1.0), 6, 16),
    );
    let (p, tally) = job(Some(&ctx), spec(true));
    run(
        p,
        &run_opts(2, 16, ExecutorKind::Threaded, ErrorPolicy::Fail),
    )
    .unwrap();
    assert_eq!(tally.events(), EVENTS);
    let r = &ctx.reports()[0];
    assert_eq!(r.device_calls, EVENTS);
    assert!(r.max_events_per_launch <= 6);
    assert!(r.launches >= EVENTS / 6 && r.launches <= EVENTS);
    assert!(r.kernel_s > 0.0 && r.transfer_in_s > 0.0 && r.transfer_out_s > 0.0);
}

#[test]
fn a_batch_that_cannot_fill_is_launched_when_nothing_else_can_run() {
    // The count (64) can never be reached: 8 events in flight, all on the
    // device. Once every event waits, no invocation can join the batch, so
    // it starts then (a time-out of a minute would otherwise pace the job):
    // with each executor, the threaded one's work-stealing pool and its
    // shared queue for oversubscribed pools included.
    let pooled = 2;
    let oversubscribed = evflow_core::OVERSUBSCRIBED
        * std::thread::available_parallelism().map_or(1, |n| n.get())
        + 1;
    for (executor, threads) in [
        (ExecutorKind::Sequential, 1),
        (ExecutorKind::Threaded, pooled),
        (ExecutorKind::Threaded, oversubscribed),
    ] {
        let mut o = options(SplitMode::Fixed(1.0), 64, 64);
        o.combine.timeout_s = 60.0;
        let ctx = emulated(EmulatedConfig::default(), o);
        let (p, tally) = job(Some(&ctx), spec(true));
        run(p, &run_opts(threads, 8, executor, ErrorPolicy::Fail)).unwrap();
        assert_eq!(tally.events(), EVENTS);
        let r = &ctx.reports()[0];
        let what = format!("{executor:?} on {threads} threads: {r:?}");
        assert_eq!(r.device_calls, EVENTS, "{what}");
        assert_eq!(r.timed_out_launches, 0, "{what}");
        assert_eq!(r.idle_launches, r.launches, "{what}");
        assert!(r.max_events_per_launch <= 8, "{what}");
    }
}

#[test]
fn a_batch_that_cannot_fill_is_launched_by_its_time_out() {
    // The count (64) can never be reached: 4 events in flight, half of them
    // on the host, and one thread that runs the sequential executor. A
    // launch is started by the time-out or when every event waits, and the
    // job ends.
    for executor in [ExecutorKind::Sequential, ExecutorKind::Threaded] {
        let mut o = options(SplitMode::Fixed(0.5), 64, 4);
        o.events_in_flight = 64; // the cap would make the count 4
        let ctx = emulated(EmulatedConfig::default(), o);
        let (p, tally) = job(Some(&ctx), spec(true));
        run(p, &run_opts(1, 4, executor, ErrorPolicy::Fail)).unwrap();
        assert_eq!(tally.events(), EVENTS);
        let r = &ctx.reports()[0];
        assert_eq!(r.device_calls, EVENTS / 2);
        assert!(r.max_events_per_launch <= 4);
    }
}

#[test]
fn a_serial_or_exclusive_module_launches_at_once() {
    // The engine keeps a serial or exclusive instance during its external
    // work, so its combiner never holds more than one invocation: with a
    // time-out of 10^6 s the job ends only when each launch goes at once
    // (it used to wait the time-out every time). The watchdog turns such a
    // wait into a failure instead of a hung test.
    for concurrency in [
        evflow_core::Concurrency::Serial,
        evflow_core::Concurrency::Exclusive(vec!["gpu".into()]),
    ] {
        for executor in [ExecutorKind::Sequential, ExecutorKind::Threaded] {
            let mut o = options(SplitMode::Fixed(1.0), 64, 16);
            o.combine.timeout_s = 1e6;
            let ctx = emulated(EmulatedConfig::default(), o);
            let mut p = Process::new("serial-offload");
            p.set_source(EmptySource::new(20));
            p.add(synthetic::producer("gen", Timing::zero(), &[], &[""]));
            p.add(
                synthetic_device("tracks", spec(true), &["gen"], &[""], &ctx)
                    .unwrap()
                    .concurrency(concurrency.clone()),
            );
            let (sum, tally) = synthetic::analyzer_with_tally("sum", Timing::zero(), &["tracks"]);
            p.add(sum);
            p.end_path("e", ["sum"]);
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let _ = tx.send(run(p, &run_opts(2, 16, executor, ErrorPolicy::Fail)));
            });
            rx.recv_timeout(std::time::Duration::from_secs(120))
                .unwrap_or_else(|_| {
                    panic!("{concurrency} {executor:?}: launches wait the time-out")
                })
                .unwrap();
            assert_eq!(tally.events(), 20);
            let r = &ctx.reports()[0];
            assert_eq!((r.device_calls, r.launches), (20, 20), "{concurrency}");
        }
    }
}

/// The job error of `p` run on 2 threads under `--on-error fail` (which
/// must fail), as text.
fn job_failure(p: Process) -> String {
    let err = run(
        p,
        &run_opts(2, 8, ExecutorKind::Threaded, ErrorPolicy::Fail),
    )
    .unwrap_err();
    let RunError::Failed { error, .. } = err else {
        panic!("{err}")
    };
    error.to_string()
}

fn failed(report: &Report) -> Vec<u64> {
    let mut f: Vec<u64> = report.failed_events.iter().map(|e| e.event).collect();
    f.sort_unstable();
    f
}

#[test]
fn a_failed_launch_fails_the_job_naming_module_event_and_device() {
    let config = EmulatedConfig {
        faults: Faults {
            launches: vec![2],
            ..Faults::default()
        },
        ..EmulatedConfig::default()
    };
    let ctx = emulated(config, options(SplitMode::Fixed(1.0), 4, 8));
    let (p, _) = job(Some(&ctx), spec(true));
    let text = job_failure(p);
    for part in [
        "'tracks'",
        "event",
        "device 'emulated:0'",
        "launch 2",
        "synthetic_tracks",
    ] {
        assert!(text.contains(part), "{part} missing in: {text}");
    }
}

#[test]
fn skip_event_skips_exactly_the_events_of_failed_launches() {
    let config = EmulatedConfig {
        faults: Faults {
            launches: vec![0, 3, 7],
            ..Faults::default()
        },
        ..EmulatedConfig::default()
    };
    let ctx = emulated(config, options(SplitMode::Fixed(1.0), 5, 10));
    let (p, tally) = job(Some(&ctx), spec(true));
    let report = run(
        p,
        &run_opts(2, 10, ExecutorKind::Threaded, ErrorPolicy::SkipEvent),
    )
    .unwrap();
    let r = &ctx.reports()[0];
    assert_eq!(r.failed_launches, 3);
    let failed = failed(&report);
    assert!(!failed.is_empty());
    assert!(report.failed_events.iter().all(|e| e.module == "tracks"));
    // Every other event went through exactly once (a second put would have
    // been an error; the tally counts each once).
    assert_eq!(tally.events() + failed.len() as u64, EVENTS);
    assert_eq!(r.device_calls + failed.len() as u64, EVENTS);
    assert_eq!(report.events + failed.len() as u64, EVENTS);
}

#[test]
fn configured_failures_fail_the_same_events_whatever_the_split() {
    // `fail_on_events` is the module's, not its host side's: the events
    // routed to the device fail as well, through the per-event failures.
    let failing = vec![5, 10, 77];
    for (split, host) in [
        (SplitMode::Fixed(0.0), true),
        (SplitMode::Fixed(0.5), true),
        (SplitMode::Fixed(1.0), true),
        (SplitMode::Adaptive, true),
        (SplitMode::Adaptive, false),
    ] {
        let spec = SyntheticDevice {
            fail_on_events: failing.clone(),
            ..spec(host)
        };
        let ctx = emulated(EmulatedConfig::default(), options(split, 4, 8));
        let (p, tally) = job(Some(&ctx), spec.clone());
        let report = run(
            p,
            &run_opts(2, 8, ExecutorKind::Threaded, ErrorPolicy::SkipEvent),
        )
        .unwrap();
        assert_eq!(failed(&report), failing, "{split:?} host {host}");
        assert!(report.failed_events.iter().all(|e| e.module == "tracks"));
        assert_eq!(tally.events(), EVENTS - 3, "{split:?} host {host}");
        // And `--on-error fail` fails the job naming module and event.
        let ctx = emulated(EmulatedConfig::default(), options(split, 4, 8));
        let (p, _) = job(Some(&ctx), spec);
        let text = job_failure(p);
        assert!(
            text.contains("'tracks'") && text.contains("configured failure on event"),
            "{split:?} host {host}: {text}"
        );
    }
}

#[test]
fn out_of_device_memory_names_the_sizes() {
    // 256 + 16 bytes per invocation: launches of more than 3 do not fit.
    let config = EmulatedConfig {
        memory_bytes: 3 * 272,
        ..EmulatedConfig::default()
    };
    let ctx = emulated(config, options(SplitMode::Fixed(1.0), 1, 8));
    let (p, tally) = job(Some(&ctx), spec(true));
    run(
        p,
        &run_opts(2, 8, ExecutorKind::Threaded, ErrorPolicy::Fail),
    )
    .unwrap();
    assert_eq!(tally.events(), EVENTS); // batches of 1 fit

    let config = EmulatedConfig {
        memory_bytes: 100,
        ..EmulatedConfig::default()
    };
    let ctx = emulated(config, options(SplitMode::Fixed(1.0), 4, 8));
    let (p, tally) = job(Some(&ctx), spec(true));
    let report = run(
        p,
        &run_opts(2, 8, ExecutorKind::Threaded, ErrorPolicy::SkipEvent),
    )
    .unwrap();
    assert_eq!(tally.events(), 0);
    assert_eq!(report.failed_events.len() as u64, EVENTS);
    let message = &report.failed_events[0].message;
    assert!(
        message.contains("out of memory") && message.contains("the device has 100"),
        "{message}"
    );
}

#[test]
fn a_kernel_that_does_not_compile_is_refused_before_the_job() {
    let config = EmulatedConfig {
        faults: Faults {
            compile: vec!["synthetic_tracks".into()],
            ..Faults::default()
        },
        ..EmulatedConfig::default()
    };
    let ctx = emulated(config, DeviceOptions::default());
    let err = synthetic_device("tracks", spec(true), &[], &[""], &ctx)
        .err()
        .unwrap();
    assert!(matches!(err.unlabelled(), DeviceError::Compile { .. }));
    assert!(err.to_string().starts_with(
        "device module 'tracks': device 'emulated:0': kernel 'synthetic_tracks' failed to compile"
    ));
}

#[test]
fn no_device_means_host_with_a_notice_unless_one_was_demanded() {
    #[cfg(feature = "cuda")]
    if evflow_device::CudaDevice::open(0, 1).is_ok() {
        // A GPU is there: `auto` must take it. The host-only half of this
        // test needs a machine without one (CI).
        let (ctx, _) = DeviceContext::open(&DeviceChoice::Auto, DeviceOptions::default()).unwrap();
        let name = ctx.device().expect("auto takes the GPU").name().to_string();
        assert!(name.starts_with("cuda:0"), "{name}");
        eprintln!("a GPU is present: the no-device half of this test was skipped");
        return;
    }
    let (ctx, notice) = DeviceContext::open(&DeviceChoice::Auto, DeviceOptions::default()).unwrap();
    assert!(ctx.device().is_none());
    assert!(
        notice
            .unwrap()
            .starts_with("no device: device modules run on the host")
    );
    let err = DeviceContext::open(&DeviceChoice::Cuda, DeviceOptions::default())
        .err()
        .unwrap();
    assert!(matches!(err, DeviceError::Unavailable { .. }), "{err}");
    // Host only: the module runs its host implementation, reports no launch.
    let (p, tally) = job(Some(&ctx), spec(true));
    run(
        p,
        &run_opts(2, 8, ExecutorKind::Threaded, ErrorPolicy::Fail),
    )
    .unwrap();
    assert_eq!(tally.events(), EVENTS);
    let r = &ctx.reports()[0];
    assert_eq!((r.host_calls, r.device_calls, r.launches), (EVENTS, 0, 0));
    assert_eq!(r.device, None);
}

#[test]
fn seeded_random_jobs_lose_and_double_no_event() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(2026);
    let (p, reference) = job(None, spec(true));
    run(
        p,
        &run_opts(1, 1, ExecutorKind::Sequential, ErrorPolicy::Fail),
    )
    .unwrap();
    for round in 0..8 {
        let k = rng.gen_range(1..24);
        let threads = rng.gen_range(1..4);
        let split = match rng.gen_range(0..3) {
            0 => SplitMode::Adaptive,
            _ => SplitMode::Fixed(rng.gen_range(0.0..=1.0)),
        };
        let faults: Vec<u64> = (0..rng.gen_range(0..3))
            .map(|_| rng.gen_range(0..20))
            .collect();
        let config = EmulatedConfig {
            overlap: rng.gen_bool(0.5),
            launch_latency_s: rng.gen_range(0.0..50e-6),
            faults: Faults {
                launches: faults.clone(),
                ..Faults::default()
            },
            ..EmulatedConfig::default()
        };
        let mut o = options(split, rng.gen_range(1..40), k);
        o.combine.timeout_s = rng.gen_range(0.0..500e-6);
        let ctx = emulated(config, o);
        let (p, tally) = job(Some(&ctx), spec(true));
        let executor = if rng.gen_bool(0.25) {
            ExecutorKind::Sequential
        } else {
            ExecutorKind::Threaded
        };
        let what = format!(
            "round {round}: k {k} threads {threads} {split:?} faults {faults:?} {executor:?}"
        );
        let report = run(p, &run_opts(threads, k, executor, ErrorPolicy::SkipEvent)).unwrap();
        let r = &ctx.reports()[0];
        let failed = failed(&report);
        let mut unique = failed.clone();
        unique.dedup();
        assert_eq!(unique.len(), failed.len(), "{what}");
        assert_eq!(tally.events() + failed.len() as u64, EVENTS, "{what}");
        assert_eq!(
            r.host_calls + r.device_calls + failed.len() as u64,
            EVENTS,
            "{what}"
        );
        assert!(r.failed_launches <= faults.len() as u64, "{what}");
        if failed.is_empty() {
            assert_eq!(tally.digest(), reference.digest(), "{what}");
        }
    }
}

/// On a machine with a GPU (`cargo test --features cuda`): the synthetic
/// kernel compiled by NVRTC gives the host's products, bit for bit.
#[cfg(feature = "cuda")]
#[test]
fn cuda_kernels_give_the_host_products() {
    let device = match CudaDevice::open(0, 2) {
        Ok(device) => std::sync::Arc::new(device) as std::sync::Arc<dyn Device>,
        Err(e) => {
            eprintln!("skipped: no CUDA device ({e})");
            return;
        }
    };
    let (p, reference) = job(None, spec(true));
    run(
        p,
        &run_opts(2, 8, ExecutorKind::Threaded, ErrorPolicy::Fail),
    )
    .unwrap();
    for split in [SplitMode::Fixed(1.0), SplitMode::Adaptive] {
        let ctx = DeviceContext::with_device(Some(device.clone()), options(split, 16, 32));
        let (p, tally) = job(Some(&ctx), spec(true));
        run(
            p,
            &run_opts(2, 32, ExecutorKind::Threaded, ErrorPolicy::Fail),
        )
        .unwrap();
        assert_eq!(tally.digest(), reference.digest(), "{split:?}");
    }
}

/// A source whose events repeat ids (merged inputs do), each with a
/// product of its own: its position in the input.
struct RepeatedIds {
    next: u64,
}

impl evflow_core::Source for RepeatedIds {
    fn produces(&self) -> Vec<String> {
        vec!["n".into()]
    }
    fn next_event(
        &mut self,
        products: &mut evflow_core::SourceProducts,
    ) -> Result<Option<evflow_core::EventId>, evflow_core::ModuleError> {
        if self.next == EVENTS {
            return Ok(None);
        }
        self.next += 1;
        products.put("n", self.next);
        Ok(Some(evflow_core::EventId::new(1, 1, self.next % 3 + 1)))
    }
}

/// Records each event's `tracks` by the event's position in the job.
struct ByPosition(std::sync::Arc<std::sync::Mutex<std::collections::BTreeMap<u64, u64>>>);

impl evflow_core::Transitions for ByPosition {}

impl evflow_core::Analyzer for ByPosition {
    fn analyze(&self, event: &evflow_core::Event<'_>) -> evflow_core::ModuleResult {
        let tracks: &u64 = event.get("tracks")?;
        self.0.lock().unwrap().insert(event.index(), *tracks);
        Ok(())
    }
}

fn products_by_position(ctx: Option<&DeviceContext>) -> std::collections::BTreeMap<u64, u64> {
    let seen = std::sync::Arc::default();
    let mut p = Process::new("repeated");
    p.set_source(RepeatedIds { next: 0 });
    p.add(match ctx {
        Some(ctx) => synthetic_device("tracks", spec(true), &["source:n"], &[""], ctx).unwrap(),
        None => synthetic::producer("tracks", Timing::zero(), &["source:n"], &[""]),
    });
    p.add(
        evflow_core::ModuleDesc::analyzer("record", ByPosition(std::sync::Arc::clone(&seen)))
            .consumes(["tracks"]),
    );
    p.end_path("e", ["record"]);
    run(
        p,
        &run_opts(2, 16, ExecutorKind::Threaded, ErrorPolicy::Fail),
    )
    .unwrap();
    std::sync::Arc::try_unwrap(seen)
        .unwrap()
        .into_inner()
        .unwrap()
}

/// Events of one id in flight at once each get their own results from a
/// device launch (the results were matched by id: the job failed, or
/// under skip-event events silently took each other's products).
#[test]
fn events_that_share_an_id_keep_their_own_device_results() {
    let reference = products_by_position(None);
    assert_eq!(reference.len() as u64, EVENTS);
    for split in [
        SplitMode::Fixed(1.0),
        SplitMode::Fixed(0.5),
        SplitMode::Adaptive,
    ] {
        let ctx = emulated(EmulatedConfig::default(), options(split, 8, 16));
        assert_eq!(products_by_position(Some(&ctx)), reference, "{split:?}");
    }
}

/// Options out of range are refused by name when a device module is built,
/// and when a job begins after they were changed (they were taken as
/// given: a split of 7, no host threads).
#[test]
fn device_options_out_of_range_are_refused_by_name() {
    for (bad, expected) in [
        (
            DeviceOptions {
                split: SplitMode::Fixed(7.0),
                ..DeviceOptions::default()
            },
            "the fixed split fraction must be from 0 to 1 (the device's share), not 7",
        ),
        (
            DeviceOptions {
                split: SplitMode::Fixed(f64::NAN),
                ..DeviceOptions::default()
            },
            "not NaN",
        ),
        (
            DeviceOptions {
                host_threads: 0,
                ..DeviceOptions::default()
            },
            "host_threads must be at least 1, not 0",
        ),
        (
            DeviceOptions {
                combine: CombinePolicy {
                    max_events: 0,
                    ..CombinePolicy::default()
                },
                ..DeviceOptions::default()
            },
            "combine.max_events must be at least 1, not 0",
        ),
    ] {
        let ctx = emulated(EmulatedConfig::default(), bad);
        let e = synthetic_device("tracks", spec(true), &["gen"], &[""], &ctx)
            .expect_err("refused")
            .to_string();
        assert!(e.contains(expected), "{e}");
        // Built with good options, changed before the job: its start fails.
        let ctx = emulated(EmulatedConfig::default(), DeviceOptions::default());
        let (p, _) = job(Some(&ctx), spec(true));
        ctx.set_options(bad);
        let e = job_failure(p);
        assert!(
            e.contains("device module 'tracks'") && e.contains(expected),
            "{e}"
        );
    }
}
