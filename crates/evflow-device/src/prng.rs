//! A device pseudo-random-number service (HEP-Frame's library function):
//! blocks of numbers are generated on the device into one half of a double
//! buffer while modules draw from the other half. The stream is SplitMix64,
//! a function of the seed and the position only, so the host computes any
//! number itself when the device is late or absent: for a seed, the stream
//! is the same whichever side generated each number. (Which event gets
//! which numbers depends on the order in which events draw.)

use std::sync::{Arc, Mutex, MutexGuard};

use evflow_workloads::mix;

use crate::device::{Device, Kernel, Launch};

/// Number `index` of the stream of `seed` (SplitMix64).
pub fn stream_value(seed: u64, index: u64) -> u64 {
    mix(seed.wrapping_add(index.wrapping_mul(0x9E37_79B9_7F4A_7C15)))
}

struct FillKernel {
    seed: u64,
}

impl Kernel for FillKernel {
    fn name(&self) -> &str {
        "prng_fill"
    }
    fn run(&self, input: &[u8], _: &[usize], output: &mut [u8], _: &[usize]) -> Result<(), String> {
        let base = u64::from_le_bytes(
            input
                .get(..8)
                .ok_or("no base")?
                .try_into()
                .unwrap_or([0; 8]),
        );
        for (i, out) in output.chunks_exact_mut(8).enumerate() {
            out.copy_from_slice(&stream_value(self.seed, base + i as u64).to_le_bytes());
        }
        Ok(())
    }
}

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
    data: Vec<u64>,
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
        let service = Self {
            inner: Arc::new(Inner {
                seed,
                block: block.max(1),
                cost_per_number_s,
                device,
                kernel: Arc::new(FillKernel { seed }),
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
            input: base.to_le_bytes().to_vec(),
            in_offsets: vec![0, 8],
            out_offsets: vec![0, block * 8],
            work_s: self.inner.cost_per_number_s * block as f64,
        };
        let me = self.clone();
        device.submit(
            launch,
            Box::new(move |result| {
                let mut state = me.lock();
                state.filling = None;
                if let Ok(out) = result {
                    let data = out
                        .output
                        .chunks_exact(8)
                        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                        .collect();
                    state.stats.fills += 1;
                    state.next = Some(Block { index, data });
                }
                // A failed fill is not an error: the host computes those numbers.
            }),
        );
    }

    /// Appends the next `n` numbers of the stream to `out`.
    pub fn draw(&self, n: usize, out: &mut Vec<u64>) {
        let block = self.inner.block as u64;
        let mut state = self.lock();
        let mut left = n as u64;
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
            match &state.current {
                Some(b) if b.index == index => {
                    let at = offset as usize;
                    out.extend_from_slice(&b.data[at..at + take as usize]);
                    state.stats.from_device += take;
                }
                _ => {
                    // The device block is not there (late or no device): the
                    // host computes the same numbers.
                    let seed = self.inner.seed;
                    out.extend((state.cursor..state.cursor + take).map(|i| stream_value(seed, i)));
                    state.stats.from_host += take;
                    if state.next.as_ref().is_some_and(|b| b.index <= index) {
                        state.next = None; // passed by: of no use any more
                    }
                    // The device is behind: have it fill a block further
                    // ahead, which it can reach before the draws do.
                    if state.next.is_none() {
                        self.fill(&mut state, index + 2);
                    }
                }
            }
            state.cursor += take;
            left -= take;
        }
    }

    pub fn stats(&self) -> RandomStats {
        self.lock().stats
    }
}
