//! evflow's native TOML format (schema: `docs/configuration.md`).

use std::ops::Range;
use std::path::{Path, PathBuf};

use std::collections::HashMap;
use std::sync::Arc;

use evflow_core::ordering::{OrderingOptions, Policy};
use evflow_core::{
    Concurrency, DecisionModel, EmptySource, ModuleDesc, ModuleKind, PathDesc, Process,
};
use evflow_workloads::{self as synthetic, Work};
use serde::Deserialize;

use evflow_workloads::table::{Cut, Table};

use crate::common::{self, MAX_CLONES};
use crate::error::ConfigFileError;
use crate::error::Origin;
use crate::options::{Format, LoadOptions, Loaded};

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
    ordering: Option<OrderingSpec>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct OrderingSpec {
    seed: Option<u64>,
    warmup_events: Option<u64>,
    sample_budget: Option<f64>,
    min_sample_rate: Option<f64>,
    window: Option<u64>,
    concurrent_above: Option<f64>,
    hepframe_concurrent: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DriftSpec {
    at_event: u64,
    pass_fraction: f64,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ProcessSpec {
    name: Option<String>,
    events: Option<u64>,
    events_in_flight: Option<u64>,
    threads: Option<u64>,
    work: Option<String>,
    filter_order: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SourceSpec {
    #[serde(rename = "type")]
    kind: Option<String>,
    events_per_lumi: Option<u64>,
    lumis_per_run: Option<u64>,
    first_run: Option<u32>,
    file: Option<String>,
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
    time_jitter: Option<f64>,
    ranges: Option<u32>,
    #[serde(default)]
    fail_on_events: Vec<u64>,
    cut: Option<String>,
    correlated_with: Option<String>,
    otherwise_pass: Option<f64>,
    drift: Option<DriftSpec>,
    device: Option<crate::device::DeviceSpec>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PathSpec {
    name: String,
    #[serde(default)]
    modules: Vec<String>,
    reorderable: Option<bool>,
    after: Option<Vec<Vec<String>>>,
    filter_order: Option<String>,
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
    let mut ordering = OrderingOptions::default();
    if let Some(name) = &spec.filter_order {
        ordering.default = name
            .parse::<Policy>()
            .map_err(|m| at.setting("process.filter_order", m))?;
    }
    if let Some(o) = &doc.ordering {
        apply_ordering(&mut ordering, o, at)?;
    }

    let mut table: Option<Arc<Table>> = None;
    let mut inputs = Vec::new();
    if let Some(s) = &doc.source {
        match (s.kind.as_deref(), &s.file) {
            (None | Some("empty"), None) => {}
            (None | Some("empty"), Some(_)) => {
                return Err(at.setting("source.file", "applies only to type = \"table\""));
            }
            (Some("table"), Some(file)) => {
                let path = resolve_table(at.0, file);
                let t = Table::read(&path).map_err(|m| at.setting("source.file", m))?;
                table = Some(Arc::new(t));
                inputs.push(("event table (source.file)", path));
            }
            (Some("table"), None) => {
                return Err(at.setting(
                    "source.file",
                    "missing: a table source needs the file of its events",
                ));
            }
            (Some(other), _) => {
                return Err(at.setting(
                    "source.type",
                    format!("unknown source type '{other}' (known: empty, table)"),
                ));
            }
        }
    }
    let events = match (&table, opts.events.or(spec.events)) {
        (_, Some(n)) => n,
        (Some(t), None) => t.rows() as u64,
        (None, None) => DEFAULT_EVENTS,
    };
    let mut source = EmptySource::new(events);
    if let Some(s) = &doc.source {
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
            // Run 0 is no run (CMSSW's invalid run number), as block and
            // event 0 are none: numbers count from 1.
            if run == 0 {
                return Err(at.setting(
                    "source.first_run",
                    "must be at least 1 (run numbers count from 1, as block and event numbers do)",
                ));
            }
            source = source.first_run(run);
        }
    }
    let source = common::events_per_lumi(source, opts, "source", at)?;
    let name = spec.name.unwrap_or_else(|| DEFAULT_NAME.to_string());
    if name.trim().is_empty() {
        return Err(at.setting("process.name", "is empty"));
    }
    let mut process = Process::new(name);
    process.set_source(source);
    let decisions = filter_decisions(&doc.module, table.as_ref(), at)?;
    // Device modules share one context: the caller's, else host only.
    let devices = doc.module.iter().any(|m| m.device.is_some()).then(|| {
        opts.device.clone().unwrap_or_else(|| {
            evflow_device::DeviceContext::host_only(evflow_device::DeviceOptions::default())
        })
    });
    for m in &doc.module {
        let decision = decisions.get(m.label.as_str()).cloned();
        process.add(build_module(
            m,
            default_work,
            opts,
            at,
            decision,
            devices.as_ref(),
        )?);
    }
    for (key, paths) in [("path", &doc.path), ("end_path", &doc.end_path)] {
        for (i, p) in paths.iter().enumerate() {
            if p.name.trim().is_empty() {
                return Err(at.setting(format!("{key}[{i}].name"), "is empty"));
            }
            if key == "path" {
                process.add_path(path_desc(p, i, at, &mut ordering)?);
            } else {
                for (k, present) in [
                    ("reorderable", p.reorderable.is_some()),
                    ("after", p.after.is_some()),
                    ("filter_order", p.filter_order.is_some()),
                ] {
                    if present {
                        return Err(at.setting(
                            format!("end_path[{i}].{k}"),
                            "applies only to paths, not to end paths",
                        ));
                    }
                }
                process.end_path(p.name.clone(), p.modules.iter().cloned());
            }
        }
    }
    Ok(Loaded {
        process,
        events_in_flight,
        threads,
        events,
        format: Format::Toml.name(),
        ordering,
        devices,
        notes: Vec::new(),
        simulation_notes: simulation_notes(&doc.module),
        inputs,
    })
}

/// What the simulator cannot take from the file, per module: configured
/// failures (it simulates every module call as succeeding) and real
/// kernels (their host time is not in the file).
fn simulation_notes(modules: &[ModuleSpec]) -> Vec<(String, String)> {
    let mut notes = Vec::new();
    for m in modules {
        if !m.fail_on_events.is_empty() {
            notes.push((
                m.label.clone(),
                format!(
                    "module '{}' fails on {} configured event(s) (fail_on_events): the simulator \
                     does not model failures and simulates those events as if it succeeded",
                    m.label,
                    m.fail_on_events.len()
                ),
            ));
        }
        // A kernel without a host side (`host = false`) makes no host call
        // whose time the simulator would miss.
        if m.device
            .as_ref()
            .is_some_and(|d| d.has_kernel() && d.has_host())
        {
            notes.push((
                m.label.clone(),
                format!(
                    "module '{}' runs a real kernel (device.kernel) whose host time the \
                     configuration does not give: the simulator counts its host calls as taking \
                     no time; pass --times-from REPORT of a run to use the measured time",
                    m.label
                ),
            ));
        }
    }
    notes
}

/// A `[[path]]` as a core path description; records its `filter_order`.
fn path_desc(
    p: &PathSpec,
    i: usize,
    at: Origin<'_>,
    ordering: &mut OrderingOptions,
) -> Result<PathDesc, ConfigFileError> {
    let mut desc = PathDesc::new(p.name.clone(), p.modules.iter().cloned())
        .reorderable(p.reorderable == Some(true));
    for (k, pair) in p.after.iter().flatten().enumerate() {
        let [later, earlier] = pair.as_slice() else {
            return Err(at.setting(
                format!("path[{i}].after[{k}]"),
                format!(
                    "must be a pair [\"later\", \"earlier\"] of module labels, not {} labels",
                    pair.len()
                ),
            ));
        };
        desc = desc.after(later.clone(), earlier.clone());
    }
    if let Some(name) = &p.filter_order {
        let policy = name
            .parse::<Policy>()
            .map_err(|m| at.setting(format!("path[{i}].filter_order"), m))?;
        if p.reorderable != Some(true) && policy != Policy::Fixed {
            return Err(at.setting(
                format!("path[{i}].filter_order"),
                format!("'{policy}' needs reorderable = true on path '{}'", p.name),
            ));
        }
        ordering.per_path.insert(p.name.clone(), policy);
    }
    Ok(desc)
}

fn apply_ordering(
    ordering: &mut OrderingOptions,
    o: &OrderingSpec,
    at: Origin<'_>,
) -> Result<(), ConfigFileError> {
    let t = &mut ordering.tuning;
    let fraction = |v: f64, key: &str| {
        if v.is_finite() && (0.0..=1.0).contains(&v) {
            Ok(v)
        } else {
            Err(at.setting(
                format!("ordering.{key}"),
                format!("must be between 0 and 1 (got {v})"),
            ))
        }
    };
    if let Some(v) = o.seed {
        t.seed = v;
    }
    if let Some(v) = o.warmup_events {
        if v == 0 {
            return Err(at.setting("ordering.warmup_events", "must be at least 1"));
        }
        t.warmup_events = v;
    }
    if let Some(v) = o.sample_budget {
        t.sample_budget = fraction(v, "sample_budget")?;
    }
    if let Some(v) = o.min_sample_rate {
        t.min_sample_rate = fraction(v, "min_sample_rate")?;
        t.max_sample_rate = t.max_sample_rate.max(t.min_sample_rate);
    }
    if let Some(v) = o.window {
        if v == 0 || v > 1 << 24 {
            return Err(at.setting("ordering.window", "must be between 1 and 16777216"));
        }
        t.window = v as usize;
    }
    if let Some(v) = o.concurrent_above {
        if !(v.is_finite() && v >= 0.0) {
            return Err(at.setting(
                "ordering.concurrent_above",
                format!("must be a number of seconds >= 0 (got {v})"),
            ));
        }
        t.concurrent_above_s = Some(v);
    }
    if let Some(v) = o.hepframe_concurrent {
        t.hepframe_concurrent = v;
    }
    Ok(())
}

/// The decisions of the filters that need one computed here: cuts on the
/// event table, correlated and drifting filters (in dependency order of
/// `correlated_with`).
fn filter_decisions(
    modules: &[ModuleSpec],
    table: Option<&Arc<Table>>,
    at: Origin<'_>,
) -> Result<HashMap<String, DecisionModel>, ConfigFileError> {
    let by_label: HashMap<&str, &ModuleSpec> =
        modules.iter().map(|m| (m.label.as_str(), m)).collect();
    let mut done: HashMap<String, DecisionModel> = HashMap::new();
    for m in modules {
        let mut chain: Vec<&str> = Vec::new();
        let mut at_label = m.label.as_str();
        // Follow correlated_with to a filter whose decision is known.
        loop {
            if done.contains_key(at_label) {
                break;
            }
            if chain.contains(&at_label) {
                chain.push(at_label);
                return Err(at.module(
                    &m.label,
                    format!("correlated_with forms a cycle: {}", chain.join(" -> ")),
                ));
            }
            chain.push(at_label);
            let spec = by_label[at_label];
            match &spec.correlated_with {
                Some(base) if spec.kind == "filter" => match by_label.get(base.as_str()) {
                    Some(b) if b.kind == "filter" => at_label = b.label.as_str(),
                    Some(_) => {
                        return Err(at.module(
                            at_label,
                            format!("correlated_with: '{base}' is not a filter"),
                        ));
                    }
                    None => {
                        return Err(at.module(
                            at_label,
                            format!("correlated_with: no module is labelled '{base}'"),
                        ));
                    }
                },
                _ => break,
            }
        }
        for label in chain.into_iter().rev() {
            if done.contains_key(label) {
                continue;
            }
            let spec = by_label[label];
            if spec.kind != "filter" {
                continue;
            }
            let base = spec
                .correlated_with
                .as_ref()
                .and_then(|b| done.get(b.as_str()).cloned());
            let decision = own_decision(spec, table, base, at)?;
            done.insert(label.to_string(), decision);
        }
    }
    Ok(done)
}

/// The decision of one filter, given the decision of the filter it is
/// correlated with.
fn own_decision(
    m: &ModuleSpec,
    table: Option<&Arc<Table>>,
    base: Option<DecisionModel>,
    at: Origin<'_>,
) -> Result<DecisionModel, ConfigFileError> {
    let err = |message: String| at.module(&m.label, message);
    let seed = m.seed.unwrap_or_else(|| common::seed_from_label(&m.label));
    let check = |v: f64, key: &str| {
        if (0.0..=1.0).contains(&v) {
            Ok(v)
        } else {
            Err(err(format!("{key} must be between 0 and 1 (got {v})")))
        }
    };
    let mut decision: DecisionModel = if let Some(text) = &m.cut {
        if m.pass_fraction.is_some() || m.correlated_with.is_some() || m.drift.is_some() {
            return Err(err(
                "a cut decides by the event table: pass_fraction, correlated_with and drift do not apply".into(),
            ));
        }
        let Some(table) = table else {
            return Err(err(
                "cut needs an event table: [source] type = \"table\", file = \"...\"".into(),
            ));
        };
        let cut = Cut::parse(text, table).map_err(|e| err(format!("cut: {e}")))?;
        let table = table.clone();
        return Ok(Arc::new(move |id| cut.passes(&table, id.event)));
    } else if let Some(b) = base {
        let Some(p) = m.otherwise_pass else {
            return Err(err(
                "correlated_with needs otherwise_pass: the pass probability when the other filter rejects".into(),
            ));
        };
        if m.pass_fraction.is_some() {
            return Err(err(
                "correlated_with and pass_fraction exclude each other (use otherwise_pass)".into(),
            ));
        }
        synthetic::correlated_decision(b, check(p, "otherwise_pass")?, seed)
    } else {
        let fraction = check(m.pass_fraction.unwrap_or(1.0), "pass_fraction")?;
        synthetic::fraction_decision(fraction, seed)
    };
    if m.otherwise_pass.is_some() && m.correlated_with.is_none() {
        return Err(err("otherwise_pass needs correlated_with".into()));
    }
    if let Some(d) = &m.drift {
        if d.at_event == 0 {
            return Err(err("drift.at_event is 0: events are numbered from 1".into()));
        }
        let after = synthetic::fraction_decision(
            check(d.pass_fraction, "drift.pass_fraction")?,
            seed ^ 0xd41f7,
        );
        decision = synthetic::drifting_decision(decision, after, d.at_event);
    }
    Ok(decision)
}

fn build_module(
    m: &ModuleSpec,
    default_work: Work,
    opts: &LoadOptions,
    at: Origin<'_>,
    decision: Option<DecisionModel>,
    devices: Option<&evflow_device::DeviceContext>,
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
    let mut timing = common::timing(times, scale, work);
    if let Some(j) = m.time_jitter {
        if !(0.0..=1.0).contains(&j) {
            return Err(err(format!(
                "time_jitter must be between 0 and 1 (got {j})"
            )));
        }
        timing = timing.with_jitter(j, common::seed_from_label(label) ^ 0x7177);
    }
    if let Some(r) = m.ranges {
        if r == 0 {
            return Err(err("ranges must be at least 1 (got 0)".into()));
        }
        timing = timing.with_ranges(r);
    }
    if !m.fail_on_events.is_empty() {
        // Events are numbered from 1: a 0 would never fail, silently.
        if let Some(i) = m.fail_on_events.iter().position(|&e| e == 0) {
            return Err(err(format!(
                "fail_on_events[{i}] is 0: events are numbered from 1"
            )));
        }
        timing = timing.with_failures(m.fail_on_events.clone());
    }

    for (i, c) in m.consumes.iter().enumerate() {
        if c.trim().is_empty() {
            return Err(err(format!("consumes[{i}] is empty")));
        }
        if c.trim() != c {
            return Err(err(format!("consumes[{i}] '{c}' has surrounding spaces")));
        }
    }
    let consumes: Vec<&str> = m.consumes.iter().map(String::as_str).collect();
    // Instance names: a product is consumed as "label" or "label:instance",
    // so an instance with a ':' or surrounding spaces could never be.
    for (i, p) in m.produces.iter().flatten().enumerate() {
        if p.contains(':') {
            return Err(err(format!(
                "produces[{i}] '{p}' contains ':' (instance names are consumed as \
                 \"label:instance\")"
            )));
        }
        if p.trim() != p {
            return Err(err(format!("produces[{i}] '{p}' has surrounding spaces")));
        }
    }

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
        only(m.device.is_some(), "device", "producers")?;
    }
    if m.device.as_ref().is_some_and(|d| d.has_kernel()) && (m.time.is_some() || m.times.is_some())
    {
        return Err(err(
            "'time' does not apply to a module whose device table names a kernel (its host side runs the kernel's Rust twin; device.time is the emulated device's modelled time)".into(),
        ));
    }
    if kind != ModuleKind::Filter {
        only(m.pass_fraction.is_some(), "pass_fraction", "filters")?;
        only(m.seed.is_some(), "seed", "filters")?;
        only(m.cut.is_some(), "cut", "filters")?;
        only(m.correlated_with.is_some(), "correlated_with", "filters")?;
        only(m.otherwise_pass.is_some(), "otherwise_pass", "filters")?;
        only(m.drift.is_some(), "drift", "filters")?;
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
            match (&m.device, devices) {
                (Some(spec), Some(context)) => {
                    let io = (consumes.as_slice(), produces.as_slice());
                    crate::device::build(label, spec, timing, scale, io, concurrency, context)
                        .map_err(err)?
                }
                _ => match concurrency {
                    Concurrency::Cloned(n) => {
                        synthetic::cloned_producer(label, n, timing, &consumes, &produces)
                    }
                    other => {
                        synthetic::producer(label, timing, &consumes, &produces).concurrency(other)
                    }
                },
            }
        }
        ModuleKind::Filter => {
            let fraction = m.pass_fraction.unwrap_or(1.0);
            if !(0.0..=1.0).contains(&fraction) {
                return Err(err(format!(
                    "pass_fraction must be between 0 and 1 (got {fraction})"
                )));
            }
            let plain = m.cut.is_none() && m.correlated_with.is_none() && m.drift.is_none();
            match decision {
                Some(decision) if !plain => {
                    synthetic::filter_with_decision(label, timing, &consumes, decision)
                        .concurrency(concurrency)
                }
                _ => {
                    let seed = m.seed.unwrap_or_else(|| common::seed_from_label(label));
                    synthetic::filter(label, timing, &consumes, fraction, seed)
                        .concurrency(concurrency)
                }
            }
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

/// Only the module, path and end path tables, leniently, to tell which of
/// them an error of the strict parse is in.
#[derive(Deserialize)]
struct TableSpans {
    #[serde(default)]
    module: Vec<toml::Spanned<toml::Value>>,
    #[serde(default)]
    path: Vec<toml::Spanned<toml::Value>>,
    #[serde(default)]
    end_path: Vec<toml::Spanned<toml::Value>>,
}

/// The arrays of tables whose entries an error names by their own name:
/// the array, the key holding the entry's name, and how messages call it.
const NAMED_TABLES: [(&str, &str, &str); 3] = [
    ("module", "label", "module"),
    ("path", "name", "path"),
    ("end_path", "name", "end path"),
];

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
    // Whether the context names an entry of a named table (a module, a
    // path), after which the key follows as "key: ".
    let mut entry = false;
    if let Some((what, index, name)) =
        entry_at(text, &span).or_else(|| entry_by_lines(text, span.start))
    {
        entry = true;
        context = match name {
            Some(name) => format!("{what} '{name}': "),
            None => format!("{what} #{}: ", index + 1),
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
    // An inline table of an array (`module = [{ ... }]`) hides its keys
    // from the line-based search, which then finds the array itself.
    let key = key.filter(|k| !(entry && NAMED_TABLES.iter().any(|(array, ..)| k == array)));
    if let Some(key) = key {
        if context.is_empty() || entry {
            context.push_str(&format!("{key}: "));
        } else {
            context = format!("{}.{key}: ", context.trim_end_matches(": "));
        }
    }
    at.parse(Some(line), Some(column), format!("{context}{message}"))
}

/// The entry of a named table (what messages call its array, its index,
/// and its name if it has a string one) whose table holds byte `span`.
fn entry_at(text: &str, span: &Range<usize>) -> Option<(&'static str, usize, Option<String>)> {
    let spans = toml::from_str::<TableSpans>(text).ok()?;
    let arrays = [&spans.module, &spans.path, &spans.end_path];
    arrays
        .into_iter()
        .zip(NAMED_TABLES)
        .find_map(|(entries, (_, key, what))| {
            entries
                .iter()
                .enumerate()
                .find(|(_, m)| m.span().start <= span.start && span.start < m.span().end)
                .map(|(i, m)| {
                    let name = m
                        .get_ref()
                        .get(key)
                        .and_then(|l| l.as_str())
                        .map(str::to_string);
                    (what, i, name)
                })
        })
}

/// The entry of a named table holding byte `offset` of a file that does
/// not parse (so [`entry_at`] cannot say): found by its `[[module]]` (or
/// `[[path]]`, `[[end_path]]`) header line, with the name of a
/// `label = "..."` (`name = "..."`) line of its block, if it has one.
fn entry_by_lines(text: &str, offset: usize) -> Option<(&'static str, usize, Option<String>)> {
    // The array the block at `offset` belongs to, its index and name.
    let mut current: Option<(usize, usize, Option<String>)> = None;
    let mut headers = [0usize; NAMED_TABLES.len()];
    let mut position = 0;
    for line in text.split_inclusive('\n') {
        let start = position;
        position += line.len();
        let header = header_name(line);
        let array = line
            .trim()
            .strip_prefix("[[")
            .and(header)
            .and_then(|h| NAMED_TABLES.iter().position(|(a, ..)| *a == h));
        if let Some(a) = array {
            if start > offset {
                break;
            }
            current = Some((a, headers[a], None));
            headers[a] += 1;
            continue;
        }
        if let Some(name) = header {
            // Another table: the block ends (sub-tables of the entry,
            // `[module.x]`, are still in it).
            let own = current.as_ref().is_some_and(|(a, ..)| {
                name.strip_prefix(NAMED_TABLES[*a].0)
                    .is_some_and(|rest| rest.starts_with('.'))
            });
            if !own {
                if start > offset {
                    break;
                }
                current = None;
            }
        }
        if let Some((a, _, name @ None)) = &mut current {
            *name = string_value_of(line, NAMED_TABLES[*a].1);
        }
    }
    current.map(|(a, i, name)| (NAMED_TABLES[a].2, i, name))
}

/// The string of a `key = "value"` (or `'value'`) line, if `line` is one.
fn string_value_of(line: &str, key: &str) -> Option<String> {
    let (k, v) = line.trim().split_once('=')?;
    if k.trim() != key {
        return None;
    }
    let v = v.trim();
    let quote = v.chars().next().filter(|c| matches!(c, '"' | '\''))?;
    let rest = &v[1..];
    let end = rest.find(quote)?;
    Some(rest[..end].to_string())
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

/// The key of the `key = value` line that byte `offset` belongs to: the
/// key of its own line, or of an earlier line whose value is still open
/// there (a multi-line array, inline table or string). A line without a
/// key after a complete `key = value` line belongs to no key: its error
/// is not that key's.
fn key_at(text: &str, offset: usize) -> Option<&str> {
    let offset = offset.min(text.len());
    let mut own_line = true;
    for line in lines_back(text, offset) {
        if header_name(line).is_some() {
            return None;
        }
        let trimmed = line.trim_start();
        if let Some((key, value)) = trimmed.split_once('=') {
            let key = key.trim();
            let mut chars = key.chars();
            let first = chars.next();
            if first.is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
            {
                // `value` is a slice of `text`: where it starts there.
                let start = value.as_ptr() as usize - text.as_ptr() as usize;
                let open = own_line || text.get(start..offset).is_some_and(value_is_open);
                return open.then_some(key);
            }
        }
        own_line = false;
    }
    None
}

/// Whether the TOML value text `value` is still open at its end: an array
/// or inline table not closed, or a multi-line string not ended. Brackets
/// inside strings and comments do not count. (The delimiters are ASCII,
/// which no byte of a multi-byte UTF-8 character is, so bytes are scanned.)
fn value_is_open(value: &str) -> bool {
    const QUOTES: [&[u8]; 4] = [b"\"\"\"", b"'''", b"\"", b"'"];
    let b = value.as_bytes();
    let (mut depth, mut i) = (0i64, 0usize);
    while i < b.len() {
        if let Some(quote) = QUOTES.into_iter().find(|q| b[i..].starts_with(q)) {
            let mut j = i + quote.len();
            loop {
                match b.get(j) {
                    // Still inside a multi-line string at the end.
                    None => return quote.len() == 3,
                    Some(b'\\') if quote[0] == b'"' => j += 2,
                    // A one-line string ends with its line (an error of its own).
                    Some(b'\n') if quote.len() == 1 => break,
                    Some(_) if b[j..].starts_with(quote) => {
                        j += quote.len();
                        break;
                    }
                    Some(_) => j += 1,
                }
            }
            i = j;
            continue;
        }
        match b[i] {
            b'[' | b'{' => depth += 1,
            b']' | b'}' => depth -= 1,
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    depth > 0
}

/// A table file named in a configuration: relative to the directory of the
/// configuration file (`origin`).
fn resolve_table(origin: &str, file: &str) -> PathBuf {
    let path = Path::new(file);
    if path.is_absolute() {
        return path.to_path_buf();
    }
    match Path::new(origin).parent() {
        Some(dir) => dir.join(path),
        None => path.to_path_buf(),
    }
}
