//! Native Parquet input: a reader thread decodes record batches (decompression
//! and page decoding, the expensive part) with no GIL, `prefetch` batches
//! ahead; the engine's source then copies the decoded buffers into Python
//! `bytearray`s and lets Python wrap them as awkward arrays.

use std::fs::File;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type,
    UInt32Type, UInt64Type,
};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::DataType;
use evflow_core::{EventId, ModuleError, Source, SourceProducts};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyDict, PyList, PyTuple};

use crate::batch::Shared;
use crate::source::make_batch;

pub(crate) struct ParquetSpec {
    pub files: Vec<String>,
    pub columns: Vec<String>,
    pub step_size: usize,
    /// `build(file_index, entry_start, entry_stop, columns) -> BatchData`.
    pub build: Py<PyAny>,
    pub prefetch: usize,
    /// Stop after this many events in total.
    pub entry_stop: Option<u64>,
}

/// One decoded batch, or the error that ended reading.
type Chunk = Result<(usize, u64, RecordBatch), String>;

pub(crate) struct ParquetSource {
    spec: ParquetSpec,
    shared: Arc<Shared>,
    rx: Option<Receiver<Chunk>>,
    next_index: u64,
    finished: bool,
}

impl ParquetSource {
    pub fn new(spec: ParquetSpec, shared: Arc<Shared>) -> Self {
        Self {
            spec,
            shared,
            rx: None,
            next_index: 0,
            finished: false,
        }
    }

    fn start(&mut self) {
        let (tx, rx) = sync_channel(self.spec.prefetch);
        let files = self.spec.files.clone();
        let columns = self.spec.columns.clone();
        let step = self.spec.step_size;
        let stop = self.spec.entry_stop;
        std::thread::Builder::new()
            .name("evflow-parquet".into())
            .spawn(move || read_all(files, columns, step, stop, tx))
            .expect("cannot start the Parquet reader thread");
        self.rx = Some(rx);
    }
}

fn read_all(
    files: Vec<String>,
    columns: Vec<String>,
    step: usize,
    stop: Option<u64>,
    tx: SyncSender<Chunk>,
) {
    let mut total = 0u64;
    for (fi, path) in files.iter().enumerate() {
        let reader = open(path, &columns, step);
        let reader = match reader {
            Ok(r) => r,
            Err(e) => {
                let _ = tx.send(Err(e));
                return;
            }
        };
        let mut entry = 0u64;
        for batch in reader {
            let mut batch = match batch {
                Ok(b) => b,
                Err(e) => {
                    let _ = tx.send(Err(format!("file '{path}', entries from {entry}: {e}")));
                    return;
                }
            };
            if let Some(stop) = stop {
                let left = stop.saturating_sub(total);
                if left == 0 {
                    return;
                }
                if (batch.num_rows() as u64) > left {
                    batch = batch.slice(0, left as usize);
                }
            }
            let n = batch.num_rows() as u64;
            if tx.send(Ok((fi, entry, batch))).is_err() {
                return; // the job ended
            }
            entry += n;
            total += n;
        }
    }
}

fn open(
    path: &str,
    columns: &[String],
    step: usize,
) -> Result<parquet::arrow::arrow_reader::ParquetRecordBatchReader, String> {
    let file = File::open(path).map_err(|e| format!("cannot open Parquet file '{path}': {e}"))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(|e| format!("file '{path}' is not readable Parquet: {e}"))?;
    let fields = builder.schema().fields().clone();
    let mut roots = Vec::with_capacity(columns.len());
    for c in columns {
        match fields.iter().position(|f| f.name() == c) {
            Some(i) => roots.push(i),
            None => return Err(format!("file '{path}' has no column '{c}'")),
        }
    }
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
    builder
        .with_projection(mask)
        .with_batch_size(step)
        .build()
        .map_err(|e| format!("file '{path}': {e}"))
}

/// `("flat", dtype, bytes)` or `("list", offsets_dtype, offsets, content)`.
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
            let bytes = PyByteArray::new(py, values.inner().as_slice());
            PyTuple::new(
                py,
                [
                    $crate::parquet::s(py, "flat"),
                    $crate::parquet::s(py, $dtype),
                    bytes.into_any(),
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
                    PyByteArray::new(py, offsets).into_any(),
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
                    PyByteArray::new(py, offsets).into_any(),
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
        if self.rx.is_none() {
            self.start();
        }
        // Waiting for the reader thread holds no GIL.
        let chunk = match self.rx.as_ref().expect("started").recv() {
            Ok(c) => c,
            Err(_) => {
                self.finished = true;
                return Ok(None);
            }
        };
        let (file, start, batch) = chunk.map_err(|e| {
            self.finished = true;
            ModuleError::msg(e)
        })?;
        let index = self.next_index;
        let made = Python::attach(|py| -> PyResult<_> {
            let cols = PyList::empty(py);
            for (field, array) in batch.schema().fields().iter().zip(batch.columns()) {
                cols.append((field.name().as_str(), to_python(py, field.name(), array)?))?;
            }
            let stop = start + batch.num_rows() as u64;
            let data = self.spec.build.bind(py).call1((file, start, stop, cols))?;
            make_batch(data, index, &self.shared)
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
        self.next_index += 1;
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

/// Reads a Parquet footer: `{"num_rows", "row_groups", "columns": {name: arrow type}}`.
#[pyfunction]
pub(crate) fn parquet_metadata<'py>(py: Python<'py>, path: String) -> PyResult<Bound<'py, PyDict>> {
    let meta = py.detach(|| -> Result<_, String> {
        let file =
            File::open(&path).map_err(|e| format!("cannot open Parquet file '{path}': {e}"))?;
        let builder = ParquetRecordBatchReaderBuilder::try_new(file)
            .map_err(|e| format!("file '{path}' is not readable Parquet: {e}"))?;
        let md = builder.metadata();
        let columns: Vec<(String, String)> = builder
            .schema()
            .fields()
            .iter()
            .map(|f| (f.name().clone(), f.data_type().to_string()))
            .collect();
        Ok((md.file_metadata().num_rows(), md.num_row_groups(), columns))
    });
    let (rows, groups, columns) = meta.map_err(PyOSError::new_err)?;
    let d = PyDict::new(py);
    d.set_item("num_rows", rows)?;
    d.set_item("row_groups", groups)?;
    let cols = PyDict::new(py);
    for (name, ty) in columns {
        cols.set_item(name, ty)?;
    }
    d.set_item("columns", cols)?;
    Ok(d)
}
