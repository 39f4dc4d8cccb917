//! Per-module device figures for reports and traces.

use serde::{Deserialize, Serialize};

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

/// Least-squares line `time = fixed + slope × size` over launches, kept as
/// running sums (a few additions per launch).
#[derive(Clone, Copy, Debug, Default)]
pub struct LineFit {
    n: f64,
    sum_x: f64,
    sum_xx: f64,
    sum_t: f64,
    sum_xt: f64,
}

impl LineFit {
    pub fn add(&mut self, size: f64, time: f64) {
        self.n += 1.0;
        self.sum_x += size;
        self.sum_xx += size * size;
        self.sum_t += time;
        self.sum_xt += size * time;
    }

    /// `(fixed, slope)`, both at least 0; `None` without a point. When
    /// every launch had the same size, the fixed part cannot be told from
    /// the rest: all of the time is put per unit (at that size both give
    /// the same times).
    ///
    /// ```
    /// use evflow_device::LineFit;
    ///
    /// let mut fit = LineFit::default();
    /// for n in [1.0, 4.0, 16.0, 64.0] {
    ///     fit.add(n, 10e-6 + 2e-6 * n);
    /// }
    /// let (fixed, slope) = fit.line().unwrap();
    /// assert!((fixed - 10e-6).abs() < 1e-12 && (slope - 2e-6).abs() < 1e-12);
    /// ```
    pub fn line(&self) -> Option<(f64, f64)> {
        if self.n <= 0.0 {
            return None;
        }
        let (mx, mt) = (self.sum_x / self.n, self.sum_t / self.n);
        let var = self.sum_xx / self.n - mx * mx;
        let per_unit = || {
            if mx > 0.0 { (0.0, mt / mx) } else { (mt, 0.0) }
        };
        if var <= 1e-9 * mx * mx || var <= 0.0 {
            return Some(per_unit());
        }
        let slope = (self.sum_xt / self.n - mx * mt) / var;
        let fixed = mt - slope * mx;
        Some(if slope < 0.0 {
            (mt, 0.0)
        } else if fixed < 0.0 {
            // Through the origin: the least-squares slope without a fixed part.
            (0.0, self.sum_xt / self.sum_xx)
        } else {
            (fixed, slope)
        })
    }
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
