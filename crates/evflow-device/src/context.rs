//! The devices of a job and how device modules use them.

use std::sync::{Arc, Mutex};

use crate::combine::CombinePolicy;
use crate::device::{Device, DeviceError};
use crate::emulated::{EmulatedConfig, EmulatedDevice};
use crate::split::{SplitMode, SplitTuning};
use crate::stats::DeviceModuleReport;

/// Which device a job asks for (`evflow run --device`).
#[derive(Clone, Debug, Default)]
pub enum DeviceChoice {
    /// A GPU if one can be used, else the host with a one-line notice.
    #[default]
    Auto,
    /// The emulated device.
    Emulated(EmulatedConfig),
    /// A CUDA GPU; failing without one.
    Cuda,
    /// Host only.
    None,
}

/// How device modules are run.
#[derive(Clone, Copy, Debug)]
pub struct DeviceOptions {
    pub split: SplitMode,
    pub combine: CombinePolicy,
    pub tuning: SplitTuning,
    /// Events in flight of the job (caps the combining count).
    pub events_in_flight: usize,
    /// Threads the host side may use.
    pub host_threads: usize,
    /// Streams of a CUDA device: 2 overlap the transfers and kernels of
    /// successive launches, 1 runs them one after the other.
    pub cuda_streams: usize,
}

impl Default for DeviceOptions {
    fn default() -> Self {
        Self {
            split: SplitMode::Adaptive,
            combine: CombinePolicy::default(),
            tuning: SplitTuning::default(),
            events_in_flight: 64,
            host_threads: 1,
            cuda_streams: 2,
        }
    }
}

impl DeviceOptions {
    /// Checks the values device modules refuse when built and when a job
    /// begins: a split fraction outside 0–1, no events in flight or host
    /// threads, a combining count or stream count of 0, a time-out that is
    /// not a number of seconds.
    ///
    /// ```
    /// use evflow_device::{DeviceOptions, SplitMode};
    ///
    /// assert!(DeviceOptions::default().check().is_ok());
    /// let bad = DeviceOptions { split: SplitMode::Fixed(7.0), ..DeviceOptions::default() };
    /// assert!(bad.check().unwrap_err().to_string().contains("split fraction"));
    /// ```
    pub fn check(&self) -> Result<(), DeviceError> {
        let bad = |m: String| Err(DeviceError::Options(m));
        if let SplitMode::Fixed(f) = self.split
            && !(0.0..=1.0).contains(&f)
        {
            return bad(format!(
                "the fixed split fraction must be from 0 to 1 (the device's share), not {f}"
            ));
        }
        for (name, value) in [
            ("events_in_flight", self.events_in_flight),
            ("host_threads", self.host_threads),
            ("combine.max_events", self.combine.max_events),
            ("cuda_streams", self.cuda_streams),
        ] {
            if value == 0 {
                return bad(format!("{name} must be at least 1, not 0"));
            }
        }
        if !(self.combine.timeout_s.is_finite() && self.combine.timeout_s >= 0.0) {
            return bad(format!(
                "combine.timeout_s must be a number of seconds >= 0, not {}",
                self.combine.timeout_s
            ));
        }
        Ok(())
    }
}

type ReportFn = Box<dyn Fn() -> DeviceModuleReport + Send + Sync>;

/// What the simulator needs to know of a synthetic device module.
#[derive(Clone, Debug)]
pub struct DeviceModel {
    pub label: String,
    /// Whether the module has a host implementation (its host cost is the
    /// module's cost model).
    pub has_host: bool,
    /// Device time per invocation at speed-up 1, seconds.
    pub device_cost_s: f64,
    pub bytes_in: usize,
    pub bytes_out: usize,
}

struct Inner {
    device: Option<Arc<dyn Device>>,
    /// The emulated device's performance model, when the device is one.
    emulated: Option<EmulatedConfig>,
    /// Why `auto` fell back to the host, for the error of a module that
    /// needs a device.
    fallback: Option<String>,
    models: Mutex<Vec<DeviceModel>>,
    /// Shared with the modules, which read it when the job begins.
    options: Arc<Mutex<DeviceOptions>>,
    reports: Mutex<Vec<ReportFn>>,
}

/// The device of a job (or none), its options, and the reports of its
/// device modules. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct DeviceContext {
    inner: Arc<Inner>,
}

impl DeviceContext {
    /// Host only: device modules run their host implementation.
    pub fn host_only(options: DeviceOptions) -> Self {
        Self::with_device(None, options)
    }

    pub fn with_device(device: Option<Arc<dyn Device>>, options: DeviceOptions) -> Self {
        Self::build(device, None, options)
    }

    fn build(
        device: Option<Arc<dyn Device>>,
        emulated: Option<EmulatedConfig>,
        options: DeviceOptions,
    ) -> Self {
        Self::build_with(device, emulated, None, options)
    }

    fn build_with(
        device: Option<Arc<dyn Device>>,
        emulated: Option<EmulatedConfig>,
        fallback: Option<String>,
        options: DeviceOptions,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                device,
                emulated,
                fallback,
                models: Mutex::new(Vec::new()),
                options: Arc::new(Mutex::new(options)),
                reports: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Opens the device `choice` names. Returns a notice to print once when
    /// the job falls back to the host; fails when the user demanded a device
    /// that is not there.
    pub fn open(
        choice: &DeviceChoice,
        options: DeviceOptions,
    ) -> Result<(Self, Option<String>), DeviceError> {
        match choice {
            DeviceChoice::None => Ok((Self::host_only(options), None)),
            DeviceChoice::Emulated(config) => {
                let device: Arc<dyn Device> = Arc::new(EmulatedDevice::new(config.clone()));
                Ok((
                    Self::build(Some(device), Some(config.clone()), options),
                    None,
                ))
            }
            DeviceChoice::Cuda => {
                Ok((Self::with_device(Some(open_cuda(&options)?), options), None))
            }
            DeviceChoice::Auto => match open_cuda(&options) {
                Ok(device) => Ok((Self::with_device(Some(device), options), None)),
                Err(reason) => {
                    let notice = format!("no device: device modules run on the host ({reason})");
                    let context = Self::build_with(None, None, Some(reason.to_string()), options);
                    Ok((context, Some(notice)))
                }
            },
        }
    }

    pub fn device(&self) -> Option<&Arc<dyn Device>> {
        self.inner.device.as_ref()
    }

    /// Why the automatic choice found no device, when it fell back to the
    /// host.
    pub fn fallback(&self) -> Option<&str> {
        self.inner.fallback.as_deref()
    }

    /// Host threads the job's device keeps busy ([`Device::service_threads`]);
    /// 0 without a device.
    ///
    /// ```
    /// use evflow_device::{DeviceContext, DeviceOptions};
    ///
    /// assert_eq!(DeviceContext::host_only(DeviceOptions::default()).service_threads(), 0);
    /// ```
    pub fn service_threads(&self) -> usize {
        self.device().map_or(0, |d| d.service_threads())
    }

    /// The device's name, or `host` without one.
    pub fn device_name(&self) -> String {
        self.device()
            .map_or_else(|| "host".into(), |d| d.name().into())
    }

    pub fn options(&self) -> DeviceOptions {
        *self.inner.options.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Changes the options; device modules built with this context take
    /// them when the job begins (the command line learns the threads and
    /// events in flight only after the configuration was loaded).
    pub fn set_options(&self, options: DeviceOptions) {
        *self.inner.options.lock().unwrap_or_else(|e| e.into_inner()) = options;
    }

    pub(crate) fn shared_options(&self) -> Arc<Mutex<DeviceOptions>> {
        self.inner.options.clone()
    }

    /// The emulated device's model (what `evflow simulate` simulates).
    pub fn emulated_config(&self) -> Option<&EmulatedConfig> {
        self.inner.emulated.as_ref()
    }

    /// Models of the synthetic device modules built with this context.
    pub fn models(&self) -> Vec<DeviceModel> {
        self.inner
            .models
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(crate) fn register_model(&self, model: DeviceModel) {
        self.inner
            .models
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(model);
    }

    pub(crate) fn register(&self, report: ReportFn) {
        self.inner
            .reports
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(report);
    }

    /// The figures of every device module built with this context (also
    /// after the job ended and its modules were dropped).
    pub fn reports(&self) -> Vec<DeviceModuleReport> {
        self.inner
            .reports
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|f| f())
            .collect()
    }
}

impl std::fmt::Debug for DeviceContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceContext")
            .field("device", &self.device_name())
            .field("options", &self.options())
            .finish()
    }
}

/// Two contexts are equal when they are the same context (clones).
impl PartialEq for DeviceContext {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

/// GPU 0 with the options' streams (2: overlap of successive launches).
#[cfg(feature = "cuda")]
fn open_cuda(options: &DeviceOptions) -> Result<Arc<dyn Device>, DeviceError> {
    Ok(Arc::new(crate::cuda::CudaDevice::open(
        0,
        options.cuda_streams,
    )?))
}

/// Without the `cuda` feature: why no CUDA device can be used.
#[cfg(not(feature = "cuda"))]
fn open_cuda(_options: &DeviceOptions) -> Result<Arc<dyn Device>, DeviceError> {
    Err(DeviceError::Unavailable {
        device: "cuda".into(),
        reason: "this evflow was built without the CUDA backend (cargo feature `cuda`)".into(),
    })
}
