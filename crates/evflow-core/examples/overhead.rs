//! Scheduling overhead on a synthetic graph of zero-time modules:
//! `cargo run --release -p evflow-core --example overhead -- [modules] [events] [threads] [in-flight]`.

use evflow_core::{EmptySource, ExecutorKind, Process, RunOptions};
use evflow_workloads::{self as synthetic, Timing};

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let modules = *args.first().unwrap_or(&490) as usize;
    let events = *args.get(1).unwrap_or(&5000);
    let threads = *args.get(2).unwrap_or(&1) as usize;
    let k = *args.get(3).unwrap_or(&1) as usize;
    for executor in [ExecutorKind::Sequential, ExecutorKind::Threaded] {
        let mut p = Process::new("overhead");
        p.set_source(EmptySource::new(events));
        let labels: Vec<String> = (0..modules).map(|i| format!("m{i}")).collect();
        let mut state = 12345u64;
        for i in 0..modules {
            // Each module consumes up to 6 earlier modules (a layered DAG).
            let mut consumes: Vec<&str> = Vec::new();
            for _ in 0..6.min(i) {
                state = synthetic::mix(state);
                let j = (state % i as u64) as usize;
                if !consumes.contains(&labels[j].as_str()) {
                    consumes.push(&labels[j]);
                }
            }
            p.add(synthetic::producer(
                &labels[i],
                Timing::zero(),
                &consumes,
                &[""],
            ));
        }
        let all: Vec<&str> = labels.iter().map(String::as_str).collect();
        p.add(synthetic::filter("out", Timing::zero(), &all, 1.0, 0));
        p.path("p", ["out"]);
        let opts = RunOptions {
            threads,
            events_in_flight: k,
            executor,
            ..RunOptions::default()
        };
        let r = evflow_core::run(p, &opts).unwrap();
        println!(
            "{:?}: {} events, {:.0} ev/s, {:.0} ns per module execution",
            executor,
            r.events,
            r.throughput_ev_s,
            r.wall_s * 1e9 / r.module_executions as f64
        );
    }
}
