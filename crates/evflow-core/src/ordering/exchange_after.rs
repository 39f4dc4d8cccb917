//! Exchanged precedence pairs ([`PathStatistics::after`]): the `after=`
//! pairs a path took beyond those it was written with (a guard inferred by
//! the probe before its first decision), checked and merged by label, so
//! that a planner starting from the statistics runs each cut after its
//! guard without a probe of its own.

use super::exchange::PathStatistics;
use super::model::transitive_closure;

impl PathStatistics {
    /// Checks the pairs: both sides steps of the path, distinct, each pair
    /// listed once, and no cycle among them.
    pub(super) fn validate_after(&self) -> Result<(), String> {
        for (k, (later, earlier)) in self.after.iter().enumerate() {
            if let Some(x) = [later, earlier]
                .into_iter()
                .find(|x| !self.steps.contains(x))
            {
                return Err(format!(
                    "after pair ('{later}', '{earlier}'): '{x}' is not a step of the path"
                ));
            }
            if later == earlier {
                return Err(format!(
                    "after pair ('{later}', '{earlier}') names one step twice"
                ));
            }
            if self.after[..k].contains(&(later.clone(), earlier.clone())) {
                return Err(format!(
                    "after pair ('{later}', '{earlier}') is listed twice"
                ));
            }
        }
        match self.first_cycle() {
            Some(k) => {
                let (later, earlier) = &self.after[k];
                Err(format!(
                    "after pair ('{later}', '{earlier}') makes a cycle with the pairs before it"
                ))
            }
            None => Ok(()),
        }
    }

    /// The first pair that closes a cycle with the pairs before it.
    fn first_cycle(&self) -> Option<usize> {
        let mut preds = vec![0u64; self.steps.len()];
        for (k, pair) in self.after.iter().enumerate() {
            if !self.add_pair(&mut preds, pair) {
                return Some(k);
            }
        }
        None
    }

    /// Adds `(later, earlier)` to `preds` (bit sets over `steps`) unless it
    /// makes a cycle; whether it was added. Labels must be steps.
    fn add_pair(&self, preds: &mut [u64], (later, earlier): &(String, String)) -> bool {
        let at = |x: &String| self.steps.iter().position(|s| s == x);
        let (Some(l), Some(e)) = (at(later), at(earlier)) else {
            return false;
        };
        let before = preds[l];
        preds[l] |= 1 << e;
        if transitive_closure(preds)
            .iter()
            .enumerate()
            .any(|(j, &c)| c >> j & 1 == 1)
        {
            preds[l] = before;
            return false;
        }
        true
    }

    /// Adds `other`'s pairs after these, in their order: a pair listed
    /// already is kept once, one that makes a cycle with those kept (two
    /// processes that inferred opposite guards) is left out. Merged in the
    /// same order, the same parts give the same pairs.
    pub(super) fn merge_after(&mut self, other: &[(String, String)]) {
        let mut preds = vec![0u64; self.steps.len()];
        for pair in &self.after {
            self.add_pair(&mut preds, pair);
        }
        for pair in other {
            if !self.after.contains(pair) && self.add_pair(&mut preds, pair) {
                self.after.push(pair.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::ordering::exchange::{OrderingStatistics, PathStatistics, merge_statistics};

    fn stats(after: &[(&str, &str)]) -> PathStatistics {
        PathStatistics {
            steps: ["nmu", "mu_pt", "njet", "jet_pt"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            costs: vec![None; 4],
            after: after
                .iter()
                .map(|&(a, b)| (a.to_string(), b.to_string()))
                .collect(),
            ..Default::default()
        }
    }

    fn pairs(s: &PathStatistics) -> Vec<(&str, &str)> {
        s.after
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect()
    }

    #[test]
    fn pairs_are_merged_once_in_the_order_given_and_a_cycle_is_left_out() {
        let mut a = stats(&[("mu_pt", "nmu")]);
        a.merge(&stats(&[("jet_pt", "njet"), ("mu_pt", "nmu")]))
            .unwrap();
        assert_eq!(pairs(&a), [("mu_pt", "nmu"), ("jet_pt", "njet")]);
        // Opposite of a pair kept: left out, whatever else it brings.
        a.merge(&stats(&[("nmu", "mu_pt"), ("njet", "nmu")]))
            .unwrap();
        assert_eq!(
            pairs(&a),
            [("mu_pt", "nmu"), ("jet_pt", "njet"), ("njet", "nmu")]
        );
        // The other order of the parts keeps the other side of the cycle.
        let mut b = stats(&[("nmu", "mu_pt")]);
        b.merge(&stats(&[("mu_pt", "nmu")])).unwrap();
        assert_eq!(pairs(&b), [("nmu", "mu_pt")]);
    }

    #[test]
    fn pairs_travel_by_label_and_older_statistics_read_as_none() {
        let s = stats(&[("mu_pt", "nmu")]);
        let labels: Vec<String> = ["jet_pt", "mu_pt", "nmu", "njet"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            pairs(&s.for_steps("p", &labels).unwrap()),
            [("mu_pt", "nmu")]
        );
        let text = serde_json::to_string(&stats(&[])).unwrap();
        assert!(!text.contains("after"), "{text}");
        let old = r#"{"steps":["a","b"],"samples":[],"stops":[],"costs":[null,null]}"#;
        let read: PathStatistics = serde_json::from_str(old).unwrap();
        assert!(read.after.is_empty());
        let back: PathStatistics =
            serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn bad_pairs_are_refused_by_path_and_pair() {
        let cases: [(&str, &[(&str, &str)]); 4] = [
            ("'ghost' is not a step of the path", &[("ghost", "nmu")]),
            ("names one step twice", &[("nmu", "nmu")]),
            ("is listed twice", &[("mu_pt", "nmu"), ("mu_pt", "nmu")]),
            (
                "('nmu', 'njet') makes a cycle",
                &[("mu_pt", "nmu"), ("njet", "mu_pt"), ("nmu", "njet")],
            ),
        ];
        for (want, after) in cases {
            let mut m = OrderingStatistics::new();
            m.insert("sel".into(), stats(after));
            let e = merge_statistics([&m]).unwrap_err().to_string();
            assert!(
                e.contains("path 'sel'") && e.contains(want),
                "{e} (wanted {want})"
            );
        }
        assert!(
            stats(&[("mu_pt", "nmu"), ("jet_pt", "njet")])
                .validate("sel")
                .is_ok()
        );
    }
}
