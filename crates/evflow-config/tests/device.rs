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

const KERNEL_JOB: &str = r#"
[process]
events = 40
[[module]]
label = "forces"
type = "producer"
device = { kernel = "nbody", size = 32 }
[[module]]
label = "use"
type = "analyzer"
consumes = ["forces"]
[[end_path]]
name = "e"
modules = ["use"]
"#;

#[test]
fn a_device_table_can_name_a_real_kernel() {
    for (kind, bytes_in, bytes_out) in [("nbody", 32 * 16, 32 * 12), ("stencil", 32 * 4, 32 * 4)] {
        let ctx = emulated(EmulatedConfig::default(), SplitMode::Fixed(0.5));
        let text = KERNEL_JOB.replace("\"nbody\"", &format!("\"{kind}\""));
        let loaded = load(&text, Some(ctx.clone())).unwrap();
        let options = RunOptions {
            threads: 2,
            events_in_flight: 8,
            ..RunOptions::default()
        };
        run(loaded.process, &options).unwrap();
        let r = &ctx.reports()[0];
        assert_eq!((r.host_calls, r.device_calls), (20, 20), "{kind}");
        assert_eq!(r.bytes_in, 20 * bytes_in, "{kind}");
        assert_eq!(r.bytes_out, 20 * bytes_out, "{kind}");
    }
}

/// The simulator's note on a real kernel is about its host calls, whose
/// time the file does not give: a kernel without a host side makes none.
#[test]
fn only_kernels_with_a_host_side_note_their_unknown_host_time() {
    let ctx = emulated(EmulatedConfig::default(), SplitMode::Adaptive);
    let noted = |text: &str| -> Vec<String> {
        let loaded = load(text, Some(ctx.clone())).unwrap();
        loaded
            .simulation_notes
            .into_iter()
            .map(|(label, _)| label)
            .collect()
    };
    assert_eq!(noted(KERNEL_JOB), ["forces"]);
    let device_only = KERNEL_JOB.replace("size = 32 }", "size = 32, host = false }");
    assert!(noted(&device_only).is_empty());
}

#[test]
fn bad_kernel_tables_are_named() {
    let cases = [
        (
            KERNEL_JOB.replace("\"nbody\"", "\"fft\""),
            "dev.toml: module 'forces': device.kernel: unknown kernel 'fft' (known: stencil, nbody)",
        ),
        (
            KERNEL_JOB.replace("size = 32", "size = 0"),
            "dev.toml: module 'forces': device.size must be between 1 and 16384 for kernel 'nbody' (got 0)",
        ),
        (
            KERNEL_JOB.replace(", size = 32", ""),
            "dev.toml: module 'forces': device.size is required with device.kernel (particles per event)",
        ),
        (
            KERNEL_JOB.replace("size = 32", "size = 32, bytes_in = 64"),
            "dev.toml: module 'forces': device.bytes_in does not apply with device.kernel",
        ),
        (
            KERNEL_JOB.replace("kernel = \"nbody\", ", ""),
            "dev.toml: module 'forces': device.size applies only with device.kernel",
        ),
        (
            KERNEL_JOB.replace(
                "type = \"producer\"\n",
                "type = \"producer\"\ntime = 0.001\n",
            ),
            "dev.toml: module 'forces': 'time' does not apply to a module whose device table names a kernel",
        ),
        (
            KERNEL_JOB.replace("size = 32 }", "size = 32, host = false }"),
            "dev.toml: module 'forces': device 'host': no such device (module 'forces' has no host implementation and needs a device)",
        ),
    ];
    for (text, expected) in cases {
        let error = load(&text, None).err().unwrap();
        assert!(error.contains(expected), "{error}\n  expected: {expected}");
    }
}
