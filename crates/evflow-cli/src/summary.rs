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
            let head = format!("  path '{}' after {} events: ", c.path, c.at_event);
            let line = format!("{head}{} ({})", c.order.join(" > "), c.reason);
            if line.chars().count() <= LINE_WIDTH {
                writeln!(out, "{line}")?;
                continue;
            }
            // A long account (a path's final entry names every step and
            // producer): one line per part, long lists elided with a count.
            let order: Vec<&str> = c.order.iter().map(String::as_str).collect();
            writeln!(out, "{}", elide_items(&head, &order, " > "))?;
            for part in split_top(&c.reason, "; ") {
                let items = split_top(part, ", ");
                if items.len() >= LIST_ITEMS {
                    writeln!(out, "{}", elide_items("    ", &items, ", "))?;
                } else {
                    for line in wrap(part, "    ", "      ") {
                        writeln!(out, "{line}")?;
                    }
                }
            }
        }
        if report.orderings.len() > 20 {
            writeln!(out, "  ... {} more changes", report.orderings.len() - 20)?;
        }
    }
    Ok(())
}

/// The longest line the summary prints (in characters).
const LINE_WIDTH: usize = 200;

/// `s` split at each `sep` outside parentheses and brackets.
fn split_top<'a>(s: &'a str, sep: &str) -> Vec<&'a str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, ch) in s.char_indices() {
        match ch {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            _ if depth == 0 && i >= start && s[i..].starts_with(sep) => {
                parts.push(&s[start..i]);
                start = i + sep.len();
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

/// A part of a reason with this many items or more is a list, elided
/// with a count where too long; a shorter one is prose, wrapped.
const LIST_ITEMS: usize = 4;

/// `head` and `items` joined by `sep`, as many items as fit in
/// `LINE_WIDTH` with how many more there are (a single item too long is
/// cut). A last item "… N more" (a list the report elided already) counts
/// as its `N`.
fn elide_items(head: &str, items: &[&str], sep: &str) -> String {
    let full = format!("{head}{}", items.join(sep));
    if full.chars().count() <= LINE_WIDTH {
        return full;
    }
    let elided = items
        .last()
        .and_then(|l| l.strip_prefix("… "))
        .and_then(|l| l.split(' ').next()?.parse::<usize>().ok());
    let (items, beyond) = match elided {
        Some(n) => (&items[..items.len() - 1], n),
        None => (items, 0),
    };
    let mut line = head.to_string();
    for (k, item) in items.iter().enumerate() {
        let sep_k = if k > 0 { sep } else { "" };
        let room = LINE_WIDTH - line.chars().count();
        // The item fits with room left to say how many follow it.
        let tail = format!("{sep}… {} more", items.len() - k - 1 + beyond);
        if format!("{sep_k}{item}").chars().count() + tail.chars().count() > room {
            if k == 0 {
                return truncate(&full, LINE_WIDTH);
            }
            line.push_str(&format!("{sep}… {} more", items.len() - k + beyond));
            return line;
        }
        line.push_str(&format!("{sep_k}{item}"));
    }
    if beyond > 0 {
        line.push_str(&format!("{sep}… {beyond} more"));
    }
    line
}

/// `text` in lines of at most `LINE_WIDTH` characters, broken at spaces:
/// the first after `first`, the others after `rest`.
fn wrap(text: &str, first: &str, rest: &str) -> Vec<String> {
    let mut lines = vec![first.to_string()];
    for word in text.split(' ') {
        let last = lines.last_mut().unwrap();
        if !last.trim().is_empty() && last.chars().count() + 1 + word.chars().count() > LINE_WIDTH {
            lines.push(rest.to_string());
        }
        let last = lines.last_mut().unwrap();
        if !last.trim().is_empty() {
            last.push(' ');
        }
        last.push_str(word);
    }
    lines
        .into_iter()
        .map(|l| truncate(&l, LINE_WIDTH))
        .collect()
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n - 1).collect::<String>())
    }
}
