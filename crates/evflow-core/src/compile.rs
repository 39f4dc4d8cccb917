//! [`Process::compile`]: checks a process description and builds the
//! static [`Graph`], in named steps: labels, products, module nodes (with
//! the dependency-cycle check), paths, end paths, and where modules may
//! appear. Every error is a [`ConfigError`] naming what is wrong.

use std::collections::HashMap;

use crate::graph::{EndStep, Graph, ModuleNode, PathNode, ProductNode};
use crate::ids::{Concurrency, InputTag, ModuleKind};
use crate::process::{ModuleDesc, PathDesc, Process};

pub use crate::config_error::ConfigError;
use crate::config_error::did_you_mean;

impl Process {
    /// Checks the description and compiles the static scheduling graph.
    pub fn compile(&self) -> Result<Graph, ConfigError> {
        let index = check_labels(self)?;
        let products = collect_products(self)?;
        let (mut nodes, resources) = module_nodes(self, &products)?;
        let (paths, path_names) = path_nodes(self, &index, &mut nodes)?;
        let end_steps = end_path_steps(self, &index, &path_names, &mut nodes)?;
        check_placement(self, &nodes)?;
        Ok(Graph::new(
            self.name.clone(),
            nodes,
            products.nodes,
            paths,
            end_steps,
            resources,
        ))
    }
}

/// Labels are valid and unique, each module's concurrency is consistent;
/// returns the index of each label.
fn check_labels(process: &Process) -> Result<HashMap<&str, usize>, ConfigError> {
    let mut index: HashMap<&str, usize> = HashMap::new();
    for (i, m) in process.modules.iter().enumerate() {
        if m.label.is_empty() || m.label.contains(':') || m.label.trim() != m.label {
            return Err(ConfigError::InvalidLabel(
                m.label.clone(),
                "labels are non-empty, without ':' or surrounding spaces".into(),
            ));
        }
        if m.label == SOURCE_LABEL {
            return Err(ConfigError::InvalidLabel(
                m.label.clone(),
                "the source's products are named 'source' and 'source:instance': choose another \
                 label"
                    .into(),
            ));
        }
        if index.insert(m.label.as_str(), i).is_some() {
            return Err(ConfigError::DuplicateLabel(m.label.clone()));
        }
        check_concurrency(m)?;
    }
    Ok(index)
}

/// The label of the source's products (`source`, `source:instance`).
const SOURCE_LABEL: &str = "source";

/// Every product of the job, and which module (or the source) puts it.
struct Products {
    nodes: Vec<ProductNode>,
    index: HashMap<InputTag, usize>,
    /// Per module: the products it puts.
    of_module: Vec<Vec<usize>>,
}

/// The source's products first (label "source"), then the modules'; no
/// product is put twice.
fn collect_products(process: &Process) -> Result<Products, ConfigError> {
    let mut products: Vec<ProductNode> = Vec::new();
    let mut product_index: HashMap<InputTag, usize> = HashMap::new();
    let source_products = process
        .source
        .as_ref()
        .map(|s| s.produces())
        .unwrap_or_default();
    for instance in source_products {
        let tag = InputTag::new(SOURCE_LABEL, instance.clone());
        if product_index.contains_key(&tag) {
            return Err(ConfigError::DuplicateProduct {
                module: SOURCE_LABEL.into(),
                instance,
            });
        }
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
    Ok(Products {
        nodes: products,
        index: product_index,
        of_module: module_products,
    })
}

/// What the module labelled `label` puts, for an error about a product of
/// that label it does not put (a filter or analyzer named as if it put
/// one, or another instance); empty when no module has that label.
fn declared_by(process: &Process, label: &str) -> String {
    let Some(m) = process.modules.iter().find(|m| m.label == label) else {
        let producers = process.modules.iter().filter(|m| !m.produces.is_empty());
        return did_you_mean(label, producers.map(|m| m.label.as_str()));
    };
    let puts: Vec<String> = m
        .produces
        .iter()
        .map(|i| InputTag::new(m.label.clone(), i.clone()).to_string())
        .collect();
    if puts.is_empty() {
        format!(" (module '{label}' declares no products)")
    } else {
        format!(" (module '{label}' declares {})", puts.join(", "))
    }
}

/// One node per module: what it consumes (every product exists), the
/// modules it waits for, its concurrency limit and resources; fails on a
/// dependency cycle. Returns the nodes and the names of the resources.
fn module_nodes(
    process: &Process,
    products: &Products,
) -> Result<(Vec<ModuleNode>, Vec<String>), ConfigError> {
    let (product_index, module_products) = (&products.index, &products.of_module);
    let products = &products.nodes;
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
                    declared: declared_by(process, &tag.label),
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
    Ok((nodes, resources))
}

/// The paths: known, unique names; each step a known non-output module
/// appearing once; the order constraints among the steps.
fn path_nodes<'p>(
    process: &'p Process,
    index: &HashMap<&str, usize>,
    nodes: &mut [ModuleNode],
) -> Result<(Vec<PathNode>, HashMap<&'p str, usize>), ConfigError> {
    let mut paths: Vec<PathNode> = Vec::new();
    let mut path_names: HashMap<&str, usize> = HashMap::new();
    for p in process.paths.iter().chain(&process.end_paths) {
        if p.name.trim().is_empty() || p.name.trim() != p.name {
            return Err(ConfigError::InvalidPathName(p.name.clone()));
        }
    }
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
                    hint: did_you_mean(label, process.modules.iter().map(|m| m.label.as_str())),
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
            // The steps of a reorderable path commute: an analyzer among
            // them would see other events under each order.
            if p.reorderable && nodes[m].kind != ModuleKind::Filter {
                let kind = nodes[m].kind.to_string();
                let article = if kind.starts_with(['a', 'e', 'i', 'o', 'u']) {
                    "an"
                } else {
                    "a"
                };
                return Err(ConfigError::InvalidModule {
                    module: label.clone(),
                    reason: format!(
                        "is {article} {kind}, but reorderable path '{}' may hold only filters",
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
        let precedence = path_precedence(p, &steps, nodes, index)?;
        paths.push(PathNode {
            name: p.name.clone(),
            steps,
            reorderable: p.reorderable,
            precedence,
        });
    }
    Ok((paths, path_names))
}

/// The end paths: analyzers and outputs only, each on no other path, and
/// the paths whose accepted events each one selects.
fn end_path_steps(
    process: &Process,
    index: &HashMap<&str, usize>,
    path_names: &HashMap<&str, usize>,
    nodes: &mut [ModuleNode],
) -> Result<Vec<EndStep>, ConfigError> {
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
                    hint: did_you_mean(label, process.modules.iter().map(|m| m.label.as_str())),
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
                if process.end_paths.iter().any(|e| &e.name == name) {
                    return Err(ConfigError::InvalidModule {
                        module: label.clone(),
                        reason: format!(
                            "selects events of '{name}', an end path: only paths (of filters) \
                             accept or reject events"
                        ),
                    });
                }
                let Some(&p) = path_names.get(name.as_str()) else {
                    return Err(ConfigError::UnknownSelectPath {
                        module: label.clone(),
                        path: name.clone(),
                        hint: did_you_mean(name, process.paths.iter().map(|p| p.name.as_str())),
                    });
                };
                select.push(p);
            }
            end_steps.push(EndStep { module: m, select });
        }
    }
    Ok(end_steps)
}

/// Modules that select events by path, and outputs, are on an end path.
fn check_placement(process: &Process, nodes: &[ModuleNode]) -> Result<(), ConfigError> {
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
    Ok(())
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
            return Err(ConfigError::PathCycle {
                path: path.name.clone(),
                cycle: vec![later.clone(), later.clone()],
                data: Vec::new(),
            });
        }
        edges.push((a, b));
    }
    let declared = edges.clone();
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
        let cycle = constraint_cycle(&edges, &indegree);
        let label = |i: usize| nodes[steps[i]].label.clone();
        let data = cycle
            .windows(2)
            .filter(|pair| !declared.contains(&(pair[0], pair[1])))
            .map(|pair| (label(pair[0]), label(pair[1])))
            .collect();
        return Err(ConfigError::PathCycle {
            path: path.name.clone(),
            cycle: cycle.into_iter().map(label).collect(),
            data,
        });
    }
    Ok(edges)
}

/// One cycle among the (earlier, later) `edges` of the steps left with an
/// `indegree > 0` once every step that could be placed was: each such step
/// has such a predecessor, so walking back from one repeats a step. The
/// cycle in running order, from its first written step, closed by it.
fn constraint_cycle(edges: &[(usize, usize)], indegree: &[usize]) -> Vec<usize> {
    let blocked = |i: usize| indegree[i] > 0;
    let start = (0..indegree.len())
        .find(|&i| blocked(i))
        .expect("a blocked step");
    let mut walk = vec![start];
    let mut seen = vec![usize::MAX; indegree.len()];
    seen[start] = 0;
    let mut at = start;
    loop {
        let &(before, _) = edges
            .iter()
            .find(|&&(a, b)| b == at && blocked(a))
            .expect("a blocked step has a blocked predecessor");
        if seen[before] != usize::MAX {
            let mut cycle = walk.split_off(seen[before]);
            cycle.reverse();
            let first = (0..cycle.len()).min_by_key(|&i| cycle[i]).unwrap_or(0);
            cycle.rotate_left(first);
            cycle.push(cycle[0]);
            return cycle;
        }
        seen[before] = walk.len();
        walk.push(before);
        at = before;
    }
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

/// Returns one dependency cycle (as module indices, in running order:
/// each consumes a product of the one before) if the graph has one.
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
                        // dep, its consumer on the stack, ..., dep: running order.
                        cycle.push(dep);
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
