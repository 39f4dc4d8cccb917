//! Per-module device figures for reports and traces.

use serde::{Deserialize, Serialize};

use crate::device::LaunchTimes;
use crate::launch_costs::LineFit;
use crate::split::{SplitMode, SplitPoint};

/// What one device module did, counted as it runs (a run's offload, or the
/// simulator's model of it); [`report`](Self::report) makes its
/// [`DeviceModuleReport`].
#[derive(Clone, Debug, Default)]
pub struct DeviceModuleStats {
    pub host_calls: u64,
    pub host_s: f64,
    pub device_calls: u64,
    /// Calls routed to the device that ran neither there nor on the host:
    /// their pack failed or their launch failed (`host_calls +
    /// device_calls + failed_calls` is the module's calls).
    pub failed_calls: u64,
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
    /// Each stage's time against the launch's size, for the launch model.
    pub kernel_fit: LineFit,
    pub transfer_in_fit: LineFit,
    pub transfer_out_fit: LineFit,
}

impl DeviceModuleStats {
    /// Counts a launch of `events` invocations that moved the bytes given.
    pub fn launch(&mut self, events: usize, bytes_in: usize, bytes_out: usize, t: &LaunchTimes) {
        self.kernel_fit.add(events as f64, t.kernel_s);
        self.transfer_in_fit.add(bytes_in as f64, t.transfer_in_s);
        self.transfer_out_fit
            .add(bytes_out as f64, t.transfer_out_s);
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

    /// The module's launches as straight lines of their size (see
    /// [`LaunchModel`]); `None` before the first launch.
    pub fn launch_model(&self, overlap: bool) -> Option<LaunchModel> {
        let (kernel_fixed_s, kernel_per_event_s) = self.kernel_fit.line()?;
        let (transfer_in_fixed_s, transfer_in_per_byte_s) = self.transfer_in_fit.line()?;
        let (transfer_out_fixed_s, transfer_out_per_byte_s) = self.transfer_out_fit.line()?;
        Some(LaunchModel {
            kernel_fixed_s,
            kernel_per_event_s,
            transfer_in_fixed_s,
            transfer_in_per_byte_s,
            transfer_out_fixed_s,
            transfer_out_per_byte_s,
            overlap,
        })
    }

    /// The report of module `label`; `mode` is its split (`None`: a
    /// device-only module, which decides none); `overlap`: whether the
    /// device overlaps successive launches.
    pub fn report(
        &self,
        label: &str,
        device: Option<String>,
        mode: Option<SplitMode>,
        history: &[SplitPoint],
        overlap: bool,
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
            failed_calls: self.failed_calls,
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
            launch_model: self.launch_model(overlap),
            split_history: history.to_vec(),
        }
    }
}

/// The `split` of a module without a host implementation on a device:
/// every call ran there, no split was decided.
pub const DEVICE_ONLY: &str = "device-only";

/// What one device module did: the `devices` section of `evflow run --report`
/// (read back by `evflow report`; fields added later default when absent).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DeviceModuleReport {
    pub label: String,
    /// The device it ran on (`None`: host only).
    pub device: Option<String>,
    /// `adaptive`, `fixed:P`, or `device-only` (no host implementation:
    /// no split decided, an empty `split_history`).
    pub split: String,
    pub host_calls: u64,
    pub device_calls: u64,
    /// Calls that ran on neither side: routed to the device, their pack or
    /// their launch failed (`host_calls + device_calls + failed_calls` is
    /// the module's calls).
    #[serde(default)]
    pub failed_calls: u64,
    pub launches: u64,
    pub failed_launches: u64,
    pub events_per_launch: f64,
    pub max_events_per_launch: u64,
    /// Launches started by the combining time-out (the others by the
    /// count, or by `idle_launches`).
    #[serde(default)]
    pub timed_out_launches: u64,
    /// Launches started early because every event in flight waited (end
    /// of input, a run or luminosity-block boundary): nothing else could
    /// join them before the time-out.
    #[serde(default)]
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
    /// The launches' stage times as lines of their size: what `evflow
    /// simulate --times-from` takes as the device's model of this module.
    #[serde(default)]
    pub launch_model: Option<LaunchModel>,
    /// The fraction sent to the device over time.
    pub split_history: Vec<SplitPoint>,
}

/// One module's launches on its device, from a run's measurements: each
/// stage's time is `fixed + per_unit × size` (the kernel per event,
/// transfers per byte), and whether the stages of successive launches
/// overlap. `evflow simulate --times-from REPORT` simulates the device of a
/// run (a GPU's included) with it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LaunchModel {
    pub kernel_fixed_s: f64,
    pub kernel_per_event_s: f64,
    pub transfer_in_fixed_s: f64,
    pub transfer_in_per_byte_s: f64,
    pub transfer_out_fixed_s: f64,
    pub transfer_out_per_byte_s: f64,
    pub overlap: bool,
}

impl LaunchModel {
    /// The stage times (in, kernel, out) of a launch of `events`
    /// invocations moving the bytes given.
    pub fn times(&self, events: usize, bytes_in: usize, bytes_out: usize) -> (f64, f64, f64) {
        (
            self.transfer_in_fixed_s + self.transfer_in_per_byte_s * bytes_in as f64,
            self.kernel_fixed_s + self.kernel_per_event_s * events as f64,
            self.transfer_out_fixed_s + self.transfer_out_per_byte_s * bytes_out as f64,
        )
    }
}
