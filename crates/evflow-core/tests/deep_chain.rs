//! A chain of prerequisites as long as the graph: an event's requests walk
//! it on a stack of their own, not the worker thread's (a chain of 50 000
//! producers aborted the process with a stack overflow).

mod common;

use common::*;
use evflow_core::*;

#[test]
fn a_chain_of_a_hundred_thousand_producers_runs_on_every_executor() {
    const LINKS: usize = 100_000;
    const EVENTS: u64 = 3;
    for options in [threaded(2, 2), sequential(2)] {
        let log = Log::new();
        let mut p = Process::new("chain");
        p.set_source(EmptySource::new(EVENTS));
        p.add(Probe::new(&log, "p0").work(0).puts(&[""]).producer());
        for i in 1..LINKS {
            let before = format!("p{}", i - 1);
            p.add(
                Probe::new(&log, &format!("p{i}"))
                    .work(0)
                    .reads(&[before.as_str()])
                    .puts(&[""])
                    .producer(),
            );
        }
        let last = format!("p{}", LINKS - 1);
        p.add(
            Probe::new(&log, "cut")
                .work(0)
                .reads(&[last.as_str()])
                .filter(),
        );
        p.path("sel", ["cut"]);
        let label = format!("{options:?}");
        let report = run_watched(p, options).unwrap_or_else(|e| panic!("{label}: {e}"));
        assert_eq!(report.events, EVENTS, "{label}");
        // Every link ran once per event, each after the one it reads.
        let execs = log.execs();
        assert_eq!(execs.len(), (LINKS + 1) * EVENTS as usize, "{label}");
        for e in 1..=EVENTS {
            let mut at: Vec<(u64, u64)> = vec![(0, 0); LINKS];
            for x in execs
                .iter()
                .filter(|x| x.event.event == e && x.label.starts_with('p'))
            {
                let i: usize = x.label[1..].parse().unwrap();
                at[i] = (x.start, x.end);
            }
            for i in 1..LINKS {
                assert!(
                    at[i - 1].1 < at[i].0,
                    "{label}: event {e}: p{i} before p{}",
                    i - 1
                );
            }
        }
    }
}
