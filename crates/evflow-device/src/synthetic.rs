//! A synthetic device module for benchmarks, tests and the TOML format: a
//! host cost, a device cost and the bytes it moves, and the same products
//! as [`evflow_workloads::producer`] of the same label, whichever side
//! runs it.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use evflow_core::{Event, ModuleDesc, ModuleResult};
use evflow_workloads::{Timing, configured_failure, consumed_digest, event_key, mix};

use crate::context::{DeviceContext, DeviceModel};
use crate::device::DeviceError;
use crate::device::{Kernel, each_invocation, word};
use crate::offload::{DeviceProducer, offload};

/// What a synthetic device module costs and moves per event.
#[derive(Clone, Debug)]
pub struct SyntheticDevice {
    /// Host time per event (`None`: no host implementation).
    pub host: Option<Timing>,
    /// Modelled device time per event at speed-up 1, seconds.
    pub device_cost_s: f64,
    /// Bytes moved to the device per event (at least 16).
    pub bytes_in: usize,
    /// Bytes moved back per event (at least 8).
    pub bytes_out: usize,
    /// Event numbers on which the module fails (`configured failure on
    /// event N`), whichever side runs it: the device side fails them when
    /// it puts their products, so the same events fail whatever the split.
    pub fail_on_events: Vec<u64>,
}

struct Module {
    spec: SyntheticDevice,
    key: u64,
    products: Products,
    kernel: Arc<dyn Kernel>,
}

/// The products of a device module: one `u64` per instance, the value
/// salted by the instance's name (the plain synthetic producer's scheme).
pub(crate) struct Products(Vec<(String, u64)>);

impl Products {
    pub(crate) fn new(produces: &[&str]) -> Self {
        Self(
            produces
                .iter()
                .map(|s| (s.to_string(), if s.is_empty() { 0 } else { hash_str(s) }))
                .collect(),
        )
    }

    pub(crate) fn put(&self, ev: &Event<'_>, value: u64) -> ModuleResult {
        for (instance, salt) in &self.0 {
            ev.put(instance, value ^ salt)?;
        }
        Ok(())
    }
}

/// Registers the module's model (for the simulator) and builds its engine
/// module with its inputs and products.
pub(crate) fn build(
    model: DeviceModel,
    module: impl DeviceProducer,
    (consumes, produces): (&[&str], &[&str]),
    context: &DeviceContext,
) -> Result<ModuleDesc, DeviceError> {
    let label = model.label.clone();
    context.register_model(model);
    Ok(offload(&label, module, context)?
        .consumes(consumes.iter().copied())
        .produces(produces.iter().copied()))
}

struct SyntheticKernel {
    name: String,
    key: u64,
}

impl Kernel for SyntheticKernel {
    fn name(&self) -> &str {
        &self.name
    }
    fn source(&self) -> Option<&str> {
        Some(SYNTHETIC_CUDA)
    }
    fn param(&self) -> u64 {
        self.key
    }
    fn run(
        &self,
        input: &[u8],
        ins: &[usize],
        output: &mut [u8],
        outs: &[usize],
    ) -> Result<(), String> {
        each_invocation(input, ins, output, outs, |item, out| {
            let (Some(event), Some(inputs)) = (word(item, 0), word(item, 1)) else {
                return Err(format!(
                    "input of {} bytes, expected at least 16",
                    item.len()
                ));
            };
            let value = mix(event ^ self.key).wrapping_add(inputs);
            let out = out
                .get_mut(..8)
                .ok_or_else(|| "output shorter than 8 bytes".to_string())?;
            out.copy_from_slice(&value.to_le_bytes());
            Ok(())
        })
    }
}

/// The same kernel for a GPU backend (NVRTC): one thread per invocation.
const SYNTHETIC_CUDA: &str = concat!(
    mix_cuda!(),
    r#"// Little-endian word at any alignment.
__device__ unsigned long long word(const unsigned char* p) {
    unsigned long long w = 0;
    for (int b = 7; b >= 0; --b) w = (w << 8) | p[b];
    return w;
}
extern "C" __global__ void evflow_kernel(const unsigned char* in, const unsigned long long* ins,
                                         unsigned char* out, const unsigned long long* outs,
                                         unsigned long long n, unsigned long long key) {
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned long long value = mix(word(in + ins[i]) ^ key) + word(in + ins[i] + 8);
    for (int b = 0; b < 8; ++b) out[outs[i] + b] = (unsigned char)(value >> (8 * b));
}
"#
);

pub(crate) fn hash_str(s: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

impl DeviceProducer for Module {
    fn has_host(&self) -> bool {
        self.spec.host.is_some()
    }
    fn produce_host(&self, ev: &Event<'_>) -> ModuleResult {
        configured_failure(&self.spec.fail_on_events, ev)?;
        let inputs = consumed_digest(ev)?;
        if let Some(timing) = &self.spec.host {
            timing.run(ev)?;
        }
        self.products
            .put(ev, mix(event_key(ev) ^ self.key).wrapping_add(inputs))
    }
    fn pack(&self, ev: &Event<'_>, buf: &mut Vec<u8>) -> ModuleResult {
        let start = buf.len();
        buf.extend_from_slice(&event_key(ev).to_le_bytes());
        buf.extend_from_slice(&consumed_digest(ev)?.to_le_bytes());
        buf.resize(start + self.spec.bytes_in.max(16), 0);
        Ok(())
    }
    fn bytes_out(&self, _ev: &Event<'_>) -> usize {
        self.spec.bytes_out.max(8)
    }
    fn device_cost_s(&self, _ev: &Event<'_>) -> f64 {
        self.spec.device_cost_s
    }
    fn kernel(&self) -> Arc<dyn Kernel> {
        self.kernel.clone()
    }
    fn unpack(&self, ev: &Event<'_>, output: &[u8]) -> ModuleResult {
        configured_failure(&self.spec.fail_on_events, ev)?;
        let value = word(output, 0)
            .ok_or_else(|| evflow_core::ModuleError::msg("device output shorter than 8 bytes"))?;
        self.products.put(ev, value)
    }
}

/// A synthetic device producer, ready for a `Process`.
///
/// ```
/// use evflow_core::{EmptySource, Process, RunOptions, run};
/// use evflow_workloads::{self as synthetic, Timing, Work};
/// use evflow_device::*;
///
/// let ctx = DeviceContext::open(&DeviceChoice::Emulated(EmulatedConfig::default()),
///     DeviceOptions { split: SplitMode::Fixed(0.5), events_in_flight: 8, ..Default::default() })
///     .unwrap().0;
/// let spec = SyntheticDevice { host: Some(Timing::constant(1e-4, Work::Busy)),
///     device_cost_s: 1e-5, bytes_in: 1024, bytes_out: 64, fail_on_events: vec![] };
/// let mut p = Process::new("offload");
/// p.set_source(EmptySource::new(40));
/// p.add(synthetic_device("tracks", spec, &[], &[""], &ctx).unwrap());
/// p.add(synthetic::analyzer("use", Timing::zero(), &["tracks"]));
/// p.end_path("e", ["use"]);
/// run(p, &RunOptions { threads: 2, events_in_flight: 8, ..Default::default() }).unwrap();
/// let r = &ctx.reports()[0];
/// assert_eq!((r.host_calls, r.device_calls), (20, 20));
/// assert_eq!(r.bytes_in, 20 * 1024);
/// ```
pub fn synthetic_device(
    label: &str,
    spec: SyntheticDevice,
    consumes: &[&str],
    produces: &[&str],
    context: &DeviceContext,
) -> Result<ModuleDesc, DeviceError> {
    let key = hash_str(label);
    let model = DeviceModel {
        label: label.to_string(),
        has_host: spec.host.is_some(),
        device_cost_s: spec.device_cost_s,
        bytes_in: spec.bytes_in.max(16),
        bytes_out: spec.bytes_out.max(8),
    };
    // The host cost, for the simulator (which routes each invocation).
    let cost: Option<evflow_core::CostModel> = spec.host.clone().map(|t| {
        let cost: evflow_core::CostModel = Arc::new(move |index| t.seconds(index));
        cost
    });
    let module = Module {
        key,
        products: Products::new(produces),
        kernel: Arc::new(SyntheticKernel {
            name: format!("synthetic_{label}"),
            key,
        }),
        spec,
    };
    let desc = build(model, module, (consumes, produces), context)?;
    Ok(match cost {
        Some(cost) => desc.cost_model(cost),
        None => desc,
    })
}
