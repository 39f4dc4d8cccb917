//! A user's device module whose kernel panics, whose pack fails, whose
//! kernel does not compile, or whose device loses a launch's callback: the
//! launch's events fail, by name, the others go through, the job never
//! hangs (each job runs under a watchdog), and the report counts every call.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use evflow_core::{
    EmptySource, ErrorPolicy, Event, ExecutorKind, ModuleError, ModuleResult, Process, Report,
    RunError, RunOptions, run,
};
use evflow_device::*;
use evflow_workloads::{self as synthetic, Tally, Timing};

const EVENTS: u64 = 60;

/// Squares each invocation's 8 bytes; panics on launch `panic_on`
/// (0-based), after noting that launch's events.
struct Square {
    panic_on: Option<u64>,
    launches: AtomicU64,
    panicked: Arc<Mutex<Vec<u64>>>,
}

impl Kernel for Square {
    fn name(&self) -> &str {
        "square"
    }
    fn run(&self, i: &[u8], io: &[usize], o: &mut [u8], oo: &[usize]) -> Result<(), String> {
        if Some(self.launches.fetch_add(1, Ordering::SeqCst)) == self.panic_on {
            let events = io[..io.len() - 1]
                .iter()
                .map(|&k| u64::from_le_bytes(i[k..k + 8].try_into().unwrap()));
            self.panicked.lock().unwrap().extend(events);
            panic!("boom in the kernel");
        }
        each_invocation(i, io, o, oo, |item, out| {
            let x = u64::from_le_bytes(item.try_into().map_err(|_| "not 8 bytes")?);
            out.copy_from_slice(&x.wrapping_mul(x).to_le_bytes());
            Ok(())
        })
    }
}

/// The user's module: puts the square of the event number.
struct Sq {
    kernel: Arc<Square>,
    fail_pack_on: Vec<u64>,
    /// An event whose pack takes 200 ms.
    slow_pack_on: Option<u64>,
}

impl DeviceProducer for Sq {
    fn produce_host(&self, ev: &Event<'_>) -> ModuleResult {
        let n = ev.id().event;
        ev.put("", n.wrapping_mul(n))
    }
    fn pack(&self, ev: &Event<'_>, buf: &mut Vec<u8>) -> ModuleResult {
        let n = ev.id().event;
        if self.slow_pack_on == Some(n) {
            std::thread::sleep(Duration::from_millis(200));
        }
        if self.fail_pack_on.contains(&n) {
            return Err(ModuleError::msg(format!("pack refuses event {n}")));
        }
        buf.extend_from_slice(&n.to_le_bytes());
        Ok(())
    }
    fn bytes_out(&self, _ev: &Event<'_>) -> usize {
        8
    }
    fn device_cost_s(&self, _ev: &Event<'_>) -> f64 {
        1e-5
    }
    fn kernel(&self) -> Arc<dyn Kernel> {
        self.kernel.clone()
    }
    fn unpack(&self, ev: &Event<'_>, out: &[u8]) -> ModuleResult {
        let value = u64::from_le_bytes(out.try_into().map_err(|_| ModuleError::msg("short"))?);
        ev.put("", value)
    }
}

fn sq(panic_on: Option<u64>, fail_pack_on: Vec<u64>) -> (Sq, Arc<Mutex<Vec<u64>>>) {
    let panicked = Arc::new(Mutex::new(Vec::new()));
    let kernel = Arc::new(Square {
        panic_on,
        launches: AtomicU64::new(0),
        panicked: panicked.clone(),
    });
    let module = Sq {
        kernel,
        fail_pack_on,
        slow_pack_on: None,
    };
    (module, panicked)
}

fn options() -> DeviceOptions {
    DeviceOptions {
        split: SplitMode::Fixed(1.0),
        combine: CombinePolicy {
            max_events: 4,
            ..CombinePolicy::default()
        },
        events_in_flight: 8,
        host_threads: 2,
        ..DeviceOptions::default()
    }
}

fn emulated(config: EmulatedConfig) -> DeviceContext {
    emulated_with(config, options())
}

fn emulated_with(config: EmulatedConfig, options: DeviceOptions) -> DeviceContext {
    DeviceContext::open(&DeviceChoice::Emulated(config), options)
        .unwrap()
        .0
}

/// The emulated device whose launches numbered `launches` (from 0) fail.
fn failing_launches(launches: Vec<u64>) -> EmulatedConfig {
    EmulatedConfig {
        faults: Faults {
            launches,
            ..Faults::default()
        },
        ..EmulatedConfig::default()
    }
}

/// `sq` (device module) → analyzer `sum`.
fn job(ctx: &DeviceContext, module: Sq) -> (Process, Tally) {
    let mut p = Process::new("faults");
    p.set_source(EmptySource::new(EVENTS));
    p.add(offload("sq", module, ctx).unwrap().produces([""]));
    let (sum, tally) = synthetic::analyzer_with_tally("sum", Timing::zero(), &["sq"]);
    p.add(sum);
    p.end_path("e", ["sum"]);
    (p, tally)
}

/// Runs the job on a thread of its own: a job that hangs fails the test
/// after a minute instead of hanging it.
fn watched(p: Process, executor: ExecutorKind, on_error: ErrorPolicy) -> Result<Report, RunError> {
    let options = RunOptions {
        threads: if executor == ExecutorKind::Sequential {
            1
        } else {
            2
        },
        events_in_flight: 8,
        executor,
        on_error,
        ..RunOptions::default()
    };
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(run(p, &options));
    });
    rx.recv_timeout(Duration::from_secs(30))
        .unwrap_or_else(|_| panic!("the job hung ({executor:?}, {on_error:?})"))
}

fn failed(report: &Report) -> Vec<u64> {
    let mut f: Vec<u64> = report.failed_events.iter().map(|e| e.event).collect();
    f.sort_unstable();
    f
}

#[test]
fn a_panicking_kernel_fails_its_launch_only_and_the_device_goes_on() {
    for executor in [ExecutorKind::Threaded, ExecutorKind::Sequential] {
        let ctx = emulated(EmulatedConfig::default());
        let (module, panicked) = sq(Some(2), vec![]);
        let (p, tally) = job(&ctx, module);
        let report = watched(p, executor, ErrorPolicy::SkipEvent).unwrap();
        let mut launch = panicked.lock().unwrap().clone();
        launch.sort_unstable();
        let what = format!("{executor:?}: {report:?}");
        assert!(!launch.is_empty(), "{what}");
        assert_eq!(failed(&report), launch, "{what}");
        let n = launch.len() as u64;
        assert_eq!(tally.events(), EVENTS - n, "{what}");
        // The module is the failed events' (the job's error names it).
        assert!(report.failed_events.iter().all(|e| e.module == "sq"));
        let message = &report.failed_events[0].message;
        let events = launch.iter().map(u64::to_string).collect::<Vec<_>>();
        for part in [
            "device 'emulated:0'".to_string(),
            "kernel 'square'".into(),
            "panic: boom in the kernel".into(),
            format!(
                "one launch of {n} event{}: {}",
                if n == 1 { "" } else { "s" },
                events.join(", ")
            ),
        ] {
            assert!(message.contains(&part), "{part} missing in: {message}");
        }
        let r = &ctx.reports()[0];
        assert_eq!((r.failed_launches, r.failed_calls), (1, n), "{what}");
        assert_eq!(r.device_calls, EVENTS - n, "{what}");
    }
}

#[test]
fn a_panicking_kernel_fails_the_job_with_its_message() {
    let ctx = emulated(EmulatedConfig::default());
    let (module, _) = sq(Some(2), vec![]);
    let (p, _) = job(&ctx, module);
    let err = watched(p, ExecutorKind::Threaded, ErrorPolicy::Fail).unwrap_err();
    let RunError::Failed { error, .. } = err else {
        panic!("{err}")
    };
    let text = error.to_string();
    for part in [
        "'sq'",
        "emulated:0",
        "'square'",
        "panic: boom in the kernel",
    ] {
        assert!(text.contains(part), "{part} missing in: {text}");
    }
}

/// The emulated device, except that it drops the callback of launch
/// `lose` (0-based) without calling it: a backend's bug.
struct Lossy {
    inner: EmulatedDevice,
    lose: u64,
    launches: AtomicU64,
}

impl Device for Lossy {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn prepare(&self, kernel: &dyn Kernel) -> Result<(), DeviceError> {
        self.inner.prepare(kernel)
    }
    fn submit(&self, launch: Launch, done: LaunchDone) {
        if self.launches.fetch_add(1, Ordering::SeqCst) == self.lose {
            self.inner.submit(launch, Box::new(|_| {}));
            drop(done);
        } else {
            self.inner.submit(launch, done);
        }
    }
    fn overlaps(&self) -> bool {
        self.inner.overlaps()
    }
    fn busy(&self) -> DeviceBusy {
        self.inner.busy()
    }
}

#[test]
fn a_callback_dropped_by_the_device_fails_its_launch_and_the_job_goes_on() {
    let device = Lossy {
        inner: EmulatedDevice::new(EmulatedConfig::default()),
        lose: 1,
        launches: AtomicU64::new(0),
    };
    // One launch in flight at most: a launch never counted as landed would
    // hold every later batch back, and the job would hang.
    // The last batch (60 = 8 × 7 + 4) goes by time-out or when idle.
    let mut o = options();
    o.combine.max_in_flight = 1;
    o.combine.max_events = 7;
    let ctx = DeviceContext::with_device(Some(Arc::new(device)), o);
    let (module, _) = sq(None, vec![]);
    let (p, tally) = job(&ctx, module);
    let report = watched(p, ExecutorKind::Threaded, ErrorPolicy::SkipEvent).unwrap();
    let n = report.failed_events.len() as u64;
    assert!((1..=7).contains(&n), "{report:?}");
    assert!(
        report.failed_events[0]
            .message
            .contains("dropped the launch without reporting its end"),
        "{report:?}"
    );
    assert_eq!(tally.events(), EVENTS - n);
    let r = &ctx.reports()[0];
    assert_eq!((r.failed_launches, r.failed_calls), (1, n));
}

#[test]
fn host_device_and_failed_calls_add_up_to_the_calls() {
    // A failed launch (its 4 events at most) and two failing packs.
    let ctx = emulated(failing_launches(vec![3]));
    let (module, _) = sq(None, vec![7, 40]);
    let (p, tally) = job(&ctx, module);
    let report = watched(p, ExecutorKind::Threaded, ErrorPolicy::SkipEvent).unwrap();
    let failed = failed(&report);
    assert!(failed.contains(&7) && failed.contains(&40), "{failed:?}");
    let r = &ctx.reports()[0];
    assert_eq!(r.failed_launches, 1);
    assert_eq!(r.failed_calls, failed.len() as u64);
    assert!(r.failed_calls > 2, "{r:?}");
    assert_eq!(r.host_calls + r.device_calls + r.failed_calls, EVENTS);
    assert_eq!(tally.events() + r.failed_calls, EVENTS);
}

#[test]
fn the_events_of_a_failed_launch_are_listed_in_order() {
    // Event 1's pack is slow: events 2..=8 wait in the combiner before it
    // (the count, 8, is reached when it comes), and the launch fails.
    let mut o = options();
    o.combine.max_events = 8;
    o.combine.timeout_s = 60.0;
    let ctx = emulated_with(failing_launches(vec![0]), o);
    let (mut module, _) = sq(None, vec![]);
    module.slow_pack_on = Some(1);
    let (p, _) = job(&ctx, module);
    let report = watched(p, ExecutorKind::Threaded, ErrorPolicy::SkipEvent).unwrap();
    let message = &report.failed_events[0].message;
    assert!(
        message.ends_with("(one launch of 8 events: 1, 2, 3, 4, 5, 6, 7, 8)"),
        "{message}"
    );
}

#[test]
fn a_launch_of_one_event_says_event() {
    let mut o = options();
    o.combine.max_events = 1;
    let ctx = emulated_with(failing_launches(vec![0]), o);
    let (module, _) = sq(None, vec![]);
    let (p, _) = job(&ctx, module);
    let report = watched(p, ExecutorKind::Threaded, ErrorPolicy::SkipEvent).unwrap();
    let message = &report.failed_events[0].message;
    assert!(message.contains("(one launch of 1 event: "), "{message}");
}

#[test]
fn a_kernel_that_does_not_compile_names_the_module() {
    let config = EmulatedConfig {
        faults: Faults {
            compile: vec!["square".into()],
            ..Faults::default()
        },
        ..EmulatedConfig::default()
    };
    let ctx = emulated(config);
    let (module, _) = sq(None, vec![]);
    let err = offload("sq", module, &ctx).err().unwrap();
    assert_eq!(
        err.to_string(),
        "device module 'sq': device 'emulated:0': kernel 'square' failed to compile: \
         emulated compilation failure (configured fault)"
    );
    // Without the module, for a caller that names it itself.
    assert!(matches!(err.unlabelled(), DeviceError::Compile { .. }));
    assert!(
        err.unlabelled()
            .to_string()
            .starts_with("device 'emulated:0'")
    );
}
