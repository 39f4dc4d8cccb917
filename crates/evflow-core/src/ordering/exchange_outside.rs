//! Exchanged statistics of the producers that steps of a path need and
//! something outside the path needs too ([`OutsideProducerCost`]): their
//! checks and their merge.

use super::exchange::{OutsideProducerCost, PathStatistics, combine_costs};

impl PathStatistics {
    /// Checks the producers also needed outside the path: each listed
    /// once and not also as shared, not a step itself, needed by distinct
    /// steps of the path, with a cost that is a duration and no more runs
    /// outside than events.
    pub(super) fn validate_outside(&self) -> Result<(), String> {
        for (k, s) in self.outside.iter().enumerate() {
            let name = &s.producer;
            if name.is_empty() {
                return Err("a producer also needed outside the path has no label".into());
            }
            if self.steps.contains(name) {
                return Err(format!(
                    "producer '{name}' (also needed outside the path) is a step of the path"
                ));
            }
            if self.outside[..k].iter().any(|o| &o.producer == name)
                || self.shared.iter().any(|o| &o.producer == name)
            {
                return Err(format!("producer '{name}' is listed twice"));
            }
            let mut steps: Vec<&String> = s.steps.iter().collect();
            steps.sort();
            steps.dedup();
            if steps.len() != s.steps.len() || steps.is_empty() {
                return Err(format!(
                    "producer '{name}' (also needed outside the path) must name distinct steps, not {:?}",
                    s.steps
                ));
            }
            if let Some(x) = s.steps.iter().find(|x| !self.steps.contains(x)) {
                return Err(format!(
                    "producer '{name}' is needed by '{x}', which is not a step of the path"
                ));
            }
            let c = s.cost;
            if !(c.mean_s.is_finite() && c.mean_s >= 0.0 && c.se_s.is_finite()) {
                return Err(format!(
                    "the cost of producer '{name}', {} s, is not a duration",
                    c.mean_s
                ));
            }
            if s.ran_outside > s.events {
                return Err(format!(
                    "producer '{name}' ran outside the path on {} of {} events",
                    s.ran_outside, s.events
                ));
            }
        }
        Ok(())
    }

    /// Adds the producers also needed outside the path measured on other
    /// events: by label, costs averaged by their measurements, counts
    /// summed.
    pub(super) fn merge_outside(&mut self, other: Vec<OutsideProducerCost>) {
        for theirs in other {
            match self
                .outside
                .iter_mut()
                .find(|s| s.producer == theirs.producer)
            {
                Some(mine) => {
                    mine.cost =
                        combine_costs(Some(mine.cost), Some(theirs.cost)).unwrap_or(mine.cost);
                    mine.events += theirs.events;
                    mine.ran_outside += theirs.ran_outside;
                    for step in theirs.steps {
                        if !mine.steps.contains(&step) {
                            mine.steps.push(step);
                        }
                    }
                }
                None => self.outside.push(theirs),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ordering::exchange::{OrderingStatistics, StepCost, merge_statistics};

    fn stats() -> PathStatistics {
        PathStatistics {
            steps: vec!["trig".into(), "nJet".into()],
            costs: vec![None, None],
            outside: vec![OutsideProducerCost {
                producer: "jets".into(),
                steps: vec!["nJet".into()],
                cost: StepCost {
                    mean_s: 100e-6,
                    se_s: 1e-6,
                    measurements: 10,
                },
                events: 800,
                ran_outside: 240,
            }],
            ..Default::default()
        }
    }

    #[test]
    fn counts_are_summed_and_costs_averaged_by_label() {
        let mut a = stats();
        let mut b = stats();
        b.outside[0].cost.mean_s = 200e-6;
        b.outside[0].cost.measurements = 30;
        b.outside[0].events = 200;
        b.outside[0].ran_outside = 10;
        a.merge(&b).unwrap();
        let o = &a.outside[0];
        assert_eq!((o.events, o.ran_outside), (1000, 250));
        assert!((o.cost.mean_s - 175e-6).abs() < 1e-12, "{o:?}");
        assert_eq!(o.cost.measurements, 40);
    }

    #[test]
    fn older_statistics_read_as_none_and_none_are_written_as_before() {
        let mut s = stats();
        s.outside.clear();
        let text = serde_json::to_string(&s).unwrap();
        assert!(!text.contains("outside"), "{text}");
        let old = r#"{"steps":["a","b"],"samples":[],"stops":[],"costs":[null,null]}"#;
        let read: PathStatistics = serde_json::from_str(old).unwrap();
        assert!(read.outside.is_empty());
        let s = stats();
        let back: PathStatistics =
            serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
    }

    /// What the error should say, and how to spoil the statistics.
    type Case = (&'static str, fn(&mut PathStatistics));

    #[test]
    fn bad_entries_are_refused_by_path_and_producer() {
        let cases: [Case; 6] = [
            ("ran outside the path on 900 of 800", |s| {
                s.outside[0].ran_outside = 900
            }),
            ("'ghost', which is not a step", |s| {
                s.outside[0].steps = vec!["ghost".into()]
            }),
            ("must name distinct steps", |s| s.outside[0].steps.clear()),
            ("is not a duration", |s| s.outside[0].cost.mean_s = f64::NAN),
            ("'jets' is listed twice", |s| {
                let again = s.outside[0].clone();
                s.outside.push(again)
            }),
            ("is a step of the path", |s| {
                s.outside[0].producer = "trig".into()
            }),
        ];
        for (want, spoil) in cases {
            let mut s = stats();
            spoil(&mut s);
            let mut m = OrderingStatistics::new();
            m.insert("ctl".into(), s);
            let e = merge_statistics([&m]).unwrap_err().to_string();
            assert!(
                e.contains("path 'ctl'") && e.contains(want),
                "{e} (wanted {want})"
            );
        }
        assert!(stats().validate("ctl").is_ok());
    }
}
