//! Device modules of the TOML format: a producer with a `device` table has
//! a device implementation beside (or instead of) its host one
//! (`docs/configuration.md`, "Device modules"). With `kernel` the module
//! runs a real compute kernel (`stencil`, `nbody`) of `size` elements or
//! particles per event: its host side runs the kernel's Rust twin.

use evflow_core::{Concurrency, ModuleDesc};
use evflow_device::{
    ComputeDevice, ComputeKind, DeviceContext, SyntheticDevice, compute_device, synthetic_device,
};
use evflow_workloads::Timing;
use serde::Deserialize;

use crate::common;

/// `device = { time = ..., bytes_in = ..., bytes_out = ..., host = ... }`
/// or `device = { kernel = "nbody", size = 256, host = ..., time = ... }`
#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct DeviceSpec {
    /// Device time per event at speed-up 1, seconds (emulated device,
    /// simulator).
    time: Option<f64>,
    /// Bytes moved to the device per event.
    bytes_in: Option<u64>,
    /// Bytes moved back per event.
    bytes_out: Option<u64>,
    /// Whether the module also has a host implementation.
    host: Option<bool>,
    /// A real compute kernel (`stencil`, `nbody`) instead of declared costs.
    kernel: Option<String>,
    /// Elements (stencil) or particles (nbody) per event.
    size: Option<u64>,
}

impl DeviceSpec {
    /// Whether the module runs a real kernel (its host side is the
    /// kernel's Rust twin, not a declared time).
    pub(crate) fn has_kernel(&self) -> bool {
        self.kernel.is_some()
    }

    /// Whether the module also has a host implementation (`host`, by
    /// default true).
    pub(crate) fn has_host(&self) -> bool {
        self.host.unwrap_or(true)
    }
}

/// Largest per-event transfer accepted (1 GiB): larger is a typo.
const MAX_BYTES: u64 = 1 << 30;

/// Builds the device producer `label`; errors are messages for the module.
pub(crate) fn build(
    label: &str,
    spec: &DeviceSpec,
    host: Timing,
    time_scale: f64,
    io: (&[&str], &[&str]),
    concurrency: Concurrency,
    context: &DeviceContext,
) -> Result<ModuleDesc, String> {
    let time = spec.time.unwrap_or(0.0);
    common::check_time(time, time_scale, "device.time")?;
    let bytes = |v: Option<u64>, key: &str, min: u64| -> Result<usize, String> {
        let v = v.unwrap_or(min);
        if !(min..=MAX_BYTES).contains(&v) {
            return Err(format!(
                "device.{key} must be between {min} and {MAX_BYTES} (got {v})"
            ));
        }
        Ok(v as usize)
    };
    if matches!(concurrency, Concurrency::Cloned(_)) {
        return Err("concurrency: a device module cannot be cloned".into());
    }
    let (consumes, produces) = io;
    if let Some(name) = &spec.kernel {
        let kind: ComputeKind = name.parse().map_err(|e| format!("device.kernel: {e}"))?;
        for (key, given) in [
            ("bytes_in", spec.bytes_in.is_some()),
            ("bytes_out", spec.bytes_out.is_some()),
        ] {
            if given {
                return Err(format!(
                    "device.{key} does not apply with device.kernel (the bytes follow from device.size)"
                ));
            }
        }
        // The kernel's Rust twin is the host side: it has no configured
        // failures, and silently failing on neither side would mislead.
        if !host.failures().is_empty() {
            return Err("fail_on_events does not apply with device.kernel".into());
        }
        let size = spec.size.ok_or_else(|| {
            format!(
                "device.size is required with device.kernel ({} per event)",
                match kind {
                    ComputeKind::Stencil => "elements",
                    ComputeKind::Nbody => "particles",
                }
            )
        })?;
        let spec = ComputeDevice {
            kind,
            size: usize::try_from(size).unwrap_or(usize::MAX),
            host: spec.has_host(),
            device_cost_s: time * time_scale,
        };
        spec.check().map_err(|e| format!("device.{e}"))?;
        return compute_device(label, spec, consumes, produces, context)
            .map(|m| m.concurrency(concurrency))
            .map_err(|e| e.unlabelled().to_string());
    }
    if spec.size.is_some() {
        return Err("device.size applies only with device.kernel".into());
    }
    let spec = SyntheticDevice {
        host: spec.has_host().then_some(host.clone()),
        device_cost_s: time * time_scale,
        bytes_in: bytes(spec.bytes_in, "bytes_in", 16)?,
        bytes_out: bytes(spec.bytes_out, "bytes_out", 8)?,
        // Also without a host implementation: the device side fails them.
        fail_on_events: host.failures().to_vec(),
    };
    synthetic_device(label, spec, consumes, produces, context)
        .map(|m| m.concurrency(concurrency))
        .map_err(|e| e.unlabelled().to_string())
}
