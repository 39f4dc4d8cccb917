//! [`SimOptions`]: the simulated machine and the planner.

/// How to simulate.
#[derive(Clone)]
pub struct SimOptions {
    /// Cores (threads) of the simulated machine.
    pub cores: usize,
    pub events_in_flight: usize,
    /// Scheduling overhead added to every module execution, in seconds
    /// (measured by `bench/core.py` benchmark 1: a few hundred ns).
    pub overhead_s: f64,
    /// Time to read one event from the source.
    pub read_s: f64,
    /// Order reorderable paths with this planner (default: written order).
    pub planner: Option<evflow_core::PlannerFactory>,
    /// Record every simulated module execution in `report.trace`.
    pub trace: bool,
    /// The device of the job's device modules: an emulated device is
    /// simulated by its performance model, with the same combining and
    /// split decisions as a real run; otherwise they run on the host.
    pub devices: Option<evflow_device::DeviceContext>,
    /// Luminosity blocks in flight at once (see `RunOptions::concurrent_lumis`).
    pub concurrent_lumis: usize,
    /// Device modules whose launches a run measured (by label): their
    /// launches follow these models instead of the emulated device's, and
    /// they are simulated on a device even when `devices` has none (the
    /// run's GPU, simulated on a machine without one).
    pub device_launches: std::collections::HashMap<String, evflow_device::LaunchModel>,
    /// A graceful stop request (Ctrl-C): no further event is read, the
    /// events in flight finish, and the report says `interrupted`. It is
    /// checked against real time, so a simulation it stops depends on when.
    pub stop: Option<evflow_core::StopHandle>,
}

impl std::fmt::Debug for SimOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimOptions")
            .field("cores", &self.cores)
            .field("events_in_flight", &self.events_in_flight)
            .field("overhead_s", &self.overhead_s)
            .field("read_s", &self.read_s)
            .field("concurrent_lumis", &self.concurrent_lumis)
            .field("device_launches", &self.device_launches)
            .field("stop", &self.stop)
            .finish()
    }
}

impl Default for SimOptions {
    fn default() -> Self {
        Self {
            cores: 1,
            events_in_flight: 1,
            overhead_s: 0.0,
            read_s: 0.0,
            planner: None,
            trace: false,
            devices: None,
            concurrent_lumis: evflow_core::DEFAULT_CONCURRENT_LUMIS,
            device_launches: std::collections::HashMap::new(),
            stop: None,
        }
    }
}
