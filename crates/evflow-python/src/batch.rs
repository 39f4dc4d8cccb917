//! The per-batch state shared by the Python modules of one engine event, and
//! the job-wide state (cut-flow records, errors, cancellation) they report to.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use evflow_core::ModuleError;
use evflow_core::ordering::{OrderingPlanner, ProbedProducer};
use pyo3::prelude::*;
use pyo3::types::PyList;

/// One cut-flow measurement: a filter step of a path on one batch.
#[derive(Clone, Debug)]
pub(crate) struct CutRecord {
    pub batch: u64,
    pub path: u32,
    pub step: u32,
    /// Position of this step among the steps of the path executed on the
    /// batch (0 = first): the execution order.
    pub position: u32,
    pub seen: u64,
    pub passed: u64,
    pub w_seen: f64,
    pub w_passed: f64,
}

/// A finished batch: its index and, per path, the events (and sum of
/// weights) the path accepted.
pub(crate) type BatchFinal = (u64, Vec<(u64, f64)>);

/// What every module wrapper of a job shares.
pub(crate) struct Shared {
    pub n_paths: usize,
    /// Steps of each path.
    pub path_len: Vec<usize>,
    /// Per path, per step: the steps (bits) it must follow (`after=`): on
    /// a sampled batch's subsample it decides only on the events that all
    /// of them passed, as it does on the path (a guard like `nJet >= 2`
    /// before `Jet_pt[:, 1]`); extended by the pairs the first probe
    /// infers (see [`first_probes`]).
    pub step_preds: Mutex<Vec<Vec<u64>>>,
    /// Python helper: `union(list_of_index_arrays) -> index_array`.
    pub union: Py<PyAny>,
    /// Python helper: `intersect(a, b) -> index_array`.
    pub intersect: Py<PyAny>,
    /// Python helper: `weight_sum(batch_data, selection) -> float`.
    pub weight_sum: Py<PyAny>,
    pub cancel: AtomicBool,
    pub skip_failed: bool,
    /// Python callable told the index of a batch that failed (skip mode).
    pub on_batch_failed: Option<Py<PyAny>>,
    pub records: Mutex<Vec<CutRecord>>,
    /// (batch index, events, total weight) of every batch read.
    pub batches: Mutex<Vec<(u64, u64, f64)>>,
    /// (batch index, [(events, weight) accepted by each path]) of every
    /// batch finished.
    pub finals: Mutex<Vec<BatchFinal>>,
    pub failed: Mutex<Vec<u64>>,
    /// The first Python exception raised by a module or the source, kept to
    /// chain it to the error the job raises.
    pub first_error: Mutex<Option<PyErr>>,
    pub events_done: AtomicU64,
    pub batches_done: AtomicU64,
    /// The adaptive planner of the job, once the engine built it: batches it
    /// samples on a path get per-event decisions of a subsample.
    pub planner: Arc<OnceLock<Arc<OrderingPlanner>>>,
    /// Python helper: `probe(n) -> index_array`, the subsample of a batch
    /// of `n` events whose per-event decisions are measured.
    pub probe: Option<Py<PyAny>>,
    /// Python helper: `first_probe(data, path) -> (known, passed, timings,
    /// producers) | None`, every filter of a path (and the producers it
    /// needs) run on a subsample of the batch before it enters the path:
    /// per step, the decided and passed flags per event and its own
    /// `(seconds, events)` timings; per producer run, `(label, seconds,
    /// events)`, which the planner charges as it charges the producer.
    pub first_probe: Option<Py<PyAny>>,
    /// Per path: a first probe was tried (once per job: one that failed or
    /// decided nothing leaves the path to the batches' own probes).
    first_tried: Mutex<Vec<bool>>,
    /// The number of the source's first batch in the whole job (a chunk of
    /// a distributed run): the planner draws which batches it samples from
    /// this number, not the chunk's own count, so that chunks do not all
    /// sample (and skip) the same positions of their batches.
    pub first_batch: u64,
}

impl Shared {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        path_len: Vec<usize>,
        step_preds: Vec<Vec<u64>>,
        union: Py<PyAny>,
        intersect: Py<PyAny>,
        weight_sum: Py<PyAny>,
        skip_failed: bool,
        on_batch_failed: Option<Py<PyAny>>,
        probe: Option<Py<PyAny>>,
        first_probe: Option<Py<PyAny>>,
        first_batch: u64,
    ) -> Self {
        Self {
            first_batch,
            planner: Arc::new(OnceLock::new()),
            probe,
            first_probe,
            first_tried: Mutex::new(vec![false; path_len.len()]),
            n_paths: path_len.len(),
            path_len,
            step_preds: Mutex::new(step_preds),
            union,
            intersect,
            weight_sum,
            cancel: AtomicBool::new(false),
            skip_failed,
            on_batch_failed,
            records: Mutex::new(Vec::new()),
            batches: Mutex::new(Vec::new()),
            finals: Mutex::new(Vec::new()),
            failed: Mutex::new(Vec::new()),
            first_error: Mutex::new(None),
            events_done: AtomicU64::new(0),
            batches_done: AtomicU64::new(0),
        }
    }

    pub fn check_cancel(&self) -> Result<(), ModuleError> {
        if self.cancel.load(Ordering::Relaxed) {
            Err(ModuleError::msg("interrupted"))
        } else {
            Ok(())
        }
    }

    /// Keeps the first Python error (for chaining) and turns it into the
    /// engine's error message, prefixed with where it happened.
    pub fn python_error(&self, py: Python<'_>, err: PyErr, batch: Option<&Batch>) -> ModuleError {
        let text = format_exception(py, &err);
        {
            let mut first = self.first_error.lock().unwrap_or_else(|p| p.into_inner());
            if first.is_none() {
                *first = Some(err);
            }
        }
        match batch {
            Some(b) => ModuleError::msg(format!("{}: {text}", b.label)),
            None => ModuleError::msg(text),
        }
    }

    /// Records that a batch failed (skip mode) and tells the Python side.
    pub fn batch_failed(&self, py: Python<'_>, batch: &Batch) {
        if !self.skip_failed {
            return;
        }
        {
            let mut failed = self.failed.lock().unwrap_or_else(|p| p.into_inner());
            if failed.contains(&batch.index) {
                return;
            }
            failed.push(batch.index);
        }
        if let Some(cb) = &self.on_batch_failed {
            // A failing notification must not hide the original error.
            let _ = cb.bind(py).call1((batch.index,));
        }
    }

    pub fn record(&self, rec: CutRecord) {
        self.records
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(rec);
    }
}

/// `ExceptionType: message`, as Python prints its last line.
pub(crate) fn format_exception(py: Python<'_>, err: &PyErr) -> String {
    let ty = err.get_type(py);
    let name = ty
        .qualname()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "Exception".into());
    let value = err
        .value(py)
        .str()
        .map(|s| s.to_string())
        .unwrap_or_default();
    if value.is_empty() {
        name
    } else {
        format!("{name}: {value}")
    }
}

/// The current selection of one path on one batch: the indices (into the
/// batch) of the events still on the path; `None` means every event.
struct PathSel {
    sel: Option<Py<PyAny>>,
    n: u64,
    /// Sum of the weights of the selected events.
    w: f64,
    /// Steps of this path already executed on the batch.
    steps_done: u32,
}

/// Before a batch of `len` events enters its paths: on each path whose
/// planner has decided nothing from data yet, the batch first runs its
/// probe subsample through every filter of the path, and the planner
/// decides from those per-event vectors and timings at once, on this
/// thread; the batch (and every batch read after it) then starts the path
/// in the decided order, not the written one. Returns, per path, whether
/// it was probed so. It is tried once per path: a filter raising on the
/// subsample is left undecided there (the batch's own run reports the error
/// with the module that raised it), a probe that fails or decides nothing
/// leaves the path to the probes of the batches' own runs. A filter that
/// raised on the probe but decided on the events that filters written
/// before it passed comes with those pairs (`guards(path)`), which the path
/// takes as precedence constraints before it decides
/// (`OrderingPlanner::add_precedence`).
pub(crate) fn first_probes(
    py: Python<'_>,
    data: &Bound<'_, PyAny>,
    len: u64,
    shared: &Shared,
) -> Vec<bool> {
    let mut done = vec![false; shared.n_paths];
    let (Some(planner), Some(run)) = (shared.planner.get(), &shared.first_probe) else {
        return done;
    };
    if len == 0 {
        return done;
    }
    type Probed = (
        Vec<Vec<bool>>,
        Vec<Vec<bool>>,
        Vec<Vec<(f64, u64)>>,
        Vec<(String, f64, u64)>,
    );
    for (p, probed) in done.iter_mut().enumerate() {
        if !planner.wants_first_probe(p) {
            continue;
        }
        {
            let mut tried = shared.first_tried.lock().unwrap_or_else(|e| e.into_inner());
            if std::mem::replace(&mut tried[p], true) {
                continue;
            }
        }
        let Ok(out) = run.bind(py).call1((data, p)) else {
            continue;
        };
        let Ok(Some((known, passed, seconds, producers))) = out.extract::<Option<Probed>>() else {
            continue;
        };
        let guards: Vec<(usize, usize)> = run
            .bind(py)
            .call_method1("guards", (p,))
            .and_then(|g| g.extract())
            .unwrap_or_default();
        // A cut that failed on the probe but decided where cuts written
        // before it passed: the pairs `(guard, cut)` bind the path as if
        // written with `after=`; refused (a cycle), the probe hears it and
        // the cut keeps failing with its error.
        if !guards.is_empty() {
            match planner.add_precedence(p, &guards) {
                Ok(()) => {
                    let mut preds = shared.step_preds.lock().unwrap_or_else(|e| e.into_inner());
                    if let Some(steps) = preds.get_mut(p) {
                        for &(earlier, later) in &guards {
                            if let Some(s) = steps.get_mut(later) {
                                *s |= 1 << earlier;
                            }
                        }
                    }
                }
                Err(why) => {
                    // Only the probe's report depends on it: the job goes on.
                    let _ = run.bind(py).call_method1("refused", (p, why.to_string()));
                }
            }
        }
        let n_events = known.iter().map(Vec::len).max().unwrap_or(0);
        let mut rows = vec![(0u64, 0u64); n_events];
        for (j, (k, ok)) in known.iter().zip(&passed).enumerate().take(64) {
            set_step_bits(&mut rows, j, k, ok);
        }
        let producers: Vec<ProbedProducer> = producers
            .into_iter()
            .map(|(label, seconds, events)| ProbedProducer {
                label,
                seconds,
                events,
            })
            .collect();
        planner.decide_from_probe(p, &rows, &seconds, &producers);
        *probed = true;
    }
    done
}

/// Sets bit `step` of each event's `(known, passed)` row: known where
/// `known[e]`, passed where it also `passed[e]` (`rows` as long as `known`
/// at least, `step` below 64).
fn set_step_bits(rows: &mut [(u64, u64)], step: usize, known: &[bool], passed: &[bool]) {
    for (e, (&k, &p)) in known.iter().zip(passed).enumerate() {
        if k {
            rows[e].0 |= 1 << step;
            if p {
                rows[e].1 |= 1 << step;
            }
        }
    }
}

/// One batch of events: the engine event of a Python job.
pub(crate) struct Batch {
    pub index: u64,
    pub len: u64,
    /// The Python `BatchData` (columns, file, entry range).
    pub data: Py<PyAny>,
    /// "batch 3 (file 'a.root', tree 'events', entries 100000-149999)".
    pub label: String,
    paths: Mutex<Vec<PathSel>>,
    shared: std::sync::Arc<Shared>,
    /// Set when the planner samples the batch on some path.
    probe: Option<Probe>,
}

/// The subsample of a sampled batch on which every filter of the sampled
/// paths also decides, event by event: the planner's per-event joint pass
/// vectors (a bounded cost: `probe(n)` events, whatever the batch size).
struct Probe {
    /// Per path: whether the planner samples the batch on it.
    sampled: Vec<bool>,
    /// The index array of the subsample (made on first use, with the GIL).
    events: OnceLock<Py<PyAny>>,
    /// Per path, per subsample event: (decided, passed) bits by step;
    /// and per path, the steps that recorded their decisions.
    bits: Mutex<Vec<Vec<(u64, u64)>>>,
    recorded: Mutex<Vec<u64>>,
}

impl Batch {
    pub fn new(
        index: u64,
        len: u64,
        weight_total: f64,
        data: Py<PyAny>,
        label: String,
        shared: std::sync::Arc<Shared>,
        probed_first: &[bool],
    ) -> Self {
        let paths = (0..shared.n_paths)
            .map(|_| PathSel {
                sel: None,
                n: len,
                w: weight_total,
                steps_done: 0,
            })
            .collect();
        let probe = match (shared.planner.get(), &shared.probe) {
            (Some(planner), Some(_)) if len > 0 => {
                // A path whose decision came from this batch's first probe
                // already has its subsample's vectors.
                let sampled: Vec<bool> = (0..shared.n_paths)
                    .map(|p| {
                        !probed_first.get(p).copied().unwrap_or(false)
                            && planner.wants_event_samples(p, shared.first_batch + index)
                    })
                    .collect();
                sampled.iter().any(|&s| s).then(|| Probe {
                    bits: Mutex::new(vec![Vec::new(); sampled.len()]),
                    recorded: Mutex::new(vec![0; sampled.len()]),
                    sampled,
                    events: OnceLock::new(),
                })
            }
            _ => None,
        };
        Self {
            probe,
            index,
            len,
            data,
            label,
            paths: Mutex::new(paths),
            shared,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<PathSel>> {
        self.paths.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The selection of path `p` now, its size, and how many of its steps ran.
    pub fn path_selection(&self, py: Python<'_>, p: usize) -> (Option<Py<PyAny>>, u64, u32) {
        let paths = self.lock();
        let s = &paths[p];
        (s.sel.as_ref().map(|x| x.clone_ref(py)), s.n, s.steps_done)
    }

    /// Narrows path `p` with the result `new` of a step that started from
    /// the selection `read` (`None`: every event). Steps of one path may run
    /// concurrently on a batch (a planner may group them): when another
    /// step narrowed the path meanwhile, the two results are intersected, so
    /// no narrowing is lost whatever the order.
    pub fn narrow(
        &self,
        py: Python<'_>,
        p: usize,
        read: Option<&Py<PyAny>>,
        new: Option<Py<PyAny>>,
        new_n: u64,
        new_w: f64,
    ) -> PyResult<()> {
        fn ptr(x: Option<&Py<PyAny>>) -> *mut pyo3::ffi::PyObject {
            x.map_or(std::ptr::null_mut(), |o| o.as_ptr())
        }
        let mut base = ptr(read);
        let mut candidate = (new.as_ref().map(|x| x.clone_ref(py)), new_n, new_w);
        loop {
            let current = {
                let mut paths = self.lock();
                let s = &mut paths[p];
                if ptr(s.sel.as_ref()) == base {
                    (s.sel, s.n, s.w) = candidate;
                    s.steps_done += 1;
                    return Ok(());
                }
                (s.sel.as_ref().map(|x| x.clone_ref(py)), s.n, s.w)
            };
            base = ptr(current.0.as_ref());
            candidate = match (current, &new) {
                (cur, None) => cur,
                ((None, _, _), Some(_)) => (new.as_ref().map(|x| x.clone_ref(py)), new_n, new_w),
                ((Some(cur), _, _), Some(n)) => {
                    let both = self.shared.intersect.bind(py).call1((cur, n.bind(py)))?;
                    let count = both.len()? as u64;
                    let w: f64 = self
                        .shared
                        .weight_sum
                        .bind(py)
                        .call1((self.data.bind(py), &both))?
                        .extract()?;
                    (Some(both.unbind()), count, w)
                }
            };
        }
    }

    /// The union of the selections of `paths` (all paths when `None`), as an
    /// index array, or `None` for every event.
    pub fn union(&self, py: Python<'_>, paths: Option<&[usize]>) -> PyResult<Option<Py<PyAny>>> {
        let sels: Vec<Py<PyAny>> = {
            let all = self.lock();
            let mut sels = Vec::new();
            let chosen: Box<dyn Iterator<Item = &PathSel>> = match paths {
                Some(list) => Box::new(list.iter().map(|&p| &all[p])),
                None => Box::new(all.iter()),
            };
            for s in chosen {
                match &s.sel {
                    None => return Ok(None),
                    Some(x) => sels.push(x.clone_ref(py)),
                }
            }
            sels
        };
        match sels.len() {
            0 => Ok(None),
            1 => Ok(sels.into_iter().next()),
            _ => {
                let list = PyList::new(py, sels)?;
                Ok(Some(self.shared.union.bind(py).call1((list,))?.unbind()))
            }
        }
    }

    /// The events a producer computes on: every event that one of
    /// `live_paths` (the paths it serves; `None`: every path) still holds,
    /// or all of them when an analyzer reading every event consumes the
    /// product (`needs_all`); and the subsample of a batch
    /// sampled on one of `probe_paths` (`None`: any path), the paths whose
    /// filters the producer feeds: one that feeds only histograms, skims or
    /// analyzers computes on the paths' events, as without sampling.
    pub fn live_for(
        &self,
        py: Python<'_>,
        needs_all: bool,
        live_paths: Option<&[usize]>,
        probe_paths: Option<&[usize]>,
    ) -> PyResult<Option<Py<PyAny>>> {
        if needs_all || self.shared.n_paths == 0 {
            return Ok(None);
        }
        let live = self.union(py, live_paths)?;
        if !self.probed_on(probe_paths) {
            return Ok(live);
        }
        match (live, self.probe_events(py, None)?) {
            (Some(live), Some(probe)) => {
                let list = PyList::new(py, [live, probe])?;
                Ok(Some(self.shared.union.bind(py).call1((list,))?.unbind()))
            }
            (live, _) => Ok(live),
        }
    }

    /// The subsample whose events every filter of path `path` (any sampled
    /// path when `None`) decides on, when the planner samples the batch
    /// there.
    pub fn probe_events(&self, py: Python<'_>, path: Option<usize>) -> PyResult<Option<Py<PyAny>>> {
        let (Some(probe), Some(make)) = (&self.probe, &self.shared.probe) else {
            return Ok(None);
        };
        if let Some(p) = path
            && !probe.sampled.get(p).copied().unwrap_or(false)
        {
            return Ok(None);
        }
        if let Some(events) = probe.events.get() {
            return Ok(Some(events.clone_ref(py)));
        }
        let events = make.bind(py).call1((self.len,))?.unbind();
        Ok(Some(probe.events.get_or_init(|| events).clone_ref(py)))
    }

    /// Whether the batch is sampled on one of `paths` (`None`: any path).
    pub fn probed_on(&self, paths: Option<&[usize]>) -> bool {
        let Some(probe) = &self.probe else {
            return false;
        };
        match paths {
            None => probe.sampled.iter().any(|&s| s),
            Some(list) => list
                .iter()
                .any(|&p| probe.sampled.get(p).copied().unwrap_or(false)),
        }
    }

    /// Positions in the subsample of path `path` at which every step of
    /// `steps` (bits) decided and passed.
    pub fn probe_passed_all(&self, path: usize, steps: u64) -> Vec<usize> {
        let Some(probe) = &self.probe else {
            return Vec::new();
        };
        let bits = probe.bits.lock().unwrap_or_else(|p| p.into_inner());
        bits.get(path)
            .map(|rows| {
                rows.iter()
                    .enumerate()
                    .filter(|(_, (known, passed))| {
                        known & steps == steps && passed & steps == steps
                    })
                    .map(|(i, _)| i)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Records the decisions of step `step` of path `path` on the
    /// subsample: `known[e]` when its inputs covered event `e`. Once every
    /// step of the path recorded them, the planner gets them at once (not
    /// when the batch is dropped): its first decision then comes before the
    /// batches in flight start their paths.
    pub fn record_probe(&self, path: usize, step: usize, known: &[bool], passed: &[bool]) {
        let Some(probe) = &self.probe else { return };
        if step >= 64 {
            return;
        }
        let complete = {
            let mut bits = probe.bits.lock().unwrap_or_else(|p| p.into_inner());
            let Some(rows) = bits.get_mut(path) else {
                return;
            };
            if rows.len() < known.len() {
                rows.resize(known.len(), (0, 0));
            }
            set_step_bits(rows, step, known, passed);
            let mut recorded = probe.recorded.lock().unwrap_or_else(|p| p.into_inner());
            recorded[path] |= 1 << step;
            let len = self.shared.path_len.get(path).copied().unwrap_or(0);
            (len > 0 && recorded[path].count_ones() as usize == len).then(|| std::mem::take(rows))
        };
        if let Some(rows) = complete {
            self.send_probe(path, &rows);
        }
    }

    fn send_probe(&self, path: usize, rows: &[(u64, u64)]) {
        if let (Some(probe), Some(planner)) = (&self.probe, self.shared.planner.get())
            && probe.sampled[path]
            && !rows.is_empty()
        {
            planner.observe_event_samples(path, rows);
        }
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        if let Some(probe) = &self.probe {
            let bits = std::mem::take(&mut *probe.bits.lock().unwrap_or_else(|p| p.into_inner()));
            for (p, rows) in bits.iter().enumerate() {
                self.send_probe(p, rows);
            }
        }
        let finals = self.lock().iter().map(|s| (s.n, s.w)).collect();
        self.shared
            .finals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((self.index, finals));
        self.shared
            .events_done
            .fetch_add(self.len, Ordering::Relaxed);
        self.shared.batches_done.fetch_add(1, Ordering::Relaxed);
    }
}

/// A product made by a Python producer: the value and the selection of the
/// batch it is aligned with (`None`: every event).
pub(crate) struct PyProduct {
    pub sel: Option<Py<PyAny>>,
    pub value: Py<PyAny>,
}
