//! `--events-per-lumi N`: regroups the events of any source into
//! luminosity blocks of N events (runs kept; blocks numbered from 1 in each
//! run), to measure what block boundaries cost.

use evflow_core::{EventId, ModuleError, Source, SourceProducts};

pub struct Regrouped {
    inner: Box<dyn Source>,
    per_lumi: u64,
    /// The run of the last event read, and how many of its events were.
    run: Option<u32>,
    read_in_run: u64,
}

impl Regrouped {
    pub fn new(inner: Box<dyn Source>, per_lumi: u64) -> Self {
        Self {
            inner,
            per_lumi: per_lumi.max(1),
            run: None,
            read_in_run: 0,
        }
    }
}

impl Source for Regrouped {
    fn produces(&self) -> Vec<String> {
        self.inner.produces()
    }

    fn next_event(
        &mut self,
        products: &mut SourceProducts,
    ) -> Result<Option<EventId>, ModuleError> {
        let Some(id) = self.inner.next_event(products)? else {
            return Ok(None);
        };
        // Blocks are counted within each run, from 1, as a source numbers
        // them: a block never spans two runs.
        if self.run != Some(id.run) {
            self.run = Some(id.run);
            self.read_in_run = 0;
        }
        let index = self.read_in_run / self.per_lumi + 1;
        let lumi = u32::try_from(index).map_err(|_| {
            ModuleError::msg(format!(
                "event {}: block {index} of run {} of {} events is beyond the largest block \
                 number, {}",
                id.event,
                id.run,
                self.per_lumi,
                u32::MAX
            ))
        })?;
        self.read_in_run += 1;
        Ok(Some(EventId::new(id.run, lumi, id.event)))
    }

    fn describe(&self) -> String {
        format!(
            "{} in luminosity blocks of {} events",
            self.inner.describe(),
            self.per_lumi
        )
    }
}

#[cfg(test)]
mod tests {
    use evflow_core::EmptySource;

    use super::*;

    /// (run, lumi) of every event of a regrouped source.
    fn layout(source: EmptySource, per_lumi: u64) -> Vec<(u32, u32)> {
        let mut regrouped = Regrouped::new(Box::new(source), per_lumi);
        let mut products = SourceProducts::default();
        std::iter::from_fn(|| regrouped.next_event(&mut products).unwrap())
            .map(|id| (id.run, id.lumi))
            .collect()
    }

    #[test]
    fn blocks_are_counted_within_each_run() {
        // Three runs of 4 events, regrouped into blocks of 3: each run has
        // a block of 3 and one of 1, numbered 1 and 2; no block spans runs.
        let source = EmptySource::new(12).events_per_lumi(4).lumis_per_run(1);
        let run = |r| [(r, 1), (r, 1), (r, 1), (r, 2)];
        let expected: Vec<(u32, u32)> = [run(1), run(2), run(3)].concat();
        assert_eq!(layout(source, 3), expected);
        // One run: plain blocks of N.
        let one = layout(EmptySource::new(5), 2);
        assert_eq!(one, vec![(1, 1), (1, 1), (1, 2), (1, 2), (1, 3)]);
    }
}
