//! The `evflow` command as a user meets it: exit codes and messages on good
//! and bad input.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn evflow(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_evflow"))
        .args(args)
        .output()
        .expect("the evflow binary runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A scratch directory of this test binary.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("evflow-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

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
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
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
    let t: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
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
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
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
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
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
            vec!["report".into(), write(&dir, "junk.json", "{\"x\": 1}")],
            "neither an evflow report",
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
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(r["events"], 0);
    assert_eq!(r["paths"][0]["visited"], 0);
    assert_eq!(r["module_executions"], 0);
}

/// `evflow report`: an event the trace does not hold fails before anything
/// is printed, naming the file and the events it holds; trace-only options
/// on a report are refused, not ignored; the trace of a job without events
/// is read without error.
#[test]
fn report_options_are_checked_against_the_file() {
    let dir = scratch("inspect");
    let config = write(&dir, "j.toml", FAILING);
    let (report, trace) = (dir.join("r.json"), dir.join("t.json"));
    let empty = dir.join("empty.json");
    let (report_s, trace_s) = (report.to_str().unwrap(), trace.to_str().unwrap());
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
    let out = evflow(&["report", report.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
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

/// A filter or analyzer that no path or end path names never runs: the
/// command says so (an output there is an error; an unused producer is an
/// on-demand one, and says nothing).
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
         [[path]]\nname = \"p\"\nmodules = [\"f\"]\n",
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
            ],
            "{command}"
        );
    }
    // --quiet prints only errors.
    let out = evflow(&["run", &config, "-q"]);
    assert_eq!(stderr(&out), "");
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

#[test]
fn simulate_predicts_and_reports_bounds() {
    let demo = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/configs/demo.toml"
    );
    let out = evflow(&[
        "simulate", demo, "--cores", "8", "-k", "8", "--events", "200",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with("predicted: "), "{text}");
    assert!(text.contains("events in flight / crit.path"), "{text}");
    assert!(text.contains("module 'rawToDigi' (serial)"), "{text}");
    // `evflow report` reads the report `simulate --report` writes.
    let report = scratch("simreport").join("s.json");
    let out = evflow(&[
        "simulate",
        demo,
        "--cores",
        "4",
        "-n",
        "100",
        "-q",
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = evflow(&["report", report.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with("simulation on 4 cores ("), "{text}");
    assert!(text.contains("100 events in "), "{text}");
    assert!(text.contains("cut-flow of path"), "{text}");
}

/// `evflow simulate` refuses `-n 0` and out-of-range overheads by name,
/// and prints no infinite bounds: a file without events says there is no
/// prediction, events that take no time have no bound.
#[test]
fn simulate_refuses_what_it_cannot_predict() {
    let demo = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/configs/demo.toml"
    );
    for (args, expected) in [
        (
            vec!["-n", "0"],
            "--events must be at least 1: a simulation of no events predicts nothing",
        ),
        (
            vec!["--overhead-ns", "1e300"],
            "--overhead-ns must be a number from 0 to 1e9 (1 s per module execution), not 1e300",
        ),
        (vec!["--overhead-ns", "inf"], "--overhead-ns must be"),
        (vec!["--overhead-ns", "2e9"], "--overhead-ns must be"),
    ] {
        let mut all = vec!["simulate", demo];
        all.extend(&args);
        let out = evflow(&all);
        assert!(!out.status.success(), "{args:?} should fail");
        assert!(
            stderr(&out).contains(expected),
            "{args:?}: {}",
            stderr(&out)
        );
        assert!(stdout(&out).is_empty(), "{args:?}: {}", stdout(&out));
    }
    let out = evflow(&["simulate", demo, "--overhead-ns", "1e9", "-n", "10"]);
    assert!(out.status.success(), "{}", stderr(&out));

    let dir = scratch("simulate-nothing");
    let instant = "[[module]]\nlabel = \"a\"\ntype = \"producer\"\n\
                   [[module]]\nlabel = \"f\"\ntype = \"filter\"\nconsumes = [\"a\"]\n\
                   [[path]]\nname = \"p\"\nmodules = [\"f\"]\n";
    let none = write(
        &dir,
        "none.toml",
        &format!("[process]\nevents = 0\n{instant}"),
    );
    let out = evflow(&["simulate", &none]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("no prediction: the configuration has no events"),
        "{text}"
    );
    assert!(!text.contains("inf"), "{text}");
    let free = write(
        &dir,
        "free.toml",
        &format!("[process]\nevents = 5\n{instant}"),
    );
    let out = evflow(&["simulate", &free, "--overhead-ns", "0"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("no bound: the events take no simulated time"),
        "{text}"
    );
    assert!(!text.contains("inf"), "{text}");
}

/// Without `--cores` and `-k`, `evflow simulate` takes the configuration's
/// threads and events in flight, as `evflow run` does, not one at a time.
#[test]
fn simulate_defaults_to_the_configurations_threads_and_events_in_flight() {
    let dir = scratch("simdefaults");
    let config = write(
        &dir,
        "k.toml",
        "[process]\nevents = 40\nthreads = 3\nevents_in_flight = 6\n\
         [[module]]\nlabel = \"a\"\ntype = \"producer\"\ntime = 0.001\n\
         [[module]]\nlabel = \"f\"\ntype = \"filter\"\nconsumes = [\"a\"]\n\
         [[path]]\nname = \"p\"\nmodules = [\"f\"]\n",
    );
    let cases: [(&[&str], &str); 3] = [
        (&[], "on 3 cores with 6 events in flight"),
        (&["--cores", "5"], "on 5 cores with 6 events in flight"),
        (
            &["--cores", "2", "-k", "4"],
            "on 2 cores with 4 events in flight",
        ),
    ];
    for (extra, expected) in cases {
        let mut args = vec!["simulate", config.as_str()];
        args.extend(extra);
        let out = evflow(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(
            stdout(&out).contains(expected),
            "{extra:?}: {}",
            stdout(&out)
        );
    }
    // Without suggestions in the file: 1 core, as many events as cores.
    let plain = write(
        &dir,
        "plain.toml",
        "[[module]]\nlabel = \"a\"\ntype = \"producer\"\n",
    );
    let out = evflow(&["simulate", &plain, "--cores", "4"]);
    assert!(
        stdout(&out).contains("on 4 cores with 4 events in flight"),
        "{}",
        stdout(&out)
    );
}

/// A Python without the evflow package: a clear error that says how to get
/// it, not Python's bare "No module named evflow".
#[test]
fn python_analysis_without_the_package_says_how_to_install_it() {
    let dir = scratch("nopackage");
    // A Python that sees no site-packages, hence no evflow.
    let python = dir.join("python-without-site");
    std::fs::write(&python, "#!/bin/sh\nexec python3 -S \"$@\"\n").unwrap();
    let mut perms = std::fs::metadata(&python).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&python, perms).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_evflow"))
        .args(["run", "analysis.py"])
        .current_dir(&dir)
        .env("EVFLOW_PYTHON", &python)
        .output()
        .expect("the evflow binary runs");
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("evflow Python package is not installed") && err.contains("setup.sh"),
        "{err}"
    );
}

/// `evflow run analysis.py` hands every option, including those only the
/// Python runner knows (`--processes`, `--scheduler`, `--input`), to
/// `python -m evflow run` unparsed.
#[test]
fn python_analysis_options_reach_the_python_runner() {
    let out = Command::new(env!("CARGO_BIN_EXE_evflow"))
        .args([
            "run",
            "analysis.py",
            "--processes",
            "2",
            "--scheduler",
            "tcp://host:8786",
            "--input",
            "a.parquet",
        ])
        // The "interpreter" echoes what it was given.
        .env("EVFLOW_PYTHON", "echo")
        .output()
        .expect("the evflow binary runs");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out).trim(),
        "-m evflow run analysis.py --processes 2 --scheduler tcp://host:8786 --input a.parquet"
    );
}

const THREE_STEPS: &str = r#"
[process]
name = "three"
events = 100

[[module]]
label = "a"
type = "producer"
time = 5.0

[[module]]
label = "b"
type = "producer"
consumes = ["a"]
time = 5.0

[[module]]
label = "sel"
type = "filter"
consumes = ["b"]
time = 5.0

[[path]]
name = "p"
modules = ["sel"]
"#;

/// A report as `evflow run` writes it, with a measured time per call for
/// the given (label, seconds).
fn measured_report(dir: &Path, name: &str, modules: &[(&str, f64)]) -> String {
    let modules: Vec<serde_json::Value> = modules
        .iter()
        .map(|(label, s)| serde_json::json!({"label": label, "calls": 10, "run_s": 10.0 * s}))
        .collect();
    write(
        dir,
        name,
        &serde_json::json!({ "modules": modules }).to_string(),
    )
}

fn simulated_throughput(args: &[&str], report: &Path) -> (f64, String) {
    let mut all = args.to_vec();
    all.extend(["--report", report.to_str().unwrap()]);
    let out = evflow(&all);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap();
    (
        doc["report"]["throughput_ev_s"].as_f64().unwrap(),
        stdout(&out),
    )
}

#[test]
fn simulate_times_from_report_are_not_scaled_again() {
    let dir = scratch("times-from");
    let config = write(&dir, "three.toml", THREE_STEPS);
    // Measured at time scale 0.001: 5 ms per module, 15 ms per event.
    let measured = measured_report(
        &dir,
        "m.json",
        &[("a", 0.005), ("b", 0.005), ("sel", 0.005)],
    );
    let sim = dir.join("sim.json");
    let base = [
        "simulate",
        &config,
        "--cores",
        "1",
        "-k",
        "1",
        "--overhead-ns",
        "0",
    ];
    for scale in ["1", "0.001"] {
        let mut args = base.to_vec();
        args.extend(["--time-scale", scale, "--times-from", &measured]);
        let (rate, text) = simulated_throughput(&args, &sim);
        assert!(
            (rate - 1.0 / 0.015).abs() < 0.01 * rate,
            "--time-scale {scale}: {rate} events/s, expected 66.7 (15 ms per event)\n{text}"
        );
        assert!(text.contains("3 of 3 modules matched"), "{text}");
    }
    // The scale still applies to the configuration's own times.
    let mut args = base.to_vec();
    args.extend(["--time-scale", "0.001"]);
    let (rate, _) = simulated_throughput(&args, &sim);
    assert!((rate - 1.0 / 0.015).abs() < 0.01 * rate, "{rate}");
}

#[test]
fn simulate_times_from_says_what_matched_and_fails_when_nothing_did() {
    let dir = scratch("times-match");
    let config = write(&dir, "three.toml", THREE_STEPS);
    let sim = dir.join("sim.json");
    // Only "sel" is measured (1 ms); a and b keep 5 s × 0.001.
    let partial = measured_report(&dir, "p.json", &[("sel", 0.001), ("other", 1.0)]);
    let (rate, text) = simulated_throughput(
        &[
            "simulate",
            &config,
            "--cores",
            "1",
            "-k",
            "1",
            "--overhead-ns",
            "0",
            "--time-scale",
            "0.001",
            "--times-from",
            &partial,
        ],
        &sim,
    );
    assert!(text.contains("1 of 3 modules matched"), "{text}");
    assert!(text.contains("a, b"), "names the unmatched modules: {text}");
    assert!((rate - 1.0 / 0.011).abs() < 0.01 * rate, "{rate}");

    let foreign = measured_report(&dir, "f.json", &[("x", 0.001), ("y", 0.001)]);
    let out = evflow(&["simulate", &config, "--times-from", &foreign]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("none of the 3 modules") && err.contains("f.json"),
        "{err}"
    );
}

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
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(doc["interrupted"], true);
    let events = doc["events"].as_u64().unwrap();
    assert!(events < 1_000_000, "{events}");
    // Every event that counts ran completely: no half-processed event.
    for m in doc["modules"].as_array().unwrap() {
        assert_eq!(m["calls"].as_u64(), Some(events), "{m}");
        assert_eq!(m["failures"].as_u64(), Some(0), "{m}");
    }
    assert_eq!(doc["paths"][0]["visited"].as_u64(), Some(events));
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
    send(child.id(), "-TERM");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(started.elapsed().as_secs() < 20, "did not abort at once");
    assert!(!report.exists(), "an aborted run writes no report");
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
