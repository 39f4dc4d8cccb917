//! The figures `evflow report` prints from a report, checked before it
//! prints any: a figure that is there must be a number, finite and not
//! negative. The printer reads both faces' reports and older ones, so a
//! figure may be missing (or null); a damaged one — a hand-edited report,
//! another program's file — is named, not printed as 0.

use serde_json::Value;

/// The job's own figures.
const JOB: &[&str] = &[
    "events",
    "events_processed",
    "batches",
    "wall_s",
    "cpu_s",
    "throughput_ev_s",
    "steady_throughput_ev_s",
    "threads",
    "events_in_flight",
];

/// Per list of the report, the figures of each of its entries.
const LISTS: &[(&str, &[&str])] = &[
    ("modules", &["calls", "run_s", "wait_s", "queue_s"]),
    ("paths", &["visited", "passed"]),
    ("stalls", &["waited_s", "run", "lumi", "event"]),
    ("failed_events", &["run", "lumi", "event"]),
];

/// The first damaged figure of `doc`, as `where: what`.
pub(crate) fn check(doc: &Value) -> Result<(), String> {
    for key in JOB {
        figure(doc, key, "")?;
    }
    for (list, keys) in LISTS {
        for (i, entry) in doc[*list].as_array().into_iter().flatten().enumerate() {
            let at = format!("{list}[{i}].");
            for key in *keys {
                figure(entry, key, &at)?;
            }
            // A path's steps.
            for (j, step) in entry["filters"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                for key in ["visited", "passed"] {
                    figure(step, key, &format!("{at}filters[{j}]."))?;
                }
            }
        }
    }
    Ok(())
}

fn figure(entry: &Value, key: &str, at: &str) -> Result<(), String> {
    match entry.get(key) {
        None | Some(Value::Null) => Ok(()),
        Some(v) if v.as_f64().is_some_and(|x| x.is_finite() && x >= 0.0) => Ok(()),
        Some(v) => Err(format!("'{at}{key}' is {v}, not a number >= 0")),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::check;

    #[test]
    fn a_damaged_figure_is_named_with_where_it_is() {
        let good = json!({
            "events": 50, "wall_s": 0.2, "cpu_s": null,
            "modules": [{"label": "a", "calls": 50, "run_s": 0.01, "wait_s": 0.0, "queue_s": 0.0}],
            "paths": [{"name": "p", "visited": 50, "passed": 20,
                       "filters": [{"label": "f", "visited": 50, "passed": 20}]}],
        });
        assert_eq!(check(&good), Ok(()));
        // Missing figures are fine: older reports and the other face.
        assert_eq!(check(&json!({"modules": [{"label": "a"}]})), Ok(()));
        for (doc, named) in [
            (json!({"wall_s": "abc"}), "'wall_s' is \"abc\""),
            (json!({"wall_s": -3.0}), "'wall_s' is -3.0"),
            (
                json!({"modules": [{"calls": 1}, {"run_s": "x"}]}),
                "'modules[1].run_s'",
            ),
            (
                json!({"paths": [{"filters": [{"passed": -1}]}]}),
                "'paths[0].filters[0].passed' is -1",
            ),
            (
                json!({"stalls": [{"event": true}]}),
                "'stalls[0].event' is true",
            ),
        ] {
            let error = check(&doc).unwrap_err();
            assert!(error.contains(named), "{error}");
        }
    }
}
