//! Per-module device figures for reports and traces.

use serde::Serialize;

use crate::device::LaunchTimes;
use crate::split::{SplitMode, SplitPoint};

/// What one device module did, counted as it runs (a run's offload, or the
/// simulator's model of it); [`report`](Self::report) makes its
/// [`DeviceModuleReport`].
#[derive(Clone, Debug, Default)]
pub struct DeviceModuleStats {
    pub host_calls: u64,
    pub host_s: f64,
    pub device_calls: u64,
    pub launches: u64,
    pub failed_launches: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub queued_s: f64,
    pub transfer_in_s: f64,
    pub kernel_s: f64,
    pub transfer_out_s: f64,
    pub launch_total_s: f64,
    pub max_events_per_launch: u64,
    /// Launches started by the time-out, not by the count.
    pub timed_out_launches: u64,
    /// Launches started because the engine had nothing else to run.
    pub idle_launches: u64,
}

impl DeviceModuleStats {
    /// Counts a launch of `events` invocations that moved the bytes given.
    pub fn launch(&mut self, events: usize, bytes_in: usize, bytes_out: usize, t: &LaunchTimes) {
        self.launches += 1;
        self.bytes_in += bytes_in as u64;
        self.bytes_out += bytes_out as u64;
        self.queued_s += t.queued_s;
        self.transfer_in_s += t.transfer_in_s;
        self.kernel_s += t.kernel_s;
        self.transfer_out_s += t.transfer_out_s;
        self.launch_total_s += t.total_s;
        self.max_events_per_launch = self.max_events_per_launch.max(events as u64);
    }

    /// The report of module `label`; `mode` is its split (`None`: a
    /// device-only module, which decides none).
    pub fn report(
        &self,
        label: &str,
        device: Option<String>,
        mode: Option<SplitMode>,
        history: &[SplitPoint],
    ) -> DeviceModuleReport {
        let launched = self.launches.max(1) as f64;
        DeviceModuleReport {
            label: label.into(),
            device,
            split: match mode {
                None => DEVICE_ONLY.into(),
                Some(SplitMode::Adaptive) => "adaptive".into(),
                Some(SplitMode::Fixed(p)) => format!("fixed:{}", p * 100.0),
            },
            host_calls: self.host_calls,
            device_calls: self.device_calls,
            launches: self.launches,
            failed_launches: self.failed_launches,
            events_per_launch: if self.launches == 0 {
                0.0
            } else {
                self.device_calls as f64 / launched
            },
            max_events_per_launch: self.max_events_per_launch,
            timed_out_launches: self.timed_out_launches,
            idle_launches: self.idle_launches,
            bytes_in: self.bytes_in,
            bytes_out: self.bytes_out,
            host_s: self.host_s,
            queued_s: self.queued_s,
            transfer_in_s: self.transfer_in_s,
            kernel_s: self.kernel_s,
            transfer_out_s: self.transfer_out_s,
            mean_launch_s: self.launch_total_s / launched,
            split_history: history.to_vec(),
        }
    }
}

/// The `split` of a module without a host implementation on a device:
/// every call ran there, no split was decided.
pub const DEVICE_ONLY: &str = "device-only";

/// What one device module did: the `devices` section of `evflow run --report`.
#[derive(Clone, Debug, Serialize)]
pub struct DeviceModuleReport {
    pub label: String,
    /// The device it ran on (`None`: host only).
    pub device: Option<String>,
    /// `adaptive`, `fixed:P`, or `device-only` (no host implementation:
    /// no split decided, an empty `split_history`).
    pub split: String,
    pub host_calls: u64,
    pub device_calls: u64,
    pub launches: u64,
    pub failed_launches: u64,
    pub events_per_launch: f64,
    pub max_events_per_launch: u64,
    /// Launches started by the combining time-out (the others by the
    /// count, or by `idle_launches`).
    pub timed_out_launches: u64,
    /// Launches started early because every event in flight waited (end
    /// of input, a run or luminosity-block boundary): nothing else could
    /// join them before the time-out.
    pub idle_launches: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Time in host calls.
    pub host_s: f64,
    /// Launch time waiting for the device's engines.
    pub queued_s: f64,
    pub transfer_in_s: f64,
    pub kernel_s: f64,
    pub transfer_out_s: f64,
    /// Mean time from submission to completion of a launch.
    pub mean_launch_s: f64,
    /// The fraction sent to the device over time.
    pub split_history: Vec<SplitPoint>,
}
