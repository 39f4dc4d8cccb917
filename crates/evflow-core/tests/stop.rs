//! Graceful stop ([`StopHandle`]): no read after the request, every event
//! read finishes completely, the end transitions run after the last event.

mod common;

use std::sync::Arc;

use common::*;
use evflow_core::*;

/// An [`EmptySource`] that requests the stop while reading event `at`.
struct StopAt {
    inner: EmptySource,
    stop: StopHandle,
    at: u64,
    read: u64,
}

impl Source for StopAt {
    fn next_event(
        &mut self,
        products: &mut SourceProducts,
    ) -> Result<Option<EventId>, ModuleError> {
        self.read += 1;
        if self.read == self.at {
            self.stop.request();
        }
        self.inner.next_event(products)
    }
    fn describe(&self) -> String {
        "stopping source".into()
    }
}

const EVENTS: u64 = 60;

fn job(log: &Arc<Log>, at: u64, mut options: RunOptions) -> Report {
    let stop = StopHandle::new();
    let mut p = Process::new("stop");
    p.set_source(StopAt {
        inner: EmptySource::new(EVENTS).events_per_lumi(5).lumis_per_run(3),
        stop: stop.clone(),
        at,
        read: 0,
    });
    p.add(Probe::new(log, "a").puts(&[""]).producer());
    p.add(
        Probe::new(log, "f")
            .reads(&["a"])
            .pass(|id| id.event % 3 != 0)
            .filter(),
    );
    p.add(Probe::new(log, "count").reads(&["a"]).analyzer());
    p.path("p", ["f"]);
    p.end_path("e", ["count"]);
    options.stop = Some(stop);
    run_watched(p, options).expect("the stopped job succeeds")
}

fn executors() -> Vec<RunOptions> {
    vec![sequential(1), sequential(3), threaded(2, 3), threaded(4, 8)]
}

#[test]
fn stop_finishes_the_events_read_and_runs_the_end_transitions() {
    // Event 23 is the third of lumi 5 (run 2, lumi 2).
    for options in executors() {
        let label = format!("{options:?}");
        let log = Log::new();
        let report = job(&log, 23, options);
        assert!(report.interrupted, "{label}");
        assert_eq!(report.events, 23, "{label}");
        for module in ["a", "f", "count"] {
            let runs = log.runs_per_event(module);
            assert_eq!(
                runs.keys().copied().collect::<Vec<_>>(),
                (1..=23).collect::<Vec<_>>(),
                "{label}: {module}"
            );
            assert!(runs.values().all(|&n| n == 1), "{label}: {module}");
        }
        check_transitions(&log.execs(), &log.hooks()).unwrap_or_else(|e| panic!("{label}: {e}"));
        let hooks: Vec<Hook> = log
            .hooks()
            .iter()
            .filter(|h| &*h.label == "a")
            .map(|h| h.hook)
            .collect();
        assert_eq!(
            hooks[hooks.len() - 3..],
            [Hook::EndLumi(2, 2), Hook::EndRun(2), Hook::EndJob],
            "{label}"
        );
        assert_eq!(report.paths[0].visited, 23, "{label}");
    }
}

#[test]
fn stop_at_the_end_of_the_input_is_no_interruption() {
    for (at, interrupted) in [(EVENTS, true), (EVENTS + 1, false)] {
        for options in executors() {
            let log = Log::new();
            let report = job(&log, at, options);
            assert_eq!(report.interrupted, interrupted, "stop at read {at}");
            assert_eq!(report.events, EVENTS);
        }
    }
}

#[test]
fn stop_on_the_first_event_of_a_block_drops_it_before_its_transitions() {
    // Event 26 opens lumi 6 (run 2, lumi 3): it is held for its transitions
    // when the stop is seen, and never starts.
    for options in executors() {
        let log = Log::new();
        let report = job(&log, 26, options);
        assert!(report.interrupted);
        assert_eq!(report.events, 25);
        check_transitions(&log.execs(), &log.hooks()).unwrap();
        assert!(!log.hooks().iter().any(|h| h.hook == Hook::BeginLumi(2, 3)));
    }
}
