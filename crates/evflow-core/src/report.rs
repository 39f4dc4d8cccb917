//! What a job reports: throughput, per-module time, per-path cut-flow and
//! failed events. Serializes to the JSON of `evflow run --report`.

use serde::Serialize;

use crate::schedule::Transition;
use crate::trace::Trace;

/// The summary of one job.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    pub process: String,
    pub executor: String,
    pub events: u64,
    /// A graceful stop (a signal, a `StopHandle`) ended reading early:
    /// `events` were processed completely, the rest never read.
    pub interrupted: bool,
    pub wall_s: f64,
    /// Process CPU time; filled by front ends that can measure it.
    pub cpu_s: f64,
    pub throughput_ev_s: f64,
    /// Throughput between the K-th and the K-th-to-last completed event
    /// (K events in flight): the steady state, without the ramp-up and the
    /// drain of the pipeline. 0 when the job had fewer than 3K events.
    pub steady_throughput_ev_s: f64,
    pub threads: usize,
    pub events_in_flight: usize,
    pub peak_events_in_flight: usize,
    /// Luminosity blocks allowed in flight at once, and the most that were.
    pub concurrent_lumis: usize,
    pub peak_concurrent_lumis: usize,
    /// Peak resident memory; filled by front ends that can measure it.
    pub peak_rss_bytes: u64,
    pub modules: Vec<ModuleReport>,
    pub paths: Vec<PathReport>,
    /// Events a module failed on: the skipped ones (`SkipEvent`), or the
    /// one(s) that stopped the job (`Fail`).
    pub failed_events: Vec<FailedEvent>,
    /// The longest waits for serial queues, instances and exclusive
    /// resources, longest first.
    pub stalls: Vec<Stall>,
    /// Changes of the order of reorderable paths, with their reasons.
    pub orderings: Vec<crate::schedule::OrderChange>,
    /// Number of module executions.
    pub module_executions: u64,
    /// Every module execution, source read, transition, external-work
    /// wait and admission wait of a job run with `trace`: complete, in
    /// [`TraceSlice::cmp_start`](crate::TraceSlice::cmp_start) order.
    #[serde(skip)]
    pub trace: Trace,
}

#[derive(Clone, Debug, Serialize)]
pub struct ModuleReport {
    pub label: String,
    pub kind: String,
    pub concurrency: String,
    pub calls: u64,
    /// Time spent running the module's code.
    pub run_s: f64,
    /// Time spent waiting for external (asynchronous) work.
    pub wait_s: f64,
    /// Time ready work waited for admission (serial queue, cloned instance,
    /// exclusive resource).
    pub queue_s: f64,
    pub failures: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct PathReport {
    pub name: String,
    pub visited: u64,
    pub passed: u64,
    /// Every step of the path in order, with the events that reached it and
    /// the events it let through (the cut-flow).
    pub filters: Vec<StepReport>,
}

#[derive(Clone, Debug, Serialize)]
pub struct StepReport {
    pub label: String,
    pub visited: u64,
    pub passed: u64,
}

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct FailedEvent {
    pub run: u32,
    pub lumi: u32,
    pub event: u64,
    pub module: String,
    pub message: String,
}

/// Measures [`Report::steady_throughput_ev_s`] from event completion times,
/// in O(K) memory.
#[derive(Clone, Debug)]
pub struct SteadyRate {
    k: usize,
    completed: u64,
    /// Time of the K-th completion.
    window_start: Option<f64>,
    /// The last K completion times.
    recent: std::collections::VecDeque<f64>,
}

impl SteadyRate {
    pub fn new(events_in_flight: usize) -> Self {
        let k = events_in_flight.max(1);
        Self {
            k,
            completed: 0,
            window_start: None,
            recent: std::collections::VecDeque::with_capacity(k + 1),
        }
    }

    /// Records one completed event at time `t` (seconds).
    pub fn record(&mut self, t: f64) {
        self.completed += 1;
        if self.completed == self.k as u64 {
            self.window_start = Some(t);
        }
        self.recent.push_back(t);
        if self.recent.len() > self.k {
            self.recent.pop_front();
        }
    }

    /// Events per second between the K-th and the K-th-to-last completion.
    pub fn throughput(&self) -> f64 {
        let k = self.k as u64;
        if self.completed < 3 * k {
            return 0.0;
        }
        match (self.window_start, self.recent.front()) {
            (Some(start), Some(&end)) if end > start => {
                (self.completed - 2 * k) as f64 / (end - start)
            }
            _ => 0.0,
        }
    }
}

/// Work that was ready but waited for admission.
#[derive(Clone, Debug, Serialize)]
pub struct Stall {
    pub module: String,
    pub run: u32,
    pub lumi: u32,
    pub event: u64,
    pub waited_s: f64,
    /// What it waited for: "serial queue", "exclusive resource X", ...
    pub reason: String,
}

/// Tracks of external-work waits are numbered from here on, one per event
/// slot, apart from the worker threads.
pub const EXTERNAL_WAIT_TRACKS: usize = 1000;

impl Report {
    /// Finds a module's line by label.
    pub fn module(&self, label: &str) -> Option<&ModuleReport> {
        self.modules.iter().find(|m| m.label == label)
    }

    /// Finds a path's line (its cut-flow) by name.
    ///
    /// ```
    /// use evflow_core::{EmptySource, Process, RunOptions, run};
    ///
    /// let mut p = Process::new("empty");
    /// p.set_source(EmptySource::new(3));
    /// p.path("all", Vec::<String>::new());
    /// let report = run(p, &RunOptions::default()).unwrap();
    /// assert_eq!(report.path("all").unwrap().passed, 3);
    /// assert!(report.path("none").is_none());
    /// ```
    pub fn path(&self, name: &str) -> Option<&PathReport> {
        self.paths.iter().find(|p| p.name == name)
    }

    /// Chrome trace-event JSON (loadable in Perfetto and chrome://tracing),
    /// encoded straight from the trace's slices as it is serialized: a long
    /// trace is held once, as slices, not a second time as events.
    pub fn chrome_trace(&self) -> ChromeTrace<'_> {
        ChromeTrace { trace: &self.trace }
    }
}

/// The Chrome trace of a [`Report`]: serializes to
/// `{"traceEvents": [...], "displayTimeUnit": "ms"}`, the tracks' names
/// (metadata events) first, then a complete event (`"ph": "X"`) per slice
/// in the trace's order.
#[derive(Clone, Copy, Debug)]
pub struct ChromeTrace<'a> {
    trace: &'a Trace,
}

impl Serialize for ChromeTrace<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut trace = serializer.serialize_struct("ChromeTrace", 2)?;
        trace.serialize_field("traceEvents", &ChromeEvents(self.trace))?;
        trace.serialize_field("displayTimeUnit", "ms")?;
        trace.end()
    }
}

/// The events of a Chrome trace, made one at a time as they are written.
struct ChromeEvents<'a>(&'a Trace);

impl Serialize for ChromeEvents<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // Name the tracks: worker threads, and the external-work waits of
        // each event slot.
        // Inserted one by one: collecting into a set would first gather
        // every slice's track in a list.
        let mut tracks = std::collections::BTreeSet::new();
        for s in self.0 {
            tracks.insert(s.thread);
        }
        let names = tracks.into_iter().map(|tid| ChromeEvent {
            name: "thread_name",
            cat: "__metadata",
            ph: "M",
            ts: 0.0,
            dur: 0.0,
            pid: 1,
            tid,
            args: Some(ChromeArgs::Name {
                name: if tid >= EXTERNAL_WAIT_TRACKS {
                    format!("external work, event slot {}", tid - EXTERNAL_WAIT_TRACKS)
                } else {
                    format!("worker {tid}")
                },
            }),
        });
        let slices = self.0.iter().map(|s| ChromeEvent {
            name: &s.name,
            cat: s.category,
            ph: "X",
            ts: s.start_us,
            dur: s.duration_us,
            pid: 1,
            tid: s.thread,
            args: s.event.map(|e| ChromeArgs::Event {
                run: e.run,
                lumi: e.lumi,
                event: e.event,
            }),
        });
        serializer.collect_seq(names.chain(slices))
    }
}

#[derive(Serialize)]
struct ChromeEvent<'a> {
    name: &'a str,
    cat: &'a str,
    ph: &'static str,
    ts: f64,
    dur: f64,
    pid: u32,
    tid: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    args: Option<ChromeArgs>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum ChromeArgs {
    /// The event a slice belongs to.
    Event { run: u32, lumi: u32, event: u64 },
    /// A track's name (metadata).
    Name { name: String },
}

pub(crate) fn transition_name(t: &Transition) -> String {
    match t {
        Transition::BeginRun(r) => format!("beginRun {r}"),
        Transition::EndRun(r) => format!("endRun {r}"),
        Transition::BeginLumi(r, l) => format!("beginLumi {r}:{l}"),
        Transition::EndLumi(r, l) => format!("endLumi {r}:{l}"),
    }
}
