//! Engine sources of a Python job: one that pulls batches from a Python
//! reader (uproot, synthetic, pyarrow), and one that decodes Parquet files
//! natively, without the GIL, and only builds the Python arrays with it.

use std::sync::Arc;

use evflow_core::{EventId, ModuleError, Source, SourceProducts};
use pyo3::prelude::*;

use crate::batch::{Batch, Shared, first_probes};

/// Turns a Python `BatchData` into the engine event of batch `index`.
pub(crate) fn make_batch(
    data: Bound<'_, PyAny>,
    index: u64,
    shared: &Arc<Shared>,
) -> PyResult<(Batch, EventId)> {
    let n: u64 = data.getattr("n")?.extract()?;
    let where_: String = data.getattr("where")?.extract()?;
    let weight_total: f64 = data.getattr("weight_total")?.extract()?;
    data.setattr("index", index)?;
    let label = format!("batch {index} ({where_})");
    shared
        .batches
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push((index, n, weight_total));
    let probed_first = first_probes(data.py(), &data, n, shared);
    let batch = Batch::new(
        index,
        n,
        weight_total,
        data.unbind(),
        label,
        shared.clone(),
        &probed_first,
    );
    Ok((batch, EventId::new(1, 1, index + 1)))
}

/// Pulls batches from a Python object with `next_batch() -> BatchData | None`
/// and `describe() -> str`.
pub(crate) struct PySource {
    pub reader: Py<PyAny>,
    pub shared: Arc<Shared>,
    pub next_index: u64,
    pub description: String,
}

impl Source for PySource {
    fn produces(&self) -> Vec<String> {
        vec!["batch".into()]
    }

    fn next_event(
        &mut self,
        products: &mut SourceProducts,
    ) -> Result<Option<EventId>, ModuleError> {
        self.shared.check_cancel()?;
        let index = self.next_index;
        let made = Python::attach(|py| -> Result<Option<(Batch, EventId)>, ModuleError> {
            let next = self.reader.bind(py).call_method0("next_batch");
            let data = match next {
                Ok(d) => d,
                Err(e) => return Err(self.shared.python_error(py, e, None)),
            };
            if data.is_none() {
                return Ok(None);
            }
            make_batch(data, index, &self.shared)
                .map(Some)
                .map_err(|e| self.shared.python_error(py, e, None))
        })?;
        match made {
            Some((batch, id)) => {
                self.next_index += 1;
                products.put("batch", batch);
                Ok(Some(id))
            }
            None => Ok(None),
        }
    }

    fn describe(&self) -> String {
        self.description.clone()
    }
}
