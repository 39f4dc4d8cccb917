//! The in-memory process description: modules, paths and end paths, built by
//! code, by the configuration readers or by the Python API, and checked by
//! [`Process::compile`] before any event runs.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use crate::graph::{EndStep, Graph, ModuleNode, PathNode, ProductNode};
use crate::module::{Analyzer, Concurrency, Filter, ModuleImpl, ModuleKind, Output, Producer};
use crate::source::Source;

/// Names a product: the label of the module that puts it and an optional
/// instance name, written `label` or `label:instance`.
///
/// ```
/// use evflow_core::InputTag;
/// let tag = InputTag::parse("muons:tight");
/// assert_eq!((tag.label.as_str(), tag.instance.as_str()), ("muons", "tight"));
/// assert_eq!(InputTag::parse("jets").to_string(), "jets");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InputTag {
    pub label: String,
    pub instance: String,
}

impl InputTag {
    pub fn new(label: impl Into<String>, instance: impl Into<String>) -> Self {
        Self {
            label: label.into(),
            instance: instance.into(),
        }
    }
    pub fn parse(text: &str) -> Self {
        match text.split_once(':') {
            Some((label, instance)) => Self::new(label, instance),
            None => Self::new(text, ""),
        }
    }
}

impl From<&str> for InputTag {
    fn from(text: &str) -> Self {
        Self::parse(text)
    }
}

impl From<String> for InputTag {
    fn from(text: String) -> Self {
        Self::parse(&text)
    }
}

impl fmt::Display for InputTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.instance.is_empty() {
            f.write_str(&self.label)
        } else {
            write!(f, "{}:{}", self.label, self.instance)
        }
    }
}

/// Expected running time in seconds of a module on the event with the given
/// job index. Synthetic modules provide it; the simulator uses it.
pub type CostModel = Arc<dyn Fn(u64) -> f64 + Send + Sync>;

/// Decision of a filter on an event, for tools that predict without running
/// modules. Synthetic filters provide it.
pub type DecisionModel = Arc<dyn Fn(crate::EventId) -> bool + Send + Sync>;

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
        self
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
    /// The decision models of the modules, in module order.
    pub fn decision_models(&self) -> Vec<Option<DecisionModel>> {
        self.modules.iter().map(|m| m.decision.clone()).collect()
    }
    /// Takes the source out (tools that drive the decision logic themselves).
    pub fn take_source(&mut self) -> Option<Box<dyn Source>> {
        self.source.take()
    }

    /// Checks the description and compiles the static scheduling graph.
    pub fn compile(&self) -> Result<Graph, ConfigError> {
        compile(self)
    }
}

/// A configuration error, found before any event runs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("module label '{0}' is used more than once")]
    DuplicateLabel(String),
    #[error("module label '{0}' is invalid: {1}")]
    InvalidLabel(String, String),
    #[error("module '{module}' consumes '{product}', which no module produces")]
    MissingProduct { module: String, product: String },
    #[error("module '{module}' declares product instance '{instance}' twice")]
    DuplicateProduct { module: String, instance: String },
    #[error("dependency cycle among modules: {}", .0.join(" -> "))]
    Cycle(Vec<String>),
    #[error("{kind} '{path}' names unknown module '{module}'")]
    UnknownPathModule {
        kind: &'static str,
        path: String,
        module: String,
    },
    #[error("path name '{0}' is used more than once")]
    DuplicatePath(String),
    #[error("module '{module}' selects events of unknown path '{path}'")]
    UnknownSelectPath { module: String, path: String },
    #[error("module '{module}': {reason}")]
    InvalidModule { module: String, reason: String },
    #[error("invalid concurrency for module '{module}': {reason}")]
    InvalidConcurrency { module: String, reason: String },
    #[error("the process has no source")]
    NoSource,
}

fn compile(process: &Process) -> Result<Graph, ConfigError> {
    let mut index: HashMap<&str, usize> = HashMap::new();
    for (i, m) in process.modules.iter().enumerate() {
        if m.label.is_empty() || m.label.contains(':') || m.label.trim() != m.label {
            return Err(ConfigError::InvalidLabel(
                m.label.clone(),
                "labels are non-empty, without ':' or surrounding spaces".into(),
            ));
        }
        if index.insert(m.label.as_str(), i).is_some() {
            return Err(ConfigError::DuplicateLabel(m.label.clone()));
        }
        check_concurrency(m)?;
    }

    // Products: those of the source first (label "source"), then the modules'.
    let mut products: Vec<ProductNode> = Vec::new();
    let mut product_index: HashMap<InputTag, usize> = HashMap::new();
    let source_products = process
        .source
        .as_ref()
        .map(|s| s.produces())
        .unwrap_or_default();
    for instance in source_products {
        let tag = InputTag::new("source", instance);
        product_index.insert(tag.clone(), products.len());
        products.push(ProductNode {
            tag,
            producer: None,
        });
    }
    let mut module_products: Vec<Vec<usize>> = Vec::with_capacity(process.modules.len());
    for (i, m) in process.modules.iter().enumerate() {
        let mut mine = Vec::new();
        for instance in &m.produces {
            let tag = InputTag::new(m.label.clone(), instance.clone());
            if product_index.contains_key(&tag) {
                return Err(ConfigError::DuplicateProduct {
                    module: m.label.clone(),
                    instance: instance.clone(),
                });
            }
            product_index.insert(tag.clone(), products.len());
            mine.push(products.len());
            products.push(ProductNode {
                tag,
                producer: Some(i),
            });
        }
        module_products.push(mine);
    }

    let mut resources: Vec<String> = Vec::new();
    let mut nodes: Vec<ModuleNode> = Vec::with_capacity(process.modules.len());
    for (i, m) in process.modules.iter().enumerate() {
        let mut consumes = Vec::new();
        let mut prereqs = Vec::new();
        for tag in &m.consumes {
            let Some(&p) = product_index.get(tag) else {
                return Err(ConfigError::MissingProduct {
                    module: m.label.clone(),
                    product: tag.to_string(),
                });
            };
            consumes.push(p);
            if let Some(producer) = products[p].producer {
                if producer == i {
                    return Err(ConfigError::Cycle(vec![m.label.clone(), m.label.clone()]));
                }
                if !prereqs.contains(&producer) {
                    prereqs.push(producer);
                }
            }
        }
        let (limit, module_resources) = match &m.concurrency {
            Concurrency::Shared => (u32::MAX, Vec::new()),
            Concurrency::Serial => (1, Vec::new()),
            Concurrency::Cloned(n) => (*n, Vec::new()),
            Concurrency::Exclusive(names) => {
                let mut ids = Vec::new();
                for name in names {
                    let id = match resources.iter().position(|r| r == name) {
                        Some(id) => id,
                        None => {
                            resources.push(name.clone());
                            resources.len() - 1
                        }
                    };
                    if !ids.contains(&id) {
                        ids.push(id);
                    }
                }
                (1, ids)
            }
        };
        nodes.push(ModuleNode {
            label: m.label.clone(),
            kind: m.kind,
            concurrency: m.concurrency.clone(),
            prereqs,
            consumers: Vec::new(),
            consumes,
            produces: module_products[i].clone(),
            external_work: m.external_work,
            resources: module_resources,
            limit,
            instances: m.instances.len() as u32,
            paths: Vec::new(),
            end_path: false,
        });
    }
    for i in 0..nodes.len() {
        for j in 0..nodes[i].prereqs.len() {
            let p = nodes[i].prereqs[j];
            nodes[p].consumers.push(i);
        }
    }
    if let Some(cycle) = find_cycle(&nodes) {
        return Err(ConfigError::Cycle(
            cycle.into_iter().map(|i| nodes[i].label.clone()).collect(),
        ));
    }

    let mut paths: Vec<PathNode> = Vec::new();
    let mut path_names: HashMap<&str, usize> = HashMap::new();
    for p in &process.paths {
        if path_names.insert(p.name.as_str(), paths.len()).is_some() {
            return Err(ConfigError::DuplicatePath(p.name.clone()));
        }
        let mut steps = Vec::new();
        for label in &p.modules {
            let Some(&m) = index.get(label.as_str()) else {
                return Err(ConfigError::UnknownPathModule {
                    kind: "path",
                    path: p.name.clone(),
                    module: label.clone(),
                });
            };
            if nodes[m].kind == ModuleKind::Output {
                return Err(ConfigError::InvalidModule {
                    module: label.clone(),
                    reason: format!(
                        "output modules belong on end paths, not on path '{}'",
                        p.name
                    ),
                });
            }
            if steps.contains(&m) {
                return Err(ConfigError::InvalidModule {
                    module: label.clone(),
                    reason: format!("appears twice on path '{}'", p.name),
                });
            }
            steps.push(m);
            if !nodes[m].paths.contains(&paths.len()) {
                nodes[m].paths.push(paths.len());
            }
        }
        let precedence = path_precedence(p, &steps, &nodes, &index)?;
        paths.push(PathNode {
            name: p.name.clone(),
            steps,
            reorderable: p.reorderable,
            precedence,
        });
    }
    let mut end_steps: Vec<EndStep> = Vec::new();
    let mut end_names: Vec<&str> = Vec::new();
    for e in &process.end_paths {
        if path_names.contains_key(e.name.as_str()) || end_names.contains(&e.name.as_str()) {
            return Err(ConfigError::DuplicatePath(e.name.clone()));
        }
        end_names.push(e.name.as_str());
        for label in &e.modules {
            let Some(&m) = index.get(label.as_str()) else {
                return Err(ConfigError::UnknownPathModule {
                    kind: "end path",
                    path: e.name.clone(),
                    module: label.clone(),
                });
            };
            if !matches!(nodes[m].kind, ModuleKind::Analyzer | ModuleKind::Output) {
                return Err(ConfigError::InvalidModule {
                    module: label.clone(),
                    reason: format!(
                        "end path '{}' may hold only analyzers and outputs, this is a {}",
                        e.name, nodes[m].kind
                    ),
                });
            }
            if nodes[m].end_path || !nodes[m].paths.is_empty() {
                return Err(ConfigError::InvalidModule {
                    module: label.clone(),
                    reason: "a module on an end path may appear on no other path".into(),
                });
            }
            nodes[m].end_path = true;
            let mut select = Vec::new();
            for name in &process.modules[m].select_paths {
                let Some(&p) = path_names.get(name.as_str()) else {
                    return Err(ConfigError::UnknownSelectPath {
                        module: label.clone(),
                        path: name.clone(),
                    });
                };
                select.push(p);
            }
            end_steps.push(EndStep { module: m, select });
        }
    }
    for (i, m) in process.modules.iter().enumerate() {
        if !m.select_paths.is_empty() && !nodes[i].end_path {
            return Err(ConfigError::InvalidModule {
                module: m.label.clone(),
                reason: "selects events by path but is on no end path".into(),
            });
        }
        if m.kind == ModuleKind::Output && !nodes[i].end_path {
            return Err(ConfigError::InvalidModule {
                module: m.label.clone(),
                reason: "output module is on no end path".into(),
            });
        }
    }
    Ok(Graph::new(
        process.name.clone(),
        nodes,
        products,
        paths,
        end_steps,
        resources,
    ))
}

/// The order constraints among the steps of a path, as (earlier, later)
/// step positions: explicit `after` declarations plus data dependencies.
fn path_precedence(
    path: &PathDesc,
    steps: &[usize],
    nodes: &[ModuleNode],
    index: &HashMap<&str, usize>,
) -> Result<Vec<(usize, usize)>, ConfigError> {
    let position = |label: &str| -> Result<usize, ConfigError> {
        index
            .get(label)
            .and_then(|m| steps.iter().position(|s| s == m))
            .ok_or_else(|| ConfigError::InvalidModule {
                module: label.to_string(),
                reason: format!(
                    "is named in an 'after' constraint of path '{}' but is not on that path",
                    path.name
                ),
            })
    };
    let mut edges = Vec::new();
    for (later, earlier) in &path.after {
        let (a, b) = (position(earlier)?, position(later)?);
        if a == b {
            return Err(ConfigError::Cycle(vec![later.clone(), later.clone()]));
        }
        edges.push((a, b));
    }
    // Data: step b needs step a if a's module is among b's transitive prerequisites.
    for (b, &mb) in steps.iter().enumerate() {
        let mut seen = vec![false; nodes.len()];
        let mut stack = nodes[mb].prereqs.clone();
        while let Some(m) = stack.pop() {
            if std::mem::replace(&mut seen[m], true) {
                continue;
            }
            if let Some(a) = steps.iter().position(|&s| s == m) {
                edges.push((a, b));
            }
            stack.extend(nodes[m].prereqs.iter().copied());
        }
    }
    edges.sort_unstable();
    edges.dedup();
    if !path.reorderable {
        // The written order must already respect every constraint.
        if let Some(&(a, b)) = edges.iter().find(|(a, b)| a > b) {
            return Err(ConfigError::InvalidModule {
                module: nodes[steps[b]].label.clone(),
                reason: format!(
                    "must run after '{}' on path '{}', but is written before it",
                    nodes[steps[a]].label, path.name
                ),
            });
        }
    }
    // A cycle among the constraints makes every order invalid.
    let n = steps.len();
    let mut indegree = vec![0usize; n];
    for &(_, b) in &edges {
        indegree[b] += 1;
    }
    let mut ready: Vec<usize> = (0..n).filter(|&i| indegree[i] == 0).collect();
    let mut placed = 0;
    while let Some(i) = ready.pop() {
        placed += 1;
        for &(a, b) in &edges {
            if a == i {
                indegree[b] -= 1;
                if indegree[b] == 0 {
                    ready.push(b);
                }
            }
        }
    }
    if placed < n {
        let cyclic: Vec<String> = (0..n)
            .filter(|&i| indegree[i] > 0)
            .map(|i| nodes[steps[i]].label.clone())
            .collect();
        return Err(ConfigError::Cycle(cyclic));
    }
    Ok(edges)
}

fn check_concurrency(m: &ModuleDesc) -> Result<(), ConfigError> {
    if matches!(m.kind, ModuleKind::Analyzer | ModuleKind::Output) && !m.produces.is_empty() {
        return Err(ConfigError::InvalidModule {
            module: m.label.clone(),
            reason: format!("a {} cannot put products; make it a producer", m.kind),
        });
    }
    let bad = |reason: &str| {
        Err(ConfigError::InvalidConcurrency {
            module: m.label.clone(),
            reason: reason.into(),
        })
    };
    match &m.concurrency {
        Concurrency::Cloned(0) => bad("cloned(n) needs n >= 1"),
        Concurrency::Cloned(n) if *n as usize != m.instances.len() => bad(&format!(
            "cloned({n}) needs {n} instances, {} given (use ModuleDesc::cloned)",
            m.instances.len()
        )),
        Concurrency::Exclusive(r) if r.is_empty() => {
            bad("exclusive needs at least one resource name")
        }
        Concurrency::Exclusive(r) if r.iter().any(|n| n.trim().is_empty()) => {
            bad("resource names must not be empty")
        }
        Concurrency::Shared | Concurrency::Serial | Concurrency::Exclusive(_)
            if m.instances.len() != 1 =>
        {
            bad("only cloned modules have several instances")
        }
        _ if m.external_work && m.kind != ModuleKind::Producer => {
            bad("only producers can declare external work")
        }
        _ => Ok(()),
    }
}

/// Returns one dependency cycle (as module indices) if the graph has one.
fn find_cycle(nodes: &[ModuleNode]) -> Option<Vec<usize>> {
    // Iterative depth-first search with colours: 0 new, 1 on stack, 2 done.
    let mut colour = vec![0u8; nodes.len()];
    let mut parent = vec![usize::MAX; nodes.len()];
    for start in 0..nodes.len() {
        if colour[start] != 0 {
            continue;
        }
        let mut stack = vec![(start, 0usize)];
        colour[start] = 1;
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            if *next < nodes[node].prereqs.len() {
                let dep = nodes[node].prereqs[*next];
                *next += 1;
                match colour[dep] {
                    0 => {
                        colour[dep] = 1;
                        parent[dep] = node;
                        stack.push((dep, 0));
                    }
                    1 => {
                        let mut cycle = vec![dep];
                        let mut at = node;
                        while at != dep {
                            cycle.push(at);
                            at = parent[at];
                        }
                        cycle.push(dep);
                        cycle.reverse();
                        return Some(cycle);
                    }
                    _ => {}
                }
            } else {
                colour[node] = 2;
                stack.pop();
            }
        }
    }
    None
}
