//! A launch's cost against its size, `fixed + per_event × n`, fitted over
//! the launches so far. The split controller reads it (a device measured on
//! small launches understates larger ones) and so does the combiner (a
//! small batch whose launch is mostly fixed cost is worth holding back
//! while the device is busy). [`LineFit`] is the least-squares line both
//! rest on, and each stage of a run's `launch_model`.

/// Least-squares line `time = fixed + slope × size` over launches, kept as
/// running sums (a few additions per launch).
#[derive(Clone, Copy, Debug, Default)]
pub struct LineFit {
    n: f64,
    sum_x: f64,
    sum_xx: f64,
    sum_t: f64,
    sum_xt: f64,
}

impl LineFit {
    /// Weighs the points so far by `factor` (0..1): older points fade.
    pub(crate) fn fade(&mut self, factor: f64) {
        for sum in [
            &mut self.n,
            &mut self.sum_x,
            &mut self.sum_xx,
            &mut self.sum_t,
            &mut self.sum_xt,
        ] {
            *sum *= factor;
        }
    }

    /// The points' total weight, and their sizes' mean and variance.
    pub(crate) fn sizes(&self) -> (f64, f64, f64) {
        let w = self.n.max(1e-12);
        let mean = self.sum_x / w;
        (self.n, mean, self.sum_xx / w - mean * mean)
    }

    pub fn add(&mut self, size: f64, time: f64) {
        self.n += 1.0;
        self.sum_x += size;
        self.sum_xx += size * size;
        self.sum_t += time;
        self.sum_xt += size * time;
    }

    /// `(fixed, slope)`, both at least 0; `None` without a point. When
    /// every launch had the same size, the fixed part cannot be told from
    /// the rest: all of the time is put per unit (at that size both give
    /// the same times).
    ///
    /// ```
    /// use evflow_device::LineFit;
    ///
    /// let mut fit = LineFit::default();
    /// for n in [1.0, 4.0, 16.0, 64.0] {
    ///     fit.add(n, 10e-6 + 2e-6 * n);
    /// }
    /// let (fixed, slope) = fit.line().unwrap();
    /// assert!((fixed - 10e-6).abs() < 1e-12 && (slope - 2e-6).abs() < 1e-12);
    /// ```
    pub fn line(&self) -> Option<(f64, f64)> {
        if self.n <= 0.0 {
            return None;
        }
        let (mx, mt) = (self.sum_x / self.n, self.sum_t / self.n);
        let var = self.sum_xx / self.n - mx * mx;
        let per_unit = || {
            if mx > 0.0 { (0.0, mt / mx) } else { (mt, 0.0) }
        };
        if var <= 1e-9 * mx * mx || var <= 0.0 {
            return Some(per_unit());
        }
        let slope = (self.sum_xt / self.n - mx * mt) / var;
        let fixed = mt - slope * mx;
        Some(if slope < 0.0 {
            (mt, 0.0)
        } else if fixed < 0.0 {
            // Through the origin: the least-squares slope without a fixed part.
            (0.0, self.sum_xt / self.sum_xx)
        } else {
            (fixed, slope)
        })
    }
}

/// A launch's cost against its size, fitted as `fixed + per_event × n`
/// over the launches so far (least squares, older launches fading): where
/// the fixed part dominates the launches a split makes, the device's
/// measured rate is that of small launches, and a larger share (larger
/// launches) would raise it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LaunchCosts {
    fit: LineFit,
    /// The last line told apart: launches that become all of one size
    /// (once they are full, say) cannot tell it, but it has not changed.
    told: Option<(f64, f64)>,
}

/// Weight of a launch in [`LaunchCosts`] after each newer one.
const LAUNCH_FADE: f64 = 0.98;

impl LaunchCosts {
    pub(crate) fn add(&mut self, events: usize, seconds: f64) {
        self.fit.fade(LAUNCH_FADE);
        self.fit.add(events as f64, seconds);
        if self.varied() {
            self.told = self.fit.line();
        }
    }

    /// The launches seen lately had sizes varied enough to tell the line.
    fn varied(&self) -> bool {
        let (weight, mean, variance) = self.fit.sizes();
        weight >= 8.0 && variance >= 0.05 * mean * mean
    }

    /// The fixed part's share of a launch of `events` events, when the
    /// launches seen so far had sizes varied enough to tell it.
    pub(crate) fn fixed_share(&self, events: f64) -> Option<f64> {
        if !self.varied() {
            return None;
        }
        share(self.fit.line()?, events)
    }

    /// The same by the last line told apart, once any was: launches all of
    /// one size since keep it (the combiner's, whose full launches would
    /// otherwise forget why they are full).
    pub(crate) fn last_fixed_share(&self, events: f64) -> Option<f64> {
        share(self.told?, events)
    }

    /// The last line told apart, `(fixed, per_event)` in seconds.
    pub(crate) fn told_line(&self) -> Option<(f64, f64)> {
        self.told
    }

    /// A launch's fixed cost by the last line told apart, in seconds.
    pub(crate) fn last_fixed_s(&self) -> Option<f64> {
        self.told.map(|(fixed, _)| fixed)
    }
}

fn share((fixed, per_event): (f64, f64), events: f64) -> Option<f64> {
    let total = fixed + per_event * events;
    (total > 0.0).then(|| fixed / total)
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
        assert_eq!(same.last_fixed_share(8.0), None);
    }

    #[test]
    fn the_last_line_told_apart_outlives_launches_of_one_size() {
        let mut costs = LaunchCosts::default();
        for i in 0..40 {
            costs.add(1 + i % 4, 0.001 + 1e-4 * (1 + i % 4) as f64);
        }
        // Then only full launches: the fit can no longer tell, the
        // combiner still knows.
        for _ in 0..400 {
            costs.add(8, 0.0018);
        }
        assert_eq!(costs.fixed_share(8.0), None);
        let share = costs.last_fixed_share(2.0).unwrap();
        assert!((share - 0.001 / 0.0012).abs() < 1e-3, "{share}");
        let fixed = costs.last_fixed_s().unwrap();
        assert!((fixed - 0.001).abs() < 1e-6, "{fixed}");
    }
}
