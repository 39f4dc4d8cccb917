//! # evflow-config
//!
//! Turns configuration files into an [`evflow_core::Process`] made of the
//! synthetic modules of [`evflow_core::synthetic`] (producers, filters,
//! analyzers and outputs that spend a configured time per event).
//!
//! Two formats are read:
//!
//! * **TOML** ([`Format::Toml`]), evflow's native format: a `[process]`
//!   table, an optional `[source]`, `[[module]]`, `[[path]]` and
//!   `[[end_path]]` tables. The full schema is in `docs/configuration.md`.
//! * **CMS JSON** ([`Format::CmsJson`]): the task-queue framework's JSON
//!   description of real CMSSW reconstruction jobs (`*.config`), with the
//!   per-event times each module took.
//!
//! Loading checks everything, including [`evflow_core::Process::compile`],
//! so that a wrong configuration fails before any event runs, with a
//! [`ConfigFileError`] that names the file and the module or key to blame.
//!
//! ```
//! use evflow_config::{load_str, Format, LoadOptions};
//!
//! let text = r#"
//! [process]
//! name = "tiny"
//! events = 10
//!
//! [[module]]
//! label = "tracks"
//! type = "producer"
//! time = 0.0001
//!
//! [[module]]
//! label = "select"
//! type = "filter"
//! consumes = ["tracks"]
//! pass_fraction = 0.5
//!
//! [[path]]
//! name = "sel"
//! modules = ["select"]
//! "#;
//! let loaded = load_str(text, Format::Toml, &LoadOptions::default(), "tiny.toml").unwrap();
//! assert_eq!((loaded.events, loaded.format), (10, "toml"));
//!
//! let options = evflow_core::RunOptions { threads: 2, events_in_flight: 2, ..Default::default() };
//! let report = evflow_core::run(loaded.process, &options).unwrap();
//! assert_eq!(report.events, 10);
//! assert_eq!(report.module("tracks").unwrap().calls, 10);
//!
//! // Errors name the file and the module or key at fault.
//! let bad = "[[module]]\nlabel = \"x\"\ntype = \"bsy_producer\"\n";
//! let error = load_str(bad, Format::Toml, &LoadOptions::default(), "demo.toml").err().unwrap();
//! assert_eq!(
//!     error.to_string(),
//!     "demo.toml: module 'x': unknown module type 'bsy_producer' (known: producer, filter, analyzer, output)"
//! );
//! ```

mod cms_json;
mod common;
mod error;
mod table;
mod toml_format;

use std::fmt;
use std::path::Path;

use evflow_core::Process;
use evflow_core::synthetic::Work;

pub use error::ConfigFileError;

/// Settings that the caller (usually the command line) imposes on top of
/// the file.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadOptions {
    /// Number of events to process, instead of the file's.
    pub events: Option<u64>,
    /// Multiplies every module time (0 makes modules instantaneous). Must be
    /// finite and non-negative.
    pub time_scale: f64,
    /// Makes every module busy-wait or sleep, whatever the file says.
    pub work: Option<Work>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            events: None,
            time_scale: 1.0,
            work: None,
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
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match ext.as_deref() {
            Some("toml") => Format::Toml,
            Some("json") | Some("config") => Format::CmsJson,
            _ if looks_like_cms_json(text) => Format::CmsJson,
            _ => Format::Toml,
        }
    }
}

fn looks_like_cms_json(text: &str) -> bool {
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

/// Reads a configuration file, picking its format with [`Format::detect`].
/// Errors name the file as `path` is written.
pub fn load_file(path: &Path, opts: &LoadOptions) -> Result<Loaded, ConfigFileError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ConfigFileError::Read {
        file: file.clone(),
        source,
    })?;
    load_str(&text, Format::detect(path, &text), opts, &file)
}

/// Reads a configuration from `text` in the given format; `origin` names it
/// in error messages (usually the file name).
pub fn load_str(
    text: &str,
    format: Format,
    opts: &LoadOptions,
    origin: &str,
) -> Result<Loaded, ConfigFileError> {
    let at = error::Origin(origin);
    if !opts.time_scale.is_finite() || opts.time_scale < 0.0 {
        return Err(at.setting(
            "time_scale",
            format!("must be a finite number >= 0, not {}", opts.time_scale),
        ));
    }
    let loaded = match format {
        Format::Toml => toml_format::load(text, opts, at)?,
        Format::CmsJson => cms_json::load(text, opts, at)?,
    };
    loaded.process.compile().map_err(|e| at.process(e))?;
    Ok(loaded)
}
