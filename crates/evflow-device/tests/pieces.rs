//! A launch's input is its events' own packed buffers: the engine moves
//! each buffer a module packed into the launch (no copy on the thread that
//! closes a batch), and every backend hands its kernel the pieces joined
//! end to end with their offsets, empty inputs included (seeded). The CUDA
//! cases run with `--features cuda` on a machine with a GPU and are
//! skipped, saying so, without one.

use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use evflow_core::{
    Analyzer, EmptySource, Event, ModuleDesc, ModuleError, ModuleResult, Process, RunOptions,
    Transitions, run,
};
use evflow_device::*;
use rand::{Rng, SeedableRng};

/// FNV-1a, 64 bits: the test's digest of one invocation's input.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Writes, for each invocation, the digest of its input bytes and their
/// number (16 bytes): wrong bytes or wrong offsets show in both.
struct Digest;

const DIGEST_CUDA: &str = r#"
extern "C" __global__ void evflow_kernel(const unsigned char* in, const unsigned long long* ins,
                                         unsigned char* out, const unsigned long long* outs,
                                         unsigned long long n, unsigned long long param) {
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned long long h = 0xcbf29ce484222325ULL;
    for (unsigned long long k = ins[i]; k < ins[i + 1]; ++k) h = (h ^ in[k]) * 0x100000001b3ULL;
    unsigned long long len = ins[i + 1] - ins[i];
    for (int b = 0; b < 8; ++b) {
        out[outs[i] + b] = (unsigned char)(h >> (8 * b));
        out[outs[i] + 8 + b] = (unsigned char)(len >> (8 * b));
    }
}
"#;

impl Kernel for Digest {
    fn name(&self) -> &str {
        "digest"
    }
    fn source(&self) -> Option<&str> {
        Some(DIGEST_CUDA)
    }
    fn run(&self, i: &[u8], io: &[usize], o: &mut [u8], oo: &[usize]) -> Result<(), String> {
        each_invocation(i, io, o, oo, |item, out| {
            let out = out.get_mut(..16).ok_or("output shorter than 16 bytes")?;
            out[..8].copy_from_slice(&fnv(item).to_le_bytes());
            out[8..].copy_from_slice(&(item.len() as u64).to_le_bytes());
            Ok(())
        })
    }
}

/// The expected output of a launch of [`Digest`] over `pieces`, computed
/// piece by piece, without joining them.
fn expected(pieces: &[Vec<u8>]) -> Vec<u8> {
    pieces
        .iter()
        .flat_map(|p| {
            let mut out = fnv(p).to_le_bytes().to_vec();
            out.extend((p.len() as u64).to_le_bytes());
            out
        })
        .collect()
}

/// A piece of `len` bytes starting with the event's number (when it has
/// room for it), the rest drawn from `rng`.
fn piece(rng: &mut impl Rng, event: u64, len: usize) -> Vec<u8> {
    let mut p: Vec<u8> = (0..len).map(|_| rng.r#gen::<u8>()).collect();
    if len >= 8 {
        p[..8].copy_from_slice(&event.to_le_bytes());
    }
    p
}

/// Seeded launches of 0 to 12 invocations whose inputs differ in size, a
/// quarter of them empty: every backend's output is the digests of the
/// pieces, and so is the kernel's host code run over the joined input.
fn check_launches(device: &dyn Device, seed: u64) {
    device.prepare(&Digest).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let (tx, rx) = mpsc::channel();
    let mut sent = Vec::new();
    for l in 0..40usize {
        let items = rng.gen_range(0..=12);
        let pieces: Vec<Vec<u8>> = (0..items)
            .map(|e| {
                let len = if rng.gen_range(0..4) == 0 {
                    0
                } else {
                    rng.gen_range(1..3000)
                };
                piece(&mut rng, e as u64, len)
            })
            .collect();
        let input: LaunchInput = pieces.iter().cloned().collect();
        let out_offsets: Vec<usize> = (0..=items).map(|i| 16 * i).collect();
        // The host path: the kernel's own code over the joined pieces.
        let mut host = vec![0u8; 16 * items];
        Digest
            .run(&input.joined(), input.offsets(), &mut host, &out_offsets)
            .unwrap();
        assert_eq!(host, expected(&pieces), "launch {l} on the host");
        let launch = Launch {
            module: "digest".into(),
            kernel: Arc::new(Digest),
            input,
            out_offsets,
            work_s: 1e-6,
        };
        let tx = tx.clone();
        device.submit(launch, Box::new(move |r| tx.send((l, r)).unwrap()));
        sent.push(pieces);
    }
    drop(tx);
    let mut seen = 0;
    for (l, result) in rx.iter() {
        let out = result.unwrap_or_else(|e| panic!("launch {l}: {e}"));
        assert_eq!(
            out.output,
            expected(&sent[l]),
            "launch {l} on {}",
            device.name()
        );
        seen += 1;
    }
    assert_eq!(seen, sent.len());
}

#[test]
fn the_emulated_device_gives_the_kernel_the_joined_pieces() {
    for overlap in [true, false] {
        let device = EmulatedDevice::new(EmulatedConfig {
            overlap,
            launch_latency_s: 0.0,
            transfer_latency_s: 0.0,
            ..EmulatedConfig::default()
        });
        check_launches(&device, 23);
    }
}

/// On a machine with a GPU: each launch's pieces are copied one by one into
/// the stream's pinned staging buffer, growing and reusing it, and the
/// kernel reads them as one input, on one stream and on two.
#[cfg(feature = "cuda")]
#[test]
fn the_cuda_device_gives_the_kernel_the_joined_pieces() {
    for streams in [1, 2] {
        let device = match CudaDevice::open(0, streams) {
            Ok(device) => device,
            Err(e) => {
                eprintln!("skipped: no CUDA device ({e})");
                return;
            }
        };
        check_launches(&device, 29);
    }
}

/// A device that notes where each launch's pieces lie in memory, then
/// hands the launch to the emulated device.
struct Recording {
    inner: EmulatedDevice,
    /// Event number (a piece's first 8 bytes) → address of its piece.
    pieces: Arc<Mutex<HashMap<u64, usize>>>,
}

impl Device for Recording {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn prepare(&self, kernel: &dyn Kernel) -> Result<(), DeviceError> {
        self.inner.prepare(kernel)
    }
    fn submit(&self, launch: Launch, done: LaunchDone) {
        let mut pieces = self.pieces.lock().unwrap();
        for p in launch.input.pieces().iter().filter(|p| !p.is_empty()) {
            let event = u64::from_le_bytes(p[..8].try_into().unwrap());
            pieces.insert(event, p.as_ptr() as usize);
        }
        drop(pieces);
        self.inner.submit(launch, done)
    }
    fn overlaps(&self) -> bool {
        self.inner.overlaps()
    }
    fn parallel_launches(&self) -> usize {
        self.inner.parallel_launches()
    }
    fn busy(&self) -> DeviceBusy {
        self.inner.busy()
    }
}

/// Packs a seeded number of bytes per event (none for some events) and
/// notes where the buffer it packed into lies; puts the digest of the
/// bytes and their number, computed on the host the same way.
struct Packer {
    packed: Arc<Mutex<HashMap<u64, usize>>>,
}

impl Packer {
    fn bytes(event: u64) -> Vec<u8> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(event);
        let len = match rng.gen_range(0..5) {
            0 => 0,
            1 => 8,
            _ => rng.gen_range(9..5000),
        };
        piece(&mut rng, event, len)
    }
    fn value(bytes: &[u8]) -> u64 {
        fnv(bytes) ^ (bytes.len() as u64).rotate_left(32)
    }
}

impl DeviceProducer for Packer {
    fn produce_host(&self, ev: &Event<'_>) -> ModuleResult {
        ev.put("", Self::value(&Self::bytes(ev.id().event)))
    }
    fn pack(&self, ev: &Event<'_>, buf: &mut Vec<u8>) -> ModuleResult {
        let bytes = Self::bytes(ev.id().event);
        buf.extend_from_slice(&bytes);
        if !buf.is_empty() {
            (self.packed.lock().unwrap()).insert(ev.id().event, buf.as_ptr() as usize);
        }
        Ok(())
    }
    fn bytes_out(&self, _ev: &Event<'_>) -> usize {
        16
    }
    fn device_cost_s(&self, _ev: &Event<'_>) -> f64 {
        1e-6
    }
    fn kernel(&self) -> Arc<dyn Kernel> {
        Arc::new(Digest)
    }
    fn unpack(&self, ev: &Event<'_>, out: &[u8]) -> ModuleResult {
        let word = |k: usize| {
            out.get(k..k + 8)
                .and_then(|w| w.try_into().ok())
                .map(u64::from_le_bytes)
                .ok_or_else(|| ModuleError::msg("device output shorter than 16 bytes"))
        };
        ev.put("", word(0)? ^ word(8)?.rotate_left(32))
    }
}

struct Record(Arc<Mutex<BTreeMap<u64, u64>>>);

impl Transitions for Record {}

impl Analyzer for Record {
    fn analyze(&self, event: &Event<'_>) -> ModuleResult {
        let value: &u64 = event.get("packer")?;
        self.0.lock().unwrap().insert(event.id().event, *value);
        Ok(())
    }
}

const EVENTS: u64 = 200;

/// Every event's packed buffer reaches the device as it was packed — the
/// same allocation, so the engine copied none of its bytes — and the
/// products are the host's, whatever the split.
#[test]
fn the_engine_moves_each_packed_buffer_into_its_launch() {
    // Events are numbered from 1.
    let reference: BTreeMap<u64, u64> = (1..=EVENTS)
        .map(|e| (e, Packer::value(&Packer::bytes(e))))
        .collect();
    assert!((1..=EVENTS).any(|e| Packer::bytes(e).is_empty()));
    for split in [SplitMode::Fixed(1.0), SplitMode::Fixed(0.5)] {
        let pieces = Arc::new(Mutex::new(HashMap::new()));
        let device = Recording {
            inner: EmulatedDevice::new(EmulatedConfig::default()),
            pieces: pieces.clone(),
        };
        let mut options = DeviceOptions {
            split,
            events_in_flight: 16,
            host_threads: 2,
            ..DeviceOptions::default()
        };
        options.combine.max_events = 8;
        let ctx = DeviceContext::with_device(Some(Arc::new(device)), options);
        let packed = Arc::new(Mutex::new(HashMap::new()));
        let module = Packer {
            packed: packed.clone(),
        };
        let seen = Arc::new(Mutex::new(BTreeMap::new()));
        let mut p = Process::new("pieces");
        p.set_source(EmptySource::new(EVENTS));
        p.add(offload("packer", module, &ctx).unwrap().produces([""]));
        p.add(ModuleDesc::analyzer("record", Record(seen.clone())).consumes(["packer"]));
        p.end_path("e", ["record"]);
        let opts = RunOptions {
            threads: 2,
            events_in_flight: 16,
            ..RunOptions::default()
        };
        run(p, &opts).unwrap();
        assert_eq!(*seen.lock().unwrap(), reference, "{split:?}");
        let report = &ctx.reports()[0];
        assert!(report.device_calls > 0, "{split:?}");
        let (packed, pieces) = (packed.lock().unwrap(), pieces.lock().unwrap());
        // Every non-empty piece a launch carried is the buffer its event's
        // pack wrote, at the same address.
        assert!(pieces.len() > 10, "{split:?}: {} pieces", pieces.len());
        for (event, address) in pieces.iter() {
            assert_eq!(
                packed.get(event),
                Some(address),
                "event {event} ({split:?})"
            );
        }
    }
}
