//! What differs in a report written by the Python face (`evflow run
//! analysis.py --report`, `Result.save`): an engine event is a batch of
//! events, and `devices` is a map (`device`, `notice`, `modules` by label)
//! where `evflow run` writes a list of device modules.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

/// A Python analysis's report: it counts the events its batches held
/// (`events_processed`) beside the engine's events, which are batches.
pub(super) fn is_python(doc: &Value) -> bool {
    doc.get("events_processed").is_some()
}

/// The `devices` section of a Python analysis's report. A distributed
/// run's has each module's counts summed over its chunks and, instead of a
/// split history, each chunk's last fraction (`chunk_fractions`).
#[derive(Deserialize)]
struct Devices {
    device: Option<String>,
    #[serde(default)]
    notice: Option<String>,
    /// Read one by one, so that an error names its module.
    #[serde(default)]
    modules: BTreeMap<String, Value>,
}

#[derive(Deserialize)]
struct DeviceModule {
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    batches: u64,
    host_events: u64,
    device_events: u64,
    launches: u64,
    #[serde(default)]
    bytes_in: u64,
    #[serde(default)]
    bytes_out: u64,
    #[serde(default)]
    device_s: f64,
    #[serde(default)]
    transfer_s: f64,
    #[serde(default)]
    kernel_s: f64,
    #[serde(default)]
    failed_launches: u64,
    #[serde(default)]
    split_mode: Option<String>,
    #[serde(default)]
    device_fraction: Option<f64>,
    /// Single process: the split kept at the end (the fraction may be a
    /// challenger being measured).
    #[serde(default)]
    kept_fraction: Option<f64>,
    /// Distributed: each chunk's last fraction, in chunk order.
    #[serde(default)]
    chunk_fractions: Option<Vec<Option<f64>>>,
}

/// The devices section of a Python analysis's report, as `evflow run`
/// prints its own: the notice of a missing device, a line per device
/// module.
pub(super) fn print_devices(devices: Value, path: &Path) -> Result<(), String> {
    let devices: Devices =
        serde_json::from_value(devices).map_err(|e| format!("{}: devices: {e}", path.display()))?;
    if let Some(notice) = &devices.notice {
        println!("{notice}");
    }
    let on = devices.device.as_deref().unwrap_or("host");
    for (label, m) in devices.modules {
        let m: DeviceModule = serde_json::from_value(m)
            .map_err(|e| format!("{}: devices: module '{label}': {e}", path.display()))?;
        let percent = |f: f64| format!("{:.0}%", 100.0 * f);
        let split = match (m.chunk_fractions.as_deref(), m.kept_fraction) {
            (Some(chunks), _) => format!(
                "{} of the events on the device; last split per chunk {}",
                percent(m.device_fraction.unwrap_or(0.0)),
                chunks
                    .iter()
                    .map(|f| f.map_or("-".into(), percent))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            (None, Some(kept)) => format!(
                "last {} device, kept {}",
                percent(m.device_fraction.unwrap_or(kept)),
                percent(kept)
            ),
            (None, None) => format!("last {} device", percent(m.device_fraction.unwrap_or(0.0))),
        };
        println!(
            "device module {label}{} on {on}: {} host + {} device events in {} batches, \
             {} launches ({:.1} events/launch), {:.1} MB in, {:.1} MB out, transfers {:.3} s, \
             kernels {:.3} s, device busy {:.3} s, split {} ({split}){}",
            m.kind
                .as_deref()
                .map_or(String::new(), |k| format!(" ({k})")),
            m.host_events,
            m.device_events,
            m.batches,
            m.launches,
            m.device_events as f64 / m.launches.max(1) as f64,
            m.bytes_in as f64 / 1e6,
            m.bytes_out as f64 / 1e6,
            m.transfer_s,
            m.kernel_s,
            m.device_s,
            m.split_mode.as_deref().unwrap_or("?"),
            match m.failed_launches {
                0 => String::new(),
                n => format!(", {n} failed launches"),
            },
        );
    }
    Ok(())
}

/// The input files a Python analysis left out (`skip_bad_files`), each
/// with its error.
pub(super) fn print_skipped_files(doc: &Value, top: usize) {
    let Some(skipped) = doc.get("skipped_files").and_then(Value::as_array) else {
        return;
    };
    if skipped.is_empty() {
        return;
    }
    println!("{} input file(s) left out (skip_bad_files):", skipped.len());
    for s in skipped.iter().take(top) {
        let file = s.get("file").and_then(Value::as_str).unwrap_or("?");
        let error = s.get("error").and_then(Value::as_str).unwrap_or("?");
        println!("  {file}: {error}");
    }
    if skipped.len() > top {
        println!("  ... {} more", skipped.len() - top);
    }
}
