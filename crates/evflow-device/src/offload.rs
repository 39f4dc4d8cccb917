//! Device modules in the engine: a producer with a device implementation
//! runs through the engine's external-work path. `acquire` routes the
//! invocation (host or device, [`SplitController`]); a device invocation is
//! packed and handed to the module's [`Combiner`]; a full or timed-out batch
//! becomes one [`Launch`]; the launch's callback scatters the results and
//! completes each event, and `produce` puts them. No evflow thread waits.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use evflow_core::{
    Completion, Concurrency, Event, EventId, ModuleDesc, ModuleError, ModuleResult, Producer,
    Transitions,
};

use crate::combine::Combiner;
use crate::context::{DeviceContext, DeviceOptions};
use crate::device::{Device, DeviceError};
use crate::device::{Kernel, Launch, LaunchInput, LaunchOutput};
use crate::split::{Side, SplitController, SplitMode};
use crate::stats::{DeviceModuleReport, DeviceModuleStats};

/// A producer with a device implementation (and usually a host one).
///
/// Both sides must put the same products: `produce_host` computes them on
/// the host; `pack` writes the event's inputs as bytes, the [`Kernel`]
/// turns a batch of packed inputs into packed outputs, and `unpack` puts
/// the products from the event's output bytes.
pub trait DeviceProducer: Send + Sync + 'static {
    /// Whether the module has a host implementation; without one, a device
    /// is required.
    fn has_host(&self) -> bool {
        true
    }
    /// The host implementation (never called when `has_host` is false).
    fn produce_host(&self, event: &Event<'_>) -> ModuleResult;
    /// Appends the event's device input to `buf`.
    fn pack(&self, event: &Event<'_>, buf: &mut Vec<u8>) -> ModuleResult;
    /// Bytes of the event's device output.
    fn bytes_out(&self, event: &Event<'_>) -> usize;
    /// Modelled device time of this invocation at speed-up 1 (used by the
    /// emulated device and the simulator; 0 for a real kernel).
    fn device_cost_s(&self, _event: &Event<'_>) -> f64 {
        0.0
    }
    /// The device code.
    fn kernel(&self) -> Arc<dyn Kernel>;
    /// Puts the event's products from its device output.
    fn unpack(&self, event: &Event<'_>, output: &[u8]) -> ModuleResult;
}

/// One invocation waiting in the combiner.
struct Item {
    id: EventId,
    /// The event's position in the job: its key (ids may repeat in a
    /// source; positions do not).
    index: u64,
    input: Vec<u8>,
    bytes_out: usize,
    work_s: f64,
    done: Completion,
}

enum Pending {
    Host,
    Device(Option<DeviceResult>),
}

/// One event's bytes in its launch's output, which all the launch's events
/// share: scattering them needs no copy on the device's thread (a launch's
/// callback runs there, and a copy of every event's output held the stream
/// worker as long as the download itself: measured on an H100, 4 MB per
/// event).
struct DeviceResult {
    output: Arc<Vec<u8>>,
    range: std::ops::Range<usize>,
}

impl DeviceResult {
    fn bytes(&self) -> &[u8] {
        &self.output[self.range.clone()]
    }
}

struct State {
    combiner: Combiner<Item>,
    split: SplitController,
    /// By event position ([`Event::index`]), not id: two events of one id
    /// in flight must not take each other's results.
    pending: HashMap<u64, Pending>,
    stats: DeviceModuleStats,
    stop: bool,
    /// How many invocations can wait at once (`None`: no limit), from the
    /// module's concurrency.
    at_once: Option<usize>,
}

struct Shared {
    label: String,
    device: Option<Arc<dyn Device>>,
    /// On a device without a host implementation: every call runs there,
    /// so there is no split to decide or report.
    device_only: bool,
    options: Arc<Mutex<DeviceOptions>>,
    kernel: Arc<dyn Kernel>,
    epoch: Instant,
    state: Mutex<State>,
    wake: Condvar,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    fn now(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64()
    }

    /// Makes a batch one launch, its events' packed inputs moved in, and
    /// submits it.
    fn launch(self: &Arc<Self>, batch: Vec<Item>) {
        let Some(device) = self.device.as_ref() else {
            return;
        };
        // The events' buffers are moved in, not joined: joining them here
        // held the engine thread that closed the batch for a copy of every
        // input byte, which the backend copies once more anyway (measured
        // on an H100 with 4 MB per event).
        let mut input = LaunchInput::with_capacity(batch.len());
        let mut out_offsets = Vec::with_capacity(batch.len() + 1);
        let (mut out, mut work_s) = (0, 0.0);
        let mut waiting = Vec::with_capacity(batch.len());
        out_offsets.push(0);
        for item in batch {
            input.push(item.input);
            out += item.bytes_out;
            out_offsets.push(out);
            work_s += item.work_s;
            waiting.push((item.index, item.id, item.done));
        }
        let launch = Launch {
            module: self.label.clone(),
            kernel: self.kernel.clone(),
            input,
            out_offsets,
            work_s,
        };
        let mut landing = Landing {
            shared: self.clone(),
            device: device.name().to_string(),
            waiting,
            bytes_in: launch.bytes_in(),
            bytes_out: launch.bytes_out(),
        };
        device.submit(
            launch,
            Box::new(move |result| {
                let waiting = std::mem::take(&mut landing.waiting);
                landing
                    .shared
                    .landed(waiting, landing.bytes_in, landing.bytes_out, result);
            }),
        );
    }

    /// A launch ended: scatter the results (or the error) to its events.
    fn landed(
        self: &Arc<Self>,
        waiting: Vec<(u64, EventId, Completion)>,
        bytes_in: usize,
        bytes_out: usize,
        result: Result<LaunchOutput, DeviceError>,
    ) {
        let overlap = self.device.as_ref().is_some_and(|d| d.overlaps());
        let bottleneck = result.as_ref().ok().map(|out| {
            let t = &out.times;
            if overlap {
                t.transfer_in_s.max(t.kernel_s).max(t.transfer_out_s)
            } else {
                t.transfer_in_s + t.kernel_s + t.transfer_out_s
            }
        });
        let mut state = lock(&self.state);
        if let Some(seconds) = bottleneck {
            state.combiner.record_launch(waiting.len(), seconds);
        }
        // A batch held back by this launch may go now.
        let next = state.combiner.landed(self.now(), waiting.len());
        if let Some(batch) = next {
            state.stats.timed_out_launches += 1;
            drop(state);
            self.launch(batch);
            state = lock(&self.state);
        }
        // The flusher's wait may have changed (a held batch's deadline).
        self.wake.notify_all();
        match result {
            Ok(out) => {
                state
                    .stats
                    .launch(waiting.len(), bytes_in, bytes_out, &out.times);
                let bottleneck = bottleneck.unwrap_or(0.0);
                state.split.record_device(waiting.len(), bottleneck);
                let mut done = Vec::with_capacity(waiting.len());
                let output = Arc::new(out.output);
                for (i, (index, _, completion)) in waiting.into_iter().enumerate() {
                    let result = DeviceResult {
                        output: output.clone(),
                        range: out.out_offsets[i]..out.out_offsets[i + 1],
                    };
                    state.pending.insert(index, Pending::Device(Some(result)));
                    done.push(completion);
                }
                drop(state);
                for completion in done {
                    completion.finish(Ok(()));
                }
            }
            Err(error) => {
                state.stats.failed_launches += 1;
                state.stats.failed_calls += waiting.len() as u64;
                let mut events: Vec<u64> = waiting.iter().map(|(_, id, _)| id.event).collect();
                events.sort_unstable();
                let events: Vec<String> = events.iter().map(u64::to_string).collect();
                for (index, _, _) in &waiting {
                    state.pending.remove(index);
                }
                drop(state);
                let message = format!(
                    "{error} (one launch of {} event{}: {})",
                    events.len(),
                    if events.len() == 1 { "" } else { "s" },
                    events.join(", ")
                );
                for (_, _, completion) in waiting {
                    completion.finish(Err(ModuleError::msg(&message)));
                }
            }
        }
    }
}

/// A launch's events until its callback runs. A callback that a device
/// drops without calling it (a backend's bug, a thread that died) fails
/// the launch's events when dropped, and counts as a landing: the events
/// are not lost and the combiner does not wait for the launch forever.
struct Landing {
    shared: Arc<Shared>,
    device: String,
    /// Emptied when the callback runs.
    waiting: Vec<(u64, EventId, Completion)>,
    bytes_in: usize,
    bytes_out: usize,
}

impl Drop for Landing {
    fn drop(&mut self) {
        let waiting = std::mem::take(&mut self.waiting);
        if waiting.is_empty() {
            return;
        }
        let error = DeviceError::Launch {
            device: self.device.clone(),
            kernel: self.shared.kernel.name().into(),
            message: "the device dropped the launch without reporting its end".into(),
        };
        self.shared
            .landed(waiting, self.bytes_in, self.bytes_out, Err(error));
    }
}

/// Launches batches whose time-out passed; ends when the module is dropped.
fn flusher(shared: Weak<Shared>) {
    loop {
        let Some(me) = shared.upgrade() else { return };
        let mut state = lock(&me.state);
        if state.stop {
            return;
        }
        let now = me.now();
        if let Some(batch) = state.combiner.poll(now) {
            state.stats.timed_out_launches += 1;
            drop(state);
            me.launch(batch);
            continue;
        }
        // A held batch waits for a landing, which wakes this thread.
        let deadline = state.combiner.deadline().filter(|_| !state.combiner.held());
        let wait = deadline.map_or(Duration::from_millis(50), |d| {
            Duration::from_secs_f64((d - now).max(0.0))
        });
        let _unused = me.wake.wait_timeout(state, wait);
    }
}

/// The engine module of a [`DeviceProducer`]; build it with [`offload`].
pub struct Offload {
    module: Arc<dyn DeviceProducer>,
    shared: Arc<Shared>,
}

impl Drop for Offload {
    fn drop(&mut self) {
        lock(&self.shared.state).stop = true;
        self.shared.wake.notify_all();
    }
}

impl Offload {
    /// This module's device figures so far.
    pub fn report(&self) -> DeviceModuleReport {
        report(&self.shared)
    }
}

fn report(shared: &Shared) -> DeviceModuleReport {
    let state = lock(&shared.state);
    state.stats.report(
        &shared.label,
        shared.device.as_ref().map(|d| d.name().to_string()),
        (!shared.device_only).then(|| state.split.mode()),
        if shared.device_only {
            &[]
        } else {
            state.split.history()
        },
        shared.device.as_ref().is_some_and(|d| d.overlaps()),
    )
}

/// Builds the engine module of a device producer: an external-work producer
/// (see the crate documentation for an example). Fails when the module has
/// no host implementation and the context no device, or when its kernel
/// does not compile.
pub fn offload(
    label: &str,
    module: impl DeviceProducer,
    context: &DeviceContext,
) -> Result<ModuleDesc, DeviceError> {
    context.options().check()?;
    let module: Arc<dyn DeviceProducer> = Arc::new(module);
    let kernel = module.kernel();
    if context.device().is_none() && !module.has_host() {
        return Err(DeviceError::Unavailable {
            device: context.device_name(),
            reason: match context.fallback() {
                // Say that none was found, not only that none is there: the
                // user asked for none explicitly, or the automatic choice
                // looked and failed, and the remedies differ.
                Some(why) => format!(
                    "module '{label}' has no host implementation and needs a device; the \
                     automatic choice found none ({why}): ask for the emulated device to run \
                     it without one"
                ),
                None => format!("module '{label}' has no host implementation and needs a device"),
            },
        });
    }
    if let Some(device) = context.device() {
        device
            .prepare(kernel.as_ref())
            .map_err(|error| DeviceError::Module {
                module: label.to_string(),
                error: Box::new(error),
            })?;
    }
    let options = context.options();
    let has_device = context.device().is_some();
    let shared = Arc::new(Shared {
        label: label.to_string(),
        device: context.device().cloned(),
        device_only: has_device && !module.has_host(),
        options: context.shared_options(),
        kernel,
        epoch: Instant::now(),
        state: Mutex::new(State {
            combiner: combiner(&options, None, context.device()),
            split: split(&options, has_device),
            pending: HashMap::new(),
            stats: DeviceModuleStats::default(),
            stop: false,
            at_once: None,
        }),
        wake: Condvar::new(),
    });
    if context.device().is_some() {
        let weak = Arc::downgrade(&shared);
        std::thread::Builder::new()
            .name(format!("evflow-combine-{label}"))
            .spawn(move || flusher(weak))
            .map_err(|e| DeviceError::Unavailable {
                device: context.device_name(),
                reason: format!("cannot start the combining thread: {e}"),
            })?;
    }
    let figures = shared.clone();
    context.register(Box::new(move || report(&figures)));
    Ok(ModuleDesc::producer(label, Offload { module, shared }).external_work(true))
}

fn combiner(
    options: &DeviceOptions,
    at_once: Option<usize>,
    device: Option<&Arc<dyn Device>>,
) -> Combiner<Item> {
    Combiner::new(
        options
            .combine
            .for_events_in_flight(options.events_in_flight)
            .for_events_at_once(at_once),
    )
    .with_parallel_launches(device.map_or(1, |d| d.parallel_launches()))
}

/// How many invocations of one instance can wait in its combiner at once:
/// the engine keeps a serial, exclusive or cloned instance (each clone has
/// its own combiner) from `acquire` until `produce`.
fn events_at_once(concurrency: &Concurrency) -> Option<usize> {
    match concurrency {
        Concurrency::Shared => None,
        Concurrency::Serial | Concurrency::Exclusive(_) | Concurrency::Cloned(_) => Some(1),
    }
}

fn split(options: &DeviceOptions, has_device: bool) -> SplitController {
    let mode = if has_device {
        options.split
    } else {
        SplitMode::Fixed(0.0)
    };
    SplitController::new(mode, options.host_threads, options.tuning)
        .with_slots(options.events_in_flight)
}

impl Transitions for Offload {
    /// Takes the context's options as they are when the job begins.
    fn begin_job(&self) -> ModuleResult {
        // The options may have changed since the module was built.
        self.shared
            .options
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .check()
            .map_err(|e| ModuleError::msg(format!("device module '{}': {e}", self.shared.label)))?;
        let (options, mut state) = self.renew_combiner();
        let full = state.combiner.policy().max_events;
        state.split = split(&options, self.shared.device.is_some())
            .with_full_launch(full)
            .started_at(self.shared.now());
        Ok(())
    }
}

impl Producer for Offload {
    fn set_concurrency(&self, concurrency: &Concurrency) {
        lock(&self.shared.state).at_once = events_at_once(concurrency);
        let _ = self.renew_combiner();
    }

    fn acquire(&self, event: &Event<'_>, done: Completion) -> ModuleResult {
        let shared = &self.shared;
        let mut state = lock(&shared.state);
        let side = if shared.device.as_ref().is_none() {
            Side::Host
        } else if !self.module.has_host() {
            Side::Device
        } else {
            state.split.route()
        };
        let id = event.id();
        let index = event.index();
        if side == Side::Host {
            state.pending.insert(index, Pending::Host);
            drop(state);
            done.finish(Ok(()));
            return Ok(());
        }
        drop(state);
        // Pack outside the lock: it is the module's own code.
        let mut input = Vec::new();
        if let Err(e) = self.module.pack(event, &mut input) {
            // Neither a host nor a device call: counted as failed.
            lock(&shared.state).stats.failed_calls += 1;
            return Err(e);
        }
        let item = Item {
            id,
            index,
            input,
            bytes_out: self.module.bytes_out(event),
            work_s: self.module.device_cost_s(event),
            done,
        };
        let mut state = lock(&shared.state);
        state.pending.insert(index, Pending::Device(None));
        let before = state.combiner.deadline();
        let batch = state.combiner.push(shared.now(), item);
        let deadline = state.combiner.deadline();
        drop(state);
        match batch {
            Some(batch) => shared.launch(batch),
            // A new deadline (the first invocation, or a time-out that
            // follows the batch's size): the flusher must wake for it.
            None if deadline != before => shared.wake.notify_all(),
            None => {}
        }
        Ok(())
    }

    /// Every event in flight waits: launch what the combiner holds unless
    /// a launch of this module can still bring more.
    fn engine_idle(&self) {
        let mut state = lock(&self.shared.state);
        let batch = state.combiner.idle();
        if batch.is_some() {
            state.stats.idle_launches += 1;
        }
        drop(state);
        if let Some(batch) = batch {
            self.shared.launch(batch);
        }
    }

    fn produce(&self, event: &Event<'_>) -> ModuleResult {
        let shared = &self.shared;
        let id = event.id();
        let pending = lock(&shared.state).pending.remove(&event.index());
        match pending {
            Some(Pending::Host) => {
                let t0 = Instant::now();
                let result = self.module.produce_host(event);
                let seconds = t0.elapsed().as_secs_f64();
                let mut state = lock(&shared.state);
                state.stats.host_calls += 1;
                state.stats.host_s += seconds;
                state.split.record_host(seconds);
                self.close_window(&mut state);
                result
            }
            Some(Pending::Device(Some(output))) => {
                let result = self.module.unpack(event, output.bytes());
                let mut state = lock(&shared.state);
                state.stats.device_calls += 1;
                self.close_window(&mut state);
                result
            }
            Some(Pending::Device(None)) | None => {
                lock(&shared.state).stats.failed_calls += 1;
                Err(ModuleError::msg(format!(
                    "device module '{}': no result for {id} (internal error)",
                    shared.label
                )))
            }
        }
    }
}

impl Offload {
    /// The context's options now, and the state with a combiner built from
    /// them and the module's concurrency (unless invocations wait in the
    /// one it has).
    fn renew_combiner(&self) -> (DeviceOptions, MutexGuard<'_, State>) {
        let options = *self
            .shared
            .options
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let mut state = lock(&self.shared.state);
        if state.combiner.is_empty() {
            state.combiner = combiner(&options, state.at_once, self.shared.device.as_ref());
        }
        (options, state)
    }

    fn close_window(&self, state: &mut State) {
        let shared = &self.shared;
        if shared.device_only {
            return;
        }
        let device_all = shared
            .device
            .as_ref()
            .map_or(0.0, |d| d.busy().bottleneck_s(d.overlaps()));
        state.split.update(shared.now(), device_all);
    }
}

impl std::fmt::Debug for Offload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Offload")
            .field("label", &self.shared.label)
            .field("device", &self.shared.device.as_ref().map(|d| d.name()))
            .finish_non_exhaustive()
    }
}
