//! The native TOML format: valid files, defaults, and every error case,
//! whose message must name the file and the module or key.

use std::path::{Path, PathBuf};

use evflow_config::{ConfigFileError, Format, LoadOptions, Loaded, load_file, load_str};
use evflow_core::{Concurrency, RunOptions};
use evflow_workloads::Work;

const ORIGIN: &str = "demo.toml";

fn instant() -> LoadOptions {
    LoadOptions {
        time_scale: 0.0,
        ..LoadOptions::default()
    }
}

fn load(text: &str) -> Result<Loaded, ConfigFileError> {
    load_str(text, Format::Toml, &instant(), ORIGIN)
}

fn error(text: &str) -> String {
    let e = load(text).expect_err("an error").to_string();
    assert!(e.starts_with(ORIGIN), "{e}");
    e
}

/// One producer `a` and whatever module table `body` describes.
fn with_module(body: &str) -> String {
    format!("[[module]]\nlabel = \"a\"\ntype = \"producer\"\n\n[[module]]\n{body}\n")
}

fn examples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/configs")
}

#[test]
fn defaults() {
    let loaded = load("[[module]]\nlabel = \"a\"\ntype = \"producer\"\n").unwrap();
    assert_eq!(loaded.events, 100);
    assert_eq!(
        (loaded.events_in_flight, loaded.threads, loaded.format),
        (None, None, "toml")
    );
    assert_eq!(loaded.process.name(), "evflow");
    // An empty file is a valid, empty process.
    let empty = load("").unwrap();
    assert_eq!(empty.process.modules().len(), 0);
}

#[test]
fn everything_maps() {
    let text = r#"
[process]
name = "full"
events = 40
events_in_flight = 3
threads = 2
work = "sleep"

[source]
type = "empty"
events_per_lumi = 10
lumis_per_run = 2
first_run = 5

[[module]]
label = "p"
type = "producer"
times = [0.001, 0.002]
produces = ["", "extra"]
concurrency = "serial"

[[module]]
label = "c"
type = "producer"
time = 0
consumes = ["p", "p:extra"]
concurrency = { cloned = 3 }

[[module]]
label = "x"
type = "producer"
work = "busy"
consumes = ["c"]
concurrency = { exclusive = ["geant4", "root"] }

[[module]]
label = "f"
type = "filter"
consumes = ["x"]
pass_fraction = 0.5
seed = 9

[[module]]
label = "h"
type = "analyzer"
consumes = ["p:extra"]

[[module]]
label = "w"
type = "output"
consumes = ["x"]
select_events = ["sel"]

[[path]]
name = "sel"
modules = ["f"]

[[end_path]]
name = "out"
modules = ["w", "h"]
"#;
    let loaded = load(text).unwrap();
    assert_eq!(loaded.process.name(), "full");
    assert_eq!(
        (loaded.events, loaded.events_in_flight, loaded.threads),
        (40, Some(3), Some(2))
    );
    let graph = loaded.process.compile().unwrap();
    let conc: Vec<Concurrency> = graph
        .modules
        .iter()
        .map(|m| m.concurrency.clone())
        .collect();
    assert_eq!(
        conc,
        [
            Concurrency::Serial,
            Concurrency::Cloned(3),
            Concurrency::Exclusive(vec!["geant4".into(), "root".into()]),
            Concurrency::Shared,
            Concurrency::Shared,
            Concurrency::Shared,
        ]
    );
    assert_eq!(graph.paths.len(), 1);
    assert_eq!(graph.end_steps.len(), 2);

    let report = evflow_core::run(
        loaded.process,
        &RunOptions {
            threads: 2,
            events_in_flight: 3,
            ..RunOptions::default()
        },
    )
    .unwrap();
    assert_eq!(report.events, 40);
    let passed = report.paths[0].passed;
    assert!(
        passed > 5 && passed < 35,
        "pass_fraction 0.5 passed {passed} of 40"
    );
    assert_eq!(report.module("w").unwrap().calls, passed);
    assert_eq!(report.module("h").unwrap().calls, 40);
}

#[test]
fn events_option_overrides_the_file() {
    let opts = LoadOptions {
        events: Some(7),
        events_per_lumi: None,
        time_scale: 0.0,
        work: Some(Work::Busy),
        device: None,
    };
    let loaded = load_str("[process]\nevents = 1000\n[[module]]\nlabel=\"a\"\ntype=\"analyzer\"\n[[end_path]]\nname=\"e\"\nmodules=[\"a\"]\n", Format::Toml, &opts, ORIGIN).unwrap();
    assert_eq!(loaded.events, 7);
    let report = evflow_core::run(loaded.process, &RunOptions::default()).unwrap();
    assert_eq!(report.events, 7);
}

#[test]
fn filters_with_different_labels_select_different_events() {
    let text = r#"
[process]
events = 200
[[module]]
label = "f1"
type = "filter"
pass_fraction = 0.5
[[module]]
label = "f2"
type = "filter"
pass_fraction = 0.5
[[path]]
name = "both"
modules = ["f1", "f2"]
"#;
    let report = evflow_core::run(load(text).unwrap().process, &RunOptions::default()).unwrap();
    let passed = report.paths[0].passed;
    assert!(
        passed > 20 && passed < 80,
        "two independent 50% filters passed {passed} of 200"
    );
}

// ---- errors ----

#[test]
fn unknown_module_type() {
    let e = error("[[module]]\nlabel = \"x\"\ntype = \"bsy_producer\"\n");
    assert_eq!(
        e,
        "demo.toml: module 'x': unknown module type 'bsy_producer' (known: producer, filter, analyzer, output)"
    );
}

#[test]
fn path_names_unknown_module() {
    let e = error(&format!(
        "{}[[path]]\nname = \"sel\"\nmodules = [\"b\", \"cut3\"]\n",
        with_module("label = \"b\"\ntype = \"filter\"")
    ));
    assert_eq!(e, "demo.toml: path 'sel' names unknown module 'cut3'");
    let e = error("[[end_path]]\nname = \"out\"\nmodules = [\"w\"]\n");
    assert_eq!(e, "demo.toml: end path 'out' names unknown module 'w'");
}

#[test]
fn negative_time() {
    let e = error(&with_module(
        "label = \"b\"\ntype = \"producer\"\ntime = -0.5",
    ));
    assert_eq!(e, "demo.toml: module 'b': time is negative (-0.5)");
    let e = error(&with_module(
        "label = \"b\"\ntype = \"producer\"\ntimes = [0.1, 0.2, -1e-3]",
    ));
    assert_eq!(e, "demo.toml: module 'b': times[2] is negative (-0.001)");
}

#[test]
fn non_numeric_time() {
    let e = error(&with_module(
        "label = \"b\"\ntype = \"producer\"\ntime = \"fast\"",
    ));
    assert_eq!(
        e,
        "demo.toml:8:8: module 'b': time: invalid type: string \"fast\", expected f64"
    );
    let e = error(&with_module(
        "label = \"b\"\ntype = \"producer\"\ntimes = [\n  0.1,\n  \"x\",\n]",
    ));
    assert!(
        e.starts_with("demo.toml:10:3: module 'b': times: invalid type: string \"x\""),
        "{e}"
    );
    let e = error(&with_module(
        "label = \"b\"\ntype = \"producer\"\ntime = nan",
    ));
    assert_eq!(
        e,
        "demo.toml: module 'b': time is not a finite number (NaN)"
    );
    let e = error(&with_module(
        "label = \"b\"\ntype = \"producer\"\ntime = inf",
    ));
    assert!(e.contains("module 'b': time is not a finite number"), "{e}");
}

#[test]
fn time_and_times_or_empty_times() {
    let e = error(&with_module(
        "label = \"b\"\ntype = \"producer\"\ntime = 1\ntimes = [1]",
    ));
    assert_eq!(
        e,
        "demo.toml: module 'b': give either 'time' or 'times', not both"
    );
    let e = error(&with_module(
        "label = \"b\"\ntype = \"producer\"\ntimes = []",
    ));
    assert!(
        e.starts_with("demo.toml: module 'b': times is empty"),
        "{e}"
    );
}

#[test]
fn time_too_long_for_the_scale() {
    let text = with_module("label = \"b\"\ntype = \"producer\"\ntime = 1e300");
    let e = load_str(&text, Format::Toml, &LoadOptions::default(), ORIGIN)
        .err()
        .unwrap()
        .to_string();
    assert_eq!(
        e,
        "demo.toml: module 'b': time is too long (1e300 s times time_scale 1.0 exceeds 1000000.0 s)"
    );
    // With time_scale 0 any finite time is harmless.
    assert!(load(&text).is_ok());
}

#[test]
fn bad_concurrency() {
    let cases = [
        (
            "{ cloned = 0 }",
            "concurrency: cloned must be at least 1 (cloned = 0 given)",
        ),
        (
            "{ cloned = 100000 }",
            "concurrency: cloned = 100000 is too many instances (at most 4096)",
        ),
        (
            "{ cloned = \"2\" }",
            "concurrency: cloned must be an integer, not string",
        ),
        (
            "{ exclusive = [] }",
            "concurrency: exclusive needs at least one resource name (exclusive = [] given)",
        ),
        (
            "{ exclusive = [\" \"] }",
            "concurrency: exclusive[0] is an empty resource name",
        ),
        (
            "{ exclusive = \"geant4\" }",
            "concurrency: exclusive must be an array of resource names, not string",
        ),
        (
            "\"parallel\"",
            "concurrency: unknown concurrency 'parallel' (known: ",
        ),
        (
            "\"exclusive\"",
            "concurrency: exclusive needs resource names",
        ),
        (
            "{ shared = true }",
            "concurrency: unknown concurrency key 'shared'",
        ),
        (
            "{ cloned = 2, exclusive = [\"a\"] }",
            "concurrency: expected one of ",
        ),
        ("3", "concurrency: expected one of "),
    ];
    for (value, expected) in cases {
        let e = error(&with_module(&format!(
            "label = \"b\"\ntype = \"producer\"\nconcurrency = {value}"
        )));
        assert!(
            e.starts_with(&format!("demo.toml: module 'b': {expected}")),
            "{value}: {e}"
        );
    }
    let e = error(&with_module(
        "label = \"b\"\ntype = \"filter\"\nconcurrency = { cloned = 2 }",
    ));
    assert_eq!(
        e,
        "demo.toml: module 'b': concurrency: cloned applies only to producers, not to filters"
    );
}

#[test]
fn unknown_keys() {
    let e = error(&with_module(
        "label = \"b\"\ntype = \"producer\"\ntme = 0.1",
    ));
    assert!(
        e.starts_with(
            "demo.toml:8:1: module 'b': unknown field `tme`, expected one of `label`, `type`"
        ),
        "{e}"
    );
    let e = error("[process]\nname = \"p\"\nevnts = 3\n");
    assert!(
        e.starts_with("demo.toml:3:1: process: unknown field `evnts`, expected one of"),
        "{e}"
    );
    let e = error("[source]\nevents_per_lumi = 3\nlumis = 3\n");
    assert!(
        e.starts_with("demo.toml:3:1: source: unknown field `lumis`"),
        "{e}"
    );
    let e = error("[[modules]]\nlabel = \"a\"\n");
    assert!(e.starts_with("demo.toml:1:3: unknown field `modules`, expected one of `process`, `source`, `module`, `path`, `end_path`"), "{e}");
    let e = error("[[path]]\nname = \"p\"\nmodule = []\n");
    assert!(
        e.starts_with("demo.toml:3:1: path 'p': unknown field `module`"),
        "{e}"
    );
}

#[test]
fn missing_keys() {
    let e =
        error("[[module]]\nlabel = \"a\"\ntype = \"producer\"\n[[module]]\ntype = \"producer\"\n");
    assert!(
        e.starts_with("demo.toml:4:1: module #2: missing field `label`"),
        "{e}"
    );
    let e = error("[[module]]\nlabel = \"a\"\n");
    assert!(
        e.starts_with("demo.toml:1:1: module 'a': missing field `type`"),
        "{e}"
    );
    let e = error("[[path]]\nmodules = []\n");
    assert!(
        e.starts_with("demo.toml:1:1: path #1: missing field `name`"),
        "{e}"
    );
}

#[test]
fn wrong_types_name_the_key() {
    let e = error("[process]\nevents = -5\n");
    assert_eq!(
        e,
        "demo.toml:2:10: process.events: invalid value: integer `-5`, expected u64"
    );
    let e = error(&with_module(
        "label = \"b\"\ntype = \"producer\"\nconsumes = \"a\"",
    ));
    assert_eq!(
        e,
        "demo.toml:8:12: module 'b': consumes: invalid type: string \"a\", expected a sequence"
    );
    let e = error(&with_module("label = 3\ntype = \"producer\""));
    assert!(
        e.starts_with(
            "demo.toml:6:9: module #2: label: invalid type: integer `3`, expected a string"
        ),
        "{e}"
    );
    let e = error("module = [{ label = \"a\", type = \"producer\", time = \"x\" }]");
    assert_eq!(
        e,
        "demo.toml:1:52: module 'a': invalid type: string \"x\", expected f64"
    );
}

/// A key of a `[[path]]` or `[[end_path]]` table that is unknown or of the
/// wrong type names the path, as a module's names the module: in a job
/// of many paths, "path.modules" alone left the user to count tables.
#[test]
fn path_errors_name_the_path() {
    let paths = |second: &str| {
        format!(
            "[[module]]\nlabel = \"a\"\ntype = \"filter\"\n\n[[module]]\nlabel = \"w\"\n\
             type = \"output\"\n\n[[path]]\nname = \"first\"\nmodules = [\"a\"]\n\n{second}\n\n\
             [[end_path]]\nname = \"out\"\nmodules = [\"w\"]\n"
        )
    };
    let cases = [
        (
            "[[path]]\nname = \"second\"\nmodules = \"a\"",
            "demo.toml:15:11: path 'second': modules: invalid type: string \"a\", expected a \
             sequence",
        ),
        (
            "[[path]]\nname = \"second\"\nmodules = [\"a\"]\nreorderable = \"yes\"",
            "demo.toml:16:15: path 'second': reorderable: invalid type: string \"yes\", \
             expected a boolean",
        ),
        (
            "[[path]]\nname = \"second\"\nmodules = [\"a\"]\nreorderabel = true",
            "demo.toml:16:1: path 'second': unknown field `reorderabel`, expected one of",
        ),
        (
            "[[path]]\nmodules = [\"a\"]",
            "demo.toml:13:1: path #2: missing field `name`",
        ),
        (
            "[[end_path]]\nname = \"dqm\"\nmodule = [\"w\"]",
            "demo.toml:15:1: end path 'dqm': unknown field `module`, expected one of",
        ),
        // A syntax error: found by the table's lines.
        (
            "[[path]]\nname = \"second\"\nmodules = [\"a\" \"b\"]",
            "demo.toml:15:16: path 'second': ",
        ),
    ];
    for (second, expected) in cases {
        let e = error(&paths(second));
        assert!(e.starts_with(expected), "{second}: {e}");
    }
}

#[test]
fn options_of_other_module_kinds() {
    let e = error(&with_module(
        "label = \"b\"\ntype = \"producer\"\npass_fraction = 0.5",
    ));
    assert_eq!(
        e,
        "demo.toml: module 'b': 'pass_fraction' applies only to filters, not to producers"
    );
    let e = error(&with_module(
        "label = \"b\"\ntype = \"analyzer\"\nproduces = [\"x\"]",
    ));
    assert_eq!(
        e,
        "demo.toml: module 'b': 'produces' applies only to producers, not to analyzers"
    );
    let e = error(&with_module(
        "label = \"b\"\ntype = \"filter\"\nselect_events = [\"p\"]",
    ));
    assert!(
        e.starts_with(
            "demo.toml: module 'b': 'select_events' applies only to analyzers and outputs"
        ),
        "{e}"
    );
    let e = error(&with_module("label = \"b\"\ntype = \"producer\"\nseed = 3"));
    assert!(
        e.starts_with("demo.toml: module 'b': 'seed' applies only to filters"),
        "{e}"
    );
}

#[test]
fn bad_values() {
    let e = error(&with_module(
        "label = \"b\"\ntype = \"filter\"\npass_fraction = 1.5",
    ));
    assert_eq!(
        e,
        "demo.toml: module 'b': pass_fraction must be between 0 and 1 (got 1.5)"
    );
    let e = error(&with_module(
        "label = \"b\"\ntype = \"producer\"\nwork = \"lazy\"",
    ));
    assert_eq!(
        e,
        "demo.toml: module 'b': work: unknown work 'lazy' (known: busy, sleep)"
    );
    let e = error(&with_module(
        "label = \"b\"\ntype = \"producer\"\nconsumes = [\"\"]",
    ));
    assert_eq!(e, "demo.toml: module 'b': consumes[0] is empty");
    let e = error("[process]\nwork = \"idle\"\n");
    assert_eq!(
        e,
        "demo.toml: process.work: unknown work 'idle' (known: busy, sleep)"
    );
    let e = error("[process]\nevents_in_flight = 0\n");
    assert_eq!(e, "demo.toml: process.events_in_flight: must be at least 1");
    let e = error("[process]\nthreads = 1000000\n");
    assert!(
        e.starts_with("demo.toml: process.threads: 1000000 is too large"),
        "{e}"
    );
    let e = error("[process]\nname = \"\"\n");
    assert_eq!(e, "demo.toml: process.name: is empty");
    let e = error("[source]\ntype = \"file\"\n");
    assert_eq!(
        e,
        "demo.toml: source.type: unknown source type 'file' (known: empty, table)"
    );
    let e = error("[source]\nevents_per_lumi = 0\n");
    assert_eq!(e, "demo.toml: source.events_per_lumi: must be at least 1");
    // Run 0 is CMSSW's invalid run number: it numbered a whole job's events.
    let e = error("[source]\nfirst_run = 0\n");
    assert!(
        e.starts_with("demo.toml: source.first_run: must be at least 1"),
        "{e}"
    );
    let e = error("[[path]]\nname = \"\"\n");
    assert_eq!(e, "demo.toml: path[0].name: is empty");
}

#[test]
fn compile_errors_are_wrapped() {
    let e = error(&with_module(
        "label = \"b\"\ntype = \"producer\"\nconsumes = [\"nobody\"]",
    ));
    assert_eq!(
        e,
        "demo.toml: module 'b' consumes 'nobody', which no module produces"
    );
    let e = error(&with_module("label = \"a\"\ntype = \"producer\""));
    assert_eq!(e, "demo.toml: module label 'a' is used more than once");
    let e = error(&with_module("label = \"b:c\"\ntype = \"producer\""));
    assert!(
        e.starts_with("demo.toml: module label 'b:c' is invalid"),
        "{e}"
    );
    let e = error(
        "[[module]]\nlabel = \"a\"\ntype = \"producer\"\nconsumes = [\"b\"]\n[[module]]\nlabel = \"b\"\ntype = \"producer\"\nconsumes = [\"a\"]\n",
    );
    assert!(
        e.starts_with("demo.toml: dependency cycle among modules: "),
        "{e}"
    );
    let e = error(&with_module("label = \"w\"\ntype = \"output\""));
    assert_eq!(e, "demo.toml: module 'w': output module is on no end path");
    let e = error(&format!(
        "{}[[end_path]]\nname = \"e\"\nmodules = [\"w\"]\n",
        with_module("label = \"w\"\ntype = \"output\"\nselect_events = [\"nope\"]")
    ));
    assert_eq!(
        e,
        "demo.toml: module 'w' selects events of unknown path 'nope'"
    );
    assert!(matches!(
        load(&with_module("label = \"a\"\ntype = \"producer\"")),
        Err(ConfigFileError::Process { .. })
    ));
}

#[test]
fn syntax_errors_have_line_numbers() {
    let e = error("[process]\nname = \"x\"\nevents = [1,\n");
    assert!(e.starts_with("demo.toml:4:1: "), "{e}");
    let e = error("[process]\nname = \"x\"\n[process]\n");
    assert!(e.starts_with("demo.toml:3:1: "), "{e}");
    assert!(e.contains("duplicate key `process`"), "{e}");
    let e = error("name = = 3\n");
    assert!(e.starts_with("demo.toml:1:"), "{e}");
}

#[test]
fn files_and_formats() {
    let e = load_file(Path::new("/nonexistent/demo.toml"), &LoadOptions::default())
        .err()
        .unwrap();
    assert!(
        e.to_string()
            .starts_with("/nonexistent/demo.toml: cannot read the file: "),
        "{e}"
    );
    assert_eq!(Format::detect(Path::new("a.toml"), "{}"), Format::Toml);
    assert_eq!(Format::detect(Path::new("a.config"), ""), Format::CmsJson);
    assert_eq!(Format::detect(Path::new("a.JSON"), ""), Format::CmsJson);
    assert_eq!(
        Format::detect(Path::new("a.txt"), "{\"process\": {\"paths\": {}}}"),
        Format::CmsJson
    );
    assert_eq!(
        Format::detect(Path::new("a.txt"), "{\"other\": 1}"),
        Format::Toml
    );
    assert_eq!(Format::detect(Path::new("a"), "[process]\n"), Format::Toml);
    assert_eq!(
        (Format::Toml.name(), Format::CmsJson.name()),
        ("toml", "cms-json")
    );
}

#[test]
fn garbage_never_panics() {
    let inputs = [
        "\u{0}",
        "[",
        "[[module]]\nlabel = \"é\"\ntype = \"producer\"\ntime = \"ü\"\n",
        "module = 3",
        "module = [1, 2]",
        "module = [{ label = \"a\", type = \"producer\", time = \"x\" }]",
        "[process]\nevents = 1e3\n",
        "[[module]]\nlabel = \"\"\ntype = \"producer\"\n",
        "[[module]]\nlabel = \" a\"\ntype = \"producer\"\n",
        "[[module]]\nlabel = \"a\"\ntype = \"producer\"\nproduces = [\"\", \"\"]\n",
        "[[module]]\nlabel = \"a\"\ntype = \"producer\"\nseed = -1\n",
        "[source]\nfirst_run = 4294967296\n",
        "[[path]]\nname = \"p\"\nmodules = [\"a\", \"a\"]\n[[module]]\nlabel = \"a\"\ntype = \"filter\"\n",
    ];
    for text in inputs {
        let _ = load(text).map(|_| ());
        let _ = load_str(text, Format::CmsJson, &LoadOptions::default(), ORIGIN).map(|_| ());
    }
}

#[test]
fn example_configs_load_and_run() {
    let dir = examples_dir();
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("examples/configs exists") {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        let opts = LoadOptions {
            events: Some(50),
            events_per_lumi: None,
            time_scale: 0.0,
            work: None,
            device: None,
        };
        let loaded = load_file(&path, &opts).unwrap_or_else(|e| panic!("{e}"));
        let options = RunOptions {
            threads: loaded.threads.unwrap_or(2).min(4),
            events_in_flight: loaded.events_in_flight.unwrap_or(2),
            ..RunOptions::default()
        };
        let report = evflow_core::run(loaded.process, &options).unwrap();
        assert_eq!(report.events, 50, "{}", path.display());
        seen += 1;
    }
    assert!(seen >= 1, "no example configs in {}", dir.display());
}

#[test]
fn demo_example_has_what_it_promises() {
    let loaded = load_file(&examples_dir().join("demo.toml"), &instant()).unwrap();
    assert_eq!(loaded.events, 1000);
    let graph = loaded.process.compile().unwrap();
    assert!(graph.modules.len() >= 10);
    assert_eq!(graph.paths.len(), 2);
    assert_eq!(graph.end_steps.len(), 2);
    assert!(
        graph
            .modules
            .iter()
            .any(|m| m.concurrency == Concurrency::Serial)
    );
    assert!(
        graph
            .modules
            .iter()
            .any(|m| matches!(m.concurrency, Concurrency::Exclusive(_)))
    );
    assert!(
        graph
            .modules
            .iter()
            .any(|m| m.kind == evflow_core::ModuleKind::Output)
    );
}

#[test]
fn documented_example_loads_and_runs() {
    let doc = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md");
    let Ok(text) = std::fs::read_to_string(&doc) else {
        println!("SKIPPED: {} is absent", doc.display());
        return;
    };
    let start = text.find("```toml\n").expect("a TOML example") + "```toml\n".len();
    let end = start + text[start..].find("```").expect("end of the example");
    let opts = LoadOptions {
        events: Some(30),
        events_per_lumi: None,
        time_scale: 0.0,
        work: None,
        device: None,
    };
    let loaded = load_str(&text[start..end], Format::Toml, &opts, "configuration.md")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (loaded.events_in_flight, loaded.threads),
        (Some(4), Some(2))
    );
    let report = evflow_core::run(
        loaded.process,
        &RunOptions {
            threads: 2,
            events_in_flight: 4,
            ..RunOptions::default()
        },
    )
    .unwrap();
    assert_eq!(report.events, 30);
}

/// A file whose extension names the other format (a TOML job saved as
/// `.json`, a CMS configuration as `.toml`): the error says so, instead of
/// the parser's bare "invalid key".
#[test]
fn a_file_in_the_other_format_than_its_extension_says_so() {
    let dir = std::env::temp_dir().join(format!("evflow-config-ext-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let toml_text = "[process]\nevents = 3\n[[module]]\nlabel = \"a\"\ntype = \"producer\"\n";
    let json_text = r#"{"process": {"source": {"iterations": 3},
        "producers": [{"@label": "a", "@type": "demo::EventTimesBusyWaitProducer",
                       "eventTimes": [0.001]}],
        "paths": {"p": ["a"]}}}"#;
    for (name, text, hint) in [
        ("job.json", toml_text, "(the file is TOML: name it .toml)"),
        ("job.config", toml_text, "(the file is TOML: name it .toml)"),
        (
            "reco.toml",
            json_text,
            "(the file is a CMS JSON configuration: name it .json or .config)",
        ),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        let e = load_file(&path, &instant())
            .map(|_| ())
            .expect_err("the wrong reader fails")
            .to_string();
        assert!(e.starts_with(&path.display().to_string()), "{e}");
        assert!(e.ends_with(hint), "{name}: {e}");
    }
    // A plain syntax error gets no hint.
    let path = dir.join("broken.json");
    std::fs::write(&path, "{\"process\": ").unwrap();
    let e = load_file(&path, &instant())
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(!e.contains("name it"), "{e}");
}

/// Events are numbered from 1: a failure configured on event 0 would never
/// happen, so it is refused, naming the module and the entry.
#[test]
fn failure_on_event_zero_is_refused() {
    let e = error(&with_module(
        "label = \"f\"\ntype = \"filter\"\nfail_on_events = [3, 0]",
    ));
    assert_eq!(
        e,
        "demo.toml: module 'f': fail_on_events[1] is 0: events are numbered from 1"
    );
    assert!(
        load(&with_module(
            "label = \"f\"\ntype = \"filter\"\nfail_on_events = [1]"
        ))
        .is_ok()
    );
}

/// A byte-order mark at the start of a file (some editors write one) is not
/// a syntax error, in either format.
#[test]
fn a_byte_order_mark_is_read_past() {
    let dir = std::env::temp_dir().join(format!("evflow-config-bom-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text) in [
        (
            "job.toml",
            "[process]\nevents = 3\n[[module]]\nlabel = \"a\"\ntype = \"producer\"\n",
        ),
        (
            "reco.config",
            r#"{"process": {"source": {"iterations": 3}, "producers": [{"@label": "a",
                "@type": "demo::EventTimesBusyWaitProducer", "eventTimes": [0.001]}],
                "paths": {"p": ["a"]}}}"#,
        ),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, format!("\u{feff}{text}")).unwrap();
        let loaded = load_file(&path, &instant()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(loaded.events, 3, "{name}");
    }
}

/// A syntax error on a line without a key of its own is not blamed on the
/// key of the line before; inside a value left open on an earlier line
/// (a multi-line array) it is that key's.
#[test]
fn syntax_errors_name_only_the_key_they_are_in() {
    for text in [
        "[process]\nname = \"demo\"\n\"threads\n",
        "[process]\nname = \"demo\" # a [comment\n'threads\n",
        "[process]\nname = \"\"\"a\nb\"\"\"\nthreads 4\n",
    ] {
        let e = error(text);
        assert!(e.starts_with("demo.toml:"), "{e}");
        assert!(!e.contains("name"), "{text:?} -> {e}");
    }
    let e = error(&with_module(
        "label = \"b\"\ntype = \"producer\"\ntimes = [\n  0.1,\n  0.2x,\n]",
    ));
    assert!(e.contains("times: "), "{e}");
}

/// A syntax error inside a `[[module]]` table (the file does not parse, so
/// no table is read) still names the module: by its label, wherever in its
/// table the label is, or by its number without one.
#[test]
fn syntax_errors_in_a_module_name_the_module() {
    let e = error(&with_module(
        "label = \"b\"\ntype = \"producer\"\ntime = { mean = 1 ",
    ));
    assert!(e.contains("module 'b': time: "), "{e}");
    let e = error(&with_module(
        "type = \"producer\"\ntime = 1 2\nlabel = 'late'",
    ));
    assert!(e.contains("module 'late': "), "{e}");
    let e = error(&with_module("type = \"producer\"\ntime = 1 2"));
    assert!(e.contains("module #2: "), "{e}");
    // In a sub-table of the module.
    let e = error(&with_module(
        "label = \"c\"\ntype = \"producer\"\n[module.device]\nkernel = \"x\" y",
    ));
    assert!(e.contains("module 'c': "), "{e}");
    // After the modules, in another table: not a module's.
    let e = error(&format!(
        "{}[process]\nname = \"x\" y\n",
        with_module("label = \"b\"")
    ));
    assert!(!e.contains("module"), "{e}");
    assert!(e.contains("process: "), "{e}");
}

#[test]
fn a_module_may_run_its_time_in_ranges() {
    let text = with_module(
        "label = \"out\"\ntype = \"filter\"\ntime = 0.02\nranges = 8\nconsumes = [\"a\"]\nconcurrency = \"serial\"\n\n[[path]]\nname = \"p\"\nmodules = [\"out\"]",
    );
    let loaded = load(&text).unwrap();
    let report = evflow_core::run(loaded.process, &evflow_core::RunOptions::default()).unwrap();
    assert_eq!(report.paths[0].passed, report.events);
    let e = error(&with_module(
        "label = \"b\"\ntype = \"producer\"\ntime = 0.1\nranges = 0",
    ));
    assert_eq!(
        e,
        "demo.toml: module 'b': ranges must be at least 1 (got 0)"
    );
}

/// Settings that could never take effect are refused by name: an instance
/// name no consumer could name, a drift before the first event, runs past
/// the largest run number (before any event runs), an end path's events
/// selected as if it decided them.
#[test]
fn settings_that_cannot_take_effect_are_refused() {
    for (body, expected) in [
        (
            "label = \"p\"\ntype = \"producer\"\nproduces = [\"a:b\"]",
            "module 'p': produces[0] 'a:b' contains ':' (instance names are consumed as \"label:instance\")",
        ),
        (
            "label = \"p\"\ntype = \"producer\"\nproduces = [\"x\", \" y\"]",
            "module 'p': produces[1] ' y' has surrounding spaces",
        ),
        (
            "label = \"f\"\ntype = \"filter\"\ndrift = { at_event = 0, pass_fraction = 0.5 }",
            "module 'f': drift.at_event is 0: events are numbered from 1",
        ),
    ] {
        let e = error(&with_module(body));
        assert!(e.ends_with(expected), "{e}");
    }
    let e = error(
        "[process]\nevents = 5\n[source]\nfirst_run = 4294967294\nlumis_per_run = 1\n\
         events_per_lumi = 2\n[[module]]\nlabel = \"a\"\ntype = \"producer\"\n",
    );
    assert!(
        e.contains("source: event 5 would be in run 4294967296"),
        "{e}"
    );
    // The last run that fits is accepted.
    assert!(
        load(
            "[process]\nevents = 4\n[source]\nfirst_run = 4294967294\nlumis_per_run = 1\n\
             events_per_lumi = 2\n[[module]]\nlabel = \"a\"\ntype = \"producer\"\n"
        )
        .is_ok()
    );
    let e = error(
        "[[module]]\nlabel = \"a\"\ntype = \"analyzer\"\nselect_events = [\"e2\"]\n\
         [[module]]\nlabel = \"b\"\ntype = \"analyzer\"\n\
         [[end_path]]\nname = \"e\"\nmodules = [\"a\"]\n[[end_path]]\nname = \"e2\"\nmodules = [\"b\"]\n",
    );
    assert!(
        e.contains("module 'a': selects events of 'e2', an end path"),
        "{e}"
    );
}

/// A file that is no configuration, given where one goes: a data file (not
/// UTF-8 text) is named as such, not as damaged ("stream did not contain
/// valid UTF-8"), and a text file whose extension names no configuration
/// format (an event table `events.csv`), read as TOML, says it was.
#[test]
fn a_file_that_is_no_configuration_says_so() {
    let dir = std::env::temp_dir().join(format!("evflow-config-notcfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("events.root");
    std::fs::write(&data, b"root\x00\x00\xff\xfe\x01").unwrap();
    let e = load_file(&data, &instant()).map(|_| ()).unwrap_err();
    assert!(matches!(e, ConfigFileError::Read { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!(
            "{}: cannot read the file: it is not UTF-8 text, so no configuration (a TOML or CMS \
             JSON text file); a data file?",
            data.display()
        )
    );
    let hint = "(the file, named neither .toml nor .json or .config, was read as a TOML \
                configuration: is it one?)";
    for (name, text) in [
        ("events.csv", "nmu,met\n1,20.5\n"),
        ("notes.txt", "x = 1\n"),
        ("job", "[process]\nevnts = 3\n"),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        let e = load_file(&path, &instant())
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(e.starts_with(&path.display().to_string()), "{e}");
        assert!(e.ends_with(hint), "{name}: {e}");
    }
    // A file named as a configuration gets no such hint.
    let path = dir.join("job.toml");
    std::fs::write(&path, "[process]\nevnts = 3\n").unwrap();
    let e = load_file(&path, &instant())
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(!e.contains("was read as"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
