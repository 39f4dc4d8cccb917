//! Scripted checks of the decision rules that the noise streams of
//! `tests/ordering_noise.rs` do not reach.

use super::OrderingPlanner;
use super::state::*;
use super::stats::*;
use crate::ordering::policy::{OrderingOptions, Policy};
use crate::schedule::{PathOutcome, Planner};
use crate::{EmptySource, Event, Filter, ModuleDesc, ModuleResult, PathDesc, Process, Transitions};

/// A filter the tests never run: they drive the planner by hand.
struct Driven;
impl Transitions for Driven {}
impl Filter for Driven {
    fn filter(&self, _: &Event<'_>) -> ModuleResult<bool> {
        unreachable!("the planner is driven by hand")
    }
}

/// A planner of one reorderable path of two filters, written `f0 > f1`.
fn planner(options: &OrderingOptions) -> OrderingPlanner {
    let mut proc = Process::new("scripted");
    proc.set_source(EmptySource::new(1));
    for label in ["f0", "f1"] {
        proc.add(ModuleDesc::filter(label, Driven));
    }
    proc.add_path(PathDesc::new("sel", ["f0", "f1"]).reorderable(true));
    OrderingPlanner::new(&proc.compile().unwrap(), options)
}

/// [`planner`], each filter measured at 10 µs on every one of many
/// executions (the timings leave no doubt), with a small sampling budget
/// (rates below the cap).
fn two_steps() -> OrderingPlanner {
    let mut options = OrderingOptions::new(Policy::Adaptive);
    options.tuning.sample_budget = 0.001;
    let planner = planner(&options);
    for ring in planner.rings.iter().flatten() {
        for _ in 0..200 {
            ring.push(10_000);
        }
    }
    planner
}

/// Runs `decisions` decisions after the warm-up on the sampled vectors
/// `samples` (bit 0: f0 passed, bit 1: f1 passed; both decided); returns
/// the planner and, after each decision, the sampling rate of the cheap
/// steps, the rate at which `f1` is measured after `f0`'s rejections (0:
/// none of its own), and whether the order is under an open question.
fn decided(samples: &[u64], decisions: usize) -> (OrderingPlanner, Vec<(f64, f64, bool)>) {
    let planner = two_steps();
    let Slot::Dynamic(d) = &planner.paths[0] else {
        panic!("a dynamic path");
    };
    {
        let mut s = lock(&d.samples);
        for &pass in samples {
            s.push(Sample { known: 0b11, pass });
        }
    }
    let mut st = lock(&d.state);
    st.learning = false;
    let mut n_obs = 1_000_000;
    let after = (0..decisions)
        .map(|_| {
            planner.decide_adaptive(d, &mut st, n_obs);
            n_obs += st.interval;
            let targeted = match st.targeted.get(1) {
                Some(&(0b01, rate)) => rate,
                _ => 0.0,
            };
            (st.rates[1], targeted, !st.contender.is_empty())
        })
        .collect();
    drop(st);
    (planner, after)
}

/// [`decided`], the rates only.
fn decide(samples: &[u64], decisions: usize) -> Vec<(f64, f64, bool)> {
    decided(samples, decisions).1
}

/// The samples of an open question: f0 fails on the first of 10, f1 on the
/// first two (f1 rejects 20% of the events, f0 10%: `f1 > f0` saves about
/// 5%, within the 6% that 10 samples leave open).
fn open_question() -> Vec<u64> {
    (0..10u64)
        .map(|k| u64::from(k != 0) | u64::from(k >= 2) << 1)
        .collect()
}

/// An order that looks better by more than the switching cost plus half a
/// sampling budget, unproven only because of the pass table's uncertainty,
/// has the step it would move earlier (`f1`) measured after the rejections
/// of the step it would jump (`f0`) at a rate of its own (half the full
/// budget, at least the cheap steps' rate), which does not decay as the
/// order stays; the cheap steps' rate does, as on a settled question,
/// where nothing is targeted.
#[test]
fn an_open_question_measures_its_answer_at_a_rate_that_does_not_decay() {
    let contested = decide(&open_question(), 12);
    assert!(contested.iter().all(|&(_, _, c)| c), "{contested:?}");
    // A rate of its own, from half the budget: at first below the cheap
    // steps' full-budget rate (it then runs at theirs), then above it.
    let targeted = contested[11].1;
    for &(base, rate, _) in &contested {
        assert!(rate >= base && rate > 0.0, "{contested:?}");
    }
    for &(_, rate, _) in &contested[8..] {
        assert!((rate - targeted).abs() <= 1e-12 * targeted, "{contested:?}");
    }
    assert!(contested[11].0 < 0.3 * contested[0].0, "{contested:?}");
    assert!(targeted > 1.5 * contested[11].0, "{contested:?}");
    // The same decisions on a settled question (the two filters alike).
    let settled: Vec<u64> = (0..10u64)
        .map(|k| u64::from(k != 0) | u64::from(k != 0) << 1)
        .collect();
    let decayed = decide(&settled, 12);
    assert!(
        decayed.iter().all(|&(_, t, c)| !c && t == 0.0),
        "{decayed:?}"
    );
    let (start, end) = (decayed[0].0, decayed[11].0);
    assert!(end < 0.3 * start, "{decayed:?}");
}

/// The first per-event samples of batches (a columnar analysis) bring a
/// decision at the next observed batch (by default the first decision
/// waits for the second); until they come in, every batch is asked for
/// them.
#[test]
fn the_first_batch_samples_decide_at_once() {
    let planner = two_steps();
    assert!((0..64).all(|e| planner.wants_event_samples(0, e)));
    assert_eq!(planner.current_order(0), ["f0", "f1"]);
    // f0 lets every event through, f1 one in ten: f1 first saves 45%.
    let rows: Vec<(u64, u64)> = (0..256u64)
        .map(|k| (0b11, 0b01 | u64::from(k % 10 == 0) << 1))
        .collect();
    planner.observe_event_samples(0, &rows);
    assert_eq!(planner.current_order(0), ["f0", "f1"]);
    // The batch that measured them: 1000 events, 100 left by f1.
    let (f0, f1) = (
        planner.labels.iter().position(|l| l == "f0"),
        planner.labels.iter().position(|l| l == "f1"),
    );
    let outcome = PathOutcome {
        steps: vec![(f0.unwrap(), true), (f1.unwrap(), true)],
        counts: vec![Some((1000, 1000)), Some((1000, 100))],
        accepted: true,
        sampled: false,
        ..PathOutcome::default()
    };
    planner.observe(0, 0, &outcome);
    assert_eq!(planner.current_order(0), ["f1", "f0"]);
    assert!((0..64).all(|e| planner.wants_event_samples(0, e) == planner.is_sampled(0, e)));
}

/// A step run on batches: one timing averages the running time over the
/// batch's events, so a single one already measures the cost per event
/// (within 10%), rather than counting as one noisy timing shrunk towards the
/// other steps.
#[test]
fn one_batch_timing_measures_the_cost_per_event() {
    let planner = planner(&OrderingOptions::new(Policy::Adaptive));
    let Slot::Dynamic(d) = &planner.paths[0] else {
        panic!("a dynamic path");
    };
    // f0: 100 ms on 100 000 events; f1: 40 ms on the 10 000 left.
    for (i, (ns, seen)) in [(100_000_000u64, 100_000u64), (40_000_000, 10_000)]
        .into_iter()
        .enumerate()
    {
        planner.rings[d.steps[i]].as_ref().unwrap().push(ns);
        d.batch_seen[i].store(seen, std::sync::atomic::Ordering::Relaxed);
        d.batch_runs[i].store(1, std::sync::atomic::Ordering::Relaxed);
    }
    let mut st = lock(&d.state);
    planner.update_costs(d, &mut st);
    for (i, per_event) in [1e-6, 4e-6].into_iter().enumerate() {
        assert!(
            (st.costs[i] / per_event - 1.0).abs() < 0.05,
            "{:?}",
            st.costs
        );
        assert!(st.cost_se[i] <= 0.11 * per_event, "{:?}", st.cost_se);
    }
}

/// A probe run through every step before a batch enters its path decides
/// at once, from its own vectors and timings (no step measured before): the
/// batch, and every batch after it, starts in the decided order. Only the
/// first one is asked for such a probe.
#[test]
fn a_probe_before_the_path_decides_at_once() {
    let planner = planner(&OrderingOptions::new(Policy::Adaptive));
    assert!(planner.wants_first_probe(0));
    assert_eq!(planner.current_order(0), ["f0", "f1"]);
    // f0 lets 90% through at 2 µs per event, f1 10% at 1 µs: f1 first.
    let rows: Vec<(u64, u64)> = (0..4096u64)
        .map(|k| (0b11, u64::from(k % 10 != 0) | u64::from(k % 10 == 0) << 1))
        .collect();
    let chunks = |ns: [f64; 4]| ns.iter().map(|&s| (s, 1024)).collect::<Vec<_>>();
    let timings = [
        chunks([2.05e-3, 2.04e-3, 2.06e-3, 2.03e-3]),
        chunks([1.02e-3, 1.03e-3, 1.01e-3, 1.02e-3]),
    ];
    planner.decide_from_probe(0, &rows, &timings, &[]);
    assert_eq!(planner.current_order(0), ["f1", "f0"]);
    assert!(!planner.wants_first_probe(0));
    let Slot::Dynamic(d) = &planner.paths[0] else {
        panic!("a dynamic path");
    };
    let st = lock(&d.state);
    for (i, per_event) in [2e-6, 1e-6].into_iter().enumerate() {
        assert!(
            (st.costs[i] / per_event - 1.0).abs() < 0.05,
            "{:?}",
            st.costs
        );
        // Four timings that agree: a small uncertainty (one alone would
        // be trusted to 10% only).
        assert!(st.cost_se[i] < 0.02 * per_event, "{:?}", st.cost_se);
    }
}

/// Batches after a probe whose timings came out wrong (other processes
/// slowed `f0`'s chunks by half: 0.6 µs per event measured, 0.4 µs true;
/// `f1` 0.5 µs; both pass 60%, independently): the first order puts `f1`
/// first, 5% above the best. The batches' own timings, compared per event
/// with the probe's (tens of times more events each), set it right by the
/// decision after the fourth batch, and noisy timings afterwards (one call
/// in three late by 2 to 12 ms, up to half the call) never flip it back.
/// Timed per call, a batch (tens of ms) among the probe's chunks (0.5 ms)
/// looked like a descheduled thread and was left out while its events
/// counted: the wrong order stayed for 31 batches.
#[test]
fn batch_timings_correct_a_probe_slowed_by_other_processes() {
    let planner = planner(&OrderingOptions::new(Policy::Adaptive));
    let step = |label: &str| planner.labels.iter().position(|l| l == label).unwrap();
    let f0 = step("f0");
    // Independent decisions, each passing 60% of the events.
    let rows: Vec<(u64, u64)> = (0..4096u64)
        .map(|k| (0b11, u64::from(k % 5 < 3) | u64::from(k / 5 % 5 < 3) << 1))
        .collect();
    let chunks = |per_event: f64| vec![(per_event * 1024.0, 1024); 4];
    planner.decide_from_probe(0, &rows, &[chunks(0.6e-6), chunks(0.5e-6)], &[]);
    assert_eq!(planner.current_order(0), ["f1", "f0"]);
    let cost = [0.4e-6, 0.5e-6];
    let mut noise = 0x2545_f491_4f6c_dd1du64;
    let mut late = || {
        noise ^= noise << 13;
        noise ^= noise >> 7;
        noise ^= noise << 17;
        if noise.is_multiple_of(3) {
            2e-3 + (noise >> 8) as f64 / (1u64 << 56) as f64 * 10e-3
        } else {
            0.0
        }
    };
    let mut orders = Vec::new();
    for batch in 0..40u64 {
        let order = planner.current_order(0);
        let modules: Vec<usize> = order.iter().map(|l| step(l)).collect();
        let (mut seen, mut counts) = (100_000u64, Vec::new());
        for &m in &modules {
            let i = if m == f0 { 0 } else { 1 };
            let t = cost[i] * seen as f64;
            planner.observe_batch_cost(m, t + late().min(0.5 * t), seen);
            counts.push(Some((seen, seen * 3 / 5)));
            seen = seen * 3 / 5;
        }
        let outcome = PathOutcome {
            steps: modules.iter().map(|&m| (m, true)).collect(),
            counts,
            accepted: true,
            sampled: false,
            ..PathOutcome::default()
        };
        planner.observe(0, batch, &outcome);
        orders.push(planner.current_order(0) == ["f0", "f1"]);
    }
    let first_right = orders
        .iter()
        .position(|&r| r)
        .expect("the order is set right");
    assert!(first_right <= 3, "{orders:?}");
    assert!(orders[first_right..].iter().all(|&r| r), "{orders:?}");
}

/// A change decided on samples that misjudge a step: 200 samples in which
/// `f1` rejects half of the events (independently of `f0`, which rejects
/// 10%), against 100 events of the written order `f0 > f1` in which `f1`
/// rejects 10% of those `f0` passes, put `f1` first (the estimate, raked
/// to the stop counts with the samples' weight as a prior, still leans on
/// the samples; on 200 such events it follows the counts and keeps the
/// order). Once `f1 > f0` runs, its own stop counts show `f1` rejecting 1%
/// (predicted: about 15%): the events cost more than under the written
/// order, beyond their noise, and the change is undone; the next decision,
/// on the same samples, does not take it again. A change whose stop counts
/// refute the prediction too (`f1` rejecting half) but show it cheaper
/// stays.
#[test]
fn a_change_its_own_stop_counts_refute_is_undone() {
    let run = |f1_rejects_per_mille: u64| {
        let planner = two_steps();
        let Slot::Dynamic(d) = &planner.paths[0] else {
            panic!("a dynamic path");
        };
        {
            let mut s = lock(&d.samples);
            for k in 0..200u64 {
                let pass = u64::from(k % 10 != 0) | u64::from(k % 2 == 0) << 1;
                s.push(Sample { known: 0b11, pass });
            }
        }
        // The written order on 100 events: f0 rejects 10, f1 9.
        for (position, events) in [(0, 10), (1, 9), (2, 81)] {
            d.stops.add(position, events);
        }
        let mut st = lock(&d.state);
        st.learning = false;
        planner.decide_adaptive(d, &mut st, 1_000);
        assert_eq!(planner.current_order(0), ["f1", "f0"]);
        let trial = st.trial.as_ref().expect("a change on trial");
        assert!(trial.predicted[0] < 0.9, "{trial:?}");
        // 1000 events under `f1 > f0`; f0 rejects 10% of those f1 passes.
        let rejected_by_f1 = f1_rejects_per_mille;
        let rejected_by_f0 = (1000 - rejected_by_f1) / 10;
        for (position, events) in [
            (0, rejected_by_f1),
            (1, rejected_by_f0),
            (2, 1000 - rejected_by_f1 - rejected_by_f0),
        ] {
            d.stops.add(position, events);
        }
        planner.verify_change(d, &mut st, 2_000);
        let undone = planner.current_order(0) == ["f0", "f1"];
        if undone {
            let history = lock(&planner.history);
            let reason = &history.last().unwrap().reason;
            assert!(
                reason.contains("undone") && reason.contains("'f1'"),
                "{reason}"
            );
            drop(history);
            // The order back in force keeps its stop counts of before the
            // trial (10, 9, 81): the drift test compares the events to
            // come with them, so a drift during the trial is still seen.
            assert_eq!(d.stops.snapshot(3), [10, 9, 81]);
            planner.decide_adaptive(d, &mut st, 2_100);
            assert_eq!(planner.current_order(0), ["f0", "f1"]);
        }
        undone
    };
    assert!(run(10), "refuted by its stop counts");
    assert!(!run(500), "confirmed by its stop counts");
}

/// The plans in force put the targeted rate to work: of many events, the
/// share whose plan measures `f1` after a rejection by `f0` is the rate of
/// the open question, above the share of sampled events (the cheap steps'
/// rate, decayed).
#[test]
fn the_plans_measure_the_open_question_after_the_rejections_it_is_about() {
    // Twelve decisions: the cheap steps' rate has decayed by then.
    let (planner, after) = decided(&open_question(), 12);
    let (base, targeted, _) = after[11];
    assert!(targeted > 0.0, "{after:?}");
    assert_eq!(planner.current_order(0), ["f0", "f1"]);
    let events = 200_000u64;
    let (mut measured, mut sampled) = (0u64, 0u64);
    for e in 0..events {
        let plan = planner.plan(0, e);
        measured += u64::from(plan.evaluate_all && !plan.skips_after_reject(0, 1));
        sampled += u64::from(planner.is_sampled(0, e));
    }
    let share = measured as f64 / events as f64;
    let spread = 4.0 * (targeted / events as f64).sqrt();
    assert!(
        (share - targeted).abs() <= spread,
        "{share} against {targeted}"
    );
    assert!(
        (sampled as f64 / events as f64 - base).abs() <= 4.0 * (base / events as f64).sqrt(),
        "{sampled} sampled events, rate {base}"
    );
    assert!(targeted > 1.5 * base, "{targeted} against {base}");
}

/// An event whose plan evaluates all steps only for a targeted rate (it is
/// not among the sampled events) joins the samples when a step ran after
/// its rejection, and not otherwise: accepted, it tells nothing beyond the
/// stop counts.
#[test]
fn an_event_sampled_for_a_targeted_rate_is_a_sample_only_if_it_measured_something() {
    let (planner, after) = decided(&open_question(), 12);
    assert!(after[11].1 > after[11].0, "{after:?}");
    let Slot::Dynamic(d) = &planner.paths[0] else {
        panic!("a dynamic path");
    };
    let targeted_only: Vec<u64> = (0..100_000)
        .filter(|&e| planner.plan(0, e).evaluate_all && !planner.is_sampled(0, e))
        .take(2)
        .collect();
    assert_eq!(targeted_only.len(), 2);
    let (f0, f1) = (d.steps[0], d.steps[1]);
    let samples = || lock(&d.samples).total;
    let before = samples();
    let rejected_then_measured = PathOutcome {
        steps: vec![(f0, false), (f1, true)],
        counts: vec![None, None],
        accepted: false,
        sampled: true,
        ..PathOutcome::default()
    };
    planner.observe(0, targeted_only[0], &rejected_then_measured);
    assert_eq!(samples(), before + 1);
    let accepted = PathOutcome {
        steps: vec![(f0, true), (f1, true)],
        counts: vec![None, None],
        accepted: true,
        sampled: true,
        ..PathOutcome::default()
    };
    planner.observe(0, targeted_only[1], &accepted);
    assert_eq!(samples(), before + 1);
}

/// A targeted rate never lets a step run after a rejection without a step
/// it must follow: `f2` must follow `f1`, measured after a rejection at a
/// low rate of its own; `f2`'s high rate after `f0`'s rejections is capped
/// by it, while after a rejection by `f1` itself (which ran) it is not.
#[test]
fn a_targeted_rate_respects_the_precedence_constraints() {
    let steps = [10, 11, 12];
    let groups = vec![vec![0], vec![1], vec![2]];
    let rates = [0.01, 0.01, 0.01];
    let targeted = [(0, 0.0), (0, 0.0), (0b011, 0.5)];
    let preds = [0, 0, 0b010];
    let current = make_current(
        &steps,
        groups,
        &rates,
        Targets {
            after: &targeted,
            preds: &preds,
        },
    );
    let runs_after = |k: usize, g: usize| {
        current
            .sampled
            .iter()
            .filter(|(_, plan)| !plan.skips_after_reject(k, g))
            .map(|&(limit, _)| limit)
            .max()
            .map_or(0.0, |limit| limit as f64 / u64::MAX as f64)
    };
    // After f0's rejection: f2 at most as often as f1 (0.01).
    assert!(runs_after(0, 2) <= runs_after(0, 1) + 1e-9);
    assert!((runs_after(0, 1) - 0.01).abs() < 1e-6);
    // After f1's rejection: f2 at its targeted rate.
    assert!((runs_after(1, 2) - 0.5).abs() < 1e-6);
    // No plan of the order runs f2 after f0's rejection without f1.
    for (_, plan) in &current.sampled {
        assert!(plan.skips_after_reject(0, 2) || !plan.skips_after_reject(0, 1));
    }
}

/// A 1 ms step timed once, among steps of 200 µs timed many times, has its
/// cost estimate shrunk towards theirs for ordering (to about 400 µs, no
/// more than the two cheaper steps together); measuring it after a
/// rejection still costs its measured 1 ms, so it counts as expensive and
/// the warm-up, which measures the cheap steps after every rejection,
/// measures it only at its own small rate.
#[test]
fn a_costly_step_timed_once_is_not_measured_after_every_rejection_of_the_warm_up() {
    let mut proc = Process::new("scripted");
    proc.set_source(EmptySource::new(1));
    for label in ["f0", "f1", "f2"] {
        proc.add(ModuleDesc::filter(label, Driven));
    }
    proc.add_path(PathDesc::new("sel", ["f0", "f1", "f2"]).reorderable(true));
    let planner = OrderingPlanner::new(
        &proc.compile().unwrap(),
        &OrderingOptions::new(Policy::Adaptive),
    );
    let rings: Vec<_> = planner.rings.iter().flatten().collect();
    assert_eq!(rings.len(), 3);
    for ring in &rings[..2] {
        for _ in 0..200 {
            ring.push(200_000);
        }
    }
    rings[2].push(1_000_000);
    let Slot::Dynamic(d) = &planner.paths[0] else {
        panic!("a dynamic path");
    };
    let mut st = lock(&d.state);
    assert!(st.learning);
    planner.update_costs(d, &mut st);
    assert!(
        st.costs[2] <= st.costs[0] + st.costs[1],
        "shrunk for ordering: {:?}",
        st.costs
    );
    let cur = read(&d.current).clone();
    planner.set_rates(d, &mut st, &cur, None);
    assert!(st.heavy[2], "{:?}", st.heavy);
    assert_eq!(st.rates[..2], [1.0, 1.0]);
    assert!(st.rates[2] < 0.25, "{:?}", st.rates);
}

/// Drives `planner` through `batches` batches of `events` events each, `f0`
/// letting every event through at 2 µs per event and `f1` one in ten at
/// 1 µs, in the order in force, with the per-event samples of the batches
/// it asks for; returns, after each batch, whether the path is learning,
/// its decisions so far and its order.
fn batches(planner: &OrderingPlanner, batches: u64, events: u64) -> Vec<(bool, u64, Vec<String>)> {
    let Slot::Dynamic(d) = &planner.paths[0] else {
        panic!("a dynamic path");
    };
    let step = |label: &str| planner.labels.iter().position(|l| l == label).unwrap();
    let rows: Vec<(u64, u64)> = (0..256u64)
        .map(|k| (0b11, 0b01 | u64::from(k % 10 == 0) << 1))
        .collect();
    (0..batches)
        .map(|batch| {
            if planner.wants_event_samples(0, batch) {
                planner.observe_event_samples(0, &rows);
            }
            let (mut seen, mut steps, mut counts) = (events, Vec::new(), Vec::new());
            for label in planner.current_order(0) {
                let (cost, passed) = match label.as_str() {
                    "f0" => (2e-6, seen),
                    _ => (1e-6, seen.div_ceil(10)),
                };
                planner.observe_batch_cost(step(&label), cost * seen as f64, seen);
                steps.push((step(&label), true));
                counts.push(Some((seen, passed)));
                seen = passed;
            }
            let outcome = PathOutcome {
                steps,
                counts,
                accepted: true,
                sampled: false,
                ..PathOutcome::default()
            };
            planner.observe(0, batch, &outcome);
            let st = lock(&d.state);
            (st.learning, st.decisions, planner.current_order(0))
        })
        .collect()
}

/// A path observed in batches (the Python face): the warm-up is counted in
/// the events the batches carry (`warmup_events`, 64), with at least
/// `MIN_WARMUP_BATCHES` batches for the timings, not in 64 observations
/// meant for single events (64 batches: a job of 6.4 M events at 10⁵ per
/// batch was sampled throughout). After it, the decision interval (64
/// events, doubling) is at least one batch. Per event, nothing changes.
#[test]
fn a_warm_up_on_batches_counts_their_events() {
    let t = OrderingOptions::new(Policy::Adaptive).tuning;
    assert_eq!((warmup_obs(&t, None), first_step(&t, None)), (64, 2));
    assert_eq!(first_decision(Policy::HepFrame, &t, None), 64);
    for (events, warmup) in [(100_000u64, MIN_WARMUP_BATCHES), (10, 7)] {
        let planner = planner(&OrderingOptions::new(Policy::Adaptive));
        let seen = batches(&planner, 16, events);
        let learnt = seen.iter().position(|&(learning, _, _)| !learning);
        assert_eq!(learnt, Some(warmup as usize - 1), "{events}: {seen:?}");
        assert_eq!(seen[15].2, ["f1", "f0"], "{seen:?}");
        if events == 100_000 {
            // Every batch holds more events than the interval: each one
            // brings a decision.
            for w in seen[learnt.unwrap()..].windows(2) {
                assert_eq!(w[1].1, w[0].1 + 1, "{seen:?}");
            }
        }
    }
}

/// `hepframe` on batches takes its first decision after the warm-up of
/// their events (4 batches of 10⁵ events), not after 64 batches.
#[test]
fn hepframe_on_batches_decides_after_the_warm_up_of_their_events() {
    let planner = planner(&OrderingOptions::new(Policy::HepFrame));
    let seen = batches(&planner, 8, 100_000);
    let first = seen.iter().position(|&(_, decisions, _)| decisions > 0);
    assert_eq!(first, Some(MIN_WARMUP_BATCHES as usize - 1), "{seen:?}");
    assert_eq!(seen[7].2, ["f1", "f0"], "{seen:?}");
}
