//! Event identity and the per-event product store.

use std::any::Any;
use std::sync::OnceLock;

use crate::ids::EventId;

/// A product value stored in an event. Products are written once and then
/// shared read-only by every module that consumes them.
pub(crate) type ProductBox = Box<dyn Any + Send + Sync>;

/// One stored product and the name of its Rust type (for error messages).
pub(crate) struct StoredProduct {
    pub value: ProductBox,
    pub type_name: &'static str,
}

/// The data of one event in flight: its identity, its position in the job,
/// and one write-once cell per product of the process.
pub(crate) struct EventData {
    pub id: EventId,
    /// Sequence number of the event in the job (0-based, in source order).
    pub index: u64,
    pub products: Box<[OnceLock<StoredProduct>]>,
    pub trigger_results: OnceLock<crate::trigger::TriggerResults>,
    /// Per module: events seen and passed, for modules that process a batch.
    pub step_counts: Box<[OnceLock<(u64, u64)>]>,
}

impl EventData {
    pub fn new(id: EventId, index: u64, n_products: usize, n_modules: usize) -> Self {
        Self {
            id,
            index,
            products: (0..n_products).map(|_| OnceLock::new()).collect(),
            trigger_results: OnceLock::new(),
            step_counts: (0..n_modules).map(|_| OnceLock::new()).collect(),
        }
    }
}

/// A module's view of one event: read the products it declared it consumes,
/// put the products it declared it produces.
///
/// ```
/// use evflow_core::*;
///
/// struct Tracks;
/// impl Transitions for Tracks {}
/// impl Producer for Tracks {
///     fn produce(&self, ev: &Event<'_>) -> ModuleResult {
///         let hits: &Vec<f64> = ev.get("hits")?;
///         ev.put("", hits.len())
///     }
/// }
/// struct Hits;
/// impl Transitions for Hits {}
/// impl Producer for Hits {
///     fn produce(&self, ev: &Event<'_>) -> ModuleResult {
///         ev.put("", vec![1.0_f64; ev.id().event as usize])
///     }
/// }
/// struct AtLeast3;
/// impl Transitions for AtLeast3 {}
/// impl Filter for AtLeast3 {
///     fn filter(&self, ev: &Event<'_>) -> ModuleResult<bool> {
///         Ok(*ev.get::<usize>("tracks")? >= 3)
///     }
/// }
///
/// let mut p = Process::new("tracking");
/// p.set_source(EmptySource::new(5));
/// p.add(ModuleDesc::producer("hits", Hits).produces([""]));
/// p.add(ModuleDesc::producer("tracks", Tracks).consumes(["hits"]).produces([""]));
/// p.add(ModuleDesc::filter("atLeast3", AtLeast3).consumes(["tracks"]));
/// p.path("sel", ["atLeast3"]);
/// let report = run(p, &RunOptions { threads: 2, ..RunOptions::default() }).unwrap();
/// assert_eq!(report.paths[0].passed, 3); // events 3, 4 and 5
/// ```
pub struct Event<'a> {
    pub(crate) data: &'a EventData,
    pub(crate) graph: &'a crate::graph::Graph,
    pub(crate) module: crate::graph::ModuleIdx,
}

impl<'a> Event<'a> {
    pub fn id(&self) -> EventId {
        self.data.id
    }

    /// Position of the event in the job (0-based, in the order read).
    pub fn index(&self) -> u64 {
        self.data.index
    }

    /// Reads the product named `tag` (`label` or `label:instance`), which the
    /// module must have declared in its consumes.
    pub fn get<T: Any>(&self, tag: &str) -> Result<&'a T, crate::error::ModuleError> {
        let (label, instance) = tag.split_once(':').unwrap_or((tag, ""));
        let node = &self.graph.modules[self.module];
        let found = node.consumes.iter().position(|&p| {
            let t = &self.graph.products[p].tag;
            same_name(&t.label, label) && same_name(&t.instance, instance)
        });
        match found {
            Some(i) => self.get_nth(i),
            None => Err(crate::error::ModuleError::msg(format!(
                "module '{}' read product '{tag}', which it did not declare in its consumes",
                node.label
            ))),
        }
    }

    /// Reads the `i`-th product of the module's consumes declaration (fast
    /// path for modules that read many products).
    pub fn get_nth<T: Any>(&self, i: usize) -> Result<&'a T, crate::error::ModuleError> {
        let stored = self.get_nth_stored(i)?;
        let p = self.graph.modules[self.module].consumes[i];
        stored.value.downcast_ref::<T>().ok_or_else(|| {
            crate::error::ModuleError::msg(format!(
                "product '{}' has type {}, not the requested {}",
                self.graph.products[p].tag,
                stored.type_name,
                std::any::type_name::<T>()
            ))
        })
    }

    /// Like [`get_nth`](Self::get_nth) but returns `None` when the product
    /// has another type.
    pub fn try_get_nth<T: Any>(
        &self,
        i: usize,
    ) -> Result<Option<&'a T>, crate::error::ModuleError> {
        Ok(self.get_nth_stored(i)?.value.downcast_ref::<T>())
    }

    /// For a module that processes many events at once (a batch of a
    /// columnar analysis): how many events it saw and how many it let
    /// through. The adaptive ordering of filters then counts events rather
    /// than batches (pass rates and costs per event); the report's path and
    /// step counts stay one per call (a face that processes batches makes
    /// its cut-flows from these counts itself). Set at most once per call.
    pub fn set_filter_counts(&self, seen: u64, passed: u64) {
        let _ = self.data.step_counts[self.module].set((seen, passed.min(seen)));
    }

    /// Number of products the module declared it consumes.
    pub fn consumes_len(&self) -> usize {
        self.graph.modules[self.module].consumes.len()
    }

    /// Puts a product under one of the module's declared instance names.
    pub fn put<T: Any + Send + Sync>(
        &self,
        instance: &str,
        value: T,
    ) -> Result<(), crate::error::ModuleError> {
        let node = &self.graph.modules[self.module];
        let Some(&p) = node
            .produces
            .iter()
            .find(|&&p| same_name(&self.graph.products[p].tag.instance, instance))
        else {
            return Err(crate::error::ModuleError::msg(format!(
                "module '{}' put product instance '{instance}', which it did not declare in its produces",
                node.label
            )));
        };
        self.data.products[p]
            .set(StoredProduct {
                value: Box::new(value),
                type_name: std::any::type_name::<T>(),
            })
            .map_err(|_| {
                crate::error::ModuleError::msg(format!(
                    "product '{}' was put twice",
                    self.graph.products[p].tag
                ))
            })
    }

    fn get_nth_stored(&self, i: usize) -> Result<&'a StoredProduct, crate::error::ModuleError> {
        let node = &self.graph.modules[self.module];
        let Some(&p) = node.consumes.get(i) else {
            return Err(crate::error::ModuleError::msg(format!(
                "module '{}' read consumed product #{i}, but declared only {}",
                node.label,
                node.consumes.len()
            )));
        };
        let data: &'a EventData = self.data;
        data.products[p].get().ok_or_else(|| {
            crate::error::ModuleError::msg(format!(
                "product '{}' is absent: its producer did not put it",
                self.graph.products[p].tag
            ))
        })
    }
}

/// String equality that settles the common cases (different lengths, empty
/// instance names) without a call to `memcmp`: it is on the hot path of
/// every `get` and `put`.
#[inline]
fn same_name(a: &str, b: &str) -> bool {
    a.len() == b.len() && (a.is_empty() || a.as_bytes() == b.as_bytes())
}

impl std::fmt::Debug for Event<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event")
            .field("id", &self.id())
            .field("index", &self.index())
            .finish_non_exhaustive()
    }
}
