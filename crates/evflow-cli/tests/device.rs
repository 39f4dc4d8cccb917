//! `evflow run` with device modules: the device options, the notice, the
//! devices section of the report.

mod common;

use common::*;
use std::path::PathBuf;

/// `evflow run CONFIG --device emulated --device-split SPLIT EXTRA...`.
fn run_emulated(config: &str, split: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "run",
        config,
        "--device",
        "emulated",
        "--device-split",
        split,
    ];
    args.extend_from_slice(extra);
    evflow(&args)
}

fn example() -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.join("examples/configs/device.toml")
        .to_string_lossy()
        .into_owned()
}

const FAST: [&str; 6] = ["--time-scale", "0.01", "-n", "100", "--threads", "2"];

#[test]
fn emulated_device_run_reports_its_device_modules() {
    let report = scratch("report").join("r.json");
    let report_s = report.to_string_lossy().into_owned();
    let config = example();
    let mut args = vec![
        "run",
        &config,
        "--device",
        "emulated",
        "--device-split",
        "fixed:50",
    ];
    args.extend(FAST);
    args.extend(["--report", &report_s]);
    let out = evflow(&args);
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        text.contains("device module tracking on emulated:0: 50 host + 50 device calls"),
        "{text}"
    );
    let doc = read_json(&report);
    let d = &doc["devices"][0];
    assert_eq!(d["label"], "tracking");
    assert_eq!(d["device_calls"], 50);
    assert_eq!(d["bytes_in"], 50 * 262144);
    assert!(d["launches"].as_u64().unwrap() >= 1);
    assert_eq!(d["split"], "fixed:50");
    let launches = d["launches"].as_u64().unwrap();
    let started = d["timed_out_launches"].as_u64().unwrap() + d["idle_launches"].as_u64().unwrap();
    assert!(started <= launches, "{d}");
    assert_eq!(d["launch_model"]["overlap"], true, "{d}");
    // `evflow report` shows the device modules as the run printed them,
    // with their launch models; a report written before those fields
    // existed still reads.
    let shown = evflow(&["report", &report_s]);
    let shown_text = stdout(&shown);
    assert!(shown.status.success(), "{}", stderr(&shown));
    assert!(
        shown_text.contains("device module tracking on emulated:0: 50 host + 50 device calls"),
        "{shown_text}"
    );
    assert!(
        shown_text.contains("launches of tracking: kernel "),
        "{shown_text}"
    );
    let mut older = doc.clone();
    for field in ["timed_out_launches", "idle_launches", "launch_model"] {
        older["devices"][0].as_object_mut().unwrap().remove(field);
    }
    std::fs::write(&report, older.to_string()).unwrap();
    let shown = evflow(&["report", &report_s]);
    assert!(shown.status.success(), "{}", stderr(&shown));
    assert!(stdout(&shown).contains("device module tracking on emulated:0"));
    assert!(!stdout(&shown).contains("launches of tracking"));
}

#[test]
fn no_device_gives_one_notice_and_a_demanded_one_an_error() {
    let config = example();
    let mut args = vec!["run", &config];
    args.extend(FAST);
    let out = evflow(&args);
    assert!(out.status.success());
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("evflow: no device: device modules run on the host"));
    // The notice is information: `--quiet` (only errors) drops it, for
    // `simulate` as for `run`.
    for command in ["run", "simulate"] {
        let mut quiet = vec![command, &config, "--quiet"];
        quiet.extend(&FAST[..4]);
        let out = evflow(&quiet);
        assert!(out.status.success(), "{command}: {}", stderr(&out));
        assert_eq!(stderr(&out), "", "{command}");
    }
    args.push("-q");

    args.extend(["--device", "cuda"]);
    let out = evflow(&args);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("--device: device 'cuda': no such device"),
        "{err}"
    );

    let out = evflow(&["run", &config, "--device-split", "fixed:150"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("device split 'fixed:150'"));
}

/// Device options whose modelled times no clock can hold are refused, named,
/// before the job starts: a timeout of 10^30 µs used to make the combining
/// thread panic and the job hang.
#[test]
fn device_options_beyond_any_clock_are_refused_by_name() {
    let config = example();
    for (option, value, expected) in [
        (
            "--device-timeout-us",
            "1e30",
            "between 0 and 1e12 (10^6 s), not 1e30",
        ),
        (
            "--device-latency-us",
            "1e30",
            "between 0 and 1e12 (10^6 s), not 1e30",
        ),
        ("--device-transfer-latency-us", "1e25", "not 1e25"),
        ("--device-bandwidth-gbs", "1e-300", ">= 1e-6, not 1e-300"),
        ("--device-speedup", "1e-300", ">= 1e-6, not 1e-300"),
        ("--device-timeout-us", "-1", "not -1"),
    ] {
        // No events: nothing would reach the device, so only the check of
        // the option can fail the run.
        let arg = format!("{option}={value}");
        let out = evflow(&[
            "run", &config, "--device", "emulated", "-n", "0", "-q", &arg,
        ]);
        let err = stderr(&out);
        assert!(!out.status.success(), "{option} {value} was accepted");
        assert!(
            err.contains(&format!("{option} must be")) && err.contains(expected),
            "{option} {value}: {err}"
        );
    }
    // The largest accepted values still run.
    let out = evflow(&[
        "run",
        &config,
        "--device",
        "emulated",
        "-n",
        "0",
        "-q",
        "--device-timeout-us=1e12",
        "--device-bandwidth-gbs=1e-6",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// The emulated device's options are checked whatever `--device` says: a
/// bad value given with `auto` or `none` used to be dropped in silence.
#[test]
fn emulated_device_options_are_checked_whatever_the_device() {
    let config = example();
    for device in ["auto", "none", "emulated"] {
        for (option, value) in [
            ("--device-bandwidth-gbs", "0"),
            ("--device-speedup", "-1"),
            ("--device-latency-us", "-5"),
            ("--device-transfer-latency-us", "nan"),
        ] {
            let arg = format!("{option}={value}");
            let out = evflow(&["run", &config, "--device", device, "-n", "0", "-q", &arg]);
            let err = stderr(&out);
            assert!(
                !out.status.success(),
                "--device {device} {option} {value} was accepted"
            );
            assert!(
                err.contains(&format!("{option} must be")),
                "--device {device} {option} {value}: {err}"
            );
        }
    }
}

#[test]
fn a_serial_or_exclusive_device_module_does_not_wait_for_the_time_out() {
    // Its instance is kept during the external work, so a batch cannot
    // grow past one invocation: with a time-out of 10^6 s the run ends only
    // when every launch goes at once.
    let dir = scratch("serial-device");
    for concurrency in ["\"serial\"", "{ exclusive = [\"gpu\"] }"] {
        let config = write(
            &dir,
            "job.toml",
            &device_job(
                20,
                16,
                &format!(
                    "time = 0.0001\nconcurrency = {concurrency}\n\
                     device = {{ time = 0.0001, bytes_in = 1000, bytes_out = 100 }}"
                ),
            ),
        );
        let out = evflow_within(
            &[
                "run",
                &config,
                "--device",
                "emulated",
                "--device-split",
                "fixed:100",
                "--device-timeout-us",
                "1e12",
            ],
            120,
        );
        let text = stdout(&out);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(text.contains("20 device calls, 20 launches"), "{text}");
    }
}

#[test]
fn a_device_only_module_reports_no_split() {
    // `host = false`: every call runs on the device, whatever the split
    // option; the summary and the report say so instead of a split.
    let dir = scratch("device-only");
    let config = write(
        &dir,
        "job.toml",
        &device_job(
            40,
            8,
            "time = 0.0001\n\
             device = { time = 0.0001, bytes_in = 1000, bytes_out = 100, host = false }",
        ),
    );
    let report = dir.join("r.json");
    for split in ["adaptive", "fixed:30"] {
        let out = run_emulated(&config, split, &["--report", report.to_str().unwrap()]);
        let text = stdout(&out);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(
            text.contains("0 host + 40 device calls")
                && text.contains("device only (no host implementation)")
                && !text.contains("split"),
            "{split}: {text}"
        );
        let d = &read_json(&report)["devices"][0];
        assert_eq!(d["split"], "device-only", "{split}");
        assert_eq!(d["split_history"], serde_json::json!([]), "{split}");
    }
}

#[test]
fn configured_failures_fail_on_the_device_too() {
    // `fail_on_events` fails the same events whichever side runs them,
    // also without a host implementation; with a real kernel it is refused
    // (neither side could fail them).
    let dir = scratch("device-failures");
    let job = |device: &str| {
        device_job(
            100,
            8,
            &format!("time = 0.0001\nfail_on_events = [5, 10, 77]\ndevice = {device}"),
        )
    };
    let report = dir.join("r.json");
    for device in [
        "{ time = 0.0001, bytes_in = 1000, bytes_out = 100 }",
        "{ time = 0.0001, bytes_in = 1000, bytes_out = 100, host = false }",
    ] {
        let config = write(&dir, "job.toml", &job(device));
        for split in ["fixed:0", "fixed:50", "fixed:100", "adaptive"] {
            let out = run_emulated(
                &config,
                split,
                &[
                    "-q",
                    "--on-error",
                    "skip-event",
                    "--report",
                    report.to_str().unwrap(),
                ],
            );
            assert!(out.status.success(), "{}", stderr(&out));
            let doc = read_json(&report);
            let mut failed: Vec<u64> = doc["failed_events"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f["event"].as_u64().unwrap())
                .collect();
            failed.sort_unstable();
            assert_eq!(failed, [5, 10, 77], "{device} {split}");
        }
        let out = run_emulated(&config, "fixed:100", &["-q"]);
        assert!(!out.status.success(), "{device}");
        let err = stderr(&out);
        assert!(
            err.contains("module 'clusters' failed") && err.contains("configured failure on event"),
            "{err}"
        );
    }
    let config = write(
        &dir,
        "kernel.toml",
        &job(r#"{ kernel = "stencil", size = 64 }"#).replace("time = 0.0001\n", ""),
    );
    let out = evflow(&["run", &config, "-q", "--device", "emulated"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out)
            .contains("module 'clusters': fail_on_events does not apply with device.kernel"),
        "{}",
        stderr(&out)
    );
}

/// A `--device-*` option that cannot apply to the device chosen is
/// refused, named, rather than ignored: `--device none --device-split
/// fixed:50` ran every call on the host and said `split fixed:0`.
#[test]
fn device_options_that_cannot_apply_to_the_device_are_refused() {
    let config = example();
    for (command, device, option, value, expected) in [
        (
            "run",
            "none",
            "--device-split",
            "fixed:50",
            "device modules run on the host",
        ),
        (
            "run",
            "none",
            "--device-batch",
            "8",
            "device modules run on the host",
        ),
        (
            "run",
            "none",
            "--device-no-hold",
            "",
            "device modules run on the host",
        ),
        (
            "run",
            "none",
            "--device-speedup",
            "2",
            "device modules run on the host",
        ),
        (
            "simulate",
            "none",
            "--device-timeout-us",
            "50",
            "device modules run on the host",
        ),
        (
            "run",
            "emulated",
            "--device-streams",
            "4",
            "a CUDA GPU only",
        ),
        (
            "run",
            "cuda",
            "--device-latency-us",
            "3",
            "the emulated device only",
        ),
        (
            "simulate",
            "cuda",
            "--device-bandwidth-gbs",
            "1",
            "the emulated device only",
        ),
    ] {
        let mut args = vec![
            command, &config, "--device", device, "-n", "4", "-q", option,
        ];
        if !value.is_empty() {
            args.push(value);
        }
        let out = evflow(&args);
        let err = stderr(&out);
        assert!(
            !out.status.success(),
            "{command} --device {device} {option} {value} was accepted"
        );
        assert!(
            err.contains(&format!("{option} has no effect with --device {device}: "))
                && err.contains(expected),
            "{command} --device {device} {option} {value}: {err}"
        );
    }
    // Options of the device chosen, and any with `auto` (which may open
    // either), still run.
    for args in [
        [
            "--device",
            "emulated",
            "--device-split",
            "fixed:50",
            "--device-latency-us",
            "3",
        ],
        [
            "--device",
            "auto",
            "--device-speedup",
            "2",
            "--device-streams",
            "3",
        ],
    ] {
        let mut all = vec!["run", &config, "-n", "4", "-q"];
        all.extend(args);
        let out = evflow(&all);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    }
}

/// `evflow simulate --times-from REPORT` simulates the device a run
/// measured — each device module's launches as `launch_model` gives them —
/// on a machine without that device (`--device none`): a run's GPU,
/// predicted elsewhere. Here a report whose device takes 5 ms of kernel per
/// event bounds the job at 200 events/s, where the host alone would
/// take `tracking`'s 2 ms on 4 cores (about 1 600 events/s).
#[test]
fn simulate_follows_the_device_a_report_measured() {
    let dir = scratch("measured-device");
    let config = example();
    let report = dir.join("measured.json");
    let measured = serde_json::json!({
        "modules": [],
        "devices": [{
            "label": "tracking",
            "host_calls": 0,
            "host_s": 0.0,
            "launch_model": {
                "kernel_fixed_s": 0.0,
                "kernel_per_event_s": 5e-3,
                "transfer_in_fixed_s": 0.0,
                "transfer_in_per_byte_s": 0.0,
                "transfer_out_fixed_s": 0.0,
                "transfer_out_per_byte_s": 0.0,
                "overlap": true
            }
        }]
    });
    std::fs::write(&report, measured.to_string()).unwrap();
    let prediction = dir.join("prediction.json");
    let simulate = |times_from: Option<&std::path::Path>| {
        let mut args = vec![
            "simulate".to_string(),
            config.clone(),
            "--device".into(),
            "none".into(),
            "--cores".into(),
            "4".into(),
            "-n".into(),
            "400".into(),
            "--report".into(),
            prediction.to_string_lossy().into_owned(),
        ];
        // The split applies to the measured launches; without them
        // `--device none` refuses it.
        if let Some(path) = times_from {
            args.extend(["--times-from".into(), path.to_string_lossy().into_owned()]);
            args.extend(["--device-split".into(), "fixed:100".into()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = evflow(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        (stdout(&out), read_json(&prediction))
    };
    let (text, doc) = simulate(Some(&report));
    assert!(text.contains("device launches of tracking from "), "{text}");
    let throughput = doc["report"]["throughput_ev_s"].as_f64().unwrap();
    assert!((150.0..=200.0).contains(&throughput), "{throughput}");
    let d = &doc["devices"][0];
    assert_eq!(d["label"], "tracking");
    assert_eq!(d["device_calls"], 400);
    assert_eq!(d["device"], "the measured device");
    let kernel = d["kernel_s"].as_f64().unwrap();
    assert!((kernel - 400.0 * 5e-3).abs() < 1e-6, "{kernel}");
    // Without the report: no device, the host runs `tracking`.
    let (_, doc) = simulate(None);
    let host = doc["report"]["throughput_ev_s"].as_f64().unwrap();
    assert!(host > 1000.0, "{host}");
    assert!(doc.get("devices").is_none(), "{doc}");
    // A launch model that is not one is named with the file and module.
    let mut bad = measured.clone();
    bad["devices"][0]["launch_model"]["kernel_per_event_s"] = "fast".into();
    std::fs::write(&report, bad.to_string()).unwrap();
    let out = evflow(&[
        "simulate",
        &config,
        "--times-from",
        report.to_str().unwrap(),
        "-n",
        "10",
    ]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "--times-from {}: device module 'tracking': launch_model: invalid type",
            report.display()
        )),
        "{err}"
    );
}

/// A launch model's figures are measured times: a negative one (which no
/// fit writes) or one beyond the longest module time is a damaged report,
/// refused by file, module and key, as the modules' own figures are. Taken
/// as they were, a negative kernel time printed "kernels -0.351 s" and a
/// huge one predicted 0.00 events/s over 10^290 simulated seconds.
#[test]
fn simulate_refuses_a_launch_model_that_is_no_measurement() {
    let dir = scratch("bad-launch-model");
    let config = example();
    let report = dir.join("measured.json");
    let cases = [
        (
            "kernel_per_event_s",
            -1e-3,
            "must be a finite number >= 0, not -0.001",
        ),
        (
            "transfer_in_fixed_s",
            -5.0,
            "must be a finite number >= 0, not -5.0",
        ),
        ("kernel_fixed_s", 1e7, "is 1e7 s, beyond 1e6 s"),
        ("kernel_per_event_s", 1e300, "is 1e300 s, beyond 1e6 s"),
        // 2^30 bytes (the most an event moves) at 1 s per byte.
        (
            "transfer_out_per_byte_s",
            1.0,
            "is 1e0 s per byte: the 1073741824 bytes an event may move would take \
             1.073741824e9 s, beyond 1e6 s",
        ),
    ];
    for (key, value, expected) in cases {
        let mut model = serde_json::json!({
            "kernel_fixed_s": 1e-5,
            "kernel_per_event_s": 2.5e-4,
            "transfer_in_fixed_s": 5e-6,
            "transfer_in_per_byte_s": 1e-10,
            "transfer_out_fixed_s": 5e-6,
            "transfer_out_per_byte_s": 1e-10,
            "overlap": true
        });
        model[key] = value.into();
        let measured = serde_json::json!({
            "modules": [{"label": "raw", "calls": 10, "run_s": 0.001}],
            "devices": [{"label": "tracking", "host_calls": 4, "host_s": 0.008,
                         "launch_model": model}]
        });
        std::fs::write(&report, measured.to_string()).unwrap();
        let out = evflow(&[
            "simulate",
            &config,
            "--device",
            "emulated",
            "--times-from",
            report.to_str().unwrap(),
            "-n",
            "10",
        ]);
        assert!(!out.status.success(), "{key} = {value} was taken");
        let err = stderr(&out);
        assert!(
            err.contains(&format!(
                "--times-from {}: device module 'tracking': launch_model.{key} {expected}",
                report.display()
            )),
            "{key} = {value}: {err}"
        );
        assert!(stdout(&out).is_empty(), "{}", stdout(&out));
    }
}

/// `evflow report TRACE` counts a call with external work once, as the
/// report's `calls` does: its `acquire` and `produce` are two slices of the
/// trace, and the device module's calls read twice the report's (120 of
/// 60 events here), halving its time per call.
#[test]
fn a_traces_calls_of_a_device_module_are_the_reports() {
    let dir = scratch("trace-calls");
    let report = dir.join("report.json");
    let trace = dir.join("trace.json");
    let out = run_emulated(
        &example(),
        "fixed:50",
        &[
            "-n",
            "60",
            "-q",
            "--report",
            report.to_str().unwrap(),
            "--trace",
            trace.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let calls = |label: &str| -> u64 {
        read_json(&report)["modules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["label"] == label)
            .unwrap()["calls"]
            .as_u64()
            .unwrap()
    };
    let text = report_text(&trace);
    for label in ["tracking", "raw", "vertices"] {
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(label))
            .unwrap_or_else(|| panic!("no line of {label}: {text}"));
        let traced: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        assert_eq!(traced, calls(label), "{label}: {line}");
    }
    assert_eq!(calls("tracking"), 60);
}
