//! A launch's cost against its size, `fixed + per_event × n`, fitted over
//! the launches so far. The split controller reads it (a device measured on
//! small launches understates larger ones) and so does the combiner (a
//! small batch whose launch is mostly fixed cost is worth holding back
//! while the device is busy).

/// A launch's cost against its size, fitted as `fixed + per_event × n`
/// over the launches so far (least squares, older launches fading): where
/// the fixed part dominates the launches a split makes, the device's
/// measured rate is that of small launches, and a larger share (larger
/// launches) would raise it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LaunchCosts {
    weight: f64,
    n: f64,
    t: f64,
    nn: f64,
    nt: f64,
}

/// Weight of a launch in [`LaunchCosts`] after each newer one.
const LAUNCH_FADE: f64 = 0.98;

impl LaunchCosts {
    pub(crate) fn add(&mut self, events: usize, seconds: f64) {
        let n = events as f64;
        for sum in [
            &mut self.weight,
            &mut self.n,
            &mut self.t,
            &mut self.nn,
            &mut self.nt,
        ] {
            *sum *= LAUNCH_FADE;
        }
        self.weight += 1.0;
        self.n += n;
        self.t += seconds;
        self.nn += n * n;
        self.nt += n * seconds;
    }

    /// The fixed part's share of a launch of `events` events, when the
    /// launches seen so far had sizes varied enough to tell it.
    pub(crate) fn fixed_share(&self, events: f64) -> Option<f64> {
        let w = self.weight;
        let mean = self.n / w.max(1e-12);
        let variance = self.nn / w.max(1e-12) - mean * mean;
        if w < 8.0 || variance < 0.05 * mean * mean {
            return None;
        }
        let per_event = ((self.nt / w - mean * self.t / w) / variance).max(0.0);
        let fixed = (self.t / w - per_event * mean).max(0.0);
        let total = fixed + per_event * events;
        (total > 0.0).then(|| fixed / total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_costs_are_told_apart_only_from_launches_of_different_sizes() {
        let mut costs = LaunchCosts::default();
        for i in 0..40 {
            let n = 1 + i % 4;
            costs.add(n, 0.001 + 1e-4 * n as f64);
        }
        let share = costs.fixed_share(2.0).unwrap();
        assert!((share - 0.001 / 0.0012).abs() < 1e-6, "{share}");
        let mut same = LaunchCosts::default();
        for _ in 0..40 {
            same.add(8, 0.002);
        }
        assert_eq!(same.fixed_share(8.0), None);
    }
}
