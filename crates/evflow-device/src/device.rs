//! The device model: a [`Device`] runs [`Launch`]es asynchronously — one
//! packed transfer in, one kernel over a batch of invocations, one transfer
//! out — and reports each launch's end through a callback. Nobody waits on a
//! device: the callback resumes the events (the engine's external-work path).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use serde::Serialize;

/// The device code of a module: runs over a whole batch of invocations.
///
/// `input` holds the packed inputs of every invocation (the launch's
/// [`LaunchInput`] pieces joined end to end), invocation `i` in
/// `input[in_offsets[i]..in_offsets[i + 1]]`; the kernel writes invocation
/// `i`'s result into `output[out_offsets[i]..out_offsets[i + 1]]`.
/// On the emulated device this Rust code is the kernel; a GPU backend
/// compiles [`Kernel::source`] instead and must compute the same bytes.
pub trait Kernel: Send + Sync {
    /// Name of the kernel (errors, caches, traces).
    fn name(&self) -> &str;
    /// Source for a run-time compiling backend (CUDA C for NVRTC), if any.
    fn source(&self) -> Option<&str> {
        None
    }
    /// The kernel's one scalar parameter for a GPU backend (the `param`
    /// argument of the CUDA entry point `evflow_kernel`).
    fn param(&self) -> u64 {
        0
    }
    /// GPU threads per invocation (at least 1): a GPU backend starts
    /// `invocations × threads_per_invocation` threads and thread `tid`
    /// works on invocation `tid / T`, lane `tid % T` (e.g. one thread per
    /// particle or per element). The Rust code ([`Kernel::run`]) ignores it.
    fn threads_per_invocation(&self) -> u32 {
        1
    }
    /// Runs the kernel over a batch.
    fn run(
        &self,
        input: &[u8],
        in_offsets: &[usize],
        output: &mut [u8],
        out_offsets: &[usize],
    ) -> Result<(), String>;
}

/// The loop of a [`Kernel::run`]: calls `each(item, out)` with every
/// invocation's input and output bytes, bounds-checked (offsets beyond
/// the buffers are an error, not a panic); an error names the invocation.
///
/// ```
/// use evflow_device::each_invocation;
///
/// // Two invocations: their inputs doubled into their outputs.
/// let (input, mut output) = ([1u8, 2, 3], [0u8; 3]);
/// each_invocation(&input, &[0, 1, 3], &mut output, &[0, 1, 3], |item, out| {
///     for (o, i) in out.iter_mut().zip(item) {
///         *o = 2 * i;
///     }
///     Ok(())
/// })
/// .unwrap();
/// assert_eq!(output, [2, 4, 6]);
/// // An offset past the input is named, not a panic.
/// let e = each_invocation(&input, &[0, 9], &mut output, &[0, 1], |_, _| Ok(())).unwrap_err();
/// assert_eq!(e, "invocation 0: offsets out of the buffers");
/// ```
pub fn each_invocation(
    input: &[u8],
    in_offsets: &[usize],
    output: &mut [u8],
    out_offsets: &[usize],
    mut each: impl FnMut(&[u8], &mut [u8]) -> Result<(), String>,
) -> Result<(), String> {
    for i in 0..in_offsets.len().saturating_sub(1) {
        let item = in_offsets
            .get(i + 1)
            .and_then(|&end| input.get(in_offsets[i]..end));
        let out = match (out_offsets.get(i), out_offsets.get(i + 1)) {
            (Some(&start), Some(&end)) => output.get_mut(start..end),
            _ => None,
        };
        let (Some(item), Some(out)) = (item, out) else {
            return Err(format!("invocation {i}: offsets out of the buffers"));
        };
        each(item, out).map_err(|e| format!("invocation {i}: {e}"))?;
    }
    Ok(())
}

/// Little-endian 64-bit word `k` of `bytes`, if it has one.
pub(crate) fn word(bytes: &[u8], k: usize) -> Option<u64> {
    let b = bytes.get(k * 8..k * 8 + 8)?;
    Some(u64::from_le_bytes(b.try_into().ok()?))
}

/// A launch's packed inputs: one piece per invocation, each the buffer
/// its module packed, moved in as it is. Invocation `i`'s bytes are piece
/// `i`, and `offsets()[i]..offsets()[i + 1]` of the launch's input as a
/// kernel sees it (the pieces end to end). Nothing joins the pieces on the
/// thread that closes a batch: each backend copies them once, straight
/// into where it needs them (a GPU's pinned staging buffer; the emulated
/// device's memory, on its copy engine).
///
/// ```
/// use evflow_device::LaunchInput;
///
/// let input: LaunchInput = [vec![1u8, 2], vec![], vec![3]].into_iter().collect();
/// assert_eq!((input.items(), input.len()), (3, 3));
/// assert_eq!(input.offsets(), [0, 2, 2, 3]);
/// let mut joined = [0u8; 3];
/// input.copy_to(&mut joined);
/// assert_eq!(joined, [1, 2, 3]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchInput {
    pieces: Vec<Vec<u8>>,
    /// `pieces.len() + 1` offsets, from 0 to the total length.
    offsets: Vec<usize>,
}

impl Default for LaunchInput {
    fn default() -> Self {
        Self::with_capacity(0)
    }
}

impl LaunchInput {
    /// No invocation yet, with room for `items` pieces.
    pub fn with_capacity(items: usize) -> Self {
        let mut offsets = Vec::with_capacity(items + 1);
        offsets.push(0);
        Self {
            pieces: Vec::with_capacity(items),
            offsets,
        }
    }

    /// Adds the next invocation's input (moved, not copied).
    pub fn push(&mut self, piece: Vec<u8>) {
        self.offsets.push(self.len() + piece.len());
        self.pieces.push(piece);
    }

    /// The invocations' inputs, in order.
    pub fn pieces(&self) -> &[Vec<u8>] {
        &self.pieces
    }

    /// Where each invocation's input starts in the joined input, and the
    /// total length last (`items() + 1` offsets).
    pub fn offsets(&self) -> &[usize] {
        &self.offsets
    }

    pub fn items(&self) -> usize {
        self.pieces.len()
    }

    /// Bytes of all the pieces.
    pub fn len(&self) -> usize {
        self.offsets.last().copied().unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies the pieces end to end into the start of `dest`, which must
    /// hold at least [`len`](Self::len) bytes (panics otherwise).
    pub fn copy_to(&self, dest: &mut [u8]) {
        copy_end_to_end(self.pieces.iter().map(Vec::as_slice), dest);
    }

    /// The pieces end to end, in a new buffer (for a backend that needs
    /// one contiguous slice: it calls this on its own thread).
    pub fn joined(&self) -> Vec<u8> {
        let mut bytes = vec![0u8; self.len()];
        self.copy_to(&mut bytes);
        bytes
    }
}

impl FromIterator<Vec<u8>> for LaunchInput {
    fn from_iter<I: IntoIterator<Item = Vec<u8>>>(pieces: I) -> Self {
        let pieces = pieces.into_iter();
        let mut input = Self::with_capacity(pieces.size_hint().0);
        for piece in pieces {
            input.push(piece);
        }
        input
    }
}

/// Copies `pieces` end to end into the start of `dest`, each element once,
/// and returns how many were copied; panics where `dest` is shorter. One
/// walk for the joined input on the host and the CUDA worker's pinned
/// staging buffer.
pub(crate) fn copy_end_to_end<'a, T: Copy + 'a>(
    pieces: impl IntoIterator<Item = &'a [T]>,
    dest: &mut [T],
) -> usize {
    let mut start = 0;
    for piece in pieces {
        dest[start..start + piece.len()].copy_from_slice(piece);
        start += piece.len();
    }
    start
}

/// One invocation's input.
impl From<Vec<u8>> for LaunchInput {
    fn from(piece: Vec<u8>) -> Self {
        std::iter::once(piece).collect()
    }
}

/// One launch: a batch of invocations of one module's kernel.
pub struct Launch {
    /// Label of the module (for errors).
    pub module: String,
    pub kernel: Arc<dyn Kernel>,
    /// The invocations' inputs, one piece each, with their offsets.
    pub input: LaunchInput,
    /// Output offsets, `out_offsets.len() == items + 1`.
    pub out_offsets: Vec<usize>,
    /// Modelled kernel time of the batch on a device of speed-up 1, in
    /// seconds (the sum of the invocations' declared device costs). An
    /// emulated device uses it; a real one ignores it.
    pub work_s: f64,
}

impl Launch {
    pub fn items(&self) -> usize {
        self.input.items()
    }
    /// Input offsets, `items() + 1` of them: the kernel's `in_offsets`.
    pub fn in_offsets(&self) -> &[usize] {
        self.input.offsets()
    }
    pub fn bytes_in(&self) -> usize {
        self.input.len()
    }
    pub fn bytes_out(&self) -> usize {
        self.out_offsets.last().copied().unwrap_or(0)
    }
}

/// Where the time of one launch went, in seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LaunchTimes {
    /// From submission to the start of the transfer in (waiting for a
    /// staging buffer or for the copy engine).
    pub queued_s: f64,
    pub transfer_in_s: f64,
    pub kernel_s: f64,
    pub transfer_out_s: f64,
    /// From submission to the callback.
    pub total_s: f64,
}

/// A finished launch: the results, with their offsets.
#[derive(Debug)]
pub struct LaunchOutput {
    pub output: Vec<u8>,
    pub out_offsets: Vec<usize>,
    pub times: LaunchTimes,
}

/// Called once per launch, from a device thread.
pub type LaunchDone = Box<dyn FnOnce(Result<LaunchOutput, DeviceError>) + Send>;

/// What went wrong on a device. Every variant names the device; the engine
/// adds the module and the event.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DeviceError {
    /// A [`DeviceOptions`](crate::DeviceOptions) value out of its range.
    #[error("invalid device options: {0}")]
    Options(String),
    #[error("device '{device}': no such device ({reason})")]
    Unavailable { device: String, reason: String },
    #[error("device '{device}': kernel '{kernel}' failed to compile: {message}")]
    Compile {
        device: String,
        kernel: String,
        message: String,
    },
    #[error("device '{device}': launch of kernel '{kernel}' failed: {message}")]
    Launch {
        device: String,
        kernel: String,
        message: String,
    },
    #[error(
        "device '{device}': out of memory: launch of kernel '{kernel}' needs {needed} bytes, the device has {capacity}"
    )]
    OutOfMemory {
        device: String,
        kernel: String,
        needed: usize,
        capacity: usize,
    },
    /// An error of a device module's device (its kernel's compilation),
    /// with the module's label.
    #[error("device module '{module}': {error}")]
    Module {
        module: String,
        error: Box<DeviceError>,
    },
}

impl DeviceError {
    /// The error without the module [`DeviceError::Module`] names: for a
    /// caller that names the module itself (a configuration file's
    /// `module 'x':`).
    pub fn unlabelled(&self) -> &DeviceError {
        match self {
            Self::Module { error, .. } => error.unlabelled(),
            other => other,
        }
    }
}

/// The text of a caught panic (its `&str` or `String` payload).
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(a panic without a message)".into()
    }
}

/// Calls a launch's callback on a device thread: a callback that panics
/// (its panic printed by the hook) does not stop the thread, which goes on
/// with the device's other launches.
pub(crate) fn call_done(done: LaunchDone, result: Result<LaunchOutput, DeviceError>) {
    let _ignored = std::panic::catch_unwind(AssertUnwindSafe(move || done(result)));
}

/// Time the device's engines were busy, in seconds since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct DeviceBusy {
    pub transfer_in_s: f64,
    pub kernel_s: f64,
    pub transfer_out_s: f64,
    pub launches: u64,
}

impl DeviceBusy {
    /// Busy time of the stage that limits the device's throughput.
    pub fn bottleneck_s(&self, overlap: bool) -> f64 {
        if overlap {
            self.transfer_in_s
                .max(self.kernel_s)
                .max(self.transfer_out_s)
        } else {
            self.transfer_in_s + self.kernel_s + self.transfer_out_s
        }
    }
}

/// An accelerator backend.
pub trait Device: Send + Sync {
    /// Name used in notices and errors (`emulated:0`, `cuda:0 (H100)`).
    fn name(&self) -> &str;
    /// Compiles (or finds in the cache) a kernel before its first launch.
    fn prepare(&self, kernel: &dyn Kernel) -> Result<(), DeviceError>;
    /// Starts a launch and returns at once; `done` runs when it ended.
    fn submit(&self, launch: Launch, done: LaunchDone);
    /// Whether transfers and kernels of successive launches overlap.
    fn overlaps(&self) -> bool;
    /// How many launches the device works on at once (its streams, or its
    /// engines): a further launch only queues.
    fn parallel_launches(&self) -> usize {
        if self.overlaps() { 2 } else { 1 }
    }
    /// Busy time of the device's engines so far.
    fn busy(&self) -> DeviceBusy;
    /// Host threads the device keeps busy while it works (staging copies,
    /// launches, callbacks): a job's default engine threads leave them
    /// their cores. 0 for a device whose threads only model time.
    fn service_threads(&self) -> usize {
        0
    }
}

impl std::fmt::Debug for Launch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launch")
            .field("module", &self.module)
            .field("kernel", &self.kernel.name())
            .field("items", &self.items())
            .field("bytes_in", &self.bytes_in())
            .field("bytes_out", &self.bytes_out())
            .field("work_s", &self.work_s)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::copy_end_to_end;

    #[test]
    fn pieces_are_copied_end_to_end_whatever_the_element_type() {
        let pieces: [&[u32]; 4] = [&[1, 2], &[], &[3], &[4, 5, 6]];
        let mut dest = [0u32; 8];
        assert_eq!(copy_end_to_end(pieces, &mut dest), 6);
        assert_eq!(dest, [1, 2, 3, 4, 5, 6, 0, 0]);
        let none: [&[u8]; 0] = [];
        assert_eq!(copy_end_to_end(none, &mut []), 0);
    }

    #[test]
    #[should_panic]
    fn a_destination_too_short_panics() {
        copy_end_to_end([&[1u8, 2, 3][..]], &mut [0u8; 2]);
    }
}
