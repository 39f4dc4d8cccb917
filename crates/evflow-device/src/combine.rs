//! Combining: invocations of one device module for different events in
//! flight are gathered into one launch. Pure decision logic (no threads, no
//! clocks: the caller passes the time), shared by the threaded and
//! sequential executors and by the simulator.

use serde::Serialize;

use crate::launch_costs::LaunchCosts;

/// When a batch is launched.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CombinePolicy {
    /// Launch as soon as this many invocations wait.
    pub max_events: usize,
    /// Launch when the oldest waiting invocation has waited this long, in
    /// seconds, however few invocations wait: no event is held hostage.
    pub timeout_s: f64,
    /// ... unless this many launches of the module are still on the device
    /// (0: no limit). Then the invocations go on gathering until one of
    /// them lands: they would only queue behind it, and launching them in
    /// a small batch would pay a launch's fixed costs for few events — a
    /// busy device fed small launches stays busy and its backlog grows.
    pub max_in_flight: usize,
    /// Without such a limit (`max_in_flight` 0), hold a timed-out batch
    /// while the device runs as many of the module's launches as it runs
    /// at once, when the module's launches measured so far say that one of
    /// this batch's size would be mostly fixed cost (at least half): the
    /// batch grows until its launch is worth its fixed cost. Launches whose
    /// time grows with their bytes are never held (holding only lengthens
    /// their events' round trips).
    ///
    /// Such a batch also waits while the module's launches on the device
    /// carry the events that would fill it, and then one time-out from
    /// their landing for those events to come back (re-alignment): once a
    /// time-out has cut a launch short under timing jitter, the events of
    /// each launch come back together, and without it every later launch
    /// gathers only them — launches stay staggered for the rest of the job.
    /// And its time-out follows the time the module's full batches took to
    /// fill lately (up to [`Combiner::max_wait`]), so that jitter in their
    /// arrival does not cut them short in the first place. After
    /// [`PROBE_AFTER`] launches cut short in a row, one batch probes for a
    /// full launch, which tells the fit and the time-out what launches all
    /// cut short cannot.
    pub hold_small_launches: bool,
}

impl Default for CombinePolicy {
    /// 64 invocations or 200 µs, from `bench/device.py` benchmark 2: at 64
    /// invocations per launch the framework cost per invocation is well
    /// below 5 µs, and 200 µs is a few kernel launches of latency. No fixed
    /// limit of launches in flight: holding batches back makes them larger
    /// but each event's round trip longer, which costs event slots where
    /// the device's time grows with the batch (`--device-max-in-flight`);
    /// small launches that are mostly fixed cost are held (measured).
    fn default() -> Self {
        Self {
            max_events: 64,
            timeout_s: 200e-6,
            max_in_flight: 0,
            hold_small_launches: true,
        }
    }
}

impl CombinePolicy {
    /// The policy for a job with `events_in_flight` events at once: a batch
    /// can never hold more invocations than there are events, so the count
    /// is capped there (otherwise every launch would wait for the time-out).
    pub fn for_events_in_flight(self, events_in_flight: usize) -> Self {
        Self {
            max_events: self.max_events.clamp(1, events_in_flight.max(1)),
            ..self
        }
    }

    /// ... and by the module's concurrency: the engine keeps a serial,
    /// exclusive or cloned instance during its external work, so at most
    /// `events_at_once` of its invocations (`None`: no limit) can wait, and
    /// a batch that cannot grow is launched at once instead of waiting for
    /// the time-out.
    pub fn for_events_at_once(self, events_at_once: Option<usize>) -> Self {
        match events_at_once {
            Some(n) => Self {
                max_events: self.max_events.clamp(1, n.max(1)),
                ..self
            },
            None => self,
        }
    }
}

/// Invocations waiting for a launch.
///
/// ```
/// use evflow_device::{CombinePolicy, Combiner};
///
/// let policy = CombinePolicy {
///     max_events: 3,
///     timeout_s: 0.001,
///     max_in_flight: 2,
///     ..CombinePolicy::default()
/// };
/// let mut c = Combiner::new(policy);
/// assert!(c.push(0.0, 'a').is_none());
/// assert_eq!(c.deadline(), Some(0.001));
/// assert!(c.push(0.0002, 'b').is_none());
/// assert_eq!(c.push(0.0003, 'c'), Some(vec!['a', 'b', 'c'])); // count reached
/// assert!(c.push(0.0010, 'd').is_none());
/// assert!(c.poll(0.0015).is_none());
/// assert_eq!(c.poll(0.0020), Some(vec!['d'])); // time-out
/// // Two launches on the device: a timed-out batch waits for one to land.
/// assert!(c.push(0.0030, 'e').is_none());
/// assert!(c.poll(0.0045).is_none());
/// assert_eq!(c.landed(0.0050, 3), Some(vec!['e']));
/// // Nothing else can run and nothing is on the device: no use waiting.
/// assert!(c.push(0.0060, 'f').is_none());
/// assert_eq!(c.idle(), None); // launches on the device may bring more
/// assert!(c.landed(0.0061, 1).is_none());
/// assert!(c.landed(0.0062, 1).is_none());
/// assert_eq!(c.idle(), Some(vec!['f']));
/// ```
#[derive(Debug)]
pub struct Combiner<T> {
    policy: CombinePolicy,
    waiting: Vec<T>,
    oldest: Option<f64>,
    /// Launches handed out and not yet landed.
    in_flight: usize,
    /// Their invocations.
    on_device: usize,
    /// The last landing whose events the waiting batch was waiting for:
    /// they get a time-out from then to come back and join it.
    realigned_at: Option<f64>,
    /// The longest time a full batch took to fill lately (0: none yet).
    fill_s: f64,
    /// Launches the device runs at once (its streams or engines).
    parallel: usize,
    /// The module's launches: time against size.
    costs: LaunchCosts,
    landings: u64,
    /// Launches in a row that their time-out cut short, and the size of
    /// the last.
    short_streak: u32,
    last_short: usize,
    /// The waiting batch is a probe: it waits for more events (see
    /// [`PROBE_AFTER`]).
    probing: bool,
}

/// The first launches of a module pay its set-up (buffers, the kernel's
/// loading), no cost of their size: left out of the fit.
const WARM_LAUNCHES: u64 = 4;

/// A launch at least this much fixed cost is held back (see
/// [`CombinePolicy::hold_small_launches`]).
const HOLD_FIXED_SHARE: f64 = 0.5;

/// A batch of mostly fixed cost waits this many times the longest recent
/// fill of a full batch (jitter beyond it is rare) ...
const FILL_MARGIN: f64 = 1.5;
/// ... up to this many time-outs.
pub const FILL_TIMEOUTS: f64 = 5.0;
/// Weight of the longest fill after each newer launch: a stall's fill, or
/// one of a share that no longer fills batches, fades within a few dozen.
const FILL_FADE: f64 = 0.95;

/// After this many launches in a row cut short by their time-out, of a
/// module whose launches are mostly fixed cost or cannot tell (all of one
/// size), the next batch is a probe: it waits like a batch of mostly fixed
/// cost, as long as [`Combiner::max_wait`], for more events. A full
/// launch then tells the fit its fixed cost and the time-out its fill,
/// which no launch cut short can: without it, launches all of one size, or
/// batches that never fill within the time-out, stay short for the whole
/// job. Only batches whose events came fast enough to fill them within
/// that wait count (probing a module that gets an event now and then only
/// lengthens its events' round trips). At most one batch in
/// `PROBE_AFTER + 1` waits longer than the rules allow.
pub const PROBE_AFTER: u32 = 8;

impl<T> Combiner<T> {
    pub fn new(policy: CombinePolicy) -> Self {
        Self {
            policy: CombinePolicy {
                max_events: policy.max_events.max(1),
                ..policy
            },
            waiting: Vec::new(),
            oldest: None,
            in_flight: 0,
            on_device: 0,
            realigned_at: None,
            fill_s: 0.0,
            parallel: 2,
            costs: LaunchCosts::default(),
            landings: 0,
            short_streak: 0,
            last_short: 0,
            probing: false,
        }
    }

    /// How many launches the device runs at once (its streams, or its
    /// engines with overlap; 2 unless told): fewer in flight never hold a
    /// batch back by their fixed cost.
    pub fn with_parallel_launches(mut self, launches: usize) -> Self {
        self.parallel = launches.max(1);
        self
    }

    /// A launch of `events` invocations kept the device's limiting stage
    /// busy `bottleneck_s` seconds (call it before [`Combiner::landed`]).
    pub fn record_launch(&mut self, events: usize, bottleneck_s: f64) {
        self.landings += 1;
        if self.landings > WARM_LAUNCHES && bottleneck_s.is_finite() {
            self.costs.add(events, bottleneck_s);
        }
    }

    pub fn policy(&self) -> CombinePolicy {
        self.policy
    }

    /// Adds an invocation at time `now`; returns the batch to launch when
    /// the count is reached.
    pub fn push(&mut self, now: f64, item: T) -> Option<Vec<T>> {
        if self.waiting.is_empty() {
            self.oldest = Some(now);
            self.probing = self.short_streak >= PROBE_AFTER && self.may_probe();
            if self.probing {
                self.short_streak = 0;
            }
        }
        self.waiting.push(item);
        if self.waiting.len() >= self.policy.max_events {
            let fill = self.gathering_since().map_or(0.0, |from| now - from);
            self.short_streak = 0;
            let batch = self.flush();
            if self.landings > WARM_LAUNCHES {
                self.fill_s = self.fill_s.max(fill);
            }
            return batch;
        }
        None
    }

    /// Since when the waiting batch gathers: its oldest invocation's
    /// arrival, or the landing whose events it waited for.
    fn gathering_since(&self) -> Option<f64> {
        Some(self.oldest?.max(self.realigned_at.unwrap_or(f64::MIN)))
    }

    /// How long the waiting batch gathers before it is launched: the
    /// policy's time-out, or for a batch of mostly fixed cost the time full
    /// batches took to fill lately, with a margin.
    pub fn timeout(&self) -> f64 {
        let timeout = self.policy.timeout_s;
        if self.probing && self.mostly_fixed_cost() {
            self.max_wait()
        } else if self.fill_s > 0.0 && self.mostly_fixed_cost() {
            (FILL_MARGIN * self.fill_s).clamp(timeout, self.max_wait())
        } else {
            timeout
        }
    }

    /// The longest a batch of mostly fixed cost gathers: [`FILL_TIMEOUTS`]
    /// time-outs, or a launch's fixed cost when that is longer — a wait
    /// that fills the launch saves the device the fixed cost of another
    /// for the events that would have missed it, and costs the events
    /// waiting no more than that.
    pub fn max_wait(&self) -> f64 {
        let fixed = self.costs.last_fixed_s().unwrap_or(0.0);
        (FILL_TIMEOUTS * self.policy.timeout_s).max(fixed)
    }

    /// Whether a batch may probe for a fuller launch: holding is allowed,
    /// the set-up launches are over, and the launches cut short lately
    /// were mostly fixed cost by the fit, or cannot tell (all one size).
    fn may_probe(&self) -> bool {
        self.policy.hold_small_launches
            && self.policy.max_in_flight == 0
            && self.landings > WARM_LAUNCHES
            && self.policy.max_events > 1
            && self
                .costs
                .last_fixed_share(self.last_short as f64)
                .is_none_or(|share| share >= HOLD_FIXED_SHARE)
    }

    /// When the waiting invocations must be launched at the latest (unless
    /// held): a time-out after the oldest arrived, or after the landing
    /// that brings back the events they wait for.
    pub fn deadline(&self) -> Option<f64> {
        Some(self.gathering_since()? + self.timeout())
    }

    /// Returns the batch when its deadline has passed at `now`, unless the
    /// module's launches in flight hold it back.
    pub fn poll(&mut self, now: f64) -> Option<Vec<T>> {
        match self.deadline() {
            Some(d) if now >= d && !self.held() => {
                // Cut short (a full batch leaves from `push`): a probe
                // may follow when the batch's events came fast enough to
                // fill it within the longest wait.
                let n = self.waiting.len();
                let gathered = now - self.gathering_since().unwrap_or(now);
                let fill = gathered * (self.policy.max_events - n) as f64 / n as f64;
                if fill <= self.max_wait() {
                    self.short_streak += 1;
                } else {
                    self.short_streak = 0;
                }
                self.last_short = n;
                self.flush()
            }
            _ => None,
        }
    }

    /// Whether a timed-out batch now waits for a launch to land.
    pub fn held(&self) -> bool {
        if self.policy.max_in_flight > 0 {
            return self.in_flight >= self.policy.max_in_flight;
        }
        self.mostly_fixed_cost()
            && (self.in_flight >= self.parallel || self.awaits_launched_events())
    }

    /// The waiting batch is not full, its launch would be at least half
    /// fixed cost, and holding small launches is allowed (a fixed limit of
    /// launches in flight replaces it).
    fn mostly_fixed_cost(&self) -> bool {
        self.policy.hold_small_launches
            && self.policy.max_in_flight == 0
            && !self.waiting.is_empty()
            && self.waiting.len() < self.policy.max_events
            && (self.probing
                || self
                    .costs
                    .last_fixed_share(self.waiting.len() as f64)
                    .is_some_and(|share| share >= HOLD_FIXED_SHARE))
    }

    /// The module's launches on the device carry enough invocations to fill
    /// the waiting batch once their events come back: launching it now
    /// would keep the launches staggered (re-alignment).
    fn awaits_launched_events(&self) -> bool {
        self.waiting.len() + self.on_device >= self.policy.max_events
    }

    /// One of the batches handed out, of `events` invocations, landed (or
    /// failed) at `now`; returns the waiting batch when its deadline has
    /// passed meanwhile. A batch that waited for this launch's events gets
    /// a time-out from now for them to come back.
    pub fn landed(&mut self, now: f64, events: usize) -> Option<Vec<T>> {
        if self.mostly_fixed_cost() && self.awaits_launched_events() {
            self.realigned_at = Some(now);
        }
        self.in_flight = self.in_flight.saturating_sub(1);
        self.on_device = self.on_device.saturating_sub(events);
        self.poll(now)
    }

    /// The engine has nothing else to run: every event in flight waits for
    /// external work (or none is left to read). Returns what waits unless a
    /// launch of the module is still on the device, whose landing can bring
    /// more invocations; otherwise none can come before the time-out, and
    /// waiting for it would leave the device and the threads idle (at the
    /// end of the input, or when a luminosity block or run holds the next
    /// events back).
    pub fn idle(&mut self) -> Option<Vec<T>> {
        if self.in_flight > 0 {
            return None;
        }
        self.flush()
    }

    /// Launches handed out and not yet landed.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Takes whatever waits (end of job, or a caller that knows nothing
    /// else can arrive); counted as a launch in flight.
    pub fn flush(&mut self) -> Option<Vec<T>> {
        self.oldest = None;
        self.realigned_at = None;
        self.probing = false;
        if self.waiting.is_empty() {
            None
        } else {
            self.fill_s *= FILL_FADE;
            self.in_flight += 1;
            self.on_device += self.waiting.len();
            Some(std::mem::take(&mut self.waiting))
        }
    }

    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_is_capped_by_events_in_flight() {
        let p = CombinePolicy {
            max_events: 64,
            timeout_s: 1.0,
            max_in_flight: 0,
            hold_small_launches: false,
        }
        .for_events_in_flight(4);
        let mut c = Combiner::new(p);
        for i in 0..3 {
            assert!(c.push(0.0, i).is_none());
        }
        assert_eq!(c.push(0.0, 3), Some(vec![0, 1, 2, 3]));
        assert!(c.deadline().is_none());
    }

    #[test]
    fn count_is_capped_by_events_at_once() {
        let p = CombinePolicy {
            max_events: 64,
            timeout_s: 1.0,
            max_in_flight: 0,
            hold_small_launches: false,
        }
        .for_events_in_flight(16);
        assert_eq!(p.for_events_at_once(None).max_events, 16);
        assert_eq!(p.for_events_at_once(Some(3)).max_events, 3);
        // A serial instance: its one invocation leaves at once.
        let mut c = Combiner::new(p.for_events_at_once(Some(1)));
        assert_eq!(c.push(0.0, 'a'), Some(vec!['a']));
        assert!(c.deadline().is_none());
    }

    #[test]
    fn an_idle_engine_launches_what_waits_when_nothing_is_on_the_device() {
        let mut c = Combiner::new(CombinePolicy {
            max_events: 10,
            timeout_s: 1.0,
            max_in_flight: 0,
            hold_small_launches: false,
        });
        assert!(c.idle().is_none());
        c.push(0.0, 1);
        c.push(0.1, 2);
        assert_eq!(c.idle(), Some(vec![1, 2]));
        assert!(c.deadline().is_none());
        // One launch on the device: its landing may bring more.
        c.push(0.2, 3);
        assert!(c.idle().is_none());
        assert_eq!(c.deadline(), Some(1.2));
        assert!(c.landed(0.3, 2).is_none());
        assert_eq!(c.idle(), Some(vec![3]));
        assert_eq!(c.in_flight(), 1);
    }

    #[test]
    fn deadline_follows_the_oldest_waiting_invocation() {
        let mut c = Combiner::new(CombinePolicy {
            max_events: 10,
            timeout_s: 1.0,
            max_in_flight: 0,
            hold_small_launches: false,
        });
        c.push(5.0, 1);
        c.push(5.9, 2);
        assert_eq!(c.deadline(), Some(6.0));
        assert!(c.poll(5.99).is_none());
        assert_eq!(c.poll(6.0), Some(vec![1, 2]));
        assert!(c.poll(100.0).is_none());
        c.push(7.0, 3);
        assert_eq!(c.deadline(), Some(8.0));
    }

    #[test]
    fn every_item_leaves_exactly_once() {
        // Seeded random pushes and polls: nothing lost, nothing doubled,
        // order kept, no batch above the count, nothing left waiting past
        // its deadline after a poll.
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        let policy = CombinePolicy {
            max_events: 7,
            timeout_s: 0.5,
            max_in_flight: 0,
            hold_small_launches: false,
        };
        let mut c = Combiner::new(policy);
        let mut out = Vec::new();
        let mut now = 0.0;
        let mut pushed_at = std::collections::HashMap::new();
        for i in 0..5000u32 {
            now += rng.gen_range(0.0..0.2);
            if rng.gen_bool(0.3) {
                if let Some(b) = c.poll(now) {
                    // The oldest had waited its time-out; the others go along.
                    assert!(now >= pushed_at[&b[0]] + policy.timeout_s - 1e-12);
                    out.extend(b);
                }
                // Nothing left waiting past its deadline.
                assert!(c.deadline().is_none_or(|d| d > now));
            }
            pushed_at.insert(i, now);
            if let Some(b) = c.push(now, i) {
                assert!(b.len() <= policy.max_events);
                out.extend(b);
            }
        }
        out.extend(c.flush().unwrap_or_default());
        assert_eq!(out, (0..5000).collect::<Vec<_>>());
    }

    #[test]
    fn launches_in_flight_hold_back_timed_out_batches() {
        // Seeded random pushes, polls and landings with at most 2 launches
        // in flight: nothing lost or doubled, never more than 2 launches
        // out, and a batch past its deadline leaves as soon as one lands.
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let policy = CombinePolicy {
            max_events: 5,
            timeout_s: 0.3,
            max_in_flight: 2,
            hold_small_launches: false,
        };
        let mut c = Combiner::new(policy);
        let mut out = Vec::new();
        let mut sizes = std::collections::VecDeque::new();
        let mut now = 0.0;
        let (mut timed_out, mut held) = (0, 0);
        for i in 0..5000u32 {
            now += rng.gen_range(0.0..0.2);
            let r: f64 = rng.gen_range(0.0..1.0);
            if r < 0.4 && c.in_flight() > 0 {
                if let Some(b) = c.landed(now, sizes.pop_front().unwrap_or(0)) {
                    timed_out += 1;
                    sizes.push_back(b.len());
                    out.extend(b);
                }
                // A landing leaves nothing overdue behind, unless full
                // batches still fill the device.
                assert!(c.held() || c.deadline().is_none_or(|d| d > now));
            } else if r < 0.7
                && let Some(b) = c.poll(now)
            {
                timed_out += 1;
                sizes.push_back(b.len());
                out.extend(b);
            }
            if let Some(b) = c.push(now, i) {
                sizes.push_back(b.len());
                out.extend(b);
            }
            // Count-triggered batches still go (they are full), so only a
            // time-out respects the limit.
            if c.held() {
                assert!(c.poll(now + 10.0).is_none());
                held += c.deadline().is_some_and(|d| d <= now) as u32;
            }
        }
        assert!(timed_out > 100 && held > 20, "{timed_out} {held}");
        out.extend(c.flush().unwrap_or_default());
        assert_eq!(out, (0..5000).collect::<Vec<_>>());
    }

    /// Launches of `fixed + per_event × n` seconds: the first
    /// `WARM_LAUNCHES + 12` of varied sizes, recorded and landed.
    fn fitted(fixed: f64, per_event: f64) -> Combiner<u32> {
        let mut c = Combiner::new(CombinePolicy {
            max_events: 64,
            timeout_s: 0.001,
            ..CombinePolicy::default()
        })
        .with_parallel_launches(2);
        for k in 0..WARM_LAUNCHES + 12 {
            let n = 1 + (k % 4) as usize;
            for i in 0..n {
                c.push(0.0, i as u32);
            }
            assert!(c.flush().is_some());
            c.record_launch(n, fixed + per_event * n as f64);
            c.landed(0.0, n);
        }
        c
    }

    #[test]
    fn a_small_batch_of_mostly_fixed_cost_waits_while_the_device_is_busy() {
        // 1 ms per launch, 50 µs per event: a launch of 2 is 91 % fixed,
        // one of 30 is 40 %.
        let mut c = fitted(1e-3, 5e-5);
        c.push(10.0, 1);
        assert_eq!(
            c.poll(10.002),
            Some(vec![1]),
            "one launch in flight: not held"
        );
        c.push(10.003, 2);
        assert_eq!(c.poll(10.005), Some(vec![2]));
        // Two on the device (as many as it runs at once): the next waits, grows.
        c.push(10.006, 3);
        c.push(10.0065, 4);
        assert!(c.held());
        assert!(c.poll(10.1).is_none());
        c.record_launch(1, 1.01e-3);
        assert_eq!(
            c.landed(10.101, 1),
            Some(vec![3, 4]),
            "a landing lets it go"
        );
        // A batch large enough to be worth its fixed cost is not held.
        for i in 0..30 {
            assert!(c.push(10.2, i).is_none());
        }
        assert!(c.in_flight() >= 2);
        assert!(!c.held());
        // Nothing on the device and nothing else to run: it goes.
        let mut idle = fitted(1e-3, 5e-5);
        idle.push(0.0, 7);
        assert_eq!(idle.idle(), Some(vec![7]));
    }

    #[test]
    fn launches_whose_time_grows_with_their_size_are_not_held() {
        // 10 µs fixed, 1 ms per event (transfer-bound): never mostly fixed.
        let mut c = fitted(1e-5, 1e-3);
        for t in 0..3 {
            c.push(t as f64, t);
            assert_eq!(c.poll(t as f64 + 0.002), Some(vec![t]));
        }
        assert_eq!(c.in_flight(), 3);
        assert!(!c.held());
        // Nor when told not to hold, however fixed the cost.
        let mut never = fitted(1e-3, 1e-6);
        never.policy.hold_small_launches = false;
        for t in 0..3 {
            never.push(t as f64, t);
            assert_eq!(never.poll(t as f64 + 0.002), Some(vec![t]));
        }
    }

    #[test]
    fn only_batches_that_could_fill_probe() {
        // One invocation every 300 µs, a 200 µs time-out, launches of one
        // event that land at once (all of one size: the fit cannot tell).
        let sizes = |max_events: usize| {
            let mut c = Combiner::new(CombinePolicy {
                max_events,
                timeout_s: 200e-6,
                ..CombinePolicy::default()
            });
            let mut sizes = Vec::new();
            for i in 0..100u32 {
                let t = i as f64 * 300e-6;
                let mut out: Vec<Vec<u32>> = c.poll(t).into_iter().collect();
                out.extend(c.push(t, i));
                out.extend(c.poll(t + 200e-6));
                for b in out {
                    c.record_launch(b.len(), 3e-3);
                    c.landed(t + 200e-6, b.len());
                    sizes.push(b.len());
                }
            }
            sizes
        };
        // A count of 64 would take 19 ms to fill at that rate, beyond any
        // wait: no batch waits past its time-out.
        assert!(sizes(64).iter().all(|&n| n == 1));
        // A count of 2 fills in 300 µs: after `PROBE_AFTER` short launches
        // one waits for its second event, and the fit can tell.
        let two = sizes(2);
        let first = two.iter().position(|&n| n == 2).unwrap();
        assert!(
            first <= WARM_LAUNCHES as usize + PROBE_AFTER as usize + 1,
            "{two:?}"
        );
    }

    #[test]
    fn held_small_launches_lose_and_double_nothing() {
        // Seeded pushes, polls and landings of launches that are mostly
        // fixed cost: every item leaves once, in order; at most `parallel`
        // launches are out when a timed-out batch leaves unless it is
        // large enough to be worth its fixed cost.
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let mut c = fitted(1e-3, 2e-5);
        let mut out: Vec<u32> = Vec::new();
        let mut on_device: Vec<usize> = Vec::new();
        let (mut now, mut holds) = (1.0, 0);
        for i in 0..5000u32 {
            now += rng.gen_range(0.0..0.0005);
            let r: f64 = rng.gen_range(0.0..1.0);
            let mut left = None;
            if r < 0.3 && !on_device.is_empty() {
                let n = on_device.remove(0);
                c.record_launch(n, 1e-3 + 2e-5 * n as f64);
                left = c.landed(now, n);
            } else if r < 0.6 {
                holds += c.held() as u32;
                left = c.poll(now);
            }
            for b in [left, c.push(now, i)].into_iter().flatten() {
                on_device.push(b.len());
                out.extend(b);
            }
            assert_eq!(c.in_flight(), on_device.len());
        }
        assert!(holds > 20, "{holds}");
        out.extend(c.flush().unwrap_or_default());
        let mut sorted = out.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 5000);
        assert!(out.windows(2).all(|w| w[0] < w[1]), "order kept");
    }
}
