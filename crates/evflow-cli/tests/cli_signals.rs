//! Signals and pipes: a first Ctrl-C stops gracefully, a second ends the
//! run, a closed pipe ends the command quietly.

mod common;

use common::*;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// The CLI's window in which repeated signals count as one request.
const DUPLICATE_WINDOW: Duration = Duration::from_millis(200);

/// A job that runs until stopped: `events` events of `seconds` of sleep.
fn endless(seconds: f64) -> String {
    format!(
        r#"
[process]
name = "endless"
events = 1000000
work = "sleep"

[source]
events_per_lumi = 7

[[module]]
label = "a"
type = "producer"
time = {seconds}

[[module]]
label = "sel"
type = "filter"
consumes = ["a"]
pass_fraction = 0.5

[[module]]
label = "count"
type = "analyzer"
consumes = ["a"]

[[path]]
name = "p"
modules = ["sel"]

[[end_path]]
name = "e"
modules = ["count"]
"#
    )
}

/// A line of /proc/PID/status.
fn proc_status(pid: u32, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .map(|v| v.trim().to_string())
}

/// Waits until `evflow run` caught SIGINT and SIGTERM (handlers installed)
/// and its worker pool is up (the job is running).
fn wait_until_running(pid: u32, threads: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let caught = proc_status(pid, "SigCgt:")
            .and_then(|m| u64::from_str_radix(&m, 16).ok())
            .unwrap_or(0);
        let running = proc_status(pid, "Threads:")
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or(0);
        // Bits of SIGINT (2) and SIGTERM (15).
        if caught & (1 << 1) != 0 && caught & (1 << 14) != 0 && running > threads {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "evflow run never started"
        );
        std::thread::yield_now();
    }
}

/// Waits until a worker thread of `pid` sleeps inside a module (the sleep
/// work of the synthetic modules): an event is then in flight for sure, so a
/// graceful stop cannot finish at once for want of events.
fn wait_until_an_event_runs(pid: u32) {
    // x86-64 and aarch64 numbers of nanosleep / clock_nanosleep.
    const SLEEPS: [&str; 3] = ["35", "230", "115"];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let sleeping = std::fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten()
            .flatten()
            .filter(|task| {
                std::fs::read_to_string(task.path().join("comm"))
                    .is_ok_and(|c| c.starts_with("evflow-worker"))
            })
            .any(|task| {
                std::fs::read_to_string(task.path().join("syscall"))
                    .is_ok_and(|s| SLEEPS.contains(&s.split_whitespace().next().unwrap_or("")))
            });
        if sleeping {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no event of evflow run ever started"
        );
        std::thread::yield_now();
    }
}

/// Waits until no thread of `pid` has `signal` (its number) pending: the
/// kernel merges a second standard signal sent while the first is still
/// pending, so the second must wait for the first to be delivered.
fn wait_until_delivered(pid: u32, signal: u32) {
    let bit = 1u64 << (signal - 1);
    let pending = |path: String, key: &str| {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix(key))
                    .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            })
            .unwrap_or(0)
            & bit
            != 0
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let shared = pending(format!("/proc/{pid}/status"), "ShdPnd:");
        let per_thread = std::fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|task| pending(task.path().join("status").display().to_string(), "SigPnd:"));
        if !shared && !per_thread {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "signal {signal} never delivered"
        );
        std::thread::yield_now();
    }
}

fn send(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
}

fn spawn_run(config: &str, report: &Path) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_evflow"))
        .args(["run", config, "-j", "2", "-k", "3", "--quiet", "--report"])
        .arg(report)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the evflow binary runs")
}

#[test]
fn first_signal_stops_gracefully_with_a_complete_report() {
    let dir = scratch("sigint");
    let config = write(&dir, "endless.toml", &endless(0.001));
    let report = dir.join("r.json");
    let child = spawn_run(&config, &report);
    wait_until_running(child.id(), 2);
    send(child.id(), "-INT");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(stderr(&out).contains("interrupted"), "{}", stderr(&out));
    let doc = read_json(&report);
    assert_eq!(doc["interrupted"], true);
    let events = doc["events"].as_u64().unwrap();
    assert!(events < 1_000_000, "{events}");
    // Every event that counts ran completely: no half-processed event.
    for m in doc["modules"].as_array().unwrap() {
        assert_eq!(m["calls"].as_u64(), Some(events), "{m}");
        assert_eq!(m["failures"].as_u64(), Some(0), "{m}");
    }
    assert_eq!(doc["paths"][0]["visited"].as_u64(), Some(events));
    // Read back, the report says it covers a part of the job.
    let text = report_text(&report);
    assert!(
        text.contains(&format!(
            "interrupted: a signal stopped the job early; the figures cover the {events} events done"
        )),
        "{text}"
    );
}

#[test]
fn second_signal_ends_the_run_at_once() {
    let dir = scratch("sigterm");
    // In-flight events take 30 s each: a graceful stop would take that long.
    let config = write(&dir, "slow.toml", &endless(30.0));
    let report = dir.join("r.json");
    let child = spawn_run(&config, &report);
    wait_until_running(child.id(), 2);
    wait_until_an_event_runs(child.id());
    let started = std::time::Instant::now();
    send(child.id(), "-TERM");
    wait_until_delivered(child.id(), 15);
    // A second request, not the first one delivered twice: later than the
    // window in which repeats count as one (five times it, for a loaded
    // machine's scheduling delays).
    std::thread::sleep(5 * DUPLICATE_WINDOW);
    send(child.id(), "-TERM");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(134), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("aborted by a second signal"),
        "{}",
        stderr(&out)
    );
    assert!(started.elapsed().as_secs() < 20, "did not abort at once");
    assert!(!report.exists(), "an aborted run writes no report");
}

/// `timeout -s INT` signals the child and then its process group: one
/// request delivered twice within moments stops the job gracefully, as one
/// signal does.
#[test]
fn a_signal_delivered_twice_at_once_is_one_request() {
    let dir = scratch("sigint-twice");
    let config = write(&dir, "endless.toml", &endless(0.001));
    let report = dir.join("r.json");
    let child = spawn_run(&config, &report);
    wait_until_running(child.id(), 2);
    send(child.id(), "-INT");
    wait_until_delivered(child.id(), 2);
    send(child.id(), "-INT");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let doc = read_json(&report);
    assert_eq!(doc["interrupted"], true);
}

/// `evflow simulate ... | head -1`: the command ends when the reader has
/// closed the pipe, without a panic message.
#[cfg(unix)]
#[test]
fn a_closed_pipe_ends_the_command_quietly() {
    use std::process::Stdio;

    let config = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/configs/demo.toml"
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_evflow"))
        .args(["simulate", config, "--cores", "4"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the evflow binary runs");
    // The reader is gone before the command prints its first line (it reads
    // and simulates the job first).
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = stderr(&out);
    assert!(!err.contains("panicked"), "{err}");
    assert_ne!(out.status.code(), Some(101), "{err}");
}

/// A job whose first `fast` events take no time in any of `modules`
/// producers (a trace of many slices) and whose later events sleep 2 s in
/// the first producer (a slow drain after a graceful stop).
fn fast_then_slow(fast: usize, modules: usize) -> String {
    let times = format!("[{}2.0]", "0.0, ".repeat(fast));
    let mut text = format!(
        "[process]\nname = \"fast-then-slow\"\nevents = 1000000\nwork = \"sleep\"\n\n\
         [[module]]\nlabel = \"m0\"\ntype = \"producer\"\ntimes = {times}\n"
    );
    for i in 1..modules {
        text += &format!(
            "\n[[module]]\nlabel = \"m{i}\"\ntype = \"producer\"\nconsumes = [\"m{}\"]\n",
            i - 1
        );
    }
    text += &format!(
        "\n[[module]]\nlabel = \"use\"\ntype = \"analyzer\"\nconsumes = [\"m{}\"]\n\n\
         [[end_path]]\nname = \"e\"\nmodules = [\"use\"]\n",
        modules - 1
    );
    text
}

/// A second signal while the trace is being written ends the process at
/// once: the trace is neither completed under its name nor left half
/// written beside it; the report already written stays complete.
#[test]
fn second_signal_while_the_trace_is_written_leaves_no_file_behind() {
    let dir = scratch("sigint-writing");
    let config = write(&dir, "job.toml", &fast_then_slow(3000, 40));
    let report = dir.join("r.json");
    let trace = dir.join("t.json");
    let partial = dir.join("t.json.partial");
    let child = Command::new(env!("CARGO_BIN_EXE_evflow"))
        .args(["run", &config, "-j", "2", "-k", "2", "--quiet", "--report"])
        .arg(&report)
        .arg("--trace")
        .arg(&trace)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the evflow binary runs");
    wait_until_running(child.id(), 2);
    // The fast events are done and a slow one has just started: the graceful
    // stop takes about 2 s, longer than the window of repeated signals.
    wait_until_an_event_runs(child.id());
    send(child.id(), "-INT");
    let first = std::time::Instant::now();
    let deadline = first + Duration::from_secs(60);
    while !partial.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the trace was never written"
        );
        std::thread::yield_now();
    }
    assert!(
        first.elapsed() > 2 * DUPLICATE_WINDOW,
        "the graceful stop was too quick for a second request"
    );
    send(child.id(), "-INT");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(134), "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("interrupted: stopped reading"),
        "the run went on after the abort: {}",
        stderr(&out)
    );
    assert!(!partial.exists(), "a half-written trace was left behind");
    assert!(!trace.exists(), "the trace was written after the abort");
    assert_eq!(read_json(&report)["interrupted"], true);
}

/// `evflow simulate` of a long job stops on a first signal as a run does:
/// the events simulated so far are reported, marked interrupted, and the
/// exit status says so (before, it ran the whole job and said nothing).
#[test]
fn a_signal_stops_a_simulation_gracefully() {
    let dir = scratch("sigint-simulate");
    let config = write(&dir, "endless.toml", &endless(0.001));
    let report = dir.join("s.json");
    let child = Command::new(env!("CARGO_BIN_EXE_evflow"))
        .args(["simulate", &config, "--cores", "4", "--quiet", "--report"])
        .arg(&report)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the evflow binary runs");
    // The handlers are installed (and their thread started) just before
    // the simulation starts.
    wait_until_running(child.id(), 1);
    send(child.id(), "-INT");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(stderr(&out).contains("interrupted"), "{}", stderr(&out));
    let doc = &read_json(&report)["report"];
    assert_eq!(doc["interrupted"], true);
    let events = doc["events"].as_u64().unwrap();
    assert!(events < 1_000_000, "{events}");
    // Every event counted was simulated through the whole graph.
    for m in doc["modules"].as_array().unwrap() {
        assert_eq!(m["calls"].as_u64(), Some(events), "{m}");
    }
}
