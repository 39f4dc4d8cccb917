//! The CMS JSON importer: the shared reconstruction configurations, and
//! every error case on small inline documents.

use std::path::PathBuf;
use std::time::Instant;

use evflow_config::{ConfigFileError, Format, LoadOptions, Loaded, load_file, load_str};
use evflow_core::{Concurrency, RunOptions};
use evflow_workloads::Work;

/// `../shared/data/cms-reco` next to the workspace, if present.
fn shared_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/cms-reco");
    if dir.is_dir() {
        Some(dir)
    } else {
        println!(
            "SKIPPED: {} is absent; the CMS configurations are not checked",
            dir.display()
        );
        None
    }
}

fn quick() -> LoadOptions {
    LoadOptions {
        events: Some(20),
        events_per_lumi: None,
        time_scale: 0.0,
        work: None,
        device: None,
    }
}

struct Counts {
    modules: usize,
    paths: usize,
    shared: usize,
    serial: usize,
    exclusive: usize,
}

fn counts(loaded: &Loaded) -> Counts {
    let graph = loaded.process.compile().expect("compiles");
    let mut c = Counts {
        modules: graph.modules.len(),
        paths: graph.paths.len(),
        shared: 0,
        serial: 0,
        exclusive: 0,
    };
    for m in &graph.modules {
        match &m.concurrency {
            Concurrency::Shared => c.shared += 1,
            Concurrency::Serial => c.serial += 1,
            Concurrency::Exclusive(r) => {
                assert_eq!(r, &vec!["thread-unsafe".to_string()]);
                c.exclusive += 1
            }
            Concurrency::Cloned(_) => panic!("no cloned modules in CMS files"),
        }
    }
    c
}

fn run_quick(loaded: Loaded) {
    let options = RunOptions {
        threads: 2,
        events_in_flight: loaded.events_in_flight.unwrap_or(2).min(8),
        ..RunOptions::default()
    };
    let t0 = Instant::now();
    let report = evflow_core::run(loaded.process, &options).expect("runs");
    assert_eq!(report.events, 20);
    assert!(report.failed_events.is_empty());
    println!("ran 20 events in {:.3} s", t0.elapsed().as_secs_f64());
}

#[test]
fn hipileup_loads_and_runs() {
    let Some(dir) = shared_dir() else { return };
    let path = dir.join("reco_hipileup_5_2_0_busywait_perfectIO.config");
    let loaded = load_file(&path, &quick()).unwrap();
    assert_eq!(loaded.format, "cms-json");
    assert_eq!(loaded.events, 20);
    assert_eq!(loaded.events_in_flight, Some(10));
    assert_eq!(loaded.threads, None);
    assert_eq!(loaded.process.name(), "TEST");
    let c = counts(&loaded);
    assert_eq!((c.modules, c.paths), (491, 2));
    assert_eq!((c.shared, c.serial, c.exclusive), (491, 0, 0));
    // Paths keep the file's order.
    let names: Vec<&str> = loaded
        .process
        .paths()
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(names, ["oRECO", "oAOD"]);
    run_quick(loaded);
}

#[test]
fn minbias_busywait_loads_and_runs() {
    let Some(dir) = shared_dir() else { return };
    let loaded = load_file(&dir.join("reco_minbias_busywait.config"), &quick()).unwrap();
    assert_eq!(loaded.events_in_flight, Some(2));
    let c = counts(&loaded);
    assert_eq!((c.modules, c.paths), (463, 1));
    assert_eq!((c.exclusive, c.serial, c.shared), (4, 1, 458));
    run_quick(loaded);
}

#[test]
fn minbias_sleeping_loads_and_runs() {
    let Some(dir) = shared_dir() else { return };
    let loaded = load_file(
        &dir.join("reco_minbias_sleeping_betweenmodules.config"),
        &quick(),
    )
    .unwrap();
    assert_eq!(loaded.events_in_flight, Some(70));
    let c = counts(&loaded);
    assert_eq!((c.modules, c.paths), (463, 1));
    assert_eq!((c.exclusive, c.serial, c.shared), (4, 459, 0));
    run_quick(loaded);
}

#[test]
fn file_events_are_the_default() {
    let Some(dir) = shared_dir() else { return };
    let opts = LoadOptions {
        time_scale: 0.0,
        ..LoadOptions::default()
    };
    let loaded = load_file(&dir.join("reco_minbias_busywait.config"), &opts).unwrap();
    assert_eq!(loaded.events, 200);
}

// ---- small inline documents ----

const ORIGIN: &str = "reco.config";

fn module(label: &str, ty: &str, extra: &str) -> String {
    format!(
        r#"{{"@label": "{label}", "@type": "{ty}", "threadType": "ThreadSafeBetweenInstances", "eventTimes": [0.1, 0.2]{extra}}}"#
    )
}

const BUSY: &str = "demo::EventTimesBusyWaitProducer";
const FILTER: &str = "demo::EventTimesBusyWaitPassFilter";

fn doc(producers: &[String], filters: &[String], paths: &str) -> String {
    format!(
        r#"{{"process": {{"label": "TEST", "options": {{"nSimultaneousEvents": 3}}, "source": {{"@type": "demo::SimpleSource", "iterations": 7}},
  "producers": [{}],
  "filters": [{}],
  "paths": {paths}}}}}"#,
        producers.join(",\n"),
        filters.join(",\n")
    )
}

fn good() -> String {
    doc(
        &[
            module("raw/LHC", BUSY, ""),
            module(
                "tracks",
                "demo::EventTimesSleepingProducer",
                r#", "toGet": [{"label": "raw/LHC", "product": ""}]"#,
            ),
        ],
        &[module(
            "out",
            FILTER,
            r#", "toGet": [{"label": "tracks", "product": ""}]"#,
        )],
        r#"{"zeta": ["out"], "alpha": ["out"]}"#,
    )
}

fn load(text: &str) -> Result<Loaded, ConfigFileError> {
    load_str(
        text,
        Format::CmsJson,
        &LoadOptions {
            time_scale: 0.0,
            ..LoadOptions::default()
        },
        ORIGIN,
    )
}

fn error(text: &str) -> String {
    let e = load(text).expect_err("an error").to_string();
    assert!(e.starts_with(ORIGIN), "{e}");
    e
}

#[test]
fn small_document_loads_and_runs() {
    let loaded = load(&good()).unwrap();
    assert_eq!(
        (loaded.events, loaded.events_in_flight, loaded.format),
        (7, Some(3), "cms-json")
    );
    let names: Vec<&str> = loaded
        .process
        .paths()
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(names, ["zeta", "alpha"]);
    let report = evflow_core::run(
        loaded.process,
        &RunOptions {
            threads: 2,
            events_in_flight: 3,
            ..RunOptions::default()
        },
    )
    .unwrap();
    assert_eq!(report.events, 7);
    assert_eq!(report.module("tracks").unwrap().calls, 7);
    assert_eq!(report.paths[0].passed, 7);
}

#[test]
fn events_override_and_work_override() {
    let opts = LoadOptions {
        events: Some(250),
        events_per_lumi: None,
        time_scale: 0.0,
        work: Some(Work::Busy),
        device: None,
    };
    let loaded = load_str(&good(), Format::CmsJson, &opts, ORIGIN).unwrap();
    assert_eq!(loaded.events, 250);
    let report = evflow_core::run(loaded.process, &RunOptions::default()).unwrap();
    assert_eq!(report.events, 250);
}

#[test]
fn negative_event_time() {
    let text = doc(
        &[format!(
            r#"{{"@label": "ak5PFJets", "@type": "{BUSY}", "eventTimes": [0.1, 0.2, 0.3, -0.2]}}"#
        )],
        &[],
        "{}",
    );
    assert_eq!(
        error(&text),
        "reco.config: module 'ak5PFJets': eventTimes[3] is negative (-0.2)"
    );
}

#[test]
fn string_event_time() {
    let text = doc(
        &[format!(
            r#"{{"@label": "ak5PFJets", "@type": "{BUSY}", "eventTimes": [0.1, "0.2"]}}"#
        )],
        &[],
        "{}",
    );
    let e = error(&text);
    assert!(
        e.contains("module 'ak5PFJets': eventTimes[1] is not a number"),
        "{e}"
    );
}

#[test]
fn event_times_not_an_array_or_empty_or_missing() {
    let e = error(&doc(
        &[format!(
            r#"{{"@label": "a", "@type": "{BUSY}", "eventTimes": 0.1}}"#
        )],
        &[],
        "{}",
    ));
    assert!(
        e.contains("module 'a': eventTimes must be an array of numbers, not a number"),
        "{e}"
    );
    let e = error(&doc(
        &[format!(
            r#"{{"@label": "a", "@type": "{BUSY}", "eventTimes": []}}"#
        )],
        &[],
        "{}",
    ));
    assert!(e.contains("module 'a': eventTimes is empty"), "{e}");
    let e = error(&doc(
        &[format!(r#"{{"@label": "a", "@type": "{BUSY}"}}"#)],
        &[],
        "{}",
    ));
    assert!(e.contains("module 'a': missing 'eventTimes'"), "{e}");
}

#[test]
fn huge_event_time_is_rejected() {
    let text = doc(
        &[format!(
            r#"{{"@label": "a", "@type": "{BUSY}", "eventTimes": [1e300]}}"#
        )],
        &[],
        "{}",
    );
    let e = load_str(&text, Format::CmsJson, &LoadOptions::default(), ORIGIN)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("module 'a': eventTimes[0] is too long"), "{e}");
}

#[test]
fn unknown_type() {
    let e = error(&doc(&[module("a", "demo::Nope", "")], &[], "{}"));
    assert!(
        e.starts_with("reco.config: module 'a': unknown module type 'demo::Nope' (known: "),
        "{e}"
    );
}

#[test]
fn filter_type_among_producers() {
    let e = error(&doc(&[module("a", FILTER, "")], &[], "{}"));
    assert!(
        e.contains("module 'a': demo::EventTimesBusyWaitPassFilter belongs in process.filters"),
        "{e}"
    );
}

#[test]
fn missing_label_and_type() {
    let e = error(&doc(
        &[format!(r#"{{"@type": "{BUSY}", "eventTimes": [0.1]}}"#)],
        &[],
        "{}",
    ));
    assert_eq!(
        e,
        "reco.config: process.producers[0]: module without '@label'"
    );
    let e = error(&doc(
        &[],
        &[r#"{"@label": "f", "eventTimes": [0.1]}"#.to_string()],
        "{}",
    ));
    assert_eq!(e, "reco.config: module 'f': missing '@type'");
}

#[test]
fn duplicate_label() {
    let e = error(&doc(
        &[module("a", BUSY, ""), module("a", BUSY, "")],
        &[],
        "{}",
    ));
    assert_eq!(e, "reco.config: module label 'a' is used more than once");
}

#[test]
fn unknown_thread_type() {
    let text = doc(
        &[format!(
            r#"{{"@label": "a", "@type": "{BUSY}", "threadType": "Unsafe", "eventTimes": [0.1]}}"#
        )],
        &[],
        "{}",
    );
    let e = error(&text);
    assert!(e.contains("module 'a': unknown threadType 'Unsafe'"), "{e}");
}

#[test]
fn unknown_module_key() {
    let e = error(&doc(&[module("a", BUSY, r#", "toGt": []"#)], &[], "{}"));
    assert!(e.contains("module 'a': unknown key 'toGt'"), "{e}");
}

#[test]
fn label_with_colon_in_to_get() {
    let e = error(&doc(
        &[module(
            "a",
            BUSY,
            r#", "toGet": [{"label": "x:y", "product": ""}]"#,
        )],
        &[],
        "{}",
    ));
    assert!(
        e.contains("module 'a': toGet[0].label 'x:y' contains ':'"),
        "{e}"
    );
}

#[test]
fn missing_product() {
    let e = error(&doc(
        &[module(
            "a",
            BUSY,
            r#", "toGet": [{"label": "nobody", "product": ""}]"#,
        )],
        &[],
        "{}",
    ));
    assert_eq!(
        e,
        "reco.config: module 'a' consumes 'nobody', which no module produces"
    );
}

#[test]
fn path_names_unknown_module() {
    let e = error(&doc(
        &[module("a", BUSY, "")],
        &[],
        r#"{"p": ["a", "cut3"]}"#,
    ));
    assert_eq!(e, "reco.config: path 'p' names unknown module 'cut3'");
    let e = error(&doc(&[module("a", BUSY, "")], &[], r#"{"p": "a"}"#));
    assert!(
        e.contains("process.paths.p: must be an array of module labels"),
        "{e}"
    );
    let e = error(&doc(&[module("a", BUSY, "")], &[], r#"["a"]"#));
    assert!(e.starts_with("reco.config:4:"), "{e}");
    assert!(e.contains("invalid type: sequence, expected an object mapping path names to lists of module labels"), "{e}");
}

#[test]
fn missing_events() {
    let e = error(r#"{"process": {"producers": [], "paths": {}}}"#);
    assert!(e.contains("process.source.iterations: missing"), "{e}");
    let opts = LoadOptions {
        events: Some(3),
        ..LoadOptions::default()
    };
    let loaded = load_str(
        r#"{"process": {"producers": [], "paths": {}}}"#,
        Format::CmsJson,
        &opts,
        ORIGIN,
    )
    .unwrap();
    assert_eq!(loaded.events, 3);
    assert_eq!(loaded.process.name(), "cms");
}

#[test]
fn bad_options() {
    let e = error(
        r#"{"process": {"options": {"nSimultaneousEvents": 0}, "source": {"iterations": 1}}}"#,
    );
    assert_eq!(
        e,
        "reco.config: process.options.nSimultaneousEvents: must be at least 1"
    );
    let e = error(r#"{"process": {"source": {"iterations": -1}}}"#);
    assert!(
        e.contains("process.source.iterations: must be a non-negative integer"),
        "{e}"
    );
    // The toy framework's generator writes the count as a string.
    let loaded = load(r#"{"process": {"source": {"iterations": "100"}}}"#).unwrap();
    assert_eq!(loaded.events, 100);
    let e = error(r#"{"process": {"source": {"iterations": "many"}}}"#);
    assert!(
        e.contains(r#"process.source.iterations: must be a non-negative integer, not "many""#),
        "{e}"
    );
    let e = error(r#"{"process": {"source": {"@type": "demo::FileSource", "iterations": 1}}}"#);
    assert!(
        e.contains("process.source.@type: unsupported source"),
        "{e}"
    );
    let e = error(r#"{"process": {"producers": {}, "source": {"iterations": 1}}}"#);
    assert!(
        e.contains("process.producers: must be an array of modules, not an object"),
        "{e}"
    );
}

#[test]
fn syntax_errors_have_line_numbers() {
    let e = error("{\"process\": {\n  \"producers\": [,]\n}}");
    assert!(e.starts_with("reco.config:2:17: "), "{e}");
    let e = error("[1, 2]");
    assert!(
        e.starts_with(
            "reco.config:1:1: invalid type: sequence, expected a CMS configuration object"
        ),
        "{e}"
    );
    let e = error("{\"process\": 3}");
    assert!(
        e.contains("invalid type: integer `3`, expected the \"process\" object"),
        "{e}"
    );
    let e = error("{\"process\": [null, null]}");
    assert!(
        e.contains("invalid type: sequence, expected the \"process\" object"),
        "{e}"
    );
    let e = error("{}");
    assert!(e.starts_with("reco.config: process: missing"), "{e}");
}

#[test]
fn bad_time_scale() {
    for scale in [-1.0, f64::NAN, f64::INFINITY] {
        let opts = LoadOptions {
            time_scale: scale,
            ..LoadOptions::default()
        };
        let e = load_str(&good(), Format::CmsJson, &opts, ORIGIN)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.starts_with("reco.config: time_scale: must be a finite number >= 0"),
            "{e}"
        );
    }
}

#[test]
fn missing_file() {
    let e = load_file(
        std::path::Path::new("/nonexistent/reco.config"),
        &LoadOptions::default(),
    )
    .err()
    .unwrap();
    assert!(matches!(e, ConfigFileError::Read { .. }));
    assert!(
        e.to_string()
            .starts_with("/nonexistent/reco.config: cannot read the file: "),
        "{e}"
    );
    assert_eq!(e.file(), "/nonexistent/reco.config");
}

#[test]
fn garbage_never_panics() {
    let inputs = [
        "",
        "{",
        "null",
        "\"x\"",
        "{\"process\": null}",
        "{\"process\": {\"producers\": [null, 3, []]}}",
        "{\"process\": {\"filters\": [{\"@label\": 3}]}}",
        "{\"process\": {\"paths\": {\"\": []}}}",
        "{\"process\": {\"producers\": [{\"@label\": \"a\", \"@type\": \"demo::EventTimesBusyWaitProducer\", \"eventTimes\": [1], \"toGet\": [3, {\"label\": 2}, {}]}]}}",
        "{\"process\": {\"label\": [], \"options\": 1, \"source\": \"x\"}}",
    ];
    for text in inputs {
        let _ = load(text).map(|_| ());
        let _ = load_str(text, Format::Toml, &LoadOptions::default(), ORIGIN).map(|_| ());
    }
}

#[test]
fn parallel_for_filters_load_run_and_say_how_they_run() {
    // The `_imt` configurations: the output filter's time split into
    // `nRanges` ranges run at once. They load and run, and a note says how.
    for ty in [
        "demo::EventTimesBusyWaitParallelForPassFilter",
        "demo::EventTimesSleepingTaskStealingParallelForPassFilter",
    ] {
        let text = doc(
            &[module("raw", BUSY, "")],
            &[module(
                "out",
                ty,
                r#", "nRanges": 100, "toGet": [{"label": "raw", "product": ""}]"#,
            )],
            r#"{"o": ["out"]}"#,
        );
        let loaded = load(&text).unwrap();
        assert_eq!(loaded.notes.len(), 1, "{:?}", loaded.notes);
        assert!(
            loaded.notes[0].contains("module 'out'")
                && loaded.notes[0].contains("100 ranges at once"),
            "{:?}",
            loaded.notes
        );
        let report = evflow_core::run(loaded.process, &RunOptions::default()).unwrap();
        assert_eq!(report.events, 7);
        assert_eq!(report.paths[0].passed, 7);
    }
    // Plain modules have no notes.
    assert!(load(&good()).unwrap().notes.is_empty());
    let parallel = "demo::EventTimesBusyWaitParallelForPassFilter";
    let with = |extra: &str, ty: &str| {
        error(&doc(
            &[module("raw", BUSY, "")],
            &[module("out", ty, extra)],
            r#"{"o": ["out"]}"#,
        ))
    };
    let e = with("", parallel);
    assert!(
        e.contains("module 'out'") && e.contains("needs 'nRanges'"),
        "{e}"
    );
    let e = with(r#", "nRanges": 0"#, parallel);
    assert!(
        e.contains("nRanges must be a positive integer, not 0"),
        "{e}"
    );
    let e = with(r#", "nRanges": "many""#, parallel);
    assert!(e.contains("nRanges must be a positive integer"), "{e}");
    let e = with(r#", "nRanges": 4"#, FILTER);
    assert!(
        e.contains("nRanges applies to the parallel-for filters"),
        "{e}"
    );
}
