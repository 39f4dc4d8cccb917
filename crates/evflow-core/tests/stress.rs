//! Seeded random-graph stress test: random DAGs of 5-40 instrumented
//! modules with random concurrency (shared, serial, exclusive on 1-3
//! resources, cloned), external work, random paths and filters, an end
//! path with event selection, random luminosity blocks and modules failing
//! on random events. Every run (sequential and threaded, random K) is
//! checked against an independent model of the per-event semantics and
//! for the concurrency invariants, under a watchdog.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::sync::Arc;

use common::*;
use evflow_core::*;
use evflow_workloads as synthetic;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Producer,
    Filter,
    Analyzer,
    Output,
}

#[derive(Clone, Debug)]
struct ModSpec {
    label: String,
    kind: Kind,
    concurrency: Concurrency,
    reads: Vec<usize>,
    pass: f64,
    fail_rate: f64,
    external: bool,
    work: u32,
    on_end_path: bool,
    select: Vec<String>,
}

#[derive(Clone, Debug)]
struct PathSpec {
    name: String,
    /// Module indices, in written order.
    steps: Vec<usize>,
    reorderable: bool,
    /// (later, earlier) module indices.
    after: Vec<(usize, usize)>,
}

#[derive(Clone, Debug)]
struct Spec {
    seed: u64,
    events: u64,
    per_lumi: u64,
    lumis_per_run: u64,
    mods: Vec<ModSpec>,
    paths: Vec<PathSpec>,
    /// For every module, the modules it needs (transitively).
    needs: Vec<BTreeSet<usize>>,
    /// A module that fails on one event besides the random failures.
    culprit: Option<(usize, u64)>,
}

const RESOURCES: [&str; 3] = ["r1", "r2", "r3"];

fn random_spec(seed: u64) -> Spec {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let n = rng.gen_range(5..=40);
    let mut mods: Vec<ModSpec> = Vec::with_capacity(n + 1);
    for i in 0..n {
        let kind = match rng.gen_range(0..100) {
            0..55 => Kind::Producer,
            55..80 => Kind::Filter,
            _ => Kind::Analyzer,
        };
        mods.push(random_module(&mut rng, format!("m{i}"), kind, &mods));
    }
    mods.push(random_module(&mut rng, "out".into(), Kind::Output, &mods));

    // Paths over producers, filters and the analyzers not on the end path.
    let mut end_analyzer = vec![false; mods.len()];
    for (i, m) in mods.iter().enumerate() {
        end_analyzer[i] = m.kind == Kind::Analyzer && rng.gen_bool(0.4);
    }
    let candidates: Vec<usize> = (0..n)
        .filter(|&i| mods[i].kind != Kind::Output && !end_analyzer[i])
        .collect();
    let needs = transitive_needs(&mods);
    let mut paths = Vec::new();
    if !candidates.is_empty() {
        // A reorderable path holds filters only.
        let filters: Vec<usize> = candidates
            .iter()
            .copied()
            .filter(|&i| mods[i].kind == Kind::Filter)
            .collect();
        for p in 0..rng.gen_range(1..=4) {
            let reorderable = !filters.is_empty() && rng.gen_bool(0.35);
            let pool = if reorderable { &filters } else { &candidates };
            let len = rng.gen_range(1..=5.min(pool.len()));
            let mut chosen: Vec<usize> = Vec::new();
            while chosen.len() < len {
                let c = pool[rng.gen_range(0..pool.len())];
                if !chosen.contains(&c) {
                    chosen.push(c);
                }
            }
            // A random order in which every step comes after the steps it
            // needs (directly or through producers).
            let topo = random_topological(&mut rng, &chosen, |a, b| needs[b].contains(&a));
            let mut after = Vec::new();
            let steps = if reorderable {
                // Any written order; a few explicit constraints taken from
                // the topological order (so they never form a cycle).
                for _ in 0..rng.gen_range(0..=2) {
                    if topo.len() >= 2 {
                        let i = rng.gen_range(0..topo.len() - 1);
                        let j = rng.gen_range(i + 1..topo.len());
                        after.push((topo[j], topo[i]));
                    }
                }
                let mut written = chosen.clone();
                for i in (1..written.len()).rev() {
                    written.swap(i, rng.gen_range(0..=i));
                }
                written
            } else {
                topo
            };
            paths.push(PathSpec {
                name: format!("path{p}"),
                steps,
                reorderable,
                after,
            });
        }
    }
    let path_names: Vec<String> = paths.iter().map(|p| p.name.clone()).collect();
    for (i, m) in mods.iter_mut().enumerate() {
        if end_analyzer[i] || m.kind == Kind::Output {
            m.on_end_path = true;
            if !path_names.is_empty() && rng.gen_bool(0.5) {
                let k = rng.gen_range(1..=path_names.len());
                m.select = (0..k)
                    .map(|_| path_names[rng.gen_range(0..path_names.len())].clone())
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect();
            }
        }
    }
    Spec {
        seed,
        events: rng.gen_range(16..=40),
        per_lumi: rng.gen_range(1..=15),
        lumis_per_run: rng.gen_range(1..=3),
        mods,
        paths,
        needs,
        culprit: None,
    }
}

/// For every module, the modules it needs (transitively).
fn transitive_needs(mods: &[ModSpec]) -> Vec<BTreeSet<usize>> {
    let mut needs: Vec<BTreeSet<usize>> = Vec::with_capacity(mods.len());
    for m in mods {
        // Reads point to earlier modules only.
        let mut set = BTreeSet::new();
        for &r in &m.reads {
            set.insert(r);
            set.extend(needs[r].iter().copied());
        }
        needs.push(set);
    }
    needs
}

/// A uniformly chosen order of `items` in which `a` precedes `b` whenever
/// `before(a, b)`.
fn random_topological(
    rng: &mut ChaCha8Rng,
    items: &[usize],
    before: impl Fn(usize, usize) -> bool,
) -> Vec<usize> {
    let mut left: Vec<usize> = items.to_vec();
    let mut order = Vec::with_capacity(items.len());
    while !left.is_empty() {
        let free: Vec<usize> = (0..left.len())
            .filter(|&i| !left.iter().any(|&o| o != left[i] && before(o, left[i])))
            .collect();
        let pick = free[rng.gen_range(0..free.len())];
        order.push(left.remove(pick));
    }
    order
}

fn random_module(rng: &mut ChaCha8Rng, label: String, kind: Kind, earlier: &[ModSpec]) -> ModSpec {
    let producers: Vec<usize> = (0..earlier.len())
        .filter(|&j| earlier[j].kind == Kind::Producer)
        .collect();
    let mut reads = Vec::new();
    if !producers.is_empty() {
        for _ in 0..rng.gen_range(0..=3) {
            let p = producers[rng.gen_range(0..producers.len())];
            if !reads.contains(&p) {
                reads.push(p);
            }
        }
    }
    let concurrency = match rng.gen_range(0..10) {
        0..4 => Concurrency::Shared,
        4..6 => Concurrency::Serial,
        6..8 => {
            let k = rng.gen_range(1..=3);
            let names: BTreeSet<String> = (0..k)
                .map(|_| RESOURCES[rng.gen_range(0..3)].to_string())
                .collect();
            Concurrency::Exclusive(names.into_iter().collect())
        }
        _ => Concurrency::Cloned(rng.gen_range(1..=3)),
    };
    let external =
        kind == Kind::Producer && concurrency == Concurrency::Shared && rng.gen_bool(0.3);
    ModSpec {
        label,
        kind,
        concurrency,
        reads,
        pass: rng.gen_range(0.2..1.0),
        fail_rate: if rng.gen_bool(0.15) { 0.12 } else { 0.0 },
        external,
        work: rng.gen_range(0..150),
        on_end_path: false,
        select: Vec::new(),
    }
}

impl Spec {
    fn passes(&self, m: usize, e: u64) -> bool {
        self.mods[m].kind != Kind::Filter
            || unit(self.seed, &self.mods[m].label, e) < self.mods[m].pass
    }
    fn fails(&self, m: usize, e: u64) -> bool {
        unit(self.seed ^ 0xFA11, &self.mods[m].label, e) < self.mods[m].fail_rate
            || self.culprit == Some((m, e))
    }
    /// Whether module `m`, run on event `e` only as a measurement, is
    /// lost: it fails, or a module it needs does.
    fn lost(&self, m: usize, e: u64) -> bool {
        self.fails(m, e) || self.needs[m].iter().any(|&n| self.fails(n, e))
    }
    fn source(&self) -> EmptySource {
        EmptySource::new(self.events)
            .events_per_lumi(self.per_lumi)
            .lumis_per_run(self.lumis_per_run)
    }
}

/// The model's view of one event: the modules requested (a lost
/// measurement included), those needed for real (whose failure fails the
/// event), and every path's decision.
struct Expected {
    requested: Vec<bool>,
    real: Vec<bool>,
    accepted: Vec<bool>,
}

/// The static order information of one compiled path.
#[derive(Clone, Debug)]
struct PlanInfo {
    steps: Vec<usize>,
    precedence: Vec<(usize, usize)>,
    reorderable: bool,
}

fn plan_infos(graph: &Graph) -> Vec<PlanInfo> {
    graph
        .paths
        .iter()
        .map(|p| PlanInfo {
            steps: p.steps.clone(),
            precedence: p.precedence.clone(),
            reorderable: p.reorderable,
        })
        .collect()
}

/// The order (and whether every step is evaluated) of path `path` for the
/// event with job index `index`: the written order for ordinary paths; for
/// reorderable ones a seeded random order that respects the path's
/// precedence, evaluating every step one time in four.
fn plan_of(seed: u64, path: usize, index: u64, info: &PlanInfo) -> (Vec<usize>, bool) {
    if !info.reorderable {
        return (info.steps.clone(), false);
    }
    let key = synthetic::mix(seed ^ 0x9A7)
        ^ synthetic::mix(path as u64 + 1)
        ^ synthetic::mix(index.wrapping_add(77));
    let mut rng = ChaCha8Rng::seed_from_u64(key);
    let positions: Vec<usize> = (0..info.steps.len()).collect();
    let order = random_topological(&mut rng, &positions, |a, b| {
        info.precedence.contains(&(a, b))
    });
    (
        order.into_iter().map(|i| info.steps[i]).collect(),
        rng.gen_bool(0.25),
    )
}

/// A planner that reorders reorderable paths per event (see [`plan_of`]).
struct StressPlanner {
    seed: u64,
    infos: Vec<PlanInfo>,
}

impl schedule::Planner for StressPlanner {
    fn plan(&self, path: usize, event_index: u64) -> Arc<schedule::PathPlan> {
        let (order, evaluate_all) = plan_of(self.seed, path, event_index, &self.infos[path]);
        let mut plan = schedule::PathPlan::sequence(order);
        plan.evaluate_all = evaluate_all;
        Arc::new(plan)
    }
}

fn with_planner(mut options: RunOptions, seed: u64) -> RunOptions {
    options.planner = Some(Arc::new(move |g: &Graph| {
        Arc::new(StressPlanner {
            seed,
            infos: plan_infos(g),
        }) as Arc<dyn schedule::Planner>
    }));
    options
}

/// The steps path `p` runs on event `e` (job index `e - 1`), in order, with
/// their decisions, and whether it accepts the event: the plan's order up
/// to the first rejection; on an event that evaluates every step, every
/// step whose predecessors (`after` and data) all ran and passed on the
/// path (a rejected guard keeps its followers from running). A step after
/// the rejection is only measured: `None` when the measurement is lost (it
/// or a module it needs fails), which fails nothing and guards like a
/// rejection.
fn path_run(spec: &Spec, info: &PlanInfo, p: usize, e: u64) -> (Vec<(usize, Option<bool>)>, bool) {
    let (order, evaluate_all) = plan_of(spec.seed, p, e - 1, info);
    let mut passed_here = vec![false; info.steps.len()];
    let mut ran = Vec::new();
    let mut ok = true;
    for s in order {
        let b = info.steps.iter().position(|&x| x == s).unwrap();
        if evaluate_all
            && info
                .precedence
                .iter()
                .any(|&(a, later)| later == b && !passed_here[a])
        {
            continue;
        }
        if !ok && spec.lost(s, e) {
            ran.push((s, None));
            continue;
        }
        let pass = spec.passes(s, e);
        ran.push((s, Some(pass)));
        passed_here[b] = pass;
        if !pass {
            ok = false;
            if !evaluate_all {
                break;
            }
        }
    }
    (ran, ok)
}

fn model(spec: &Spec, infos: &[PlanInfo], e: u64) -> Expected {
    fn request(spec: &Spec, m: usize, requested: &mut Vec<bool>) {
        if !requested[m] {
            requested[m] = true;
            for &p in &spec.mods[m].reads {
                request(spec, p, requested);
            }
        }
    }
    let mut requested = vec![false; spec.mods.len()];
    let mut real = vec![false; spec.mods.len()];
    let mut accepted = Vec::new();
    for (p, info) in infos.iter().enumerate() {
        let (ran, ok) = path_run(spec, info, p, e);
        // Up to the first rejection the steps decide; after it they are
        // measurements.
        let decided = ran
            .iter()
            .position(|&(_, pass)| pass != Some(true))
            .map_or(ran.len(), |i| i + 1);
        for (i, &(s, _)) in ran.iter().enumerate() {
            request(spec, s, &mut requested);
            if i < decided {
                request(spec, s, &mut real);
            }
        }
        accepted.push(ok);
    }
    for (m, ms) in spec.mods.iter().enumerate() {
        let selected = ms.select.is_empty()
            || ms.select.iter().any(|name| {
                spec.paths
                    .iter()
                    .position(|p| p.name == *name)
                    .is_some_and(|p| accepted[p])
            });
        if ms.on_end_path && selected {
            request(spec, m, &mut requested);
            request(spec, m, &mut real);
        }
    }
    Expected {
        requested,
        real,
        accepted,
    }
}

impl Expected {
    /// Whether the event fails: a module it needs for real fails.
    fn fails(&self, spec: &Spec, e: u64) -> bool {
        (0..spec.mods.len()).any(|m| self.real[m] && spec.fails(m, e))
    }
}

/// Builds the process; `failing(m, e)` says whether module `m` fails on
/// event `e`.
fn build(
    spec: &Spec,
    log: &Arc<Log>,
    helper: &Arc<Helper>,
    failing: &dyn Fn(usize, u64) -> bool,
) -> Process {
    let mut p = Process::new(format!("stress-{}", spec.seed));
    p.set_source(spec.source());
    for (i, m) in spec.mods.iter().enumerate() {
        let tags: Vec<String> = m
            .reads
            .iter()
            .map(|&j| spec.mods[j].label.clone())
            .collect();
        let tags: Vec<&str> = tags.iter().map(String::as_str).collect();
        let fail: Vec<u64> = (1..=spec.events).filter(|&e| failing(i, e)).collect();
        let (seed, label, pass) = (spec.seed, m.label.clone(), m.pass);
        let mut base = Probe::new(log, &m.label)
            .work(m.work)
            .reads(&tags)
            .fail_on(&fail);
        if m.kind == Kind::Filter {
            base = base.pass(move |id| unit(seed, &label, id.event) < pass);
        }
        if m.kind == Kind::Producer {
            base = base.puts(&[""]);
        }
        let kind = match m.kind {
            Kind::Producer => ModuleKind::Producer,
            Kind::Filter => ModuleKind::Filter,
            Kind::Analyzer => ModuleKind::Analyzer,
            Kind::Output => ModuleKind::Output,
        };
        let mut desc = if m.external {
            AsyncProbe::new(base, helper, Delay::AfterReturn).producer()
        } else if let Concurrency::Cloned(n) = m.concurrency {
            base.cloned(n, kind)
        } else {
            let d = match m.kind {
                Kind::Producer => base.producer(),
                Kind::Filter => base.filter(),
                Kind::Analyzer => base.analyzer(),
                Kind::Output => base.output(),
            };
            d.concurrency(m.concurrency.clone())
        };
        if !m.select.is_empty() {
            desc = desc.select_events(m.select.clone());
        }
        p.add(desc);
    }
    for path in &spec.paths {
        let label = |m: usize| spec.mods[m].label.clone();
        let mut desc = PathDesc::new(path.name.clone(), path.steps.iter().map(|&s| label(s)))
            .reorderable(path.reorderable);
        for &(later, earlier) in &path.after {
            desc = desc.after(label(later), label(earlier));
        }
        p.add_path(desc);
    }
    let end: Vec<String> = spec
        .mods
        .iter()
        .filter(|m| m.on_end_path)
        .map(|m| m.label.clone())
        .collect();
    p.end_path("end", end);
    p
}

/// Checks invariants 1-5 and the transitions on one run's log.
fn check_invariants(
    spec: &Spec,
    infos: &[PlanInfo],
    log: &Log,
    k: usize,
    report: Option<&Report>,
) -> Result<(), String> {
    let execs = log.execs();
    let index: HashMap<&str, usize> = spec
        .mods
        .iter()
        .enumerate()
        .map(|(i, m)| (m.label.as_str(), i))
        .collect();
    let mut by_module: Vec<Vec<Exec>> = vec![Vec::new(); spec.mods.len()];
    for e in &execs {
        by_module[index[&*e.label]].push(e.clone());
    }
    // 1-3: serial, exclusive and cloned modules.
    let mut by_resource: HashMap<&str, Vec<Exec>> = HashMap::new();
    for (i, m) in spec.mods.iter().enumerate() {
        let list = &by_module[i];
        match &m.concurrency {
            Concurrency::Serial => {
                if let Some(o) = find_overlap(list) {
                    return Err(format!("serial {} overlapped itself: {o:?}", m.label));
                }
            }
            Concurrency::Exclusive(names) => {
                for r in names {
                    by_resource
                        .entry(r.as_str())
                        .or_default()
                        .extend(list.iter().cloned());
                }
            }
            Concurrency::Cloned(n) => {
                let peak = max_concurrency(list);
                if peak > *n as usize {
                    return Err(format!("cloned({n}) {} ran {peak} times at once", m.label));
                }
                for inst in 0..*n {
                    let mine: Vec<Exec> = list
                        .iter()
                        .filter(|e| e.instance == inst)
                        .cloned()
                        .collect();
                    if let Some(o) = find_overlap(&mine) {
                        return Err(format!(
                            "{} instance {inst} used twice at once: {o:?}",
                            m.label
                        ));
                    }
                }
                if list.iter().any(|e| e.instance >= *n) {
                    return Err(format!("{}: instance out of range", m.label));
                }
            }
            Concurrency::Shared => {}
        }
    }
    for (r, list) in by_resource {
        if let Some(o) = find_overlap(&list) {
            return Err(format!("resource {r} held twice at once: {o:?}"));
        }
    }
    // 4: events in flight.
    let spans = events_in_flight(&execs);
    if spans > k {
        return Err(format!("{spans} events in flight with K={k}"));
    }
    if let Some(r) = report.filter(|r| r.peak_events_in_flight > k) {
        return Err(format!(
            "report.peak_events_in_flight {} > K={k}",
            r.peak_events_in_flight
        ));
    }
    // 5: data dependencies, and each module completes at most once per
    // event; a lost measurement runs again when something needs it for real
    // or another measurement asks for it, and fails again (failures here
    // depend on the event only).
    // The first run stays: a path may go on after it.
    let mut done: HashMap<(usize, EventId), &Exec> = HashMap::new();
    for e in execs.iter().filter(|e| e.completes()) {
        match done.entry((index[&*e.label], e.event)) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(e);
            }
            std::collections::hash_map::Entry::Occupied(mut o) => {
                if o.get().ok() || e.ok() {
                    return Err(format!("{} completed twice on {}", e.label, e.event));
                }
                if e.end < o.get().end {
                    o.insert(e);
                }
            }
        }
    }
    for e in execs.iter().filter(|e| e.phase != Phase::Produce) {
        let m = index[&*e.label];
        for &p in &spec.mods[m].reads {
            match done.get(&(p, e.event)) {
                Some(pe) if pe.ok() && pe.end < e.start => {}
                Some(pe) => {
                    return Err(format!(
                        "{} started on {} (seq {}) before its producer {} ended well (seq {}, ok {})",
                        e.label,
                        e.event,
                        e.start,
                        pe.label,
                        pe.end,
                        pe.ok()
                    ));
                }
                None => {
                    return Err(format!(
                        "{} ran on {} without its producer {}",
                        e.label, e.event, spec.mods[p].label
                    ));
                }
            }
        }
    }
    // 5: path order (the event's plan), for steps only their path can
    // request (filters and analyzers, which produce nothing, on one path).
    for (p, path) in spec.paths.iter().enumerate() {
        for &m in &path.steps {
            let on_paths = spec.paths.iter().filter(|q| q.steps.contains(&m)).count();
            if spec.mods[m].kind == Kind::Producer || on_paths != 1 {
                continue;
            }
            for e in by_module[m].iter().filter(|e| e.completes()) {
                // The steps the path runs on the event (a step a rejected
                // guard keeps from running must not run at all).
                let (ran, _) = path_run(spec, &infos[p], p, e.event.event);
                let Some(i) = ran.iter().position(|&(s, _)| s == m) else {
                    return Err(format!(
                        "step {} of {} ran on {}, which the path does not run it on \
                         (a step it must follow rejected the event)",
                        e.label, path.name, e.event
                    ));
                };
                if i == 0 {
                    continue;
                }
                let (prev_step, prev_passed) = ran[i - 1];
                let (_, evaluate_all) = plan_of(spec.seed, p, e.event.event - 1, &infos[p]);
                match (done.get(&(prev_step, e.event)), prev_passed) {
                    // A lost measurement: failed first, or never ran (a
                    // module it needs failed).
                    (None, None) => {}
                    (Some(prev), None) if !prev.ok() && prev.end < e.start => {}
                    (Some(prev), Some(prev_passed))
                        if (evaluate_all || prev_passed)
                            && prev.passed == Some(prev_passed)
                            && prev.end < e.start => {}
                    (other, _) => {
                        return Err(format!(
                            "step {} of {} ran on {} but its previous step {} gave {:?}, \
                             the model says {prev_passed:?}",
                            e.label,
                            path.name,
                            e.event,
                            spec.mods[prev_step].label,
                            other.map(|x| (x.passed, x.end, e.start))
                        ));
                    }
                }
            }
        }
    }
    // Transitions bracket their events and nest.
    check_transitions(&execs, &log.hooks())
}

/// Checks a SkipEvent run against the model.
fn check_against_model(
    spec: &Spec,
    infos: &[PlanInfo],
    log: &Log,
    report: &Report,
) -> Result<(), String> {
    let models: Vec<Expected> = (1..=spec.events).map(|e| model(spec, infos, e)).collect();
    let failed: BTreeSet<u64> = (1..=spec.events)
        .filter(|&e| models[e as usize - 1].fails(spec, e))
        .collect();
    let reported: BTreeSet<u64> = report.failed_events.iter().map(|f| f.event).collect();
    if reported != failed {
        return Err(format!(
            "failed events {reported:?}, the model says {failed:?}"
        ));
    }
    if report.events != spec.events - failed.len() as u64 {
        return Err(format!(
            "{} events processed, expected {}",
            report.events,
            spec.events - failed.len() as u64
        ));
    }
    let mut ran: HashMap<u64, BTreeSet<String>> = HashMap::new();
    for e in log.execs() {
        if e.completes() && e.ok() {
            ran.entry(e.event.event)
                .or_default()
                .insert(e.label.to_string());
        }
        let m = spec.mods.iter().position(|m| *m.label == *e.label).unwrap();
        if !models[e.event.event as usize - 1].requested[m] {
            return Err(format!(
                "{} ran on {} but nothing needed it",
                e.label, e.event
            ));
        }
    }
    for e in 1..=spec.events {
        if failed.contains(&e) {
            continue;
        }
        let want: BTreeSet<String> = spec
            .mods
            .iter()
            .enumerate()
            .filter(|&(m, _)| models[e as usize - 1].requested[m] && !spec.lost(m, e))
            .map(|(_, ms)| ms.label.clone())
            .collect();
        let got = ran.remove(&e).unwrap_or_default();
        if got != want {
            return Err(format!(
                "event {e}: modules {got:?}, the model says {want:?}"
            ));
        }
    }
    // The output saw the right events with the right trigger results.
    let names: Vec<String> = spec.paths.iter().map(|p| p.name.clone()).collect();
    let out = spec.mods.len() - 1;
    let mut written = BTreeSet::new();
    for w in log.written() {
        let e = w.event.event;
        let want: Vec<(String, bool)> = names
            .iter()
            .cloned()
            .zip(models[e as usize - 1].accepted.iter().copied())
            .collect();
        if w.results != want {
            return Err(format!(
                "output got {:?} on event {e}, the model says {want:?}",
                w.results
            ));
        }
        if !failed.contains(&e) {
            written.insert(e);
        }
    }
    let want: BTreeSet<u64> = (1..=spec.events)
        .filter(|e| !failed.contains(e) && models[*e as usize - 1].requested[out])
        .collect();
    if written != want {
        return Err(format!("output wrote {written:?}, the model says {want:?}"));
    }
    // Path reports and cut-flow over the events that did not fail.
    for (p, path) in spec.paths.iter().enumerate() {
        let (name, steps) = (&path.name, &path.steps);
        let r = &report.paths[p];
        let mut visited = vec![0u64; steps.len()];
        let mut passed = vec![0u64; steps.len()];
        let mut accepted = 0;
        for e in (1..=spec.events).filter(|e| !failed.contains(e)) {
            // The cut-flow: the steps up to the first rejection (a sampled
            // event's later steps are measurements, not the path's).
            for (s, pass) in path_run(spec, &infos[p], p, e).0 {
                let pass = pass.expect("a lost measurement follows the rejection");
                let i = steps.iter().position(|&x| x == s).unwrap();
                visited[i] += 1;
                passed[i] += u64::from(pass);
                if !pass {
                    break;
                }
            }
            accepted += u64::from(models[e as usize - 1].accepted[p]);
        }
        let got: Vec<(u64, u64)> = r.filters.iter().map(|s| (s.visited, s.passed)).collect();
        let want: Vec<(u64, u64)> = visited.into_iter().zip(passed).collect();
        if r.name != *name || r.visited != report.events || r.passed != accepted || got != want {
            return Err(format!(
                "path {name}: report {r:?}, the model says passed {accepted}, cut-flow {want:?}"
            ));
        }
    }
    // Module calls agree with the log.
    for m in &spec.mods {
        let calls = log
            .of(&m.label)
            .iter()
            .filter(|e| e.phase != Phase::Produce)
            .count() as u64;
        let r = report.module(&m.label).unwrap().calls;
        if r != calls {
            return Err(format!(
                "{}: report says {r} calls, the log {calls}",
                m.label
            ));
        }
    }
    Ok(())
}

/// The compiled order information of the spec's paths.
fn compiled_plans(spec: &Spec) -> Vec<PlanInfo> {
    let (log, helper) = (Log::new(), Helper::new());
    let graph = build(spec, &log, &helper, &|_, _| false)
        .compile()
        .unwrap_or_else(|e| {
            panic!(
                "the generated process does not compile: {e}\n{}",
                describe(spec)
            )
        });
    plan_infos(&graph)
}

fn describe(spec: &Spec) -> String {
    let mut s = format!(
        "seed {} : {} events, {} per lumi, {} lumis per run\n",
        spec.seed, spec.events, spec.per_lumi, spec.lumis_per_run
    );
    for m in &spec.mods {
        let reads: Vec<&str> = m
            .reads
            .iter()
            .map(|&j| spec.mods[j].label.as_str())
            .collect();
        let _ = writeln!(
            s,
            "  {} {:?} {} reads {reads:?} pass {:.2} fail {:.2} external {} end {} select {:?}",
            m.label,
            m.kind,
            m.concurrency,
            m.pass,
            m.fail_rate,
            m.external,
            m.on_end_path,
            m.select
        );
    }
    for p in &spec.paths {
        let labels: Vec<&str> = p
            .steps
            .iter()
            .map(|&j| spec.mods[j].label.as_str())
            .collect();
        let after: Vec<(&str, &str)> = p
            .after
            .iter()
            .map(|&(a, b)| (spec.mods[a].label.as_str(), spec.mods[b].label.as_str()))
            .collect();
        let _ = writeln!(
            s,
            "  {}: {labels:?} reorderable {} after {after:?}",
            p.name, p.reorderable
        );
    }
    s
}

/// A long hunt stopped by a time limit still tells how far it got.
fn progress(test: &str, seeds_done: u64) {
    if seeds_done.is_multiple_of(1000) {
        eprintln!("{test}: {seeds_done} seeds passed");
    }
}

/// Seeds and threads of the suite. CI runs the defaults; a longer hunt for
/// races on a big machine sets, for example,
/// `EVFLOW_STRESS_SEEDS=100000 EVFLOW_STRESS_THREADS=16`:
///
/// * `EVFLOW_STRESS_SEEDS`: seeds of the skip-event test (default 100; the
///   fail-policy test runs 40% as many),
/// * `EVFLOW_STRESS_FIRST_SEED`: first seed (default 0), to split a long
///   hunt over several processes,
/// * `EVFLOW_STRESS_THREADS`: threads of the larger threaded configuration
///   (default 4; the smaller one uses half, at least 2),
/// * `EVFLOW_STRESS_LUMIS`: luminosity blocks in flight in every
///   configuration (default: drawn from 1 to 4 per configuration).
struct Knobs {
    seeds: u64,
    first_seed: u64,
    threads: usize,
    /// Blocks in flight for every configuration (default: drawn, 1 to 4).
    lumis: Option<usize>,
}

impl Knobs {
    fn from_env() -> Self {
        fn var(name: &str, default: u64) -> u64 {
            match std::env::var(name) {
                Ok(v) => v
                    .trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("{name} must be a whole number, not {v:?}")),
                Err(_) => default,
            }
        }
        Self {
            seeds: var("EVFLOW_STRESS_SEEDS", 100),
            first_seed: var("EVFLOW_STRESS_FIRST_SEED", 0),
            threads: var("EVFLOW_STRESS_THREADS", 4).max(2) as usize,
            lumis: std::env::var("EVFLOW_STRESS_LUMIS")
                .is_ok()
                .then(|| var("EVFLOW_STRESS_LUMIS", 1).max(1) as usize),
        }
    }
    /// The default run: its coverage minimums apply.
    fn is_default(&self) -> bool {
        self.seeds >= 100 && self.first_seed == 0 && self.lumis.is_none()
    }
}

fn configurations(seed: u64, knobs: &Knobs) -> Vec<RunOptions> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x00C0_FFEE);
    let mut all = vec![
        sequential(rng.gen_range(1..=4)),
        threaded(knobs.threads, rng.gen_range(1..=2 * knobs.threads)),
        threaded((knobs.threads / 2).max(2), rng.gen_range(1..=5)),
    ];
    if seed.is_multiple_of(4) {
        // More threads than OVERSUBSCRIBED per core: the shared-queue backend.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        all.push(threaded(OVERSUBSCRIBED * cores + 1, rng.gen_range(1..=12)));
    }
    // Luminosity blocks in flight at once: one at a time up to four.
    let mut lumis = ChaCha8Rng::seed_from_u64(seed ^ 0x0001_0411);
    for options in &mut all {
        options.concurrent_lumis = knobs.lumis.unwrap_or_else(|| lumis.gen_range(1..=4));
    }
    all
}

/// Blocks in flight never exceed the option, in the report and as every
/// instance saw its hooks.
fn check_lumis(options_lumis: usize, log: &Log, report: &Report) -> Result<(), String> {
    let open = max_open_lumis(&log.hooks());
    if open > options_lumis || report.peak_concurrent_lumis > options_lumis {
        return Err(format!(
            "{open} blocks open at an instance, peak {} in flight, allowed {options_lumis}",
            report.peak_concurrent_lumis
        ));
    }
    Ok(())
}

/// What the generated processes exercised, so that the test cannot pass
/// vacuously.
#[derive(Default, Debug)]
struct Coverage {
    executions: usize,
    failed_events: usize,
    reorderable_paths: usize,
    evaluate_all_plans: usize,
    /// Events on which a module fails only where it is measured.
    lost_measurements: usize,
    external: usize,
    serial: usize,
    exclusive: usize,
    cloned: usize,
    selective_end_modules: usize,
    /// Runs, and runs with events of several luminosity blocks in flight.
    runs: usize,
    overlapping_lumis: usize,
}

impl Coverage {
    fn add_spec(&mut self, spec: &Spec, infos: &[PlanInfo]) {
        for m in &spec.mods {
            match m.concurrency {
                Concurrency::Serial => self.serial += 1,
                Concurrency::Exclusive(_) => self.exclusive += 1,
                Concurrency::Cloned(_) => self.cloned += 1,
                Concurrency::Shared => {}
            }
            self.external += usize::from(m.external);
            self.selective_end_modules += usize::from(!m.select.is_empty());
        }
        self.reorderable_paths += spec.paths.iter().filter(|p| p.reorderable).count();
        for (p, info) in infos.iter().enumerate() {
            self.evaluate_all_plans += (0..spec.events)
                .filter(|&i| plan_of(spec.seed, p, i, info).1)
                .count();
        }
        self.lost_measurements += (1..=spec.events)
            .filter(|&e| {
                let expected = model(spec, infos, e);
                !expected.fails(spec, e)
                    && (0..spec.mods.len()).any(|m| expected.requested[m] && spec.fails(m, e))
            })
            .count();
    }
    fn check(&self) {
        let minimum = [
            self.executions >= 20_000,
            self.failed_events >= 100,
            self.reorderable_paths >= 20,
            self.evaluate_all_plans >= 100,
            self.lost_measurements >= 5,
            self.external >= 20,
            self.serial >= 50,
            self.exclusive >= 50,
            self.cloned >= 30,
            self.selective_end_modules >= 20,
            self.overlapping_lumis >= 50,
        ];
        assert!(
            minimum.iter().all(|&ok| ok),
            "the random processes cover too little: {self:?}"
        );
    }
}

#[test]
fn random_graphs_skip_event_match_the_model_and_keep_invariants() {
    let knobs = Knobs::from_env();
    let mut coverage = Coverage::default();
    for seed in knobs.first_seed..knobs.first_seed + knobs.seeds {
        let spec = random_spec(seed);
        let infos = compiled_plans(&spec);
        coverage.add_spec(&spec, &infos);
        for options in configurations(seed, &knobs) {
            let lumis = options.concurrent_lumis;
            let (log, helper) = (Log::new(), Helper::new());
            let s = spec.clone();
            let process = build(&spec, &log, &helper, &move |m, e| s.fails(m, e));
            let k = options.events_in_flight;
            let what = format!("{options:?}\n{}", describe(&spec));
            let report = run_watched(process, skip(with_planner(options, seed)))
                .unwrap_or_else(|e| panic!("{e}\n{what}"));
            check_invariants(&spec, &infos, &log, k, Some(&report))
                .unwrap_or_else(|e| panic!("invariant: {e}\n{what}"));
            check_against_model(&spec, &infos, &log, &report)
                .unwrap_or_else(|e| panic!("model: {e}\n{what}"));
            check_lumis(lumis, &log, &report).unwrap_or_else(|e| panic!("lumis: {e}\n{what}"));
            coverage.executions += log.execs().len();
            coverage.failed_events += report.failed_events.len();
            coverage.runs += 1;
            coverage.overlapping_lumis += usize::from(report.peak_concurrent_lumis > 1);
        }
        progress("skip-event", seed + 1 - knobs.first_seed);
    }
    eprintln!("{coverage:?}");
    if knobs.is_default() {
        coverage.check();
    }
}

#[test]
fn random_graphs_fail_policy_fail_with_the_same_error_everywhere() {
    let knobs = Knobs::from_env();
    let (mut failing_runs, mut measured_only) = (0, 0);
    let seeds = (knobs.seeds * 2).div_ceil(5);
    let first = 1000 + knobs.first_seed;
    for seed in first..first + seeds {
        let mut spec = random_spec(seed);
        for m in &mut spec.mods {
            m.fail_rate = 0.0;
        }
        // One module fails on one event it runs on (when there is one). It
        // fails the job when the event needs it for real, not when it runs
        // there only as a measurement after a rejection.
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let e = rng.gen_range(1..=spec.events);
        let infos = compiled_plans(&spec);
        let expected = model(&spec, &infos, e);
        // Half the time a module run only to be measured, when there is one.
        let measured: Vec<usize> = (0..spec.mods.len())
            .filter(|&m| expected.requested[m] && !expected.real[m])
            .collect();
        let needed: Vec<usize> = if !measured.is_empty() && rng.gen_bool(0.5) {
            measured
        } else {
            (0..spec.mods.len())
                .filter(|&m| expected.requested[m])
                .collect()
        };
        let chosen = (!needed.is_empty()).then(|| needed[rng.gen_range(0..needed.len())]);
        spec.culprit = chosen.map(|m| (m, e));
        let culprit = chosen.filter(|&m| expected.real[m]);
        measured_only += usize::from(chosen.is_some() && culprit.is_none());
        let mut errors = Vec::new();
        for options in configurations(seed, &knobs) {
            let lumis = options.concurrent_lumis;
            let (log, helper) = (Log::new(), Helper::new());
            let s = spec.clone();
            let process = build(&spec, &log, &helper, &move |m, ev| s.fails(m, ev));
            let k = options.events_in_flight;
            let what = format!(
                "{options:?} culprit {culprit:?} on event {e}\n{}",
                describe(&spec)
            );
            let result = run_watched(process, with_planner(options, seed));
            let report = match result {
                Ok(r) => {
                    assert!(
                        culprit.is_none(),
                        "the job succeeded despite a failure\n{what}"
                    );
                    assert_eq!(r.events, spec.events, "{what}");
                    r
                }
                Err(RunError::Failed { error, report }) => {
                    match &error {
                        JobError::Module { module, event, .. } => {
                            assert_eq!(
                                Some(module.as_str()),
                                culprit.map(|c| spec.mods[c].label.as_str()),
                                "{what}"
                            );
                            assert_eq!(event.event, e, "{what}");
                        }
                        other => panic!("unexpected {other:?}\n{what}"),
                    }
                    errors.push(error);
                    *report
                }
                Err(e) => panic!("{e}\n{what}"),
            };
            check_invariants(&spec, &infos, &log, k, Some(&report))
                .unwrap_or_else(|err| panic!("invariant: {err}\n{what}"));
            check_lumis(lumis, &log, &report).unwrap_or_else(|e| panic!("lumis: {e}\n{what}"));
        }
        if culprit.is_some() {
            failing_runs += 1;
            assert!(
                errors.windows(2).all(|w| w[0] == w[1]),
                "executors disagree: {errors:?}"
            );
        }
        progress("fail-policy", seed + 1 - first);
    }
    eprintln!("{failing_runs} failing processes, {measured_only} failing only where measured");
    assert!(
        !knobs.is_default() || (failing_runs > 30 && measured_only > 0),
        "too few failing processes were generated: {failing_runs} \
         ({measured_only} failing only where measured)"
    );
}
