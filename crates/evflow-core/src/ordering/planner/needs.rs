//! Which producers each step of a path needs: those only it needs (its
//! cost includes theirs), those several steps of the path need (charged
//! to the first of them to run, `model::SharedCost`) and those also needed
//! outside the path (charged to the first step that needs them where
//! nothing outside ran them, or, when something outside runs them on every
//! event, to no step).

use crate::graph::{Graph, ModuleIdx, PathIdx};
use crate::ids::ModuleKind;

/// The path steps and end-path modules: what makes producers run.
fn roots(graph: &Graph) -> Vec<ModuleIdx> {
    let mut roots: Vec<ModuleIdx> = graph
        .paths
        .iter()
        .flat_map(|p| p.steps.iter().copied())
        .chain(graph.end_steps.iter().map(|e| e.module))
        .collect();
    roots.sort_unstable();
    roots.dedup();
    roots
}

/// The modules `root` needs, directly or through products.
fn needed_by(graph: &Graph, root: ModuleIdx, seen: &mut [bool]) -> Vec<ModuleIdx> {
    seen.fill(false);
    let mut out = Vec::new();
    let mut stack = graph.modules[root].prereqs.clone();
    while let Some(m) = stack.pop() {
        if std::mem::replace(&mut seen[m], true) {
            continue;
        }
        out.push(m);
        stack.extend(graph.modules[m].prereqs.iter().copied());
    }
    out
}

/// For each module: the one path step or end-path module that needs it
/// (directly or through products), when exactly one does.
pub(super) fn private_owners(graph: &Graph) -> Vec<Option<ModuleIdx>> {
    let n = graph.modules.len();
    let mut owner: Vec<Option<ModuleIdx>> = vec![None; n];
    let mut shared = vec![false; n];
    let roots = roots(graph);
    let mut seen = vec![false; n];
    for &root in &roots {
        for m in needed_by(graph, root, &mut seen) {
            match owner[m] {
                None if !shared[m] => owner[m] = Some(root),
                Some(o) if o != root => {
                    owner[m] = None;
                    shared[m] = true;
                }
                _ => {}
            }
        }
    }
    // A module that is itself a root is not a private producer of another.
    for &root in &roots {
        owner[root] = None;
    }
    owner
}

/// Per path of `paths` (its steps, at most 64): the producers that two or
/// more of its steps need and nothing outside it does (no step of another
/// path, no end-path module), with the steps that need them (bit set of
/// positions). Such a producer runs on an event with the first of them,
/// whatever the other paths do; one needed outside the path may have run
/// for something else, and is left out (see [`outside_producers`]).
pub(super) fn shared_producers(
    graph: &Graph,
    paths: &[&[ModuleIdx]],
) -> Vec<Vec<(ModuleIdx, u64)>> {
    producers_of(graph, paths, false)
}

/// The producers a path's steps need that something outside it needs too
/// (a step of another path, an end-path module), with the steps of the
/// path that need them (bit set of positions).
#[derive(Default)]
pub(super) struct Outside {
    /// Those that something outside may or may not run on an event: how
    /// often it does is counted (`outside::Runs`) and the rest charged to
    /// the first step of the path that needs them.
    pub(super) counted: Vec<(ModuleIdx, u64)>,
    /// Those that something outside runs on every event, whatever this
    /// path does ([`every_event`]): charged to no step, not timed.
    pub(super) always: Vec<(ModuleIdx, u64)>,
}

/// Per path of `paths`: the producers that steps of the path need and
/// that something outside it needs too, split by whether something outside
/// the path runs them on every event (see [`Outside`]). Whether one of the
/// others already ran when a step of the path needs it depends on the rest
/// of the event; a step measured after a rejection may run it, which the
/// sampling rates count (`measure::measurement_costs`).
pub(super) fn outside_producers(graph: &Graph, paths: &[PathIdx]) -> Vec<Outside> {
    if paths.is_empty() {
        return Vec::new();
    }
    let runners = every_event(graph);
    let steps: Vec<&[ModuleIdx]> = paths.iter().map(|&p| &graph.paths[p].steps[..]).collect();
    producers_of(graph, &steps, true)
        .into_iter()
        .zip(paths)
        .map(|(list, &me)| {
            let (always, counted) = list
                .into_iter()
                .partition(|&(m, _)| runners[m].iter().any(|&r| r != Runner::Path(me)));
            Outside { counted, always }
        })
        .collect()
}

/// What runs a module on every event that does not fail.
#[derive(Clone, Copy, PartialEq)]
enum Runner {
    /// An end-path module without `select_events` (end paths run once
    /// every path has decided, on every event).
    EndPath,
    /// A path: every path starts on every event, and runs its steps until
    /// one rejects it.
    Path(PathIdx),
}

/// Per module: what runs it on every event, directly or through products.
/// A path runs, on every event, the steps of its written order up to its
/// first filter (producers and analyzers pass every event) and what they
/// need; a reorderable path, whose first step varies, only what every step
/// that may come first (none it must follow) needs, or is.
fn every_event(graph: &Graph) -> Vec<Vec<Runner>> {
    let n = graph.modules.len();
    let mut seen = vec![false; n];
    let with_needs = |m: ModuleIdx, seen: &mut [bool]| {
        let mut set = needed_by(graph, m, seen);
        set.push(m);
        set
    };
    let mut runners: Vec<Vec<Runner>> = vec![Vec::new(); n];
    for e in graph.end_steps.iter().filter(|e| e.select.is_empty()) {
        for m in with_needs(e.module, &mut seen) {
            runners[m].push(Runner::EndPath);
        }
    }
    for (p, path) in graph.paths.iter().enumerate() {
        let mut count = vec![0usize; n];
        let firsts: Vec<ModuleIdx> = if path.reorderable {
            let later: Vec<usize> = path.precedence.iter().map(|&(_, b)| b).collect();
            (0..path.steps.len())
                .filter(|i| !later.contains(i))
                .map(|i| path.steps[i])
                .collect()
        } else {
            // The written prefix up to its first filter, as one group.
            let end = path
                .steps
                .iter()
                .position(|&s| graph.modules[s].kind == ModuleKind::Filter)
                .map_or(path.steps.len(), |i| i + 1);
            let mut all: Vec<ModuleIdx> = path.steps[..end]
                .iter()
                .flat_map(|&s| with_needs(s, &mut seen))
                .collect();
            all.sort_unstable();
            all.dedup();
            for m in all {
                runners[m].push(Runner::Path(p));
            }
            continue;
        };
        for &s in &firsts {
            for m in with_needs(s, &mut seen) {
                count[m] += 1;
            }
        }
        for m in (0..n).filter(|&m| !firsts.is_empty() && count[m] == firsts.len()) {
            runners[m].push(Runner::Path(p));
        }
    }
    runners
}

/// Per path: the producers (no path step or end-path module) needed by
/// steps of the path and, when `outside`, by something outside it too
/// (one step or more); otherwise by nothing outside and two steps or more.
fn producers_of(
    graph: &Graph,
    paths: &[&[ModuleIdx]],
    outside_too: bool,
) -> Vec<Vec<(ModuleIdx, u64)>> {
    if paths.is_empty() {
        return Vec::new();
    }
    let n = graph.modules.len();
    let roots = roots(graph);
    let mut mask = vec![vec![0u64; n]; paths.len()];
    let mut outside = vec![vec![false; n]; paths.len()];
    let mut seen = vec![false; n];
    for &root in &roots {
        let needed = needed_by(graph, root, &mut seen);
        for (p, steps) in paths.iter().enumerate() {
            let pos = steps.iter().position(|&s| s == root).filter(|&i| i < 64);
            for &m in &needed {
                match pos {
                    Some(i) => mask[p][m] |= 1 << i,
                    None => outside[p][m] = true,
                }
            }
        }
    }
    let is_root = {
        let mut r = vec![false; n];
        roots.iter().for_each(|&m| r[m] = true);
        r
    };
    (0..paths.len())
        .map(|p| {
            (0..n)
                .filter(|&m| {
                    let steps = mask[p][m].count_ones();
                    !is_root[m]
                        && if outside_too {
                            outside[p][m] && steps >= 1
                        } else {
                            !outside[p][m] && steps >= 2
                        }
                })
                .map(|m| (m, mask[p][m]))
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::outside_producers;
    use crate::{
        Analyzer, EmptySource, Event, Filter, ModuleDesc, ModuleResult, PathDesc, Process,
        Producer, Transitions,
    };

    /// Modules the test never runs: only the graph is looked at.
    struct Idle;
    impl Transitions for Idle {}
    impl Producer for Idle {
        fn produce(&self, _: &Event<'_>) -> ModuleResult {
            unreachable!("only the graph is looked at")
        }
    }
    impl Filter for Idle {
        fn filter(&self, _: &Event<'_>) -> ModuleResult<bool> {
            unreachable!("only the graph is looked at")
        }
    }
    impl Analyzer for Idle {
        fn analyze(&self, _: &Event<'_>) -> ModuleResult {
            unreachable!("only the graph is looked at")
        }
    }

    /// Always run outside `sel`: `a` (an end-path analyzer without
    /// `select_events`), `c` (the first filter of the written path `trig`)
    /// and `e` (both steps of the reorderable `alt`, one of which comes
    /// first). Not always: `b` (an analyzer with `select_events`), `d`
    /// (after `trig`'s first filter), `f` (one step of `alt`). For `alt`,
    /// `e` is run by `sel` on every event (both its steps need it), `f` is
    /// not (one of them).
    #[test]
    fn producers_run_outside_a_path_on_every_event_come_from_the_graph() {
        let mut p = Process::new("always");
        p.set_source(EmptySource::new(1));
        for label in ["a", "b", "c", "d", "e", "f"] {
            p.add(ModuleDesc::producer(label, Idle).produces([""]));
        }
        let filter = |label: &str, consumes: &[&str]| {
            ModuleDesc::filter(label, Idle).consumes(consumes.iter().copied())
        };
        p.add(filter("s1", &["a", "b", "c", "d", "e", "f"]));
        p.add(filter("s2", &["a", "b", "c", "d", "e"]));
        p.add(filter("t1", &["c"]));
        p.add(filter("t2", &["d"]));
        p.add(filter("u1", &["e", "f"]));
        p.add(filter("u2", &["e"]));
        p.add(ModuleDesc::analyzer("mon", Idle).consumes(["a"]));
        p.add(
            ModuleDesc::analyzer("skim", Idle)
                .consumes(["b"])
                .select_events(["sel"]),
        );
        p.add_path(PathDesc::new("sel", ["s1", "s2"]).reorderable(true));
        p.path("trig", ["t1", "t2"]);
        p.add_path(PathDesc::new("alt", ["u1", "u2"]).reorderable(true));
        p.end_path("out", ["mon", "skim"]);
        let graph = p.compile().unwrap();
        let names = |list: &[(usize, u64)]| -> Vec<String> {
            let mut v: Vec<String> = list
                .iter()
                .map(|&(m, _)| graph.modules[m].label.clone())
                .collect();
            v.sort();
            v
        };
        let (sel, alt) = (
            graph.path_index("sel").unwrap(),
            graph.path_index("alt").unwrap(),
        );
        let found = outside_producers(&graph, &[sel, alt]);
        assert_eq!(names(&found[0].always), ["a", "c", "e"]);
        assert_eq!(names(&found[0].counted), ["b", "d", "f"]);
        assert_eq!(names(&found[1].always), ["e"]);
        assert_eq!(names(&found[1].counted), ["f"]);
    }
}
