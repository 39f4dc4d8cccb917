//! Combining under timing jitter, on a scripted closed loop: a job's event
//! slots, host threads that bring each event to the device module, and a
//! device that runs one launch at a time, all on a simulated clock driving
//! the same `Combiner` as the executors and the simulator.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use evflow_device::{CombinePolicy, Combiner, FILL_TIMEOUTS, PROBE_AFTER};
use rand::{Rng, SeedableRng};

const SLOTS: usize = 8;
const THREADS: usize = 2;
const TIMEOUT_S: f64 = 200e-6;
/// A launch: 2 ms of fixed cost, 1 µs per event.
const FIXED_S: f64 = 2e-3;
const PER_EVENT_S: f64 = 1e-6;
/// The longest a batch may gather: [`FILL_TIMEOUTS`] time-outs, or a
/// launch's fixed cost when that is longer (the fit's, exact here).
const MAX_WAIT_S: f64 = if FILL_TIMEOUTS * TIMEOUT_S > FIXED_S {
    FILL_TIMEOUTS * TIMEOUT_S
} else {
    FIXED_S
};

/// What happened: each launch's size, start and end, the launches an idle
/// engine started, and when the last event reached the device module.
#[derive(Debug, Default)]
struct Job {
    sizes: Vec<usize>,
    starts: Vec<f64>,
    ends: Vec<f64>,
    idle_launches: usize,
    last_arrival: f64,
}

/// A time as a heap key: for times ≥ 0 (all of them here) the bits of an
/// `f64` order as its values do.
fn key(t: f64) -> u64 {
    debug_assert!(t >= 0.0);
    t.to_bits()
}

/// Runs `events` events through `SLOTS` slots: an event's host work (read,
/// the producers before the device module, the consumer of the last
/// launch's result) takes `host_s(event)` on one of `THREADS` threads, then
/// it waits in the combiner; a landing frees its events' slots. The engine
/// is idle when no host work is left (every event in flight waits on the
/// device). Checks on the way that no event is held hostage: a batch leaves
/// by the longest wait ([`MAX_WAIT_S`]) after its oldest event arrived or
/// after the landing of the last launch on the device then.
fn run(hold: bool, events: u64, host_s: impl Fn(u64) -> f64) -> Job {
    let mut c: Combiner<u64> = Combiner::new(CombinePolicy {
        max_events: SLOTS,
        timeout_s: TIMEOUT_S,
        max_in_flight: 0,
        hold_small_launches: hold,
    })
    .with_parallel_launches(3);
    // (time, 0: arrival of event / 1: landing of a launch's events)
    let mut heap: BinaryHeap<Reverse<(u64, u8, Vec<u64>)>> = BinaryHeap::new();
    let mut threads = [0.0f64; THREADS];
    let mut next_event = 0u64;
    let (mut device_free, mut bound) = (0.0f64, f64::INFINITY);
    let mut job = Job::default();
    let mut seen = vec![false; events as usize];
    let mut read = |now: f64, heap: &mut BinaryHeap<_>, next_event: &mut u64| {
        if *next_event < events {
            let t = threads.iter_mut().min_by(|a, b| a.total_cmp(b)).unwrap();
            *t = t.max(now) + host_s(*next_event);
            heap.push(Reverse((key(*t), 0, vec![*next_event])));
            *next_event += 1;
        }
    };
    for _ in 0..SLOTS {
        read(0.0, &mut heap, &mut next_event);
    }
    let launch = |now: f64,
                  batch: Vec<u64>,
                  heap: &mut BinaryHeap<_>,
                  job: &mut Job,
                  device_free: &mut f64,
                  bound: f64| {
        assert!(now <= bound + 1e-12, "held hostage: {now} > {bound}");
        let end = now.max(*device_free) + FIXED_S + PER_EVENT_S * batch.len() as f64;
        *device_free = end;
        job.sizes.push(batch.len());
        job.starts.push(now);
        job.ends.push(end);
        heap.push(Reverse((key(end), 1, batch)));
    };
    let mut now = 0.0;
    loop {
        let deadline = c.deadline().filter(|_| !c.held());
        let next = heap.peek().map(|Reverse((t, _, _))| f64::from_bits(*t));
        match (next, deadline) {
            (_, Some(d)) if next.is_none_or(|t| d < t) => {
                now = d;
                let batch = c.poll(now).expect("a batch past its deadline");
                launch(now, batch, &mut heap, &mut job, &mut device_free, bound);
            }
            (Some(_), _) => {
                let Reverse((t, kind, items)) = heap.pop().unwrap();
                now = f64::from_bits(t);
                if kind == 0 {
                    job.last_arrival = now;
                    if c.is_empty() {
                        bound = now.max(device_free) + MAX_WAIT_S + 1e-9;
                    }
                    if let Some(b) = c.push(now, items[0]) {
                        launch(now, b, &mut heap, &mut job, &mut device_free, bound);
                    }
                } else {
                    c.record_launch(items.len(), FIXED_S + PER_EVENT_S * items.len() as f64);
                    for &e in &items {
                        assert!(!seen[e as usize], "event {e} launched twice");
                        seen[e as usize] = true;
                        read(now, &mut heap, &mut next_event);
                    }
                    if let Some(b) = c.landed(now, items.len()) {
                        launch(now, b, &mut heap, &mut job, &mut device_free, bound);
                    }
                }
            }
            (None, _) => {}
        }
        // No host work left: the engine tells the module it is idle.
        if !heap.iter().any(|Reverse((_, kind, _))| *kind == 0)
            && let Some(b) = c.idle()
        {
            job.idle_launches += 1;
            launch(now, b, &mut heap, &mut job, &mut device_free, bound);
        }
        if heap.is_empty() && c.is_empty() {
            break;
        }
    }
    assert!(seen.iter().all(|&s| s), "every event launched once");
    job
}

/// 20 µs of host work per event, except one stall of 500 µs for two events
/// of the launch after the 50th: it cuts that launch short.
fn one_stall(event: u64) -> f64 {
    if (406..408).contains(&event) {
        500e-6
    } else {
        20e-6
    }
}

#[test]
fn a_stagger_left_by_one_stall_is_undone() {
    // Without holding, the launch cut short leaves its last events to a
    // launch of their own, and every later launch gathers only the events
    // of the launch before: staggered to the end of the job.
    let staggered = run(false, 4000, one_stall);
    let after = &staggered.sizes[60..staggered.sizes.len() - 1];
    assert!(after.iter().all(|&n| n < SLOTS), "{:?}", staggered.sizes);
    // Waiting for the events on the device, then a time-out for them to
    // come back, realigns the launches within a few.
    let realigned = run(true, 4000, one_stall);
    assert!(realigned.sizes[..50].iter().all(|&n| n == SLOTS));
    let stalled = realigned.sizes.iter().position(|&n| n < SLOTS).unwrap();
    let since = &realigned.sizes[stalled..];
    let back = since.iter().position(|&n| n == SLOTS).unwrap();
    assert!(back < 20, "{since:?}");
    let full = &since[back..since.len() - 1]; // the last takes what is left
    assert!(full.iter().all(|&n| n == SLOTS), "{since:?}");
    // Full launches finish the job sooner.
    let (fast, slow) = (
        realigned.ends.last().unwrap(),
        staggered.ends.last().unwrap(),
    );
    assert!(fast < &(0.8 * slow), "{fast} s vs {slow} s");
}

#[test]
fn the_end_of_a_job_is_not_delayed() {
    // 4004 events: the last 4 cannot fill a launch. Once the last event
    // has arrived and the launch before has landed, what waits leaves at
    // once (the engine is idle), not after a time-out from that landing.
    for hold in [false, true] {
        let job = run(hold, 4004, one_stall);
        let n = job.starts.len();
        let last = job.starts[n - 1];
        let ready = job.last_arrival.max(job.ends[n - 2]);
        assert!(
            last <= ready + 1e-12,
            "hold {hold}: last launch at {last}, ready {ready}"
        );
        // Held for the launch before it, the last batch is started by the
        // idle engine at that launch's landing.
        assert!(!hold || job.idle_launches == 1, "{:?}", job.sizes);
    }
}

#[test]
fn jittered_host_times_hold_no_event_hostage() {
    // Seeded host times of 5-60 µs with stalls of up to 1 ms: every event
    // launched once, no batch past its bound (checked in `run`), and
    // launches at least as large as without holding.
    for seed in 0..20 {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let times: Vec<f64> = (0..2000)
            .map(|_| {
                if rng.gen_bool(0.01) {
                    rng.gen_range(200e-6..1e-3)
                } else {
                    rng.gen_range(5e-6..60e-6)
                }
            })
            .collect();
        let plain = run(false, 2000, |e| times[e as usize]);
        let held = run(true, 2000, |e| times[e as usize]);
        assert!(
            held.sizes.len() <= plain.sizes.len(),
            "seed {seed}: {} launches held, {} not",
            held.sizes.len(),
            plain.sizes.len()
        );
    }
}

#[test]
fn the_time_out_follows_the_fill_of_full_batches() {
    // Host times of 45-75 µs: 8 events on 2 threads take about 240 µs to
    // come back, more than the 200 µs time-out. Without holding every
    // launch is cut short; re-aligning alone brings back full launches
    // after each cut (441 of 595 launches were short); with a time-out
    // that follows the fills of full batches few are cut at all.
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    let times: Vec<f64> = (0..4000).map(|_| rng.gen_range(45e-6..75e-6)).collect();
    let short = |j: &Job| j.sizes.iter().filter(|&&n| n < SLOTS).count();
    let plain = run(false, 4000, |e| times[e as usize]);
    assert_eq!(short(&plain), plain.sizes.len());
    let held = run(true, 4000, |e| times[e as usize]);
    assert!(
        short(&held) < 150,
        "{} of {}",
        short(&held),
        held.sizes.len()
    );
}

#[test]
fn the_time_out_of_a_batch_of_mostly_fixed_cost_is_its_fill_time_bounded() {
    let policy = CombinePolicy {
        max_events: 8,
        timeout_s: TIMEOUT_S,
        max_in_flight: 0,
        hold_small_launches: true,
    };
    // Launches of 1-4 events, 2 ms + 1 µs each, then full batches that
    // took `fill` to gather.
    let fitted = |policy: CombinePolicy, fill: f64, per_event: f64| {
        let mut c = Combiner::new(policy);
        for k in 0..16 {
            let n = 1 + k % 4;
            (0..n).for_each(|i| drop(c.push(0.0, i)));
            let b = c.flush().unwrap();
            c.record_launch(n, FIXED_S + per_event * n as f64);
            c.landed(0.0, b.len());
        }
        (0..8).for_each(|i| drop(c.push(1.0 + fill * i as f64 / 7.0, i)));
        c.push(2.0, 0);
        c
    };
    let c = fitted(policy, 300e-6, PER_EVENT_S);
    assert!((c.timeout() - 450e-6).abs() < 1e-9, "{}", c.timeout());
    assert!((c.deadline().unwrap() - (2.0 + 450e-6)).abs() < 1e-9);
    // Bounded by a few time-outs, or a launch's fixed cost when longer,
    // whatever the fill.
    let slow = fitted(policy, 0.1, PER_EVENT_S);
    assert!(
        (slow.timeout() - MAX_WAIT_S).abs() < 1e-9,
        "{}",
        slow.timeout()
    );
    let short = CombinePolicy {
        timeout_s: 1e-3,
        ..policy
    };
    let five = fitted(short, 0.1, PER_EVENT_S).timeout();
    assert!((five - FILL_TIMEOUTS * 1e-3).abs() < 1e-12, "{five}");
    // Launches whose time is mostly their size keep the policy's time-out.
    let bytes = fitted(policy, 300e-6, 10e-3);
    assert_eq!(bytes.timeout(), TIMEOUT_S);
    // So does a module whose holds are off.
    let off = CombinePolicy {
        hold_small_launches: false,
        ..policy
    };
    assert_eq!(fitted(off, 300e-6, PER_EVENT_S).timeout(), TIMEOUT_S);
    // And one with a fixed limit of launches in flight, which replaces it.
    let limited = CombinePolicy {
        max_in_flight: 2,
        ..policy
    };
    assert_eq!(fitted(limited, 300e-6, PER_EVENT_S).timeout(), TIMEOUT_S);
}

/// Events per launch and the job's events/s, all launches but the last.
fn rate(job: &Job) -> (f64, f64) {
    let n = job.sizes.len() - 1;
    let events: usize = job.sizes[..n].iter().sum();
    (events as f64 / n as f64, events as f64 / job.ends[n - 1])
}

#[test]
fn launches_all_of_one_size_probe_for_full_ones() {
    // 200 µs of host work per event: 4 events come back within the
    // time-out, every time, so every launch has 4 and the fit cannot tell
    // their fixed cost: neither re-alignment nor the time-out that follows
    // the fill engaged. A probe every few short launches waits for a full
    // one; then the fit tells, and launches stay full.
    let plain = run(false, 4000, |_| 200e-6);
    let n = plain.sizes.len() - 1;
    assert!(
        plain.sizes[..n].iter().all(|&s| s == 4),
        "{:?}",
        plain.sizes
    );
    let held = run(true, 4000, |_| 200e-6);
    let n = held.sizes.len() - 1;
    let full = held.sizes.iter().position(|&s| s == SLOTS).unwrap();
    assert!(full <= PROBE_AFTER as usize + 1, "{:?}", held.sizes);
    assert!(
        held.sizes[40..n].iter().all(|&s| s == SLOTS),
        "{:?}",
        held.sizes
    );
    let ((_, slow), (_, fast)) = (rate(&plain), rate(&held));
    assert!(fast > 1.35 * slow, "{fast} ev/s vs {slow} ev/s");
}

#[test]
fn fills_longer_than_five_time_outs_reach_full_launches() {
    // 400 µs of host work per event: a full batch takes 1.2 ms from its
    // first event, beyond 5 time-outs (1 ms), so the time-out that follows
    // the fill could not wait for it; a launch's fixed cost (2 ms) bounds
    // the wait instead, and launches are full.
    let plain = run(false, 3000, |_| 400e-6);
    let held = run(true, 3000, |_| 400e-6);
    let n = held.sizes.len() - 1;
    assert!(
        held.sizes[40..n].iter().all(|&s| s == SLOTS),
        "{:?}",
        held.sizes
    );
    let ((_, slow), (_, fast)) = (rate(&plain), rate(&held));
    assert!(fast > 1.8 * slow, "{fast} ev/s vs {slow} ev/s");
}

#[test]
fn probes_that_cannot_fill_cost_little() {
    // 3 ms of host work per event: no batch fills within the longest wait,
    // so probes keep failing; one batch in `PROBE_AFTER + 1` waits longer,
    // bounded (checked in `run`), and the job loses little.
    for host in [3e-3, 1e-3] {
        let plain = run(false, 1000, |_| host);
        let held = run(true, 1000, |_| host);
        let ((_, slow), (_, probed)) = (rate(&plain), rate(&held));
        assert!(probed > 0.9 * slow, "{probed} ev/s vs {slow} ev/s");
    }
}
