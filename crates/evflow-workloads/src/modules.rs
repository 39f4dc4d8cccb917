//! The synthetic modules: producers, filters, analyzers and outputs that
//! spend a [`Timing`], pass a deterministic fraction of events (or decide
//! by a [`DecisionModel`]), and put `u64` products derived from the event id
//! and from every product they consume, so results can be compared between
//! runs.

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use evflow_core::hash::mix;
use evflow_core::{
    Analyzer, DecisionModel, Event, EventId, Filter, ModuleDesc, ModuleImpl, ModuleResult, Output,
    Producer, Transitions, TriggerResults,
};

use crate::timing::Timing;

fn hash_str(s: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

/// A well-mixed 64-bit key of an event's id (run, lumi and event number).
pub fn event_key(ev: &Event<'_>) -> u64 {
    id_key(ev.id())
}

fn id_key(id: EventId) -> u64 {
    mix(mix(u64::from(id.run) << 32 | u64::from(id.lumi)) ^ id.event)
}

/// Combines every consumed `u64` product (products of other types count
/// by position only).
pub fn consumed_digest(ev: &Event<'_>) -> ModuleResult<u64> {
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
pub fn passes_id(id: EventId, fraction: f64, seed: u64) -> bool {
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
    let ranges = timing.ranges();
    let module = SyntheticProducer {
        timing,
        key: hash_str(label),
        instances: instances(produces),
    };
    ModuleDesc::producer(label, module)
        .consumes(consumes.iter().copied())
        .produces(produces.iter().copied())
        .cost_model(cost)
        .parallel_ranges(ranges)
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
    let ranges = timing.ranges();
    let key = hash_str(label);
    let inst = instances(produces);
    ModuleDesc::cloned(label, n, || {
        ModuleImpl::Producer(Box::new(SyntheticProducer {
            timing: timing.clone(),
            key,
            instances: inst.clone(),
        }))
    })
    .consumes(consumes.iter().copied())
    .produces(produces.iter().copied())
    .cost_model(cost)
    .parallel_ranges(ranges)
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
    let ranges = timing.ranges();
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
    .parallel_ranges(ranges)
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
    let ranges = timing.ranges();
    let module = Accumulator {
        timing,
        digest: tally.digest.clone(),
        events: tally.events.clone(),
    };
    let desc = describe(module)
        .consumes(consumes.iter().copied())
        .cost_model(cost)
        .parallel_ranges(ranges);
    (desc, tally)
}

/// The decision of a hash filter ([`filter`]) as a model: passes a fraction
/// `pass_fraction` of the events, chosen by a hash of the event id and `seed`.
pub fn fraction_decision(pass_fraction: f64, seed: u64) -> DecisionModel {
    Arc::new(move |id| passes_id(id, pass_fraction, seed))
}

/// A decision correlated with another: passes whenever `base` passes,
/// otherwise with probability `otherwise` (by a hash of the event id and
/// `seed`). Its pass fraction is `P(base) + (1 − P(base)) · otherwise`;
/// applied after `base` it passes every event: it removes nothing more,
/// a correlation that an order chosen from marginal pass rates misses.
pub fn correlated_decision(base: DecisionModel, otherwise: f64, seed: u64) -> DecisionModel {
    Arc::new(move |id| base(id) || passes_id(id, otherwise, seed))
}

/// A decision that changes during the job: `before` for events numbered
/// below `from_event`, `after` from it on (pass rates that drift).
pub fn drifting_decision(
    before: DecisionModel,
    after: DecisionModel,
    from_event: u64,
) -> DecisionModel {
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
    decision: DecisionModel,
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
    decision: DecisionModel,
) -> ModuleDesc {
    let cost = timing.cost_model();
    let ranges = timing.ranges();
    ModuleDesc::filter(
        label,
        DecidingFilter {
            timing,
            decision: decision.clone(),
        },
    )
    .consumes(consumes.iter().copied())
    .cost_model(cost)
    .parallel_ranges(ranges)
    .decision_model(decision)
}
