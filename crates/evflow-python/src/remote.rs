//! Python producers whose work may run elsewhere (a Dask worker): engine
//! modules with *external work*.
//!
//! `acquire` hands the batch's inputs to a Python *offloader*
//! (`evflow.remote`), which either queues them for a remote request or
//! decides to compute them locally, and returns at once with a token. The
//! offloader calls the [`PyCompletion`] it was given when the batch's
//! result is in (from the Dask client's callback thread): no engine thread
//! waits in between. `produce` then asks the offloader for the values of
//! the token (computing them locally if that was the decision) and puts
//! them as the batch's products.

use std::collections::HashMap;
use std::sync::Mutex;

use evflow_core::{Completion, Event, ModuleError, ModuleResult, Producer, Transitions};
use pyo3::prelude::*;

use crate::modules::{PyCall, put_products};

/// The completion handle of one batch's external work, as a Python object:
/// `done.finish()` or `done.fail(message)`, at most once (later calls
/// return `False` and change nothing, so a late duplicate answer of a
/// retried request cannot complete a batch twice).
#[pyclass(module = "evflow._evflow", name = "Completion", frozen)]
pub(crate) struct PyCompletion {
    inner: Mutex<Option<Completion>>,
}

impl PyCompletion {
    fn take(&self) -> Option<Completion> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

#[pymethods]
impl PyCompletion {
    /// The work succeeded; returns whether this call completed it.
    fn finish(&self, py: Python<'_>) -> bool {
        match self.take() {
            // The engine schedules the next step: no Python needed.
            Some(c) => py.detach(|| {
                c.finish(Ok(()));
                true
            }),
            None => false,
        }
    }

    /// The work failed with `message`; returns whether this call completed it.
    fn fail(&self, py: Python<'_>, message: String) -> bool {
        match self.take() {
            Some(c) => py.detach(|| {
                c.finish(Err(ModuleError::msg(message)));
                true
            }),
            None => false,
        }
    }

    /// Whether the work was completed already.
    #[getter]
    fn done(&self) -> bool {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_none()
    }
}

/// What `acquire` left for `produce`: the events the values are aligned
/// with and the offloader's token.
struct Pending {
    live: Option<Py<PyAny>>,
    token: Py<PyAny>,
}

/// A Python producer with an offloader:
/// `offloader.acquire(data, selection, inputs, done) -> token` and
/// `offloader.produce(token) -> list of values` (one per product).
pub(crate) struct PyRemoteProducer {
    pub call: PyCall,
    pub produces: Vec<String>,
    pub needs_all: bool,
    /// The paths whose events it serves and those whose filters it feeds
    /// (`None`: every path, any), as for
    /// [`crate::modules::PyProducer`].
    pub live_paths: Option<Vec<usize>>,
    pub probe_paths: Option<Vec<usize>>,
    pub offloader: Py<PyAny>,
    pending: Mutex<HashMap<u64, Pending>>,
}

impl PyRemoteProducer {
    pub fn new(
        call: PyCall,
        produces: Vec<String>,
        needs_all: bool,
        live_paths: Option<Vec<usize>>,
        probe_paths: Option<Vec<usize>>,
        offloader: Py<PyAny>,
    ) -> Self {
        Self {
            call,
            produces,
            needs_all,
            live_paths,
            probe_paths,
            offloader,
            pending: Mutex::new(HashMap::new()),
        }
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Pending>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Transitions for PyRemoteProducer {}

impl Producer for PyRemoteProducer {
    fn acquire(&self, ev: &Event<'_>, done: Completion) -> ModuleResult {
        let batch = self.call.batch(ev)?;
        let handle = Python::attach(|py| {
            Py::new(
                py,
                PyCompletion {
                    inner: Mutex::new(Some(done)),
                },
            )
        })
        .map_err(|e| ModuleError::msg(format!("{}: {e}", batch.label)))?;
        let result = self.call.with_python(batch, |py| {
            let live = batch.live_for(
                py,
                self.needs_all,
                self.live_paths.as_deref(),
                self.probe_paths.as_deref(),
            )?;
            let inputs = self.call.inputs(py, ev)?;
            let sel_arg = live.as_ref().map(|s| s.clone_ref(py));
            let token = self.offloader.bind(py).call_method1(
                "acquire",
                (batch.data.bind(py), sel_arg, inputs, handle.clone_ref(py)),
            )?;
            self.pending().insert(
                batch.index,
                Pending {
                    live,
                    token: token.unbind(),
                },
            );
            Ok(())
        });
        if result.is_err() {
            // The Python error (and its traceback, which may hold the
            // handle) is kept for the job's error: complete the work here
            // so the engine does not wait for a handle nobody will call.
            if let Some(c) = handle.get().take() {
                c.finish(Err(ModuleError::msg("acquire failed")));
            }
        }
        result
    }

    fn produce(&self, ev: &Event<'_>) -> ModuleResult {
        let batch = self.call.batch(ev)?;
        let Some(Pending { live, token }) = self.pending().remove(&batch.index) else {
            return Err(ModuleError::msg(format!(
                "{}: no external work was started for this batch",
                batch.label
            )));
        };
        self.call.with_python(batch, |py| {
            let out = self
                .offloader
                .bind(py)
                .call_method1("produce", (token.bind(py),))?;
            put_products(py, ev, &self.produces, live.as_ref(), &out, "offloader")
        })
    }
}
