//! `--events-per-lumi N`: regroups the events of any source into
//! luminosity blocks of N events (runs kept), to measure what block
//! boundaries cost.

use evflow_core::{EventId, ModuleError, Source, SourceProducts};

pub struct Regrouped {
    inner: Box<dyn Source>,
    per_lumi: u64,
    read: u64,
}

impl Regrouped {
    pub fn new(inner: Box<dyn Source>, per_lumi: u64) -> Self {
        Self {
            inner,
            per_lumi: per_lumi.max(1),
            read: 0,
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
        let lumi = u32::try_from(self.read / self.per_lumi + 1).unwrap_or(u32::MAX);
        self.read += 1;
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
