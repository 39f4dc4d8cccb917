//! How synthetic modules spend their time: [`Timing`] (per-event times,
//! jitter, configured failures) and the two kinds of [`Work`].
//!
//! *Busy* work is a fixed amount of arithmetic, calibrated once per process
//! to the requested seconds. It never looks at a clock while working, so an
//! oversubscribed machine makes it slower, as real work would be.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use evflow_core::hash::mix;
use evflow_core::{Event, ModuleResult};

/// How a synthetic module spends its time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work {
    /// Calibrated arithmetic on the CPU.
    Busy,
    /// Sleeping, without using the CPU: lets a small machine emulate many
    /// cores. See [`sleep_work`].
    Sleep,
}

/// Per-event times of a synthetic module: event `i` of the job takes
/// `times[i % times.len()] * scale` seconds.
#[derive(Clone, Debug)]
pub struct Timing {
    times: Arc<[f64]>,
    scale: f64,
    work: Work,
    /// `(fraction, seed)`: each event's time is multiplied by a factor
    /// drawn uniformly in `[1 − fraction, 1 + fraction]` by a hash of the
    /// event index ([`Timing::with_jitter`]).
    jitter: Option<(f64, u64)>,
    /// Event numbers on which the module returns an error
    /// ([`Timing::with_failures`]).
    fail_on: Arc<[u64]>,
    /// Ranges each event's time is split into, run at once
    /// ([`Timing::with_ranges`]; 1: one piece on the calling thread).
    ranges: u32,
}

impl Timing {
    pub fn new(times: Vec<f64>, scale: f64, work: Work) -> Self {
        let times: Arc<[f64]> = if times.is_empty() {
            Arc::from(vec![0.0])
        } else {
            Arc::from(times)
        };
        Self {
            times,
            scale,
            work,
            jitter: None,
            fail_on: Arc::from(Vec::new()),
            ranges: 1,
        }
    }
    /// Splits each event's time into `ranges` ranges that the calling
    /// thread and idle cores run at once (a parallel-for within the call,
    /// [`crate::ranges`]); ranges shorter than
    /// [`RANGE_GRAIN_S`](crate::RANGE_GRAIN_S) are merged. The time a call
    /// takes then depends on the cores free; its work does not.
    pub fn with_ranges(mut self, ranges: u32) -> Self {
        self.ranges = ranges.max(1);
        self
    }
    /// Ranges each event's time is split into ([`Timing::with_ranges`]).
    pub fn ranges(&self) -> u32 {
        self.ranges
    }
    /// Makes the module fail (return an error) on these event numbers: for
    /// exercising error policies end to end.
    pub fn with_failures(mut self, events: Vec<u64>) -> Self {
        self.fail_on = Arc::from(events);
        self
    }
    /// Varies the time per event: event `i` takes its time multiplied by a
    /// factor in `[1 − fraction, 1 + fraction]` (uniform, from a hash of
    /// `i` and `seed`), so the mean is unchanged. `fraction` is clamped to
    /// `[0, 1]`.
    pub fn with_jitter(mut self, fraction: f64, seed: u64) -> Self {
        let fraction = if fraction.is_finite() {
            fraction.clamp(0.0, 1.0)
        } else {
            0.0
        };
        self.jitter = (fraction > 0.0).then_some((fraction, seed));
        self
    }
    pub fn constant(seconds: f64, work: Work) -> Self {
        Self::new(vec![seconds], 1.0, work)
    }
    pub fn zero() -> Self {
        Self::constant(0.0, Work::Busy)
    }
    /// Seconds this module takes on the event with job index `index`.
    pub fn seconds(&self, index: u64) -> f64 {
        let base = self.times[(index % self.times.len() as u64) as usize] * self.scale;
        match self.jitter {
            None => base,
            Some((fraction, seed)) => {
                let u = (mix(index ^ mix(seed)) >> 11) as f64 / (1u64 << 53) as f64;
                base * (1.0 + fraction * (2.0 * u - 1.0))
            }
        }
    }
    pub fn work(&self) -> Work {
        self.work
    }
    /// The work of one call on `ev`: fails if configured to, else spends the
    /// event's time.
    pub fn run(&self, ev: &Event<'_>) -> ModuleResult {
        configured_failure(&self.fail_on, ev)?;
        self.spend(ev.index());
        Ok(())
    }
    /// Event numbers on which the module fails ([`Timing::with_failures`]).
    pub fn failures(&self) -> &[u64] {
        &self.fail_on
    }
    /// Spends the time of event `index`.
    pub fn spend(&self, index: u64) {
        let seconds = self.seconds(index);
        if seconds <= 0.0 {
            return;
        }
        let ranges = crate::ranges::effective_ranges(seconds, self.ranges);
        let piece = seconds / f64::from(ranges);
        match self.work {
            Work::Busy => crate::ranges::for_each_range(ranges, |_| busy_work(piece)),
            Work::Sleep => crate::ranges::for_each_sleeping_range(ranges, |_| sleep_work(piece)),
        }
    }
    pub(crate) fn cost_model(&self) -> evflow_core::CostModel {
        let timing = self.clone();
        Arc::new(move |index| timing.seconds(index))
    }
}

/// Shortest sleep worth asking the OS for: below it, a sleep costs far more
/// than requested (timer slack and wake-up latency are tens of µs).
const SLEEP_QUANTUM_S: f64 = 100e-6;

thread_local! {
    /// Sleep time owed (positive) or overslept (negative) by this thread.
    static SLEEP_DEBT: std::cell::Cell<f64> = const { std::cell::Cell::new(0.0) };
}

/// Sleeps `seconds` without using the CPU. Requests shorter than the OS
/// can honour are accumulated per thread and slept once they add up, and
/// oversleeping is paid back, so the total time slept by a thread matches the
/// total requested instead of every tiny module costing a whole timer tick.
pub fn sleep_work(seconds: f64) {
    SLEEP_DEBT.with(|debt| {
        let owed = debt.get() + seconds;
        if owed < SLEEP_QUANTUM_S {
            debt.set(owed);
            return;
        }
        let t0 = Instant::now();
        std::thread::sleep(Duration::from_secs_f64(owed));
        debt.set(owed - t0.elapsed().as_secs_f64());
    });
}

/// Iterations of the busy loop per second on this machine, measured once.
pub fn busy_iterations_per_second() -> f64 {
    static RATE: OnceLock<f64> = OnceLock::new();
    *RATE.get_or_init(|| {
        const N: u64 = 1 << 20;
        busy_iterations(N / 8); // warm up
        // The fastest of several runs is the machine's real speed; slower
        // ones were disturbed by other processes.
        let best = (0..15)
            .map(|_| {
                let t0 = Instant::now();
                busy_iterations(N);
                t0.elapsed().as_secs_f64()
            })
            .fold(f64::INFINITY, f64::min);
        N as f64 / best.max(1e-9)
    })
}

/// Spends about `seconds` of CPU time on arithmetic.
pub fn busy_work(seconds: f64) {
    let n = (seconds * busy_iterations_per_second()).round() as u64;
    busy_iterations(n);
}

#[inline(never)]
fn busy_iterations(n: u64) -> u64 {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..n {
        // xorshift: a dependent chain the compiler cannot shorten.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    std::hint::black_box(x)
}

/// The error of a module configured to fail on `ev` (one of `fail_on`):
/// the same message whichever implementation (host, device) runs it.
pub fn configured_failure(fail_on: &[u64], ev: &Event<'_>) -> ModuleResult {
    if fail_on.contains(&ev.id().event) {
        return Err(evflow_core::ModuleError::msg(format!(
            "configured failure on event {}",
            ev.id().event
        )));
    }
    Ok(())
}
