//! Benchmark 4 of `bench/device.py`: events/s of a module drawing 10⁴
//! random numbers per event, three ways: the host generates them; the
//! double-buffered device service; the device without double buffering
//! (each event asks the device for its numbers and waits for them).
//!
//! `cargo run --release -p evflow-device --example prng -- EVENTS THREADS [DEVICE]`
//!
//! DEVICE is `emulated` (the default) or, in a build with `--features
//! cuda`, `cuda` (GPU 0, the stream's CUDA kernel). Every way's numbers are
//! checked against the host's stream (the sum of each event's numbers).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::channel;
use std::time::Instant;

use evflow_core::{
    EmptySource, Event, ModuleDesc, ModuleResult, Process, Producer, RunOptions, Transitions, run,
};
use evflow_device::{
    Device, EmulatedConfig, EmulatedDevice, Launch, RandomService, StreamFill, stream_value,
};

const PER_EVENT: usize = 10_000;
const SEED: u64 = 1;
/// Modelled device time per number (a GPU generates ~10¹¹ numbers/s).
const COST_PER_NUMBER_S: f64 = 1e-11;

enum Way {
    Host(AtomicU64),
    Service(RandomService),
    Unbuffered(Arc<dyn Device>, AtomicU64),
}

/// A way of drawing, and the wrapping sum of every number drawn (the same
/// for every way: the check).
struct Draw(Way, AtomicU64);

impl Transitions for Draw {}
impl Producer for Draw {
    fn produce(&self, ev: &Event<'_>) -> ModuleResult {
        let numbers: Vec<u64> = match &self.0 {
            Way::Host(cursor) => {
                let base = cursor.fetch_add(PER_EVENT as u64, Ordering::Relaxed);
                (base..base + PER_EVENT as u64)
                    .map(|i| stream_value(SEED, i))
                    .collect()
            }
            Way::Service(s) => {
                let mut v = Vec::with_capacity(PER_EVENT);
                s.draw(PER_EVENT, &mut v);
                v
            }
            Way::Unbuffered(device, cursor) => {
                let base = cursor.fetch_add(PER_EVENT as u64, Ordering::Relaxed);
                let (tx, rx) = channel();
                let launch = Launch {
                    module: "draw".into(),
                    kernel: Arc::new(StreamFill::new(PER_EVENT)),
                    input: StreamFill::input(base, SEED).into(),
                    out_offsets: vec![0, PER_EVENT * 8],
                    work_s: COST_PER_NUMBER_S * PER_EVENT as f64,
                };
                device.submit(
                    launch,
                    Box::new(move |r| {
                        let _ = tx.send(r);
                    }),
                );
                let out = rx
                    .recv()
                    .map_err(|_| evflow_core::ModuleError::msg("device gone"))??;
                out.output
                    .chunks_exact(8)
                    .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                    .collect()
            }
        };
        let sum = numbers.iter().fold(0u64, |a, &x| a.wrapping_add(x));
        self.1.fetch_add(sum, Ordering::Relaxed);
        ev.put("", sum)
    }
}

/// Events/s of a way, and the sum of the numbers its events drew.
fn rate(way: Way, events: u64, threads: usize) -> (f64, u64) {
    let module = Arc::new(Draw(way, AtomicU64::new(0)));
    // The job owns the module; the service's figures are read from a clone.
    struct Shared(Arc<Draw>);
    impl Transitions for Shared {}
    impl Producer for Shared {
        fn produce(&self, ev: &Event<'_>) -> ModuleResult {
            self.0.produce(ev)
        }
    }
    let mut p = Process::new("prng");
    p.set_source(EmptySource::new(events));
    p.add(ModuleDesc::producer("draw", Shared(module.clone())).produces([""]));
    p.add(evflow_workloads::analyzer(
        "use",
        evflow_workloads::Timing::zero(),
        &["draw"],
    ));
    p.end_path("e", ["use"]);
    let t0 = Instant::now();
    let options = RunOptions {
        threads,
        events_in_flight: threads * 2,
        ..RunOptions::default()
    };
    run(p, &options).expect("the benchmark job runs");
    let rate = events as f64 / t0.elapsed().as_secs_f64();
    (rate, module.1.load(Ordering::Relaxed))
}

/// A new device of the kind named on the command line.
fn open(kind: &str) -> Arc<dyn Device> {
    match kind {
        "emulated" => Arc::new(EmulatedDevice::new(EmulatedConfig::default())),
        #[cfg(feature = "cuda")]
        "cuda" => Arc::new(evflow_device::CudaDevice::open(0, 2).unwrap_or_else(|e| {
            eprintln!("prng: {e}");
            std::process::exit(1)
        })),
        other => {
            eprintln!(
                "prng: unknown device '{other}' (emulated{})",
                if cfg!(feature = "cuda") {
                    ", cuda"
                } else {
                    "; cuda needs --features cuda"
                }
            );
            std::process::exit(2)
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let events: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(4000);
    let threads: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(2);
    let kind = args.get(3).map_or("emulated", String::as_str);
    let (host, expected) = rate(Way::Host(AtomicU64::new(0)), events, threads);
    let service = RandomService::new(SEED, 1 << 20, Some(open(kind)), COST_PER_NUMBER_S);
    if let Some(error) = service.device_error() {
        eprintln!("prng: the service's device cannot fill: {error}");
        std::process::exit(1);
    }
    let (buffered, buffered_sum) = rate(Way::Service(service.clone()), events, threads);
    let stats = service.stats();
    let device = open(kind);
    if let Err(e) = device.prepare(&StreamFill::new(PER_EVENT)) {
        eprintln!("prng: {e}");
        std::process::exit(1);
    }
    let (unbuffered, unbuffered_sum) =
        rate(Way::Unbuffered(device, AtomicU64::new(0)), events, threads);
    if buffered_sum != expected || unbuffered_sum != expected {
        eprintln!(
            "prng: the numbers differ from the host's stream (sums {buffered_sum:#x} buffered, \
             {unbuffered_sum:#x} unbuffered, {expected:#x} host)"
        );
        std::process::exit(1);
    }
    println!(
        "{{\"device\": \"{kind}\", \"host\": {host:.1}, \"double_buffered\": {buffered:.1}, \
         \"unbuffered\": {unbuffered:.1}, \"from_device\": {}, \"from_host\": {}, \"fills\": {}}}",
        stats.from_device, stats.from_host, stats.fills
    );
}
