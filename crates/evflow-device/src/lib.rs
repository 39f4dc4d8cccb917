//! # evflow-device
//!
//! Accelerators for evflow: modules with a device implementation beside
//! (or instead of) their host one, run through the engine's external-work
//! path so that no evflow thread ever waits on a device.
//!
//! * [`Device`]: a backend that runs [`Launch`]es asynchronously (the
//!   events' packed inputs copied once into one transfer in, one kernel
//!   over a batch, transfer out) and calls back.
//!   [`EmulatedDevice`] runs kernels on its own threads with a modelled
//!   latency, bandwidth and speed-up, separate copy and compute engines,
//!   and configurable faults.
//! * [`Combiner`]: gathers invocations of one module across events in
//!   flight into one launch, by count or time-out (pure logic).
//! * [`SplitController`]: routes invocations to the host or the device,
//!   adaptively to the floor of the bathtub or by a fixed fraction (pure
//!   logic).
//! * [`DeviceProducer`] + [`offload`]: a user's device module as an engine
//!   module; [`synthetic_device`]: a synthetic one with declared costs;
//!   [`compute_device`]: one running a real kernel (`stencil`, `nbody`)
//!   with a CUDA source and a bit-identical Rust twin.
//! * [`RandomService`]: random numbers generated on the device into one
//!   half of a double buffer while modules draw from the other; the host
//!   computes the same stream when the device is late or absent.
//!
//! See `docs/accelerators.md` for the model and the measurements.

// Public types print in tests and users' logs.
#![warn(missing_debug_implementations)]

/// SplitMix64's finaliser (`evflow_core::hash::mix`) in CUDA C, for the
/// sources of kernels that hash (`concat!(mix_cuda!(), ...)`).
macro_rules! mix_cuda {
    () => {
        r#"
__device__ unsigned long long mix(unsigned long long z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
"#
    };
}

mod combine;
mod context;
#[cfg(feature = "cuda")]
mod cuda;
mod device;
mod emulated;
mod handoff;
mod kernels;
mod launch_costs;
mod offload;
mod prng;
mod split;
mod stats;
mod synthetic;

pub use combine::{CombinePolicy, Combiner, FILL_TIMEOUTS, PROBE_AFTER};
pub use context::{DeviceChoice, DeviceContext, DeviceModel, DeviceOptions};
#[cfg(feature = "cuda")]
pub use cuda::{CudaDevice, cuda_present};
pub use device::{
    Device, DeviceBusy, DeviceError, Kernel, Launch, LaunchDone, LaunchInput, LaunchOutput,
    LaunchTimes, each_invocation,
};
pub use emulated::{EmulatedConfig, EmulatedDevice, Faults};
pub use kernels::{
    ComputeDevice, ComputeKernel, ComputeKind, STENCIL_SWEEPS, compute_device, generate, nbody,
    output_digest, stencil,
};
pub use launch_costs::LineFit;
pub use offload::{DeviceProducer, Offload, offload};
pub use prng::{RandomService, RandomStats, StreamFill, stream_value};
pub use split::{Side, SplitController, SplitMode, SplitPoint, SplitTuning};
pub use stats::{DEVICE_ONLY, DeviceModuleReport, DeviceModuleStats, LaunchModel};
pub use synthetic::{SyntheticDevice, synthetic_device};
