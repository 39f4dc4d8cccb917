//! Native Parquet input: decode workers (decompression and page decoding,
//! the expensive part) run with no GIL, each on whole row groups, several
//! batches ahead of the engine; the engine's source then copies the decoded
//! buffers into Python `bytearray`s and lets Python wrap them as awkward
//! arrays, in file order.
//!
//! **Reading balanced against processing.** How many workers decode at once
//! and how many batches may be decoded ahead (the *depth*: decoded or being
//! decoded, not yet taken by the engine) are set at run time: at checkpoints
//! (every `interval` batches taken) the source hands its measurements (time
//! the engine waited for input, time workers spent decoding and blocked
//! because the depth was reached, bytes per batch) to a Python *balancer*
//! (`build.evflow_reading`, see `evflow.source.ReadBalancer`), which returns
//! the next `(workers, depth, interval)`. Without a balancer the reader uses
//! one worker and `prefetch + 1` batches of depth.
//!
//! **A row group that fails to decode** ends the job with an error naming
//! the file, the row group and its entries; with a *watch*
//! (`skip_bad_files`, see `evflow._file_gate`) the reader instead tells the
//! watch which file failed, where and why, drops that file's remaining
//! units (the workers no longer decode them) and goes on with the next
//! file, telling the watch the file of every batch it hands out, so that
//! the Python side takes back what the file's earlier batches gave.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fs::File;
use std::sync::{Arc, Condvar, LazyLock, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type,
    UInt32Type, UInt64Type,
};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::DataType;
use evflow_core::{EventId, ModuleError, Source, SourceProducts};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyDict, PyList, PyTuple};

use crate::batch::Shared;
use crate::source::make_batch;

pub(crate) struct ParquetSpec {
    pub files: Vec<String>,
    pub columns: Vec<String>,
    pub step_size: usize,
    /// `build(file_index, entry_start, entry_stop, columns) -> BatchData`;
    /// its optional attribute `evflow_reading` is the balancer.
    pub build: Py<PyAny>,
    pub prefetch: usize,
    /// Start at this entry of the first file (a row-group boundary): a
    /// chunk of a larger job (the Dask scale-out) reads from there.
    pub entry_start: u64,
    /// Stop after this many events in total.
    pub entry_stop: Option<u64>,
    /// With `skip_bad_files`: told of each batch's file (`handed(path)`),
    /// of a file whose data fail to decode (`unreadable(message, path,
    /// start, stop)`; reading goes on without the file) and of the end
    /// (`ended()`, which fails when every file was left out).
    pub watch: Option<Py<PyAny>>,
}

/// A piece of work for a decode worker: consecutive row groups of one file
/// (at most `step_size` rows together, or one larger row group, read in the
/// batches of [`batch_rows`]), and the rows to keep.
#[derive(Clone, Debug)]
struct Unit {
    file: usize,
    row_groups: Vec<usize>,
    /// Entry (in the file) of the unit's first row.
    entry: u64,
    /// Rows of the unit to deliver (fewer than it holds at the event limit).
    rows: u64,
}

/// Data of a unit that failed to decode: the message (naming the file, the
/// row groups and their entries) and the entries `[start, stop)` of the
/// row groups that failed.
#[derive(Clone, Debug)]
struct Failed {
    message: String,
    start: u64,
    stop: u64,
}

/// What a worker made of a unit: its batches, or the error that ends reading.
type Decoded = Result<Vec<RecordBatch>, Failed>;

/// Row groups decoded in this process, per file (`parquet_row_groups_read`):
/// what a test counts to see that no row group is read twice.
static ROW_GROUPS_READ: LazyLock<Mutex<HashMap<String, u64>>> = LazyLock::new(Default::default);

fn count_read(path: &str, row_groups: usize) {
    let mut read = ROW_GROUPS_READ.lock().unwrap_or_else(|e| e.into_inner());
    *read.entry(path.to_string()).or_default() += row_groups as u64;
}

/// Reading settings and measurements, shared by the engine's source (the
/// consumer) and the decode workers.
#[derive(Default)]
struct State {
    /// Next unit a worker may claim.
    next_claim: usize,
    /// Next unit the consumer takes.
    next_deliver: usize,
    ready: HashMap<usize, (Decoded, usize)>,
    /// Workers decoding now.
    decoding: usize,
    /// Workers allowed to decode at once.
    workers: usize,
    /// Units decoded or being decoded ahead of the consumer, at most.
    depth: usize,
    stop: bool,
    /// Files left out (`skip_bad_files`): their units are not decoded.
    bad_files: HashSet<usize>,
    // Measurements since the last checkpoint.
    decode_s: f64,
    ahead_s: f64,
    /// Workers blocked by the depth limit right now, and since when.
    ahead_since: Option<Instant>,
    ahead_count: usize,
}

struct Pipeline {
    state: Mutex<State>,
    changed: Condvar,
}

impl Pipeline {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Folds the time the `ahead_count` blocked workers have waited so far into
/// `ahead_s` (called whenever that count changes, and at checkpoints).
fn settle_ahead(st: &mut State) {
    let now = Instant::now();
    if let Some(since) = st.ahead_since {
        // Only the workers allowed to decode count (at most `workers`).
        let blocked = st.ahead_count.min(st.workers);
        st.ahead_s += now.duration_since(since).as_secs_f64() * blocked as f64;
    }
    st.ahead_since = Some(now);
}

/// Per-checkpoint figures of the consumer side.
#[derive(Default)]
struct Interval {
    started: Option<Instant>,
    batches: u64,
    events: u64,
    wait_s: f64,
    build_s: f64,
    bytes: u64,
}

pub(crate) struct ParquetSource {
    spec: ParquetSpec,
    shared: Arc<Shared>,
    pipeline: Option<Arc<Pipeline>>,
    units: Vec<Unit>,
    /// Batches of the unit being handed out, and where they start.
    current: VecDeque<RecordBatch>,
    current_unit: Option<Unit>,
    current_entry: u64,
    /// The unit whose decoding failed: its file and what failed.
    failed_unit: Option<(usize, Failed)>,
    next_index: u64,
    finished: bool,
    balancer: Option<Py<PyAny>>,
    interval_batches: u64,
    interval: Interval,
    checkpoints: u64,
}

impl ParquetSource {
    pub fn new(spec: ParquetSpec, shared: Arc<Shared>) -> Self {
        Self {
            spec,
            shared,
            pipeline: None,
            units: Vec::new(),
            current: VecDeque::new(),
            current_unit: None,
            current_entry: 0,
            failed_unit: None,
            next_index: 0,
            finished: false,
            balancer: None,
            interval_batches: u64::MAX,
            interval: Interval::default(),
            checkpoints: 0,
        }
    }

    /// Plans the units, asks the balancer for the first settings and
    /// starts the workers.
    fn start(&mut self) -> Result<(), String> {
        let mut metas = Vec::with_capacity(self.spec.files.len());
        for path in &self.spec.files {
            metas.push(load_metadata(path, &self.spec.columns)?);
        }
        self.units = plan_units(
            &metas,
            self.spec.step_size,
            self.spec.entry_start,
            self.spec.entry_stop,
        )
        .map_err(|e| format!("{e} (file '{}')", self.spec.files[0]))?;
        let mut workers = 1usize;
        let mut depth = self.spec.prefetch + 1;
        let mut max_workers = 1usize;
        let initial = Python::attach(|py| -> PyResult<_> {
            let build = self.spec.build.bind(py);
            if !build.hasattr("evflow_reading")? {
                return Ok(None);
            }
            let balancer = build.getattr("evflow_reading")?;
            if balancer.is_none() {
                return Ok(None);
            }
            let first: (usize, usize, u64, usize) = balancer
                .call_method1("start", (self.units.len(),))?
                .extract()?;
            Ok(Some((balancer.unbind(), first)))
        })
        .map_err(|e| format!("the Parquet reading balancer failed: {e}"))?;
        if let Some((balancer, (w, d, interval, max_w))) = initial {
            workers = w.max(1);
            depth = d.max(1);
            self.interval_batches = interval.max(1);
            max_workers = max_w.max(workers);
            self.balancer = Some(balancer);
        }
        let pipeline = Arc::new(Pipeline {
            state: Mutex::new(State {
                workers,
                depth,
                ..State::default()
            }),
            changed: Condvar::new(),
        });
        let units = Arc::new(self.units.clone());
        let metas = Arc::new(metas);
        let spawn = max_workers.min(self.units.len()).max(1);
        for i in 0..spawn {
            let (p, u, m) = (pipeline.clone(), units.clone(), metas.clone());
            let files = self.spec.files.clone();
            let step = self.spec.step_size;
            std::thread::Builder::new()
                .name(format!("evflow-parquet-{i}"))
                .spawn(move || worker(&p, &u, &m, &files, step))
                .map_err(|e| format!("cannot start a Parquet decode worker: {e}"))?;
        }
        self.pipeline = Some(pipeline);
        self.interval.started = Some(Instant::now());
        Ok(())
    }

    /// The next decoded batch and where it starts, waiting (without the GIL)
    /// for the workers if needed; `None` at the end.
    fn next_decoded(&mut self) -> Result<Option<(usize, u64, RecordBatch)>, String> {
        loop {
            if let Some(batch) = self.current.pop_front() {
                let unit = self.current_unit.as_ref().expect("a current unit");
                let start = self.current_entry;
                self.current_entry += batch.num_rows() as u64;
                return Ok(Some((unit.file, start, batch)));
            }
            let pipeline = self.pipeline.as_ref().expect("started").clone();
            let mut st = pipeline.lock();
            if st.next_deliver >= self.units.len() {
                return Ok(None);
            }
            let want = st.next_deliver;
            let waited = Instant::now();
            while !st.ready.contains_key(&want) {
                st = pipeline
                    .changed
                    .wait_timeout(st, Duration::from_millis(100))
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
                if self
                    .shared
                    .cancel
                    .load(std::sync::atomic::Ordering::Relaxed)
                {
                    return Err("cancelled".into());
                }
            }
            self.interval.wait_s += waited.elapsed().as_secs_f64();
            let (decoded, bytes) = st.ready.remove(&want).expect("ready");
            st.next_deliver += 1;
            let left_out = st.bad_files.contains(&self.units[want].file);
            drop(st);
            pipeline.changed.notify_all();
            if left_out {
                // Decoded ahead before its file was left out: nothing of it is handed out.
                continue;
            }
            self.interval.bytes += bytes as u64;
            let unit = self.units[want].clone();
            self.current_entry = unit.entry;
            match decoded {
                Ok(batches) => self.current = batches.into(),
                Err(failed) => {
                    let message = failed.message.clone();
                    self.failed_unit = Some((unit.file, failed));
                    return Err(message);
                }
            }
            self.current_unit = Some(unit);
        }
    }

    /// Keeps, as the cause of the job's error, an `InputError` naming the
    /// file and entries whose row groups failed to decode (a corrupt
    /// page): a distributed `skip_bad_files` leaves that file out by it
    /// when the error comes back from a worker.
    fn keep_unreadable(&self, file: usize, failed: &Failed) {
        let path = &self.spec.files[file];
        Python::attach(|py| {
            let made = py.import("evflow.source._common").and_then(|m| {
                m.getattr("unreadable")?
                    .call1((&failed.message, path, failed.start, failed.stop))
            });
            if let Ok(err) = made {
                let _ = self.shared.python_error(py, PyErr::from_value(err), None);
            }
        });
    }

    /// `skip_bad_files`: tells the watch that `file` failed, and leaves the
    /// file's units out (those not decoded yet are not decoded).
    fn leave_out(
        &self,
        watch: &Py<PyAny>,
        file: usize,
        failed: &Failed,
    ) -> Result<(), ModuleError> {
        let path = &self.spec.files[file];
        Python::attach(|py| {
            watch
                .bind(py)
                .call_method1(
                    "unreadable",
                    (&failed.message, path, failed.start, failed.stop),
                )
                .map(|_| ())
                .map_err(|e| self.shared.python_error(py, e, None))
        })?;
        let pipeline = self.pipeline.as_ref().expect("started");
        pipeline.lock().bad_files.insert(file);
        pipeline.changed.notify_all();
        Ok(())
    }

    /// Hands the interval's measurements to the balancer and applies its
    /// answer (called with the GIL, every `interval_batches` batches).
    fn checkpoint(&mut self, py: Python<'_>) -> PyResult<()> {
        let Some(balancer) = &self.balancer else {
            return Ok(());
        };
        let pipeline = self.pipeline.as_ref().expect("started").clone();
        let (decode_s, ahead_s, workers, depth, ready) = {
            let mut st = pipeline.lock();
            settle_ahead(&mut st);
            let out = (
                st.decode_s,
                st.ahead_s,
                st.workers,
                st.depth,
                st.ready.len(),
            );
            st.decode_s = 0.0;
            st.ahead_s = 0.0;
            out
        };
        let iv = std::mem::take(&mut self.interval);
        let wall = iv.started.map_or(0.0, |t| t.elapsed().as_secs_f64());
        self.checkpoints += 1;
        let d = PyDict::new(py);
        d.set_item("checkpoint", self.checkpoints)?;
        d.set_item("batches", iv.batches)?;
        d.set_item("events", iv.events)?;
        d.set_item("wall_s", wall)?;
        d.set_item("wait_s", iv.wait_s)?;
        d.set_item("build_s", iv.build_s)?;
        d.set_item("decode_s", decode_s)?;
        d.set_item("ahead_s", ahead_s)?;
        d.set_item("bytes", iv.bytes)?;
        d.set_item("workers", workers)?;
        d.set_item("depth", depth)?;
        d.set_item("ready", ready)?;
        d.set_item("batches_total", self.next_index)?;
        let (w, dp, interval): (usize, usize, u64) = balancer
            .bind(py)
            .call_method1("checkpoint", (d,))?
            .extract()?;
        {
            let mut st = pipeline.lock();
            st.workers = w.max(1);
            st.depth = dp.max(1);
        }
        pipeline.changed.notify_all();
        self.interval_batches = interval.max(1);
        self.interval.started = Some(Instant::now());
        Ok(())
    }
}

impl Drop for ParquetSource {
    fn drop(&mut self) {
        if let Some(p) = &self.pipeline {
            p.lock().stop = true;
            p.changed.notify_all();
        }
    }
}

struct FileMeta {
    metadata: ArrowReaderMetadata,
    mask: ProjectionMask,
}

/// Footers already read in this process, by path, modification time and
/// size: a chunk of a distributed run (and the check before a run) opens a
/// file whose footer an earlier chunk parsed (a large footer takes
/// milliseconds to parse).
type FooterKey = (String, std::time::SystemTime, u64);
static FOOTERS: Mutex<Vec<(FooterKey, ArrowReaderMetadata)>> = Mutex::new(Vec::new());
const FOOTERS_KEPT: usize = 64;

/// The footer of `path`, parsed once while the file is unchanged.
fn footer(path: &str) -> Result<ArrowReaderMetadata, String> {
    let file = File::open(path).map_err(|e| format!("cannot open Parquet file '{path}': {e}"))?;
    let key = file
        .metadata()
        .ok()
        .and_then(|m| Some((path.to_string(), m.modified().ok()?, m.len())));
    let mut cache = FOOTERS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(k) = &key
        && let Some((_, meta)) = cache.iter().find(|(have, _)| have == k)
    {
        return Ok(meta.clone());
    }
    drop(cache);
    let metadata = ArrowReaderMetadata::load(&file, ArrowReaderOptions::default())
        .map_err(|e| format!("file '{path}' is not readable Parquet: {e}"))?;
    if let Some(k) = key {
        cache = FOOTERS.lock().unwrap_or_else(|e| e.into_inner());
        cache.retain(|(have, _)| have.0 != k.0);
        if cache.len() >= FOOTERS_KEPT {
            cache.remove(0);
        }
        cache.push((k, metadata.clone()));
    }
    Ok(metadata)
}

fn load_metadata(path: &str, columns: &[String]) -> Result<FileMeta, String> {
    let metadata = footer(path)?;
    let fields = metadata.schema().fields().clone();
    let mut roots = Vec::with_capacity(columns.len());
    for c in columns {
        match fields.iter().position(|f| f.name() == c) {
            Some(i) => roots.push(i),
            None => return Err(format!("file '{path}' has no column '{c}'")),
        }
    }
    let mask = ProjectionMask::roots(metadata.metadata().file_metadata().schema_descr(), roots);
    Ok(FileMeta { metadata, mask })
}

/// Cuts the files into units: consecutive row groups of at most `step` rows
/// together (a larger row group alone, read in parts: [`batch_rows`]), from entry `start` of the first file
/// (which must begin a row group) up to `stop` events in total. The same
/// files and step give the same units, whatever the number of workers; a
/// `start` at a unit boundary gives the units that follow it.
fn plan_units(
    metas: &[FileMeta],
    step: usize,
    start: u64,
    stop: Option<u64>,
) -> Result<Vec<Unit>, String> {
    let step = step as u64;
    let mut units = Vec::new();
    let mut total = 0u64;
    'files: for (fi, meta) in metas.iter().enumerate() {
        let mut entry = 0u64;
        let mut open: Option<Unit> = None;
        for (rg, group) in meta.metadata.metadata().row_groups().iter().enumerate() {
            let rows = group.num_rows().max(0) as u64;
            if rows == 0 {
                continue;
            }
            if fi == 0 && entry < start {
                if entry + rows > start {
                    return Err(format!(
                        "entry_start {start} is inside row group {rg} (entries {entry}-{})",
                        entry + rows - 1
                    ));
                }
                entry += rows;
                continue;
            }
            let left = stop.map_or(u64::MAX, |s| s.saturating_sub(total));
            if left == 0 {
                break;
            }
            let take = rows.min(left);
            match &mut open {
                Some(u) if u.rows + rows <= step && take == rows => {
                    u.row_groups.push(rg);
                    u.rows += rows;
                }
                _ => {
                    if let Some(u) = open.take() {
                        units.push(u);
                    }
                    open = Some(Unit {
                        file: fi,
                        row_groups: vec![rg],
                        entry,
                        rows: take,
                    });
                }
            }
            entry += rows;
            total += take;
            if take < rows {
                if let Some(u) = open.take() {
                    units.push(u);
                }
                break 'files;
            }
        }
        if let Some(u) = open.take() {
            units.push(u);
        }
        if fi == 0 && entry < start {
            return Err(format!(
                "entry_start {start} is past the file's {entry} entries"
            ));
        }
    }
    Ok(units)
}

/// Rows per batch of a unit of `rows` rows. Row groups together (at most a
/// step) are one batch. A larger row group is read as a ROOT cluster is
/// (`_cluster_steps`): whole under 1.5 steps, else in `round(rows / step)`
/// parts of equal size (the last one short by less than a part), not as
/// full steps and a small remainder (3 000 rows at a step of 2 500 were
/// 2 500 + 500). The distributed planner cuts alike
/// (`distributed/chunks.py`, `_unit_batches`).
fn batch_rows(rows: u64, step: u64) -> u64 {
    if rows <= step {
        return step;
    }
    // Ties to even, as Python's `round`.
    let parts = (rows as f64 / step as f64).round_ties_even().max(1.0) as u64;
    rows.div_ceil(parts)
}

/// The error of the row groups of `unit` holding entries `from`..`to` of
/// the file: the message names the file, the row groups and their entries.
fn failed(meta: &FileMeta, path: &str, unit: &Unit, from: u64, to: u64, error: &str) -> Failed {
    let groups = meta.metadata.metadata().row_groups();
    let (mut first, mut last, mut start, mut stop) = (None, 0, from, to);
    let mut entry = unit.entry;
    for &rg in &unit.row_groups {
        let rows = groups[rg].num_rows().max(0) as u64;
        if entry < to && entry + rows > from {
            if first.is_none() {
                first = Some(rg);
                start = entry;
            }
            last = rg;
            stop = entry + rows;
        }
        entry += rows;
    }
    let which = match first {
        Some(f) if f == last => format!("row group {f}"),
        Some(f) => format!("row groups {f}-{last}"),
        None => "row groups".to_string(),
    };
    Failed {
        message: format!(
            "file '{path}', {which} (entries {start}-{}): {error}",
            stop.saturating_sub(1)
        ),
        start,
        stop,
    }
}

fn decode(meta: &FileMeta, path: &str, unit: &Unit, step: usize) -> Decoded {
    let whole = |e: String| failed(meta, path, unit, unit.entry, unit.entry + unit.rows, &e);
    let file =
        File::open(path).map_err(|e| whole(format!("cannot open Parquet file '{path}': {e}")))?;
    let per_batch = batch_rows(unit.rows, step as u64);
    count_read(path, unit.row_groups.len());
    let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(file, meta.metadata.clone())
        .with_projection(meta.mask.clone())
        .with_row_groups(unit.row_groups.clone())
        .with_batch_size(usize::try_from(per_batch).unwrap_or(usize::MAX))
        .build()
        .map_err(|e| whole(e.to_string()))?;
    let mut out = Vec::new();
    let mut left = unit.rows;
    let mut entry = unit.entry;
    for batch in reader {
        let mut batch = batch
            .map_err(|e| failed(meta, path, unit, entry, entry + per_batch, &e.to_string()))?;
        if left == 0 {
            break;
        }
        if batch.num_rows() as u64 > left {
            batch = batch.slice(0, left as usize);
        }
        left -= batch.num_rows() as u64;
        entry += batch.num_rows() as u64;
        out.push(batch);
    }
    Ok(out)
}

/// A decode worker: claims the next unit when fewer than `workers` decode
/// and the unit is within `depth` of the consumer, decodes it without any
/// lock, and files the result.
fn worker(p: &Pipeline, units: &[Unit], metas: &[FileMeta], files: &[String], step: usize) {
    let mut st = p.lock();
    loop {
        if st.stop || st.next_claim >= units.len() {
            return;
        }
        let u = st.next_claim;
        // Within the depth; and nothing is read ahead of the first batch
        // before the engine took it (the job starts as a sequential reader
        // would: the first batch's modules run before the second is read).
        let within = u < st.next_deliver + st.depth && (u == 0 || st.next_deliver > 0);
        if within && st.bad_files.contains(&units[u].file) {
            // A unit of a file left out: nothing to decode.
            st.next_claim += 1;
            st.ready.insert(u, (Ok(Vec::new()), 0));
            p.changed.notify_all();
            continue;
        }
        if st.decoding < st.workers && within {
            st.next_claim += 1;
            st.decoding += 1;
            drop(st);
            let unit = &units[u];
            let t0 = Instant::now();
            let decoded = decode(&metas[unit.file], &files[unit.file], unit, step);
            let took = t0.elapsed().as_secs_f64();
            let bytes = match &decoded {
                Ok(b) => b.iter().map(RecordBatch::get_array_memory_size).sum(),
                Err(_) => 0,
            };
            st = p.lock();
            st.decoding -= 1;
            st.decode_s += took;
            st.ready.insert(u, (decoded, bytes));
            p.changed.notify_all();
            continue;
        }
        // Blocked by the depth (the engine is behind) or by the number of workers.
        let blocked_ahead = !within && st.decoding < st.workers;
        if blocked_ahead {
            settle_ahead(&mut st);
            st.ahead_count += 1;
        }
        st = p
            .changed
            .wait_timeout(st, Duration::from_millis(200))
            .unwrap_or_else(|p| p.into_inner())
            .0;
        if blocked_ahead {
            settle_ahead(&mut st);
            st.ahead_count -= 1;
        }
    }
}

/// A read-only view of a decoded Arrow buffer, exposed through the buffer
/// protocol: `numpy.frombuffer` wraps it without copying, and the view keeps
/// the Arrow array (hence the buffer) alive as long as numpy needs it.
#[pyclass(module = "evflow._evflow", frozen)]
pub(crate) struct ArrowView {
    _owner: ArrayRef,
    addr: usize,
    len: usize,
}

#[pymethods]
impl ArrowView {
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut pyo3::ffi::Py_buffer,
        flags: std::os::raw::c_int,
    ) -> PyResult<()> {
        if flags & pyo3::ffi::PyBUF_WRITABLE == pyo3::ffi::PyBUF_WRITABLE {
            return Err(pyo3::exceptions::PyBufferError::new_err(
                "decoded Parquet buffers are read-only",
            ));
        }
        let me = slf.get();
        // SAFETY: `view` is the Py_buffer CPython passes to this slot; the
        // memory stays valid while the view object (owner of the Arrow
        // array) is alive, which `PyBuffer_FillInfo` ensures by keeping a
        // reference to it in `view.obj`.
        let ret = unsafe {
            pyo3::ffi::PyBuffer_FillInfo(
                view,
                slf.as_ptr(),
                me.addr as *mut std::os::raw::c_void,
                me.len as pyo3::ffi::Py_ssize_t,
                1,
                flags,
            )
        };
        if ret == -1 {
            return Err(PyErr::fetch(slf.py()));
        }
        Ok(())
    }

    unsafe fn __releasebuffer__(&self, _view: *mut pyo3::ffi::Py_buffer) {}

    fn __len__(&self) -> usize {
        self.len
    }
}

/// A zero-copy view of `bytes`, which belong to `owner`.
fn view<'py>(py: Python<'py>, owner: &ArrayRef, bytes: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    Ok(Bound::new(
        py,
        ArrowView {
            _owner: owner.clone(),
            addr: bytes.as_ptr() as usize,
            len: bytes.len(),
        },
    )?
    .into_any())
}

/// `("flat", dtype, buffer)` or `("list", offsets_dtype, offsets, content)`:
/// buffers are zero-copy views of the decoded Arrow arrays.
fn to_python<'py>(py: Python<'py>, name: &str, array: &ArrayRef) -> PyResult<Bound<'py, PyTuple>> {
    if array.null_count() > 0 {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "column '{name}' has missing (null) values, which the native Parquet reader does not support; \
             use ef.source.parquet(..., engine=\"pyarrow\")"
        )));
    }
    macro_rules! flat {
        ($t:ty, $dtype:expr) => {{
            let values = array.as_primitive::<$t>().values();
            let bytes = view(py, array, values.inner().as_slice())?;
            PyTuple::new(
                py,
                [
                    $crate::parquet::s(py, "flat"),
                    $crate::parquet::s(py, $dtype),
                    bytes,
                ],
            )
        }};
    }
    match array.data_type() {
        DataType::Float64 => flat!(Float64Type, "<f8"),
        DataType::Float32 => flat!(Float32Type, "<f4"),
        DataType::Int64 => flat!(Int64Type, "<i8"),
        DataType::Int32 => flat!(Int32Type, "<i4"),
        DataType::Int16 => flat!(Int16Type, "<i2"),
        DataType::Int8 => flat!(Int8Type, "|i1"),
        DataType::UInt64 => flat!(UInt64Type, "<u8"),
        DataType::UInt32 => flat!(UInt32Type, "<u4"),
        DataType::UInt16 => flat!(UInt16Type, "<u2"),
        DataType::UInt8 => flat!(UInt8Type, "|u1"),
        DataType::Boolean => {
            let b = array.as_boolean();
            let bytes: Vec<u8> = b.values().iter().map(u8::from).collect();
            PyTuple::new(
                py,
                [
                    s(py, "flat"),
                    s(py, "|b1"),
                    PyByteArray::new(py, &bytes).into_any(),
                ],
            )
        }
        DataType::List(_) => {
            let list = array.as_list::<i32>();
            let offsets = list.offsets().inner().inner().as_slice();
            let content = to_python(py, name, list.values())?;
            PyTuple::new(
                py,
                [
                    s(py, "list"),
                    s(py, "<i4"),
                    view(py, array, offsets)?,
                    content.into_any(),
                ],
            )
        }
        DataType::LargeList(_) => {
            let list = array.as_list::<i64>();
            let offsets = list.offsets().inner().inner().as_slice();
            let content = to_python(py, name, list.values())?;
            PyTuple::new(
                py,
                [
                    s(py, "list"),
                    s(py, "<i8"),
                    view(py, array, offsets)?,
                    content.into_any(),
                ],
            )
        }
        other => Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "column '{name}' has Arrow type {other}, which the native Parquet reader does not support \
             (numbers, booleans and lists of them are); use ef.source.parquet(..., engine=\"pyarrow\")"
        ))),
    }
}

fn s<'py>(py: Python<'py>, text: &str) -> Bound<'py, PyAny> {
    pyo3::types::PyString::new(py, text).into_any()
}

impl Source for ParquetSource {
    fn produces(&self) -> Vec<String> {
        vec!["batch".into()]
    }

    fn next_event(
        &mut self,
        products: &mut SourceProducts,
    ) -> Result<Option<EventId>, ModuleError> {
        self.shared.check_cancel()?;
        if self.finished {
            return Ok(None);
        }
        if self.pipeline.is_none()
            && let Err(e) = self.start()
        {
            self.finished = true;
            return Err(ModuleError::msg(e));
        }
        // Waiting for the decode workers holds no GIL.
        let (file, start, batch) = loop {
            match self.next_decoded() {
                Ok(Some(x)) => break x,
                Ok(None) => {
                    self.finished = true;
                    if let Some(watch) = &self.spec.watch {
                        Python::attach(|py| {
                            watch
                                .bind(py)
                                .call_method0("ended")
                                .map(|_| ())
                                .map_err(|e| self.shared.python_error(py, e, None))
                        })?;
                    }
                    return Ok(None);
                }
                Err(e) => {
                    let failed = self.failed_unit.take();
                    if let (Some(watch), Some((file, failed))) = (&self.spec.watch, &failed) {
                        self.shared.check_cancel()?;
                        // The file is left out; the next one is read.
                        if let Err(e) = self.leave_out(watch, *file, failed) {
                            self.finished = true;
                            return Err(e);
                        }
                        continue;
                    }
                    self.finished = true;
                    self.shared.check_cancel()?;
                    if let Some((file, failed)) = failed {
                        self.keep_unreadable(file, &failed);
                    }
                    return Err(ModuleError::msg(e));
                }
            }
        };
        let index = self.next_index;
        let t0 = Instant::now();
        if index == 0 {
            // Filling the pipeline is not starvation: measure from the first batch on.
            self.interval = Interval {
                started: Some(t0),
                bytes: self.interval.bytes,
                ..Interval::default()
            };
        }
        let made = Python::attach(|py| -> PyResult<_> {
            if let Some(watch) = &self.spec.watch {
                watch
                    .bind(py)
                    .call_method1("handed", (&self.spec.files[file],))?;
            }
            let cols = PyList::empty(py);
            for (field, array) in batch.schema().fields().iter().zip(batch.columns()) {
                cols.append((field.name().as_str(), to_python(py, field.name(), array)?))?;
            }
            let stop = start + batch.num_rows() as u64;
            let data = self.spec.build.bind(py).call1((file, start, stop, cols))?;
            let made = make_batch(data, index, &self.shared)?;
            self.interval.build_s += t0.elapsed().as_secs_f64();
            self.interval.batches += 1;
            self.interval.events += batch.num_rows() as u64;
            self.next_index += 1;
            if self.interval.batches >= self.interval_batches {
                self.checkpoint(py)?;
            }
            Ok(made)
        });
        let (b, id) = match made {
            Ok(x) => x,
            Err(e) => {
                let path = &self.spec.files[file];
                let message = Python::attach(|py| self.shared.python_error(py, e, None));
                return Err(ModuleError::msg(format!(
                    "file '{path}', entries from {start}: {message}"
                )));
            }
        };
        products.put("batch", b);
        Ok(Some(id))
    }

    fn describe(&self) -> String {
        match self.spec.files.as_slice() {
            [one] => format!("Parquet file '{one}'"),
            many => format!("{} Parquet files", many.len()),
        }
    }
}

/// Row groups the native reader decoded in this process, per file (as the
/// job listed it): `{path: count}`, counted since the process started.
#[pyfunction]
pub(crate) fn parquet_row_groups_read(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    for (path, n) in ROW_GROUPS_READ
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
    {
        d.set_item(path, n)?;
    }
    Ok(d)
}

/// Reads a Parquet footer: `{"num_rows", "row_groups", "columns": {name: arrow type}}`.
#[pyfunction]
pub(crate) fn parquet_metadata<'py>(py: Python<'py>, path: String) -> PyResult<Bound<'py, PyDict>> {
    let meta = py.detach(|| -> Result<_, String> {
        let meta = footer(&path)?;
        let md = meta.metadata();
        let columns: Vec<(String, String, bool)> = meta
            .schema()
            .fields()
            .iter()
            .map(|f| {
                let ty = f.data_type();
                (f.name().clone(), ty.to_string(), native_type(ty))
            })
            .collect();
        Ok((md.file_metadata().num_rows(), md.num_row_groups(), columns))
    });
    let (rows, groups, columns) = meta.map_err(PyOSError::new_err)?;
    let d = PyDict::new(py);
    d.set_item("num_rows", rows)?;
    d.set_item("row_groups", groups)?;
    let cols = PyDict::new(py);
    let native = PyDict::new(py);
    for (name, ty, ok) in columns {
        native.set_item(&name, ok)?;
        cols.set_item(name, ty)?;
    }
    d.set_item("columns", cols)?;
    d.set_item("native", native)?;
    Ok(d)
}

/// Whether the native reader decodes a column of Arrow type `ty` (what
/// `to_python` handles): numbers, booleans, and lists of them.
fn native_type(ty: &DataType) -> bool {
    match ty {
        DataType::Float64
        | DataType::Float32
        | DataType::Int64
        | DataType::Int32
        | DataType::Int16
        | DataType::Int8
        | DataType::UInt64
        | DataType::UInt32
        | DataType::UInt16
        | DataType::UInt8
        | DataType::Boolean => true,
        DataType::List(field) | DataType::LargeList(field) => native_type(field.data_type()),
        _ => false,
    }
}
