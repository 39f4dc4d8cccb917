//! What the `adaptive` planner measured on a reorderable path, in a form
//! another planner of the same path can start from: a later chunk of a
//! distributed job, or the next job on similar data. The statistics are
//! exact counts and per-event decision vectors plus robust step costs, so
//! that merging the parts measured by several processes gives the same
//! kind of statistics as one process would have measured on all of their
//! events.
//!
//! ```
//! use evflow_core::ordering::{PathStatistics, StepCost, StopCounts};
//!
//! // Two processes measured the path `sel` (steps `a`, `b`) with the steps
//! // written in opposite orders: merging maps them by label.
//! let first = PathStatistics {
//!     steps: vec!["a".into(), "b".into()],
//!     samples: vec![(0b11, 0b01)], // both decided: `a` passed, `b` failed
//!     stops: vec![StopCounts { order: vec![0, 1], stops: vec![10, 5, 85] }],
//!     costs: vec![Some(StepCost { mean_s: 2e-6, se_s: 1e-7, measurements: 100 }), None],
//!     ..Default::default()
//! };
//! let second = PathStatistics {
//!     steps: vec!["b".into(), "a".into()],
//!     samples: vec![(0b01, 0b00)], // only `b` decided: it failed
//!     stops: vec![StopCounts { order: vec![1, 0], stops: vec![3, 1, 16] }],
//!     costs: vec![Some(StepCost { mean_s: 5e-6, se_s: 2e-7, measurements: 50 }), None],
//!     ..Default::default()
//! };
//! let mut merged = first.clone();
//! merged.merge(&second).unwrap();
//! assert_eq!(merged.samples, [(0b11, 0b01), (0b10, 0b00)]);
//! // Both measured the order `a`, `b`: one entry, counts summed.
//! assert_eq!(merged.stops, [StopCounts { order: vec![0, 1], stops: vec![13, 6, 101] }]);
//! assert_eq!(merged.costs[1].unwrap().mean_s, 5e-6);
//! assert_eq!(merged.events(), 120);
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Decision vectors kept by a merge (the most recent ones): the default
/// window of a planner's samples.
pub const MAX_EXCHANGED_SAMPLES: usize = 4096;

/// Orders whose stop counts a merge keeps (those with the most events).
pub const MAX_EXCHANGED_ORDERS: usize = 8;

/// Per reorderable path (by name): its statistics.
pub type OrderingStatistics = BTreeMap<String, PathStatistics>;

/// The statistics of one reorderable path. Step positions (bits of the
/// samples, entries of the orders and of `costs`) refer to `steps`, the
/// path's modules in the written order of the process that measured them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PathStatistics {
    /// Module labels of the path's steps, in the measuring process's
    /// written order.
    pub steps: Vec<String>,
    /// Sampled events: `(known, passed)` bit masks, bit `j` for `steps[j]`
    /// (the steps that ran on the event, and those that passed).
    pub samples: Vec<(u64, u64)>,
    /// Where the events stopped, per order in force.
    pub stops: Vec<StopCounts>,
    /// Per step: its measured cost per event (`None`: never timed).
    pub costs: Vec<Option<StepCost>>,
    /// The producers that several steps of the path need (and nothing
    /// outside it), charged to the first of them to run: their measured
    /// cost per execution (those timed only). Absent from statistics
    /// written before they were exchanged, which read as none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared: Vec<SharedProducerCost>,
    /// The producers that steps of the path need and something outside it
    /// needs too, with how often something outside ran them (see
    /// [`OutsideProducerCost`]). Absent from statistics written before
    /// they were exchanged, which read as none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outside: Vec<OutsideProducerCost>,
    /// Precedence pairs `(later, earlier)`, by step label, that the path
    /// took beyond those it was written with: inferred by the probe before
    /// its first decision (a cut that fails where a cut written before it
    /// did not pass), or imported. A planner starting from the statistics
    /// takes them before its first decision. Absent from statistics
    /// written before they were exchanged, which read as none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<(String, String)>,
}

/// A producer that several steps of a path need, and its robust cost per
/// execution. Matched by label: a process for which the producer is not
/// shared by the path's steps (another path or an end-path module needs
/// it too) does not charge it, and ignores it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SharedProducerCost {
    /// The producer's module label.
    pub producer: String,
    /// Labels of the steps that need it (at least two).
    pub steps: Vec<String>,
    pub cost: StepCost,
}

/// A producer that steps of a path need and something outside the path
/// (a step of another path, an end-path module) needs too. On the events
/// of the path on which none of its steps needed the producer (`events`),
/// something outside ran it `ran_outside` times; the path's steps are
/// charged for it on the other events. Matched by label: a planner for
/// which the path's steps alone need the producer takes its cost only.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OutsideProducerCost {
    /// The producer's module label.
    pub producer: String,
    /// Labels of the steps of the path that need it (at least one).
    pub steps: Vec<String>,
    pub cost: StepCost,
    /// Events of the path on which no step of it needed the producer.
    pub events: u64,
    /// Of those, the events on which something outside the path ran it.
    pub ran_outside: u64,
}

/// The events observed under one order, by the position (in that order)
/// of the step that rejected them; the last entry counts the accepted
/// events.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopCounts {
    /// Step positions (into [`PathStatistics::steps`]) in running order.
    pub order: Vec<usize>,
    /// `order.len() + 1` counts.
    pub stops: Vec<u64>,
}

/// A step's robust cost per event it ran on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StepCost {
    /// Mean running time per event (seconds).
    pub mean_s: f64,
    /// Its standard error (seconds).
    pub se_s: f64,
    /// The measurements (timings of single events, or their equivalent for
    /// timings of batches) it rests on.
    pub measurements: u64,
}

/// Statistics that cannot be combined or used, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("ordering statistics of path '{path}': {reason}")]
pub struct StatisticsError {
    pub path: String,
    pub reason: String,
}

impl PathStatistics {
    /// Events whose stop counts these statistics hold.
    pub fn events(&self) -> u64 {
        self.stops.iter().map(|s| s.stops.iter().sum::<u64>()).sum()
    }

    /// Checks that the statistics describe `n = steps.len()` steps
    /// consistently (each order a permutation of the positions, one count
    /// per position plus the accepted events, one cost per step, no sample
    /// bit beyond the steps, every step at most 64).
    pub fn validate(&self, path: &str) -> Result<(), StatisticsError> {
        let err = |reason: String| StatisticsError {
            path: path.to_string(),
            reason,
        };
        let n = self.steps.len();
        if n == 0 || n > 64 {
            return Err(err(format!("{n} steps (1 to 64 expected)")));
        }
        let mut labels: Vec<&String> = self.steps.iter().collect();
        labels.sort();
        if labels.windows(2).any(|w| w[0] == w[1]) {
            return Err(err("a step is listed twice".into()));
        }
        if self.costs.len() != n {
            return Err(err(format!("{} costs for {n} steps", self.costs.len())));
        }
        let full = full_mask(n);
        if self
            .samples
            .iter()
            .any(|&(k, p)| k & !full != 0 || p & !k != 0)
        {
            return Err(err(
                "a sample names a step beyond the path, or passes a step that did not run".into(),
            ));
        }
        for s in &self.stops {
            let mut seen = vec![false; n];
            let permutation = s.order.len() == n
                && s.order
                    .iter()
                    .all(|&j| j < n && !std::mem::replace(&mut seen[j], true));
            if !permutation || s.stops.len() != n + 1 {
                return Err(err(format!(
                    "stop counts of order {:?} do not fit {n} steps",
                    s.order
                )));
            }
        }
        if let Some(c) = self
            .costs
            .iter()
            .flatten()
            .find(|c| !(c.mean_s.is_finite() && c.mean_s >= 0.0 && c.se_s.is_finite()))
        {
            return Err(err(format!(
                "a step cost of {} s is not a duration",
                c.mean_s
            )));
        }
        self.validate_shared()
            .and_then(|()| self.validate_outside())
            .and_then(|()| self.validate_after())
            .map_err(err)
    }

    /// Checks the shared producers: each listed once, not a step itself,
    /// needed by two or more distinct steps of the path, with a cost that
    /// is a duration.
    fn validate_shared(&self) -> Result<(), String> {
        for (k, s) in self.shared.iter().enumerate() {
            let name = &s.producer;
            if name.is_empty() {
                return Err("a shared producer has no label".into());
            }
            if self.steps.contains(name) {
                return Err(format!(
                    "shared producer '{name}' is a step of the path, not a producer"
                ));
            }
            if self.shared[..k].iter().any(|o| &o.producer == name) {
                return Err(format!("shared producer '{name}' is listed twice"));
            }
            let mut steps: Vec<&String> = s.steps.iter().collect();
            steps.sort();
            steps.dedup();
            if steps.len() != s.steps.len() || steps.len() < 2 {
                return Err(format!(
                    "shared producer '{name}' must name two or more distinct steps, not {:?}",
                    s.steps
                ));
            }
            if let Some(x) = s.steps.iter().find(|x| !self.steps.contains(x)) {
                return Err(format!(
                    "shared producer '{name}' is needed by '{x}', which is not a step of the path"
                ));
            }
            let c = s.cost;
            if !(c.mean_s.is_finite() && c.mean_s >= 0.0 && c.se_s.is_finite()) {
                return Err(format!(
                    "the cost of shared producer '{name}', {} s, is not a duration",
                    c.mean_s
                ));
            }
        }
        Ok(())
    }

    /// The same statistics with the steps in the order of `labels` (the
    /// path as written by another process); fails when the two list
    /// different steps.
    pub fn for_steps(&self, path: &str, labels: &[String]) -> Result<Self, StatisticsError> {
        if self.steps == labels {
            return Ok(self.clone());
        }
        let position = |label: &String| labels.iter().position(|l| l == label);
        let map: Option<Vec<usize>> = self.steps.iter().map(position).collect();
        let map = match map {
            Some(m) if labels.len() == self.steps.len() => m,
            _ => {
                return Err(StatisticsError {
                    path: path.to_string(),
                    reason: format!(
                        "measured on steps {:?}, the path has {:?}",
                        self.steps, labels
                    ),
                });
            }
        };
        let bits = |mask: u64| {
            map.iter()
                .enumerate()
                .filter(|&(j, _)| mask >> j & 1 == 1)
                .fold(0u64, |m, (_, &to)| m | 1 << to)
        };
        let mut costs = vec![None; labels.len()];
        for (j, &to) in map.iter().enumerate() {
            costs[to] = self.costs[j];
        }
        Ok(Self {
            steps: labels.to_vec(),
            samples: self
                .samples
                .iter()
                .map(|&(k, p)| (bits(k), bits(p)))
                .collect(),
            stops: self
                .stops
                .iter()
                .map(|s| StopCounts {
                    order: s.order.iter().map(|&j| map[j]).collect(),
                    stops: s.stops.clone(),
                })
                .collect(),
            costs,
            shared: self.shared.clone(),
            outside: self.outside.clone(),
            after: self.after.clone(),
        })
    }

    /// Adds `other`, measured on other events (steps matched by label):
    /// its samples after these (the most recent [`MAX_EXCHANGED_SAMPLES`]
    /// kept), its stop counts summed with those of the same order (the
    /// [`MAX_EXCHANGED_ORDERS`] orders with the most events kept), and each
    /// step's cost, and each shared producer's (by label), averaged with
    /// weights of their measurements; the counts of the producers also
    /// needed outside the path summed; its `after` pairs added to these
    /// (once each, a pair making a cycle with them left out).
    pub fn merge(&mut self, other: &PathStatistics) -> Result<(), StatisticsError> {
        let other = other.for_steps("", &self.steps)?;
        self.samples.extend_from_slice(&other.samples);
        if self.samples.len() > MAX_EXCHANGED_SAMPLES {
            self.samples
                .drain(..self.samples.len() - MAX_EXCHANGED_SAMPLES);
        }
        for s in other.stops {
            match self.stops.iter_mut().find(|e| e.order == s.order) {
                Some(e) => {
                    for (a, b) in e.stops.iter_mut().zip(&s.stops) {
                        *a += b;
                    }
                }
                None => self.stops.push(s),
            }
        }
        // The orders with the most events (stable: among equals, those
        // listed first).
        self.stops
            .sort_by_key(|s| std::cmp::Reverse(s.stops.iter().sum::<u64>()));
        self.stops.truncate(MAX_EXCHANGED_ORDERS);
        for (mine, theirs) in self.costs.iter_mut().zip(other.costs) {
            *mine = combine_costs(*mine, theirs);
        }
        // Shared producers by label, their costs averaged as the steps'.
        for theirs in other.shared {
            match self
                .shared
                .iter_mut()
                .find(|s| s.producer == theirs.producer)
            {
                Some(mine) => {
                    mine.cost =
                        combine_costs(Some(mine.cost), Some(theirs.cost)).unwrap_or(mine.cost);
                    for step in theirs.steps {
                        if !mine.steps.contains(&step) {
                            mine.steps.push(step);
                        }
                    }
                }
                None => self.shared.push(theirs),
            }
        }
        self.merge_outside(other.outside);
        self.merge_after(&other.after);
        Ok(())
    }
}

/// Merges the statistics of several processes, path by path, in the
/// order given (the samples of later parts count as the more recent).
/// A path's parts must list the same steps.
pub fn merge_statistics<'a>(
    parts: impl IntoIterator<Item = &'a OrderingStatistics>,
) -> Result<OrderingStatistics, StatisticsError> {
    let mut merged = OrderingStatistics::new();
    for part in parts {
        for (name, stats) in part {
            stats.validate(name)?;
            match merged.get_mut(name) {
                Some(m) => m.merge(stats).map_err(|e| StatisticsError {
                    path: name.clone(),
                    reason: e.reason,
                })?,
                None => {
                    merged.insert(name.clone(), stats.clone());
                }
            }
        }
    }
    Ok(merged)
}

/// Two measurements of one step's cost as one, weighted by their
/// measurements.
pub(crate) fn combine_costs(a: Option<StepCost>, b: Option<StepCost>) -> Option<StepCost> {
    match (a, b) {
        (Some(a), Some(b)) if a.measurements + b.measurements > 0 => {
            let (na, nb) = (a.measurements as f64, b.measurements as f64);
            let n = na + nb;
            Some(StepCost {
                mean_s: (na * a.mean_s + nb * b.mean_s) / n,
                se_s: (na * a.se_s).hypot(nb * b.se_s) / n,
                measurements: a.measurements + b.measurements,
            })
        }
        (Some(x), _) | (None, Some(x)) => Some(x),
        (None, None) => None,
    }
}

pub(crate) fn full_mask(n: usize) -> u64 {
    if n >= 64 { u64::MAX } else { (1u64 << n) - 1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(steps: &[&str]) -> PathStatistics {
        PathStatistics {
            steps: steps.iter().map(|s| s.to_string()).collect(),
            costs: vec![None; steps.len()],
            ..Default::default()
        }
    }

    #[test]
    fn steps_written_in_another_order_are_mapped_by_label() {
        let mut s = stats(&["a", "b", "c"]);
        s.samples = vec![(0b111, 0b101), (0b011, 0b010)];
        s.stops = vec![StopCounts {
            order: vec![2, 0, 1],
            stops: vec![1, 2, 3, 4],
        }];
        s.costs[2] = Some(StepCost {
            mean_s: 1.0,
            se_s: 0.1,
            measurements: 3,
        });
        let labels: Vec<String> = ["c", "a", "b"].iter().map(|s| s.to_string()).collect();
        let t = s.for_steps("p", &labels).unwrap();
        // a: bit 0 -> 1, b: 1 -> 2, c: 2 -> 0.
        assert_eq!(t.samples, [(0b111, 0b011), (0b110, 0b100)]);
        assert_eq!(t.stops[0].order, [0, 1, 2]);
        assert_eq!(t.costs[0].unwrap().mean_s, 1.0);
        assert!(t.costs[1].is_none());
        // And back.
        assert_eq!(t.for_steps("p", &s.steps).unwrap(), s);
    }

    #[test]
    fn other_steps_are_refused_by_name() {
        let s = stats(&["a", "b"]);
        let e = s
            .for_steps("sel", &["a".to_string(), "x".to_string()])
            .unwrap_err();
        assert_eq!(e.path, "sel");
        assert!(e.to_string().contains("path 'sel'"), "{e}");
        let mut m = OrderingStatistics::new();
        m.insert("sel".into(), s);
        let mut other = OrderingStatistics::new();
        other.insert("sel".into(), stats(&["a", "c"]));
        let e = merge_statistics([&m, &other]).unwrap_err();
        assert!(e.to_string().contains("path 'sel'"), "{e}");
    }

    #[test]
    fn inconsistent_statistics_are_refused() {
        let mut s = stats(&["a", "b"]);
        s.stops = vec![StopCounts {
            order: vec![0, 0],
            stops: vec![1, 1, 1],
        }];
        assert!(s.validate("p").is_err());
        let mut s = stats(&["a", "b"]);
        s.samples = vec![(0b01, 0b10)];
        assert!(s.validate("p").is_err());
        let mut s = stats(&["a", "b"]);
        s.costs.pop();
        assert!(s.validate("p").is_err());
        assert!(stats(&["a", "b"]).validate("p").is_ok());
    }

    #[test]
    fn merging_keeps_the_recent_samples_and_the_largest_orders() {
        let mut a = stats(&["a", "b"]);
        a.samples = vec![(1, 1); MAX_EXCHANGED_SAMPLES];
        let mut b = stats(&["a", "b"]);
        b.samples = vec![(3, 0); 10];
        a.merge(&b).unwrap();
        assert_eq!(a.samples.len(), MAX_EXCHANGED_SAMPLES);
        assert_eq!(
            a.samples[MAX_EXCHANGED_SAMPLES - 10..],
            vec![(3, 0); 10][..]
        );

        // Ten orders of four steps, order k with k + 1 events: the eight
        // with the most events stay.
        let mut a = stats(&["a", "b", "c", "d"]);
        let orders = [
            [0, 1, 2, 3],
            [0, 1, 3, 2],
            [0, 2, 1, 3],
            [0, 2, 3, 1],
            [0, 3, 1, 2],
            [0, 3, 2, 1],
            [1, 0, 2, 3],
            [1, 0, 3, 2],
            [1, 2, 0, 3],
            [1, 2, 3, 0],
        ];
        for (k, p) in orders.iter().enumerate() {
            let mut b = stats(&["a", "b", "c", "d"]);
            b.stops = vec![StopCounts {
                order: p.to_vec(),
                stops: vec![k as u64 + 1, 0, 0, 0, 0],
            }];
            a.merge(&b).unwrap();
        }
        assert_eq!(a.stops.len(), MAX_EXCHANGED_ORDERS);
        assert!(a.stops.iter().all(|s| s.stops[0] >= 3));
        assert_eq!(a.events(), (3..=10).sum::<u64>());
    }

    #[test]
    fn costs_are_averaged_by_their_measurements() {
        let c = |m: f64, n: u64| {
            Some(StepCost {
                mean_s: m,
                se_s: 0.0,
                measurements: n,
            })
        };
        let got = combine_costs(c(1.0, 1), c(4.0, 3)).unwrap();
        assert_eq!(got.mean_s, 3.25);
        assert_eq!(got.measurements, 4);
        assert_eq!(combine_costs(None, c(2.0, 1)), c(2.0, 1));
        assert_eq!(combine_costs(None, None), None);
    }
}
