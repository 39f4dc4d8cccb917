//! A device pseudo-random-number service (HEP-Frame's library function):
//! blocks of numbers are generated on the device into one half of a double
//! buffer while modules draw from the other half. The stream is SplitMix64,
//! a function of the seed and the position only, so the host computes any
//! number itself when the device is late or absent: for a seed, the stream
//! is the same whichever side generated each number. (Which event gets
//! which numbers depends on the order in which events draw.)

use std::sync::{Arc, Mutex, MutexGuard};

use evflow_workloads::mix;

use crate::device::{Device, Kernel, Launch, each_invocation, word};

/// Number `index` of the stream of `seed` (SplitMix64).
pub fn stream_value(seed: u64, index: u64) -> u64 {
    mix(seed.wrapping_add(index.wrapping_mul(0x9E37_79B9_7F4A_7C15)))
}

/// The device code of the stream: fills invocation `i`'s output with
/// consecutive numbers of the stream, from the position and seed in its
/// input (two little-endian words: `base`, `seed`). One GPU thread per
/// number; the Rust code ([`Kernel::run`]) is the same function.
///
/// ```
/// use evflow_device::{Kernel, StreamFill, stream_value};
///
/// let fill = StreamFill::new(4);
/// let input = [5u64.to_le_bytes(), 42u64.to_le_bytes()].concat();
/// let mut output = vec![0u8; 32];
/// fill.run(&input, &[0, 16], &mut output, &[0, 32]).unwrap();
/// let numbers: Vec<u64> =
///     output.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
/// assert_eq!(numbers, (5..9).map(|i| stream_value(42, i)).collect::<Vec<_>>());
/// ```
pub struct StreamFill {
    numbers: usize,
}

impl StreamFill {
    /// A fill of (at most) `numbers` numbers per invocation.
    pub fn new(numbers: usize) -> Self {
        Self {
            numbers: numbers.max(1),
        }
    }

    /// The input of one invocation: numbers from position `base` of the
    /// stream of `seed`.
    pub fn input(base: u64, seed: u64) -> Vec<u8> {
        [base.to_le_bytes(), seed.to_le_bytes()].concat()
    }
}

impl Kernel for StreamFill {
    fn name(&self) -> &str {
        "prng_fill"
    }
    fn source(&self) -> Option<&str> {
        Some(STREAM_FILL_CUDA)
    }
    /// Numbers per invocation (the lanes of the CUDA entry point).
    fn param(&self) -> u64 {
        self.numbers as u64
    }
    fn threads_per_invocation(&self) -> u32 {
        u32::try_from(self.numbers).unwrap_or(u32::MAX)
    }
    fn run(
        &self,
        input: &[u8],
        ins: &[usize],
        output: &mut [u8],
        outs: &[usize],
    ) -> Result<(), String> {
        each_invocation(input, ins, output, outs, |item, out| {
            let (Some(base), Some(seed)) = (word(item, 0), word(item, 1)) else {
                return Err(format!(
                    "input of {} bytes, expected 16 (base, seed)",
                    item.len()
                ));
            };
            if out.len() > 8 * self.numbers {
                // A GPU starts `numbers` threads per invocation: it would
                // leave the rest unwritten.
                return Err(format!(
                    "{} numbers asked of a fill of at most {}",
                    out.len() / 8,
                    self.numbers
                ));
            }
            for (k, number) in out.chunks_exact_mut(8).enumerate() {
                number.copy_from_slice(
                    &stream_value(seed, base.wrapping_add(k as u64)).to_le_bytes(),
                );
            }
            Ok(())
        })
    }
}

/// [`StreamFill`] for NVRTC: thread `lane` of invocation `e` writes number
/// `base + lane` (SplitMix64, as [`stream_value`]).
const STREAM_FILL_CUDA: &str = concat!(
    mix_cuda!(),
    r#"extern "C" __global__ void evflow_kernel(const unsigned char* in, const unsigned long long* ins,
                                         unsigned char* out, const unsigned long long* outs,
                                         unsigned long long n, unsigned long long size) {
    unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned long long e = tid / size, lane = tid % size;
    if (e >= n || lane >= (outs[e + 1] - outs[e]) / 8) return;
    const unsigned long long* words = (const unsigned long long*)(in + ins[e]);
    unsigned long long base = words[0], seed = words[1];
    ((unsigned long long*)(out + outs[e]))[lane] = mix(seed + (base + lane) * 0x9E3779B97F4A7C15ull);
}
"#
);

/// Figures of a [`RandomService`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RandomStats {
    /// Numbers drawn from device-filled blocks.
    pub from_device: u64,
    /// Numbers the host computed because the device block was not there.
    pub from_host: u64,
    /// Blocks the device filled.
    pub fills: u64,
}

struct Block {
    index: u64,
    /// Shared, so that draws copy from it outside the service's lock.
    data: Arc<[u64]>,
}

/// Part of one draw: numbers `start..start + len` of the stream, copied
/// from a device block (`Some((block, offset))`) or computed by the host.
struct Piece {
    start: u64,
    len: usize,
    from: Option<(Arc<[u64]>, usize)>,
}

struct State {
    /// Position of the next number of the stream.
    cursor: u64,
    current: Option<Block>,
    /// The other half: filled by the device (`None` while it is filling).
    next: Option<Block>,
    /// Block the device is filling, if any.
    filling: Option<u64>,
    stats: RandomStats,
}

struct Inner {
    seed: u64,
    block: usize,
    /// Modelled device time per number (emulated device).
    cost_per_number_s: f64,
    device: Option<Arc<dyn Device>>,
    kernel: Arc<dyn Kernel>,
    /// Why the device could not take the kernel (the host computes every number).
    device_error: Option<String>,
    state: Mutex<State>,
}

/// The service; cheap to clone.
///
/// ```
/// use std::sync::Arc;
/// use evflow_device::{Device, EmulatedConfig, EmulatedDevice, RandomService, stream_value};
///
/// let device: Arc<dyn Device> = Arc::new(EmulatedDevice::new(EmulatedConfig::default()));
/// let service = RandomService::new(42, 1024, Some(device), 0.0);
/// let mut numbers = Vec::new();
/// for _ in 0..10 {
///     service.draw(300, &mut numbers);
/// }
/// // The same stream as the host computes, whichever side made each number.
/// assert!(numbers.iter().enumerate().all(|(i, &x)| x == stream_value(42, i as u64)));
/// let stats = service.stats();
/// assert_eq!(stats.from_device + stats.from_host, 3000);
/// ```
#[derive(Clone)]
pub struct RandomService {
    inner: Arc<Inner>,
}

impl RandomService {
    /// A service of `seed` with halves of `block` numbers, on `device`
    /// (`None`: the host computes every number).
    pub fn new(
        seed: u64,
        block: usize,
        device: Option<Arc<dyn Device>>,
        cost_per_number_s: f64,
    ) -> Self {
        let block = block.max(1);
        let kernel: Arc<dyn Kernel> = Arc::new(StreamFill::new(block));
        // A device that cannot take the kernel (no CUDA source compiled,
        // say) leaves every number to the host: the same stream.
        let device_error = device
            .as_ref()
            .and_then(|d| d.prepare(kernel.as_ref()).err())
            .map(|e| e.to_string());
        let device = device.filter(|_| device_error.is_none());
        let service = Self {
            inner: Arc::new(Inner {
                seed,
                block,
                cost_per_number_s,
                device,
                kernel,
                device_error,
                state: Mutex::new(State {
                    cursor: 0,
                    current: None,
                    next: None,
                    filling: None,
                    stats: RandomStats::default(),
                }),
            }),
        };
        let mut state = service.lock();
        service.fill(&mut state, 0);
        drop(state);
        service
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Asks the device to fill block `index` (if there is a device and it
    /// is not busy filling).
    fn fill(&self, state: &mut State, index: u64) {
        let Some(device) = &self.inner.device else {
            return;
        };
        if state.filling.is_some() {
            return;
        }
        state.filling = Some(index);
        let block = self.inner.block;
        let base = index * block as u64;
        let launch = Launch {
            module: "random".into(),
            kernel: self.inner.kernel.clone(),
            input: StreamFill::input(base, self.inner.seed).into(),
            out_offsets: vec![0, block * 8],
            work_s: self.inner.cost_per_number_s * block as f64,
        };
        let me = self.clone();
        device.submit(
            launch,
            Box::new(move |result| {
                // Decoded before the lock is taken: draws wait for no copy.
                let data: Option<Arc<[u64]>> = result.ok().map(|out| {
                    out.output
                        .chunks_exact(8)
                        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                        .collect()
                });
                let mut state = me.lock();
                state.filling = None;
                if let Some(data) = data {
                    state.stats.fills += 1;
                    state.next = Some(Block { index, data });
                }
                // A failed fill is not an error: the host computes those numbers.
            }),
        );
    }

    /// Appends the next `n` numbers of the stream to `out`. Which numbers
    /// are this draw's, and where each comes from, is decided under the
    /// service's lock; copying them from the device's block or computing
    /// them on the host is done outside it, so that many threads draw at
    /// once.
    pub fn draw(&self, n: usize, out: &mut Vec<u64>) {
        let pieces = self.reserve(n as u64);
        out.reserve(n);
        let seed = self.inner.seed;
        for piece in pieces {
            match piece.from {
                Some((data, at)) => out.extend_from_slice(&data[at..at + piece.len]),
                None => out.extend(
                    (piece.start..piece.start + piece.len as u64).map(|i| stream_value(seed, i)),
                ),
            }
        }
    }

    /// Takes the next `n` positions of the stream and says where each run
    /// of them comes from (and asks the device for the blocks ahead).
    fn reserve(&self, n: u64) -> Vec<Piece> {
        let block = self.inner.block as u64;
        let mut pieces = Vec::new();
        let mut state = self.lock();
        let mut left = n;
        while left > 0 {
            let index = state.cursor / block;
            // Move to the device's block when the cursor reaches it.
            if state.current.as_ref().is_none_or(|b| b.index != index)
                && state.next.as_ref().is_some_and(|b| b.index == index)
            {
                state.current = state.next.take();
                self.fill(&mut state, index + 1);
            }
            let offset = state.cursor % block;
            let take = left.min(block - offset);
            let device_block = (state.current.as_ref())
                .filter(|b| b.index == index)
                .map(|b| b.data.clone());
            let from = match device_block {
                Some(data) => {
                    state.stats.from_device += take;
                    Some((data, offset as usize))
                }
                None => {
                    // The device block is not there (late or no device): the
                    // host computes the same numbers.
                    state.stats.from_host += take;
                    if state.next.as_ref().is_some_and(|b| b.index <= index) {
                        state.next = None; // passed by: of no use any more
                    }
                    // The device is behind: have it fill a block further
                    // ahead, which it can reach before the draws do.
                    if state.next.is_none() {
                        self.fill(&mut state, index + 2);
                    }
                    None
                }
            };
            pieces.push(Piece {
                start: state.cursor,
                len: take as usize,
                from,
            });
            state.cursor += take;
            left -= take;
        }
        pieces
    }

    /// Why the device given to [`RandomService::new`] is not used, if it
    /// could not take the fill kernel (the host then computes every number).
    pub fn device_error(&self) -> Option<&str> {
        self.inner.device_error.as_deref()
    }

    pub fn stats(&self) -> RandomStats {
        self.lock().stats
    }
}

impl std::fmt::Debug for StreamFill {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamFill")
            .field("numbers", &self.numbers)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for RandomService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RandomService").finish_non_exhaustive()
    }
}
