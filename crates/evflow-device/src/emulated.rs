//! The emulated device: runs kernels (their Rust code) on its own threads
//! with a modelled launch latency, transfer bandwidth and speed-up, so that
//! combining, overlap, the split and every fault are exercised for real on
//! machines without an accelerator.
//!
//! Like a GPU it has separate engines: one copy engine per direction and
//! one compute engine, each a thread, fed in FIFO order. With `overlap` the
//! transfer in of launch n+1, the kernel of launch n and the transfer out of
//! launch n−1 run at once; the staging between engines holds one launch
//! (double buffering: one buffer being worked on, one filled). Without
//! `overlap` one thread does all three steps of a launch before the next.
//! The engines sleep while "busy", so the host's cores stay free, as they
//! would with a real device, and an engine waiting for a launch blocks
//! until it is handed one (`handoff.rs`: no turns given up while the
//! host's cores are busy).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::handoff::{Receiver, Sender, bounded, unbounded};

use crate::device::{
    Device, DeviceBusy, DeviceError, Kernel, Launch, LaunchDone, LaunchOutput, LaunchTimes,
    call_done, panic_message,
};

/// Faults the emulated device can be told to produce (tests of error paths).
#[derive(Clone, Debug, Default)]
pub struct Faults {
    /// Kernels (by name) whose compilation fails.
    pub compile: Vec<String>,
    /// Launches (0-based, in order of submission) that fail.
    pub launches: Vec<u64>,
}

/// Performance model and behaviour of an [`EmulatedDevice`].
#[derive(Clone, Debug)]
pub struct EmulatedConfig {
    pub name: String,
    /// Fixed cost of starting a kernel, in seconds.
    pub launch_latency_s: f64,
    /// Fixed cost of starting a transfer, in seconds.
    pub transfer_latency_s: f64,
    /// Host↔device bandwidth, bytes per second (each direction).
    pub bandwidth_bytes_s: f64,
    /// Kernel time = launch latency + declared device work / speed-up.
    pub speedup: f64,
    /// Transfers and kernels of successive launches overlap.
    pub overlap: bool,
    /// Device memory: a launch needing more (inputs + outputs) fails.
    pub memory_bytes: usize,
    pub faults: Faults,
}

impl Default for EmulatedConfig {
    /// A small discrete GPU: 10 µs launch, 5 µs + 10 GB/s transfers.
    fn default() -> Self {
        Self {
            name: "emulated:0".into(),
            launch_latency_s: 10e-6,
            transfer_latency_s: 5e-6,
            bandwidth_bytes_s: 10e9,
            speedup: 1.0,
            overlap: true,
            memory_bytes: 1 << 30,
            faults: Faults::default(),
        }
    }
}

struct Job {
    launch: Launch,
    done: LaunchDone,
    number: u64,
    submitted: Instant,
    /// Modelled time at which the launch is ready for its next stage.
    ready: Instant,
    times: LaunchTimes,
    /// The launch's input in device memory: its pieces joined by the copy
    /// engine (the transfer in), not by the thread that submitted it.
    input: Vec<u8>,
    output: Vec<u8>,
}

#[derive(Default)]
struct Counters {
    transfer_in_ns: AtomicU64,
    kernel_ns: AtomicU64,
    transfer_out_ns: AtomicU64,
    launches: AtomicU64,
    /// Current speed-up (f64 bits): can change while running (drift).
    speedup_bits: AtomicU64,
}

/// A device emulated by threads: it runs kernels (their Rust code) with a
/// modelled launch latency, transfer bandwidth and speed-up
/// ([`EmulatedConfig`]).
///
/// Like a GPU it has separate engines: one copy engine per direction and
/// one compute engine, each a thread, fed in FIFO order. With `overlap` the
/// transfer in of launch n+1, the kernel of launch n and the transfer out of
/// launch n−1 run at once; the staging between engines holds one launch
/// (double buffering). Without `overlap` one thread does all three steps of
/// a launch before the next. The engines sleep while "busy", so the host's
/// cores stay free, as they would with a real device.
///
/// ```
/// use std::sync::{Arc, mpsc};
/// use evflow_device::{Device, EmulatedConfig, EmulatedDevice, Kernel, Launch, LaunchInput};
///
/// struct Double;
/// impl Kernel for Double {
///     fn name(&self) -> &str { "double" }
///     fn run(&self, i: &[u8], _: &[usize], o: &mut [u8], _: &[usize]) -> Result<(), String> {
///         for (x, y) in i.iter().zip(o.iter_mut()) { *y = x * 2; }
///         Ok(())
///     }
/// }
/// let device = EmulatedDevice::new(EmulatedConfig::default());
/// let (tx, rx) = mpsc::channel();
/// // Two invocations, each with its own packed input.
/// let input: LaunchInput = [vec![1], vec![2, 3]].into_iter().collect();
/// let launch = Launch {
///     module: "m".into(), kernel: Arc::new(Double), input,
///     out_offsets: vec![0, 1, 3], work_s: 1e-4,
/// };
/// device.submit(launch, Box::new(move |r| tx.send(r).unwrap()));
/// let out = rx.recv().unwrap().unwrap();
/// assert_eq!(out.output, vec![2, 4, 6]);
/// assert!(out.times.kernel_s >= 1e-4);
/// ```
pub struct EmulatedDevice {
    config: EmulatedConfig,
    queue: Sender<Job>,
    next: AtomicU64,
    counters: Arc<Counters>,
}

impl EmulatedDevice {
    pub fn new(config: EmulatedConfig) -> Self {
        let counters = Arc::new(Counters::default());
        counters
            .speedup_bits
            .store(config.speedup.max(1e-9).to_bits(), Ordering::Relaxed);
        let (queue, jobs) = unbounded::<Job>();
        let engines = Engines {
            config: config.clone(),
            counters: counters.clone(),
        };
        if config.overlap {
            // Staging between engines holds one launch: double buffering.
            let (to_kernel, kernels) = bounded::<Job>(1);
            let (to_out, outs) = bounded::<Job>(1);
            let e = engines.clone();
            spawn(&config.name, "copy-in", move || {
                e.copy_in_loop(jobs, to_kernel)
            });
            let e = engines.clone();
            spawn(&config.name, "compute", move || {
                e.compute_loop(kernels, to_out)
            });
            let e = engines;
            spawn(&config.name, "copy-out", move || e.copy_out_loop(outs));
        } else {
            spawn(&config.name, "serial", move || engines.serial_loop(jobs));
        }
        Self {
            config,
            queue,
            next: AtomicU64::new(0),
            counters,
        }
    }

    pub fn config(&self) -> &EmulatedConfig {
        &self.config
    }

    /// Changes the speed-up from now on (another job takes part of the
    /// device: the split must follow).
    pub fn set_speedup(&self, speedup: f64) {
        self.counters
            .speedup_bits
            .store(speedup.max(1e-9).to_bits(), Ordering::Relaxed);
    }
}

fn spawn(device: &str, engine: &str, body: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .name(format!("{device}-{engine}"))
        .spawn(body)
        .expect("cannot start an emulated device thread");
}

impl Device for EmulatedDevice {
    fn name(&self) -> &str {
        &self.config.name
    }
    fn prepare(&self, kernel: &dyn Kernel) -> Result<(), DeviceError> {
        if self
            .config
            .faults
            .compile
            .iter()
            .any(|k| k == kernel.name())
        {
            return Err(DeviceError::Compile {
                device: self.config.name.clone(),
                kernel: kernel.name().into(),
                message: "emulated compilation failure (configured fault)".into(),
            });
        }
        Ok(())
    }
    fn submit(&self, launch: Launch, done: LaunchDone) {
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let job = Job {
            launch,
            done,
            number,
            submitted: now,
            ready: now,
            times: LaunchTimes::default(),
            input: Vec::new(),
            output: Vec::new(),
        };
        if let Err(job) = self.queue.send(job) {
            let error = self.launch_error(&job.launch, "the device engines stopped");
            (job.done)(Err(error));
        }
    }
    fn overlaps(&self) -> bool {
        self.config.overlap
    }
    /// One launch per engine (copy in, kernel, copy out) with overlap.
    fn parallel_launches(&self) -> usize {
        if self.config.overlap { 3 } else { 1 }
    }
    fn busy(&self) -> DeviceBusy {
        let s = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64 * 1e-9;
        DeviceBusy {
            transfer_in_s: s(&self.counters.transfer_in_ns),
            kernel_s: s(&self.counters.kernel_ns),
            transfer_out_s: s(&self.counters.transfer_out_ns),
            launches: self.counters.launches.load(Ordering::Relaxed),
        }
    }
}

impl EmulatedDevice {
    fn launch_error(&self, launch: &Launch, message: &str) -> DeviceError {
        DeviceError::Launch {
            device: self.config.name.clone(),
            kernel: launch.kernel.name().into(),
            message: message.into(),
        }
    }
}

#[derive(Clone)]
struct Engines {
    config: EmulatedConfig,
    counters: Arc<Counters>,
}

impl Engines {
    fn transfer_s(&self, bytes: usize) -> f64 {
        self.config.transfer_latency_s + bytes as f64 / self.config.bandwidth_bytes_s.max(1.0)
    }

    /// Transfer in: checks memory, then holds the copy engine.
    fn copy_in(&self, job: &mut Job, free_at: &mut Instant) -> Result<(), DeviceError> {
        let needed = job.launch.bytes_in() + job.launch.bytes_out();
        if needed > self.config.memory_bytes {
            return Err(DeviceError::OutOfMemory {
                device: self.config.name.clone(),
                kernel: job.launch.kernel.name().into(),
                needed,
                capacity: self.config.memory_bytes,
            });
        }
        let start = job.ready.max(*free_at);
        job.times.queued_s = (start - job.submitted).as_secs_f64();
        // Within the modelled transfer: the stage sleeps until its end.
        job.input = job.launch.input.joined();
        let seconds = self.transfer_s(job.launch.bytes_in());
        job.times.transfer_in_s = self.stage(job, free_at, seconds, &self.counters.transfer_in_ns);
        Ok(())
    }

    /// The kernel: runs its code, then holds the compute engine for the
    /// modelled time (or as long as the code took, if longer).
    fn compute(&self, job: &mut Job, free_at: &mut Instant) -> Result<(), DeviceError> {
        let launch = &job.launch;
        let fail = |message: String| DeviceError::Launch {
            device: self.config.name.clone(),
            kernel: launch.kernel.name().into(),
            message,
        };
        if self.config.faults.launches.contains(&job.number) {
            return Err(fail(format!(
                "emulated launch failure of launch {} (configured fault)",
                job.number
            )));
        }
        let ran = Instant::now();
        let mut output = vec![0u8; launch.bytes_out()];
        launch
            .kernel
            .run(
                &job.input,
                launch.in_offsets(),
                &mut output,
                &launch.out_offsets,
            )
            .map_err(fail)?;
        let code_s = ran.elapsed().as_secs_f64();
        let speedup = f64::from_bits(self.counters.speedup_bits.load(Ordering::Relaxed));
        let seconds = (self.config.launch_latency_s + launch.work_s / speedup).max(code_s);
        // The kernel was the input's last reader.
        job.input = Vec::new();
        job.output = output;
        job.times.kernel_s = self.stage(job, free_at, seconds, &self.counters.kernel_ns);
        Ok(())
    }

    fn copy_out(&self, job: &mut Job, free_at: &mut Instant) -> Result<(), DeviceError> {
        let seconds = self.transfer_s(job.launch.bytes_out());
        job.times.transfer_out_s =
            self.stage(job, free_at, seconds, &self.counters.transfer_out_ns);
        self.counters.launches.fetch_add(1, Ordering::Relaxed);
        job.times.total_s = (job.ready - job.submitted).as_secs_f64();
        Ok(())
    }

    /// Runs one step of a launch (an engine's stage); a panic in it (the
    /// kernel's code, or a model's bad figures) fails this launch only,
    /// like an error, and the engine goes on with the next launches.
    fn guarded(
        &self,
        job: &mut Job,
        step: impl FnOnce(&Self, &mut Job) -> Result<(), DeviceError>,
    ) -> Result<(), DeviceError> {
        catch_unwind(AssertUnwindSafe(|| step(self, job))).unwrap_or_else(|payload| {
            Err(DeviceError::Launch {
                device: self.config.name.clone(),
                kernel: job.launch.kernel.name().into(),
                message: format!("panic: {}", panic_message(payload.as_ref())),
            })
        })
    }

    /// The launch's last step: its callback, with the results or the error.
    fn finish(job: Job, result: Result<(), DeviceError>) {
        let result = result.map(|()| LaunchOutput {
            output: job.output,
            out_offsets: job.launch.out_offsets,
            times: job.times,
        });
        call_done(job.done, result);
    }

    /// One stage of a launch on one engine, on the modelled timeline: it
    /// starts when both the launch is ready and the engine free, lasts
    /// `seconds`, and the engine sleeps until its modelled end. A late
    /// wake-up (a loaded machine) is not carried over to later launches:
    /// they start from the modelled end, so the device's throughput is the
    /// model's, whatever the scheduler's jitter.
    fn stage(&self, job: &mut Job, free_at: &mut Instant, seconds: f64, busy: &AtomicU64) -> f64 {
        let start = job.ready.max(*free_at);
        let end = start + Duration::from_secs_f64(seconds.max(0.0));
        sleep_until(end);
        *free_at = end;
        job.ready = end;
        busy.fetch_add((end - start).as_nanos() as u64, Ordering::Relaxed);
        seconds
    }

    fn copy_in_loop(self, jobs: Receiver<Job>, next: Sender<Job>) {
        let mut free_at = Instant::now();
        for mut job in jobs {
            match self.guarded(&mut job, |e, job| e.copy_in(job, &mut free_at)) {
                Ok(()) => {
                    if let Err(job) = next.send(job) {
                        fail_stopped(&self.config.name, job);
                    }
                }
                Err(e) => Self::finish(job, Err(e)),
            }
        }
    }

    fn compute_loop(self, jobs: Receiver<Job>, next: Sender<Job>) {
        let mut free_at = Instant::now();
        for mut job in jobs {
            match self.guarded(&mut job, |e, job| e.compute(job, &mut free_at)) {
                Ok(()) => {
                    if let Err(job) = next.send(job) {
                        fail_stopped(&self.config.name, job);
                    }
                }
                Err(e) => Self::finish(job, Err(e)),
            }
        }
    }

    fn copy_out_loop(self, jobs: Receiver<Job>) {
        let mut free_at = Instant::now();
        for mut job in jobs {
            let result = self.guarded(&mut job, |e, job| e.copy_out(job, &mut free_at));
            Self::finish(job, result);
        }
    }

    fn serial_loop(self, jobs: Receiver<Job>) {
        // One engine: every stage of a launch before the next launch.
        let mut free_at = Instant::now();
        for mut job in jobs {
            let result = self.guarded(&mut job, |e, job| {
                e.copy_in(job, &mut free_at)?;
                e.compute(job, &mut free_at)?;
                e.copy_out(job, &mut free_at)
            });
            Self::finish(job, result);
        }
    }
}

fn fail_stopped(device: &str, job: Job) {
    let error = DeviceError::Launch {
        device: device.into(),
        kernel: job.launch.kernel.name().into(),
        message: "the device engines stopped".into(),
    };
    call_done(job.done, Err(error));
}

/// Sleeps until `end` (not at all if it passed).
fn sleep_until(end: Instant) {
    let now = Instant::now();
    if end > now {
        std::thread::sleep(end - now);
    }
}

impl std::fmt::Debug for EmulatedDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmulatedDevice")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}
