//! Failures: module errors and panics under both error policies, errors in
//! the source, in transition hooks and in external work, and configuration
//! errors found before any event runs. Every job runs under a watchdog, so
//! a deadlock fails the test instead of hanging it.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::*;
use evflow_core::*;

const N: u64 = 64;

fn all_options() -> Vec<RunOptions> {
    vec![threaded(4, 8), threaded(1, 2), sequential(3)]
}

/// The job error and partial report of a failed run.
fn failed(result: Result<Report, RunError>) -> (JobError, Report) {
    match result {
        Err(RunError::Failed { error, report }) => (error, *report),
        Err(RunError::Config(e)) => {
            panic!("expected a job failure, got a configuration error: {e}")
        }
        Ok(r) => panic!(
            "expected a job failure, the job succeeded with {} events",
            r.events
        ),
    }
}

/// Every module instance's transitions nest and were all closed, ending
/// with endJob.
fn assert_clean_transitions(log: &Log, what: &str) {
    let hooks = log.hooks();
    check_transitions(&log.execs(), &hooks).unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut per_instance: BTreeMap<(String, u32), Vec<Hook>> = BTreeMap::new();
    for h in &hooks {
        per_instance
            .entry((h.label.to_string(), h.instance))
            .or_default()
            .push(h.hook);
    }
    for ((label, inst), list) in per_instance {
        assert_eq!(
            list.first(),
            Some(&Hook::BeginJob),
            "{what}: {label}#{inst}: {list:?}"
        );
        assert_eq!(
            list.last(),
            Some(&Hook::EndJob),
            "{what}: {label}#{inst}: {list:?}"
        );
        let begins = list
            .iter()
            .filter(|h| matches!(h, Hook::BeginRun(_) | Hook::BeginLumi(..)))
            .count();
        let ends = list
            .iter()
            .filter(|h| matches!(h, Hook::EndRun(_) | Hook::EndLumi(..)))
            .count();
        assert_eq!(
            begins, ends,
            "{what}: {label}#{inst} left a run or lumi open: {list:?}"
        );
    }
}

/// A process whose "bad" producer fails as configured; "after" reads it.
fn failing_process(log: &std::sync::Arc<Log>, bad: Probe) -> Process {
    let mut p = Process::new("failing");
    p.set_source(EmptySource::new(N).events_per_lumi(10));
    p.add(Probe::new(log, "first").puts(&[""]).producer());
    p.add(bad.reads(&["first"]).puts(&[""]).producer());
    p.add(Probe::new(log, "after").reads(&["bad"]).analyzer());
    p.add(
        Probe::new(log, "ser")
            .work(100)
            .filter()
            .concurrency(Concurrency::Serial),
    );
    p.path("p", ["ser", "after"]);
    p
}

#[test]
fn fail_policy_module_error_fails_the_job_naming_module_and_event() {
    for options in all_options() {
        let log = Log::new();
        let p = failing_process(&log, Probe::new(&log, "bad").fail_on(&[7]));
        let label = format!("{options:?}");
        let (error, report) = failed(run_watched(p, options));
        match &error {
            JobError::Module {
                module,
                event,
                message,
            } => {
                assert_eq!(module, "bad", "{label}");
                assert_eq!(*event, EventId::new(1, 1, 7), "{label}");
                assert!(
                    message.contains("probe bad fails on event 7"),
                    "{label}: {message}"
                );
            }
            other => panic!("{label}: expected a module error, got {other:?}"),
        }
        assert!(
            error.to_string().contains("bad") && error.to_string().contains("event 7"),
            "{label}: {error}"
        );
        assert_eq!(report.module("bad").unwrap().failures, 1, "{label}");
        assert!(report.events < N, "{label}: the job did not stop");
        assert!(
            !log.runs_per_event("after").contains_key(&7),
            "{label}: a consumer of the failed product ran"
        );
        assert_clean_transitions(&log, &label);
    }
}

#[test]
fn fail_policy_module_panic_fails_the_job_with_the_panic_message() {
    for options in all_options() {
        let log = Log::new();
        let p = failing_process(&log, Probe::new(&log, "bad").panic_on(&[5]));
        let label = format!("{options:?}");
        let (error, _report) = failed(run_watched(p, options));
        match &error {
            JobError::Module {
                module,
                event,
                message,
            } => {
                assert_eq!(module, "bad");
                assert_eq!(event.event, 5);
                assert!(
                    message.contains("panic") && message.contains("probe bad panics on event 5"),
                    "{label}: {message}"
                );
            }
            other => panic!("{label}: expected a module error, got {other:?}"),
        }
        assert_clean_transitions(&log, &label);
    }
}

#[test]
fn skip_event_policy_lists_exactly_the_failed_events() {
    let failing: BTreeSet<u64> = [3, 11, 17, 29, 40].into();
    for options in all_options() {
        let log = Log::new();
        let mut p = failing_process(
            &log,
            Probe::new(&log, "bad")
                .fail_on(&[3, 17, 29])
                .panic_on(&[11]),
        );
        p.add(
            Probe::new(&log, "endBad")
                .reads(&["first"])
                .fail_on(&[40])
                .analyzer(),
        );
        p.end_path("e", ["endBad"]);
        let label = format!("{options:?}");
        let report = run_watched(p, skip(options)).unwrap_or_else(|e| panic!("{label}: {e}"));
        let ids: Vec<u64> = report.failed_events.iter().map(|f| f.event).collect();
        assert_eq!(
            ids,
            failing.iter().copied().collect::<Vec<_>>(),
            "{label}: {:?}",
            report.failed_events
        );
        for f in &report.failed_events {
            let (module, text) = match f.event {
                40 => ("endBad", "probe endBad fails on event 40".to_string()),
                11 => ("bad", "probe bad panics on event 11".to_string()),
                e => ("bad", format!("probe bad fails on event {e}")),
            };
            assert_eq!(f.module, module, "{label}");
            assert!(f.message.contains(&text), "{label}: {}", f.message);
            assert_eq!((f.run, f.lumi), (1, (f.event as u32 - 1) / 10 + 1));
        }
        assert_eq!(report.events, N - failing.len() as u64, "{label}");
        assert_eq!(report.module("bad").unwrap().failures, 4);
        // Every other event was processed completely; consumers of a failed
        // product never ran.
        let after = log.runs_per_event("after");
        let want: BTreeMap<u64, usize> = (1..=N)
            .filter(|e| ![3, 11, 17, 29].contains(e))
            .map(|e| (e, 1))
            .collect();
        assert_eq!(after, want, "{label}");
        assert_eq!(report.paths[0].visited, N - failing.len() as u64);
        assert_clean_transitions(&log, &label);
    }
}

/// A sampled event of an adaptive path goes on, after the step that
/// rejected it, with the other steps, to measure them for the planner; its
/// decision is already made. A step (or a producer only such a measurement
/// needs) failing there fails nothing: under either policy the job runs as
/// in the written order, where `cut` rejects the odd events and `heavy` and
/// its `jets` producer never run on them.
#[test]
fn a_module_failing_where_only_the_planner_measures_it_fails_nothing() {
    use evflow_core::ordering::{OrderingOptions, Policy};
    for options in all_options() {
        for on_error in [ErrorPolicy::Fail, ErrorPolicy::SkipEvent] {
            let log = Log::new();
            let mut p = Process::new("measured");
            p.set_source(EmptySource::new(N).events_per_lumi(10));
            p.add(
                Probe::new(&log, "cut")
                    .pass(|id| id.event % 2 == 0)
                    .filter(),
            );
            p.add(
                Probe::new(&log, "jets")
                    .fail_on(&[11])
                    .puts(&[""])
                    .producer(),
            );
            p.add(
                Probe::new(&log, "heavy")
                    .reads(&["jets"])
                    .fail_on(&[3, 5, 9, 21, 33])
                    .filter(),
            );
            p.add_path(PathDesc::new("sel", ["cut", "heavy"]).reorderable(true));
            let options = RunOptions {
                on_error,
                planner: Some(OrderingOptions::new(Policy::Adaptive).factory()),
                ..options.clone()
            };
            let label = format!("{options:?}");
            let report = run_watched(p, options).unwrap_or_else(|e| panic!("{label}: {e}"));
            assert!(
                report.failed_events.is_empty(),
                "{label}: {:?}",
                report.failed_events
            );
            assert_eq!(report.events, N, "{label}");
            assert_eq!(report.paths[0].passed, N / 2, "{label}");
            // The measurements ran: the warm-up samples every event.
            let odd = log
                .runs_per_event("heavy")
                .into_keys()
                .filter(|e| e % 2 == 1);
            assert!(odd.count() > 10, "{label}");
        }
    }
}

#[test]
fn source_errors_and_panics_fail_the_job() {
    for options in all_options() {
        for policy in [ErrorPolicy::Fail, ErrorPolicy::SkipEvent] {
            for panics in [false, true] {
                let log = Log::new();
                let mut p = failing_process(&log, Probe::new(&log, "bad"));
                let source = TestSource::new(EmptySource::new(N).events_per_lumi(4), &log);
                p.set_source(if panics {
                    source.panic_at(6)
                } else {
                    source.fail_at(6)
                });
                let label = format!("{options:?} {policy:?} panic={panics}");
                let mut o = options.clone();
                o.on_error = policy;
                let (error, report) = failed(run_watched(p, o));
                let JobError::Source { message } = &error else {
                    panic!("{label}: expected a source error, got {error:?}")
                };
                let text = if panics {
                    "test source panics reading event 6"
                } else {
                    "test source cannot read event 6"
                };
                assert!(message.contains(text), "{label}: {message}");
                assert!(message.contains("test source"), "{label}: {message}");
                assert!(report.events <= 5, "{label}");
                assert_eq!(
                    log.reads.load(std::sync::atomic::Ordering::SeqCst),
                    6,
                    "{label}: the source was read on"
                );
                assert!(log.execs().iter().all(|e| e.event.event <= 5), "{label}");
                assert_clean_transitions(&log, &label);
            }
        }
    }
}

#[test]
fn transition_errors_fail_the_job_naming_module_and_transition() {
    let cases: [(Hook, bool, &str); 6] = [
        (Hook::BeginJob, false, "beginJob"),
        (Hook::BeginRun(1), true, "beginRun 1"),
        (Hook::BeginLumi(1, 3), false, "beginLumi 1:3"),
        (Hook::EndLumi(1, 2), true, "endLumi 1:2"),
        (Hook::EndRun(1), false, "endRun 1"),
        (Hook::EndJob, false, "endJob"),
    ];
    for mut options in [threaded(4, 8), sequential(2)] {
        // One block at a time: the earlier blocks' events are all done when
        // a later block begins, so a failing beginLumi finds none in flight.
        // (With blocks in flight a failing transition aborts the job and
        // cancels the events in flight, as a failing module does.)
        options.concurrent_lumis = 1;
        for (hook, panics, name) in cases {
            let log = Log::new();
            let mut p = Process::new("transition-error");
            p.set_source(TestSource::new(
                EmptySource::new(12).events_per_lumi(4),
                &log,
            ));
            p.add(Probe::new(&log, "ok").puts(&[""]).producer());
            p.add(
                Probe::new(&log, "hooked")
                    .fail_hook(hook, panics)
                    .reads(&["ok"])
                    .analyzer(),
            );
            p.end_path("e", ["hooked"]);
            let label = format!("{options:?} {hook:?} panic={panics}");
            let (error, report) = failed(run_watched(p, options.clone()));
            match &error {
                JobError::Transition {
                    module,
                    transition,
                    message,
                } => {
                    assert_eq!(module, "hooked", "{label}");
                    assert_eq!(transition, name, "{label}");
                    let text = format!(
                        "probe hooked {} in {hook:?}",
                        if panics { "panics" } else { "fails" }
                    );
                    assert!(message.contains(&text), "{label}: {message}");
                    if panics {
                        assert!(message.contains("panic"), "{label}: {message}");
                    }
                }
                other => panic!("{label}: expected a transition error, got {other:?}"),
            }
            let execs = log.execs();
            match hook {
                Hook::BeginJob => {
                    assert!(
                        execs.is_empty(),
                        "{label}: modules ran after beginJob failed"
                    );
                    assert_eq!(
                        log.reads.load(std::sync::atomic::Ordering::SeqCst),
                        0,
                        "{label}: the source was read"
                    );
                }
                Hook::BeginRun(_) => {
                    assert!(execs.is_empty(), "{label}: events ran without their run")
                }
                Hook::BeginLumi(r, l) => {
                    assert!(
                        execs.iter().all(|e| (e.event.run, e.event.lumi) < (r, l)),
                        "{label}: events of the lumi ran"
                    );
                    assert_eq!(
                        report.events, 8,
                        "{label}: the earlier lumis were not completed"
                    );
                }
                Hook::EndLumi(..) | Hook::EndRun(_) => assert!(report.events >= 8, "{label}"),
                Hook::EndJob => assert_eq!(report.events, 12, "{label}"),
            }
        }
    }
}

/// 12 events in blocks of 4 through "early", "hooked" (whose `hook`
/// fails) and "late".
fn hooked_process(log: &std::sync::Arc<Log>, hook: Hook) -> Process {
    let mut p = Process::new("transition-error");
    p.set_source(EmptySource::new(12).events_per_lumi(4));
    p.add(Probe::new(log, "early").producer());
    p.add(Probe::new(log, "hooked").fail_hook(hook, false).analyzer());
    p.add(Probe::new(log, "late").analyzer());
    p.path("p", ["early", "hooked", "late"]);
    p
}

#[test]
fn transitions_still_nest_after_a_failed_transition() {
    for (hook, options) in [
        (Hook::BeginLumi(1, 3), sequential(2)),
        (Hook::EndLumi(1, 2), threaded(4, 8)),
    ] {
        let log = Log::new();
        let _ = failed(run_watched(hooked_process(&log, hook), options));
        // Every instance: each lumi begun is ended exactly once, nothing is
        // ended twice or ended without having begun.
        assert_clean_transitions(&log, &format!("{hook:?}"));
    }
}

/// A failed end hook among several transitions decided together (the ends
/// of the last blocks and of the run at the end of the input): the ends
/// after it still run, so every instance closes what it opened. Every hook
/// of the job fails in turn, with the sequential executor (deterministic)
/// at several events in flight and blocks in flight.
#[test]
fn every_open_block_is_ended_whichever_transition_fails() {
    let hooks = [
        Hook::BeginRun(1),
        Hook::BeginLumi(1, 1),
        Hook::BeginLumi(1, 2),
        Hook::BeginLumi(1, 3),
        Hook::EndLumi(1, 1),
        Hook::EndLumi(1, 2),
        Hook::EndLumi(1, 3),
        Hook::EndRun(1),
    ];
    for hook in hooks {
        for in_flight in [1, 2, 4, 12] {
            for concurrent_lumis in [1, 2, 3] {
                let log = Log::new();
                let options = RunOptions {
                    concurrent_lumis,
                    ..sequential(in_flight)
                };
                let _ = failed(run_watched(hooked_process(&log, hook), options));
                assert_clean_transitions(
                    &log,
                    &format!("{hook:?}, {in_flight} in flight, {concurrent_lumis} blocks"),
                );
            }
        }
    }
}

/// External-work producer "ext" faulting on event 5, read by "use".
fn external_process(
    log: &std::sync::Arc<Log>,
    helper: &std::sync::Arc<Helper>,
    fault: AcquireFault,
) -> Process {
    let mut p = Process::new("external-error");
    p.set_source(EmptySource::new(24).events_per_lumi(6));
    p.add(Probe::new(log, "pre").puts(&[""]).producer());
    p.add(
        AsyncProbe::new(
            Probe::new(log, "ext").reads(&["pre"]).puts(&[""]),
            helper,
            Delay::AfterOthers,
        )
        .faults(&[(5, fault)])
        .producer(),
    );
    p.add(Probe::new(log, "use").reads(&["ext"]).analyzer());
    p.end_path("e", ["use"]);
    p
}

fn fault_text(fault: AcquireFault) -> &'static str {
    match fault {
        AcquireFault::CompletionErr => "external work of ext fails on event 5",
        AcquireFault::CompletionDropped => "dropped without calling Completion::finish",
        AcquireFault::ErrNoHandoff | AcquireFault::ErrAfterFinished => {
            "acquire of ext fails on event 5"
        }
    }
}

fn check_external_fault(fault: AcquireFault) {
    for options in [threaded(4, 4), threaded(1, 3), sequential(3)] {
        let label = format!("{options:?} {fault:?}");
        // Fail policy: the job fails, naming the module and the event.
        let (log, helper) = (Log::new(), Helper::new());
        let (error, _) = failed(run_watched(
            external_process(&log, &helper, fault),
            options.clone(),
        ));
        match &error {
            JobError::Module {
                module,
                event,
                message,
            } => {
                assert_eq!((module.as_str(), event.event), ("ext", 5), "{label}");
                assert!(message.contains(fault_text(fault)), "{label}: {message}");
            }
            other => panic!("{label}: expected a module error, got {other:?}"),
        }
        assert_clean_transitions(&log, &label);
        // SkipEvent: exactly event 5 fails, once; the others are complete.
        let (log, helper) = (Log::new(), Helper::new());
        let report = run_watched(
            external_process(&log, &helper, fault),
            skip(options.clone()),
        )
        .unwrap();
        let failed: Vec<(u64, &str)> = report
            .failed_events
            .iter()
            .map(|f| (f.event, f.module.as_str()))
            .collect();
        assert_eq!(
            failed,
            vec![(5, "ext")],
            "{label}: {:?}",
            report.failed_events
        );
        assert!(
            report.failed_events[0].message.contains(fault_text(fault)),
            "{label}: {:?}",
            report.failed_events
        );
        assert_eq!(report.events, 23, "{label}");
        let want: BTreeMap<u64, usize> = (1..=24).filter(|&e| e != 5).map(|e| (e, 1)).collect();
        assert_eq!(log.runs_per_event("use"), want, "{label}");
        assert!(
            log.of("ext")
                .iter()
                .all(|e| e.phase != Phase::Produce || e.event.event != 5),
            "{label}: produced after a failure"
        );
        assert_clean_transitions(&log, &label);
    }
}

#[test]
fn external_work_completion_error_fails_the_event() {
    check_external_fault(AcquireFault::CompletionErr);
}

#[test]
fn external_work_dropped_completion_fails_the_event() {
    check_external_fault(AcquireFault::CompletionDropped);
}

#[test]
fn external_work_acquire_error_fails_the_event_once() {
    check_external_fault(AcquireFault::ErrNoHandoff);
}

#[test]
fn external_work_acquire_error_after_completion_fails_the_event() {
    check_external_fault(AcquireFault::ErrAfterFinished);
}

// ------------------------------------------------ configuration errors

/// Builds a process with instrumented modules, checks that it is rejected
/// with an error for which `check` holds and whose message names every
/// string of `names`, and that no module was called at all.
fn rejected(
    name: &str,
    names: &[&str],
    check: fn(&ConfigError) -> bool,
    build: impl Fn(&std::sync::Arc<Log>, &mut Process),
) {
    let log = Log::new();
    let mut p = Process::new("bad-config");
    p.set_source(TestSource::new(EmptySource::new(10), &log));
    build(&log, &mut p);
    let compiled = p.compile().err();
    let error = match run_watched(p, threaded(2, 2)) {
        Err(RunError::Config(e)) => e,
        Err(RunError::Failed { error, .. }) => {
            panic!("{name}: expected a configuration error, the job failed: {error}")
        }
        Ok(_) => panic!("{name}: expected a configuration error, the job ran"),
    };
    assert!(check(&error), "{name}: unexpected error {error:?}");
    assert_eq!(
        compiled.as_ref(),
        Some(&error),
        "{name}: compile() and run() disagree"
    );
    let message = error.to_string();
    for n in names {
        assert!(
            message.contains(n),
            "{name}: message '{message}' does not name '{n}'"
        );
    }
    assert!(
        log.hooks().is_empty(),
        "{name}: beginJob was called: {:?}",
        log.hooks()
    );
    assert!(log.execs().is_empty(), "{name}: a module ran");
    assert_eq!(
        log.reads.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "{name}: the source was read"
    );
}

fn excl(names: &[&str]) -> Concurrency {
    Concurrency::Exclusive(names.iter().map(|s| s.to_string()).collect())
}

/// A name that is a typo of a module or path names the nearest one, as a
/// product of a known label names what that module puts: in a graph of
/// dozens of modules, "consumes 'muonSegment', which no module produces"
/// left the user to search the file for the name meant. A name far from
/// every other gets no guess.
#[test]
fn a_typo_names_the_nearest_module_or_path() {
    use ConfigError as E;
    rejected(
        "product of a misspelt producer",
        &["consumes 'muonSegment', which no module produces (did you mean 'muonSegments'?)"],
        |e| matches!(e, E::MissingProduct { .. }),
        |log, p| {
            p.add(Probe::new(log, "muonSegments").puts(&[""]).producer());
            p.add(Probe::new(log, "muonSeeds").puts(&[""]).producer());
            p.add(Probe::new(log, "muons").reads(&["muonSegment"]).analyzer());
            p.end_path("e", ["muons"]);
        },
    );
    rejected(
        "misspelt path step",
        &["path 'HLT_MET' names unknown module 'metTriger' (did you mean 'metTrigger'?)"],
        |e| matches!(e, E::UnknownPathModule { .. }),
        |log, p| {
            p.add(Probe::new(log, "metTrigger").filter());
            p.path("HLT_MET", ["metTriger"]);
        },
    );
    rejected(
        "misspelt end path step",
        &["end path 'out' names unknown module 'Writer' (did you mean 'writer'?)"],
        |e| matches!(e, E::UnknownPathModule { .. }),
        |log, p| {
            p.add(Probe::new(log, "writer").output());
            p.end_path("out", ["Writer"]);
        },
    );
    rejected(
        "misspelt selected path",
        &["module 'out' selects events of unknown path 'HLT_IsoMuu' (did you mean 'HLT_IsoMu'?)"],
        |e| matches!(e, E::UnknownSelectPath { .. }),
        |log, p| {
            p.add(Probe::new(log, "iso").filter());
            p.path("HLT_IsoMu", ["iso"]);
            p.add(
                Probe::new(log, "out")
                    .output()
                    .select_events(["HLT_IsoMuu"]),
            );
            p.end_path("e", ["out"]);
        },
    );
    // Nothing near: no guess.
    let log = Log::new();
    let mut p = Process::new("far");
    p.set_source(EmptySource::new(1));
    p.add(Probe::new(&log, "tracks").puts(&[""]).producer());
    p.add(Probe::new(&log, "reader").reads(&["vertices"]).analyzer());
    p.end_path("e", ["reader"]);
    assert_eq!(
        p.compile().expect_err("no producer").to_string(),
        "module 'reader' consumes 'vertices', which no module produces"
    );
}

#[test]
fn configuration_errors_are_reported_before_anything_runs() {
    use ConfigError as E;
    rejected(
        "duplicate label",
        &["twice"],
        |e| matches!(e, E::DuplicateLabel(l) if l == "twice"),
        |log, p| {
            p.add(Probe::new(log, "twice").puts(&[""]).producer());
            p.add(Probe::new(log, "twice").analyzer());
            p.end_path("e", ["twice"]);
        },
    );
    rejected(
        "invalid label",
        &["a:b"],
        |e| matches!(e, E::InvalidLabel(l, _) if l == "a:b"),
        |log, p| {
            p.add(Probe::new(log, "a:b").analyzer());
            p.end_path("e", ["a:b"]);
        },
    );
    rejected(
        "missing product",
        &["reader", "nobody:x", "(module 'nobody' declares nobody)"],
        |e| matches!(e, E::MissingProduct { .. }),
        |log, p| {
            p.add(Probe::new(log, "nobody").puts(&[""]).producer());
            p.add(Probe::new(log, "reader").reads(&["nobody:x"]).analyzer());
            p.end_path("e", ["reader"]);
        },
    );
    rejected(
        "product of a filter that puts none",
        &["reader", "'cut'", "(module 'cut' declares no products)"],
        |e| matches!(e, E::MissingProduct { .. }),
        |log, p| {
            p.add(Probe::new(log, "cut").filter());
            p.add(Probe::new(log, "reader").reads(&["cut"]).analyzer());
            p.path("p", ["cut"]);
            p.end_path("e", ["reader"]);
        },
    );
    rejected(
        "missing source product",
        &["reader", "source"],
        |e| matches!(e, E::MissingProduct { .. }),
        |log, p| {
            p.add(Probe::new(log, "reader").reads(&["source"]).analyzer());
            p.end_path("e", ["reader"]);
        },
    );
    rejected(
        "duplicate product",
        &["dup", "x"],
        |e| matches!(e, E::DuplicateProduct { .. }),
        |log, p| {
            p.add(Probe::new(log, "dup").puts(&["x", "x"]).producer());
            p.path("p", ["dup"]);
        },
    );
    rejected(
        "cycle",
        &["c1", "c2", "c3"],
        |e| {
            e.to_string()
                == "dependency cycle among modules: c1 -> c2 -> c3 -> c1 \
                    (each reads a product of the one before)"
        },
        |log, p| {
            p.add(Probe::new(log, "c1").reads(&["c3"]).puts(&[""]).producer());
            p.add(Probe::new(log, "c2").reads(&["c1"]).puts(&[""]).producer());
            p.add(Probe::new(log, "c3").reads(&["c2"]).puts(&[""]).producer());
            p.add(Probe::new(log, "free").puts(&[""]).producer());
            p.path("p", ["free"]);
        },
    );
    rejected(
        "self cycle",
        &["selfish"],
        |e| matches!(e, E::Cycle(_)),
        |log, p| {
            p.add(
                Probe::new(log, "selfish")
                    .reads(&["selfish"])
                    .puts(&[""])
                    .producer(),
            );
            p.path("p", ["selfish"]);
        },
    );
    rejected(
        "unknown path module",
        &["p", "ghost"],
        |e| matches!(e, E::UnknownPathModule { kind: "path", .. }),
        |log, p| {
            p.add(Probe::new(log, "real").producer());
            p.path("p", ["real", "ghost"]);
        },
    );
    rejected(
        "unknown end path module",
        &["e", "ghost"],
        |e| {
            matches!(
                e,
                E::UnknownPathModule {
                    kind: "end path",
                    ..
                }
            )
        },
        |log, p| {
            p.add(Probe::new(log, "real").analyzer());
            p.end_path("e", ["real", "ghost"]);
        },
    );
    rejected(
        "duplicate path",
        &["same"],
        |e| matches!(e, E::DuplicatePath(n) if n == "same"),
        |log, p| {
            p.add(Probe::new(log, "a").producer());
            p.add(Probe::new(log, "b").analyzer());
            p.path("same", ["a"]);
            p.end_path("same", ["b"]);
        },
    );
    rejected(
        "unknown select path",
        &["out", "nowhere"],
        |e| matches!(e, E::UnknownSelectPath { .. }),
        |log, p| {
            p.add(Probe::new(log, "out").output().select_events(["nowhere"]));
            p.end_path("e", ["out"]);
        },
    );
    rejected(
        "cloned(0)",
        &["zero", "n >= 1"],
        |e| matches!(e, E::InvalidConcurrency { .. }),
        |log, p| {
            p.add(Probe::new(log, "zero").cloned(0, ModuleKind::Producer));
            p.path("p", ["zero"]);
        },
    );
    rejected(
        "cloned without instances",
        &["fake"],
        |e| matches!(e, E::InvalidConcurrency { .. }),
        |log, p| {
            p.add(
                Probe::new(log, "fake")
                    .producer()
                    .concurrency(Concurrency::Cloned(3)),
            );
            p.path("p", ["fake"]);
        },
    );
    rejected(
        "serial with several instances",
        &["multi"],
        |e| matches!(e, E::InvalidConcurrency { .. }),
        |log, p| {
            p.add(
                Probe::new(log, "multi")
                    .cloned(2, ModuleKind::Producer)
                    .concurrency(Concurrency::Serial),
            );
            p.path("p", ["multi"]);
        },
    );
    rejected(
        "exclusive without resource",
        &["lonely"],
        |e| matches!(e, E::InvalidConcurrency { .. }),
        |log, p| {
            p.add(Probe::new(log, "lonely").producer().concurrency(excl(&[])));
            p.path("p", ["lonely"]);
        },
    );
    rejected(
        "exclusive with a blank resource",
        &["blank"],
        |e| matches!(e, E::InvalidConcurrency { .. }),
        |log, p| {
            p.add(
                Probe::new(log, "blank")
                    .producer()
                    .concurrency(excl(&["gpu", " "])),
            );
            p.path("p", ["blank"]);
        },
    );
    rejected(
        "external work on a filter",
        &["asyncFilter"],
        |e| matches!(e, E::InvalidConcurrency { .. }),
        |log, p| {
            p.add(Probe::new(log, "asyncFilter").filter().external_work(true));
            p.path("p", ["asyncFilter"]);
        },
    );
    rejected(
        "output on a path",
        &["writer", "p"],
        |e| matches!(e, E::InvalidModule { module, .. } if module == "writer"),
        |log, p| {
            p.add(Probe::new(log, "writer").output());
            p.path("p", ["writer"]);
        },
    );
    rejected(
        "output on no end path",
        &["writer"],
        |e| matches!(e, E::InvalidModule { .. }),
        |log, p| {
            p.add(Probe::new(log, "writer").output());
            p.add(Probe::new(log, "a").producer());
            p.path("p", ["a"]);
        },
    );
    rejected(
        "producer on an end path",
        &["maker", "e"],
        |e| matches!(e, E::InvalidModule { .. }),
        |log, p| {
            p.add(Probe::new(log, "maker").producer());
            p.end_path("e", ["maker"]);
        },
    );
    rejected(
        "module on a path and an end path",
        &["both"],
        |e| matches!(e, E::InvalidModule { .. }),
        |log, p| {
            p.add(Probe::new(log, "both").analyzer());
            p.path("p", ["both"]);
            p.end_path("e", ["both"]);
        },
    );
    rejected(
        "module twice on a path",
        &["again", "p"],
        |e| matches!(e, E::InvalidModule { .. }),
        |log, p| {
            p.add(Probe::new(log, "again").filter());
            p.path("p", ["again", "again"]);
        },
    );
    rejected(
        "selection without end path",
        &["picky"],
        |e| matches!(e, E::InvalidModule { .. }),
        |log, p| {
            p.add(Probe::new(log, "picky").analyzer().select_events(["p"]));
            p.add(Probe::new(log, "a").filter());
            p.path("p", ["a", "picky"]);
        },
    );

    // No source at all.
    let log = Log::new();
    let mut p = Process::new("sourceless");
    p.add(Probe::new(&log, "a").producer());
    p.path("p", ["a"]);
    assert!(matches!(
        run_watched(p, threaded(2, 2)),
        Err(RunError::Config(ConfigError::NoSource))
    ));
    assert!(log.hooks().is_empty() && log.execs().is_empty());
}

#[test]
fn end_path_module_needed_by_a_path_is_rejected_or_runs() {
    let log = Log::new();
    let mut p = Process::new("end-path-producer");
    p.set_source(EmptySource::new(4));
    p.add(Probe::new(&log, "endMaker").puts(&[""]).analyzer());
    p.add(Probe::new(&log, "reader").reads(&["endMaker"]).filter());
    p.path("p", ["reader"]);
    p.end_path("e", ["endMaker"]);
    // Sequential: a scheduler panic reaches this thread instead of aborting
    // the test process from a pool thread.
    match run_watched(p, sequential(1)) {
        Err(RunError::Config(e)) => assert!(e.to_string().contains("endMaker"), "{e}"),
        Ok(report) => {
            assert_eq!(report.events, 4);
            assert_eq!(report.module("endMaker").unwrap().calls, 4);
        }
        Err(e) => panic!("{e}"),
    }
}

/// A source declaring its products.
struct Declaring(Vec<&'static str>, EmptySource);

impl Source for Declaring {
    fn produces(&self) -> Vec<String> {
        self.0.iter().map(|s| s.to_string()).collect()
    }
    fn next_event(
        &mut self,
        products: &mut SourceProducts,
    ) -> Result<Option<EventId>, ModuleError> {
        let id = self.1.next_event(products)?;
        if id.is_some() {
            for p in &self.0 {
                products.put(p, 1u64);
            }
        }
        Ok(id)
    }
}

/// Misuses of the API found before any event runs, each named: options out
/// of range (a mistyped events in flight allocated its slots and aborted
/// the process), a module labelled like the source's products, a source
/// declaring a product twice, a path without a name.
#[test]
fn misuse_is_refused_before_the_job_by_name() {
    let job = |build: &dyn Fn(&mut Process)| {
        let log = Log::new();
        let mut p = Process::new("misuse");
        p.set_source(EmptySource::new(4));
        p.add(Probe::new(&log, "a").filter());
        p.path("p", ["a"]);
        build(&mut p);
        p
    };
    let config_error = |p: Process, options: RunOptions| match run_watched(p, options) {
        Err(RunError::Config(e)) => e.to_string(),
        Ok(_) => panic!("the job ran"),
        Err(e) => panic!("not a configuration error: {e}"),
    };
    for (options, expected) in [
        (
            RunOptions {
                threads: 0,
                ..threaded(1, 1)
            },
            "invalid run options: threads must be at least 1, not 0",
        ),
        (
            RunOptions {
                events_in_flight: 0,
                ..threaded(1, 1)
            },
            "invalid run options: events_in_flight must be from 1 to 1048576, not 0",
        ),
        (
            RunOptions {
                events_in_flight: 100_000_000,
                ..threaded(1, 1)
            },
            "events_in_flight must be from 1 to 1048576, not 100000000",
        ),
        (
            RunOptions {
                concurrent_lumis: 0,
                ..sequential(1)
            },
            "concurrent_lumis must be at least 1, not 0",
        ),
    ] {
        let e = config_error(job(&|_| {}), options);
        assert!(e.contains(expected), "{e}");
    }
    let e = config_error(
        job(&|p| {
            p.add(Probe::new(&Log::new(), "source").puts(&[""]).producer());
        }),
        threaded(1, 1),
    );
    assert!(e.contains("module label 'source' is invalid"), "{e}");
    let e = config_error(
        job(&|p| {
            p.set_source(Declaring(vec!["x", "x"], EmptySource::new(4)));
        }),
        threaded(1, 1),
    );
    assert!(
        e.contains("module 'source' declares product instance 'x' twice"),
        "{e}"
    );
    for name in ["", " p2"] {
        let e = config_error(
            job(&|p| {
                p.path(name, ["a"]);
            }),
            threaded(1, 1),
        );
        assert!(e.contains(&format!("path name '{name}' is invalid")), "{e}");
    }
    // The detector works: a source of distinct products runs.
    let p = job(&|p| {
        p.set_source(Declaring(vec!["x", "y"], EmptySource::new(4)));
    });
    assert_eq!(run_watched(p, threaded(1, 1)).unwrap().events, 4);
}

/// Each instance closes what it opened: after a failed beginJob the modules
/// whose beginJob ran get their endJob (and the failing one does not); a
/// failed endJob does not keep the others from ending.
#[test]
fn job_callbacks_close_what_they_opened_when_one_fails() {
    for (hook, want_ended) in [
        (Hook::BeginJob, vec!["early"]),
        (Hook::EndJob, vec!["early", "late"]),
    ] {
        let log = Log::new();
        let p = hooked_process(&log, hook);
        let (error, _) = failed(run_watched(p, sequential(2)));
        assert!(
            matches!(&error, JobError::Transition { module, .. } if module == "hooked"),
            "{hook:?}: {error:?}"
        );
        let per_instance = hooks_per_instance(&log.hooks());
        let ended: Vec<&str> = per_instance
            .iter()
            .filter(|((label, _), hooks)| label != "hooked" && hooks.contains(&Hook::EndJob))
            .map(|((label, _), _)| label.as_str())
            .collect();
        assert_eq!(ended, want_ended, "{hook:?}: {per_instance:?}");
        if hook == Hook::BeginJob {
            // "late" (after the failing module) never began.
            assert!(
                !per_instance.contains_key(&("late".to_string(), 0)),
                "{per_instance:?}"
            );
        }
    }
}
