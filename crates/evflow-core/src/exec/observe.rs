//! Observability: stall accounting (restricted work that waited), the
//! trace of module executions, the coordinator's observer callbacks
//! (step counts, steady rate), and the job report.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::state::*;
use super::trace::Track;
use crate::graph::ModuleIdx;
use crate::ids::EventId;
use crate::report::{ModuleReport, PathReport, Report, Stall, StepReport};
use crate::schedule::{EventState, Observer, PathOutcome, PathStatus};
use crate::trace::TraceSlice;
use crate::trigger::TriggerResults;

/// What a trace slice is named after.
#[derive(Clone, Copy)]
pub(super) enum SliceName<'a> {
    Module(ModuleIdx),
    Source,
    Transition(&'a str),
}

impl Engine {
    pub(super) fn end_stall(&self, slot: usize, module: ModuleIdx, id: EventId, thread: usize) {
        let Some(since) = self.queued_at.take(slot, module) else {
            return;
        };
        let waited = since.elapsed();
        self.stats[module]
            .queue_ns
            .fetch_add(waited.as_nanos() as u64, Ordering::Relaxed);
        let track = Track::Worker(thread);
        self.record_slice(SliceName::Module(module), "queued", track, Some(id), since);
        let node = &self.graph.modules[module];
        let mut stalls = lock(&self.stalls);
        let waited_s = waited.as_secs_f64();
        if stalls.len() < STALLS_KEPT || stalls.last().is_some_and(|s| s.waited_s < waited_s) {
            let reason = if node.resources.is_empty() {
                format!("{} queue", node.concurrency)
            } else {
                let names: Vec<&str> = node
                    .resources
                    .iter()
                    .map(|&r| self.graph.resources[r].as_str())
                    .collect();
                format!("exclusive resource {}", names.join(", "))
            };
            stalls.push(Stall {
                module: node.label.clone(),
                run: id.run,
                lumi: id.lumi,
                event: id.event,
                waited_s,
                reason,
            });
            stalls.sort_by(|a, b| b.waited_s.total_cmp(&a.waited_s));
            stalls.truncate(STALLS_KEPT);
        }
    }

    pub(super) fn record_interval(
        &self,
        name: SliceName<'_>,
        category: &'static str,
        track: Track,
        event: Option<EventId>,
        from: Instant,
        to: Instant,
    ) {
        if let Some(trace) = &self.trace {
            let name = match name {
                SliceName::Module(m) => Arc::clone(&self.trace_names[m]),
                SliceName::Source => Arc::clone(&self.trace_names[self.graph.modules.len()]),
                SliceName::Transition(t) => Arc::from(t),
            };
            trace.record(
                track,
                TraceSlice {
                    name,
                    category,
                    thread: track.id(),
                    event,
                    start_us: from.saturating_duration_since(self.start).as_secs_f64() * 1e6,
                    duration_us: to.saturating_duration_since(from).as_secs_f64() * 1e6,
                },
            );
        }
    }

    /// A trace slice from `t0` to now.
    pub(super) fn record_slice(
        &self,
        name: SliceName<'_>,
        category: &'static str,
        track: Track,
        event: Option<EventId>,
        t0: Instant,
    ) {
        if self.trace.is_some() {
            self.record_interval(name, category, track, event, t0, Instant::now());
        }
    }

    pub(crate) fn report(&self, executor: &str, threads: usize, events_in_flight: usize) -> Report {
        let wall_s = self.start.elapsed().as_secs_f64();
        let events = self.events_done.load(Ordering::Relaxed);
        let modules = self
            .graph
            .modules
            .iter()
            .zip(&self.stats)
            .enumerate()
            .map(|(m, (node, s))| ModuleReport {
                label: node.label.clone(),
                kind: node.kind.to_string(),
                concurrency: node.concurrency.to_string(),
                calls: self.counts.calls(m),
                run_s: self.counts.run_ns(m) as f64 * 1e-9,
                wait_s: s.wait_ns.load(Ordering::Relaxed) as f64 * 1e-9,
                queue_s: s.queue_ns.load(Ordering::Relaxed) as f64 * 1e-9,
                failures: s.failures.load(Ordering::Relaxed),
            })
            .collect::<Vec<_>>();
        let paths = self
            .graph
            .paths
            .iter()
            .enumerate()
            .map(|(p, path)| PathReport {
                name: path.name.clone(),
                visited: self.path_visited[p].load(Ordering::Relaxed),
                passed: self.path_passed[p].load(Ordering::Relaxed),
                filters: path
                    .steps
                    .iter()
                    .enumerate()
                    .map(|(i, &m)| StepReport {
                        label: self.graph.modules[m].label.clone(),
                        visited: self.step_visited[self.step_offset[p] + i].load(Ordering::Relaxed),
                        passed: self.step_passed[self.step_offset[p] + i].load(Ordering::Relaxed),
                    })
                    .collect(),
            })
            .collect();
        let mut failed_events = lock(&self.failed_events).clone();
        failed_events.sort_by_key(|f| (f.run, f.lumi, f.event));
        Report {
            process: self.graph.process_name.clone(),
            executor: executor.into(),
            events,
            interrupted: self.coordinator.interrupted(),
            wall_s,
            cpu_s: 0.0,
            steady_throughput_ev_s: lock(&self.steady).throughput(),
            throughput_ev_s: if wall_s > 0.0 {
                events as f64 / wall_s
            } else {
                0.0
            },
            threads,
            events_in_flight,
            peak_events_in_flight: self.coordinator.peak_events_in_flight(),
            concurrent_lumis: self.concurrent_lumis,
            peak_concurrent_lumis: self.coordinator.peak_lumis(),
            peak_rss_bytes: 0,
            module_executions: modules.iter().map(|m| m.calls).sum(),
            modules,
            paths,
            failed_events,
            orderings: self.coordinator.planner().history(),
            stalls: lock(&self.stalls).clone(),
            trace: self
                .trace
                .as_ref()
                .map(super::trace::TraceBuffers::take)
                .unwrap_or_default(),
        }
    }
}

impl Observer for Engine {
    fn step_counts(&self, slot: usize, module: ModuleIdx) -> Option<(u64, u64)> {
        self.slot_data[slot]
            .load()
            .as_ref()
            .and_then(|data| data.step_counts[module].get().copied())
    }

    fn queued(&self, slot: usize, module: ModuleIdx) {
        self.queued_at.mark(slot, module);
    }

    fn end_path_started(&self, slot: usize, state: &EventState) {
        if let Some(data) = &*self.slot_data[slot].load() {
            let accepted = state
                .path_status()
                .iter()
                .map(|s| *s == PathStatus::Accepted)
                .collect();
            let _ = data
                .trigger_results
                .set(TriggerResults::new(self.graph.clone(), accepted));
        }
    }

    fn event_finished(&self, slot: usize, state: &EventState) {
        let data = self.slot_data[slot].swap(None);
        if state.failed() {
            return;
        }
        let mut outcome = PathOutcome::default();
        for (p, path) in self.graph.paths.iter().enumerate() {
            self.path_visited[p].fetch_add(1, Ordering::Relaxed);
            state.path_outcome(p, &mut outcome);
            if outcome.accepted {
                self.path_passed[p].fetch_add(1, Ordering::Relaxed);
            }
            for &(m, passed) in outcome.decisive_steps() {
                let i = self.step_offset[p] + path.position(m).expect("a path step");
                self.step_visited[i].fetch_add(1, Ordering::Relaxed);
                if passed {
                    self.step_passed[i].fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        lock(&self.steady).record(self.start.elapsed().as_secs_f64());
        let done = self.events_done.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(progress) = &self.progress {
            progress(done);
        }
        drop(data);
    }
}
