//! The errors of modules and of jobs: [`ModuleError`] (what a module
//! returns) and [`JobError`] (why a started job stopped before its end).

use std::fmt;

use crate::ids::EventId;

/// An error returned by a module. The engine adds the module label and the
/// event id when it reports it.
///
/// Any `std::error::Error` converts into it, so `?` works inside modules:
///
/// ```
/// use evflow_core::ModuleError;
/// fn parse(s: &str) -> Result<i32, ModuleError> {
///     Ok(s.parse::<i32>()?)
/// }
/// assert!(parse("x").is_err());
/// assert_eq!(ModuleError::msg("no jets").to_string(), "no jets");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleError {
    message: String,
}

impl ModuleError {
    pub fn msg(message: impl fmt::Display) -> Self {
        Self {
            message: message.to_string(),
        }
    }
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ModuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for ModuleError {
    fn from(e: E) -> Self {
        Self::msg(e)
    }
}

/// Result type of module callbacks.
pub type ModuleResult<T = ()> = Result<T, ModuleError>;

/// Why a job stopped before its end.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    #[error("module '{module}' failed on {event}: {message}")]
    Module {
        module: String,
        event: EventId,
        message: String,
    },
    #[error("reading input failed: {message}")]
    Source { message: String },
    #[error("module '{module}' failed in {transition}: {message}")]
    Transition {
        module: String,
        transition: String,
        message: String,
    },
    #[error("executor: {0}")]
    Executor(String),
}
