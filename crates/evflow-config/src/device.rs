//! Device modules of the TOML format: a producer with a `device` table has
//! a device implementation beside (or instead of) its host one
//! (`docs/configuration.md`, "Device modules").

use evflow_core::{Concurrency, ModuleDesc};
use evflow_device::{DeviceContext, SyntheticDevice, synthetic_device};
use evflow_workloads::Timing;
use serde::Deserialize;

use crate::common;

/// `device = { time = ..., bytes_in = ..., bytes_out = ..., host = ... }`
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
    let spec = SyntheticDevice {
        host: spec.host.unwrap_or(true).then_some(host),
        device_cost_s: time * time_scale,
        bytes_in: bytes(spec.bytes_in, "bytes_in", 16)?,
        bytes_out: bytes(spec.bytes_out, "bytes_out", 8)?,
    };
    let (consumes, produces) = io;
    synthetic_device(label, spec, consumes, produces, context)
        .map(|m| m.concurrency(concurrency))
        .map_err(|e| e.to_string())
}
