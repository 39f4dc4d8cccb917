//! The small shared vocabulary of the engine: how an event, a product, a
//! module's kind and its thread-safety are named. A leaf module: every
//! other file may use it, it uses none of them.

use std::fmt;

use serde::Serialize;

/// Identifies one collision event: the run, the luminosity block inside the
/// run, and the event number inside the run.
///
/// Ordering is lexicographic, as in CMSSW's `edm::EventID`.
///
/// ```
/// use evflow_core::EventId;
/// let id = EventId::new(1, 3, 42);
/// assert_eq!(id.to_string(), "run 1, lumi 3, event 42");
/// assert!(EventId::new(1, 3, 42) < EventId::new(2, 1, 1));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct EventId {
    pub run: u32,
    pub lumi: u32,
    pub event: u64,
}

impl EventId {
    pub const fn new(run: u32, lumi: u32, event: u64) -> Self {
        Self { run, lumi, event }
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "run {}, lumi {}, event {}",
            self.run, self.lumi, self.event
        )
    }
}

/// Names a product: the label of the module that puts it and an optional
/// instance name, written `label` or `label:instance`.
///
/// ```
/// use evflow_core::InputTag;
/// let tag = InputTag::parse("muons:tight");
/// assert_eq!((tag.label.as_str(), tag.instance.as_str()), ("muons", "tight"));
/// assert_eq!(InputTag::parse("jets").to_string(), "jets");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InputTag {
    pub label: String,
    pub instance: String,
}

impl InputTag {
    pub fn new(label: impl Into<String>, instance: impl Into<String>) -> Self {
        Self {
            label: label.into(),
            instance: instance.into(),
        }
    }
    pub fn parse(text: &str) -> Self {
        match text.split_once(':') {
            Some((label, instance)) => Self::new(label, instance),
            None => Self::new(text, ""),
        }
    }
}

impl From<&str> for InputTag {
    fn from(text: &str) -> Self {
        Self::parse(text)
    }
}

impl From<String> for InputTag {
    fn from(text: String) -> Self {
        Self::parse(&text)
    }
}

impl fmt::Display for InputTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.instance.is_empty() {
            f.write_str(&self.label)
        } else {
            write!(f, "{}:{}", self.label, self.instance)
        }
    }
}

/// The four kinds of module.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ModuleKind {
    Producer,
    Filter,
    Analyzer,
    Output,
}

impl fmt::Display for ModuleKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ModuleKind::Producer => "producer",
            ModuleKind::Filter => "filter",
            ModuleKind::Analyzer => "analyzer",
            ModuleKind::Output => "output",
        })
    }
}

/// How thread-safe a module is, i.e. what the engine must guarantee for it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Concurrency {
    /// One instance may process several events at once.
    Shared,
    /// One event at a time for this instance. Work waiting for it is queued
    /// and holds no thread.
    Serial,
    /// Never runs at the same time as any other module naming one of the
    /// same resources (nor as itself): for thread-unsafe legacy code or
    /// libraries.
    Exclusive(Vec<String>),
    /// `n` instances, each serial; the engine hands out a free one.
    Cloned(u32),
}

impl fmt::Display for Concurrency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Concurrency::Shared => f.write_str("shared"),
            Concurrency::Serial => f.write_str("serial"),
            Concurrency::Exclusive(r) => write!(f, "exclusive({})", r.join(",")),
            Concurrency::Cloned(n) => write!(f, "cloned({n})"),
        }
    }
}
