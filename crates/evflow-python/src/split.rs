//! `SplitController`: evflow-device's host/device split decision, for the
//! Python modules with a device implementation. The decision logic is the
//! engine's own ([`evflow_device::SplitController`]); Python only runs the
//! two parts of a batch and reports what they cost.

use std::sync::Mutex;

use evflow_device::{Side, SplitController as Controller, SplitMode, SplitTuning};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Routes the events of a module's batches to the host or the device:
/// adaptively to the floor of the bathtub, or by a fixed fraction.
/// Thread-safe: several engine threads route and record through one
/// controller.
#[pyclass(module = "evflow._evflow", frozen)]
pub(crate) struct SplitController {
    inner: Mutex<Controller>,
}

impl SplitController {
    fn with<T>(&self, f: impl FnOnce(&mut Controller) -> T) -> T {
        f(&mut self.inner.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

#[pymethods]
impl SplitController {
    /// `mode`: `"adaptive"` or `"fixed:P"` (P in percent); `host_threads`:
    /// threads that may run the host implementation at once.
    #[new]
    #[pyo3(signature = (mode, host_threads, window_s=None, min_events=None))]
    fn new(
        mode: &str,
        host_threads: usize,
        window_s: Option<f64>,
        min_events: Option<u64>,
    ) -> PyResult<Self> {
        let mode: SplitMode = mode.parse().map_err(PyValueError::new_err)?;
        let mut tuning = SplitTuning::default();
        if let Some(w) = window_s {
            if w.is_nan() || w <= 0.0 {
                return Err(PyValueError::new_err("window_s must be positive"));
            }
            tuning.window_s = w;
        }
        if let Some(m) = min_events {
            tuning.min_events = m;
        }
        Ok(Self {
            inner: Mutex::new(Controller::new(mode, host_threads, tuning)),
        })
    }

    /// Routes the next `n` invocations (events); returns how many go to the
    /// device (exactly ⌊n·p⌋ or ⌈n·p⌉).
    fn route(&self, n: usize) -> usize {
        self.with(|c| (0..n).filter(|_| c.route() == Side::Device).count())
    }

    /// `events` host invocations took `seconds` together.
    fn record_host(&self, events: usize, seconds: f64) {
        if events == 0 {
            return;
        }
        let each = seconds / events as f64;
        self.with(|c| (0..events).for_each(|_| c.record_host(each)));
    }

    /// A launch of `events` invocations kept the device busy `seconds`.
    fn record_device(&self, events: usize, seconds: f64) {
        self.with(|c| c.record_device(events, seconds));
    }

    /// Closes the measurement window when it is long enough; `device_all_s`
    /// is the device's busy time so far, every module together. Returns the
    /// new fraction when it changed.
    fn update(&self, now: f64, device_all_s: f64) -> Option<f64> {
        self.with(|c| c.update(now, device_all_s))
    }

    /// The fraction of invocations now sent to the device.
    #[getter]
    fn device_fraction(&self) -> f64 {
        self.with(|c| c.device_fraction())
    }

    /// The split the controller kept: the current fraction, or, while a
    /// challenger is measured, the one it returns to if the challenger loses.
    #[getter]
    fn kept_fraction(&self) -> f64 {
        self.with(|c| c.kept_fraction())
    }

    /// `"adaptive"` or `"fixed:P"`.
    #[getter]
    fn mode(&self) -> String {
        match self.with(|c| c.mode()) {
            SplitMode::Adaptive => "adaptive".into(),
            // Rounded so that "fixed:35" reads back as given (0.07 × 100 is not 7 in binary).
            SplitMode::Fixed(p) => format!("fixed:{}", (p * 1e8).round() / 1e6),
        }
    }

    /// The split chosen over time: dicts with `t_s`, `device_fraction`,
    /// `host_rate`, `device_rate`, `throughput` (events/s).
    fn history<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let points = self.with(|c| c.history().to_vec());
        points
            .iter()
            .map(|p| {
                let d = PyDict::new(py);
                d.set_item("t_s", p.t_s)?;
                d.set_item("device_fraction", p.device_fraction)?;
                d.set_item("host_rate", p.host_rate)?;
                d.set_item("device_rate", p.device_rate)?;
                d.set_item("throughput", p.throughput)?;
                Ok(d)
            })
            .collect()
    }
}
