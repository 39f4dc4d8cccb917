//! The `evflow simulate` command: predictions, bounds, measured times
//! from a report, and what it refuses.

mod common;
// `--times-from`: measured module times.
#[path = "cli_simulate/times_from.rs"]
mod times_from;

use common::*;

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
    let text = report_text(&report);
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
    // `evflow run`'s `--threads` / `-j` are the simulated machine's cores:
    // the options of a run predict it on another machine as written
    // (they were refused, with a tip to pass '-j' as a value).
    let cases: [(&[&str], &str); 5] = [
        (&[], "on 3 cores with 6 events in flight"),
        (&["--cores", "5"], "on 5 cores with 6 events in flight"),
        (
            &["--cores", "2", "-k", "4"],
            "on 2 cores with 4 events in flight",
        ),
        (&["-j", "7"], "on 7 cores with 6 events in flight"),
        (
            &["--threads", "8", "-k", "2"],
            "on 8 cores with 2 events in flight",
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

#[test]
fn simulate_with_an_emulated_device_reports_the_device_modules() {
    // As `evflow run`: one line per device module and a `devices` section.
    let dir = scratch("sim-devices");
    let config = write(
        &dir,
        "job.toml",
        &device_job(
            400,
            16,
            "time = 0.001\ndevice = { time = 0.0002, bytes_in = 1000, bytes_out = 100 }",
        ),
    );
    let report = dir.join("sim.json");
    let out = evflow(&[
        "simulate",
        &config,
        "--device",
        "emulated",
        "--device-split",
        "fixed:50",
        "--report",
        report.to_str().unwrap(),
    ]);
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        text.contains("device module clusters on emulated:0: 200 host + 200 device calls")
            && text.contains("split fixed:50 (last 50% device)"),
        "{text}"
    );
    let doc = read_json(&report);
    let d = &doc["devices"][0];
    assert_eq!(d["label"], "clusters");
    assert_eq!(d["host_calls"], 200);
    assert_eq!(d["device_calls"], 200);
    assert!(d["launches"].as_u64().unwrap() >= 1);
    assert_eq!(d["split"], "fixed:50");
    // Host only: no device section.
    let out = evflow(&[
        "simulate",
        &config,
        "--device",
        "none",
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stdout(&out).contains("device module"));
    assert!(read_json(&report).get("devices").is_none());
}

#[test]
fn simulate_of_no_time_predicts_no_limit_and_no_negative_zero() {
    // Modules of time 0 and no overhead: no simulated time passes, so the
    // rate is unbounded, not 0 events/s; a job without modules has 0 s
    // (not -0 s) of work per event.
    let dir = scratch("zero-time");
    let zero = write(
        &dir,
        "zero.toml",
        r#"
[process]
events = 10

[[module]]
label = "a"
type = "producer"

[[module]]
label = "an"
type = "analyzer"
consumes = ["a"]

[[end_path]]
name = "e"
modules = ["an"]
"#,
    );
    let empty = write(&dir, "empty.toml", "[process]\nevents = 5\n");
    for config in [&zero, &empty] {
        let out = evflow(&["simulate", config, "--overhead-ns", "0"]);
        let text = stdout(&out);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(
            text.starts_with("predicted: unbounded events/s (the events take no simulated time)"),
            "{text}"
        );
        assert!(!text.contains("-0.0"), "{text}");
    }
}

/// What the simulator does not model is said, not silently predicted:
/// configured failures, and real kernels whose host time the file does not
/// give (unless a measured run gives it).
#[test]
fn simulate_says_what_it_does_not_model() {
    let dir = scratch("simnotes");
    let config = write(
        &dir,
        "notes.toml",
        r#"
[process]
events = 20
[[module]]
label = "raw"
type = "producer"
time = 0.0001
fail_on_events = [3, 7]
[[module]]
label = "st"
type = "producer"
consumes = ["raw"]
device = { kernel = "stencil", size = 256 }
[[module]]
label = "use"
type = "analyzer"
consumes = ["st"]
[[end_path]]
name = "e"
modules = ["use"]
"#,
    );
    let out = evflow(&["simulate", &config, "--cores", "2", "-q"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "evflow: warning: {config}: module 'raw' fails on 2 configured event(s) \
             (fail_on_events)"
        )),
        "{err}"
    );
    assert!(
        err.contains("module 'st' runs a real kernel (device.kernel)"),
        "{err}"
    );
    // A measured run's time of the kernel module takes its note away; the
    // failures stay unmodelled.
    let report = dir.join("run.json");
    let out = evflow(&[
        "run",
        &config,
        "-j",
        "2",
        "-q",
        "--on-error",
        "skip-event",
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = evflow(&[
        "simulate",
        &config,
        "--cores",
        "2",
        "-q",
        "--times-from",
        report.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(!err.contains("real kernel"), "{err}");
    assert!(
        err.contains(&format!(
            "evflow: warning: {config}: module 'raw' fails on 2"
        )),
        "{err}"
    );
}

/// Inputs `simulate` cannot use are named for what they are: a Python
/// analysis, a simulation's own report as measured times, a negative number.
#[test]
fn simulate_names_inputs_it_cannot_use() {
    let dir = scratch("simwrong");
    let demo = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/configs/demo.toml"
    );
    let analysis = write(&dir, "analysis.py", "import evflow\n");
    let out = evflow(&["simulate", &analysis, "--cores", "2"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("a Python analysis runs with `evflow run`"),
        "{}",
        stderr(&out)
    );
    let sim = dir.join("sim.json");
    let out = evflow(&[
        "simulate",
        demo,
        "--cores",
        "2",
        "-n",
        "50",
        "-q",
        "--report",
        sim.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = evflow(&[
        "simulate",
        demo,
        "--cores",
        "2",
        "--times-from",
        sim.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("a simulation's report (evflow simulate --report)"),
        "{}",
        stderr(&out)
    );
    for (args, expected) in [
        (
            vec!["simulate", demo, "--cores", "2", "--time-scale", "-1"],
            "--time-scale must be a finite number >= 0, not -1",
        ),
        (
            vec!["run", demo, "--time-scale", "-0.5", "-q"],
            "--time-scale must be a finite number >= 0, not -0.5",
        ),
    ] {
        let out = evflow(&args);
        assert!(!out.status.success());
        assert!(stderr(&out).contains(expected), "{}", stderr(&out));
    }
}

/// More events in flight than events: the job has as many slots as events
/// (the others would never fill), and says so.
#[test]
fn events_in_flight_beyond_the_events_are_not_counted() {
    let demo = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/configs/demo.toml"
    );
    let out = evflow(&["simulate", demo, "--cores", "4", "-k", "65536", "-n", "200"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("on 4 cores with 200 events in flight"),
        "{}",
        stdout(&out)
    );
    let report = scratch("kbeyond").join("r.json");
    let out = evflow(&[
        "run",
        demo,
        "-j",
        "2",
        "-k",
        "65536",
        "-n",
        "20",
        "-q",
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(read_json(&report)["events_in_flight"], 20);
}

/// `simulate --help` does not offer Python analyses, which only `run` takes
/// (the help shared with `run` said `evflow run ANALYSIS.py` runs one
/// "instead", under `simulate`).
#[test]
fn simulate_help_does_not_offer_python_analyses() {
    for flag in ["--help", "-h"] {
        let help = stdout(&evflow(&["simulate", flag]));
        assert!(help.contains("<CONFIG>"), "{help}");
        assert!(!help.contains("ANALYSIS.py"), "simulate {flag}: {help}");
    }
    let help = stdout(&evflow(&["run", "--help"]));
    assert!(
        help.contains("`evflow run ANALYSIS.py` runs a Python analysis"),
        "{help}"
    );
}
