//! Sources: where events come from. A source is called by one task at a
//! time, so it may keep plain mutable state.

use crate::error::ModuleError;
use crate::event::StoredProduct;
use crate::ids::EventId;

/// Produces the events of a job, in order.
pub trait Source: Send {
    /// Instance names of the products the source puts into each event,
    /// consumed as `source:instance` (or `source` for the unnamed one).
    fn produces(&self) -> Vec<String> {
        Vec::new()
    }

    /// Reads the next event: its id, after putting its products into
    /// `products`; `None` at the end of the input.
    fn next_event(&mut self, products: &mut SourceProducts)
    -> Result<Option<EventId>, ModuleError>;

    /// A short description for messages ("file x.root", "empty source").
    fn describe(&self) -> String {
        "source".into()
    }
}

/// Products a source puts into the event it is reading.
#[derive(Default)]
pub struct SourceProducts {
    pub(crate) items: Vec<(String, StoredProduct)>,
}

impl SourceProducts {
    pub fn put<T: std::any::Any + Send + Sync>(&mut self, instance: &str, value: T) {
        self.items.push((
            instance.to_string(),
            StoredProduct {
                value: Box::new(value),
                type_name: std::any::type_name::<T>(),
            },
        ));
    }
}

/// Generates `events` events with no products, numbered from 1, like CMSSW's
/// `EmptySource`: `events_per_lumi` events per luminosity block and
/// `lumis_per_run` blocks per run.
///
/// ```
/// use evflow_core::{EmptySource, Source, SourceProducts, EventId};
/// let mut s = EmptySource::new(3).events_per_lumi(2);
/// let mut p = SourceProducts::default();
/// let ids: Vec<EventId> = std::iter::from_fn(|| s.next_event(&mut p).unwrap()).collect();
/// assert_eq!(ids, vec![EventId::new(1, 1, 1), EventId::new(1, 1, 2), EventId::new(1, 2, 3)]);
/// ```
#[derive(Clone, Debug)]
pub struct EmptySource {
    events: u64,
    next: u64,
    first_run: u32,
    events_per_lumi: u64,
    lumis_per_run: u64,
}

impl EmptySource {
    pub fn new(events: u64) -> Self {
        Self {
            events,
            next: 0,
            first_run: 1,
            events_per_lumi: u64::MAX,
            lumis_per_run: u64::MAX,
        }
    }
    pub fn events_per_lumi(mut self, n: u64) -> Self {
        self.events_per_lumi = n.max(1);
        self
    }
    pub fn lumis_per_run(mut self, n: u64) -> Self {
        self.lumis_per_run = n.max(1);
        self
    }
    pub fn first_run(mut self, run: u32) -> Self {
        self.first_run = run;
        self
    }
    /// Checks, before any event is read, that every event's run and
    /// luminosity-block numbers fit in 32 bits (the error names the first
    /// event that would not).
    pub fn check_numbers(&self) -> Result<(), String> {
        // The first block index whose run number passes 32 bits, and, when
        // a run holds more blocks than 32 bits count, the first whose block
        // number does; events before the first such block are all in range.
        let max = u128::from(u32::MAX);
        let run_overflow = (max - u128::from(self.first_run) + 1) * u128::from(self.lumis_per_run);
        let lumi_overflow = if u128::from(self.lumis_per_run) > max {
            max
        } else {
            u128::MAX
        };
        let first_bad = run_overflow
            .min(lumi_overflow)
            .saturating_mul(u128::from(self.events_per_lumi));
        if first_bad >= u128::from(self.events) {
            return Ok(());
        }
        let mut at = self.clone();
        at.next = first_bad as u64; // below `events`, a u64
        at.next_event(&mut SourceProducts::default())
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

impl Source for EmptySource {
    fn next_event(&mut self, _: &mut SourceProducts) -> Result<Option<EventId>, ModuleError> {
        if self.next >= self.events {
            return Ok(None);
        }
        let i = self.next;
        self.next += 1;
        let lumi_index = i / self.events_per_lumi;
        let run = self.first_run as u64 + lumi_index / self.lumis_per_run;
        let lumi = lumi_index % self.lumis_per_run + 1;
        // Run and luminosity-block numbers are 32 bits: past the largest
        // they would wrap to 0 and reorder the transitions, silently.
        let (Ok(run), Ok(lumi)) = (u32::try_from(run), u32::try_from(lumi)) else {
            return Err(ModuleError::msg(format!(
                "event {} would be in run {run}, luminosity block {lumi}: beyond the largest \
                 run and block number, {} (the first run is {})",
                i + 1,
                u32::MAX,
                self.first_run
            )));
        };
        Ok(Some(EventId::new(run, lumi, i + 1)))
    }
    fn describe(&self) -> String {
        format!("empty source ({} events)", self.events)
    }
}

impl std::fmt::Debug for SourceProducts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.items.iter().map(|(name, p)| (name, p.type_name)))
            .finish()
    }
}
