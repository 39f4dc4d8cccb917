//! Benchmark 4 of `bench/device.py`: events/s of a module drawing 10⁴
//! random numbers per event, three ways: the host generates them; the
//! double-buffered device service; the device without double buffering
//! (each event asks the device for its numbers and waits for them).
//!
//! `cargo run --release -p evflow-device --example prng -- EVENTS THREADS`

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::channel;
use std::time::Instant;

use evflow_core::{
    EmptySource, Event, ModuleDesc, ModuleResult, Process, Producer, RunOptions, Transitions, run,
};
use evflow_device::{
    Device, EmulatedConfig, EmulatedDevice, Kernel, Launch, RandomService, stream_value,
};

const PER_EVENT: usize = 10_000;
/// Modelled device time per number (a GPU generates ~10¹¹ numbers/s).
const COST_PER_NUMBER_S: f64 = 1e-11;

enum Way {
    Host(AtomicU64),
    Service(RandomService),
    Unbuffered(Arc<dyn Device>, AtomicU64),
}

struct Draw(Way);

struct Fill;
impl Kernel for Fill {
    fn name(&self) -> &str {
        "fill"
    }
    fn run(&self, i: &[u8], _: &[usize], o: &mut [u8], _: &[usize]) -> Result<(), String> {
        let base = u64::from_le_bytes(i[..8].try_into().map_err(|_| "base")?);
        for (k, c) in o.chunks_exact_mut(8).enumerate() {
            c.copy_from_slice(&stream_value(1, base + k as u64).to_le_bytes());
        }
        Ok(())
    }
}

impl Transitions for Draw {}
impl Producer for Draw {
    fn produce(&self, ev: &Event<'_>) -> ModuleResult {
        let numbers: Vec<u64> = match &self.0 {
            Way::Host(cursor) => {
                let base = cursor.fetch_add(PER_EVENT as u64, Ordering::Relaxed);
                (base..base + PER_EVENT as u64)
                    .map(|i| stream_value(1, i))
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
                    kernel: Arc::new(Fill),
                    input: base.to_le_bytes().to_vec(),
                    in_offsets: vec![0, 8],
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
        ev.put("", numbers.iter().fold(0u64, |a, &x| a.wrapping_add(x)))
    }
}

fn rate(way: Way, events: u64, threads: usize) -> f64 {
    let module = Arc::new(Draw(way));
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
    events as f64 / t0.elapsed().as_secs_f64()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let events: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(4000);
    let threads: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(2);
    let device = || Arc::new(EmulatedDevice::new(EmulatedConfig::default())) as Arc<dyn Device>;
    let host = rate(Way::Host(AtomicU64::new(0)), events, threads);
    let service = RandomService::new(1, 1 << 20, Some(device()), COST_PER_NUMBER_S);
    let buffered = rate(Way::Service(service.clone()), events, threads);
    let stats = service.stats();
    let unbuffered = rate(
        Way::Unbuffered(device(), AtomicU64::new(0)),
        events,
        threads,
    );
    println!(
        "{{\"host\": {host:.1}, \"double_buffered\": {buffered:.1}, \"unbuffered\": {unbuffered:.1}, \
         \"from_device\": {}, \"from_host\": {}, \"fills\": {}}}",
        stats.from_device, stats.from_host, stats.fills
    );
}
