//! Importer of the CMS task-queue framework's JSON configurations
//! (`toy-mt-framework`, `cms-data/*.config`).

use std::fmt;
use std::marker::PhantomData;

use evflow_core::{Concurrency, EmptySource, InputTag, ModuleDesc, Process};
use evflow_workloads::{self as synthetic, Work};
use serde::Deserialize;
use serde::de::value::MapAccessDeserializer;
use serde::de::{MapAccess, Visitor};
use serde_json::{Map, Value};

use crate::common;
use crate::error::ConfigFileError;
use crate::error::Origin;
use crate::options::{Format, LoadOptions, Loaded};

/// Process name of a file without `process.label`.
pub const DEFAULT_NAME: &str = "cms";

/// The one resource that every `ThreadUnsafe` module holds.
pub const THREAD_UNSAFE_RESOURCE: &str = "thread-unsafe";

const MODULE_KEYS: [&str; 6] = [
    "@label",
    "@type",
    "threadType",
    "eventTimes",
    "toGet",
    "nRanges",
];

#[derive(Deserialize)]
struct RawFile {
    process: Option<Obj<RawProcess>>,
}

#[derive(Deserialize)]
struct RawProcess {
    label: Option<Value>,
    options: Option<Value>,
    source: Option<Value>,
    producers: Option<Value>,
    filters: Option<Value>,
    paths: Option<OrderedObject>,
}

/// What an [`Obj`] expects, for messages.
trait Expected {
    const WHAT: &'static str;
}
impl Expected for RawFile {
    const WHAT: &'static str = "a CMS configuration object";
}
impl Expected for RawProcess {
    const WHAT: &'static str = "the \"process\" object";
}

/// A struct read only from a JSON object (serde would also accept an array
/// of its fields in order).
struct Obj<T>(T);

impl<'de, T: Deserialize<'de> + Expected> Deserialize<'de> for Obj<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de> + Expected> Visitor<'de> for V<T> {
            type Value = T;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(T::WHAT)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map))
            }
        }
        deserializer.deserialize_map(V(PhantomData)).map(Obj)
    }
}

/// A JSON object with its keys in file order (`serde_json::Value` sorts
/// them), for the paths.
struct OrderedObject(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for OrderedObject {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = OrderedObject;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object mapping path names to lists of module labels")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<OrderedObject, A::Error> {
                let mut entries = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, Value>()? {
                    entries.push((key, value));
                }
                Ok(OrderedObject(entries))
            }
        }
        deserializer.deserialize_map(V)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Producer,
    Filter,
}

impl Role {
    fn list(self) -> &'static str {
        match self {
            Role::Producer => "producers",
            Role::Filter => "filters",
        }
    }
}

/// The module types this importer knows: (type, role, work, parallel-for).
/// The parallel-for filters (the `_imt` configurations) split each event's
/// time into `nRanges` ranges run at once.
const TYPES: [(&str, Role, Work, bool); 8] = [
    (
        "demo::EventTimesBusyWaitProducer",
        Role::Producer,
        Work::Busy,
        false,
    ),
    (
        "demo::EventTimesSleepingProducer",
        Role::Producer,
        Work::Sleep,
        false,
    ),
    (
        "demo::EventTimesBusyWaitPassFilter",
        Role::Filter,
        Work::Busy,
        false,
    ),
    (
        "demo::EventTimesSleepingPassFilter",
        Role::Filter,
        Work::Sleep,
        false,
    ),
    (
        "demo::EventTimesBusyWaitParallelForPassFilter",
        Role::Filter,
        Work::Busy,
        true,
    ),
    (
        "demo::EventTimesSleepingParallelForPassFilter",
        Role::Filter,
        Work::Sleep,
        true,
    ),
    (
        "demo::EventTimesBusyWaitTaskStealingParallelForPassFilter",
        Role::Filter,
        Work::Busy,
        true,
    ),
    (
        "demo::EventTimesSleepingTaskStealingParallelForPassFilter",
        Role::Filter,
        Work::Sleep,
        true,
    ),
];

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Reads a CMS JSON configuration.
pub fn load(text: &str, opts: &LoadOptions, at: Origin<'_>) -> Result<Loaded, ConfigFileError> {
    let Obj(raw) = serde_json::from_str::<Obj<RawFile>>(text).map_err(|e| json_error(&e, at))?;
    let Some(Obj(p)) = raw.process else {
        return Err(at.setting(
            "process",
            "missing: a CMS configuration is an object with a \"process\" object",
        ));
    };

    let name = match &p.label {
        None => DEFAULT_NAME.to_string(),
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        Some(Value::String(_)) => return Err(at.setting("process.label", "is empty")),
        Some(other) => {
            return Err(at.setting(
                "process.label",
                format!("must be a string, not {}", type_name(other)),
            ));
        }
    };

    let mut events_in_flight = None;
    if let Some(options) = &p.options {
        let options = object(options, "process.options", at)?;
        if let Some(v) = options.get("nSimultaneousEvents") {
            let key = "process.options.nSimultaneousEvents";
            let n = v
                .as_u64()
                .ok_or_else(|| at.setting(key, format!("must be a positive integer, not {v}")))?;
            events_in_flight = Some(common::check_parallel(n).map_err(|m| at.setting(key, m))?);
        }
    }

    let mut iterations = None;
    if let Some(source) = &p.source {
        let source = object(source, "process.source", at)?;
        match source.get("@type") {
            None => {}
            Some(Value::String(t)) if t == "demo::SimpleSource" => {}
            Some(other) => {
                return Err(at.setting(
                    "process.source.@type",
                    format!("unsupported source {other} (known: \"demo::SimpleSource\")"),
                ));
            }
        }
        if let Some(v) = source.get("iterations") {
            // The toy framework's config generator writes the count as a
            // string ("100"), which its own reader accepts.
            let n = v
                .as_u64()
                .or_else(|| v.as_str().and_then(|t| t.trim().parse().ok()))
                .ok_or_else(|| {
                    at.setting(
                        "process.source.iterations",
                        format!("must be a non-negative integer, not {v}"),
                    )
                })?;
            iterations = Some(n);
        }
    }
    let mut process = Process::new(name);
    let mut notes = Vec::new();
    for (role, list) in [(Role::Producer, &p.producers), (Role::Filter, &p.filters)] {
        let key = format!("process.{}", role.list());
        let modules = match list {
            None => continue,
            Some(Value::Array(modules)) => modules,
            Some(other) => {
                return Err(at.setting(
                    key,
                    format!("must be an array of modules, not {}", type_name(other)),
                ));
            }
        };
        for (i, m) in modules.iter().enumerate() {
            let key = format!("{key}[{i}]");
            process.add(build_module(m, role, &key, opts, at, &mut notes)?);
        }
    }

    for (name, labels) in p.paths.map(|o| o.0).unwrap_or_default() {
        let key = format!("process.paths.{name}");
        if name.trim().is_empty() {
            return Err(at.setting("process.paths", "a path name is empty"));
        }
        let Value::Array(labels) = labels else {
            return Err(at.setting(
                key,
                format!(
                    "must be an array of module labels, not {}",
                    type_name(&labels)
                ),
            ));
        };
        let mut modules = Vec::with_capacity(labels.len());
        for (i, l) in labels.iter().enumerate() {
            match l {
                Value::String(s) => modules.push(s.clone()),
                other => {
                    return Err(at.setting(
                        format!("{key}[{i}]"),
                        format!("must be a module label, not {}", type_name(other)),
                    ));
                }
            }
        }
        process.path(name, modules);
    }

    let events = match opts.events.or(iterations) {
        Some(n) => n,
        None => {
            return Err(at.setting(
                "process.source.iterations",
                "missing, and no number of events was given",
            ));
        }
    };
    process.set_source(common::events_per_lumi(
        EmptySource::new(events),
        opts,
        "process.source",
        at,
    )?);
    Ok(Loaded {
        process,
        events_in_flight,
        threads: None,
        events,
        format: Format::CmsJson.name(),
        ordering: evflow_core::ordering::OrderingOptions::default(),
        devices: None,
        notes,
        simulation_notes: Vec::new(),
        inputs: Vec::new(),
    })
}

fn object<'v>(
    v: &'v Value,
    key: &str,
    at: Origin<'_>,
) -> Result<&'v Map<String, Value>, ConfigFileError> {
    v.as_object()
        .ok_or_else(|| at.setting(key, format!("must be an object, not {}", type_name(v))))
}

fn build_module(
    m: &Value,
    role: Role,
    key: &str,
    opts: &LoadOptions,
    at: Origin<'_>,
    notes: &mut Vec<String>,
) -> Result<ModuleDesc, ConfigFileError> {
    let m = object(m, key, at)?;
    let label = match m.get("@label") {
        Some(Value::String(s)) if !s.is_empty() => s.as_str(),
        Some(Value::String(_)) => return Err(at.setting(format!("{key}.@label"), "is empty")),
        Some(other) => {
            return Err(at.setting(
                format!("{key}.@label"),
                format!("must be a string, not {}", type_name(other)),
            ));
        }
        None => return Err(at.setting(key, "module without '@label'")),
    };
    let err = |message: String| at.module(label, message);

    if let Some(unknown) = m.keys().find(|k| !MODULE_KEYS.contains(&k.as_str())) {
        return Err(err(format!(
            "unknown key '{unknown}' (known: {})",
            MODULE_KEYS.join(", ")
        )));
    }

    let ty = match m.get("@type") {
        Some(Value::String(s)) => s.as_str(),
        Some(other) => {
            return Err(err(format!(
                "@type must be a string, not {}",
                type_name(other)
            )));
        }
        None => return Err(err("missing '@type'".into())),
    };
    let Some(&(_, type_role, type_work, parallel_for)) =
        TYPES.iter().find(|(name, ..)| *name == ty)
    else {
        let known: Vec<&str> = TYPES.iter().map(|t| t.0).collect();
        return Err(err(format!(
            "unknown module type '{ty}' (known: {})",
            known.join(", ")
        )));
    };
    if type_role != role {
        return Err(err(format!(
            "{ty} belongs in process.{}, not in process.{}",
            type_role.list(),
            role.list()
        )));
    }

    let mut ranges = 1;
    match (parallel_for, m.get("nRanges")) {
        (true, None) => {
            return Err(err(format!(
                "{ty} needs 'nRanges' (the ranges each event's time is split into)"
            )));
        }
        (true, Some(v)) => {
            let n = v
                .as_u64()
                .filter(|&n| n >= 1)
                .ok_or_else(|| err(format!("nRanges must be a positive integer, not {v}")))?;
            ranges = u32::try_from(n).unwrap_or(u32::MAX);
            notes.push(format!(
                "module '{label}' ({ty}) runs each event's time in up to {n} ranges at once, \
                 on its thread and idle cores"
            ));
        }
        (false, Some(_)) => {
            return Err(err(format!(
                "nRanges applies to the parallel-for filters, not to {ty}"
            )));
        }
        (false, None) => {}
    }

    let concurrency = match m.get("threadType") {
        None => Concurrency::Shared,
        Some(Value::String(s)) => match s.as_str() {
            "ThreadSafeBetweenInstances" => Concurrency::Shared,
            "ThreadSafeBetweenModules" => Concurrency::Serial,
            "ThreadUnsafe" => Concurrency::Exclusive(vec![THREAD_UNSAFE_RESOURCE.to_string()]),
            other => {
                return Err(err(format!(
                    "unknown threadType '{other}' (known: ThreadSafeBetweenInstances, ThreadSafeBetweenModules, ThreadUnsafe)"
                )));
            }
        },
        Some(other) => {
            return Err(err(format!(
                "threadType must be a string, not {}",
                type_name(other)
            )));
        }
    };

    let times = match m.get("eventTimes") {
        None => return Err(err("missing 'eventTimes'".into())),
        Some(Value::Array(values)) => values,
        Some(other) => {
            return Err(err(format!(
                "eventTimes must be an array of numbers, not {}",
                type_name(other)
            )));
        }
    };
    if times.is_empty() {
        return Err(err("eventTimes is empty".into()));
    }
    let mut seconds = Vec::with_capacity(times.len());
    for (i, t) in times.iter().enumerate() {
        let Some(x) = t.as_f64() else {
            return Err(err(format!(
                "eventTimes[{i}] is not a number ({} {t})",
                type_name(t)
            )));
        };
        common::check_time(x, opts.time_scale, &format!("eventTimes[{i}]")).map_err(err)?;
        seconds.push(x);
    }

    let mut consumes = Vec::new();
    match m.get("toGet") {
        None => {}
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                consumes.push(input_tag(item, i).map_err(err)?);
            }
        }
        Some(other) => {
            return Err(err(format!(
                "toGet must be an array, not {}",
                type_name(other)
            )));
        }
    }

    let timing = common::timing(seconds, opts.time_scale, opts.work.unwrap_or(type_work))
        .with_ranges(ranges);
    let desc = match role {
        Role::Producer => synthetic::producer(label, timing, &[], &[""]),
        Role::Filter => synthetic::filter(label, timing, &[], 1.0, common::seed_from_label(label)),
    };
    Ok(desc.consumes(consumes).concurrency(concurrency))
}

/// One `toGet` entry: `{"label": L, "product": P}`.
fn input_tag(item: &Value, i: usize) -> Result<InputTag, String> {
    let Value::Object(item) = item else {
        return Err(format!(
            "toGet[{i}] must be an object with \"label\" and \"product\", not {}",
            type_name(item)
        ));
    };
    if let Some(unknown) = item
        .keys()
        .find(|k| !matches!(k.as_str(), "label" | "product"))
    {
        return Err(format!(
            "toGet[{i}]: unknown key '{unknown}' (known: label, product)"
        ));
    }
    let label = match item.get("label") {
        Some(Value::String(s)) if s.is_empty() => return Err(format!("toGet[{i}].label is empty")),
        Some(Value::String(s)) if s.contains(':') => {
            return Err(format!(
                "toGet[{i}].label '{s}' contains ':', which module labels may not"
            ));
        }
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            return Err(format!(
                "toGet[{i}].label must be a string, not {}",
                type_name(other)
            ));
        }
        None => return Err(format!("toGet[{i}] has no \"label\"")),
    };
    let product = match item.get("product") {
        None => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            return Err(format!(
                "toGet[{i}].product must be a string, not {}",
                type_name(other)
            ));
        }
    };
    Ok(InputTag::new(label, product))
}

fn json_error(e: &serde_json::Error, at: Origin<'_>) -> ConfigFileError {
    let text = e.to_string();
    if e.line() == 0 {
        return at.parse(None, None, text);
    }
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    let message = text.strip_suffix(&suffix).unwrap_or(&text).to_string();
    // serde_json reports column 0 for an error before the first character.
    at.parse(Some(e.line()), Some(e.column().max(1)), message)
}
