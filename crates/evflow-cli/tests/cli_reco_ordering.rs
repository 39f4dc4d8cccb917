//! Adaptive ordering on a reconstruction-style graph: every cut of the
//! reorderable path `sel` reads a product of an on-demand reconstruction
//! chain (2.7 ms per event) that the `dqm` analyzer of the end path, with
//! no `select_events`, reads on every event. The chain runs on every event
//! whatever `sel` does, so its cost belongs to no step of the path. Before,
//! the planner took it for "run outside the path on 0.000%" (it never saw
//! an event on which the path did not need it), charged all of it to the
//! path's first step, and the run's summary printed one line of over a
//! thousand characters for the path.

mod common;

use common::*;

const RECO: &str = r#"
[process]
name = "reco-ordering"
events = 300
filter_order = "adaptive"

# --- reconstruction, on demand (sleeps: a busy 2-core machine stays free)

[[module]]
label = "rawToDigi"
type = "producer"
time = 2e-4
work = "sleep"

[[module]]
label = "pixelClusters"
type = "producer"
time = 2e-4
work = "sleep"
consumes = ["rawToDigi"]

[[module]]
label = "hits"
type = "producer"
time = 3e-4
work = "sleep"
consumes = ["pixelClusters"]

[[module]]
label = "tracks"
type = "producer"
time = 1e-3
work = "sleep"
consumes = ["hits"]

[[module]]
label = "beamSpot"
type = "producer"
time = 5e-5
work = "sleep"

[[module]]
label = "vertices"
type = "producer"
time = 2e-4
work = "sleep"
consumes = ["tracks", "beamSpot"]

[[module]]
label = "muons"
type = "producer"
time = 3e-4
work = "sleep"
consumes = ["tracks"]

[[module]]
label = "calo"
type = "producer"
time = 3e-4
work = "sleep"
consumes = ["rawToDigi"]

# --- the selection: cheap cuts on reconstructed objects

[[module]]
label = "nTrk"
type = "filter"
time = 2e-5
consumes = ["tracks"]
pass_fraction = 0.6

[[module]]
label = "goodVtx"
type = "filter"
time = 5e-6
consumes = ["vertices"]
pass_fraction = 0.9

[[module]]
label = "muonID"
type = "filter"
time = 1e-5
consumes = ["muons"]
pass_fraction = 0.4

[[module]]
label = "caloE"
type = "filter"
time = 3e-5
consumes = ["calo"]
pass_fraction = 0.7

# --- every event is monitored; the selected ones are written

[[module]]
label = "dqm"
type = "analyzer"
consumes = ["tracks", "vertices", "muons", "calo"]

[[module]]
label = "writer"
type = "output"
consumes = ["tracks"]
select_events = ["sel"]

[[path]]
name = "sel"
modules = ["nTrk", "goodVtx", "muonID", "caloE"]
reorderable = true

[[end_path]]
name = "out"
modules = ["dqm", "writer"]
"#;

/// "12.34 µs" or "2.553 ms" in seconds.
fn seconds(text: &str) -> f64 {
    let (value, unit) = text.split_once(' ').unwrap();
    let value: f64 = value.parse().unwrap();
    match unit {
        "µs" => value * 1e-6,
        "ms" => value * 1e-3,
        _ => panic!("unit of {text:?}"),
    }
}

/// The reconstruction chain is charged to no step of `sel`: the expected
/// cost per event of its order (from its stop counts) is that of its cuts
/// (at most 65 µs), not 2.7 ms more; the report says that the producers
/// always run outside the path (the first six named, with how many more),
/// with no share measured as 0%; every line of the summary fits in 200
/// characters.
#[test]
fn producers_an_end_path_runs_on_every_event_are_charged_to_no_step() {
    let dir = scratch("reco-ordering");
    let config = write(&dir, "reco.toml", RECO);
    let report = dir.join("r.json");
    let out = evflow(&[
        "run",
        &config,
        "-j",
        "2",
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json = read_json(&report);
    let last = json["orderings"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|o| o["path"] == "sel")
        .unwrap();
    let reason = last["reason"].as_str().unwrap();
    assert!(
        reason.contains(
            "producers always run outside the path (on every event, by an end path without \
             select_events or another path), charged to no step: rawToDigi, pixelClusters, \
             hits, tracks, beamSpot, vertices, … 2 more"
        ) && !reason.contains("run outside the path on"),
        "{reason}"
    );
    let expected = reason.split("expected ").nth(1).unwrap();
    let expected = seconds(expected.split(" per event").next().unwrap());
    assert!(expected < 100e-6, "{expected} s per event: {reason}");
    let text = stdout(&out);
    assert!(text.contains("filter order changes:"), "{text}");
    for line in text.lines() {
        assert!(line.chars().count() <= 200, "{} chars: {line}", line.len());
    }
}
