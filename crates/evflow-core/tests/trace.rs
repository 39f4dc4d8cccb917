//! The trace of a job run on several threads: complete (a slice for every
//! execution the instrumented modules logged, every read, transition and
//! external-work wait), on the track of the thread that ran it, in
//! [`TraceSlice::cmp_start`] order; and its Chrome encoding, checked
//! against one built independently from the slices.

mod common;

use std::collections::BTreeMap;

use common::*;
use evflow_core::*;

const EVENTS: u64 = 120;
const EVENTS_PER_LUMI: u64 = 20;
const THREADS: usize = 4;

fn traced_job(log: &std::sync::Arc<Log>) -> Report {
    let helper = Helper::new();
    let mut p = Process::new("traced");
    p.set_source(EmptySource::new(EVENTS).events_per_lumi(EVENTS_PER_LUMI));
    p.add(Probe::new(log, "a").work(300).puts(&[""]).producer());
    p.add(Probe::new(log, "b").work(300).reads(&["a"]).producer());
    // Serial: events queue for it (admission-wait slices).
    p.add(
        Probe::new(log, "s")
            .work(2000)
            .filter()
            .concurrency(Concurrency::Serial),
    );
    // External work: a wait slice per event, on the event slot's track.
    p.add(AsyncProbe::new(Probe::new(log, "x"), &helper, Delay::AfterReturn).producer());
    p.path("p", ["b", "s", "x"]);
    let mut options = threaded(THREADS, 8);
    options.trace = true;
    run_watched(p, options).unwrap()
}

fn count<K: Ord>(keys: impl IntoIterator<Item = K>) -> BTreeMap<K, usize> {
    let mut counts = BTreeMap::new();
    for k in keys {
        *counts.entry(k).or_insert(0) += 1;
    }
    counts
}

#[test]
fn traces_from_several_threads_are_complete_ordered_and_on_their_threads() {
    let log = Log::new();
    let report = traced_job(&log);
    assert_eq!(report.events, EVENTS);
    let trace = report.trace.to_vec();
    assert_eq!(trace.len(), report.trace.len());

    // Complete: one module slice per logged execution (two for the
    // external-work producer: acquire and produce), per module and event.
    let logged = count(log.execs().iter().map(|e| (e.label.to_string(), e.event)));
    let traced = count(
        trace
            .iter()
            .filter(|s| s.category == "module")
            .map(|s| (s.name.to_string(), s.event.expect("a module slice's event"))),
    );
    assert_eq!(traced, logged);
    assert_eq!(
        logged.get(&("x".to_string(), EventId::new(1, 1, 1))),
        Some(&2)
    );
    let of = |category: &str| trace.iter().filter(|s| s.category == category).count();
    assert_eq!(of("source"), EVENTS as usize);
    assert_eq!(
        of("wait"),
        EVENTS as usize,
        "one external-work wait per event"
    );
    let lumis = (EVENTS / EVENTS_PER_LUMI) as usize;
    let transitions = count(
        trace
            .iter()
            .filter(|s| s.category == "transition")
            .map(|s| {
                let name = s.name.to_string();
                name.split(' ').next().unwrap().to_string()
            }),
    );
    assert_eq!(transitions["beginLumi"], lumis);
    assert_eq!(transitions["endLumi"], lumis);
    assert_eq!(transitions["beginRun"], 1);
    assert_eq!(transitions["endRun"], 1);
    assert_eq!(
        report.stalls.is_empty(),
        of("queued") == 0,
        "admission waits are traced as the report counts them"
    );

    // In the documented order.
    for pair in trace.windows(2) {
        assert_ne!(
            TraceSlice::cmp_start(&pair[0], &pair[1]),
            std::cmp::Ordering::Greater,
            "out of order: {:?} before {:?}",
            pair[0],
            pair[1]
        );
    }

    // Each on its own track: an execution of a module that ran once per
    // event is on the track of the pool thread that ran it, waits on the
    // tracks of event slots.
    let ran_on: BTreeMap<(String, EventId), usize> = log
        .execs()
        .iter()
        .filter(|e| &*e.label != "x")
        .map(|e| {
            (
                (e.label.to_string(), e.event),
                e.thread.expect("a pool thread"),
            )
        })
        .collect();
    for s in trace.iter().filter(|s| s.category == "module") {
        if let Some(&thread) = ran_on.get(&(s.name.to_string(), s.event.unwrap())) {
            assert_eq!(s.thread, thread, "{s:?} is not on its thread's track");
        }
    }
    for s in &trace {
        let on_wait_track = s.thread >= EXTERNAL_WAIT_TRACKS;
        assert_eq!(on_wait_track, s.category == "wait", "{s:?}");
        assert!(on_wait_track || s.thread < THREADS, "{s:?}");
    }
    // A thread does one thing at a time: the work on a worker track never
    // overlaps (up to the rounding of microseconds).
    let mut last_end: BTreeMap<usize, f64> = BTreeMap::new();
    for s in trace
        .iter()
        .filter(|s| !matches!(s.category, "wait" | "queued"))
    {
        let end = last_end.entry(s.thread).or_insert(0.0);
        assert!(s.start_us >= *end - 1e-3, "{s:?} overlaps the slice before");
        *end = s.start_us + s.duration_us;
    }
}

/// The Chrome trace as built independently from the slices: the tracks'
/// names, then one complete event per slice, in the trace's order.
fn chrome_reference(trace: &[TraceSlice]) -> serde_json::Value {
    let mut tracks: Vec<usize> = trace.iter().map(|s| s.thread).collect();
    tracks.sort();
    tracks.dedup();
    let mut events: Vec<serde_json::Value> = tracks
        .iter()
        .map(|&tid| {
            let name = if tid >= 1000 {
                format!("external work, event slot {}", tid - 1000)
            } else {
                format!("worker {tid}")
            };
            serde_json::json!({"name": "thread_name", "cat": "__metadata", "ph": "M", "ts": 0.0,
                "dur": 0.0, "pid": 1, "tid": tid, "args": {"name": name}})
        })
        .collect();
    for s in trace {
        let mut e = serde_json::json!({"name": &*s.name, "cat": s.category, "ph": "X",
            "ts": s.start_us, "dur": s.duration_us, "pid": 1, "tid": s.thread});
        if let Some(id) = s.event {
            e["args"] = serde_json::json!({"run": id.run, "lumi": id.lumi, "event": id.event});
        }
        events.push(e);
    }
    serde_json::json!({"traceEvents": events, "displayTimeUnit": "ms"})
}

#[test]
fn the_chrome_trace_holds_every_slice_as_its_reference_does() {
    let log = Log::new();
    let report = traced_job(&log);
    let text = serde_json::to_string_pretty(&report.chrome_trace()).unwrap();
    let encoded: serde_json::Value = serde_json::from_str(&text).unwrap();
    // Both through text: parsing a float back may round it differently
    // from the value it was written from, the same way for both.
    let reference = chrome_reference(&report.trace.to_vec()).to_string();
    let reference: serde_json::Value = serde_json::from_str(&reference).unwrap();
    assert_eq!(encoded, reference);
    // The keys keep their order (readers of the text rely on it).
    let first = text.find("\"traceEvents\"").unwrap();
    assert!(first < text.find("\"displayTimeUnit\"").unwrap());
}
