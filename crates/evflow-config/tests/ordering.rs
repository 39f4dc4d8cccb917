//! The TOML keys of filter ordering (issue 3): reorderable paths, `after`
//! constraints, `filter_order`, `[ordering]`, and the synthetic filter
//! options (correlated, drifting, jittered cost, cuts on an event table).

use evflow_config::{Format, LoadOptions, load_file, load_str};
use evflow_core::ordering::Policy;
use evflow_core::{RunOptions, run};

const PIPELINE: &str = r#"
[process]
name = "cuts"
events = 3000
filter_order = "adaptive"

[ordering]
seed = 7
warmup_events = 32

[[module]]
label = "slowLoose"
type = "filter"
time = 20e-6
pass_fraction = 0.95

[[module]]
label = "tight"
type = "filter"
time = 2e-6
pass_fraction = 0.3

[[module]]
label = "twin"
type = "filter"
time = 1e-6
correlated_with = "tight"
otherwise_pass = 0.1

[[module]]
label = "mid"
type = "filter"
time = 1e-6
time_jitter = 0.5
pass_fraction = 0.6

[[module]]
label = "drifty"
type = "filter"
pass_fraction = 0.98
drift = { at_event = 1501, pass_fraction = 0.2 }

[[path]]
name = "sel"
modules = ["slowLoose", "mid", "tight", "twin", "drifty"]
reorderable = true
after = [["twin", "mid"]]
"#;

fn load(text: &str) -> Result<evflow_config::Loaded, String> {
    load_str(text, Format::Toml, &LoadOptions::default(), "cuts.toml").map_err(|e| e.to_string())
}

#[test]
fn reorderable_paths_and_synthetic_options_load_and_give_the_same_results_under_every_policy() {
    let loaded = load(PIPELINE).unwrap();
    assert_eq!(loaded.ordering.default, Policy::Adaptive);
    assert_eq!(loaded.ordering.tuning.seed, 7);
    assert_eq!(loaded.ordering.tuning.warmup_events, 32);
    let path = &loaded.process.paths()[0];
    assert!(path.reorderable);
    assert_eq!(path.after, vec![("twin".to_string(), "mid".to_string())]);
    let mut results = Vec::new();
    for policy in [Policy::Fixed, Policy::Adaptive, Policy::HepFrame] {
        let mut loaded = load(PIPELINE).unwrap();
        loaded.ordering.default = policy;
        let report = run(
            loaded.process,
            &RunOptions {
                threads: 2,
                events_in_flight: 2,
                planner: Some(loaded.ordering.factory()),
                ..RunOptions::default()
            },
        )
        .unwrap();
        let p = &report.paths[0];
        // Pass counts per filter are order-dependent; the path's are not.
        results.push((p.visited, p.passed));
        if policy == Policy::Adaptive {
            assert!(report.orderings.len() >= 2, "{:#?}", report.orderings);
        }
    }
    assert!(results.windows(2).all(|w| w[0] == w[1]), "{results:?}");
}

#[test]
fn correlated_filters_pass_whenever_their_base_passes() {
    let text = PIPELINE.replace("reorderable = true", "reorderable = false");
    let text = text.replace(
        r#"modules = ["slowLoose", "mid", "tight", "twin", "drifty"]"#,
        r#"modules = ["mid", "tight", "twin"]"#,
    );
    let loaded = load(&text).unwrap();
    let report = run(loaded.process, &RunOptions::default()).unwrap();
    let steps = &report.paths[0].filters;
    // twin after tight removes nothing.
    assert_eq!(steps[2].visited, steps[2].passed);
    assert!(steps[1].passed < steps[1].visited);
}

#[test]
fn event_table_cuts_decide_by_the_row_of_each_event() {
    let dir = std::env::temp_dir().join(format!("evflow-config-table-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("events.csv"),
        "njet,met\n0,10.5\n4,30\n2,55\n5,5\n",
    )
    .unwrap();
    let config = dir.join("cuts.toml");
    std::fs::write(
        &config,
        r#"
[process]
filter_order = "hepframe"

[source]
type = "table"
file = "events.csv"

[[module]]
label = "jets"
type = "filter"
cut = "njet >= 2"

[[module]]
label = "met"
type = "filter"
cut = "met > 20"

[[path]]
name = "sel"
modules = ["met", "jets"]
reorderable = true
filter_order = "adaptive"
"#,
    )
    .unwrap();
    let loaded = load_file(&config, &LoadOptions::default()).unwrap();
    // Events default to the rows of the table.
    assert_eq!(loaded.events, 4);
    assert_eq!(loaded.ordering.default, Policy::HepFrame);
    assert_eq!(loaded.ordering.per_path["sel"], Policy::Adaptive);
    let report = run(loaded.process, &RunOptions::default()).unwrap();
    // Rows 2 (4 jets, met 30) and 3 (2 jets, met 55) pass.
    assert_eq!(report.paths[0].passed, 2);
    // More events than rows cycle through the table.
    let loaded = load_file(
        &config,
        &LoadOptions {
            events: Some(10),
            ..LoadOptions::default()
        },
    )
    .unwrap();
    let report = run(loaded.process, &RunOptions::default()).unwrap();
    assert_eq!(report.paths[0].passed, 5);
    // A NaN cell would fail `met > 20` in silence: refused, naming the
    // configuration, the file, its line, the event and the column.
    std::fs::write(dir.join("events.csv"), "njet,met\n0,10.5\n4,NaN\n").unwrap();
    let e = load_file(&config, &LoadOptions::default())
        .map(|_| ())
        .unwrap_err()
        .to_string();
    let csv = dir.join("events.csv");
    assert_eq!(
        e,
        format!(
            "{}: source.file: '{}': line 3 (event 2), column 'met': 'NaN' is not a finite \
             number (NaN and infinities are refused)",
            config.display(),
            csv.display()
        )
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn ordering_errors_name_the_key_at_fault() {
    let cases: Vec<(String, &str)> = vec![
        (
            PIPELINE.replace(r#"filter_order = "adaptive""#, r#"filter_order = "smart""#),
            "process.filter_order: unknown filter order 'smart' (known: fixed, adaptive, hepframe)",
        ),
        (
            PIPELINE.replace(r#"after = [["twin", "mid"]]"#, r#"after = [["twin"]]"#),
            "path[0].after[0]: must be a pair",
        ),
        (
            PIPELINE.replace(
                r#"after = [["twin", "mid"]]"#,
                r#"after = [["twin", "mid"], ["mid", "twin"]]"#,
            ),
            "path 'sel': the 'after' constraints form a cycle: mid -> twin -> mid",
        ),
        (
            PIPELINE.replace(
                r#"after = [["twin", "mid"]]"#,
                r#"after = [["twin", "nope"]]"#,
            ),
            "module 'nope': is named in an 'after' constraint",
        ),
        (
            PIPELINE.replace("correlated_with = \"tight\"", "correlated_with = \"twin\""),
            "correlated_with forms a cycle",
        ),
        (
            PIPELINE.replace("otherwise_pass = 0.1", ""),
            "correlated_with needs otherwise_pass",
        ),
        (
            PIPELINE.replace("pass_fraction = 0.3", "cut = \"njet > 1\""),
            "cut needs an event table",
        ),
        (
            PIPELINE.replace("time_jitter = 0.5", "time_jitter = 1.5"),
            "time_jitter must be between 0 and 1",
        ),
        (
            PIPELINE.replace("warmup_events = 32", "warmup_events = 0"),
            "ordering.warmup_events: must be at least 1",
        ),
        (
            PIPELINE.replace(
                "reorderable = true",
                "reorderable = true\nfilter_order = \"x\"",
            ),
            "path[0].filter_order: unknown filter order 'x'",
        ),
        (
            PIPELINE.replace("reorderable = true", "filter_order = \"adaptive\""),
            "needs reorderable = true",
        ),
    ];
    for (text, expected) in cases {
        let error = load(&text)
            .err()
            .unwrap_or_else(|| panic!("no error for {expected}"));
        assert!(
            error.contains(expected),
            "{error}\n  does not contain: {expected}"
        );
        assert!(error.starts_with("cuts.toml"), "{error}");
    }
}

/// A reorderable path holds filters only: an analyzer between its cuts would
/// see other events under each order, and a producer on it runs on other
/// events; the file is refused, naming the module and the path.
#[test]
fn a_reorderable_path_of_a_producer_or_an_analyzer_is_refused_by_name() {
    let extra = r#"
[[module]]
label = "jets"
type = "producer"

[[module]]
label = "plots"
type = "analyzer"
"#;
    for (label, kind) in [("jets", "producer"), ("plots", "analyzer")] {
        let text = format!("{PIPELINE}{extra}").replace(
            r#"modules = ["slowLoose", "mid","#,
            &format!(r#"modules = ["slowLoose", "{label}", "mid","#),
        );
        let error = load(&text)
            .err()
            .unwrap_or_else(|| panic!("a {kind} on a reorderable path loaded"));
        let expected = format!(
            "cuts.toml: module '{label}': is {} {kind}, but reorderable path 'sel' may hold only filters",
            if kind == "analyzer" { "an" } else { "a" }
        );
        assert_eq!(error, expected);
        // The same path, not reorderable, keeps them.
        load(
            &text
                .replace("reorderable = true", "")
                .replace(r#"after = [["twin", "mid"]]"#, ""),
        )
        .unwrap();
    }
}
