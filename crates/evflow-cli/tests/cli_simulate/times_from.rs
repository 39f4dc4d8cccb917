//! `evflow simulate --times-from`: module times measured by a run (a
//! report), how they replace the configuration's, and what is refused.

use crate::common::*;
use std::path::Path;

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
    let doc = read_json(report);
    (
        doc["report"]["throughput_ev_s"].as_f64().unwrap(),
        stdout(&out),
    )
}

/// `simulate CONFIG` on one core with one event in flight and no overhead
/// per module execution, then `extra`.
fn one_core<'a>(config: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "simulate",
        config,
        "--cores",
        "1",
        "-k",
        "1",
        "--overhead-ns",
        "0",
    ];
    args.extend_from_slice(extra);
    args
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
    for scale in ["1", "0.001"] {
        let args = one_core(&config, &["--time-scale", scale, "--times-from", &measured]);
        let (rate, text) = simulated_throughput(&args, &sim);
        assert!(
            (rate - 1.0 / 0.015).abs() < 0.01 * rate,
            "--time-scale {scale}: {rate} events/s, expected 66.7 (15 ms per event)\n{text}"
        );
        assert!(text.contains("3 of 3 modules matched"), "{text}");
    }
    // The scale still applies to the configuration's own times.
    let (rate, _) = simulated_throughput(&one_core(&config, &["--time-scale", "0.001"]), &sim);
    assert!((rate - 1.0 / 0.015).abs() < 0.01 * rate, "{rate}");
}

#[test]
fn simulate_times_from_takes_a_device_modules_host_time_per_host_call() {
    let dir = scratch("times-device");
    let config = write(&dir, "three.toml", THREE_STEPS);
    let sim = dir.join("sim.json");
    // `b` ran as a device module: its mean over all calls (1 ms) mixes 2
    // host calls of 5 ms with 8 cheap device-side calls; its host cost is
    // the 5 ms per host call of the `devices` section.
    let report = |name: &str, host_calls: u64| {
        let doc = serde_json::json!({
            "modules": [
                {"label": "a", "calls": 10, "run_s": 0.05},
                {"label": "b", "calls": 10, "run_s": 0.01},
                {"label": "sel", "calls": 10, "run_s": 0.05},
            ],
            "devices": [
                {"label": "b", "host_calls": host_calls, "host_s": host_calls as f64 * 0.005,
                 "device_calls": 10 - host_calls},
            ],
        });
        write(&dir, name, &doc.to_string())
    };
    let partly = report("partly.json", 2);
    let (rate, text) = simulated_throughput(&one_core(&config, &["--times-from", &partly]), &sim);
    assert!(text.contains("3 of 3 modules matched"), "{text}");
    assert!((rate - 1.0 / 0.015).abs() < 0.01 * rate, "{rate}: {text}");
    // Only on the device: no host time was measured; `b` keeps the
    // configuration's (5 s × 0.002 = 10 ms), and the summary says why.
    let only = report("only.json", 0);
    let (rate, text) = simulated_throughput(
        &one_core(&config, &["--time-scale", "0.002", "--times-from", &only]),
        &sim,
    );
    assert!(
        text.contains("2 of 3 modules matched")
            && text.contains("b ran only on the device there")
            && text.contains("keeps the configuration's time"),
        "{text}"
    );
    assert!((rate - 1.0 / 0.020).abs() < 0.01 * rate, "{rate}: {text}");
}

#[test]
fn simulate_times_from_says_what_matched_and_fails_when_nothing_did() {
    let dir = scratch("times-match");
    let config = write(&dir, "three.toml", THREE_STEPS);
    let sim = dir.join("sim.json");
    // Only "sel" is measured (1 ms); a and b keep 5 s × 0.001.
    let partial = measured_report(&dir, "p.json", &[("sel", 0.001), ("other", 1.0)]);
    let (rate, text) = simulated_throughput(
        &one_core(
            &config,
            &["--time-scale", "0.001", "--times-from", &partial],
        ),
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

    // A file that is not there: named, with the option that named it.
    let missing = dir.join("missing.json");
    let out = evflow(&[
        "simulate",
        &config,
        "--times-from",
        missing.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("--times-from") && err.contains("missing.json"),
        "{err}"
    );
}

/// A module whose per-event times vary strongly (one long event in ten)
/// before a serial module of varying times, and a constant filter.
const BURSTY: &str = r#"
[process]
name = "bursty"
events = 40

[[module]]
label = "bursty"
type = "producer"
times = [0.091, 0.001, 0.001, 0.001, 0.001, 0.001, 0.001, 0.001, 0.001, 0.001]

[[module]]
label = "ser"
type = "producer"
consumes = ["bursty"]
concurrency = "serial"
times = [0.001, 0.003]

[[module]]
label = "sel"
type = "filter"
consumes = ["ser"]
time = 0.002

[[path]]
name = "p"
modules = ["sel"]
"#;

/// A report of `process` whose modules have the means per call of
/// BURSTY times `factor` (10 ms, 2 ms, 2 ms).
fn bursty_report(dir: &Path, name: &str, process: &str, factor: f64) -> String {
    let modules: Vec<serde_json::Value> = [("bursty", 0.010), ("ser", 0.002), ("sel", 0.002)]
        .iter()
        .map(|(label, s)| serde_json::json!({"label": label, "calls": 40, "run_s": 40.0 * s * factor}))
        .collect();
    let doc = serde_json::json!({"process": process, "modules": modules});
    write(dir, name, &doc.to_string())
}

/// Measured means keep the configuration's per-event variation: a report
/// of the configuration's own means predicts what the configuration does
/// (a constant mean per call would hide the long events and predict
/// ~30 % more), and twice the means half the rate.
#[test]
fn simulate_times_from_keeps_per_event_variation() {
    let dir = scratch("times-shape");
    let config = write(&dir, "bursty.toml", BURSTY);
    let sim = dir.join("sim.json");
    let cores = |extra: &[&'static str]| {
        let mut args = vec!["simulate", "--cores", "4", "-k", "4", "--overhead-ns", "0"];
        args.extend_from_slice(extra);
        args
    };
    let mut args = cores(&[]);
    args.insert(1, &config);
    let (configured, _) = simulated_throughput(&args, &sim);
    let same = bursty_report(&dir, "same.json", "bursty", 1.0);
    let double = bursty_report(&dir, "double.json", "bursty", 2.0);
    for (report, scale, expected) in [
        (&same, "1", configured),
        (&same, "0.5", configured),
        (&double, "1", configured / 2.0),
    ] {
        let mut args = cores(&[]);
        args.extend([
            config.as_str(),
            "--time-scale",
            scale,
            "--times-from",
            report,
        ]);
        let (rate, text) = simulated_throughput(&args, &sim);
        assert!(
            (rate - expected).abs() < 1e-6 * expected,
            "{report} at --time-scale {scale}: {rate} events/s, expected {expected}\n{text}"
        );
        assert!(
            text.contains(
                "3 of 3 modules matched (2 with per-event times keep their variation, scaled \
                 to the measured mean per call; 1 with a constant time take the measured mean)"
            ),
            "{text}"
        );
    }
}

/// A report of another process, or one that names few of the modules, is
/// used but warned about, naming both processes and what fell back.
#[test]
fn simulate_times_from_warns_about_another_configurations_report() {
    let dir = scratch("times-foreign");
    let config = write(&dir, "bursty.toml", BURSTY);
    let own = bursty_report(&dir, "own.json", "bursty", 1.0);
    let out = evflow(&["simulate", &config, "-q", "--times-from", &own]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));

    let other = bursty_report(&dir, "other.json", "RECO", 1.0);
    let out = evflow(&["simulate", &config, "-q", "--times-from", &other]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "evflow: warning: {other}: a report of process 'RECO', but {config} is process \
             'bursty'"
        )),
        "{err}"
    );
    assert!(!err.contains("fall back"), "{err}");

    let few = write(
        &dir,
        "few.json",
        r#"{"process": "RECO", "modules": [{"label": "sel", "calls": 4, "run_s": 0.1},
            {"label": "elsewhere", "calls": 4, "run_s": 0.1}]}"#,
    );
    let out = evflow(&["simulate", &config, "-q", "--times-from", &few]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("a report of process 'RECO'"), "{err}");
    assert!(
        err.contains(&format!(
            "evflow: warning: {few}: only 1 of the 3 modules of {config} have a measured time \
             there; 2 fall back to the configuration's times"
        )),
        "{err}"
    );
}

/// Measured figures that are no times are errors naming the file, the
/// module and the key, not silently 0 nor blamed on the configuration.
#[test]
fn simulate_times_from_refuses_bad_measurements() {
    let dir = scratch("times-bad");
    let config = write(&dir, "bursty.toml", BURSTY);
    let cases = [
        (
            r#""calls": 40, "run_s": -1"#,
            "'run_s' must be a finite number >= 0, not -1",
        ),
        (
            r#""calls": 40, "run_s": "x""#,
            r#"'run_s' must be a finite number >= 0, not "x""#,
        ),
        (
            r#""calls": 40, "run_s": null"#,
            "'run_s' must be a finite number >= 0, not null",
        ),
        (
            r#""calls": -4, "run_s": 1"#,
            "'calls' must be a finite number >= 0, not -4",
        ),
        (
            r#""calls": "4", "run_s": 1"#,
            r#"'calls' must be a finite number >= 0, not "4""#,
        ),
        (
            r#""calls": 1.5, "run_s": 1"#,
            "'calls' must be a whole number, not 1.5",
        ),
        (r#""calls": 40"#, "'run_s' is missing (40 calls)"),
        (r#""run_s": 0.5"#, "'calls' is missing ('run_s' is 0.5 s)"),
        (
            r#""calls": 2, "run_s": 1e300"#,
            "'run_s' / 'calls' is 5e299 s per call, beyond 1e6 s",
        ),
        (
            r#""calls": 1, "run_s": 2000000"#,
            "'run_s' / 'calls' is 2e6 s per call, beyond 1e6 s",
        ),
    ];
    for (i, (figures, expected)) in cases.iter().enumerate() {
        let report = write(
            &dir,
            &format!("bad{i}.json"),
            &format!(
                r#"{{"process": "bursty", "modules": [{{"label": "sel", "calls": 40, "run_s": 0.08}},
                    {{"label": "ser", {figures}}}]}}"#
            ),
        );
        let out = evflow(&["simulate", &config, "--times-from", &report]);
        assert!(!out.status.success(), "{figures} should fail");
        let err = stderr(&out);
        assert!(
            err.contains(&format!("--times-from {report}: module 'ser': {expected}")),
            "{figures}: {err}"
        );
        assert!(stdout(&out).is_empty(), "{figures}: {}", stdout(&out));
    }
    // A module named twice: which mean would hold is not for the order of
    // the entries to decide.
    let report = write(
        &dir,
        "twice.json",
        r#"{"modules": [{"label": "ser", "calls": 40, "run_s": 0.08},
            {"label": "ser", "calls": 40, "run_s": 0.8}]}"#,
    );
    let out = evflow(&["simulate", &config, "--times-from", &report]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(&format!(
            "--times-from {report}: module 'ser': modules[1]: is named twice in the report"
        )),
        "{}",
        stderr(&out)
    );
    // The same of a device module's host figures.
    let report = write(
        &dir,
        "device.json",
        r#"{"modules": [{"label": "ser", "calls": 40, "run_s": 0.08}],
            "devices": [{"label": "ser", "host_calls": 2, "host_s": -0.5}]}"#,
    );
    let out = evflow(&["simulate", &config, "--times-from", &report]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(&format!(
            "--times-from {report}: device module 'ser': 'host_s' must be a finite number >= 0, \
             not -0.5"
        )),
        "{}",
        stderr(&out)
    );
}
