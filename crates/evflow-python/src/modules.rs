//! evflow-core modules that call Python: each one acquires the GIL only for
//! the call, reads and narrows the batch's per-path selections, and stores
//! its results as [`PyProduct`]s.

use std::sync::Arc;

use evflow_core::{
    Analyzer, Event, Filter, ModuleError, ModuleResult, Output, Producer, Transitions,
    TriggerResults,
};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use crate::batch::{Batch, CutRecord, PyProduct, Shared};

/// What every Python module wrapper holds.
pub(crate) struct PyCall {
    pub runner: Py<PyAny>,
    /// Number of products (after `source:batch`) the module consumes.
    pub n_inputs: usize,
    pub shared: Arc<Shared>,
}

impl PyCall {
    pub(crate) fn batch<'a>(&self, ev: &Event<'a>) -> ModuleResult<&'a Batch> {
        self.shared.check_cancel()?;
        ev.get_nth::<Batch>(0)
    }

    /// The consumed products as a list of `(selection, value)` tuples.
    pub(crate) fn inputs<'py>(
        &self,
        py: Python<'py>,
        ev: &Event<'_>,
    ) -> Result<Bound<'py, PyList>, Failure> {
        let list = PyList::empty(py);
        for i in 1..=self.n_inputs {
            let p: &PyProduct = ev.get_nth(i).map_err(Failure::Engine)?;
            let sel = p.sel.as_ref().map(|s| s.clone_ref(py));
            let sel = match sel {
                Some(s) => s.into_bound(py),
                None => py.None().into_bound(py),
            };
            let pair =
                PyTuple::new(py, [sel, p.value.bind(py).clone()]).map_err(Failure::Python)?;
            list.append(pair).map_err(Failure::Python)?;
        }
        Ok(list)
    }

    /// Runs `body` holding the GIL; maps Python errors to a module error that
    /// names the batch, and records the failure.
    pub(crate) fn with_python<T>(
        &self,
        batch: &Batch,
        body: impl FnOnce(Python<'_>) -> Result<T, Failure>,
    ) -> ModuleResult<T> {
        Python::attach(|py| match body(py) {
            Ok(v) => Ok(v),
            Err(f) => {
                let err = match f {
                    Failure::Python(e) => self.shared.python_error(py, e, Some(batch)),
                    Failure::Engine(e) => ModuleError::msg(format!("{}: {e}", batch.label)),
                };
                self.shared.batch_failed(py, batch);
                Err(err)
            }
        })
    }
}

pub(crate) enum Failure {
    Python(PyErr),
    Engine(ModuleError),
}

impl From<PyErr> for Failure {
    fn from(e: PyErr) -> Self {
        Failure::Python(e)
    }
}

/// A Python producer: `runner(data, selection, inputs) -> list of values`,
/// one per declared product, aligned with `selection`.
pub(crate) struct PyProducer {
    pub call: PyCall,
    pub produces: Vec<String>,
    /// Some consumer (directly or through producers) reads every event.
    pub needs_all: bool,
    /// The paths whose events it serves (`None`: every path): their
    /// filters, or the analyzers, histograms and skims following them,
    /// read its products; another path's events are not computed on.
    pub live_paths: Option<Vec<usize>>,
    /// The paths whose filters it feeds (`None`: any): it computes on the
    /// subsample of a batch sampled on one of them.
    pub probe_paths: Option<Vec<usize>>,
}

impl Transitions for PyProducer {}

impl Producer for PyProducer {
    fn produce(&self, ev: &Event<'_>) -> ModuleResult {
        let batch = self.call.batch(ev)?;
        self.call.with_python(batch, |py| {
            let probe_paths = self.probe_paths.as_deref();
            let live_paths = self.live_paths.as_deref();
            let mut live = batch.live_for(py, self.needs_all, live_paths, probe_paths)?;
            let run = |sel: Option<&Py<PyAny>>| -> Result<Bound<'_, PyAny>, Failure> {
                let inputs = self.call.inputs(py, ev)?;
                let sel_arg = sel.map(|s| s.clone_ref(py));
                Ok(self
                    .call
                    .runner
                    .bind(py)
                    .call1((batch.data.bind(py), sel_arg, inputs))?)
            };
            let out = match run(live.as_ref()) {
                Ok(out) => out,
                // On a sampled batch the subsample's events are added, also
                // those a guard (`after=`) of the product's filter rejected,
                // on which the producer may fail (`Jet_pt[:, 1]` where
                // `nJet < 2`). Those events are no path's: the product is
                // computed on the paths' events alone, and the subsample's
                // decisions that need it stay undecided.
                Err(Failure::Python(_)) if live.is_some() && batch.probed_on(probe_paths) => {
                    live = batch.union(py, live_paths)?;
                    run(live.as_ref())?
                }
                Err(e) => return Err(e),
            };
            put_products(
                py,
                ev,
                &self.produces,
                live.as_ref(),
                &out,
                "producer runner",
            )
        })
    }
}

/// Puts the values that `out` (a sequence, returned by `who`) holds as the
/// products `produces`, each computed on the events `live` (`None`: all).
pub(crate) fn put_products(
    py: Python<'_>,
    ev: &Event<'_>,
    produces: &[String],
    live: Option<&Py<PyAny>>,
    out: &Bound<'_, PyAny>,
    who: &str,
) -> Result<(), Failure> {
    let values: Vec<Py<PyAny>> = out.extract()?;
    if values.len() != produces.len() {
        return Err(Failure::Engine(ModuleError::msg(format!(
            "{who} returned {} values for {} products",
            values.len(),
            produces.len()
        ))));
    }
    for (name, value) in produces.iter().zip(values) {
        let sel = live.map(|s| s.clone_ref(py));
        ev.put(name, PyProduct { sel, value })
            .map_err(Failure::Engine)?;
    }
    Ok(())
}

/// One occurrence of a Python filter on a path:
/// `runner(data, selection, inputs) -> (new_selection, passed, w_seen, w_passed)`.
pub(crate) struct PyFilter {
    pub call: PyCall,
    pub path: usize,
    pub step: usize,
}

impl Transitions for PyFilter {}

impl Filter for PyFilter {
    fn filter(&self, ev: &Event<'_>) -> ModuleResult<bool> {
        let batch = self.call.batch(ev)?;
        self.call.with_python(batch, |py| {
            let (sel, seen, position) = batch.path_selection(py, self.path);
            if seen == 0 {
                ev.set_filter_counts(0, 0);
                return Ok(false);
            }
            let inputs = self.call.inputs(py, ev)?;
            let sel_arg = sel.as_ref().map(|s| s.clone_ref(py));
            let out = self
                .call
                .runner
                .bind(py)
                .call1((batch.data.bind(py), sel_arg, inputs))?;
            let (new_sel, passed, w_seen, w_passed): (Option<Py<PyAny>>, u64, f64, f64) =
                out.extract()?;
            batch.narrow(py, self.path, sel.as_ref(), new_sel, passed, w_passed)?;
            // The planner orders cuts by events, not batches.
            ev.set_filter_counts(seen, passed);
            // A sampled batch: the decisions on the subsample of the events
            // entering the path, for the planner's per-event joint statistics.
            if let Some(events) = batch.probe_events(py, Some(self.path))? {
                let inputs = self.call.inputs(py, ev)?;
                let probe = self.call.runner.bind(py).getattr("probe")?;
                let preds = (self.call.shared.step_preds.lock())
                    .unwrap_or_else(|e| e.into_inner())
                    .get(self.path)
                    .and_then(|p| p.get(self.step))
                    .copied()
                    .unwrap_or(0);
                // A probe that fails decides nothing (every event of the
                // subsample stays undecided): the batch's own call on the
                // path's events decided it, and a filter may fail on events
                // no path gives it (a batch of a size the path never makes).
                let n: usize = events.bind(py).len()?;
                let undecided = || (vec![false; n], vec![false; n]);
                let (known, ok): (Vec<bool>, Vec<bool>) = if preds == 0 {
                    probe
                        .call1((batch.data.bind(py), events, inputs))
                        .and_then(|r| r.extract())
                        .unwrap_or_else(|_| undecided())
                } else {
                    // Only where the steps it must follow passed (on the
                    // others it is undecided), as on the path.
                    let at = batch.probe_passed_all(self.path, preds);
                    let (mut known, mut ok) = undecided();
                    if !at.is_empty() {
                        let some = events.bind(py).get_item(at.clone())?;
                        let measured: PyResult<(Vec<bool>, Vec<bool>)> = probe
                            .call1((batch.data.bind(py), some, inputs))
                            .and_then(|r| r.extract());
                        if let Ok((k, o)) = measured {
                            for (j, &i) in at.iter().enumerate() {
                                known[i] = k[j];
                                ok[i] = o[j];
                            }
                        }
                    }
                    (known, ok)
                };
                batch.record_probe(self.path, self.step, &known, &ok);
            }
            self.call.shared.record(CutRecord {
                batch: batch.index,
                path: self.path as u32,
                step: self.step as u32,
                position,
                seen,
                passed,
                w_seen,
                w_passed,
            });
            Ok(passed > 0)
        })
    }
}

/// A Python analyzer or output on the end path:
/// `runner(data, batch_index, selection, inputs) -> None`, where the
/// selection is the union of the final selections of the paths it follows
/// (`None`: every event).
pub(crate) struct PyEndModule {
    pub call: PyCall,
    pub after: Option<Vec<usize>>,
}

impl PyEndModule {
    fn run(&self, ev: &Event<'_>) -> ModuleResult {
        let batch = self.call.batch(ev)?;
        self.call.with_python(batch, |py| {
            let sel = match &self.after {
                None => None,
                Some(paths) => batch.union(py, Some(paths))?,
            };
            let inputs = self.call.inputs(py, ev)?;
            self.call
                .runner
                .bind(py)
                .call1((batch.data.bind(py), batch.index, sel, inputs))?;
            Ok(())
        })
    }
}

impl Transitions for PyEndModule {}

impl Analyzer for PyEndModule {
    fn analyze(&self, ev: &Event<'_>) -> ModuleResult {
        self.run(ev)
    }
}

impl Output for PyEndModule {
    fn write(&self, ev: &Event<'_>, _results: &TriggerResults) -> ModuleResult {
        self.run(ev)
    }
}
