//! The one-line summary and compact time report printed after a run.

use std::io::Write;

use evflow_core::Report;

/// How many modules the compact time report lists.
const TOP_MODULES: usize = 10;

/// Prints the summary to standard output; a closed pipe (`| head`) is not
/// an error.
pub fn print(report: &Report) {
    let _ = write_summary(&mut std::io::stdout().lock(), report);
}

fn write_summary(out: &mut impl Write, report: &Report) -> std::io::Result<()> {
    writeln!(
        out,
        "{} events in {:.3} s: {:.1} events/s, {} {}, {} events in flight (peak {}), cpu {:.2} s, peak RSS {:.1} MB",
        report.events,
        report.wall_s,
        report.throughput_ev_s,
        report.threads,
        if report.threads == 1 {
            "thread"
        } else {
            "threads"
        },
        report.events_in_flight,
        report.peak_events_in_flight,
        report.cpu_s,
        report.peak_rss_bytes as f64 / 1e6,
    )?;
    let mut modules: Vec<_> = report.modules.iter().filter(|m| m.calls > 0).collect();
    let ran = modules.len();
    // A fold from 0.0, not `sum()`: the sum of no floats is -0.0, printed
    // "-0.000 s" for a job with no events.
    let total_run = modules.iter().fold(0.0, |total, m| total + m.run_s);
    modules.sort_by(|a, b| (b.run_s + b.wait_s).total_cmp(&(a.run_s + a.wait_s)));
    writeln!(
        out,
        "time report ({ran} of {} modules ran, {:.3} s of module time):",
        report.modules.len(),
        total_run
    )?;
    writeln!(
        out,
        "  {:<40} {:>10} {:>12} {:>12} {:>8}",
        "module", "calls", "run ms/call", "wait ms/call", "share"
    )?;
    for m in modules.iter().take(TOP_MODULES) {
        let per_call = |s: f64| {
            if m.calls > 0 {
                s * 1e3 / m.calls as f64
            } else {
                0.0
            }
        };
        writeln!(
            out,
            "  {:<40} {:>10} {:>12.4} {:>12.4} {:>7.1}%",
            truncate(&m.label, 40),
            m.calls,
            per_call(m.run_s),
            per_call(m.wait_s),
            if total_run > 0.0 {
                100.0 * m.run_s / total_run
            } else {
                0.0
            }
        )?;
    }
    if modules.len() > TOP_MODULES {
        writeln!(
            out,
            "  ... {} more modules (evflow report REPORT.json --top N)",
            modules.len() - TOP_MODULES
        )?;
    }
    if !report.paths.is_empty() {
        writeln!(out, "paths:")?;
        for p in &report.paths {
            writeln!(
                out,
                "  {:<30} {:>10} visited {:>10} passed",
                truncate(&p.name, 30),
                p.visited,
                p.passed
            )?;
            if p.filters.len() > 1 {
                for f in &p.filters {
                    writeln!(
                        out,
                        "    {:<28} {:>10} visited {:>10} passed",
                        truncate(&f.label, 28),
                        f.visited,
                        f.passed
                    )?;
                }
            }
        }
    }
    if !report.failed_events.is_empty() {
        writeln!(out, "{} failed events:", report.failed_events.len())?;
        for f in report.failed_events.iter().take(10) {
            writeln!(
                out,
                "  run {} lumi {} event {}: module '{}': {}",
                f.run, f.lumi, f.event, f.module, f.message
            )?;
        }
        if report.failed_events.len() > 10 {
            writeln!(out, "  ... {} more", report.failed_events.len() - 10)?;
        }
    }
    if !report.orderings.is_empty() {
        writeln!(out, "filter order changes:")?;
        for c in report.orderings.iter().take(20) {
            writeln!(
                out,
                "  path '{}' after {} events: {} ({})",
                c.path,
                c.at_event,
                c.order.join(" > "),
                c.reason
            )?;
        }
        if report.orderings.len() > 20 {
            writeln!(out, "  ... {} more changes", report.orderings.len() - 20)?;
        }
    }
    Ok(())
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n - 1).collect::<String>())
    }
}
