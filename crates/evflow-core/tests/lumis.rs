//! Concurrent luminosity blocks: events of up to N blocks are in flight at
//! once; every end-lumi comes after all events of its block, in block order,
//! for every module instance (see also the seeded stress suite, which draws
//! N, threads, events in flight and block lengths at random).

mod common;

use std::collections::BTreeSet;

use common::*;
use evflow_core::*;

/// The (run, lumi) of every event of a source, in order.
fn layout(mut source: EmptySource) -> Vec<EventId> {
    let mut products = SourceProducts::default();
    std::iter::from_fn(|| source.next_event(&mut products).unwrap()).collect()
}

/// The begin-lumi hooks every instance must see, in order.
fn lumis_of(events: &[EventId]) -> Vec<Hook> {
    let mut lumis: Vec<Hook> = Vec::new();
    for id in events {
        let h = Hook::BeginLumi(id.run, id.lumi);
        if lumis.last() != Some(&h) {
            lumis.push(h);
        }
    }
    lumis
}

fn job(
    source: &EmptySource,
    log: &std::sync::Arc<Log>,
    hold: Option<&std::sync::Arc<Hold>>,
) -> Process {
    let mut p = Process::new("lumis");
    p.set_source(source.clone());
    let prod = Probe::new(log, "prod").puts(&[""]);
    p.add(match hold {
        Some(h) => prod.hold(h).producer(),
        None => prod.producer(),
    });
    p.add(
        Probe::new(log, "ser")
            .reads(&["prod"])
            .analyzer()
            .concurrency(Concurrency::Serial),
    );
    p.add(
        Probe::new(log, "clo")
            .work(200)
            .cloned(2, ModuleKind::Filter),
    );
    p.add(Probe::new(log, "idle").producer());
    p.path("p", ["clo"]);
    p.end_path("e", ["ser"]);
    p
}

fn check(label: &str, events: &[EventId], log: &Log, report: &Report, n: usize) {
    assert_eq!(report.events, events.len() as u64, "{label}");
    let execs = log.execs();
    let hooks = log.hooks();
    assert_eq!(execs.len(), 3 * events.len(), "{label}");
    check_transitions(&execs, &hooks).unwrap_or_else(|e| panic!("{label}: {e}"));
    let open = max_open_lumis(&hooks);
    assert!(open <= n, "{label}: {open} blocks open at once");
    assert!(report.peak_concurrent_lumis <= n, "{label}");
    // Every instance, including one that never runs on events, sees every
    // block begun and ended once, in the source's order.
    let want = lumis_of(events);
    let runs: BTreeSet<u32> = events.iter().map(|e| e.run).collect();
    for (m, inst) in [("prod", 0), ("ser", 0), ("clo", 0), ("clo", 1), ("idle", 0)] {
        let got: Vec<Hook> = hooks
            .iter()
            .filter(|h| &*h.label == m && h.instance == inst)
            .map(|h| h.hook)
            .collect();
        let begins: Vec<Hook> = got
            .iter()
            .copied()
            .filter(|h| matches!(h, Hook::BeginLumi(..)))
            .collect();
        let ends: Vec<Hook> = got
            .iter()
            .filter_map(|h| match *h {
                Hook::EndLumi(r, l) => Some(Hook::BeginLumi(r, l)),
                _ => None,
            })
            .collect();
        assert_eq!(begins, want, "{label}: {m}#{inst} begin-lumis");
        assert_eq!(ends, want, "{label}: {m}#{inst} end-lumis");
        let run_ends = got.iter().filter(|h| matches!(h, Hook::EndRun(_))).count();
        assert_eq!(run_ends, runs.len(), "{label}: {m}#{inst}");
        assert_eq!(got.first(), Some(&Hook::BeginJob), "{label}");
        assert_eq!(got.last(), Some(&Hook::EndJob), "{label}");
    }
}

#[test]
fn events_of_the_next_blocks_start_before_the_previous_block_ends() {
    // One event per block: `n` events inside `prod` at once are `n` blocks
    // in flight. The hold makes the overlap happen on any machine.
    let source = EmptySource::new(24).events_per_lumi(1).lumis_per_run(6);
    let events = layout(source.clone());
    for (n, threads, k) in [(2, 2, 4), (2, 4, 8), (3, 4, 8)] {
        let log = Log::new();
        // A large budget: it is spent only while the other threads are not
        // scheduled (a loaded machine), never when the overlap happens.
        let hold = Hold::new(n as u32, 2_000_000);
        let mut options = threaded(threads, k);
        options.concurrent_lumis = n;
        let label = format!("{options:?}");
        let report = run_watched(job(&source, &log, Some(&hold)), options).unwrap();
        check(&label, &events, &log, &report, n);
        assert!(hold.met(), "{label}: no {n} blocks were in flight at once");
        assert_eq!(report.peak_concurrent_lumis, n, "{label}");
        assert_eq!(max_open_lumis(&log.hooks()), n, "{label}");
    }
}

#[test]
fn one_block_at_a_time_never_overlaps_blocks() {
    let source = EmptySource::new(24).events_per_lumi(1).lumis_per_run(6);
    let events = layout(source.clone());
    let log = Log::new();
    // The hold cannot be met: its budget runs out once, then the job goes on.
    let hold = Hold::new(2, 2_000);
    let mut options = threaded(2, 4);
    options.concurrent_lumis = 1;
    let report = run_watched(job(&source, &log, Some(&hold)), options).unwrap();
    check("one block", &events, &log, &report, 1);
    assert!(!hold.met());
    assert_eq!(report.peak_concurrent_lumis, 1);
}

#[test]
fn blocks_of_several_lengths_and_runs_on_every_executor() {
    let sources = [
        EmptySource::new(60).events_per_lumi(4).lumis_per_run(3),
        EmptySource::new(10)
            .events_per_lumi(3)
            .lumis_per_run(2)
            .first_run(7),
        EmptySource::new(9).events_per_lumi(1),
    ];
    for source in sources {
        let events = layout(source.clone());
        for n in [2, 4] {
            for mut options in [threaded(4, 8), threaded(2, 3), sequential(4)] {
                options.concurrent_lumis = n;
                let label = format!("{options:?} {source:?}");
                let log = Log::new();
                let report = run_watched(job(&source, &log, None), options).unwrap();
                check(&label, &events, &log, &report, n);
            }
        }
    }
}

/// Run numbers are 32 bits: a source that would go past the largest fails
/// on the event that would, instead of wrapping to run 0 (which reorders
/// the run transitions silently).
#[test]
fn run_numbers_past_the_largest_are_an_error_not_a_wrap() {
    let mut source = EmptySource::new(3)
        .events_per_lumi(1)
        .lumis_per_run(1)
        .first_run(u32::MAX);
    let mut products = SourceProducts::default();
    let first = source.next_event(&mut products).unwrap().unwrap();
    assert_eq!((first.run, first.lumi, first.event), (u32::MAX, 1, 1));
    let err = source
        .next_event(&mut products)
        .expect_err("run u32::MAX + 1 does not exist");
    assert!(
        err.message().contains("event 2 would be in run 4294967296"),
        "{err}"
    );
    // Through the engine: the job fails, naming the event, and reports no
    // event of a run 0.
    let log = std::sync::Arc::new(Log::default());
    let source = EmptySource::new(3)
        .events_per_lumi(1)
        .lumis_per_run(1)
        .first_run(u32::MAX);
    let p = job(&source, &log, None);
    let options = RunOptions {
        threads: 2,
        events_in_flight: 2,
        ..Default::default()
    };
    match run(p, &options) {
        Err(RunError::Failed { error, .. }) => {
            assert!(
                error.to_string().contains("event 2 would be in run"),
                "{error}"
            )
        }
        other => panic!("expected a failed job, got {other:?}"),
    }
}
