//! The in-memory process description: modules, paths and end paths, built by
//! code, by the configuration readers or by the Python API, and checked by
//! [`Process::compile`] before any event runs.

use std::sync::Arc;

use crate::ids::{Concurrency, EventId, InputTag, ModuleKind};
use crate::module::{Analyzer, Filter, ModuleImpl, Output, Producer};
use crate::source::Source;

/// Expected running time in seconds of a module on the event with the given
/// job index. Synthetic modules provide it; the simulator uses it.
pub type CostModel = Arc<dyn Fn(u64) -> f64 + Send + Sync>;

/// Decision of a filter on an event, for tools that predict without running
/// modules. Synthetic filters provide it.
pub type DecisionModel = Arc<dyn Fn(EventId) -> bool + Send + Sync>;

/// Describes one module: its label, its instance(s), what it consumes and
/// produces, and how thread-safe it is.
pub struct ModuleDesc {
    pub(crate) label: String,
    pub(crate) kind: ModuleKind,
    pub(crate) instances: Vec<ModuleImpl>,
    pub(crate) concurrency: Concurrency,
    pub(crate) consumes: Vec<InputTag>,
    pub(crate) produces: Vec<String>,
    pub(crate) external_work: bool,
    pub(crate) select_paths: Vec<String>,
    pub(crate) cost: Option<CostModel>,
    pub(crate) decision: Option<DecisionModel>,
    pub(crate) ranges: u32,
}

impl ModuleDesc {
    fn with_impl(label: impl Into<String>, module: ModuleImpl) -> Self {
        Self {
            label: label.into(),
            kind: module.kind(),
            instances: vec![module],
            concurrency: Concurrency::Shared,
            consumes: Vec::new(),
            produces: Vec::new(),
            external_work: false,
            select_paths: Vec::new(),
            cost: None,
            decision: None,
            ranges: 1,
        }
    }
    pub fn producer(label: impl Into<String>, module: impl Producer + 'static) -> Self {
        Self::with_impl(label, ModuleImpl::Producer(Box::new(module)))
    }
    pub fn filter(label: impl Into<String>, module: impl Filter + 'static) -> Self {
        Self::with_impl(label, ModuleImpl::Filter(Box::new(module)))
    }
    pub fn analyzer(label: impl Into<String>, module: impl Analyzer + 'static) -> Self {
        Self::with_impl(label, ModuleImpl::Analyzer(Box::new(module)))
    }
    pub fn output(label: impl Into<String>, module: impl Output + 'static) -> Self {
        Self::with_impl(label, ModuleImpl::Output(Box::new(module)))
    }
    /// A module of any kind from an already boxed instance.
    pub fn from_impl(label: impl Into<String>, module: ModuleImpl) -> Self {
        Self::with_impl(label, module)
    }

    /// `n` serial instances made by `make`; the engine hands a free one to
    /// each event ([`Concurrency::Cloned`]).
    pub fn cloned(label: impl Into<String>, n: u32, mut make: impl FnMut() -> ModuleImpl) -> Self {
        let mut desc = Self::with_impl(label, make());
        for _ in 1..n {
            desc.instances.push(make());
        }
        desc.concurrency = Concurrency::Cloned(n);
        desc.tell_concurrency();
        desc
    }

    /// Products this module reads, as `label` or `label:instance`.
    pub fn consumes<T: Into<InputTag>>(mut self, tags: impl IntoIterator<Item = T>) -> Self {
        self.consumes.extend(tags.into_iter().map(Into::into));
        self
    }
    /// Instance names of the products this module puts (`""` for the
    /// unnamed one).
    pub fn produces<S: Into<String>>(mut self, instances: impl IntoIterator<Item = S>) -> Self {
        self.produces.extend(instances.into_iter().map(Into::into));
        self
    }
    pub fn concurrency(mut self, concurrency: Concurrency) -> Self {
        self.concurrency = concurrency;
        self.tell_concurrency();
        self
    }
    /// Hands the concurrency to each producer instance
    /// ([`Producer::set_concurrency`]).
    fn tell_concurrency(&self) {
        for instance in &self.instances {
            if let ModuleImpl::Producer(p) = instance {
                p.set_concurrency(&self.concurrency);
            }
        }
    }
    /// Declares that the producer has an asynchronous `acquire` step.
    pub fn external_work(mut self, yes: bool) -> Self {
        self.external_work = yes;
        self
    }
    /// For outputs and analyzers on end paths: only events accepted by at
    /// least one of these paths reach the module (all events when empty).
    pub fn select_events<S: Into<String>>(mut self, paths: impl IntoIterator<Item = S>) -> Self {
        self.select_paths.extend(paths.into_iter().map(Into::into));
        self
    }
    /// Expected time per event, used by the simulated clock.
    pub fn cost_model(mut self, cost: CostModel) -> Self {
        self.cost = Some(cost);
        self
    }

    /// The module's call runs its work as a parallel-for of up to `ranges`
    /// ranges ([`crate::parallel_for`]) that the calling thread and idle
    /// cores take: the simulated clock shortens the call by the cores idle
    /// when it starts. 1 (the default): one thread's work.
    pub fn parallel_ranges(mut self, ranges: u32) -> Self {
        self.ranges = ranges.max(1);
        self
    }

    /// Replaces the cost model in place.
    pub fn set_cost_model(&mut self, cost: CostModel) {
        self.cost = Some(cost);
    }

    /// How a filter decides, for the simulated clock.
    pub fn decision_model(mut self, decision: DecisionModel) -> Self {
        self.decision = Some(decision);
        self
    }
    pub fn cost(&self) -> Option<&CostModel> {
        self.cost.as_ref()
    }
    pub fn decision(&self) -> Option<&DecisionModel> {
        self.decision.as_ref()
    }
    pub fn concurrency_kind(&self) -> &Concurrency {
        &self.concurrency
    }

    pub fn label(&self) -> &str {
        &self.label
    }
    pub fn kind(&self) -> ModuleKind {
        self.kind
    }
}

/// A named, ordered list of module labels.
///
/// A *reorderable* path declares that its filters commute: the engine may
/// evaluate them in any order that respects `after` constraints (and the
/// constraints implied by data: a step consuming, directly or through
/// producers, a product of another step of the path runs after it). The
/// events a path accepts never depend on the order; only the work does.
#[derive(Clone, Debug, Default)]
pub struct PathDesc {
    pub name: String,
    pub modules: Vec<String>,
    pub reorderable: bool,
    /// `(module, must_run_after)` pairs of labels on this path.
    pub after: Vec<(String, String)>,
}

impl PathDesc {
    pub fn new<S: Into<String>>(
        name: impl Into<String>,
        modules: impl IntoIterator<Item = S>,
    ) -> Self {
        Self {
            name: name.into(),
            modules: modules.into_iter().map(Into::into).collect(),
            ..Self::default()
        }
    }
    pub fn reorderable(mut self, yes: bool) -> Self {
        self.reorderable = yes;
        self
    }
    /// Declares that `module` must run after `before` on this path.
    pub fn after(mut self, module: impl Into<String>, before: impl Into<String>) -> Self {
        self.after.push((module.into(), before.into()));
        self
    }
}

/// A whole job: the source, the modules, the paths and the end paths.
///
/// ```
/// use evflow_core::{EmptySource, Event, Filter, ModuleDesc, ModuleResult, Process, Transitions};
///
/// struct Even;
/// impl Transitions for Even {}
/// impl Filter for Even {
///     fn filter(&self, ev: &Event<'_>) -> ModuleResult<bool> {
///         Ok(ev.id().event % 2 == 0)
///     }
/// }
///
/// let mut process = Process::new("demo");
/// process.set_source(EmptySource::new(10));
/// process.add(ModuleDesc::filter("even", Even));
/// process.path("evens", ["even"]);
/// let report = evflow_core::run(process, &evflow_core::RunOptions::default()).unwrap();
/// assert_eq!(report.paths[0].passed, 5);
/// ```
pub struct Process {
    pub(crate) name: String,
    pub(crate) modules: Vec<ModuleDesc>,
    pub(crate) paths: Vec<PathDesc>,
    pub(crate) end_paths: Vec<PathDesc>,
    pub(crate) source: Option<Box<dyn Source>>,
}

impl Process {
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            modules: Vec::new(),
            paths: Vec::new(),
            end_paths: Vec::new(),
            source: None,
        }
    }
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn set_source(&mut self, source: impl Source + 'static) -> &mut Self {
        self.source = Some(Box::new(source));
        self
    }
    pub fn set_boxed_source(&mut self, source: Box<dyn Source>) -> &mut Self {
        self.source = Some(source);
        self
    }
    pub fn add(&mut self, module: ModuleDesc) -> &mut Self {
        self.modules.push(module);
        self
    }
    pub fn path<S: Into<String>>(
        &mut self,
        name: impl Into<String>,
        modules: impl IntoIterator<Item = S>,
    ) -> &mut Self {
        self.paths.push(PathDesc::new(name, modules));
        self
    }
    /// Adds a path described in full (reorderable, with constraints).
    pub fn add_path(&mut self, path: PathDesc) -> &mut Self {
        self.paths.push(path);
        self
    }
    pub fn end_path<S: Into<String>>(
        &mut self,
        name: impl Into<String>,
        modules: impl IntoIterator<Item = S>,
    ) -> &mut Self {
        self.end_paths.push(PathDesc::new(name, modules));
        self
    }
    pub fn modules(&self) -> &[ModuleDesc] {
        &self.modules
    }
    pub fn modules_mut(&mut self) -> &mut [ModuleDesc] {
        &mut self.modules
    }
    pub fn paths(&self) -> &[PathDesc] {
        &self.paths
    }
    pub fn end_paths(&self) -> &[PathDesc] {
        &self.end_paths
    }
    /// The cost models of the modules, in module order, for tools that predict.
    pub fn cost_models(&self) -> Vec<Option<CostModel>> {
        self.modules.iter().map(|m| m.cost.clone()).collect()
    }
    /// The parallel-for ranges of the modules' calls, in module order (1:
    /// none; [`ModuleDesc::parallel_ranges`]).
    pub fn parallel_ranges(&self) -> Vec<u32> {
        self.modules.iter().map(|m| m.ranges).collect()
    }
    /// The decision models of the modules, in module order.
    pub fn decision_models(&self) -> Vec<Option<DecisionModel>> {
        self.modules.iter().map(|m| m.decision.clone()).collect()
    }
    /// Takes the source out (tools that drive the decision logic themselves).
    pub fn take_source(&mut self) -> Option<Box<dyn Source>> {
        self.source.take()
    }
}

impl std::fmt::Debug for ModuleDesc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModuleDesc")
            .field("label", &self.label)
            .field("kind", &self.kind)
            .field("consumes", &self.consumes)
            .field("produces", &self.produces)
            .field("concurrency", &self.concurrency)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Process {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Process")
            .field("name", &self.name)
            .field("modules", &self.modules)
            .field("paths", &self.paths)
            .field("end_paths", &self.end_paths)
            .field("source", &self.source.as_ref().map(|s| s.describe()))
            .finish()
    }
}
