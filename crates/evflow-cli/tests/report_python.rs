//! `evflow report` on a report written by the Python face (`evflow run
//! analysis.py --report`, `Result.save`): its `devices` section is a map,
//! its engine events are batches, and its entries name a filter's path.
//! The fixtures follow the report's schema in docs/python.md; the Python
//! tests (tests/python/test_report_read_by_cli.py) run a real analysis and
//! hand its report to this command too.

mod common;

use common::*;
use serde_json::{Value, json};

/// One device module of a single-process run, as `_device_runner` writes it.
fn device_module(kind: &str, host: u64, device: u64, launches: u64) -> Value {
    json!({
        "kind": kind, "batches": 10, "host_events": host, "device_events": device,
        "launches": launches, "bytes_in": 8 * device, "bytes_out": 8 * device,
        "host_s": 0.01, "device_s": 0.25, "transfer_s": 0.05, "kernel_s": 0.125,
        "failed_launches": 1, "split_mode": "adaptive", "device_fraction": 0.75,
        "kept_fraction": 0.5,
        "split_history": [
            {"t_s": 0.0, "device_fraction": 0.1, "host_rate": 0.0, "device_rate": 0.0, "throughput": 0.0},
            {"t_s": 0.2, "device_fraction": 0.5, "host_rate": 1e5, "device_rate": 1e5, "throughput": 2e5}
        ]
    })
}

/// A Python analysis's report: every section the Python guide lists.
fn python_report(devices: Value) -> Value {
    json!({
        "process": "demo", "executor": "threaded", "events": 10, "interrupted": false,
        "wall_s": 0.5, "cpu_s": 0.9, "throughput_ev_s": 20.0, "steady_throughput_ev_s": 0.0,
        "threads": 2, "events_in_flight": 4, "peak_events_in_flight": 4,
        "concurrent_lumis": 2, "peak_concurrent_lumis": 1, "peak_rss_bytes": 1_000_000,
        "modules": [
            {"label": "twice", "kind": "producer", "concurrency": "shared", "calls": 10,
             "run_s": 0.2, "wait_s": 0.0, "queue_s": 0.0, "failures": 0},
            {"label": "njet", "kind": "filter", "concurrency": "shared", "calls": 20,
             "run_s": 0.1, "wait_s": 0.0, "queue_s": 0.01, "failures": 1,
             "paths": {
                 "sel": {"calls": 10, "run_s": 0.06, "wait_s": 0.0, "queue_s": 0.0, "failures": 1},
                 "ctl": {"calls": 10, "run_s": 0.04, "wait_s": 0.0, "queue_s": 0.01, "failures": 0}
             }}
        ],
        "paths": [
            {"name": "sel", "visited": 10, "passed": 9,
             "filters": [{"label": "njet", "visited": 10, "passed": 9}]},
            {"name": "ctl", "visited": 10, "passed": 10,
             "filters": [{"label": "njet", "visited": 10, "passed": 10}]}
        ],
        "failed_events": [
            {"run": 1, "lumi": 1, "event": 4, "module": "njet", "path": "sel",
             "message": "batch 3 (synthetic events 6000-7999): ValueError: bad batch"}
        ],
        "stalls": [
            {"module": "njet", "path": "ctl", "run": 1, "lumi": 1, "event": 2,
             "waited_s": 0.01, "reason": "exclusive resource x"}
        ],
        "orderings": [
            {"path": "sel", "at_event": 10, "order": ["njet"], "reason": "in use at the end"},
            // A distributed run's entry of a chunk whose change is no map.
            {"change": "kept", "chunk": 1}
        ],
        "skipped_files": [
            {"file": "bad.root", "error": "cannot open 'bad.root': not a ROOT file"},
            {"file": "cut.parquet", "error": "row group 2 is corrupt", "entries": [100, 200]}
        ],
        "module_executions": 30, "wall_s_python": 0.55,
        "batches": 10, "events_processed": 20000,
        "devices": devices
    })
}

fn report_of(name: &str, doc: &Value) -> std::process::Output {
    let file = scratch("python").join(name);
    std::fs::write(&file, doc.to_string()).unwrap();
    evflow(&["report", file.to_str().unwrap()])
}

/// A single-process report: the devices map reads and is printed a line
/// per module, as the run's summary does; every other section reads.
#[test]
fn a_python_analysis_report_reads_with_its_devices() {
    let doc = python_report(json!({
        "device": "emulated", "notice": null,
        "modules": {"twice": device_module("producer", 5000, 15000, 10)}
    }));
    let out = report_of("single.json", &doc);
    let text = stdout(&out);
    assert!(out.status.success(), "{}\n{text}", stderr(&out));
    for line in [
        // The engine's events are batches: the events are the batches' own.
        "20000 events in 10 batches in 0.500 s: 40000.0 events/s (2 threads, 4 batches in flight, executor threaded)",
        "1 batch(es) failed and were skipped (listed at the end)",
        "cut-flow of path 'sel': 9 of 10 batches accepted",
        "failed: run 1 lumi 1 event 4: module 'njet' on path 'sel': batch 3",
        "module 'njet' on path 'ctl' on run 1 lumi 1 event 2 waited for its exclusive resource x",
        "2 input file(s) left out (skip_bad_files):",
        "  bad.root: cannot open 'bad.root': not a ROOT file",
        "device module twice (producer) on emulated: 5000 host + 15000 device events in 10 batches, \
         10 launches (1500.0 events/launch), 0.1 MB in, 0.1 MB out, transfers 0.050 s, \
         kernels 0.125 s, device busy 0.250 s, split adaptive (last 75% device, kept 50%), \
         1 failed launches",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
    // The module of several paths is one row, its calls summed.
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("njet") && l.contains(" 20 ")),
        "{text}"
    );
}

/// A distributed run's devices section (counts summed over chunks, each
/// chunk's last split) and a host-only run's (no device, a notice) read
/// too; a `devices` of another type is refused before anything is printed.
#[test]
fn distributed_and_host_only_python_reports_read() {
    let mut merged = device_module("filter", 300, 100, 4);
    let m = merged.as_object_mut().unwrap();
    for field in ["kept_fraction", "split_history"] {
        m.remove(field);
    }
    m.insert("device_fraction".into(), json!(0.25));
    m.insert("chunk_fractions".into(), json!([0.1, 0.4, null]));
    let doc = python_report(json!({
        "device": "cuda:0", "notice": null, "modules": {"njet": merged}
    }));
    let out = report_of("distributed.json", &doc);
    let text = stdout(&out);
    assert!(out.status.success(), "{}\n{text}", stderr(&out));
    assert!(
        text.contains(
            "device module njet (filter) on cuda:0: 300 host + 100 device events in 10 batches"
        ) && text.contains(
            "split adaptive (25% of the events on the device; last split per chunk 10%, 40%, -)"
        ),
        "{text}"
    );

    let notice = "evflow: no device (CuPy is not installed): device modules run on the host";
    let doc = python_report(json!({"device": null, "notice": notice, "modules": {}}));
    let out = report_of("host.json", &doc);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains(notice), "{}", stdout(&out));
    assert!(
        !stdout(&out)
            .lines()
            .any(|l| l.starts_with("device module ")),
        "{}",
        stdout(&out)
    );

    let out = report_of("bad.json", &python_report(json!(3)));
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("'devices' is neither a list (evflow run) nor a map"),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
    // A module entry of the wrong shape is named.
    let doc = python_report(json!({
        "device": "emulated", "modules": {"twice": {"host_events": "many"}}
    }));
    let out = report_of("badmodule.json", &doc);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("badmodule.json: devices: module 'twice': "),
        "{}",
        stderr(&out)
    );
}
