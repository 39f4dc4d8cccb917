//! evflow's native TOML format (schema: `docs/configuration.md`).

use std::ops::Range;

use evflow_core::synthetic::{self, Work};
use evflow_core::{Concurrency, EmptySource, ModuleDesc, ModuleKind, Process};
use serde::Deserialize;

use crate::common::{self, MAX_CLONES};
use crate::error::Origin;
use crate::{ConfigFileError, LoadOptions, Loaded};

/// Events of a file that does not say.
pub const DEFAULT_EVENTS: u64 = 100;
/// Process name of a file that does not say.
pub const DEFAULT_NAME: &str = "evflow";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Doc {
    #[serde(default)]
    process: ProcessSpec,
    source: Option<SourceSpec>,
    #[serde(default)]
    module: Vec<ModuleSpec>,
    #[serde(default)]
    path: Vec<PathSpec>,
    #[serde(default)]
    end_path: Vec<PathSpec>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ProcessSpec {
    name: Option<String>,
    events: Option<u64>,
    events_in_flight: Option<u64>,
    threads: Option<u64>,
    work: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SourceSpec {
    #[serde(rename = "type")]
    kind: Option<String>,
    events_per_lumi: Option<u64>,
    lumis_per_run: Option<u64>,
    first_run: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ModuleSpec {
    label: String,
    #[serde(rename = "type")]
    kind: String,
    work: Option<String>,
    time: Option<f64>,
    times: Option<Vec<f64>>,
    #[serde(default)]
    consumes: Vec<String>,
    produces: Option<Vec<String>>,
    concurrency: Option<toml::Value>,
    pass_fraction: Option<f64>,
    seed: Option<u64>,
    select_events: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PathSpec {
    name: String,
    #[serde(default)]
    modules: Vec<String>,
}

/// Reads a TOML configuration.
pub fn load(text: &str, opts: &LoadOptions, at: Origin<'_>) -> Result<Loaded, ConfigFileError> {
    let doc: Doc = toml::from_str(text).map_err(|e| toml_error(text, &e, at))?;
    let spec = doc.process;

    let default_work = match &spec.work {
        Some(w) => common::parse_work(w).map_err(|m| at.setting("process.work", m))?,
        None => Work::Busy,
    };
    let parallel = |value: Option<u64>, key: &str| {
        value
            .map(common::check_parallel)
            .transpose()
            .map_err(|m| at.setting(key, m))
    };
    let events_in_flight = parallel(spec.events_in_flight, "process.events_in_flight")?;
    let threads = parallel(spec.threads, "process.threads")?;
    let events = opts.events.or(spec.events).unwrap_or(DEFAULT_EVENTS);

    let mut source = EmptySource::new(events);
    if let Some(s) = &doc.source {
        match s.kind.as_deref() {
            None | Some("empty") => {}
            Some(other) => {
                return Err(at.setting(
                    "source.type",
                    format!("unknown source type '{other}' (known: empty)"),
                ));
            }
        }
        if let Some(n) = s.events_per_lumi {
            if n == 0 {
                return Err(at.setting("source.events_per_lumi", "must be at least 1"));
            }
            source = source.events_per_lumi(n);
        }
        if let Some(n) = s.lumis_per_run {
            if n == 0 {
                return Err(at.setting("source.lumis_per_run", "must be at least 1"));
            }
            source = source.lumis_per_run(n);
        }
        if let Some(run) = s.first_run {
            source = source.first_run(run);
        }
    }

    let name = spec.name.unwrap_or_else(|| DEFAULT_NAME.to_string());
    if name.trim().is_empty() {
        return Err(at.setting("process.name", "is empty"));
    }
    let mut process = Process::new(name);
    process.set_source(source);
    for m in &doc.module {
        process.add(build_module(m, default_work, opts, at)?);
    }
    for (key, paths) in [("path", &doc.path), ("end_path", &doc.end_path)] {
        for (i, p) in paths.iter().enumerate() {
            if p.name.trim().is_empty() {
                return Err(at.setting(format!("{key}[{i}].name"), "is empty"));
            }
            if key == "path" {
                process.path(p.name.clone(), p.modules.iter().cloned());
            } else {
                process.end_path(p.name.clone(), p.modules.iter().cloned());
            }
        }
    }
    Ok(Loaded {
        process,
        events_in_flight,
        threads,
        events,
        format: crate::Format::Toml.name(),
    })
}

fn build_module(
    m: &ModuleSpec,
    default_work: Work,
    opts: &LoadOptions,
    at: Origin<'_>,
) -> Result<ModuleDesc, ConfigFileError> {
    let label = m.label.as_str();
    let err = |message: String| at.module(label, message);
    let kind = match m.kind.as_str() {
        "producer" => ModuleKind::Producer,
        "filter" => ModuleKind::Filter,
        "analyzer" => ModuleKind::Analyzer,
        "output" => ModuleKind::Output,
        other => {
            return Err(err(format!(
                "unknown module type '{other}' (known: producer, filter, analyzer, output)"
            )));
        }
    };
    let own_work = match &m.work {
        Some(w) => Some(common::parse_work(w).map_err(|e| err(format!("work: {e}")))?),
        None => None,
    };
    let work = opts.work.or(own_work).unwrap_or(default_work);

    let scale = opts.time_scale;
    let times = match (m.time, &m.times) {
        (Some(_), Some(_)) => return Err(err("give either 'time' or 'times', not both".into())),
        (Some(t), None) => {
            common::check_time(t, scale, "time").map_err(err)?;
            vec![t]
        }
        (None, Some(ts)) => {
            if ts.is_empty() {
                return Err(err(
                    "times is empty (give at least one time, or leave it out for 0)".into(),
                ));
            }
            for (i, &t) in ts.iter().enumerate() {
                common::check_time(t, scale, &format!("times[{i}]")).map_err(err)?;
            }
            ts.clone()
        }
        (None, None) => vec![0.0],
    };
    let timing = common::timing(times, scale, work);

    for (i, c) in m.consumes.iter().enumerate() {
        if c.trim().is_empty() {
            return Err(err(format!("consumes[{i}] is empty")));
        }
        if c.trim() != c {
            return Err(err(format!("consumes[{i}] '{c}' has surrounding spaces")));
        }
    }
    let consumes: Vec<&str> = m.consumes.iter().map(String::as_str).collect();

    let only = |present: bool, key: &str, kinds: &str| {
        if present {
            Err(err(format!(
                "'{key}' applies only to {kinds}, not to {kind}s"
            )))
        } else {
            Ok(())
        }
    };
    if kind != ModuleKind::Producer {
        only(m.produces.is_some(), "produces", "producers")?;
    }
    if kind != ModuleKind::Filter {
        only(m.pass_fraction.is_some(), "pass_fraction", "filters")?;
        only(m.seed.is_some(), "seed", "filters")?;
    }
    if !matches!(kind, ModuleKind::Analyzer | ModuleKind::Output) {
        only(
            m.select_events.is_some(),
            "select_events",
            "analyzers and outputs",
        )?;
    }

    let concurrency = match &m.concurrency {
        Some(value) => parse_concurrency(value).map_err(|e| err(format!("concurrency: {e}")))?,
        None => Concurrency::Shared,
    };
    if matches!(concurrency, Concurrency::Cloned(_)) && kind != ModuleKind::Producer {
        return Err(err(format!(
            "concurrency: cloned applies only to producers, not to {kind}s"
        )));
    }

    let desc = match kind {
        ModuleKind::Producer => {
            let produces: Vec<&str> = match &m.produces {
                Some(p) => p.iter().map(String::as_str).collect(),
                None => vec![""],
            };
            match concurrency {
                Concurrency::Cloned(n) => {
                    synthetic::cloned_producer(label, n, timing, &consumes, &produces)
                }
                other => {
                    synthetic::producer(label, timing, &consumes, &produces).concurrency(other)
                }
            }
        }
        ModuleKind::Filter => {
            let fraction = m.pass_fraction.unwrap_or(1.0);
            if !(0.0..=1.0).contains(&fraction) {
                return Err(err(format!(
                    "pass_fraction must be between 0 and 1 (got {fraction})"
                )));
            }
            let seed = m.seed.unwrap_or_else(|| common::seed_from_label(label));
            synthetic::filter(label, timing, &consumes, fraction, seed).concurrency(concurrency)
        }
        ModuleKind::Analyzer => {
            synthetic::analyzer(label, timing, &consumes).concurrency(concurrency)
        }
        ModuleKind::Output => synthetic::output_with_tally(label, timing, &consumes)
            .0
            .concurrency(concurrency),
    };
    Ok(match &m.select_events {
        Some(paths) => desc.select_events(paths.iter().cloned()),
        None => desc,
    })
}

const CONCURRENCY_FORMS: &str =
    "\"shared\", \"serial\", { exclusive = [\"resource\", ...] }, { cloned = N }";

fn parse_concurrency(value: &toml::Value) -> Result<Concurrency, String> {
    match value {
        toml::Value::String(s) => match s.as_str() {
            "shared" => Ok(Concurrency::Shared),
            "serial" => Ok(Concurrency::Serial),
            "exclusive" => {
                Err("exclusive needs resource names: { exclusive = [\"resource\"] }".into())
            }
            "cloned" => Err("cloned needs a number of instances: { cloned = 4 }".into()),
            other => Err(format!(
                "unknown concurrency '{other}' (known: {CONCURRENCY_FORMS})"
            )),
        },
        toml::Value::Table(t) if t.len() == 1 => {
            let (key, v) = t.iter().next().expect("one entry");
            match key.as_str() {
                "exclusive" => {
                    let toml::Value::Array(items) = v else {
                        return Err(format!(
                            "exclusive must be an array of resource names, not {}",
                            v.type_str()
                        ));
                    };
                    if items.is_empty() {
                        return Err(
                            "exclusive needs at least one resource name (exclusive = [] given)"
                                .into(),
                        );
                    }
                    let mut names = Vec::with_capacity(items.len());
                    for (i, item) in items.iter().enumerate() {
                        match item {
                            toml::Value::String(s) if !s.trim().is_empty() => names.push(s.clone()),
                            toml::Value::String(_) => {
                                return Err(format!("exclusive[{i}] is an empty resource name"));
                            }
                            other => {
                                return Err(format!(
                                    "exclusive[{i}] must be a string, not {}",
                                    other.type_str()
                                ));
                            }
                        }
                    }
                    Ok(Concurrency::Exclusive(names))
                }
                "cloned" => match v {
                    toml::Value::Integer(n) if *n >= 1 && (*n as u64) <= MAX_CLONES => {
                        Ok(Concurrency::Cloned(*n as u32))
                    }
                    toml::Value::Integer(n) if *n < 1 => {
                        Err(format!("cloned must be at least 1 (cloned = {n} given)"))
                    }
                    toml::Value::Integer(n) => Err(format!(
                        "cloned = {n} is too many instances (at most {MAX_CLONES})"
                    )),
                    other => Err(format!(
                        "cloned must be an integer, not {}",
                        other.type_str()
                    )),
                },
                other => Err(format!(
                    "unknown concurrency key '{other}' (known: {CONCURRENCY_FORMS})"
                )),
            }
        }
        toml::Value::Table(t) => {
            let keys: Vec<&str> = t.keys().map(String::as_str).collect();
            Err(format!(
                "expected one of {CONCURRENCY_FORMS}, got a table with keys [{}]",
                keys.join(", ")
            ))
        }
        other => Err(format!(
            "expected one of {CONCURRENCY_FORMS}, not {}",
            other.type_str()
        )),
    }
}

/// Only the module tables, leniently, to tell which module an error of the
/// strict parse is in.
#[derive(Deserialize)]
struct ModuleSpans {
    #[serde(default)]
    module: Vec<toml::Spanned<toml::Value>>,
}

/// Turns a TOML error into a message with its line and column, the module
/// it is in (by label) and the key it is about.
fn toml_error(text: &str, e: &toml::de::Error, at: Origin<'_>) -> ConfigFileError {
    let message = e
        .message()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(", ");
    let Some(span) = e.span() else {
        return at.parse(None, None, message);
    };
    let (line, column) = common::line_column(text, span.start);
    let mut context = String::new();
    if let Some((index, label)) = module_at(text, &span) {
        context = match label {
            Some(label) => format!("module '{label}': "),
            None => format!("module #{}: ", index + 1),
        };
    } else if let Some(section) = section_at(text, span.start) {
        let on_header = lines_back(text, span.start)
            .next()
            .and_then(header_name)
            .is_some();
        if on_header && message.starts_with("unknown field") {
            // The header itself names an unknown table of its parent.
            if let Some((parent, _)) = section.rsplit_once('.') {
                context = format!("{parent}: ");
            }
        } else {
            context = format!("{section}: ");
        }
    }
    let key = if message.starts_with("invalid") {
        key_at(text, span.start)
    } else {
        None
    };
    // An inline module table (`module = [{ ... }]`) hides its keys from
    // the line-based search, which then finds `module` itself.
    let key = key.filter(|k| !(context.starts_with("module") && *k == "module"));
    if let Some(key) = key {
        if context.is_empty() || context.starts_with("module") {
            context.push_str(&format!("{key}: "));
        } else {
            context = format!("{}.{key}: ", context.trim_end_matches(": "));
        }
    }
    at.parse(Some(line), Some(column), format!("{context}{message}"))
}

/// The module (index and label, if it has a string one) whose table holds
/// byte `span`.
fn module_at(text: &str, span: &Range<usize>) -> Option<(usize, Option<String>)> {
    let modules = toml::from_str::<ModuleSpans>(text).ok()?.module;
    modules
        .iter()
        .enumerate()
        .find(|(_, m)| m.span().start <= span.start && span.start < m.span().end)
        .map(|(i, m)| {
            let label = m
                .get_ref()
                .get("label")
                .and_then(|l| l.as_str())
                .map(str::to_string);
            (i, label)
        })
}

/// Lines of `text` up to the one holding byte `offset`, last first.
fn lines_back(text: &str, offset: usize) -> impl Iterator<Item = &str> {
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let line_end = text[end..].find('\n').map_or(text.len(), |i| end + i);
    text[..line_end].rsplit('\n')
}

/// The name of a `[table]` or `[[array]]` header line.
fn header_name(line: &str) -> Option<&str> {
    let line = line.split('#').next()?.trim();
    let inner = line.strip_prefix("[[").and_then(|l| l.strip_suffix("]]"));
    let inner = inner
        .or_else(|| line.strip_prefix('[').and_then(|l| l.strip_suffix(']')))?
        .trim();
    let first = inner.chars().next()?;
    let ok = (first.is_ascii_alphabetic() || first == '_')
        && inner
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    ok.then_some(inner)
}

/// The table a byte of the file belongs to (`None`: the root).
fn section_at(text: &str, offset: usize) -> Option<&str> {
    lines_back(text, offset).find_map(header_name)
}

/// The key of the `key = value` line that byte `offset` belongs to (the
/// value may span several lines).
fn key_at(text: &str, offset: usize) -> Option<&str> {
    for line in lines_back(text, offset) {
        if header_name(line).is_some() {
            return None;
        }
        let trimmed = line.trim_start();
        if let Some((key, _)) = trimmed.split_once('=') {
            let key = key.trim();
            let mut chars = key.chars();
            let first = chars.next();
            if first.is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
            {
                return Some(key);
            }
        }
    }
    None
}
