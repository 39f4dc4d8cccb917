//! The CUDA backend (cargo feature `cuda`): kernels compiled at run time by
//! NVRTC from [`Kernel::source`] and cached per kernel name; each launch is
//! one stream's copy in, kernel and copy out, run by whichever of the
//! backend's worker threads (one CUDA stream each) is free, so successive
//! launches overlap on the GPU while no evflow thread waits. The workers
//! wait for their streams by sleeping (blocking synchronisation), leaving
//! the host's cores to the host side. The driver and NVRTC are loaded at
//! run time; without them [`CudaDevice::open`] returns
//! [`DeviceError::Unavailable`] instead of letting the driver bindings abort
//! the process.
//!
//! Kernel ABI: `extern "C" __global__ void evflow_kernel(const unsigned char*
//! in, const unsigned long long* in_offsets, unsigned char* out, const
//! unsigned long long* out_offsets, unsigned long long n, unsigned long long
//! param)`; `param` is [`Kernel::param`]. A launch starts `n × T` threads
//! in blocks of 256, `T` = [`Kernel::threads_per_invocation`] (1 by
//! default): thread `tid` works on invocation `tid / T`, lane `tid % T`,
//! and threads with `tid / T >= n` return at once. Every kernel is compiled
//! with [`compile_options`] (no FMA contraction, IEEE division and square
//! root).
//!
//! Staging: each stream's worker keeps pinned host buffers and device
//! buffers (input, offsets, output), grown on demand and reused, so a
//! launch allocates nothing and copies at the link's full bandwidth; with
//! two streams one launch's transfers overlap the other's kernel (double
//! buffering). A launch's input arrives as its events' own packed buffers
//! ([`crate::LaunchInput`]), copied piece by piece straight into the pinned
//! buffer: the one host copy of each input byte before the upload.
//! `LaunchTimes::transfer_in_s` covers that copy and the upload,
//! `transfer_out_s` the download and the copy out.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crossbeam_channel::{Sender, unbounded};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, DeviceRepr, DriverError, LaunchConfig,
    PinnedHostSlice, PushKernelArg, ValidAsZeroBits,
};

use crate::device::{
    Device, DeviceBusy, DeviceError, Kernel, Launch, LaunchDone, LaunchOutput, LaunchTimes,
    call_done, copy_end_to_end, panic_message,
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
    /// The launches, taken by whichever stream's worker is free.
    queue: Sender<Job>,
    streams: usize,
    functions: Mutex<HashMap<String, CudaFunction>>,
    busy: Arc<Busy>,
}

impl std::fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaDevice")
            .field("name", &self.name)
            .field("streams", &self.streams)
            .finish_non_exhaustive()
    }
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
        // Workers wait for their stream by sleeping, not spinning: the
        // host's cores belong to the host side of the split.
        context
            .set_blocking_synchronize()
            .map_err(|e| unavailable(format!("{e:?}")))?;
        let name = format!("{device} ({})", context.name().unwrap_or_default());
        let busy = Arc::new(Busy::default());
        let (queue, jobs) = unbounded::<Job>();
        let streams = streams.max(1);
        for s in 0..streams {
            let stream = context
                .new_stream()
                .map_err(|e| unavailable(format!("{e:?}")))?;
            let (worker_name, busy, rx) = (name.clone(), busy.clone(), jobs.clone());
            std::thread::Builder::new()
                .name(format!("{device}-stream{s}"))
                .spawn(move || {
                    let mut worker = Worker::new(stream);
                    for job in rx {
                        worker.run(&worker_name, job, &busy);
                    }
                })
                .map_err(|e| unavailable(format!("{e:?}")))?;
        }
        Ok(Self {
            name,
            context,
            queue,
            streams,
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

/// A pinned (page-locked) host buffer and a device buffer of the same
/// capacity, reused from launch to launch and grown (to a power of two)
/// when a launch needs more: copies from pinned memory run at the link's
/// full bandwidth and asynchronously, and no launch allocates.
struct Staged<T> {
    buffers: Option<(PinnedHostSlice<T>, CudaSlice<T>)>,
    /// `cuMemHostAlloc` flags: write-combined for buffers the host only
    /// writes (uploads), none for those it reads back.
    flags: u32,
}

/// A buffer missing right after its allocation (not expected).
const NO_BUFFER: DriverError = DriverError(cudarc::driver::sys::CUresult::CUDA_ERROR_INVALID_VALUE);

impl<T: DeviceRepr + ValidAsZeroBits + Copy> Staged<T> {
    fn new(flags: u32) -> Self {
        Self {
            buffers: None,
            flags,
        }
    }

    fn capacity(&self) -> usize {
        self.buffers.as_ref().map_or(0, |(host, _)| host.len())
    }

    /// Buffers of at least `len` elements (at least one).
    fn reserve(
        &mut self,
        stream: &Arc<CudaStream>,
        len: usize,
    ) -> Result<&mut (PinnedHostSlice<T>, CudaSlice<T>), DriverError> {
        if self.capacity() < len.max(1) {
            // Free the smaller buffers first; the stream is idle between
            // launches (each launch synchronises before its callback).
            self.buffers = None;
            let capacity = len.max(1).next_power_of_two();
            // SAFETY: the pinned allocation is uninitialised; it is zeroed
            // just below, before anything reads it.
            let mut host = unsafe {
                stream
                    .context()
                    .alloc_pinned_with_flags::<T>(capacity, self.flags)
            }?;
            let ptr = host.as_mut_ptr()?;
            // SAFETY: `ptr` is the start of the `capacity` elements of `T`
            // just allocated (page-locked, aligned, owned by `host`, which
            // no one else uses yet), and zero bits are a valid `T`
            // (`ValidAsZeroBits`).
            unsafe { std::ptr::write_bytes(ptr, 0, capacity) };
            let device = stream.alloc_zeros::<T>(capacity)?;
            self.buffers = Some((host, device));
        }
        self.buffers.as_mut().ok_or(NO_BUFFER)
    }

    /// Copies `data` into the pinned buffer and queues its copy to the
    /// device on `stream`.
    fn upload(&mut self, stream: &Arc<CudaStream>, data: &[T]) -> Result<(), DriverError> {
        self.upload_pieces(stream, std::iter::once(data))
    }

    /// Copies `pieces` end to end into the pinned buffer (each byte once,
    /// straight from its piece) and queues their copy to the device on
    /// `stream` as one transfer.
    fn upload_pieces<'a>(
        &mut self,
        stream: &Arc<CudaStream>,
        pieces: impl Iterator<Item = &'a [T]> + Clone,
    ) -> Result<(), DriverError>
    where
        T: 'a,
    {
        let n: usize = pieces.clone().map(<[T]>::len).sum();
        let (host, device) = self.reserve(stream, n)?;
        copy_end_to_end(pieces, host.as_mut_slice()?);
        if n > 0 {
            stream.memcpy_htod(&host.as_slice()?[..n], &mut device.slice_mut(..n))?;
        }
        Ok(())
    }

    /// Queues zeroing the first `len` elements of the device buffer (a
    /// kernel's output bytes it does not write are 0, not a previous
    /// launch's).
    fn zeroed(&mut self, stream: &Arc<CudaStream>, len: usize) -> Result<(), DriverError> {
        let (_, device) = self.reserve(stream, len)?;
        if len > 0 {
            stream.memset_zeros(&mut device.slice_mut(..len))?;
        }
        Ok(())
    }

    /// Queues the copy of the first `len` elements of the device buffer
    /// into the pinned buffer on `stream`.
    fn download(&mut self, stream: &Arc<CudaStream>, len: usize) -> Result<(), DriverError> {
        let (host, device) = self.reserve(stream, len)?;
        if len > 0 {
            stream.memcpy_dtoh(&device.slice(..len), &mut host.as_mut_slice()?[..len])?;
        }
        Ok(())
    }

    /// The first `len` elements of the pinned buffer (after the stream
    /// was synchronised).
    fn host(&self, len: usize) -> Result<Vec<T>, DriverError> {
        match &self.buffers {
            Some((host, _)) => Ok(host.as_slice()?[..len].to_vec()),
            None if len == 0 => Ok(Vec::new()),
            None => Err(NO_BUFFER),
        }
    }

    fn device(&self) -> Result<&CudaSlice<T>, DriverError> {
        self.buffers.as_ref().map(|(_, d)| d).ok_or(NO_BUFFER)
    }
}

/// One stream and its staging buffers: the two streams of a device each
/// have theirs, so one's transfers overlap the other's kernel.
struct Worker {
    stream: Arc<CudaStream>,
    input: Staged<u8>,
    in_offsets: Staged<u64>,
    out_offsets: Staged<u64>,
    output: Staged<u8>,
}

/// Threads of a launch's blocks.
const BLOCK: u64 = 256;

/// One thread per invocation and lane, in blocks of [`BLOCK`].
fn launch_config(items: u64, threads_per_invocation: u32) -> Result<LaunchConfig, String> {
    let threads = items.saturating_mul(u64::from(threads_per_invocation.max(1)));
    let block = threads.clamp(1, BLOCK);
    let blocks = threads.div_ceil(block).max(1);
    let grid = u32::try_from(blocks)
        .ok()
        .filter(|&g| g <= i32::MAX as u32)
        .ok_or_else(|| format!("{threads} threads do not fit in one grid"))?;
    Ok(LaunchConfig {
        grid_dim: (grid, 1, 1),
        block_dim: (block as u32, 1, 1),
        shared_mem_bytes: 0,
    })
}

impl Worker {
    fn new(stream: Arc<CudaStream>) -> Self {
        let combined = cudarc::driver::sys::CU_MEMHOSTALLOC_WRITECOMBINED;
        Self {
            stream,
            input: Staged::new(combined),
            in_offsets: Staged::new(combined),
            out_offsets: Staged::new(combined),
            output: Staged::new(0),
        }
    }

    /// One launch: copy in, kernel, copy out, then the callback.
    fn run(&mut self, device: &str, job: Job, busy: &Busy) {
        let Job {
            launch,
            function,
            done,
            submitted,
        } = job;
        // A panic (a backend bug) fails this launch only, and a panicking
        // callback does not stop the stream's worker either.
        let steps = || self.steps(device, &launch, &function, submitted, busy);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(steps)).unwrap_or_else(
            |payload| {
                let message = format!("panic: {}", panic_message(payload.as_ref()));
                Err(launch_error(device, launch.kernel.as_ref(), message))
            },
        );
        call_done(done, result);
    }

    fn steps(
        &mut self,
        device: &str,
        launch: &Launch,
        function: &CudaFunction,
        submitted: Instant,
        busy: &Busy,
    ) -> Result<LaunchOutput, DeviceError> {
        let kernel = launch.kernel.as_ref();
        let stream = self.stream.clone();
        let err = |e: DriverError| {
            let text = format!("{e:?}");
            if text.contains("OUT_OF_MEMORY") {
                DeviceError::OutOfMemory {
                    device: device.into(),
                    kernel: kernel.name().into(),
                    needed: launch.bytes_in() + launch.bytes_out(),
                    capacity: stream
                        .context()
                        .mem_get_info()
                        .map_or(0, |(_, total)| total),
                }
            } else {
                launch_error(device, kernel, text)
            }
        };
        let mut times = LaunchTimes {
            queued_s: submitted.elapsed().as_secs_f64(),
            ..LaunchTimes::default()
        };
        let offsets = |o: &[usize]| o.iter().map(|&x| x as u64).collect::<Vec<u64>>();
        let n = launch.items() as u64;
        let config = launch_config(n, kernel.threads_per_invocation())
            .map_err(|e| launch_error(device, kernel, e))?;
        let t0 = Instant::now();
        let pieces = launch.input.pieces().iter().map(Vec::as_slice);
        self.input.upload_pieces(&stream, pieces).map_err(err)?;
        (self.in_offsets)
            .upload(&stream, &offsets(launch.in_offsets()))
            .map_err(err)?;
        (self.out_offsets)
            .upload(&stream, &offsets(&launch.out_offsets))
            .map_err(err)?;
        self.output
            .zeroed(&stream, launch.bytes_out())
            .map_err(err)?;
        stream.synchronize().map_err(err)?;
        let t1 = Instant::now();
        let param = kernel.param();
        let output = &mut self.output;
        let output_device = match output.buffers.as_mut() {
            Some((_, d)) => d,
            None => return Err(err(NO_BUFFER)),
        };
        let mut args = stream.launch_builder(function);
        args.arg(self.input.device().map_err(err)?);
        args.arg(self.in_offsets.device().map_err(err)?);
        args.arg(output_device);
        args.arg(self.out_offsets.device().map_err(err)?);
        args.arg(&n);
        args.arg(&param);
        // SAFETY: the kernel was compiled from a source that defines
        // `evflow_kernel` with exactly these six parameters (the ABI of
        // this module); the offsets it reads were uploaded in full and
        // every one is within the input / output buffers, which hold at
        // least `bytes_in` / `bytes_out` bytes; threads past the last
        // invocation return at once.
        unsafe { args.launch(config) }.map_err(err)?;
        stream.synchronize().map_err(err)?;
        let t2 = Instant::now();
        output.download(&stream, launch.bytes_out()).map_err(err)?;
        stream.synchronize().map_err(err)?;
        let bytes = output.host(launch.bytes_out()).map_err(err)?;
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
    }
}

/// NVRTC options of every kernel: no contraction of a multiply and an add
/// into a fused multiply-add, IEEE division and square root, denormals
/// kept — what makes f32 kernels give their Rust twins' bits.
pub fn compile_options() -> cudarc::nvrtc::CompileOptions {
    cudarc::nvrtc::CompileOptions {
        fmad: Some(false),
        prec_div: Some(true),
        prec_sqrt: Some(true),
        ftz: Some(false),
        use_fast_math: Some(false),
        ..Default::default()
    }
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
        let ptx = cudarc::nvrtc::compile_ptx_with_opts(source, compile_options())
            .map_err(|e| compile(format!("{e:?}")))?;
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
        let job = Job {
            launch,
            function,
            done,
            submitted: Instant::now(),
        };
        if let Err(failed) = self.queue.send(job) {
            let job = failed.into_inner();
            let error = launch_error(&self.name, job.launch.kernel.as_ref(), "stream stopped");
            (job.done)(Err(error));
        }
    }

    fn overlaps(&self) -> bool {
        self.streams > 1
    }

    fn parallel_launches(&self) -> usize {
        self.streams
    }

    /// One worker per stream stages, launches and copies out; with every
    /// core running an engine thread they wait for a core (measured on an
    /// H200 with 16 cores: the n-body's launches at 16 engine threads took
    /// 2.5–11× their fixed cost at 12 or 14).
    fn service_threads(&self) -> usize {
        self.streams
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

    #[test]
    fn launch_config_starts_a_thread_per_lane() {
        let c = launch_config(3, 1).unwrap();
        assert_eq!((c.grid_dim.0, c.block_dim.0), (1, 3));
        let c = launch_config(10, 1000).unwrap();
        assert_eq!((c.grid_dim.0, c.block_dim.0), (40, 256));
        let c = launch_config(0, 7).unwrap();
        assert_eq!((c.grid_dim.0, c.block_dim.0), (1, 1));
        assert!(launch_config(u64::MAX / 2, u32::MAX).is_err());
    }

    /// The pinned staging (its `unsafe` allocation and zeroing): a round
    /// trip through the device gives the bytes back, the buffers start
    /// zeroed, grow to a power of two and are reused when large enough.
    /// Skipped without a GPU.
    #[test]
    fn staging_round_trips_and_grows() {
        let device = match CudaDevice::open(0, 1) {
            Ok(device) => device,
            Err(e) => {
                eprintln!("skipped: no CUDA device ({e})");
                return;
            }
        };
        let stream = device.context.new_stream().unwrap();
        let mut staged = Staged::<u8>::new(0);
        assert_eq!(staged.capacity(), 0);
        staged.reserve(&stream, 100).unwrap();
        assert_eq!(staged.capacity(), 128);
        assert_eq!(staged.host(128).unwrap(), vec![0u8; 128]);
        let data: Vec<u8> = (0..100u8).collect();
        staged.upload(&stream, &data).unwrap();
        // Clobber the host copy, then bring the device's back.
        staged.buffers.as_mut().unwrap().0.as_mut_slice().unwrap()[..100].fill(7);
        staged.download(&stream, 100).unwrap();
        stream.synchronize().unwrap();
        assert_eq!(staged.host(100).unwrap(), data);
        staged.upload(&stream, &data[..10]).unwrap();
        assert_eq!(staged.capacity(), 128);
        // Pieces, empty ones among them, land end to end.
        let pieces: [&[u8]; 4] = [&data[..30], &[], &data[30..31], &data[31..]];
        staged.upload_pieces(&stream, pieces.into_iter()).unwrap();
        staged.buffers.as_mut().unwrap().0.as_mut_slice().unwrap()[..100].fill(7);
        staged.download(&stream, 100).unwrap();
        stream.synchronize().unwrap();
        assert_eq!(staged.host(100).unwrap(), data);
        let big = vec![3u8; 1000];
        staged.upload(&stream, &big).unwrap();
        staged.download(&stream, 1000).unwrap();
        stream.synchronize().unwrap();
        assert_eq!((staged.capacity(), staged.host(1000).unwrap()), (1024, big));
        staged.zeroed(&stream, 10).unwrap();
        staged.download(&stream, 20).unwrap();
        stream.synchronize().unwrap();
        let mut expected = vec![0u8; 10];
        expected.extend([3u8; 10]);
        assert_eq!(staged.host(20).unwrap(), expected);
        let mut words = Staged::<u64>::new(cudarc::driver::sys::CU_MEMHOSTALLOC_WRITECOMBINED);
        words.upload(&stream, &[1, 2, 3]).unwrap();
        assert_eq!(words.capacity(), 4);
    }
}
