//! The `evflow run` and `evflow report` commands as a user meets them: exit
//! codes and messages on good and bad input.

mod common;

use common::*;

const FAILING: &str = r#"
[process]
name = "failing"
events = 20

[[module]]
label = "tracks"
type = "producer"
fail_on_events = [7, 13]

[[module]]
label = "sel"
type = "filter"
consumes = ["tracks"]
pass_fraction = 0.5

[[path]]
name = "p"
modules = ["sel"]
"#;

#[test]
fn demo_config_runs_and_writes_report_and_trace() {
    let dir = scratch("demo");
    let report = dir.join("r.json");
    let trace = dir.join("t.json");
    let demo = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/configs/demo.toml"
    );
    let out = evflow(&[
        "run",
        demo,
        "--events",
        "50",
        "--time-scale",
        "0.01",
        "-j",
        "2",
        "--report",
        report.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).starts_with("50 events in"), "{}", stdout(&out));
    let r = read_json(&report);
    for key in [
        "events",
        "wall_s",
        "cpu_s",
        "throughput_ev_s",
        "threads",
        "events_in_flight",
        "peak_events_in_flight",
        "peak_rss_bytes",
        "modules",
        "paths",
        "failed_events",
    ] {
        assert!(r.get(key).is_some(), "report lacks '{key}'");
    }
    assert_eq!(r["events"], 50);
    let m = &r["modules"][0];
    for key in ["label", "kind", "concurrency", "calls", "run_s", "wait_s"] {
        assert!(m.get(key).is_some(), "module entry lacks '{key}'");
    }
    let t = read_json(&trace);
    let slices = t["traceEvents"].as_array().unwrap();
    assert!(
        slices
            .iter()
            .any(|s| s["cat"] == "module" && s["args"]["event"].is_u64())
    );
    assert!(slices.iter().any(|s| s["cat"] == "source"));
    // `evflow report` reads both files.
    let out = evflow(&["report", report.to_str().unwrap()]);
    assert!(
        out.status.success() && stdout(&out).contains("cut-flow of path"),
        "{}",
        stderr(&out)
    );
    let out = evflow(&["report", trace.to_str().unwrap(), "--event", "3"]);
    assert!(
        out.status.success() && stdout(&out).contains("event 3:"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn module_failure_fails_the_job_naming_module_and_event() {
    let dir = scratch("fail");
    let config = write(&dir, "failing.toml", FAILING);
    let report = dir.join("r.json");
    let out = evflow(&[
        "run",
        &config,
        "-j",
        "2",
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("module 'tracks' failed on run 1, lumi 1, event 7"),
        "{err}"
    );
    assert!(err.contains("configured failure on event 7"), "{err}");
    // The report of what ran is still written, complete JSON, and names the
    // event the job failed on.
    let r = read_json(&report);
    assert!(r["events"].as_u64().unwrap() < 20);
    let failed = r["failed_events"].as_array().unwrap();
    assert!(
        failed.iter().any(|f| f["event"] == 7
            && f["module"] == "tracks"
            && f["message"] == "configured failure on event 7"),
        "{failed:?}"
    );
}

#[test]
fn skip_event_policy_lists_the_failed_events() {
    let dir = scratch("skip");
    let config = write(&dir, "failing.toml", FAILING);
    let report = dir.join("r.json");
    let out = evflow(&[
        "run",
        &config,
        "-j",
        "2",
        "--on-error",
        "skip-event",
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let r = read_json(&report);
    assert_eq!(r["events"], 18);
    let failed: Vec<u64> = r["failed_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["event"].as_u64().unwrap())
        .collect();
    assert_eq!(failed, vec![7, 13]);
    assert!(stdout(&out).contains("2 failed events"));
}

#[test]
fn bad_input_gets_a_clear_error() {
    let dir = scratch("bad");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "run".into(),
                dir.join("nope.toml").to_string_lossy().into_owned(),
            ],
            "nope.toml",
        ),
        (
            vec![
                "run".into(),
                write(
                    &dir,
                    "typo.toml",
                    "[[module]]\nlabel = \"a\"\ntype = \"producr\"\n",
                ),
            ],
            "unknown module type 'producr'",
        ),
        (
            vec![
                "run".into(),
                write(
                    &dir,
                    "ok.toml",
                    "[[module]]\nlabel = \"a\"\ntype = \"producer\"\n",
                ),
                "--time-scale=-1".into(),
            ],
            "--time-scale must be a finite number >= 0",
        ),
        (
            vec![
                "run".into(),
                write(
                    &dir,
                    "missing.toml",
                    "[[module]]\nlabel = \"a\"\ntype = \"filter\"\nconsumes = [\"b\"]\n[[path]]\nname = \"p\"\nmodules = [\"a\"]\n",
                ),
            ],
            "module 'a' consumes 'b', which no module produces",
        ),
        (
            vec![
                "run".into(),
                write(
                    &dir,
                    "ok2.toml",
                    "[[module]]\nlabel = \"a\"\ntype = \"producer\"\n",
                ),
                "--threads".into(),
                "0".into(),
            ],
            "--threads must be at least 1",
        ),
        (
            vec![
                "run".into(),
                write(
                    &dir,
                    "ok3.toml",
                    "[[module]]\nlabel = \"a\"\ntype = \"producer\"\n",
                ),
                "--device-streams".into(),
                "0".into(),
            ],
            "--device-streams must be at least 1",
        ),
        (
            vec![
                "run".into(),
                write(
                    &dir,
                    "ok4.toml",
                    "[[module]]\nlabel = \"a\"\ntype = \"producer\"\n",
                ),
                "--executor".into(),
                "sequential".into(),
                "-j".into(),
                "4".into(),
            ],
            "--threads 4 has no effect with --executor sequential, which runs on one thread",
        ),
        (
            vec!["report".into(), write(&dir, "junk.json", "{\"x\": 1}")],
            "neither an evflow report",
        ),
        (
            vec![
                "report".into(),
                write(&dir, "lists.json", "{\"modules\": [], \"paths\": 3}"),
            ],
            "'paths' is not a list: not a report written by evflow",
        ),
    ];
    for (args, expected) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = evflow(&args);
        assert!(!out.status.success(), "{args:?} should fail");
        assert!(
            stderr(&out).contains(expected),
            "{args:?}: expected '{expected}' in: {}",
            stderr(&out)
        );
        assert!(
            !stderr(&out).contains("panicked"),
            "{args:?} panicked: {}",
            stderr(&out)
        );
    }
    // One thread is what the sequential executor runs on: accepted.
    let ok = dir.join("ok4.toml");
    let out = evflow(&[
        "run",
        ok.to_str().unwrap(),
        "--executor",
        "sequential",
        "-j",
        "1",
        "-q",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// A job with no events runs, writes a valid report with empty cut-flows
/// and prints a summary without negative zeros.
#[test]
fn a_job_without_events_reports_zeros() {
    let dir = scratch("zero");
    let config = write(&dir, "zero.toml", FAILING);
    let report = dir.join("r.json");
    let out = evflow(&[
        "run",
        &config,
        "-n",
        "0",
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with("0 events in"), "{text}");
    assert!(
        text.contains("(0 of 2 modules ran, 0.000 s of module time)"),
        "{text}"
    );
    assert!(!text.contains("-0.0"), "{text}");
    let r = read_json(&report);
    assert_eq!(r["events"], 0);
    assert_eq!(r["paths"][0]["visited"], 0);
    assert_eq!(r["module_executions"], 0);
}

/// `evflow report`: an event the trace does not hold fails before anything
/// is printed, naming the file and the events it holds; trace-only options
/// on a report are refused, not ignored, as is a `--profile-csv` that would
/// replace the trace read or cannot be written; the trace of a job without
/// events is read without error.
#[test]
fn report_options_are_checked_against_the_file() {
    let dir = scratch("inspect");
    let config = write(&dir, "j.toml", FAILING);
    let (report, trace) = (dir.join("r.json"), dir.join("t.json"));
    let empty = dir.join("empty.json");
    let (report_s, trace_s) = (report.to_str().unwrap(), trace.to_str().unwrap());
    let missing_dir = dir.join("none").join("p.csv").to_str().unwrap().to_string();
    for (events, t) in [("5", &trace), ("0", &empty)] {
        let out = evflow(&[
            "run",
            &config,
            "-q",
            "-n",
            events,
            "--report",
            report_s,
            "--trace",
            t.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let cases: Vec<(Vec<&str>, Result<&str, String>)> = vec![
        (
            vec!["report", trace_s, "--event", "99"],
            Err(format!(
                "{trace_s}: event 99 has no module slices in the trace (events 1 to 5 have)"
            )),
        ),
        (
            vec!["report", report_s, "--event", "2"],
            Err(format!("{report_s}: --event applies to a trace")),
        ),
        (
            vec!["report", report_s, "--profile-csv", trace_s],
            Err(format!("{report_s}: --profile-csv applies to a trace")),
        ),
        // Refused before anything is read or printed: the trace stays whole
        // (the next case reads it).
        (
            vec!["report", trace_s, "--profile-csv", trace_s],
            Err(format!(
                "--profile-csv {trace_s} is the file read: it would be overwritten"
            )),
        ),
        (
            vec!["report", trace_s, "--profile-csv", &missing_dir],
            Err(format!("--profile-csv {missing_dir}: no directory")),
        ),
        (vec!["report", trace_s, "--event", "2"], Ok("event 2:")),
        (
            vec!["report", empty.to_str().unwrap()],
            Ok("no module ran: no event profile"),
        ),
    ];
    for (args, expected) in cases {
        let out = evflow(&args);
        match expected {
            Ok(text) => {
                assert!(out.status.success(), "{args:?}: {}", stderr(&out));
                assert!(stdout(&out).contains(text), "{args:?}: {}", stdout(&out));
            }
            Err(message) => {
                assert!(!out.status.success(), "{args:?} should fail");
                assert!(
                    stderr(&out).contains(&message),
                    "{args:?}: {}",
                    stderr(&out)
                );
                assert_eq!(stdout(&out), "", "{args:?} printed before failing");
            }
        }
    }
}

/// Thread, core and events-in-flight counts beyond what a configuration file
/// takes are refused by name at once: `-k 100000000` used to allocate the
/// state of every slot (tens of GB) before the first event.
#[test]
fn huge_parallelism_is_refused_before_any_allocation() {
    let dir = scratch("parallel");
    let config = write(
        &dir,
        "ok.toml",
        "[[module]]\nlabel = \"a\"\ntype = \"producer\"\n",
    );
    for (args, expected) in [
        (
            vec!["run", &config, "-n", "5", "-k", "100000000"],
            "--events-in-flight 100000000 is too large (at most 65536)",
        ),
        (
            vec!["run", &config, "-n", "5", "-j", "65537"],
            "--threads 65537 is too large (at most 65536)",
        ),
        (
            vec!["simulate", &config, "-n", "5", "--cores", "100000000"],
            "--cores 100000000 is too large (at most 65536)",
        ),
        (
            vec!["simulate", &config, "-n", "5", "-k", "100000000"],
            "--events-in-flight 100000000 is too large (at most 65536)",
        ),
        (
            vec!["simulate", &config, "-n", "5", "--cores", "0"],
            "--cores must be at least 1",
        ),
    ] {
        let out = evflow(&args);
        assert!(!out.status.success(), "{args:?} should fail");
        assert!(
            stderr(&out).contains(expected),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    let out = evflow(&["run", &config, "-q", "-n", "5", "-j", "2", "-k", "65536"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// `evflow report` gives no cumulative efficiency for a path whose steps the
/// planner reordered (its steps' counts, in written order, can exceed the
/// path's acceptance); a path run as written keeps it.
#[test]
fn report_gives_no_cumulative_efficiency_for_reordered_paths() {
    let dir = scratch("reordered");
    let config = write(
        &dir,
        "cuts.toml",
        r#"
[process]
events = 400
filter_order = "adaptive"

[[module]]
label = "loose"
type = "filter"
time = 2e-6
pass_fraction = 0.9

[[module]]
label = "tight"
type = "filter"
pass_fraction = 0.2

[[path]]
name = "reordered"
modules = ["loose", "tight"]
reorderable = true

[[path]]
name = "written"
modules = ["loose", "tight"]
"#,
    );
    let report = dir.join("r.json");
    let out = evflow(&[
        "run",
        &config,
        "-q",
        "-j",
        "2",
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = report_text(&report);
    let section = |name: &str| -> Vec<String> {
        text.lines()
            .skip_while(|l| !l.starts_with(&format!("cut-flow of path '{name}'")))
            .take(4)
            .map(str::to_string)
            .collect()
    };
    let reordered = section("reordered");
    assert!(reordered[0].contains("(steps reordered"), "{text}");
    for row in &reordered[2..] {
        assert!(row.trim_end().ends_with('-'), "{text}");
    }
    let written = section("written");
    assert!(!written[0].contains("reordered"), "{text}");
    for row in &written[2..] {
        assert!(row.trim_end().ends_with('%'), "{text}");
    }
}

/// A filter or analyzer that no path or end path names never runs, and a
/// path without modules accepts every event: the command says so (an
/// output there is an error; an unused producer is an on-demand one, and
/// says nothing).
#[test]
fn modules_that_never_run_are_named_in_a_warning() {
    let dir = scratch("orphans");
    let config = write(
        &dir,
        "orphans.toml",
        "[process]\nevents = 10\n\
         [[module]]\nlabel = \"unused\"\ntype = \"producer\"\n\
         [[module]]\nlabel = \"f\"\ntype = \"filter\"\n\
         [[module]]\nlabel = \"stray\"\ntype = \"filter\"\n\
         [[module]]\nlabel = \"histos\"\ntype = \"analyzer\"\n\
         [[path]]\nname = \"p\"\nmodules = [\"f\"]\n\
         [[path]]\nname = \"everything\"\nmodules = []\n",
    );
    for command in ["run", "simulate"] {
        let out = evflow(&[command, &config]);
        assert!(out.status.success(), "{}", stderr(&out));
        let warnings: Vec<String> = stderr(&out)
            .lines()
            .filter(|l| l.contains("warning"))
            .map(str::to_string)
            .collect();
        assert_eq!(
            warnings,
            [
                format!(
                    "evflow: warning: {config}: filter 'stray' is on no path or end path: it never runs"
                ),
                format!(
                    "evflow: warning: {config}: analyzer 'histos' is on no path or end path: it never runs"
                ),
                format!(
                    "evflow: warning: {config}: path 'everything' has no modules: it accepts every event"
                ),
            ],
            "{command}"
        );
    }
    // --quiet prints only errors.
    let out = evflow(&["run", &config, "-q"]);
    assert_eq!(stderr(&out), "");
    // An empty file (or every module commented out) runs its events
    // through nothing: said, not silent.
    let empty = write(&dir, "empty.toml", "# [[module]]\n");
    for command in ["run", "simulate"] {
        let out = evflow(&[command, &empty]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!(
                "evflow: warning: {empty}: the configuration has no modules"
            )),
            "{command}: {}",
            stderr(&out)
        );
    }
}

/// Output files that cannot be written are refused before the job runs
/// (a long job must not end without its report), and two options naming
/// the same file are refused instead of one silently replacing the other.
#[test]
fn unwritable_or_clashing_output_files_are_refused_before_the_run() {
    let dir = scratch("outputs");
    let config = write(
        &dir,
        "ok.toml",
        "[[module]]\nlabel = \"a\"\ntype = \"producer\"\n",
    );
    let report = dir.join("r.json");
    let report_s = report.to_str().unwrap();
    let missing = dir.join("no-such-dir").join("t.json");
    let cases: Vec<(Vec<&str>, String)> = vec![
        (
            vec![
                "run",
                &config,
                "--report",
                report_s,
                "--trace",
                missing.to_str().unwrap(),
            ],
            format!("--trace {}: no directory", missing.display()),
        ),
        (
            vec!["run", &config, "--report", dir.to_str().unwrap()],
            format!("--report {}: is a directory", dir.display()),
        ),
        (
            vec!["run", &config, "--report", report_s, "--trace", report_s],
            "--report and --trace name the same file".to_string(),
        ),
        (
            vec!["simulate", &config, "--report", missing.to_str().unwrap()],
            format!("--report {}: no directory", missing.display()),
        ),
        (
            vec!["run", &config, "--trace", &config],
            format!("--trace {config} is the configuration: it would be overwritten"),
        ),
    ];
    for (args, expected) in cases {
        let out = evflow(&args);
        assert!(!out.status.success(), "{args:?} should fail");
        assert!(
            stderr(&out).contains(&expected),
            "{args:?}: {}",
            stderr(&out)
        );
        // Nothing ran, nothing was written, no partial file was left.
        assert!(!report.exists(), "{args:?} wrote the report");
        let leftovers: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".partial"))
            .collect();
        assert!(leftovers.is_empty(), "{args:?} left {leftovers:?}");
        assert!(
            !std::path::Path::new(&format!("{}.json.partial", dir.display())).exists(),
            "{args:?} left a partial file beside the directory"
        );
        assert!(
            std::fs::read_to_string(&config)
                .unwrap()
                .starts_with("[[module]]"),
            "{args:?} overwrote the configuration"
        );
    }
}

/// A report or trace naming the configuration's event table (`[source]
/// file`, relative to the configuration) is refused: it was written over
/// the table, destroying the job's input.
#[test]
fn an_output_file_over_the_event_table_is_refused() {
    let dir = scratch("outputs-table");
    let table = "x\n1\n2\n";
    write(&dir, "events.csv", table);
    let config = write(
        &dir,
        "cuts.toml",
        "[source]\ntype = \"table\"\nfile = \"events.csv\"\n\
         [[module]]\nlabel = \"f\"\ntype = \"filter\"\ncut = \"x > 1\"\n\
         [[path]]\nname = \"p\"\nmodules = [\"f\"]\n",
    );
    let events = dir.join("events.csv");
    let events_s = events.to_str().unwrap();
    for args in [
        vec!["run", &config, "-q", "--report", events_s],
        vec!["run", &config, "-q", "--trace", events_s],
        vec!["simulate", &config, "-q", "--report", events_s],
    ] {
        let out = evflow(&args);
        assert!(!out.status.success(), "{args:?} should fail");
        let expected =
            format!("{events_s} is the event table (source.file): it would be overwritten");
        assert!(
            stderr(&out).contains(&expected),
            "{args:?}: {}",
            stderr(&out)
        );
        assert_eq!(std::fs::read_to_string(&events).unwrap(), table, "{args:?}");
    }
    // Another file still takes the report.
    let report = dir.join("r.json");
    let out = evflow(&["run", &config, "-q", "--report", report.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(read_json(&report)["paths"][0]["passed"], 1);
}

#[test]
fn an_empty_cms_configuration_says_the_file_is_empty() {
    // Empty text is a valid (empty) TOML table: the hint to rename the file
    // .toml was wrong, and "EOF while parsing a value" did not say why.
    let dir = scratch("empty-config");
    for name in ["empty.config", "blank.json"] {
        let path = write(&dir, name, if name == "blank.json" { "\n  \n" } else { "" });
        let out = evflow(&["run", &path, "-q"]);
        assert!(!out.status.success());
        let err = stderr(&out);
        assert!(
            err.contains(&format!("{name}: the file is empty")) && !err.contains(".toml"),
            "{err}"
        );
    }
}

/// `--on-error skip-event` that skipped every event ends in an error (the
/// report is still written): nothing came out of the job.
#[test]
fn a_job_whose_every_event_failed_fails() {
    let dir = scratch("allfail");
    let config = write(
        &dir,
        "allfail.toml",
        "[process]\nevents = 3\n\
         [[module]]\nlabel = \"a\"\ntype = \"producer\"\nfail_on_events = [1, 2, 3]\n\
         [[module]]\nlabel = \"o\"\ntype = \"output\"\nconsumes = [\"a\"]\n\
         [[end_path]]\nname = \"e\"\nmodules = [\"o\"]\n",
    );
    let report = dir.join("r.json");
    let args = [
        "run",
        config.as_str(),
        "-q",
        "--on-error",
        "skip-event",
        "--report",
        report.to_str().unwrap(),
    ];
    let out = evflow(&args);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "every event failed (3 events, none written; the first: run 1 lumi 1 event 1: module 'a'"
        ),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        read_json(&report)["failed_events"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    // One event that passes: the job succeeds.
    let some = write(
        &dir,
        "some.toml",
        &std::fs::read_to_string(&config)
            .unwrap()
            .replace("[1, 2, 3]", "[1, 2]"),
    );
    let out = evflow(&["run", &some, "-q", "--on-error", "skip-event"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// `--filter-order` decides for every reorderable path, also one whose
/// configuration names its own `filter_order` (which silently won before),
/// and says which paths it overrode.
#[test]
fn the_command_lines_filter_order_overrides_a_paths_own() {
    let dir = scratch("order-override");
    let config = write(
        &dir,
        "cuts.toml",
        r#"
[process]
events = 2000

[[module]]
label = "loose"
type = "filter"
time = 2e-5
pass_fraction = 0.9

[[module]]
label = "tight"
type = "filter"
pass_fraction = 0.2

[[path]]
name = "p"
modules = ["loose", "tight"]
reorderable = true
filter_order = "adaptive"
"#,
    );
    let changes = |args: &[&str]| {
        let report = dir.join("r.json");
        let mut all = vec!["run", config.as_str(), "-q", "-j", "2", "--report"];
        all.push(report.to_str().unwrap());
        all.extend_from_slice(args);
        let out = evflow(&all);
        assert!(out.status.success(), "{}", stderr(&out));
        let json = read_json(&report);
        // Orders in use other than the written one.
        let written = serde_json::json!(["loose", "tight"]);
        let n = json["orderings"]
            .as_array()
            .map_or(0, |a| a.iter().filter(|o| o["order"] != written).count());
        (n, stderr(&out))
    };
    let (adaptive, _) = changes(&[]);
    assert!(adaptive > 0, "the path's own adaptive order reorders");
    let (fixed, err) = changes(&["--filter-order", "fixed"]);
    assert_eq!(fixed, 0, "--filter-order fixed must keep the written order");
    assert!(
        err.contains("--filter-order overrides the filter_order of path(s) p"),
        "{err}"
    );
}

/// The cut-flow counts the steps that decided each event: every rejected
/// event was rejected by exactly one step, also under adaptive ordering,
/// whose sampled events go on measuring steps after the rejection (those
/// measurements were counted before: a step was "visited" by more events
/// than reached it on the path).
#[test]
fn the_cut_flow_counts_only_the_steps_that_decided_the_event() {
    let dir = scratch("decisive");
    let config = write(
        &dir,
        "cuts.toml",
        r#"
[process]
events = 3000

[[module]]
label = "slow"
type = "filter"
time = 2e-5
pass_fraction = 0.9

[[module]]
label = "mid"
type = "filter"
time = 5e-6
pass_fraction = 0.7

[[module]]
label = "tight"
type = "filter"
pass_fraction = 0.2

[[path]]
name = "p"
modules = ["slow", "mid", "tight"]
reorderable = true
"#,
    );
    for order in ["fixed", "adaptive"] {
        let report = dir.join(format!("{order}.json"));
        let out = evflow(&[
            "run",
            &config,
            "-q",
            "-j",
            "2",
            "--filter-order",
            order,
            "--report",
            report.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let json = read_json(&report);
        let path = &json["paths"][0];
        let rejected = path["visited"].as_u64().unwrap() - path["passed"].as_u64().unwrap();
        let rejections: u64 = path["filters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["visited"].as_u64().unwrap() - f["passed"].as_u64().unwrap())
            .sum();
        assert_eq!(rejections, rejected, "{order}: {path}");
    }
}

/// More threads than a process starts reliably is refused before the job
/// (32 000 aborted the process: a thread's signal stack could not be mapped).
#[test]
fn too_many_threads_are_refused_before_the_job() {
    let dir = scratch("threads");
    let config = write(
        &dir,
        "one.toml",
        "[process]\nevents = 5\n\n[[module]]\nlabel = \"p\"\ntype = \"producer\"\n",
    );
    let out = evflow(&["run", &config, "-q", "--threads", "5000"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("at most 4096"), "{}", stderr(&out));
}

/// `--help` gives the memory a trace takes per module execution as the
/// README does (it said 1 kB, the README 300 bytes), and the figure holds:
/// tracing 150 000 executions grows the peak resident memory by about
/// that much each (107 bytes measured: the slices once, with the reads and
/// transitions; 214 while the report copied them into one list; "about"
/// allows 25% more, as the trace's buffers grow in steps).
#[test]
fn the_memory_a_trace_takes_is_what_the_help_says() {
    let readme = include_str!("../../../README.md").replace('\n', " ");
    let figure = "about 110 bytes each at the peak";
    assert!(
        readme.contains(figure),
        "the README no longer says {figure:?}"
    );
    let help = stdout(&evflow(&["run", "--help"])).replace('\n', " ");
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        help.contains(figure),
        "`evflow run --help` does not say {figure:?}"
    );

    let dir = scratch("trace-memory");
    let config = write(
        &dir,
        "job.toml",
        "[process]\nevents = 50000\n\
         [[module]]\nlabel = \"hits\"\ntype = \"producer\"\n\
         [[module]]\nlabel = \"tracks\"\ntype = \"producer\"\nconsumes = [\"hits\"]\n\
         [[module]]\nlabel = \"sel\"\ntype = \"filter\"\nconsumes = [\"tracks\"]\n\
         [[path]]\nname = \"p\"\nmodules = [\"sel\"]\n",
    );
    let peak = |trace: bool| {
        let report = dir.join(format!("r{trace}.json"));
        let trace_file = dir.join("t.json");
        let mut args = vec![
            "run".to_string(),
            config.clone(),
            "-j".into(),
            "1".into(),
            "-q".into(),
            "--report".into(),
            report.to_str().unwrap().into(),
        ];
        if trace {
            args.extend(["--trace".into(), trace_file.to_str().unwrap().into()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = evflow(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        let r = read_json(&report);
        assert_eq!(r["module_executions"], 150_000);
        r["peak_rss_bytes"].as_f64().unwrap()
    };
    let per_execution = (peak(true) - peak(false)) / 150_000.0;
    assert!(
        per_execution < 1.25 * 110.0,
        "a traced execution took {per_execution:.0} bytes at the peak"
    );
}
