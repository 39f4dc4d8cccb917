//! # evflow-config
//!
//! Turns configuration files into an [`evflow_core::Process`] made of the
//! synthetic modules of [`evflow_workloads`] (producers, filters,
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

// Public types print in tests and users' logs.
#![warn(missing_debug_implementations)]

mod cms_json;
mod common;
mod device;
mod error;
mod load;
mod options;
mod toml_format;

pub use error::ConfigFileError;
pub use load::{load_file, load_str};
pub use options::{Format, LoadOptions, Loaded};
