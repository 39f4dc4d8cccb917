//! `evflow report`: reads a report or a trace of `evflow run` and prints the
//! time report, the cut-flow, the longest stalls and, from a trace, how many
//! modules ran at once during one event.

mod figures;
mod python;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// A report (`evflow run --report`) or a trace (`evflow run --trace`).
    pub file: PathBuf,
    /// Trace only: the event number whose concurrency profile to show (default: the first complete one).
    #[arg(long)]
    pub event: Option<u64>,
    /// Trace only: write the event's profile as CSV (time_ms,modules_running) for plotting.
    #[arg(long)]
    pub profile_csv: Option<PathBuf>,
    /// How many modules and stalls to list.
    #[arg(long, default_value_t = 15)]
    pub top: usize,
}

pub fn report(args: &ReportArgs) -> Result<(), String> {
    // Before reading: `--profile-csv` naming the trace itself replaced it
    // with the profile.
    crate::output_files::check_outputs(
        &[("--profile-csv", args.profile_csv.as_deref())],
        &[("file read", Some(&args.file))],
    )?;
    let mut doc = read_json(&args.file)?;
    // A run's report has its device modules inside, a simulation's beside
    // the simulated job's report.
    let devices = doc.get("devices").cloned();
    // `evflow simulate --report` nests the engine's report of the simulated
    // job under `report`, beside the machine's figures.
    if doc.get("simulated_s").is_some()
        && let Some(inner) = doc.get_mut("report").map(Value::take)
        && inner.get("modules").is_some()
    {
        println!(
            "simulation on {} {} ({:.3} s simulated):",
            num(&doc, "cores"),
            if doc.get("cores").and_then(Value::as_u64) == Some(1) {
                "core"
            } else {
                "cores"
            },
            num(&doc, "simulated_s")
        );
        doc = inner;
    }
    if doc.get("traceEvents").is_some() {
        let slices = slices(&doc, &args.file)?;
        trace_report(&slices, args)
    } else if doc.get("modules").is_some() {
        // Options that only a trace can answer are not silently ignored.
        for (given, option) in [
            (args.event.is_some(), "--event"),
            (args.profile_csv.is_some(), "--profile-csv"),
        ] {
            if given {
                return Err(format!(
                    "{}: {option} applies to a trace (written by `evflow run --trace`), \
                     and this is a report",
                    args.file.display()
                ));
            }
        }
        // A report's lists must be lists: anything else is another file,
        // not a report of no modules.
        for key in [
            "modules",
            "paths",
            "stalls",
            "failed_events",
            "orderings",
            "skipped_files",
        ] {
            if doc.get(key).is_some_and(|v| !v.is_array()) {
                return Err(format!(
                    "{}: '{key}' is not a list: not a report written by evflow",
                    args.file.display()
                ));
            }
        }
        if devices
            .as_ref()
            .is_some_and(|d| !(d.is_array() || d.is_object() || d.is_null()))
        {
            return Err(format!(
                "{}: 'devices' is neither a list (evflow run) nor a map (a Python analysis): \
                 not a report written by evflow",
                args.file.display()
            ));
        }
        figures::check(&doc).map_err(|e| format!("{}: {e}", args.file.display()))?;
        report_report(&doc, args.top);
        python::print_skipped_files(&doc, args.top);
        match devices {
            // `evflow run` lists its device modules; a Python analysis
            // writes a map: the device, its notice, the modules by label.
            Some(devices @ Value::Array(_)) => report_devices(devices, &args.file)?,
            Some(devices @ Value::Object(_)) => python::print_devices(devices, &args.file)?,
            _ => {}
        }
        Ok(())
    } else {
        Err(format!(
            "{}: neither an evflow report (no 'modules') nor a trace (no 'traceEvents')",
            args.file.display()
        ))
    }
}

/// The lines `evflow run` prints per device module, and each module's
/// launch model.
fn report_devices(devices: Value, path: &Path) -> Result<(), String> {
    let devices: Vec<evflow_device::DeviceModuleReport> =
        serde_json::from_value(devices).map_err(|e| format!("{}: devices: {e}", path.display()))?;
    crate::device::print_summary(&devices);
    for d in &devices {
        let Some(m) = d.launch_model else { continue };
        let rate = |per_byte: f64| {
            if per_byte > 0.0 {
                format!("{:.2} GB/s", 1e-9 / per_byte)
            } else {
                "no per-byte time".into()
            }
        };
        println!(
            "  launches of {}: kernel {:.1} µs + {:.2} µs per event; in {:.1} µs + {}; \
             out {:.1} µs + {}; {}; {} timed out, {} when every event waited",
            d.label,
            m.kernel_fixed_s * 1e6,
            m.kernel_per_event_s * 1e6,
            m.transfer_in_fixed_s * 1e6,
            rate(m.transfer_in_per_byte_s),
            m.transfer_out_fixed_s * 1e6,
            rate(m.transfer_out_per_byte_s),
            if m.overlap {
                "successive launches overlap"
            } else {
                "no overlap"
            },
            d.timed_out_launches,
            d.idle_launches,
        );
    }
    Ok(())
}

pub(crate) fn read_json(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: invalid JSON: {e}", path.display()))
}

fn num(v: &Value, key: &str) -> f64 {
    v.get(key).and_then(Value::as_f64).unwrap_or(0.0)
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("?")
}

/// " on path 'P'" for an entry about one occurrence of a filter on
/// several paths (a Python analysis names the filter and its path).
fn on_path(entry: &Value) -> String {
    entry
        .get("path")
        .and_then(Value::as_str)
        .map_or(String::new(), |p| format!(" on path '{p}'"))
}

fn report_report(doc: &Value, top: usize) {
    // A Python analysis's engine events are its batches: its report's
    // counts (events, calls, the paths' visited and passed) are batches.
    let python = python::is_python(doc);
    let unit = if python { "batches" } else { "events" };
    let threads = format!(
        "{} {}, {} {unit} in flight, executor {}",
        num(doc, "threads"),
        if doc.get("threads").and_then(Value::as_u64) == Some(1) {
            "thread"
        } else {
            "threads"
        },
        num(doc, "events_in_flight"),
        text(doc, "executor"),
    );
    if python {
        let wall = num(doc, "wall_s");
        println!(
            "{} events in {} batches in {wall:.3} s: {:.1} events/s ({threads})",
            num(doc, "events_processed"),
            // Read, failed ones included (the engine's `events` are those
            // that completed).
            num(
                doc,
                if doc.get("batches").is_some() {
                    "batches"
                } else {
                    "events"
                }
            ),
            if wall > 0.0 {
                num(doc, "events_processed") / wall
            } else {
                0.0
            },
        );
    } else {
        println!(
            "{} events in {:.3} s: {:.1} events/s ({threads})",
            num(doc, "events"),
            num(doc, "wall_s"),
            num(doc, "throughput_ev_s"),
        );
    }
    let empty = Vec::new();
    if doc.get("interrupted").and_then(Value::as_bool) == Some(true) {
        println!(
            "interrupted: a signal stopped the job early; the figures cover the {} events done",
            num(doc, if python { "events_processed" } else { "events" })
        );
    }
    let failed = doc["failed_events"].as_array().map_or(0, Vec::len);
    if failed > 0 {
        let what = if python { "batch(es)" } else { "event(s)" };
        println!("{failed} {what} failed and were skipped (listed at the end)");
    }
    let mut modules: Vec<&Value> = doc["modules"]
        .as_array()
        .unwrap_or(&empty)
        .iter()
        .filter(|m| num(m, "calls") > 0.0)
        .collect();
    modules.sort_by(|a, b| {
        (num(b, "run_s") + num(b, "wait_s")).total_cmp(&(num(a, "run_s") + num(a, "wait_s")))
    });
    println!("time report (per module: total run, external-work wait and admission queue time):");
    println!(
        "  {:<40} {:>9} {:>11} {:>11} {:>11}",
        "module", "calls", "run s", "wait s", "queued s"
    );
    for m in modules.iter().take(top) {
        println!(
            "  {:<40} {:>9} {:>11.4} {:>11.4} {:>11.4}",
            text(m, "label"),
            num(m, "calls"),
            num(m, "run_s"),
            num(m, "wait_s"),
            num(m, "queue_s")
        );
    }
    if modules.len() > top {
        println!("  ... {} more modules", modules.len() - top);
    }
    // Paths the planner ordered: their steps ran in varying orders, and
    // sampled events ran steps past a rejection, so a step's events passed
    // over the path's events is no cumulative efficiency (it can exceed
    // the path's acceptance).
    let reordered: Vec<&str> = doc["orderings"]
        .as_array()
        .unwrap_or(&empty)
        .iter()
        .filter_map(|o| o.get("path").and_then(Value::as_str))
        .collect();
    for p in doc["paths"].as_array().unwrap_or(&empty) {
        let name = text(p, "name");
        let in_order = !reordered.contains(&name);
        println!(
            "cut-flow of path '{}': {} of {} {unit} accepted{}",
            name,
            num(p, "passed"),
            num(p, "visited"),
            if in_order {
                ""
            } else {
                " (steps reordered: listed as written, no cumulative efficiency)"
            }
        );
        let total = num(p, "visited").max(1.0);
        println!(
            "  {:<30} {:>10} {:>10} {:>10} {:>12}",
            "step", "visited", "passed", "eff.", "cumul. eff."
        );
        for f in p["filters"].as_array().unwrap_or(&empty) {
            let (v, pa) = (num(f, "visited"), num(f, "passed"));
            let cumulative = if in_order {
                format!("{:>11.1}%", 100.0 * pa / total)
            } else {
                format!("{:>12}", "-")
            };
            println!(
                "  {:<30} {:>10} {:>10} {:>9.1}% {cumulative}",
                text(f, "label"),
                v,
                pa,
                if v > 0.0 { 100.0 * pa / v } else { 0.0 },
            );
        }
    }
    if python && !doc["paths"].as_array().unwrap_or(&empty).is_empty() {
        println!(
            "  (the cut-flow in events is the analysis's own: its result's cutflow, \
             cutflow.txt of `--save`)"
        );
    }
    let stalls = doc["stalls"].as_array().unwrap_or(&empty);
    if !stalls.is_empty() {
        println!("longest stalls (ready work waiting for admission):");
        for s in stalls.iter().take(top) {
            println!(
                "  {:>10.6} s  module '{}'{} on run {} lumi {} event {} waited for its {}",
                num(s, "waited_s"),
                text(s, "module"),
                on_path(s),
                num(s, "run"),
                num(s, "lumi"),
                num(s, "event"),
                text(s, "reason")
            );
        }
    }
    for f in doc["failed_events"]
        .as_array()
        .unwrap_or(&empty)
        .iter()
        .take(top)
    {
        println!(
            "failed: run {} lumi {} event {}: module '{}'{}: {}",
            num(f, "run"),
            num(f, "lumi"),
            num(f, "event"),
            text(f, "module"),
            on_path(f),
            text(f, "message")
        );
    }
    if failed > top {
        println!("... {} more failed events", failed - top);
    }
}

/// (module label, duration in µs) of every module slice of a trace, for
/// `evflow simulate --times-from`.
pub(crate) fn module_durations(doc: &Value, path: &Path) -> Result<Vec<(String, f64)>, String> {
    Ok(slices(doc, path)?
        .into_iter()
        .filter(|s| s.category == "module")
        .map(|s| (s.name, s.dur_us))
        .collect())
}

/// One slice of a Chrome trace written by evflow.
struct Slice {
    name: String,
    category: String,
    thread: u64,
    event: Option<u64>,
    start_us: f64,
    dur_us: f64,
}

fn slices(doc: &Value, path: &Path) -> Result<Vec<Slice>, String> {
    let events = doc["traceEvents"]
        .as_array()
        .ok_or_else(|| format!("{}: 'traceEvents' is not a list", path.display()))?;
    Ok(events
        .iter()
        .filter(|e| e.get("ph").and_then(Value::as_str) == Some("X"))
        .map(|e| Slice {
            name: text(e, "name").to_string(),
            category: text(e, "cat").to_string(),
            thread: e.get("tid").and_then(Value::as_u64).unwrap_or(0),
            event: e
                .get("args")
                .and_then(|a| a.get("event"))
                .and_then(Value::as_u64),
            start_us: num(e, "ts"),
            dur_us: num(e, "dur"),
        })
        .collect())
}

/// Per module, its `produce` slices of external work: the module slice of
/// an event that starts once that event's wait for the module began (the
/// wait starts when `acquire` has returned).
fn produce_slices(slices: &[Slice]) -> HashMap<&str, u64> {
    let mut waits: HashMap<(&str, u64), f64> = HashMap::new();
    for s in slices.iter().filter(|s| s.category == "wait") {
        if let Some(event) = s.event {
            waits.insert((&s.name, event), s.start_us);
        }
    }
    let mut produces: HashMap<&str, u64> = HashMap::new();
    if waits.is_empty() {
        return produces;
    }
    for s in slices.iter().filter(|s| s.category == "module") {
        let Some(event) = s.event else { continue };
        if waits
            .get(&(s.name.as_str(), event))
            .is_some_and(|&wait| s.start_us >= wait)
        {
            *produces.entry(&s.name).or_default() += 1;
        }
    }
    produces
}

fn trace_report(slices: &[Slice], args: &ReportArgs) -> Result<(), String> {
    // The event to profile, checked before anything is printed.
    let events: std::collections::BTreeSet<u64> = slices
        .iter()
        .filter(|s| s.category == "module")
        .filter_map(|s| s.event)
        .collect();
    let event = match (args.event, events.first(), events.last()) {
        (Some(e), Some(first), Some(last)) if !events.contains(&e) => {
            return Err(format!(
                "{}: event {e} has no module slices in the trace (events {first} to {last} have)",
                args.file.display()
            ));
        }
        (Some(e), None, _) => {
            return Err(format!(
                "{}: event {e} has no module slices: no module ran in this trace",
                args.file.display()
            ));
        }
        (None, None, None) if args.profile_csv.is_some() => {
            return Err(format!(
                "{}: no module ran in this trace: no event profile for --profile-csv",
                args.file.display()
            ));
        }
        (Some(e), _, _) => Some(e),
        (None, first, _) => first.copied(),
    };
    let mut per_module: HashMap<&str, (u64, f64, f64, f64)> = HashMap::new();
    for s in slices {
        let entry = per_module.entry(&s.name).or_default();
        match s.category.as_str() {
            "module" => {
                entry.0 += 1;
                entry.1 += s.dur_us;
            }
            "wait" => entry.2 += s.dur_us,
            "queued" => entry.3 += s.dur_us,
            _ => {}
        }
    }
    // A call with external work is two slices, `acquire` and the `produce`
    // after its wait: count it once, as the report's `calls` does.
    for (name, produces) in produce_slices(slices) {
        if let Some(entry) = per_module.get_mut(name) {
            entry.0 -= produces;
        }
    }
    let threads: std::collections::BTreeSet<u64> = slices
        .iter()
        .filter(|s| s.category == "module")
        .map(|s| s.thread)
        .collect();
    let end = slices
        .iter()
        .map(|s| s.start_us + s.dur_us)
        .fold(0.0, f64::max);
    println!(
        "trace: {} slices on {} worker threads over {:.3} ms",
        slices.len(),
        threads.len(),
        end / 1e3
    );
    let mut rows: Vec<_> = per_module.into_iter().filter(|(_, v)| v.0 > 0).collect();
    rows.sort_by(|a, b| (b.1.1 + b.1.2).total_cmp(&(a.1.1 + a.1.2)));
    println!(
        "  {:<40} {:>9} {:>11} {:>11} {:>11}",
        "module", "calls", "run ms", "wait ms", "queued ms"
    );
    for (name, (calls, run, wait, queued)) in rows.iter().take(args.top) {
        println!(
            "  {:<40} {:>9} {:>11.3} {:>11.3} {:>11.3}",
            name,
            calls,
            run / 1e3,
            wait / 1e3,
            queued / 1e3
        );
    }
    let mut stalls: Vec<&Slice> = slices.iter().filter(|s| s.category == "queued").collect();
    stalls.sort_by(|a, b| b.dur_us.total_cmp(&a.dur_us));
    if !stalls.is_empty() {
        println!("longest stalls (ready work waiting for admission):");
        for s in stalls.iter().take(args.top) {
            println!(
                "  {:>10.3} ms  module '{}' on event {}",
                s.dur_us / 1e3,
                s.name,
                s.event.unwrap_or(0)
            );
        }
    }
    let Some(event) = event else {
        println!("no module ran: no event profile");
        return Ok(());
    };
    let profile = event_profile(slices, event);
    let peak = profile.iter().map(|p| p.1).max().unwrap_or(0);
    let span = profile.last().map(|p| p.0).unwrap_or(0.0) - profile[0].0;
    let mean = profile
        .windows(2)
        .map(|w| (w[1].0 - w[0].0) * w[0].1 as f64)
        .sum::<f64>()
        / span.max(1e-9);
    println!(
        "event {event}: {:.3} ms from first to last module, on average {mean:.2} modules running at once, at most {peak}",
        span / 1e3
    );
    print_profile(&profile);
    if let Some(path) = &args.profile_csv {
        let mut csv = String::from("time_ms,modules_running\n");
        for (t, n) in &profile {
            csv.push_str(&format!("{:.6},{n}\n", (t - profile[0].0) / 1e3));
        }
        std::fs::write(path, csv)
            .map_err(|e| format!("--profile-csv {}: cannot write: {e}", path.display()))?;
    }
    Ok(())
}

/// (time µs, modules of `event` running from then on), at every change.
fn event_profile(slices: &[Slice], event: u64) -> Vec<(f64, u32)> {
    let mut edges: Vec<(f64, i32)> = Vec::new();
    for s in slices
        .iter()
        .filter(|s| s.category == "module" && s.event == Some(event))
    {
        edges.push((s.start_us, 1));
        edges.push((s.start_us + s.dur_us, -1));
    }
    edges.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut running = 0i32;
    let mut out: Vec<(f64, u32)> = Vec::new();
    for (t, d) in edges {
        running += d;
        match out.last_mut() {
            Some(last) if last.0 == t => last.1 = running.max(0) as u32,
            _ => out.push((t, running.max(0) as u32)),
        }
    }
    out
}

/// A 60-column text rendering of a concurrency profile.
fn print_profile(profile: &[(f64, u32)]) {
    const COLUMNS: usize = 60;
    let (t0, t1) = (profile[0].0, profile.last().map(|p| p.0).unwrap_or(0.0));
    let peak = profile.iter().map(|p| p.1).max().unwrap_or(1).max(1);
    let mut columns = vec![0f64; COLUMNS];
    let width = (t1 - t0).max(1e-9) / COLUMNS as f64;
    for w in profile.windows(2) {
        let (a, b, n) = (w[0].0, w[1].0, w[0].1 as f64);
        let mut t = a;
        while t < b {
            let c = (((t - t0) / width) as usize).min(COLUMNS - 1);
            let next = (t0 + (c as f64 + 1.0) * width).min(b);
            columns[c] += n * (next - t) / width;
            if next <= t {
                break;
            }
            t = next;
        }
    }
    for level in (1..=peak.min(12)).rev() {
        let threshold = level as f64 * peak as f64 / peak.min(12) as f64;
        let row: String = columns
            .iter()
            .map(|&c| if c + 0.5 >= threshold { '#' } else { ' ' })
            .collect();
        println!("  {threshold:>5.1} |{row}");
    }
    println!("        +{}", "-".repeat(COLUMNS));
    println!(
        "         0{:>width$.3} ms",
        (t1 - t0) / 1e3,
        width = COLUMNS - 1
    );
}
