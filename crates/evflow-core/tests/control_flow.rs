//! Control flow of the engine: path order, on-demand producers, filters on
//! several paths with trigger results and event selection, run and
//! luminosity-block transitions, and per-event results that do not depend
//! on the number of threads, events in flight or executor.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use common::*;
use evflow_core::*;
use evflow_workloads as synthetic;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn all_options() -> Vec<RunOptions> {
    vec![
        threaded(4, 8),
        threaded(1, 3),
        threaded(2, 2),
        sequential(1),
        sequential(3),
    ]
}

#[test]
fn path_steps_run_in_order_and_stop_at_a_rejection() {
    const N: u64 = 60;
    let f1 = |e: u64| e.rem_euclid(3) != 0;
    let f2 = |e: u64| e.rem_euclid(2) == 0;
    for options in all_options() {
        let log = Log::new();
        let mut p = Process::new("order");
        p.set_source(EmptySource::new(N));
        p.add(Probe::new(&log, "f1").pass(move |id| f1(id.event)).filter());
        p.add(Probe::new(&log, "x").work(200).analyzer());
        p.add(Probe::new(&log, "f2").pass(move |id| f2(id.event)).filter());
        p.add(Probe::new(&log, "y").analyzer());
        p.add(Probe::new(&log, "g").work(300).filter());
        p.path("p", ["f1", "x", "f2", "y"]);
        p.path("q", ["g"]);
        let label = format!("{options:?}");
        let report = run_watched(p, options).unwrap();
        assert_eq!(report.events, N);

        let execs = log.execs();
        let at: HashMap<(String, u64), &Exec> = execs
            .iter()
            .map(|e| ((e.label.to_string(), e.event.event), e))
            .collect();
        assert_eq!(
            at.len(),
            execs.len(),
            "{label}: a module ran twice for one event"
        );
        let steps = ["f1", "x", "f2", "y"];
        for e in 1..=N {
            // Which steps the path reaches: each one after the previous passed.
            let reached = if !f1(e) {
                1
            } else if !f2(e) {
                3
            } else {
                4
            };
            for (i, s) in steps.iter().enumerate() {
                let ran = at.get(&(s.to_string(), e));
                assert_eq!(ran.is_some(), i < reached, "{label}: step {s} of event {e}");
                if let (Some(cur), true) = (ran, i > 0) {
                    let prev = at[&(steps[i - 1].to_string(), e)];
                    assert_eq!(
                        prev.passed,
                        Some(true),
                        "{label}: {s} ran on event {e} after a rejection"
                    );
                    assert!(
                        prev.end < cur.start,
                        "{label}: step {s} of event {e} started before step {} ended",
                        steps[i - 1]
                    );
                }
            }
        }
        // The cut-flow agrees.
        let path = &report.paths[0];
        let n1 = (1..=N).filter(|&e| f1(e)).count() as u64;
        let n2 = (1..=N).filter(|&e| f1(e) && f2(e)).count() as u64;
        assert_eq!((path.visited, path.passed), (N, n2), "{label}");
        let flow: Vec<(u64, u64)> = path.filters.iter().map(|s| (s.visited, s.passed)).collect();
        assert_eq!(flow, vec![(N, n1), (n1, n1), (n1, n2), (n2, n2)], "{label}");
        assert_eq!(report.paths[1].passed, N);
    }
}

#[test]
fn on_demand_producers_run_only_for_events_that_need_them() {
    const N: u64 = 60;
    let even = |e: u64| e.rem_euclid(2) == 0;
    let third = |e: u64| e.rem_euclid(3) == 0;
    for options in all_options() {
        let log = Log::new();
        let mut p = Process::new("on-demand");
        p.set_source(EmptySource::new(N));
        // Nobody needs these.
        p.add(Probe::new(&log, "orphan").puts(&[""]).producer());
        p.add(
            Probe::new(&log, "orphanChild")
                .reads(&["orphan"])
                .puts(&[""])
                .producer(),
        );
        p.add(
            Probe::new(&log, "unscheduled")
                .reads(&["orphanChild"])
                .analyzer(),
        );
        // Needed only after a filter.
        p.add(Probe::new(&log, "late").puts(&[""]).producer());
        p.add(Probe::new(&log, "lateShared").puts(&[""]).producer());
        p.add(
            Probe::new(&log, "sel")
                .pass(move |id| even(id.event))
                .filter(),
        );
        p.add(
            Probe::new(&log, "after")
                .reads(&["late", "lateShared"])
                .analyzer(),
        );
        p.add(
            Probe::new(&log, "sel3")
                .pass(move |id| third(id.event))
                .filter(),
        );
        p.add(Probe::new(&log, "other").reads(&["lateShared"]).analyzer());
        // Needed only by a selective end-path module.
        p.add(Probe::new(&log, "endOnly").puts(&[""]).producer());
        p.add(
            Probe::new(&log, "endAna")
                .reads(&["endOnly"])
                .analyzer()
                .select_events(["pSel"]),
        );
        p.path("pSel", ["sel", "after"]);
        p.path("pSel3", ["sel3", "other"]);
        p.end_path("e", ["endAna"]);
        let label = format!("{options:?}");
        let report = run_watched(p, options).unwrap();
        assert_eq!(report.events, N);
        for m in ["orphan", "orphanChild", "unscheduled"] {
            assert_eq!(report.module(m).unwrap().calls, 0, "{label}: {m} ran");
            assert!(log.of(m).is_empty());
        }
        let expect = |f: &dyn Fn(u64) -> bool| -> BTreeMap<u64, usize> {
            (1..=N).filter(|&e| f(e)).map(|e| (e, 1)).collect()
        };
        assert_eq!(
            log.runs_per_event("late"),
            expect(&|e| even(e)),
            "{label}: late"
        );
        assert_eq!(
            log.runs_per_event("after"),
            expect(&|e| even(e)),
            "{label}: after"
        );
        assert_eq!(
            log.runs_per_event("lateShared"),
            expect(&|e| even(e) || third(e)),
            "{label}: lateShared"
        );
        assert_eq!(
            log.runs_per_event("other"),
            expect(&|e| third(e)),
            "{label}: other"
        );
        assert_eq!(
            log.runs_per_event("endOnly"),
            expect(&|e| even(e)),
            "{label}: endOnly"
        );
        assert_eq!(
            log.runs_per_event("endAna"),
            expect(&|e| even(e)),
            "{label}: endAna"
        );
        assert_eq!(
            report.module("lateShared").unwrap().calls,
            (1..=N).filter(|&e| even(e) || third(e)).count() as u64
        );
    }
}

#[test]
fn filter_on_several_paths_runs_once_and_outputs_see_its_decisions() {
    const N: u64 = 90;
    let f = |e: u64| e % 3 != 1;
    let g = |e: u64| e.rem_euclid(2) == 0;
    let h = |e: u64| e.rem_euclid(5) != 0;
    // Path decisions, in declaration order.
    let decisions = move |e: u64| vec![f(e), g(e) && f(e), f(e), h(e) && g(e), true];
    let names = ["p1", "p2", "p3", "p4", "empty"];
    for options in all_options() {
        let log = Log::new();
        let mut p = Process::new("trigger");
        p.set_source(EmptySource::new(N).events_per_lumi(7));
        p.add(
            Probe::new(&log, "F")
                .work(300)
                .pass(move |id| f(id.event))
                .filter(),
        );
        p.add(
            Probe::new(&log, "G")
                .pass(move |id| g(id.event))
                .filter()
                .concurrency(Concurrency::Serial),
        );
        p.add(Probe::new(&log, "H").pass(move |id| h(id.event)).filter());
        p.add(Probe::new(&log, "a").analyzer());
        p.add(Probe::new(&log, "outAll").output());
        p.add(Probe::new(&log, "outP2").output().select_events(["p2"]));
        p.add(
            Probe::new(&log, "outP1P4")
                .output()
                .select_events(["p1", "p4"]),
        );
        p.path("p1", ["F", "a"]);
        p.path("p2", ["G", "F"]);
        p.path("p3", ["F"]);
        p.path("p4", ["H", "G"]);
        p.path("empty", Vec::<String>::new());
        p.end_path("out", ["outAll", "outP2"]);
        p.end_path("out2", ["outP1P4"]);
        let label = format!("{options:?}");
        let report = run_watched(p, options).unwrap();
        assert_eq!(report.events, N);

        let once: BTreeMap<u64, usize> = (1..=N).map(|e| (e, 1)).collect();
        assert_eq!(
            log.runs_per_event("F"),
            once,
            "{label}: F must run exactly once per event"
        );
        assert_eq!(
            log.runs_per_event("G"),
            once,
            "{label}: G must run exactly once per event"
        );
        assert_eq!(report.module("F").unwrap().calls, N);

        let mut seen: HashMap<&str, BTreeSet<u64>> = HashMap::new();
        for w in log.written() {
            let want: Vec<(String, bool)> = names
                .iter()
                .map(|n| n.to_string())
                .zip(decisions(w.event.event))
                .collect();
            assert_eq!(
                w.results, want,
                "{label}: trigger results of {} for {}",
                w.event, w.label
            );
            assert_eq!(w.unknown_path, None);
            assert!(
                seen.entry(match &*w.label {
                    "outAll" => "outAll",
                    "outP2" => "outP2",
                    _ => "outP1P4",
                })
                .or_default()
                .insert(w.event.event)
            );
        }
        let sel = |pick: &dyn Fn(&[bool]) -> bool| -> BTreeSet<u64> {
            (1..=N).filter(|&e| pick(&decisions(e))).collect()
        };
        assert_eq!(seen["outAll"], sel(&|_| true), "{label}");
        assert_eq!(seen["outP2"], sel(&|d| d[1]), "{label}");
        assert_eq!(seen["outP1P4"], sel(&|d| d[0] || d[3]), "{label}");

        // Path and step reports.
        for (i, path) in report.paths.iter().enumerate() {
            assert_eq!(path.name, names[i]);
            assert_eq!(path.visited, N);
            assert_eq!(
                path.passed,
                (1..=N).filter(|&e| decisions(e)[i]).count() as u64,
                "{label}: {}",
                path.name
            );
        }
        let count = |pick: &dyn Fn(u64) -> bool| (1..=N).filter(|&e| pick(e)).count() as u64;
        let p2: Vec<(u64, u64)> = report.paths[1]
            .filters
            .iter()
            .map(|s| (s.visited, s.passed))
            .collect();
        assert_eq!(
            p2,
            vec![
                (N, count(&|e| g(e))),
                (count(&|e| g(e)), count(&|e| g(e) && f(e)))
            ],
            "{label}"
        );
    }
}

/// The (run, lumi) of every event of a source, in order.
fn layout(mut source: EmptySource) -> Vec<EventId> {
    let mut products = SourceProducts::default();
    std::iter::from_fn(|| source.next_event(&mut products).unwrap()).collect()
}

/// The hooks every module instance must see, in order.
fn expected_hooks(events: &[EventId]) -> Vec<Hook> {
    let mut hooks = vec![Hook::BeginJob];
    let mut current: Option<(u32, u32)> = None;
    for id in events {
        if current == Some((id.run, id.lumi)) {
            continue;
        }
        if let Some((r, l)) = current {
            hooks.push(Hook::EndLumi(r, l));
            if r != id.run {
                hooks.push(Hook::EndRun(r));
            }
        }
        if current.is_none_or(|(r, _)| r != id.run) {
            hooks.push(Hook::BeginRun(id.run));
        }
        hooks.push(Hook::BeginLumi(id.run, id.lumi));
        current = Some((id.run, id.lumi));
    }
    if let Some((r, l)) = current {
        hooks.push(Hook::EndLumi(r, l));
        hooks.push(Hook::EndRun(r));
    }
    hooks.push(Hook::EndJob);
    hooks
}

#[test]
fn transitions_are_ordered_and_bracket_their_events() {
    let sources = [
        EmptySource::new(60).events_per_lumi(4).lumis_per_run(3),
        EmptySource::new(10)
            .events_per_lumi(3)
            .lumis_per_run(2)
            .first_run(7),
        EmptySource::new(9).events_per_lumi(1),
    ];
    for source in sources {
        // One block at a time: hooks run with no event in flight (see
        // tests/lumis.rs for concurrent blocks).
        for mut options in [threaded(4, 8), threaded(2, 3), sequential(4)] {
            options.concurrent_lumis = 1;
            let events = layout(source.clone());
            let log = Log::new();
            let hold = Hold::new(3, 20_000);
            let mut p = Process::new("transitions");
            p.set_source(source.clone());
            p.add(Probe::new(&log, "prod").hold(&hold).puts(&[""]).producer());
            p.add(
                Probe::new(&log, "ser")
                    .reads(&["prod"])
                    .analyzer()
                    .concurrency(Concurrency::Serial),
            );
            p.add(
                Probe::new(&log, "clo")
                    .work(200)
                    .cloned(2, ModuleKind::Filter),
            );
            p.add(Probe::new(&log, "idle").producer());
            p.path("p", ["clo"]);
            p.end_path("e", ["ser"]);
            let label = format!("{options:?} {source:?}");
            let report = run_watched(p, options).unwrap();
            assert_eq!(report.events, events.len() as u64, "{label}");
            let execs = log.execs();
            let hooks = log.hooks();
            assert_eq!(execs.len(), 3 * events.len(), "{label}");
            check_transitions(&execs, &hooks).unwrap_or_else(|e| panic!("{label}: {e}"));
            // Every instance (both clones, and a module that never runs
            // on events) sees the full, ordered sequence of transitions.
            let want = expected_hooks(&events);
            for (m, inst) in [("prod", 0), ("ser", 0), ("clo", 0), ("clo", 1), ("idle", 0)] {
                let got: Vec<Hook> = hooks
                    .iter()
                    .filter(|h| &*h.label == m && h.instance == inst)
                    .map(|h| h.hook)
                    .collect();
                assert_eq!(got, want, "{label}: hooks of {m}#{inst}");
            }
            // Each transition's hooks are called with no module running.
            for h in &hooks {
                assert!(
                    !execs.iter().any(|e| e.start < h.seq && h.seq < e.end),
                    "{label}: {:?} of {} called while a module ran",
                    h.hook,
                    h.label
                );
            }
        }
    }
}

// ----------------------------------------------- determinism across runs

struct Built {
    process: Process,
    tallies: Vec<(String, synthetic::Tally)>,
}

/// A random-ish process of synthetic modules (fixed by `seed`).
fn synthetic_process(seed: u64) -> Built {
    use synthetic::{Timing, Work};
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let t = || Timing::new(vec![1e-6, 3e-6, 0.0, 2e-6], 1.0, Work::Busy);
    let mut p = Process::new("synthetic");
    p.set_source(EmptySource::new(150).events_per_lumi(20).lumis_per_run(3));
    let mut producers: Vec<String> = Vec::new();
    let mut tallies = Vec::new();
    for i in 0..16 {
        let label = format!("prod{i}");
        let k = rng.gen_range(0..=producers.len().min(3));
        let mut inputs: Vec<&str> = Vec::new();
        for _ in 0..k {
            let pick = producers[rng.gen_range(0..producers.len())].as_str();
            if !inputs.contains(&pick) {
                inputs.push(pick);
            }
        }
        let desc = match rng.gen_range(0..5) {
            0 => synthetic::cloned_producer(&label, rng.gen_range(1..=3), t(), &inputs, &[""]),
            1 => synthetic::producer(&label, t(), &inputs, &[""]).concurrency(Concurrency::Serial),
            2 => synthetic::producer(&label, t(), &inputs, &[""]).concurrency(
                Concurrency::Exclusive(vec![format!("r{}", rng.gen_range(0..2))]),
            ),
            _ => synthetic::producer(&label, t(), &inputs, &[""]),
        };
        p.add(desc);
        producers.push(label);
    }
    let pick = |rng: &mut ChaCha8Rng, n: usize| -> Vec<String> {
        (0..n)
            .map(|_| producers[rng.gen_range(0..producers.len())].clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect()
    };
    let mut paths = Vec::new();
    for i in 0..4 {
        let f = format!("filter{i}");
        let inputs = pick(&mut rng, 2);
        let inputs: Vec<&str> = inputs.iter().map(String::as_str).collect();
        p.add(synthetic::filter(
            &f,
            t(),
            &inputs,
            rng.gen_range(0.2..0.9),
            seed + i,
        ));
        let (a, tally) = synthetic::analyzer_with_tally(&format!("ana{i}"), t(), &inputs);
        p.add(a);
        tallies.push((format!("ana{i}"), tally));
        paths.push(format!("path{i}"));
        p.path(format!("path{i}"), [f, format!("ana{i}")]);
    }
    // One filter shared by two paths.
    p.path("shared", ["filter0", "filter3"]);
    let inputs = pick(&mut rng, 4);
    let inputs: Vec<&str> = inputs.iter().map(String::as_str).collect();
    let (out, tally) = synthetic::output_with_tally("out", t(), &inputs);
    p.add(out.select_events(["path1", "shared"]));
    tallies.push(("out".into(), tally));
    let (all, tally) = synthetic::output_with_tally("outAll", t(), &inputs);
    p.add(all.concurrency(Concurrency::Serial));
    tallies.push(("outAll".into(), tally));
    let (end, tally) = synthetic::analyzer_with_tally("endAna", t(), &inputs);
    p.add(end);
    tallies.push(("endAna".into(), tally));
    p.end_path("end", ["out", "outAll", "endAna"]);
    Built {
        process: p,
        tallies,
    }
}

type Summary = (
    u64,
    Vec<(String, u64, u64)>,
    Vec<(String, u64, u64, Vec<(String, u64, u64)>)>,
    Vec<(String, u64)>,
);

fn summarise(report: &Report, tallies: &[(String, synthetic::Tally)]) -> Summary {
    (
        report.events,
        tallies
            .iter()
            .map(|(l, t)| (l.clone(), t.digest(), t.events()))
            .collect(),
        report
            .paths
            .iter()
            .map(|p| {
                (
                    p.name.clone(),
                    p.visited,
                    p.passed,
                    p.filters
                        .iter()
                        .map(|s| (s.label.clone(), s.visited, s.passed))
                        .collect(),
                )
            })
            .collect(),
        report
            .modules
            .iter()
            .map(|m| (m.label.clone(), m.calls))
            .collect(),
    )
}

#[test]
fn per_event_results_do_not_depend_on_threads_k_or_executor() {
    for seed in [1u64, 2, 3] {
        let mut reference: Option<Summary> = None;
        for (name, options) in [
            ("sequential K=1", sequential(1)),
            ("threaded N=1 K=1", threaded(1, 1)),
            ("threaded N=2 K=3", threaded(2, 3)),
            ("threaded N=4 K=8", threaded(4, 8)),
            ("sequential K=5", sequential(5)),
        ] {
            let Built { process, tallies } = synthetic_process(seed);
            let report = run_watched(process, options).unwrap();
            assert_eq!(report.events, 150);
            let summary = summarise(&report, &tallies);
            // Sanity: the filters do select, and the tallies saw events.
            assert!(
                summary.1.iter().all(|(_, _, n)| *n > 0),
                "seed {seed}: an analyzer saw nothing"
            );
            match &reference {
                None => reference = Some(summary),
                Some(r) => assert_eq!(
                    &summary, r,
                    "seed {seed}: {name} differs from sequential K=1"
                ),
            }
        }
    }
}
