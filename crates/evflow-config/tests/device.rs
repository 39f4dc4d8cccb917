//! Device modules in the TOML format.

use evflow_config::{Format, LoadOptions, load_str};
use evflow_core::{RunOptions, run};
use evflow_device::{
    DeviceChoice, DeviceContext, DeviceOptions, EmulatedConfig, Faults, SplitMode,
};

const JOB: &str = r#"
[process]
events = 60
[[module]]
label = "tracks"
type = "producer"
time = 0.00002
device = { time = 0.000005, bytes_in = 4096, bytes_out = 64 }
[[module]]
label = "use"
type = "analyzer"
consumes = ["tracks"]
[[end_path]]
name = "e"
modules = ["use"]
"#;

fn emulated(config: EmulatedConfig, split: SplitMode) -> DeviceContext {
    let options = DeviceOptions {
        split,
        events_in_flight: 8,
        ..DeviceOptions::default()
    };
    DeviceContext::open(&DeviceChoice::Emulated(config), options)
        .unwrap()
        .0
}

fn load(text: &str, device: Option<DeviceContext>) -> Result<evflow_config::Loaded, String> {
    let opts = LoadOptions {
        device,
        ..LoadOptions::default()
    };
    load_str(text, Format::Toml, &opts, "dev.toml").map_err(|e| e.to_string())
}

#[test]
fn a_device_table_makes_a_device_module() {
    let ctx = emulated(EmulatedConfig::default(), SplitMode::Fixed(0.5));
    let loaded = load(JOB, Some(ctx.clone())).unwrap();
    assert_eq!(loaded.devices, Some(ctx.clone()));
    let options = RunOptions {
        threads: 2,
        events_in_flight: 8,
        ..RunOptions::default()
    };
    let report = run(loaded.process, &options).unwrap();
    assert_eq!(report.module("tracks").unwrap().calls, 60);
    let r = &ctx.reports()[0];
    assert_eq!(
        (r.label.as_str(), r.host_calls, r.device_calls),
        ("tracks", 30, 30)
    );
    assert_eq!(r.bytes_in, 30 * 4096);
    assert_eq!(r.bytes_out, 30 * 64);
}

#[test]
fn without_a_device_context_device_modules_run_on_the_host() {
    let loaded = load(JOB, None).unwrap();
    let ctx = loaded.devices.clone().unwrap();
    assert!(ctx.device().is_none());
    run(loaded.process, &RunOptions::default()).unwrap();
    assert_eq!(ctx.reports()[0].host_calls, 60);
    // A file without device modules has no device context.
    let plain = JOB.replace(
        "device = { time = 0.000005, bytes_in = 4096, bytes_out = 64 }\n",
        "",
    );
    assert!(load(&plain, None).unwrap().devices.is_none());
}

#[test]
fn bad_device_tables_are_named() {
    let cases = [
        (
            JOB.replace("bytes_out = 64", "bytes_out = 0"),
            "dev.toml: module 'tracks': device.bytes_out must be between 8 and",
        ),
        (
            JOB.replace("time = 0.000005", "time = -1.0"),
            "dev.toml: module 'tracks': device.time",
        ),
        (
            JOB.replace("bytes_out = 64", "bytes_out = 64, speed = 3"),
            "unknown field `speed`",
        ),
        (
            JOB.replace(
                "consumes = [\"tracks\"]",
                "consumes = [\"tracks\"]\ndevice = {}",
            ),
            "dev.toml: module 'use': 'device' applies only to producers, not to analyzers",
        ),
        (
            JOB.replace(
                "time = 0.00002\n",
                "time = 0.00002\nconcurrency = { cloned = 2 }\n",
            ),
            "dev.toml: module 'tracks': concurrency: a device module cannot be cloned",
        ),
        (
            JOB.replace("bytes_out = 64 }", "bytes_out = 64, host = false }"),
            "dev.toml: module 'tracks': device 'host': no such device (module 'tracks' has no host implementation and needs a device)",
        ),
    ];
    for (text, expected) in cases {
        let error = load(&text, None).err().unwrap();
        assert!(error.contains(expected), "{error}\n  expected: {expected}");
    }
    let faulty = EmulatedConfig {
        faults: Faults {
            compile: vec!["synthetic_tracks".into()],
            ..Faults::default()
        },
        ..EmulatedConfig::default()
    };
    let error = load(JOB, Some(emulated(faulty, SplitMode::Adaptive)))
        .err()
        .unwrap();
    assert_eq!(
        error,
        "dev.toml: module 'tracks': device 'emulated:0': kernel 'synthetic_tracks' failed to compile: emulated compilation failure (configured fault)"
    );
}
