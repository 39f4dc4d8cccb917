//! Analytic bounds printed beside every prediction.

use std::sync::Arc;

use evflow_core::graph::Graph;
use serde::Serialize;

use crate::clock::{self, ClockRun, Model, Replay};
use crate::options::SimOptions;

/// Upper bounds on throughput (events/s), each from one limit.
#[derive(Clone, Debug, Serialize)]
pub struct Bounds {
    /// Mean module time per event (the work), seconds.
    pub work_per_event_s: f64,
    /// cores / work.
    pub work_bound_ev_s: f64,
    /// Mean time of one event with unlimited cores, seconds.
    pub critical_path_s: f64,
    /// events in flight / critical path.
    pub critical_path_bound_ev_s: f64,
    /// The busiest serial module or exclusive resource, and its time per event.
    pub busiest_resource: Option<String>,
    pub busiest_resource_s: f64,
    /// 1 / time per event of the busiest serial module or resource.
    pub resource_bound_ev_s: f64,
    /// The smallest of the three.
    pub bound_ev_s: f64,
}

/// A serial or exclusive module or resource and how busy it was.
#[derive(Clone, Debug, Serialize)]
pub struct Limiter {
    pub name: String,
    pub seconds_per_event: f64,
    pub busy_fraction: f64,
}

/// How many recorded events the critical-path run replays (enough for a
/// stable mean, few enough to stay fast).
const CRITICAL_PATH_EVENTS: usize = 200;
const _: () = assert!(CRITICAL_PATH_EVENTS <= clock::KEPT_EVENT_IDS);

pub(crate) fn compute(
    graph: &Arc<Graph>,
    run: &ClockRun,
    model_costs: &Model,
    options: &SimOptions,
) -> Bounds {
    let events = run.events.max(1) as f64;
    // Not `sum()`: the sum of no f64 is -0.0, printed "-0.000000 s".
    let work = run.module_busy_s.iter().fold(0.0, |a, b| a + b) / events;
    let ids: Vec<_> = run
        .event_ids
        .iter()
        .copied()
        .take(CRITICAL_PATH_EVENTS)
        .collect();
    let replayed = ids.len().max(1) as f64;
    let unlimited = SimOptions {
        cores: graph.modules.len() + 1,
        events_in_flight: 1,
        overhead_s: options.overhead_s,
        read_s: options.read_s,
        planner: options.planner.clone(),
        trace: false,
        devices: None,
        concurrent_lumis: options.concurrent_lumis,
        device_launches: Default::default(),
        stop: None,
    };
    let model = Model {
        costs: model_costs.costs.clone(),
        ranges: model_costs.ranges.clone(),
        decisions: model_costs.decisions.clone(),
        source: Box::new(Replay(ids.into_iter())),
    };
    let critical_path = clock::run(graph.clone(), model, &unlimited)
        .map(|r| r.simulated_s / replayed)
        .unwrap_or(0.0);
    let busiest = limiters(graph, run).into_iter().next();
    let (busiest_resource, busiest_resource_s) = busiest
        .map(|l| (Some(l.name), l.seconds_per_event))
        .unwrap_or((None, 0.0));
    let inv = |x: f64| if x > 0.0 { 1.0 / x } else { f64::INFINITY };
    let work_bound = options.cores as f64 * inv(work);
    let cp_bound = options.events_in_flight as f64 * inv(critical_path);
    let resource_bound = inv(busiest_resource_s);
    Bounds {
        work_per_event_s: work,
        work_bound_ev_s: work_bound,
        critical_path_s: critical_path,
        critical_path_bound_ev_s: cp_bound,
        busiest_resource,
        busiest_resource_s,
        resource_bound_ev_s: resource_bound,
        bound_ev_s: work_bound.min(cp_bound).min(resource_bound),
    }
}

/// Serial / cloned modules and exclusive resources, busiest first.
pub(crate) fn limiters(graph: &Graph, run: &ClockRun) -> Vec<Limiter> {
    let events = run.events.max(1) as f64;
    let total = run.simulated_s.max(f64::MIN_POSITIVE);
    let mut out = Vec::new();
    for (m, node) in graph.modules.iter().enumerate() {
        if node.limit != u32::MAX && node.resources.is_empty() && run.module_busy_s[m] > 0.0 {
            let capacity = f64::from(node.limit);
            out.push(Limiter {
                name: format!("module '{}' ({})", node.label, node.concurrency),
                seconds_per_event: run.module_busy_s[m] / events / capacity,
                busy_fraction: run.module_busy_s[m] / total / capacity,
            });
        }
    }
    for (r, name) in graph.resources.iter().enumerate() {
        let busy: f64 = graph
            .modules
            .iter()
            .enumerate()
            .filter(|(_, n)| n.resources.contains(&r))
            .map(|(m, _)| run.module_busy_s[m])
            .sum();
        if busy > 0.0 {
            out.push(Limiter {
                name: format!("resource '{name}'"),
                seconds_per_event: busy / events,
                busy_fraction: busy / total,
            });
        }
    }
    out.sort_by(|a, b| b.seconds_per_event.total_cmp(&a.seconds_per_event));
    out
}
