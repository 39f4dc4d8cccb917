//! The host/device split: which side runs the next invocation of a module
//! that has both implementations. Pure decision logic (the caller passes the
//! time and the measurements), shared by the executors and the simulator.
//!
//! Run time against the fraction `p` sent to the device is a *bathtub*: with
//! host capacity `H` and device capacity `D` (events per second, the device's
//! including transfers and batching), the job takes `max((1−p)/H, p/D)` per
//! event, lowest at `p* = D / (D + H)`, where both sides finish together.
//! The adaptive controller measures `H` and `D` over windows of time and
//! moves `p` to `p*`; measured again every window, it follows drift (the
//! device slowed by another module's launches, the host by other work).

use serde::Serialize;

/// Which side runs an invocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    Host,
    Device,
}

/// How the split is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SplitMode {
    /// From measurements, to the floor of the bathtub.
    Adaptive,
    /// A fixed fraction of invocations (0..=1) on the device.
    Fixed(f64),
}

impl std::str::FromStr for SplitMode {
    type Err = String;
    /// `adaptive` or `fixed:P` with P a percentage (0–100).
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "adaptive" {
            return Ok(SplitMode::Adaptive);
        }
        let bad =
            || format!("device split '{s}': expected 'adaptive' or 'fixed:P' with P in 0..=100");
        let p = s.strip_prefix("fixed:").ok_or_else(bad)?;
        let p: f64 = p.trim_end_matches('%').parse().map_err(|_| bad())?;
        if !(0.0..=100.0).contains(&p) {
            return Err(bad());
        }
        Ok(SplitMode::Fixed(p / 100.0))
    }
}

/// One decision of the adaptive controller.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct SplitPoint {
    /// Seconds since the controller started.
    pub t_s: f64,
    /// Fraction of invocations sent to the device from then on.
    pub device_fraction: f64,
    /// Measured host capacity for this module, events/s.
    pub host_rate: f64,
    /// Measured device capacity available to this module, events/s.
    pub device_rate: f64,
}

/// Tunables of the adaptive controller.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct SplitTuning {
    /// Length of a measurement window, seconds.
    pub window_s: f64,
    /// Invocations a window must see before it counts.
    pub min_events: u64,
    /// Share of invocations always left to each side, so that both keep
    /// being measured.
    pub explore: f64,
    /// Weight of the newest window in the smoothed rates.
    pub smoothing: f64,
}

impl Default for SplitTuning {
    fn default() -> Self {
        Self {
            window_s: 0.01,
            min_events: 16,
            explore: 0.02,
            smoothing: 0.5,
        }
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Window {
    start: f64,
    host_events: u64,
    host_s: f64,
    device_events: u64,
    /// Bottleneck-stage seconds of this module's launches.
    device_own_s: f64,
    /// The device's bottleneck busy seconds (all modules) at the start.
    device_all_start: f64,
}

/// The adaptive split's first fraction, before anything was measured.
pub const INITIAL_FRACTION: f64 = 0.25;

/// Routes invocations and adapts the split.
///
/// ```
/// use evflow_device::{Side, SplitController, SplitMode, SplitTuning};
///
/// // Host: 2 threads at 1 ms per event = 2000 ev/s; device: 6000 ev/s.
/// let mut c = SplitController::new(SplitMode::Adaptive, 2, SplitTuning::default());
/// let mut t = 0.0;
/// for _ in 0..20 {
///     for _ in 0..100 {
///         match c.route() {
///             Side::Host => c.record_host(0.001),
///             Side::Device => c.record_device(1, 1.0 / 6000.0),
///         }
///     }
///     t += 0.05;
///     c.update(t, 0.0);
/// }
/// assert!((c.device_fraction() - 0.75).abs() < 0.02); // 6000 / (6000 + 2000)
/// ```
#[derive(Clone, Debug)]
pub struct SplitController {
    mode: SplitMode,
    tuning: SplitTuning,
    host_threads: usize,
    fraction: f64,
    credit: f64,
    window: Window,
    host_rate: Option<f64>,
    device_rate: Option<f64>,
    history: Vec<SplitPoint>,
}

impl SplitController {
    /// `host_threads`: threads the host side may use for this module.
    pub fn new(mode: SplitMode, host_threads: usize, tuning: SplitTuning) -> Self {
        let fraction = match mode {
            // Start cautious: a device sent too much builds a backlog that
            // outlives the first window.
            SplitMode::Adaptive => INITIAL_FRACTION,
            SplitMode::Fixed(p) => p.clamp(0.0, 1.0),
        };
        Self {
            mode,
            tuning,
            host_threads: host_threads.max(1),
            fraction,
            credit: 0.0,
            window: Window::default(),
            host_rate: None,
            device_rate: None,
            history: vec![SplitPoint {
                t_s: 0.0,
                device_fraction: fraction,
                host_rate: 0.0,
                device_rate: 0.0,
            }],
        }
    }

    pub fn mode(&self) -> SplitMode {
        self.mode
    }

    /// Current fraction of invocations sent to the device.
    pub fn device_fraction(&self) -> f64 {
        self.fraction
    }

    /// The split chosen over time.
    pub fn history(&self) -> &[SplitPoint] {
        &self.history
    }

    /// The side of the next invocation. Deterministic: a fraction `p` sends
    /// exactly ⌊n·p⌋ or ⌈n·p⌉ of n invocations to the device, spread evenly.
    pub fn route(&mut self) -> Side {
        self.credit += self.fraction;
        if self.credit >= 1.0 - 1e-12 {
            self.credit -= 1.0;
            Side::Device
        } else {
            Side::Host
        }
    }

    /// One host call took `seconds`.
    pub fn record_host(&mut self, seconds: f64) {
        self.window.host_events += 1;
        self.window.host_s += seconds;
    }

    /// A launch of `events` invocations kept the device's limiting stage
    /// busy `bottleneck_s` seconds.
    pub fn record_device(&mut self, events: usize, bottleneck_s: f64) {
        self.window.device_events += events as u64;
        self.window.device_own_s += bottleneck_s;
    }

    /// Closes the window when it is long enough: `device_all_s` is the
    /// device's bottleneck busy time so far, all modules together (so that
    /// the part other modules use is not counted as available). Returns the
    /// new fraction when it changed.
    pub fn update(&mut self, now: f64, device_all_s: f64) -> Option<f64> {
        let w = self.window;
        let span = now - w.start;
        if span < self.tuning.window_s || w.host_events + w.device_events < self.tuning.min_events {
            return None;
        }
        self.window = Window {
            start: now,
            device_all_start: device_all_s,
            ..Window::default()
        };
        let SplitMode::Adaptive = self.mode else {
            return None;
        };
        let a = self.tuning.smoothing;
        let smooth = |old: Option<f64>, new: f64| Some(old.map_or(new, |o| o + a * (new - o)));
        if w.host_events > 0 && w.host_s > 0.0 {
            let rate = self.host_threads as f64 * w.host_events as f64 / w.host_s;
            self.host_rate = smooth(self.host_rate, rate);
        }
        if w.device_events > 0 && w.device_own_s > 0.0 {
            let others = (device_all_s - w.device_all_start - w.device_own_s).max(0.0);
            let free = (1.0 - others / span).clamp(0.05, 1.0);
            let rate = w.device_events as f64 / w.device_own_s * free;
            self.device_rate = smooth(self.device_rate, rate);
        }
        let (Some(h), Some(d)) = (self.host_rate, self.device_rate) else {
            return None;
        };
        let e = self.tuning.explore;
        let fraction = (d / (d + h)).clamp(e, 1.0 - e);
        self.fraction = fraction;
        self.history.push(SplitPoint {
            t_s: now,
            device_fraction: fraction,
            host_rate: h,
            device_rate: d,
        });
        Some(fraction)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_modes() {
        assert_eq!("adaptive".parse::<SplitMode>(), Ok(SplitMode::Adaptive));
        assert_eq!("fixed:25".parse::<SplitMode>(), Ok(SplitMode::Fixed(0.25)));
        assert!("fixed:120".parse::<SplitMode>().is_err());
        assert!("half".parse::<SplitMode>().unwrap_err().contains("fixed:P"));
    }

    #[test]
    fn fixed_split_routes_exactly() {
        let mut c = SplitController::new(SplitMode::Fixed(0.3), 1, SplitTuning::default());
        let device = (0..1000).filter(|_| c.route() == Side::Device).count();
        assert_eq!(device, 300);
        let mut all_host = SplitController::new(SplitMode::Fixed(0.0), 1, SplitTuning::default());
        assert!((0..100).all(|_| all_host.route() == Side::Host));
        let mut all_dev = SplitController::new(SplitMode::Fixed(1.0), 1, SplitTuning::default());
        assert!((0..100).all(|_| all_dev.route() == Side::Device));
    }

    /// A model host and device, and the time.
    #[derive(Default)]
    struct Model {
        t: f64,
        /// Device bottleneck busy seconds, all modules.
        busy: f64,
    }

    /// Drives a controller one window against a host of `host_s` per call and
    /// a device of `device_rate` events/s of which `others` is taken by other
    /// modules.
    fn drive(c: &mut SplitController, host_s: f64, device_rate: f64, others: f64, m: &mut Model) {
        let span = 0.05;
        for _ in 0..200 {
            match c.route() {
                Side::Host => c.record_host(host_s),
                Side::Device => {
                    c.record_device(1, 1.0 / device_rate);
                    m.busy += 1.0 / device_rate;
                }
            }
        }
        m.t += span;
        m.busy += others * span;
        c.update(m.t, m.busy);
    }

    #[test]
    fn follows_drift_of_the_device() {
        let mut c = SplitController::new(SplitMode::Adaptive, 4, SplitTuning::default());
        let mut m = Model::default();
        // Host 4 threads × 1000 ev/s; device 4000 ev/s: p* = 0.5.
        for _ in 0..10 {
            drive(&mut c, 1e-3, 4000.0, 0.0, &mut m);
        }
        assert!((c.device_fraction() - 0.5).abs() < 0.01);
        // Another module now takes half of the device: p* = 2000/6000.
        for _ in 0..15 {
            drive(&mut c, 1e-3, 4000.0, 0.5, &mut m);
        }
        let p = c.device_fraction();
        assert!((p - 1.0 / 3.0).abs() < 0.02, "{p}");
        assert!(c.history().len() > 20);
    }

    #[test]
    fn keeps_exploring_both_sides() {
        let mut c = SplitController::new(SplitMode::Adaptive, 1, SplitTuning::default());
        let mut m = Model::default();
        for _ in 0..10 {
            drive(&mut c, 1.0, 1e6, 0.0, &mut m); // device a million times faster
        }
        assert!((c.device_fraction() - 0.98).abs() < 1e-9);
    }
}
