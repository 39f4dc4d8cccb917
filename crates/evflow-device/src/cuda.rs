//! The CUDA backend (cargo feature `cuda`): kernels compiled at run time by
//! NVRTC from [`Kernel::source`] and cached per kernel name; each launch is
//! one stream's copy in, kernel and copy out, run by one of the backend's
//! worker threads (one CUDA stream each), so successive launches overlap on
//! the GPU while no evflow thread waits. The driver and NVRTC are loaded at
//! run time; without them [`CudaDevice::open`] returns
//! [`DeviceError::Unavailable`] instead of letting the driver bindings abort
//! the process.
//!
//! Kernel ABI: `extern "C" __global__ void evflow_kernel(const unsigned char*
//! in, const unsigned long long* in_offsets, unsigned char* out, const
//! unsigned long long* out_offsets, unsigned long long n, unsigned long long
//! param)`, one thread per invocation; `param` is [`Kernel::param`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crossbeam_channel::{Sender, unbounded};
use cudarc::driver::{CudaContext, CudaFunction, CudaStream, LaunchConfig, PushKernelArg};

use crate::device::{
    Device, DeviceBusy, DeviceError, Kernel, Launch, LaunchDone, LaunchOutput, LaunchTimes,
};

/// Name of the entry point every CUDA kernel source defines.
pub const ENTRY: &str = "evflow_kernel";

struct Job {
    launch: Launch,
    function: CudaFunction,
    done: LaunchDone,
    submitted: Instant,
}

#[derive(Default)]
struct Busy {
    transfer_in_ns: AtomicU64,
    kernel_ns: AtomicU64,
    transfer_out_ns: AtomicU64,
    launches: AtomicU64,
}

/// A CUDA GPU.
pub struct CudaDevice {
    name: String,
    context: Arc<CudaContext>,
    workers: Vec<Sender<Job>>,
    next: AtomicUsize,
    functions: Mutex<HashMap<String, CudaFunction>>,
    busy: Arc<Busy>,
}

/// Whether the CUDA driver and NVRTC libraries can be loaded.
pub fn cuda_present() -> bool {
    // SAFETY: these functions try to open the system's CUDA driver and
    // NVRTC shared libraries (running their initialisers, as any use of
    // CUDA does) and report whether that worked; they do not call into them.
    // Probing first is what keeps a machine without CUDA from reaching
    // `CudaContext::new`, which aborts the process there.
    unsafe { cudarc::driver::sys::is_culib_present() && cudarc::nvrtc::sys::is_culib_present() }
}

impl CudaDevice {
    /// Opens GPU `ordinal` with `streams` streams (2 give overlap).
    pub fn open(ordinal: usize, streams: usize) -> Result<Self, DeviceError> {
        let device = format!("cuda:{ordinal}");
        let unavailable = |reason: String| DeviceError::Unavailable {
            device: device.clone(),
            reason,
        };
        if !cuda_present() {
            return Err(unavailable(
                "no CUDA driver (libcuda) or NVRTC library found".into(),
            ));
        }
        let context = CudaContext::new(ordinal).map_err(|e| unavailable(format!("{e:?}")))?;
        let name = format!("{device} ({})", context.name().unwrap_or_default());
        let busy = Arc::new(Busy::default());
        let mut workers = Vec::new();
        for s in 0..streams.max(1) {
            let stream = context
                .new_stream()
                .map_err(|e| unavailable(format!("{e:?}")))?;
            let (tx, rx) = unbounded::<Job>();
            let (worker_name, busy) = (name.clone(), busy.clone());
            std::thread::Builder::new()
                .name(format!("{device}-stream{s}"))
                .spawn(move || {
                    for job in rx {
                        run(&worker_name, &stream, job, &busy);
                    }
                })
                .map_err(|e| unavailable(format!("{e:?}")))?;
            workers.push(tx);
        }
        Ok(Self {
            name,
            context,
            workers,
            next: AtomicUsize::new(0),
            functions: Mutex::new(HashMap::new()),
            busy,
        })
    }
}

fn launch_error(device: &str, kernel: &dyn Kernel, e: impl std::fmt::Display) -> DeviceError {
    let message = e.to_string();
    DeviceError::Launch {
        device: device.into(),
        kernel: kernel.name().into(),
        message,
    }
}

/// One launch on one stream: copy in, kernel, copy out, then the callback.
fn run(device: &str, stream: &Arc<CudaStream>, job: Job, busy: &Busy) {
    let Job {
        launch,
        function,
        done,
        submitted,
    } = job;
    let kernel = launch.kernel.clone();
    let result = (|| {
        let mut times = LaunchTimes {
            queued_s: submitted.elapsed().as_secs_f64(),
            ..LaunchTimes::default()
        };
        let err = |e: cudarc::driver::DriverError| {
            let text = format!("{e:?}");
            if text.contains("OUT_OF_MEMORY") {
                DeviceError::OutOfMemory {
                    device: device.into(),
                    kernel: kernel.name().into(),
                    needed: launch.bytes_in() + launch.bytes_out(),
                    capacity: 0,
                }
            } else {
                launch_error(device, kernel.as_ref(), text)
            }
        };
        let offsets = |o: &[usize]| o.iter().map(|&x| x as u64).collect::<Vec<u64>>();
        let t0 = Instant::now();
        let input = stream.clone_htod(&launch.input).map_err(err)?;
        let ins = stream
            .clone_htod(&offsets(&launch.in_offsets))
            .map_err(err)?;
        let outs = stream
            .clone_htod(&offsets(&launch.out_offsets))
            .map_err(err)?;
        let mut output = stream
            .alloc_zeros::<u8>(launch.bytes_out().max(1))
            .map_err(err)?;
        stream.synchronize().map_err(err)?;
        let t1 = Instant::now();
        let n = launch.items() as u64;
        let param = kernel.param();
        let mut args = stream.launch_builder(&function);
        args.arg(&input);
        args.arg(&ins);
        args.arg(&mut output);
        args.arg(&outs);
        args.arg(&n);
        args.arg(&param);
        // SAFETY: the kernel was compiled from a source that defines
        // `evflow_kernel` with exactly these six parameters (the ABI of
        // this module); every offset it reads is within `input` / `output`,
        // whose sizes the offsets were computed from.
        unsafe { args.launch(LaunchConfig::for_num_elems(n as u32)) }.map_err(err)?;
        stream.synchronize().map_err(err)?;
        let t2 = Instant::now();
        let mut bytes = stream.clone_dtoh(&output).map_err(err)?;
        bytes.truncate(launch.bytes_out());
        let t3 = Instant::now();
        times.transfer_in_s = (t1 - t0).as_secs_f64();
        times.kernel_s = (t2 - t1).as_secs_f64();
        times.transfer_out_s = (t3 - t2).as_secs_f64();
        times.total_s = submitted.elapsed().as_secs_f64();
        for (counter, d) in [
            (&busy.transfer_in_ns, t1 - t0),
            (&busy.kernel_ns, t2 - t1),
            (&busy.transfer_out_ns, t3 - t2),
        ] {
            counter.fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
        }
        busy.launches.fetch_add(1, Ordering::Relaxed);
        Ok(LaunchOutput {
            output: bytes,
            out_offsets: launch.out_offsets.clone(),
            times,
        })
    })();
    done(result);
}

impl Device for CudaDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn prepare(&self, kernel: &dyn Kernel) -> Result<(), DeviceError> {
        let mut functions = self.functions.lock().unwrap_or_else(|e| e.into_inner());
        if functions.contains_key(kernel.name()) {
            return Ok(());
        }
        let compile = |message: String| DeviceError::Compile {
            device: self.name.clone(),
            kernel: kernel.name().into(),
            message,
        };
        let source = kernel
            .source()
            .ok_or_else(|| compile("the kernel has no CUDA source".into()))?;
        let ptx = cudarc::nvrtc::compile_ptx(source).map_err(|e| compile(format!("{e:?}")))?;
        let module = self
            .context
            .load_module(ptx)
            .map_err(|e| compile(format!("{e:?}")))?;
        let function = module
            .load_function(ENTRY)
            .map_err(|e| compile(format!("no {ENTRY}: {e:?}")))?;
        functions.insert(kernel.name().into(), function);
        Ok(())
    }

    fn submit(&self, launch: Launch, done: LaunchDone) {
        let function = self
            .functions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(launch.kernel.name())
            .cloned();
        let Some(function) = function else {
            let error = launch_error(&self.name, launch.kernel.as_ref(), "kernel not prepared");
            done(Err(error));
            return;
        };
        let worker = self.next.fetch_add(1, Ordering::Relaxed) % self.workers.len();
        let job = Job {
            launch,
            function,
            done,
            submitted: Instant::now(),
        };
        if let Err(failed) = self.workers[worker].send(job) {
            let job = failed.into_inner();
            let error = launch_error(&self.name, job.launch.kernel.as_ref(), "stream stopped");
            (job.done)(Err(error));
        }
    }

    fn overlaps(&self) -> bool {
        self.workers.len() > 1
    }

    fn busy(&self) -> DeviceBusy {
        let s = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64 * 1e-9;
        DeviceBusy {
            transfer_in_s: s(&self.busy.transfer_in_ns),
            kernel_s: s(&self.busy.kernel_ns),
            transfer_out_s: s(&self.busy.transfer_out_ns),
            launches: self.busy.launches.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without a driver, opening fails cleanly (this is what CI checks);
    /// with one, the synthetic kernel compiles and computes what the host
    /// computes.
    #[test]
    fn opens_or_says_why_not() {
        match CudaDevice::open(0, 2) {
            Err(e) => assert!(matches!(e, DeviceError::Unavailable { .. }), "{e}"),
            Ok(device) => {
                assert!(device.name().starts_with("cuda:0"));
            }
        }
    }
}
