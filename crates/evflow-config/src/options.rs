//! What a load takes ([`LoadOptions`]) and gives ([`Loaded`]), and the
//! configuration [`Format`]s.

use std::fmt;
use std::path::Path;

use evflow_core::Process;
use evflow_workloads::Work;

/// Settings that the caller (usually the command line) imposes on top of
/// the file.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadOptions {
    /// Number of events to process, instead of the file's.
    pub events: Option<u64>,
    /// Events per luminosity block (at least 1), instead of the file's
    /// (`[source] events_per_lumi`): a run still holds the file's number of
    /// blocks (`lumis_per_run`), now of this many events each, and the
    /// first run is the file's, as CMSSW's `EmptySource` numbers them.
    pub events_per_lumi: Option<u64>,
    /// Multiplies every module time (0 makes modules instantaneous). Must be
    /// finite and non-negative.
    pub time_scale: f64,
    /// Makes every module busy-wait or sleep, whatever the file says.
    pub work: Option<Work>,
    /// The device (and its options) for modules with a `device` table;
    /// `None`: such modules run on the host.
    pub device: Option<evflow_device::DeviceContext>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            events: None,
            events_per_lumi: None,
            time_scale: 1.0,
            work: None,
            device: None,
        }
    }
}

/// A loaded configuration: the process, ready for [`evflow_core::run`], and
/// the run settings the file suggests.
pub struct Loaded {
    /// The process, with its source, modules, paths and end paths. It has
    /// already been compiled once successfully.
    pub process: Process,
    /// Events processed at once suggested by the file, if any.
    pub events_in_flight: Option<usize>,
    /// Threads suggested by the file, if any.
    pub threads: Option<usize>,
    /// Number of events the source produces ([`LoadOptions::events`] if
    /// given, else the file's).
    pub events: u64,
    /// The format that was read: `"toml"` or `"cms-json"`.
    pub format: &'static str,
    /// How reorderable paths are ordered (`[process] filter_order`, per-path
    /// `filter_order`, `[ordering]`); turn it into a planner with
    /// [`OrderingOptions::factory`](evflow_core::ordering::OrderingOptions::factory).
    pub ordering: evflow_core::ordering::OrderingOptions,
    /// The device context of the file's device modules (`None`: it has
    /// none); its [`reports`](evflow_device::DeviceContext::reports) give
    /// their figures after the run.
    pub devices: Option<evflow_device::DeviceContext>,
    /// What the file asks for that evflow runs differently, one sentence
    /// each (the command line prints them as warnings).
    pub notes: Vec<String>,
    /// What the simulator does not model, per module label: a sentence
    /// each (`evflow simulate` prints those of the modules whose times do
    /// not come from a measured run).
    pub simulation_notes: Vec<(String, String)>,
    /// Files the configuration reads besides itself, with what each is
    /// (`"event table (source.file)"`): a job must not write over them.
    pub inputs: Vec<(&'static str, std::path::PathBuf)>,
}

impl fmt::Debug for Loaded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Loaded")
            .field("process", &self.process.name())
            .field("modules", &self.process.modules().len())
            .field("paths", &self.process.paths().len())
            .field("end_paths", &self.process.end_paths().len())
            .field("events_in_flight", &self.events_in_flight)
            .field("threads", &self.threads)
            .field("events", &self.events)
            .field("format", &self.format)
            .field("filter_order", &self.ordering.default)
            .field("notes", &self.notes)
            .field("simulation_notes", &self.simulation_notes)
            .field("inputs", &self.inputs)
            .finish()
    }
}

/// A configuration format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// evflow's native TOML format (`docs/configuration.md`).
    Toml,
    /// The CMS task-queue framework's JSON (`*.config`).
    CmsJson,
}

impl Format {
    /// The name reported in [`Loaded::format`]: `"toml"` or `"cms-json"`.
    pub fn name(self) -> &'static str {
        match self {
            Format::Toml => "toml",
            Format::CmsJson => "cms-json",
        }
    }

    /// Picks the format of a file: by extension (`.toml` → TOML, `.json` or
    /// `.config` → CMS JSON), otherwise by content (a JSON object whose
    /// `process` has `producers`, `filters` or `paths` is CMS JSON; anything
    /// else is read as TOML).
    pub fn detect(path: &Path, text: &str) -> Format {
        match Format::named(path) {
            Some(format) => format,
            None if looks_like_cms_json(text) => Format::CmsJson,
            None => Format::Toml,
        }
    }

    /// The format the extension of `path` names (`.toml`, `.json`,
    /// `.config`), if any.
    pub fn named(path: &Path) -> Option<Format> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match ext.as_deref() {
            Some("toml") => Some(Format::Toml),
            Some("json") | Some("config") => Some(Format::CmsJson),
            _ => None,
        }
    }
}

pub(crate) fn looks_like_cms_json(text: &str) -> bool {
    if !text.trim_start().starts_with('{') {
        return false;
    }
    let Ok(value) = serde_json::from_str::<serde_json::Value>(text) else {
        return false;
    };
    value
        .get("process")
        .and_then(|p| p.as_object())
        .is_some_and(|p| {
            ["producers", "filters", "paths"]
                .iter()
                .any(|k| p.contains_key(*k))
        })
}
