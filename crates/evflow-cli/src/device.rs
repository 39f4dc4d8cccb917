//! `--device*` options: which device runs device modules, how work is split
//! and combined; the device section of the report and summary.

use std::io::Write;

use evflow_device::{
    CombinePolicy, DEVICE_ONLY, DeviceChoice, DeviceContext, DeviceModuleReport, DeviceOptions,
    EmulatedConfig, SplitMode,
};

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum DeviceArg {
    /// A GPU if one can be used, else the host (with a one-line notice).
    Auto,
    /// The emulated device (threads with a modelled latency and bandwidth).
    Emulated,
    /// A CUDA GPU; the job fails without one.
    Cuda,
    /// Host only.
    None,
}

/// Options of device modules (configurations with `device` tables).
#[derive(clap::Args, Debug, Clone)]
pub struct DeviceArgs {
    /// Device for modules with a device implementation.
    #[arg(long, value_enum, default_value = "auto")]
    pub device: DeviceArg,
    /// Host/device split: `adaptive`, or `fixed:P` with P the percentage of invocations on the device.
    #[arg(long, default_value = "adaptive", value_parser = parse_split)]
    pub device_split: SplitMode,
    /// Launch a batch once this many invocations of a module wait.
    #[arg(long, default_value_t = CombinePolicy::default().max_events)]
    pub device_batch: usize,
    /// ... or once the oldest has waited this many microseconds.
    #[arg(long, default_value_t = CombinePolicy::default().timeout_s * 1e6)]
    pub device_timeout_us: f64,
    /// ... unless this many launches of the module are on the device (0: no
    /// limit): then a timed-out batch waits for one to land, growing.
    #[arg(long, default_value_t = CombinePolicy::default().max_in_flight)]
    pub device_max_in_flight: usize,
    /// Without a limit, a batch whose launch the launches measured so far say
    /// would be mostly fixed cost waits while the device is busy with the
    /// module's launches or carries the events that would fill it, and its
    /// time-out follows the recent fills of full batches; this turns that off.
    #[arg(long)]
    pub device_no_hold: bool,
    /// Emulated device: kernel launch latency, microseconds.
    #[arg(long, default_value_t = EmulatedConfig::default().launch_latency_s * 1e6)]
    pub device_latency_us: f64,
    /// Emulated device: fixed cost of a transfer, microseconds.
    #[arg(long, default_value_t = EmulatedConfig::default().transfer_latency_s * 1e6)]
    pub device_transfer_latency_us: f64,
    /// Emulated device: host↔device bandwidth, GB/s per direction.
    #[arg(long, default_value_t = EmulatedConfig::default().bandwidth_bytes_s / 1e9)]
    pub device_bandwidth_gbs: f64,
    /// Emulated device: divides the modules' declared device times.
    #[arg(long, default_value_t = 1.0)]
    pub device_speedup: f64,
    /// No overlap of transfers and kernels of successive launches (emulated
    /// device: one engine; CUDA: one stream).
    #[arg(long)]
    pub device_no_overlap: bool,
    /// CUDA: streams (each with its own worker and pinned staging) that
    /// successive launches overlap on; `--device-no-overlap` means 1.
    #[arg(long, default_value_t = DeviceOptions::default().cuda_streams)]
    pub device_streams: usize,
    /// The options above given on the command line, not defaulted (clap
    /// ids; set by `main` from the parsed arguments).
    #[arg(skip)]
    pub given: Vec<&'static str>,
    /// A report's measured launches are simulated (`evflow simulate
    /// --times-from`), with or without a device.
    #[arg(skip)]
    pub launches_measured: bool,
}

/// The longest latency or timeout the device options take, in
/// microseconds: 10^6 s, the longest module time a configuration takes.
const MAX_MICROS: f64 = 1e12;
/// The smallest bandwidth (GB/s) and speed-up the device options take.
const MIN_RATE: f64 = 1e-6;

/// A number as a user would write it: `1e30`, not thirty zeros.
fn readable(v: f64) -> String {
    if v != 0.0 && v.is_finite() && !(1e-3..1e6).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

fn parse_split(s: &str) -> Result<SplitMode, String> {
    s.parse()
}

/// The `--device-*` options (their clap ids) and what they apply to.
const DEVICE_OPTIONS: [(&str, Applies); 11] = [
    ("device_split", Applies::AnyDevice),
    ("device_batch", Applies::AnyDevice),
    ("device_timeout_us", Applies::AnyDevice),
    ("device_max_in_flight", Applies::AnyDevice),
    ("device_no_hold", Applies::AnyDevice),
    ("device_no_overlap", Applies::AnyDevice),
    ("device_latency_us", Applies::Emulated),
    ("device_transfer_latency_us", Applies::Emulated),
    ("device_bandwidth_gbs", Applies::Emulated),
    ("device_speedup", Applies::Emulated),
    ("device_streams", Applies::Cuda),
];

#[derive(Clone, Copy, PartialEq)]
enum Applies {
    AnyDevice,
    Emulated,
    Cuda,
}

/// The `--device-*` options given on the command line (not defaulted).
pub fn given(matches: &clap::ArgMatches) -> Vec<&'static str> {
    DEVICE_OPTIONS
        .iter()
        .map(|&(id, _)| id)
        .filter(|id| matches.value_source(id) == Some(clap::parser::ValueSource::CommandLine))
        .collect()
}

/// Refuses a `--device-*` option given with a `--device` it cannot apply
/// to (`given`: their clap ids), rather than ignoring it: `--device none
/// --device-split fixed:50` ran everything on the host. With
/// `launches_measured` (`evflow simulate --times-from`), a report's
/// launches are simulated also with `--device none`, so the combining and
/// split options apply there. `auto` may open either device: not checked.
fn check_given(device: DeviceArg, given: &[&str], launches_measured: bool) -> Result<(), String> {
    let option = |id: &str| format!("--{}", id.replace('_', "-"));
    for &(id, applies) in DEVICE_OPTIONS.iter().filter(|(id, _)| given.contains(id)) {
        let refused = match (device, applies) {
            (DeviceArg::Auto, _) => None,
            (DeviceArg::None, Applies::AnyDevice) if launches_measured => None,
            (DeviceArg::None, _) => Some(
                "device modules run on the host there; leave it out, or choose a \
                 device (--device emulated)",
            ),
            (DeviceArg::Emulated, Applies::Cuda) => {
                Some("it applies to a CUDA GPU only (--device cuda)")
            }
            (DeviceArg::Cuda, Applies::Emulated) => {
                Some("it applies to the emulated device only (--device emulated)")
            }
            _ => None,
        };
        if let Some(why) = refused {
            return Err(format!(
                "{} has no effect with --device {}: {why}",
                option(id),
                format!("{device:?}").to_lowercase()
            ));
        }
    }
    Ok(())
}

impl DeviceArgs {
    /// Opens the device; the notice is for jobs that have device modules.
    pub fn open(&self) -> Result<(DeviceContext, Option<String>), String> {
        // The modelled times these give must stay within what a clock can
        // hold: a timeout or latency of 10^30 µs made the device's threads
        // panic (and the job hang) instead of failing here.
        let positive = |v: f64, name: &str| {
            if v.is_finite() && v >= MIN_RATE {
                Ok(v)
            } else {
                Err(format!(
                    "--{name} must be a finite number >= {MIN_RATE:e}, not {}",
                    readable(v)
                ))
            }
        };
        let non_negative = |v: f64, name: &str| {
            if v.is_finite() && (0.0..=MAX_MICROS).contains(&v) {
                Ok(v)
            } else {
                Err(format!(
                    "--{name} must be a number of microseconds between 0 and {MAX_MICROS:e} \
                     (10^6 s), not {}",
                    readable(v)
                ))
            }
        };
        if self.device_batch == 0 {
            return Err("--device-batch must be at least 1".into());
        }
        if self.device_streams == 0 {
            return Err("--device-streams must be at least 1".into());
        }
        // Checked whatever the device: a wrong value is a mistake on the
        // command line even where `auto` or `none` would not use it.
        let emulated = EmulatedConfig {
            launch_latency_s: non_negative(self.device_latency_us, "device-latency-us")? * 1e-6,
            transfer_latency_s: non_negative(
                self.device_transfer_latency_us,
                "device-transfer-latency-us",
            )? * 1e-6,
            bandwidth_bytes_s: positive(self.device_bandwidth_gbs, "device-bandwidth-gbs")? * 1e9,
            speedup: positive(self.device_speedup, "device-speedup")?,
            overlap: !self.device_no_overlap,
            ..EmulatedConfig::default()
        };
        check_given(self.device, &self.given, self.launches_measured)?;
        let choice = match self.device {
            DeviceArg::Auto => DeviceChoice::Auto,
            DeviceArg::None => DeviceChoice::None,
            DeviceArg::Cuda => DeviceChoice::Cuda,
            DeviceArg::Emulated => DeviceChoice::Emulated(emulated),
        };
        let options = DeviceOptions {
            split: self.device_split,
            combine: CombinePolicy {
                max_events: self.device_batch,
                timeout_s: non_negative(self.device_timeout_us, "device-timeout-us")? * 1e-6,
                max_in_flight: self.device_max_in_flight,
                hold_small_launches: !self.device_no_hold,
            },
            cuda_streams: if self.device_no_overlap {
                1
            } else {
                self.device_streams
            },
            ..DeviceOptions::default()
        };
        DeviceContext::open(&choice, options).map_err(|e| format!("--device: {e}"))
    }
}

/// The report as JSON, with a `devices` section when the job had device
/// modules.
pub fn report_json(
    report: &evflow_core::Report,
    devices: &[DeviceModuleReport],
) -> Result<serde_json::Value, String> {
    let mut value = serde_json::to_value(report).map_err(|e| e.to_string())?;
    if !devices.is_empty()
        && let Some(object) = value.as_object_mut()
    {
        let devices = serde_json::to_value(devices).map_err(|e| e.to_string())?;
        object.insert("devices".into(), devices);
    }
    Ok(value)
}

/// One line per device module after the time report.
pub fn print_summary(devices: &[DeviceModuleReport]) {
    let _ = write_summary(&mut std::io::stdout().lock(), devices);
}

fn write_summary(out: &mut impl Write, devices: &[DeviceModuleReport]) -> std::io::Result<()> {
    for d in devices {
        // A module without a host implementation decided no split.
        let split = if d.split == DEVICE_ONLY {
            "device only (no host implementation)".to_string()
        } else {
            let last = d.split_history.last().map_or(0.0, |p| p.device_fraction);
            format!("split {} (last {:.0}% device)", d.split, last * 100.0)
        };
        writeln!(
            out,
            "device module {} on {}: {} host + {} device calls, {} launches ({:.1} events/launch), \
             {:.1} MB in, {:.1} MB out, transfers {:.3} s, kernels {:.3} s, {}{}",
            d.label,
            d.device.as_deref().unwrap_or("host"),
            d.host_calls,
            d.device_calls,
            d.launches,
            d.events_per_launch,
            d.bytes_in as f64 / 1e6,
            d.bytes_out as f64 / 1e6,
            d.transfer_in_s + d.transfer_out_s,
            d.kernel_s,
            split,
            match (d.failed_launches, d.failed_calls) {
                (0, 0) => String::new(),
                (launches, calls) => format!(", {calls} failed calls ({launches} failed launches)"),
            },
        )?;
    }
    Ok(())
}
