//! The compiled, immutable scheduling graph of a process: plain data shared
//! by every executor (threaded, sequential, simulated).

use crate::ids::{Concurrency, InputTag, ModuleKind};

pub type ModuleIdx = usize;
pub type ProductIdx = usize;
pub type PathIdx = usize;

/// One module as the scheduler sees it.
#[derive(Clone, Debug)]
pub struct ModuleNode {
    pub label: String,
    pub kind: ModuleKind,
    pub concurrency: Concurrency,
    /// Modules whose products this one consumes (deduplicated).
    pub prereqs: Vec<ModuleIdx>,
    /// Modules that consume a product of this one.
    pub consumers: Vec<ModuleIdx>,
    /// Products read, in declaration order.
    pub consumes: Vec<ProductIdx>,
    /// Products put, in declaration order.
    pub produces: Vec<ProductIdx>,
    pub external_work: bool,
    /// Exclusive resources this module holds while it runs.
    pub resources: Vec<usize>,
    /// How many events may run this module at once (`u32::MAX`: unlimited).
    pub limit: u32,
    pub instances: u32,
    /// Paths this module is a step of.
    pub paths: Vec<PathIdx>,
    pub end_path: bool,
}

impl ModuleNode {
    /// True when the resource arbiter must admit each execution.
    pub fn restricted(&self) -> bool {
        self.limit != u32::MAX || !self.resources.is_empty()
    }
}

#[derive(Clone, Debug)]
pub struct ProductNode {
    pub tag: InputTag,
    /// `None` for products the source puts.
    pub producer: Option<ModuleIdx>,
}

#[derive(Clone, Debug)]
pub struct PathNode {
    pub name: String,
    /// The steps in written order.
    pub steps: Vec<ModuleIdx>,
    pub reorderable: bool,
    /// `(earlier, later)` positions in `steps` that every order must keep.
    pub precedence: Vec<(usize, usize)>,
}

impl PathNode {
    /// Position of `module` in the written order.
    pub fn position(&self, module: ModuleIdx) -> Option<usize> {
        self.steps.iter().position(|&m| m == module)
    }
}

/// A module of an end path and the paths whose acceptance selects events
/// for it (empty: every event).
#[derive(Clone, Debug)]
pub struct EndStep {
    pub module: ModuleIdx,
    pub select: Vec<PathIdx>,
}

/// The static structure every scheduling decision is taken on.
#[derive(Clone, Debug)]
pub struct Graph {
    pub process_name: String,
    pub modules: Vec<ModuleNode>,
    pub products: Vec<ProductNode>,
    pub paths: Vec<PathNode>,
    pub end_steps: Vec<EndStep>,
    pub resources: Vec<String>,
    /// Modules that any path or end path can need, directly or through
    /// products: the others never run.
    pub reachable: Vec<bool>,
}

impl Graph {
    pub(crate) fn new(
        process_name: String,
        modules: Vec<ModuleNode>,
        products: Vec<ProductNode>,
        paths: Vec<PathNode>,
        end_steps: Vec<EndStep>,
        resources: Vec<String>,
    ) -> Self {
        let mut reachable = vec![false; modules.len()];
        let mut stack: Vec<ModuleIdx> = paths
            .iter()
            .flat_map(|p| p.steps.iter().copied())
            .chain(end_steps.iter().map(|e| e.module))
            .collect();
        while let Some(m) = stack.pop() {
            if !reachable[m] {
                reachable[m] = true;
                stack.extend(modules[m].prereqs.iter().copied());
            }
        }
        Self {
            process_name,
            modules,
            products,
            paths,
            end_steps,
            resources,
            reachable,
        }
    }

    pub fn module_index(&self, label: &str) -> Option<ModuleIdx> {
        self.modules.iter().position(|m| m.label == label)
    }

    pub fn path_index(&self, name: &str) -> Option<PathIdx> {
        self.paths.iter().position(|p| p.name == name)
    }
}
