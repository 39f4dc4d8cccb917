//! Two real compute kernels, for the bathtub on a GPU and for tests: each a
//! CUDA source and a Rust host twin that computes the same bytes.
//!
//! * `stencil` (low arithmetic intensity, about 1.25 FLOP per byte moved):
//!   an event carries `size` f32 values; the output is [`STENCIL_SWEEPS`]
//!   sweeps of a 3-point smoothing stencil over them (zero outside), as
//!   many values. On the GPU one thread per element (it recomputes the
//!   cone of the earlier sweeps it needs, so no thread waits for another).
//! * `nbody` (high arithmetic intensity, O(size²)): an event carries `size`
//!   particles (x, y, z, mass as f32); the output is each particle's
//!   acceleration (3 f32) from all particles, with softening. On the GPU
//!   one thread per particle.
//!
//! The input is generated on the host from the event's key when the
//! invocation is packed (the host twin generates the same data); the
//! product is a digest of the output bytes, so products are the same
//! whichever side ran. Identity: every f32 operation is written in the same
//! order on both sides, the CUDA backend compiles with `--fmad=false` (no
//! contraction into fused multiply-adds; Rust never contracts) and IEEE
//! division and square root (`--prec-div=true --prec-sqrt=true`), without
//! flushing denormals (`--ftz=false`); both round to nearest even.

use std::str::FromStr;
use std::sync::Arc;

use evflow_core::{Event, ModuleDesc, ModuleError, ModuleResult};
use evflow_workloads::{consumed_digest, event_key, mix};

use crate::context::{DeviceContext, DeviceModel};
use crate::device::{DeviceError, Kernel, each_invocation};
use crate::offload::DeviceProducer;
use crate::synthetic::{Products, build, hash_str};

/// Sweeps of the stencil.
pub const STENCIL_SWEEPS: usize = 2;
/// Weights of the stencil (left, centre, right).
const W: [f32; 3] = [0.25, 0.5, 0.25];
/// Softening of the n-body kernel (squared distance added to every pair).
const EPS2: f32 = 0.01;

/// Which compute kernel a device module runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ComputeKind {
    Stencil,
    Nbody,
}

impl ComputeKind {
    pub const ALL: [ComputeKind; 2] = [ComputeKind::Stencil, ComputeKind::Nbody];

    pub fn name(self) -> &'static str {
        match self {
            ComputeKind::Stencil => "stencil",
            ComputeKind::Nbody => "nbody",
        }
    }

    /// Largest `size` (elements or particles per event) accepted.
    pub fn max_size(self) -> usize {
        match self {
            ComputeKind::Stencil => 1 << 24,
            ComputeKind::Nbody => 1 << 14,
        }
    }

    /// Bytes moved to the device per event.
    pub fn bytes_in(self, size: usize) -> usize {
        match self {
            ComputeKind::Stencil => 4 * size,
            ComputeKind::Nbody => 16 * size,
        }
    }

    /// Bytes moved back per event.
    pub fn bytes_out(self, size: usize) -> usize {
        match self {
            ComputeKind::Stencil => 4 * size,
            ComputeKind::Nbody => 12 * size,
        }
    }

    fn source(self) -> &'static str {
        match self {
            ComputeKind::Stencil => STENCIL_CUDA,
            ComputeKind::Nbody => NBODY_CUDA,
        }
    }

    /// The host twin of one invocation.
    fn run_one(self, input: &[u8], output: &mut [u8]) -> Result<(), String> {
        match self {
            ComputeKind::Stencil => stencil(input, output),
            ComputeKind::Nbody => nbody(input, output),
        }
    }
}

impl FromStr for ComputeKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| format!("unknown kernel '{s}' (known: stencil, nbody)"))
    }
}

/// A device module running a real kernel: what it computes, how much.
#[derive(Clone, Debug)]
pub struct ComputeDevice {
    pub kind: ComputeKind,
    /// Elements (stencil) or particles (nbody) per event.
    pub size: usize,
    /// Whether the module has a host implementation (the Rust twin).
    pub host: bool,
    /// Modelled device time per event at speed-up 1, seconds (the emulated
    /// device holds its compute engine for at least this long; 0: as long
    /// as the Rust code takes).
    pub device_cost_s: f64,
}

impl ComputeDevice {
    /// Checks the size; the message names the kernel and the limits.
    pub fn check(&self) -> Result<(), String> {
        let max = self.kind.max_size();
        if (1..=max).contains(&self.size) {
            Ok(())
        } else {
            Err(format!(
                "size must be between 1 and {max} for kernel '{}' (got {})",
                self.kind.name(),
                self.size
            ))
        }
    }
}

/// The kernel of a compute module.
pub struct ComputeKernel {
    name: String,
    kind: ComputeKind,
    size: usize,
}

impl ComputeKernel {
    pub fn new(kind: ComputeKind, size: usize) -> Self {
        Self {
            name: format!("{}_{size}", kind.name()),
            kind,
            size,
        }
    }
}

impl Kernel for ComputeKernel {
    fn name(&self) -> &str {
        &self.name
    }
    fn source(&self) -> Option<&str> {
        Some(self.kind.source())
    }
    /// Elements or particles per invocation.
    fn param(&self) -> u64 {
        self.size as u64
    }
    fn threads_per_invocation(&self) -> u32 {
        u32::try_from(self.size).unwrap_or(u32::MAX)
    }
    fn run(
        &self,
        input: &[u8],
        ins: &[usize],
        output: &mut [u8],
        outs: &[usize],
    ) -> Result<(), String> {
        each_invocation(input, ins, output, outs, |item, out| {
            self.kind.run_one(item, out)
        })
    }
}

/// A counter-based 32-bit hash (vectorises: the generation must stay
/// cheap beside the kernels).
fn hash32(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^ (x >> 16)
}

/// Appends the input of an event of key `key`: `size` elements of values
/// in [0, 1) (stencil) or `size` particles in [-1, 1)³ of mass in
/// [0.5, 1.5) (nbody), as little-endian f32.
pub fn generate(kind: ComputeKind, size: usize, key: u64, buf: &mut Vec<u8>) {
    let k = mix(key);
    let (s1, s2) = (k as u32, (k >> 32) as u32);
    let start = buf.len();
    buf.resize(start + kind.bytes_in(size), 0);
    let unit = |i: usize| (hash32((i as u32) ^ s1).wrapping_add(s2) >> 8) as f32 / 16_777_216.0;
    for (i, b) in buf[start..].chunks_exact_mut(4).enumerate() {
        let value = match kind {
            ComputeKind::Stencil => unit(i),
            ComputeKind::Nbody if i % 4 == 3 => 0.5 + unit(i),
            ComputeKind::Nbody => 2.0 * unit(i) - 1.0,
        };
        b.copy_from_slice(&value.to_le_bytes());
    }
}

fn floats(bytes: &[u8]) -> impl Iterator<Item = f32> + '_ {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// The stencil's host twin over one invocation: `output` gets as many
/// bytes as `input`.
pub fn stencil(input: &[u8], output: &mut [u8]) -> Result<(), String> {
    if !input.len().is_multiple_of(4) || output.len() != input.len() {
        return Err(format!(
            "stencil: {} bytes in, {} out (expected a multiple of 4, the same)",
            input.len(),
            output.len()
        ));
    }
    let n = input.len() / 4;
    // Zero-padded on both ends: the value outside the range is 0 at every
    // sweep, as in the CUDA source.
    let mut a = vec![0f32; n + 2];
    for (x, v) in a[1..=n].iter_mut().zip(floats(input)) {
        *x = v;
    }
    let mut b = vec![0f32; n + 2];
    for _ in 0..STENCIL_SWEEPS {
        let (left, centre, right) = (&a[..n], &a[1..=n], &a[2..]);
        for (((o, &l), &c), &r) in b[1..=n].iter_mut().zip(left).zip(centre).zip(right) {
            *o = W[0] * l + W[1] * c + W[2] * r;
        }
        std::mem::swap(&mut a, &mut b);
    }
    for (o, x) in output.chunks_exact_mut(4).zip(&a[1..=n]) {
        o.copy_from_slice(&x.to_le_bytes());
    }
    Ok(())
}

/// The n-body host twin over one invocation: 16 bytes in (x, y, z, mass)
/// and 12 out (the acceleration) per particle.
pub fn nbody(input: &[u8], output: &mut [u8]) -> Result<(), String> {
    if !input.len().is_multiple_of(16) || output.len() != input.len() / 16 * 12 {
        return Err(format!(
            "nbody: {} bytes in, {} out (expected 16 and 12 per particle)",
            input.len(),
            output.len()
        ));
    }
    let p: Vec<f32> = floats(input).collect();
    for (o, me) in output.chunks_exact_mut(12).zip(p.chunks_exact(4)) {
        let (xi, yi, zi) = (me[0], me[1], me[2]);
        let (mut ax, mut ay, mut az) = (0f32, 0f32, 0f32);
        for q in p.chunks_exact(4) {
            let (dx, dy, dz) = (q[0] - xi, q[1] - yi, q[2] - zi);
            let r2 = dx * dx + dy * dy + dz * dz + EPS2;
            let inv = 1.0 / r2.sqrt();
            let s = q[3] * (inv * inv * inv);
            ax += dx * s;
            ay += dy * s;
            az += dz * s;
        }
        for (k, v) in [ax, ay, az].into_iter().enumerate() {
            o[4 * k..4 * k + 4].copy_from_slice(&v.to_le_bytes());
        }
    }
    Ok(())
}

/// Digest of output bytes (four FNV-1a lanes over 64-bit words: cheap
/// beside the kernels).
pub fn output_digest(bytes: &[u8]) -> u64 {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut lanes = [0xcbf2_9ce4_8422_2325_u64, 1, 2, 3];
    let mut chunks = bytes.chunks_exact(32);
    for chunk in &mut chunks {
        for (lane, w) in lanes.iter_mut().zip(chunk.chunks_exact(8)) {
            let word = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
            *lane = (*lane ^ word).wrapping_mul(PRIME);
        }
    }
    for (k, &b) in chunks.remainder().iter().enumerate() {
        lanes[k % 4] = (lanes[k % 4] ^ u64::from(b)).wrapping_mul(PRIME);
    }
    lanes
        .iter()
        .fold(bytes.len() as u64, |acc, &lane| mix(acc ^ lane))
}

struct Module {
    spec: ComputeDevice,
    key: u64,
    kernel: Arc<ComputeKernel>,
    products: Products,
}

impl DeviceProducer for Module {
    fn has_host(&self) -> bool {
        self.spec.host
    }
    fn produce_host(&self, ev: &Event<'_>) -> ModuleResult {
        let mut input = Vec::new();
        self.pack(ev, &mut input)?;
        let mut output = vec![0u8; self.spec.kind.bytes_out(self.spec.size)];
        self.spec
            .kind
            .run_one(&input, &mut output)
            .map_err(ModuleError::msg)?;
        self.unpack(ev, &output)
    }
    fn pack(&self, ev: &Event<'_>, buf: &mut Vec<u8>) -> ModuleResult {
        let (kind, size) = (self.spec.kind, self.spec.size);
        generate(kind, size, event_key(ev) ^ self.key, buf);
        Ok(())
    }
    fn bytes_out(&self, _ev: &Event<'_>) -> usize {
        self.spec.kind.bytes_out(self.spec.size)
    }
    fn device_cost_s(&self, _ev: &Event<'_>) -> f64 {
        self.spec.device_cost_s
    }
    fn kernel(&self) -> Arc<dyn Kernel> {
        self.kernel.clone()
    }
    fn unpack(&self, ev: &Event<'_>, output: &[u8]) -> ModuleResult {
        let expected = self.spec.kind.bytes_out(self.spec.size);
        if output.len() != expected {
            return Err(ModuleError::msg(format!(
                "device output of {} bytes, expected {expected}",
                output.len()
            )));
        }
        let value = mix(output_digest(output) ^ consumed_digest(ev)?);
        self.products.put(ev, value)
    }
}

/// A device module running a real kernel, ready for a `Process`: its host
/// side runs the Rust twin, its device side the kernel; the products (a
/// digest of the output, with the consumed products) are the same.
///
/// ```
/// use evflow_core::{EmptySource, Process, RunOptions, run};
/// use evflow_workloads as synthetic;
/// use evflow_device::*;
///
/// let ctx = DeviceContext::open(&DeviceChoice::Emulated(EmulatedConfig::default()),
///     DeviceOptions { split: SplitMode::Fixed(0.5), events_in_flight: 8, ..Default::default() })
///     .unwrap().0;
/// let spec = ComputeDevice { kind: ComputeKind::Nbody, size: 64, host: true, device_cost_s: 0.0 };
/// let mut p = Process::new("nbody");
/// p.set_source(EmptySource::new(20));
/// p.add(compute_device("forces", spec, &[], &[""], &ctx).unwrap());
/// p.add(synthetic::analyzer("use", synthetic::Timing::zero(), &["forces"]));
/// p.end_path("e", ["use"]);
/// run(p, &RunOptions { threads: 2, events_in_flight: 8, ..Default::default() }).unwrap();
/// let r = &ctx.reports()[0];
/// assert_eq!((r.host_calls, r.device_calls), (10, 10));
/// assert_eq!(r.bytes_out, 10 * 64 * 12);
/// ```
pub fn compute_device(
    label: &str,
    spec: ComputeDevice,
    consumes: &[&str],
    produces: &[&str],
    context: &DeviceContext,
) -> Result<ModuleDesc, DeviceError> {
    let kernel = Arc::new(ComputeKernel::new(spec.kind, spec.size));
    spec.check().map_err(|message| DeviceError::Compile {
        device: context.device_name(),
        kernel: kernel.name.clone(),
        message,
    })?;
    let model = DeviceModel {
        label: label.to_string(),
        has_host: spec.host,
        device_cost_s: spec.device_cost_s,
        bytes_in: spec.kind.bytes_in(spec.size),
        bytes_out: spec.kind.bytes_out(spec.size),
    };
    let module = Module {
        key: hash_str(label),
        kernel,
        products: Products::new(produces),
        spec,
    };
    build(model, module, (consumes, produces), context)
}

/// A CUDA source with the ABI's entry point: `defines`, then the entry
/// point, which finds its invocation `e` and lane (`size` threads per
/// invocation, [`Kernel::threads_per_invocation`]) and runs `body`.
macro_rules! cuda_kernel {
    ($defines:literal, $body:literal) => {
        concat!(
            $defines,
            r#"extern "C" __global__ void evflow_kernel(const unsigned char* in, const unsigned long long* ins,
                                         unsigned char* out, const unsigned long long* outs,
                                         unsigned long long n, unsigned long long size) {
    unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned long long e = tid / size;
    unsigned long long lane = tid % size;
    if (e >= n) return;
"#,
            $body,
            "}\n"
        )
    };
}

/// CUDA source of the stencil: one thread per element. The thread works
/// on a window of `2 × SWEEPS + 1` values around its element and
/// recomputes the earlier sweeps over the shrinking window (zero outside
/// the range, as the host twin's padding), with the host twin's operation
/// order.
const STENCIL_CUDA: &str = cuda_kernel!(
    "#define SWEEPS 2\n#define W0 0.25f\n#define W1 0.5f\n#define W2 0.25f\n",
    r#"    long long count = (long long)((ins[e + 1] - ins[e]) / 4);
    long long i = (long long)lane;
    if (i >= count) return;
    const float* a = (const float*)(in + ins[e]);
    float w[2 * SWEEPS + 1], next[2 * SWEEPS + 1];
    for (int k = 0; k <= 2 * SWEEPS; ++k) {
        long long j = i - SWEEPS + k;
        w[k] = (j >= 0 && j < count) ? a[j] : 0.0f;
    }
    for (int s = 1; s <= SWEEPS; ++s) {
        for (int k = s; k <= 2 * SWEEPS - s; ++k) {
            long long j = i - SWEEPS + k;
            next[k] = (j >= 0 && j < count) ? W0 * w[k - 1] + W1 * w[k] + W2 * w[k + 1] : 0.0f;
        }
        for (int k = s; k <= 2 * SWEEPS - s; ++k) w[k] = next[k];
    }
    ((float*)(out + outs[e]))[i] = w[SWEEPS];
"#
);

/// CUDA source of the n-body kernel: one thread per particle, the host
/// twin's operation order.
const NBODY_CUDA: &str = cuda_kernel!(
    "#define EPS2 0.01f\n",
    r#"    unsigned long long count = (ins[e + 1] - ins[e]) / 16, i = lane;
    if (i >= count) return;
    const float* p = (const float*)(in + ins[e]);
    float xi = p[4 * i], yi = p[4 * i + 1], zi = p[4 * i + 2];
    float ax = 0.0f, ay = 0.0f, az = 0.0f;
    for (unsigned long long j = 0; j < count; ++j) {
        float dx = p[4 * j] - xi;
        float dy = p[4 * j + 1] - yi;
        float dz = p[4 * j + 2] - zi;
        float r2 = dx * dx + dy * dy + dz * dz + EPS2;
        float inv = 1.0f / sqrtf(r2);
        float s = p[4 * j + 3] * (inv * inv * inv);
        ax = ax + dx * s;
        ay = ay + dy * s;
        az = az + dz * s;
    }
    float* o = (float*)(out + outs[e]);
    o[3 * i] = ax;
    o[3 * i + 1] = ay;
    o[3 * i + 2] = az;
"#
);

impl std::fmt::Debug for ComputeKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComputeKernel")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CUDA sources use the Rust twin's constants.
    #[test]
    fn sources_match_the_twins_constants() {
        assert!(STENCIL_CUDA.contains(&format!("#define SWEEPS {STENCIL_SWEEPS}\n")));
        for (k, w) in W.iter().enumerate() {
            assert!(STENCIL_CUDA.contains(&format!("#define W{k} {w:?}f\n")));
        }
        assert!(NBODY_CUDA.contains(&format!("#define EPS2 {EPS2:?}f\n")));
        for source in [STENCIL_CUDA, NBODY_CUDA] {
            assert!(source.contains("void evflow_kernel("), "{source}");
            assert!(source.ends_with("}\n"), "{source}");
        }
    }

    /// A direct (unpadded, sweep by sweep) stencil gives the same bits.
    #[test]
    fn stencil_is_the_plain_definition() {
        let mut input = Vec::new();
        generate(ComputeKind::Stencil, 37, 5, &mut input);
        let mut out = vec![0u8; input.len()];
        stencil(&input, &mut out).unwrap();
        let mut a: Vec<f32> = floats(&input).collect();
        for _ in 0..STENCIL_SWEEPS {
            let at = |j: isize| a.get(j as usize).copied().filter(|_| j >= 0).unwrap_or(0.0);
            a = (0..a.len() as isize)
                .map(|j| W[0] * at(j - 1) + W[1] * at(j) + W[2] * at(j + 1))
                .collect();
        }
        let expected: Vec<f32> = floats(&out).collect();
        assert_eq!(
            a.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            expected.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
    }

    /// Two particles attract each other with equal and opposite forces
    /// (times the other's mass), finite with the softening.
    #[test]
    fn nbody_forces_point_to_the_other_particle() {
        let mut input = Vec::new();
        for v in [0.0f32, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 2.0] {
            input.extend_from_slice(&v.to_le_bytes());
        }
        let mut out = vec![0u8; 24];
        nbody(&input, &mut out).unwrap();
        let a: Vec<f32> = floats(&out).collect();
        assert!(a[0] > 0.0 && a[3] < 0.0, "{a:?}");
        assert_eq!((a[1], a[2], a[4], a[5]), (0.0, 0.0, 0.0, 0.0));
        assert_eq!(a[0], -2.0 * a[3]);
        assert!(nbody(&input[..20], &mut out).is_err());
        assert!(stencil(&input, &mut out).is_err());
    }

    #[test]
    fn generation_is_deterministic_and_in_range() {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        generate(ComputeKind::Nbody, 100, 9, &mut a);
        generate(ComputeKind::Nbody, 100, 9, &mut b);
        assert_eq!(a, b);
        b.clear();
        generate(ComputeKind::Nbody, 100, 10, &mut b);
        assert_ne!(a, b);
        let v: Vec<f32> = floats(&a).collect();
        for p in v.chunks_exact(4) {
            assert!(p[..3].iter().all(|x| (-1.0..1.0).contains(x)), "{p:?}");
            assert!((0.5..1.5).contains(&p[3]), "{p:?}");
        }
        assert_ne!(output_digest(&a), output_digest(&b));
        assert_eq!("nbody".parse::<ComputeKind>(), Ok(ComputeKind::Nbody));
        assert!("fft".parse::<ComputeKind>().unwrap_err().contains("known"));
    }
}
