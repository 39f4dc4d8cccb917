//! Synthetic modules for benchmarks and tests: they spend a configured time
//! per event (busy arithmetic or sleep), pass a deterministic fraction of
//! events, and put `u64` products derived from the event id and from every
//! product they consume, so results can be compared between runs.
//!
//! *Busy* work is a fixed amount of arithmetic, calibrated once per process
//! to the requested seconds. It never looks at a clock while working, so an
//! oversubscribed machine makes it slower, as real work would be.

use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::{
    Analyzer, Event, Filter, ModuleDesc, ModuleResult, Output, Producer, Transitions,
    TriggerResults,
};

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
        }
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
        if self.fail_on.contains(&ev.id().event) {
            return Err(crate::ModuleError::msg(format!(
                "configured failure on event {}",
                ev.id().event
            )));
        }
        self.spend(ev.index());
        Ok(())
    }
    /// Spends the time of event `index`.
    pub fn spend(&self, index: u64) {
        let seconds = self.seconds(index);
        if seconds <= 0.0 {
            return;
        }
        match self.work {
            Work::Busy => busy_work(seconds),
            Work::Sleep => sleep_work(seconds),
        }
    }
    fn cost_model(&self) -> crate::CostModel {
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

/// A well-mixed 64-bit hash (splitmix64 finaliser).
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn hash_str(s: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

fn event_key(ev: &Event<'_>) -> u64 {
    id_key(ev.id())
}

fn id_key(id: crate::EventId) -> u64 {
    mix(mix(u64::from(id.run) << 32 | u64::from(id.lumi)) ^ id.event)
}

/// Combines every consumed `u64` product (products of other types count
/// by position only).
fn consumed_digest(ev: &Event<'_>) -> ModuleResult<u64> {
    let mut acc = 0u64;
    for i in 0..ev.consumes_len() {
        let v = ev.try_get_nth::<u64>(i)?.copied().unwrap_or(i as u64);
        acc = acc.wrapping_add(mix(v ^ i as u64));
    }
    Ok(acc)
}

/// Whether an event passes a filter of pass fraction `fraction` and `seed`:
/// a deterministic function of the event id.
pub fn passes(ev: &Event<'_>, fraction: f64, seed: u64) -> bool {
    passes_id(ev.id(), fraction, seed)
}

/// [`passes`] from the event id alone.
pub fn passes_id(id: crate::EventId, fraction: f64, seed: u64) -> bool {
    let u = (mix(id_key(id) ^ mix(seed)) >> 11) as f64 / (1u64 << 53) as f64;
    u < fraction
}

struct SyntheticProducer {
    timing: Timing,
    key: u64,
    instances: Vec<(String, u64)>,
}

impl Transitions for SyntheticProducer {}
impl Producer for SyntheticProducer {
    fn produce(&self, ev: &Event<'_>) -> ModuleResult {
        let inputs = consumed_digest(ev)?;
        self.timing.run(ev)?;
        let value = mix(event_key(ev) ^ self.key).wrapping_add(inputs);
        for (instance, salt) in &self.instances {
            ev.put(instance, value ^ salt)?;
        }
        Ok(())
    }
}

fn instances(produces: &[&str]) -> Vec<(String, u64)> {
    produces
        .iter()
        .map(|s| (s.to_string(), if s.is_empty() { 0 } else { hash_str(s) }))
        .collect()
}

/// A producer that reads `consumes`, spends its time and puts one `u64` per
/// instance name in `produces`.
pub fn producer(label: &str, timing: Timing, consumes: &[&str], produces: &[&str]) -> ModuleDesc {
    let cost = timing.cost_model();
    let module = SyntheticProducer {
        timing,
        key: hash_str(label),
        instances: instances(produces),
    };
    ModuleDesc::producer(label, module)
        .consumes(consumes.iter().copied())
        .produces(produces.iter().copied())
        .cost_model(cost)
}

/// A producer whose instances are built per clone (`cloned(n)`).
pub fn cloned_producer(
    label: &str,
    n: u32,
    timing: Timing,
    consumes: &[&str],
    produces: &[&str],
) -> ModuleDesc {
    let cost = timing.cost_model();
    let key = hash_str(label);
    let inst = instances(produces);
    ModuleDesc::cloned(label, n, || {
        crate::ModuleImpl::Producer(Box::new(SyntheticProducer {
            timing: timing.clone(),
            key,
            instances: inst.clone(),
        }))
    })
    .consumes(consumes.iter().copied())
    .produces(produces.iter().copied())
    .cost_model(cost)
}

struct SyntheticFilter {
    timing: Timing,
    fraction: f64,
    seed: u64,
}

impl Transitions for SyntheticFilter {}
impl Filter for SyntheticFilter {
    fn filter(&self, ev: &Event<'_>) -> ModuleResult<bool> {
        consumed_digest(ev)?;
        self.timing.run(ev)?;
        Ok(passes(ev, self.fraction, self.seed))
    }
}

/// A filter that passes a fraction `pass_fraction` of events, chosen by a
/// hash of the event id and `seed`.
pub fn filter(
    label: &str,
    timing: Timing,
    consumes: &[&str],
    pass_fraction: f64,
    seed: u64,
) -> ModuleDesc {
    let cost = timing.cost_model();
    ModuleDesc::filter(
        label,
        SyntheticFilter {
            timing,
            fraction: pass_fraction,
            seed,
        },
    )
    .consumes(consumes.iter().copied())
    .cost_model(cost)
    .decision_model(Arc::new(move |id| passes_id(id, pass_fraction, seed)))
}

/// Accumulates an order-independent digest of everything it reads.
struct Accumulator {
    timing: Timing,
    digest: Arc<AtomicU64>,
    events: Arc<AtomicU64>,
}

impl Accumulator {
    fn add(&self, ev: &Event<'_>, extra: u64) -> ModuleResult {
        let d = consumed_digest(ev)?;
        self.timing.run(ev)?;
        self.digest
            .fetch_add(mix(event_key(ev) ^ d ^ extra), Ordering::Relaxed);
        self.events.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

impl Transitions for Accumulator {}
impl Analyzer for Accumulator {
    fn analyze(&self, ev: &Event<'_>) -> ModuleResult {
        self.add(ev, 0)
    }
}
impl Output for Accumulator {
    fn write(&self, ev: &Event<'_>, results: &TriggerResults) -> ModuleResult {
        let bits = results
            .iter()
            .enumerate()
            .fold(0u64, |acc, (i, (_, a))| acc | (u64::from(a) << (i % 64)));
        self.add(ev, mix(bits))
    }
}

/// Results a synthetic analyzer or output accumulated: the number of events
/// it saw and an order-independent digest of their products.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    pub digest: Arc<AtomicU64>,
    pub events: Arc<AtomicU64>,
}

impl Tally {
    pub fn digest(&self) -> u64 {
        self.digest.load(Ordering::Relaxed)
    }
    pub fn events(&self) -> u64 {
        self.events.load(Ordering::Relaxed)
    }
}

/// An analyzer that reads `consumes` and spends its time.
pub fn analyzer(label: &str, timing: Timing, consumes: &[&str]) -> ModuleDesc {
    analyzer_with_tally(label, timing, consumes).0
}

/// Like [`analyzer`], also returning what it accumulates.
pub fn analyzer_with_tally(label: &str, timing: Timing, consumes: &[&str]) -> (ModuleDesc, Tally) {
    accumulating(timing, consumes, |module| {
        ModuleDesc::analyzer(label, module)
    })
}

/// An output module that reads `consumes`, spends its time and tallies the
/// events it receives (with their trigger results).
pub fn output_with_tally(label: &str, timing: Timing, consumes: &[&str]) -> (ModuleDesc, Tally) {
    accumulating(timing, consumes, |module| ModuleDesc::output(label, module))
}

fn accumulating(
    timing: Timing,
    consumes: &[&str],
    describe: impl FnOnce(Accumulator) -> ModuleDesc,
) -> (ModuleDesc, Tally) {
    let tally = Tally::default();
    let cost = timing.cost_model();
    let module = Accumulator {
        timing,
        digest: tally.digest.clone(),
        events: tally.events.clone(),
    };
    let desc = describe(module)
        .consumes(consumes.iter().copied())
        .cost_model(cost);
    (desc, tally)
}

/// The decision of a hash filter ([`filter`]) as a model: passes a fraction
/// `pass_fraction` of the events, chosen by a hash of the event id and `seed`.
pub fn fraction_decision(pass_fraction: f64, seed: u64) -> crate::DecisionModel {
    Arc::new(move |id| passes_id(id, pass_fraction, seed))
}

/// A decision correlated with another: passes whenever `base` passes,
/// otherwise with probability `otherwise` (by a hash of the event id and
/// `seed`). Its pass fraction is `P(base) + (1 − P(base)) · otherwise`;
/// applied after `base` it passes every event: it removes nothing more,
/// a correlation that an order chosen from marginal pass rates misses.
pub fn correlated_decision(
    base: crate::DecisionModel,
    otherwise: f64,
    seed: u64,
) -> crate::DecisionModel {
    Arc::new(move |id| base(id) || passes_id(id, otherwise, seed))
}

/// A decision that changes during the job: `before` for events numbered
/// below `from_event`, `after` from it on (pass rates that drift).
pub fn drifting_decision(
    before: crate::DecisionModel,
    after: crate::DecisionModel,
    from_event: u64,
) -> crate::DecisionModel {
    Arc::new(move |id| {
        if id.event < from_event {
            before(id)
        } else {
            after(id)
        }
    })
}

struct DecidingFilter {
    timing: Timing,
    decision: crate::DecisionModel,
}

impl Transitions for DecidingFilter {}
impl Filter for DecidingFilter {
    fn filter(&self, ev: &Event<'_>) -> ModuleResult<bool> {
        consumed_digest(ev)?;
        self.timing.run(ev)?;
        Ok((self.decision)(ev.id()))
    }
}

/// A filter that spends its time and decides by `decision`, a
/// deterministic function of the event id (for example
/// [`correlated_decision`], [`drifting_decision`], or a cut on a column of
/// an event table). The decision is also its decision model, so the
/// simulator predicts it exactly.
pub fn filter_with_decision(
    label: &str,
    timing: Timing,
    consumes: &[&str],
    decision: crate::DecisionModel,
) -> ModuleDesc {
    let cost = timing.cost_model();
    ModuleDesc::filter(
        label,
        DecidingFilter {
            timing,
            decision: decision.clone(),
        },
    )
    .consumes(consumes.iter().copied())
    .cost_model(cost)
    .decision_model(decision)
}
