//! `--events-per-lumi N` with a source's own run and block numbers: the
//! run and luminosity-block transitions of a job, counted from its trace,
//! and the block each event is in.

mod common;

use std::collections::BTreeMap;

use common::*;

/// 12 events, 2 per block, 2 blocks per run from run 5; an analyzer sees
/// every event.
const RUNS: &str = r#"
[process]
events = 12

[source]
events_per_lumi = 2
lumis_per_run = 2
first_run = 5

[[module]]
label = "ana"
type = "analyzer"

[[end_path]]
name = "out"
modules = ["ana"]
"#;

/// What a traced job saw: the blocks of each run (from the `beginLumi`
/// transitions), how many `beginRun` and `endLumi` transitions ran, and
/// the (run, block) of each event the analyzer read, by event number.
struct Seen {
    blocks: BTreeMap<u64, Vec<u64>>,
    begin_runs: usize,
    end_lumis: usize,
    events: BTreeMap<u64, (u64, u64)>,
}

fn run_traced(dir: &std::path::Path, config: &str, extra: &[&str]) -> Seen {
    let trace = dir.join("t.json");
    let mut args = vec!["run", config, "-j", "2", "--quiet", "--time-scale", "0"];
    args.extend(["--trace", trace.to_str().unwrap()]);
    args.extend(extra);
    let out = evflow(&args);
    assert!(out.status.success(), "{extra:?}: {}", stderr(&out));
    let json = read_json(&trace);
    let mut seen = Seen {
        blocks: BTreeMap::new(),
        begin_runs: 0,
        end_lumis: 0,
        events: BTreeMap::new(),
    };
    for e in json["traceEvents"].as_array().unwrap() {
        let name = e["name"].as_str().unwrap_or_default();
        match e["cat"].as_str() {
            Some("transition") => {
                if let Some(id) = name.strip_prefix("beginLumi ") {
                    let (run, lumi) = id.split_once(':').unwrap();
                    let block = lumi.parse().unwrap();
                    seen.blocks
                        .entry(run.parse().unwrap())
                        .or_default()
                        .push(block);
                }
                seen.begin_runs += usize::from(name.starts_with("beginRun "));
                seen.end_lumis += usize::from(name.starts_with("endLumi "));
            }
            Some("module") => {
                let a = &e["args"];
                let id = (a["run"].as_u64().unwrap(), a["lumi"].as_u64().unwrap());
                seen.events.insert(a["event"].as_u64().unwrap(), id);
            }
            _ => {}
        }
    }
    for blocks in seen.blocks.values_mut() {
        blocks.sort_unstable();
    }
    seen
}

/// The (run, block) of events 1..=events as CMSSW's EmptySource numbers
/// them: `per_lumi` events per block, `lumis_per_run` blocks per run.
fn numbered(events: u64, per_lumi: u64, lumis_per_run: u64, first_run: u64) -> Vec<(u64, u64)> {
    (0..events)
        .map(|i| {
            let block = i / per_lumi;
            (first_run + block / lumis_per_run, block % lumis_per_run + 1)
        })
        .collect()
}

#[test]
fn events_per_lumi_keeps_the_blocks_per_run_of_the_source() {
    let dir = scratch("lumis");
    let config = write(&dir, "runs.toml", RUNS);
    for (option, per_lumi) in [(None, 2), (Some("1"), 1), (Some("5"), 5), (Some("12"), 12)] {
        let extra: Vec<&str> = option
            .map(|n| vec!["--events-per-lumi", n])
            .unwrap_or_default();
        let seen = run_traced(&dir, &config, &extra);
        let expected = numbered(12, per_lumi, 2, 5);
        let got: Vec<(u64, u64)> = seen.events.values().copied().collect();
        assert_eq!(got, expected, "{option:?}: the block of each event");
        // Every run holds at most 2 blocks, numbered from 1: the source's
        // lumis_per_run applies to blocks of N events.
        let mut blocks: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        for &(run, lumi) in &expected {
            let list = blocks.entry(run).or_default();
            if list.last() != Some(&lumi) {
                list.push(lumi);
            }
        }
        assert_eq!(seen.blocks, blocks, "{option:?}: the beginLumi transitions");
        assert_eq!(seen.begin_runs, blocks.len(), "{option:?}: beginRun");
        let lumis: usize = blocks.values().map(Vec::len).sum();
        assert_eq!(seen.end_lumis, lumis, "{option:?}: endLumi");
    }
    // Blocks of one event: 6 runs (5 to 10) of 2 blocks, where the old
    // regrouping kept the file's 3 runs and gave each 4 blocks.
    let seen = run_traced(&dir, &config, &["--events-per-lumi", "1"]);
    assert_eq!(seen.begin_runs, 6);
    assert!(
        seen.blocks.values().all(|b| b == &[1, 2]),
        "{:?}",
        seen.blocks
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn events_per_lumi_applies_without_a_source_table_and_to_cms_configurations() {
    let dir = scratch("lumis-plain");
    // No [source]: one run, from 1, in blocks of N.
    let plain = RUNS.replace(
        "[source]\nevents_per_lumi = 2\nlumis_per_run = 2\nfirst_run = 5\n",
        "",
    );
    let config = write(&dir, "plain.toml", &plain);
    let seen = run_traced(&dir, &config, &["--events-per-lumi", "5"]);
    let got: Vec<(u64, u64)> = seen.events.values().copied().collect();
    assert_eq!(got, numbered(12, 5, u64::MAX, 1));
    assert_eq!((seen.begin_runs, seen.end_lumis), (1, 3));
    // A CMS configuration (one run of one block) is cut into blocks too.
    let cms = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/data/cms-reco/reco_minbias_busywait.config"
    );
    if std::path::Path::new(cms).exists() {
        let seen = run_traced(&dir, cms, &["--events", "10", "--events-per-lumi", "4"]);
        assert_eq!(seen.blocks, BTreeMap::from([(1, vec![1, 2, 3])]));
        assert_eq!((seen.begin_runs, seen.end_lumis), (1, 3));
    } else {
        eprintln!("skipped the CMS configuration: {cms} is absent (../shared)");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn events_per_lumi_beyond_the_largest_run_number_is_refused_before_the_job() {
    let dir = scratch("lumis-overflow");
    let config = write(
        &dir,
        "last.toml",
        &RUNS.replace("first_run = 5", "first_run = 4294967294"),
    );
    // Blocks of 2 end in the largest run, 4294967295 (events 5 to 8);
    // blocks of 1 would need run 4294967296 from event 5 on: refused
    // before any event is read, naming the first event out of range.
    let out = evflow(&["run", &config, "--events", "8", "--quiet"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = evflow(&["run", &config, "--events", "8", "--events-per-lumi", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("last.toml: source: event 5 would be in run 4294967296, luminosity block 1"),
        "{err}"
    );
    let out = evflow(&["run", &config, "--events-per-lumi", "0"]);
    assert!(stderr(&out).contains("--events-per-lumi must be at least 1"));
    std::fs::remove_dir_all(&dir).ok();
}
