//! `evflow._evflow`: the native half of the `evflow` Python package.
//!
//! The Python package (`python/evflow`) describes an analysis; this crate
//! turns it into an evflow-core [`Process`] whose events are *batches* of
//! collision events, runs it on the engine's threads with the GIL released,
//! and hands back the report, the cut-flow records and any error.
//!
//! * [`job`]: the `Job` class: builds the process and runs it.
//! * [`batch`]: the per-batch state (selection of every path, narrowed by
//!   each filter step as the engine runs it) and the job-wide records.
//! * [`modules`]: Producer / Filter / Analyzer / Output wrappers that call
//!   Python with the GIL held only for the call.
//! * [`source`]: the engine source pulling batches from a Python reader.
//! * [`parquet`]: a native Parquet reader that decodes without the GIL.
//! * [`remote`]: producers whose work an offloader may send to a Dask
//!   worker, as the engine's external work.
//! * [`split`]: evflow-device's host/device split controller, for Python
//!   modules with a device implementation.

mod batch;
mod job;
mod modules;
mod parquet;
mod remote;
mod source;
mod split;

use pyo3::prelude::*;

use job::Job;

/// The native module.
#[pymodule]
fn _evflow(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Job>()?;
    m.add_class::<remote::PyCompletion>()?;
    m.add_class::<split::SplitController>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(parquet::parquet_metadata, m)?)?;
    m.add_function(wrap_pyfunction!(parquet::parquet_row_groups_read, m)?)?;
    m.add_function(wrap_pyfunction!(job::merge_ordering_stats, m)?)?;
    Ok(())
}
