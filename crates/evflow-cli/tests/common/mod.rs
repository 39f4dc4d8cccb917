//! What the command-line tests share: running the `evflow` binary and
//! scratch files.
#![allow(dead_code)] // each test binary uses some of these

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn evflow(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_evflow"))
        .args(args)
        .output()
        .expect("the evflow binary runs")
}

/// `evflow` with a watchdog: a run still going after `seconds` is killed
/// and the test fails (for checks that a run does not wait for a time-out,
/// whose failure would otherwise hang the test).
pub fn evflow_within(args: &[&str], seconds: u64) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_evflow"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the evflow binary runs");
    let id = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(std::time::Duration::from_secs(seconds)) {
        Ok(out) => out.expect("the evflow binary runs"),
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &id.to_string()]).status();
            panic!("evflow {args:?} still ran after {seconds} s");
        }
    }
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A scratch directory of this test binary.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("evflow-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

/// What `evflow report FILE` prints (it must succeed).
pub fn report_text(file: &Path) -> String {
    let out = evflow(&["report", file.to_str().unwrap()]);
    assert!(out.status.success(), "evflow report: {}", stderr(&out));
    stdout(&out)
}

/// A JSON file the command wrote (a report, a trace).
pub fn read_json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{} was not written: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// A job of `events` events (`in_flight` of them in flight, 2 threads): a
/// producer `clusters` whose other keys (its `time`, `device` table, ...)
/// are `producer`, and an analyzer `ana` of its product on an end path.
pub fn device_job(events: u64, in_flight: u64, producer: &str) -> String {
    format!(
        r#"
[process]
events = {events}
events_in_flight = {in_flight}
threads = 2

[[module]]
label = "clusters"
type = "producer"
{producer}

[[module]]
label = "ana"
type = "analyzer"
consumes = ["clusters"]

[[end_path]]
name = "e"
modules = ["ana"]
"#
    )
}
