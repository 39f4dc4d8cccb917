//! `evflow simulate --times-from FILE`: module times measured by a run (its
//! report or trace), checked, and applied to the configuration's modules.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use evflow_core::{CostModel, Process};
use serde_json::Value;

/// The longest mean time per call taken: the configuration loader's limit
/// on one event's time.
const MAX_SECONDS: f64 = 1e6;

/// Most events over which a configured cost model is averaged (a longer
/// job's model mean is taken over its first this many events).
const MAX_SAMPLED_EVENTS: u64 = 1 << 16;

/// Measured module times, from a report or a trace.
#[derive(Debug, Default)]
pub struct ModuleTimes {
    /// Mean running time per host call, seconds, by label.
    pub times: HashMap<String, f64>,
    /// Device modules the report names that made no host call: their
    /// device-side calls (unpacking results) say nothing of the host cost.
    pub device_only: Vec<String>,
    /// From a trace, which does not tell a device module's host calls from
    /// its device calls.
    pub from_trace: bool,
    /// The launches of device modules as the report measured them, by label.
    pub device_launches: HashMap<String, evflow_device::LaunchModel>,
    /// The name of the process the report measured (a trace has none).
    pub process: Option<String>,
}

/// What `--times-from` gives the simulation besides the modules' costs.
pub struct Applied {
    /// Labels with a measured time.
    pub measured: HashSet<String>,
    /// The device's launches as the run measured them, by label.
    pub device_launches: HashMap<String, evflow_device::LaunchModel>,
}

/// Reads the measured times of `path`, applies them to the configuration's
/// modules (`config` names it in messages), says what matched and warns
/// about a report that looks like another configuration's.
pub fn apply(
    path: &Path,
    loaded: &mut evflow_config::Loaded,
    config: &Path,
    quiet: bool,
) -> Result<Applied, String> {
    let mut times = mean_module_times(path)?;
    let measured = times.times.keys().cloned().collect();
    if times.from_trace {
        // A trace does not tell a device module's host calls from its
        // device calls: those keep the configuration's times.
        for model in loaded.devices.iter().flat_map(|d| d.models()) {
            if times.times.remove(&model.label).is_some() {
                times.device_only.push(model.label);
            }
        }
    }
    let process_name = loaded.process.name().to_string();
    if let Some(name) = times.process.as_deref().filter(|n| *n != process_name) {
        eprintln!(
            "evflow: warning: {}: a report of process '{name}', but {} is process \
             '{process_name}': its module times may be another configuration's",
            path.display(),
            config.display()
        );
    }
    let matched = apply_times(&mut loaded.process, &times, loaded.events);
    // The device's launches as the run measured them, for the modules of
    // this configuration that have a device implementation.
    let models: Vec<String> = loaded
        .devices
        .iter()
        .flat_map(|d| d.models())
        .map(|m| m.label)
        .collect();
    let device_launches: HashMap<_, _> = times
        .device_launches
        .into_iter()
        .filter(|(label, _)| models.contains(label))
        .collect();
    if matched.matched == 0 && device_launches.is_empty() {
        return Err(format!(
            "--times-from {}: none of the {} modules of {} has a measured time there \
             (a report or trace of another configuration?)",
            path.display(),
            matched.total,
            config.display()
        ));
    }
    if matched.matched * 2 < matched.total {
        eprintln!(
            "evflow: warning: {}: only {} of the {} modules of {} have a measured time \
             there; {} fall back to the configuration's times (a report or trace of \
             another configuration?)",
            path.display(),
            matched.matched,
            matched.total,
            config.display(),
            matched.total - matched.matched
        );
    }
    if !quiet {
        println!("{}", matched.describe(path));
    }
    if !quiet && !device_launches.is_empty() {
        let mut labels: Vec<&str> = device_launches.keys().map(String::as_str).collect();
        labels.sort_unstable();
        println!(
            "device launches of {} from {}: the simulated device follows the run's",
            labels.join(", "),
            path.display()
        );
    }
    Ok(Applied {
        measured,
        device_launches,
    })
}

/// A measured figure `key` of a report's entry: a finite number >= 0, none
/// when absent; `at` names the file and the module.
fn figure(entry: &Value, key: &str, at: &str) -> Result<Option<f64>, String> {
    let Some(v) = entry.get(key) else {
        return Ok(None);
    };
    match v.as_f64() {
        Some(x) if x.is_finite() && x >= 0.0 => Ok(Some(x)),
        _ => Err(format!(
            "{at}: '{key}' must be a finite number >= 0, not {v}"
        )),
    }
}

/// The mean time per call of a report's entry (`calls_key` calls taking
/// `time_key` seconds in all); none when it made no call.
fn mean_per_call(
    entry: &Value,
    calls_key: &str,
    time_key: &str,
    at: &str,
) -> Result<Option<f64>, String> {
    let calls = figure(entry, calls_key, at)?;
    let seconds = figure(entry, time_key, at)?;
    // Time without calls is a damaged report, not a module that never ran.
    let calls = match (calls, seconds) {
        (Some(calls), _) => calls,
        (None, Some(seconds)) => {
            return Err(format!(
                "{at}: '{calls_key}' is missing ('{time_key}' is {seconds} s)"
            ));
        }
        (None, None) => 0.0,
    };
    if calls.fract() != 0.0 {
        return Err(format!(
            "{at}: '{calls_key}' must be a whole number, not {calls}"
        ));
    }
    if calls == 0.0 {
        return Ok(None);
    }
    let seconds =
        seconds.ok_or_else(|| format!("{at}: '{time_key}' is missing ({calls} calls)"))?;
    let mean = seconds / calls;
    if mean > MAX_SECONDS {
        return Err(format!(
            "{at}: '{time_key}' / '{calls_key}' is {mean:e} s per call, beyond \
             {MAX_SECONDS:e} s (the configuration's limit per event)"
        ));
    }
    Ok(Some(mean))
}

/// Most bytes one event moves each way (a configuration's `device.bytes_in`
/// and `bytes_out`): a time per byte is bounded by what moving them takes.
const MAX_EVENT_BYTES: f64 = (1u64 << 30) as f64;

/// A device module's `launch_model` (`at` names the file and the module):
/// each figure a measured time, finite and >= 0 (the fit writes none
/// below 0), and none beyond [`MAX_SECONDS`] for a launch of one event
/// moving the most bytes an event may, so that the simulated device's
/// stages are times of a launch, not a damaged file's.
fn launch_model(model: &Value, at: &str) -> Result<evflow_device::LaunchModel, String> {
    let parsed: evflow_device::LaunchModel =
        serde_json::from_value(model.clone()).map_err(|e| format!("{at}: launch_model: {e}"))?;
    let figures = [
        ("kernel_fixed_s", parsed.kernel_fixed_s, 1.0),
        ("kernel_per_event_s", parsed.kernel_per_event_s, 1.0),
        ("transfer_in_fixed_s", parsed.transfer_in_fixed_s, 1.0),
        (
            "transfer_in_per_byte_s",
            parsed.transfer_in_per_byte_s,
            MAX_EVENT_BYTES,
        ),
        ("transfer_out_fixed_s", parsed.transfer_out_fixed_s, 1.0),
        (
            "transfer_out_per_byte_s",
            parsed.transfer_out_per_byte_s,
            MAX_EVENT_BYTES,
        ),
    ];
    for (key, value, units) in figures {
        if !(value.is_finite() && value >= 0.0) {
            // The file's own text of the figure, as the modules' errors give it.
            let written = model.get(key).map_or(value.to_string(), Value::to_string);
            return Err(format!(
                "{at}: launch_model.{key} must be a finite number >= 0, not {written}"
            ));
        }
        if value * units > MAX_SECONDS {
            let what = if units > 1.0 {
                format!(
                    "{value:e} s per byte: the {} bytes an event may move would take {:e} s",
                    units as u64,
                    value * units
                )
            } else {
                format!("{value:e} s")
            };
            return Err(format!(
                "{at}: launch_model.{key} is {what}, beyond {MAX_SECONDS:e} s (the \
                 configuration's limit per event)"
            ));
        }
    }
    Ok(parsed)
}

/// Mean running time per call of every module, from a report or a trace.
/// A device module's time is its host time per host call (the report's
/// `devices` section): the mean over all its calls mixes in the device
/// side's unpacking, far cheaper than the host work.
pub fn mean_module_times(path: &Path) -> Result<ModuleTimes, String> {
    let doc = crate::inspect::read_json(path).map_err(|e| format!("--times-from: {e}"))?;
    let mut out = ModuleTimes {
        process: doc.get("process").and_then(Value::as_str).map(Into::into),
        ..ModuleTimes::default()
    };
    let times = &mut out.times;
    let at = |what: &str, label: &str| format!("--times-from {}: {what} '{label}'", path.display());
    let label_of = |entry: &Value, section: &str, i: usize| {
        entry
            .get("label")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| {
                format!(
                    "--times-from {}: {section}[{i}]: 'label' must be a string",
                    path.display()
                )
            })
    };
    if doc.get("traceEvents").is_some() {
        out.from_trace = true;
        let mut sums: HashMap<String, (f64, u64)> = HashMap::new();
        for (name, dur_us) in crate::inspect::module_durations(&doc, path)? {
            if !(dur_us.is_finite() && dur_us >= 0.0) {
                return Err(format!(
                    "{}: a slice's 'dur' must be a finite number >= 0, not {dur_us}",
                    at("module", &name)
                ));
            }
            let e = sums.entry(name).or_default();
            e.0 += dur_us * 1e-6;
            e.1 += 1;
        }
        for (name, (sum, n)) in sums {
            let mean = sum / n as f64;
            if mean > MAX_SECONDS {
                return Err(format!(
                    "{}: 'dur' is {mean:e} s per call on average, beyond {MAX_SECONDS:e} s \
                     (the configuration's limit per event)",
                    at("module", &name)
                ));
            }
            times.insert(name, mean);
        }
    } else if let Some(modules) = doc.get("modules").and_then(Value::as_array) {
        let mut seen = HashSet::new();
        for (i, m) in modules.iter().enumerate() {
            let label = label_of(m, "modules", i)?;
            // Two entries would leave the mean to whichever came last.
            if !seen.insert(label.clone()) {
                return Err(format!(
                    "{}: modules[{i}]: is named twice in the report",
                    at("module", &label)
                ));
            }
            if let Some(mean) = mean_per_call(m, "calls", "run_s", &at("module", &label))? {
                times.insert(label, mean);
            }
        }
        for (i, d) in doc
            .get("devices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let label = label_of(d, "devices", i)?;
            let at = at("device module", &label);
            if let Some(model) = d.get("launch_model").filter(|m| !m.is_null()) {
                out.device_launches
                    .insert(label.clone(), launch_model(model, &at)?);
            }
            match mean_per_call(d, "host_calls", "host_s", &at)? {
                Some(mean) => {
                    times.insert(label, mean);
                }
                None => {
                    times.remove(&label);
                    out.device_only.push(label);
                }
            }
        }
    } else if doc.get("simulated_s").is_some() {
        return Err(format!(
            "{}: a simulation's report (evflow simulate --report): measured times come from a \
             report or trace of a real run (evflow run --report / --trace)",
            path.display()
        ));
    } else {
        return Err(format!("{}: neither a report nor a trace", path.display()));
    }
    Ok(out)
}

/// How many modules of the configuration took their time from a report.
#[derive(Debug, PartialEq)]
pub struct Matched {
    pub matched: usize,
    pub total: usize,
    /// Matched modules whose configured per-event times vary: they keep
    /// their shape, scaled to the measured mean.
    pub scaled: usize,
    /// Labels of the configuration without a measured time (first few).
    missing: Vec<String>,
    /// Device modules without a measured host time (they ran only on the
    /// device, or the times come from a trace).
    device_only: Vec<String>,
    from_trace: bool,
}

impl Matched {
    fn describe(&self, path: &Path) -> String {
        let mut line = format!(
            "module times from {}: {} of {} modules matched",
            path.display(),
            self.matched,
            self.total
        );
        if self.matched > 0 {
            let constant = self.matched - self.scaled;
            line += &format!(
                " ({} with per-event times keep their variation, scaled to the measured \
                 mean per call; {constant} with a constant time take the measured mean)",
                self.scaled
            );
        }
        if !self.device_only.is_empty() {
            let one = self.device_only.len() == 1;
            line += &format!(
                "; {} {}, so {} the configuration's time{}",
                self.device_only.join(", "),
                if self.from_trace {
                    "ran on a device and a trace does not tell its host calls from its device calls"
                } else {
                    "ran only on the device there (no host time measured)"
                },
                if one { "it keeps" } else { "they keep" },
                if one { "" } else { "s" },
            );
        }
        if !self.missing.is_empty() {
            let shown = self.missing.iter().take(5).cloned().collect::<Vec<_>>();
            let more = self.missing.len() - shown.len();
            line += &format!(
                "; the others keep the configuration's times: {}{}",
                shown.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            );
        }
        line
    }
}

/// Gives every module the report names its measured mean time per (host)
/// call over the job's `events`, keeping the shape of a configured cost
/// model that varies from event to event ([`fitted`]). The measurement
/// already ran at whatever time scale the measured run used, so it is not
/// scaled again.
pub fn apply_times(process: &mut Process, times: &ModuleTimes, events: u64) -> Matched {
    let mut matched = Matched {
        matched: 0,
        total: 0,
        scaled: 0,
        missing: Vec::new(),
        device_only: Vec::new(),
        from_trace: times.from_trace,
    };
    for m in process.modules_mut() {
        matched.total += 1;
        match times.times.get(m.label()) {
            Some(&seconds) => {
                matched.matched += 1;
                let (cost, scaled) = fitted(m.cost(), events, seconds);
                matched.scaled += usize::from(scaled);
                m.set_cost_model(cost);
            }
            None if times.device_only.iter().any(|l| l == m.label()) => {
                matched.device_only.push(m.label().to_string());
            }
            None => matched.missing.push(m.label().to_string()),
        }
    }
    matched
}

/// The cost model of a module measured at `measured` s per call: the
/// configured model times the factor that makes its mean over the job's
/// `events` the measured mean, so that per-event variation (long events,
/// a serial module's bursts) survives; the measured mean on every call
/// when the configured model is constant or gives no time. `true` when the
/// configured shape was kept.
fn fitted(cost: Option<&CostModel>, events: u64, measured: f64) -> (CostModel, bool) {
    let constant: CostModel = Arc::new(move |_| measured);
    let Some(cost) = cost else {
        return (constant, false);
    };
    let n = events.clamp(1, MAX_SAMPLED_EVENTS);
    let (mut sum, mut low, mut high) = (0.0f64, f64::INFINITY, 0.0f64);
    for index in 0..n {
        let x = cost(index);
        if !(x.is_finite() && x >= 0.0) {
            return (constant, false);
        }
        sum += x;
        low = low.min(x);
        high = high.max(x);
    }
    let mean = sum / n as f64;
    if !mean.is_finite() || mean <= 0.0 || high - low <= 1e-12 * high {
        return (constant, false);
    }
    let factor = measured / mean;
    let cost = Arc::clone(cost);
    (Arc::new(move |index| factor * cost(index)), true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(f: impl Fn(u64) -> f64 + Send + Sync + 'static) -> CostModel {
        Arc::new(f)
    }

    #[test]
    fn a_varying_model_keeps_its_shape_at_the_measured_mean() {
        // 1, 3, 1, 3, ...: mean 2 over 4 events; measured 4 s per call.
        let varying = model(|i| if i % 2 == 0 { 1.0 } else { 3.0 });
        let (cost, scaled) = fitted(Some(&varying), 4, 4.0);
        assert!(scaled);
        assert_eq!(
            (0..4).map(|i| cost(i)).collect::<Vec<_>>(),
            [2.0, 6.0, 2.0, 6.0]
        );
    }

    #[test]
    fn a_constant_or_empty_model_takes_the_measured_mean() {
        for configured in [None, Some(model(|_| 0.5)), Some(model(|_| 0.0))] {
            let (cost, scaled) = fitted(configured.as_ref(), 10, 0.25);
            assert!(!scaled);
            assert_eq!(cost(3), 0.25);
        }
        // A model with a bad value is not scaled (the simulator reports it).
        let bad = model(|i| if i == 1 { f64::NAN } else { 1.0 });
        assert!(!fitted(Some(&bad), 3, 1.0).1);
    }
}
