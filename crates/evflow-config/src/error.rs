//! The error of [`load_file`](crate::load_file) and
//! [`load_str`](crate::load_str).

use evflow_core::ConfigError;

/// Why a configuration could not be turned into a process.
///
/// Every variant names the file (the `origin` given to
/// [`load_str`](crate::load_str), or the path given to
/// [`load_file`](crate::load_file)) and, where one is to blame, the module
/// or the key, for example:
///
/// ```text
/// reco.config: module 'ak5PFJets': eventTimes[3] is negative (-0.2)
/// demo.toml: module 'x': unknown module type 'bsy_producer' (known: producer, filter, analyzer, output)
/// demo.toml: path 'sel' names unknown module 'cut3'
/// demo.toml:7:8: module 'tracks': time: invalid type: string "fast", expected f64
/// ```
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    /// The file could not be read (missing, unreadable, not UTF-8).
    #[error("{file}: cannot read the file: {source}")]
    Read {
        file: String,
        #[source]
        source: std::io::Error,
    },
    /// A TOML or JSON syntax error, or a value of the wrong type, at a known
    /// position of the file (1-based line and column).
    #[error("{file}{}: {message}", position(*.line, *.column))]
    Parse {
        file: String,
        line: Option<usize>,
        column: Option<usize>,
        message: String,
    },
    /// A module's settings are wrong.
    #[error("{file}: module '{module}': {message}")]
    Module {
        file: String,
        module: String,
        message: String,
    },
    /// Any other setting is wrong; `key` names it (`process.events`,
    /// `source.events_per_lumi`, `time_scale`, ...).
    #[error("{file}: {key}: {message}")]
    Setting {
        file: String,
        key: String,
        message: String,
    },
    /// The description is inconsistent: [`evflow_core::Process::compile`]
    /// rejected it (missing products, unknown path modules, cycles, ...).
    #[error("{file}: {source}")]
    Process {
        file: String,
        #[source]
        source: ConfigError,
    },
}

impl ConfigFileError {
    /// The file (or origin) the error is about.
    pub fn file(&self) -> &str {
        match self {
            ConfigFileError::Read { file, .. }
            | ConfigFileError::Parse { file, .. }
            | ConfigFileError::Module { file, .. }
            | ConfigFileError::Setting { file, .. }
            | ConfigFileError::Process { file, .. } => file,
        }
    }
}

fn position(line: Option<usize>, column: Option<usize>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(":{l}:{c}"),
        (Some(l), None) => format!(":{l}"),
        _ => String::new(),
    }
}

/// Builds errors that all name the same file.
#[derive(Clone, Copy)]
pub(crate) struct Origin<'a>(pub &'a str);

impl Origin<'_> {
    pub fn module(self, module: &str, message: impl Into<String>) -> ConfigFileError {
        ConfigFileError::Module {
            file: self.0.to_string(),
            module: module.to_string(),
            message: message.into(),
        }
    }
    pub fn setting(self, key: impl Into<String>, message: impl Into<String>) -> ConfigFileError {
        ConfigFileError::Setting {
            file: self.0.to_string(),
            key: key.into(),
            message: message.into(),
        }
    }
    pub fn parse(
        self,
        line: Option<usize>,
        column: Option<usize>,
        message: impl Into<String>,
    ) -> ConfigFileError {
        ConfigFileError::Parse {
            file: self.0.to_string(),
            line,
            column,
            message: message.into(),
        }
    }
    pub fn process(self, source: ConfigError) -> ConfigFileError {
        ConfigFileError::Process {
            file: self.0.to_string(),
            source,
        }
    }
}
