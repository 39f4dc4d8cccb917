//! Devices in the simulation: the emulated device's performance model on
//! the simulated clock, with the same combining and split decisions
//! (`evflow_device::Combiner`, `SplitController`) as a real run.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use evflow_core::graph::Graph;
use evflow_device::{
    Combiner, DeviceContext, DeviceModel, DeviceModuleReport, DeviceModuleStats, EmulatedConfig,
    LaunchModel, LaunchTimes, Side, SplitController,
};

use crate::time::Time;

/// One invocation waiting on the device: (slot, instance).
type Item = (usize, u32);

struct ModuleSim {
    model: DeviceModel,
    /// The launches a run measured, instead of the emulated device's model.
    measured: Option<LaunchModel>,
    combiner: Combiner<Item>,
    split: SplitController,
    /// Side chosen for the invocation of each event slot.
    side: Vec<Side>,
    /// The figures `evflow run` reports, predicted.
    stats: DeviceModuleStats,
}

enum Pending {
    Deadline(usize),
    Landed {
        module: usize,
        items: Vec<Item>,
        bottleneck: f64,
    },
}

/// The simulated device and its modules.
pub(crate) struct SimDevice {
    config: EmulatedConfig,
    /// The device's name, as a run reports it.
    name: String,
    modules: Vec<Option<ModuleSim>>,
    /// Modelled end of the work on each engine (copy in, kernel, copy out).
    free: [f64; 3],
    /// Busy time of the limiting stage, all modules.
    busy_all: f64,
    heap: BinaryHeap<Reverse<(Time, u64)>>,
    pending: HashMap<u64, Pending>,
    sequence: u64,
}

impl SimDevice {
    /// The device of `context` for the modules of `graph`, when it is an
    /// emulated device with synthetic device modules, or when a run's
    /// launches of some of them were measured (`measured`, by label: those
    /// follow their measured model; with a device that is not emulated,
    /// only those are simulated on it).
    pub fn new(
        context: &DeviceContext,
        graph: &Graph,
        events_in_flight: usize,
        measured: &HashMap<String, LaunchModel>,
    ) -> Option<Self> {
        let (config, name) = match context.emulated_config() {
            Some(config) => (config.clone(), context.device_name()),
            None if !measured.is_empty() => {
                (EmulatedConfig::default(), "the measured device".to_string())
            }
            None => return None,
        };
        let emulated = context.emulated_config().is_some();
        let options = context.options();
        let models = context.models();
        let modules: Vec<Option<ModuleSim>> = graph
            .modules
            .iter()
            .map(|node| {
                let model = models.iter().find(|m| m.label == node.label)?.clone();
                let launches = measured.get(&node.label).copied();
                if launches.is_none() && !emulated {
                    return None;
                }
                let overlap = launches.map_or(config.overlap, |l| l.overlap);
                // A serial, exclusive or cloned module keeps its instances
                // during the external work: no more than `limit`
                // invocations can wait (as in a run).
                let combiner = Combiner::new(
                    options
                        .combine
                        .for_events_in_flight(events_in_flight)
                        .for_events_at_once(
                            (node.limit != u32::MAX).then_some(node.limit as usize),
                        ),
                )
                // The simulated device: one launch per engine with overlap.
                .with_parallel_launches(if overlap { 3 } else { 1 });
                let full_launch = combiner.policy().max_events;
                Some(ModuleSim {
                    measured: launches,
                    combiner,
                    split: SplitController::new(
                        options.split,
                        options.host_threads,
                        options.tuning,
                    )
                    .with_slots(events_in_flight)
                    .with_full_launch(full_launch),
                    side: vec![Side::Host; events_in_flight],
                    stats: DeviceModuleStats::default(),
                    model,
                })
            })
            .collect();
        modules.iter().any(Option::is_some).then_some(Self {
            config,
            name,
            modules,
            free: [0.0; 3],
            busy_all: 0.0,
            heap: BinaryHeap::new(),
            pending: HashMap::new(),
            sequence: 0,
        })
    }

    pub fn handles(&self, module: usize) -> bool {
        self.modules.get(module).is_some_and(Option::is_some)
    }

    /// The side the invocation of `module` for `slot` was routed to.
    pub fn on_device(&self, slot: usize, module: usize) -> bool {
        self.modules
            .get(module)
            .and_then(Option::as_ref)
            .is_some_and(|m| m.side[slot] == Side::Device)
    }

    /// Routes an invocation; `true`: the host runs it (its external work is
    /// done at once).
    pub fn acquire(&mut self, now: f64, slot: usize, module: usize, instance: u32) -> bool {
        let m = self.modules[module].as_mut().expect("a device module");
        let side = if m.model.has_host {
            m.split.route()
        } else {
            Side::Device
        };
        m.side[slot] = side;
        if side == Side::Host {
            return true;
        }
        let before = m.combiner.deadline();
        match m.combiner.push(now, (slot, instance)) {
            Some(batch) => self.launch(now, module, batch),
            // A new deadline (the first invocation, or a time-out that
            // follows the batch's size): an event for it.
            None => {
                let deadline = m.combiner.deadline().unwrap_or(now);
                if before != Some(deadline) {
                    self.schedule(deadline, Pending::Deadline(module));
                }
            }
        }
        false
    }

    /// A host invocation of `module` took `seconds`.
    pub fn host_done(&mut self, now: f64, module: usize, seconds: f64) {
        if let Some(m) = self.modules[module].as_mut() {
            m.stats.host_calls += 1;
            m.stats.host_s += seconds;
            m.split.record_host(seconds);
            m.split.update(now, self.busy_all);
        }
    }

    /// No core has a task: like a run's idle engine, every module launches
    /// what it gathered unless one of its launches can still bring more.
    pub fn idle(&mut self, now: f64) {
        for module in 0..self.modules.len() {
            let Some(m) = self.modules[module].as_mut() else {
                continue;
            };
            if let Some(batch) = m.combiner.idle() {
                m.stats.idle_launches += 1;
                self.launch(now, module, batch);
            }
        }
    }

    pub fn next_time(&self) -> Option<f64> {
        self.heap.peek().map(|Reverse((Time(t), _))| *t)
    }

    /// Handles the earliest device event; returns the invocations whose
    /// external work is now done: (module, slot, instance).
    pub fn pop(&mut self, now: f64) -> Vec<(usize, usize, u32)> {
        let Some(Reverse((_, id))) = self.heap.pop() else {
            return Vec::new();
        };
        match self.pending.remove(&id) {
            Some(Pending::Deadline(module)) => {
                let m = self.modules[module].as_mut().expect("a device module");
                if let Some(batch) = m.combiner.poll(now) {
                    m.stats.timed_out_launches += 1;
                    self.launch(now, module, batch);
                }
                Vec::new()
            }
            Some(Pending::Landed {
                module,
                items,
                bottleneck,
            }) => {
                let m = self.modules[module].as_mut().expect("a device module");
                m.stats.device_calls += items.len() as u64;
                m.combiner.record_launch(items.len(), bottleneck);
                m.split.record_device(items.len(), bottleneck);
                m.split.update(now, self.busy_all);
                // A batch held back by this launch may go now, or wait a
                // time-out from now for this launch's events to come back.
                match m.combiner.landed(now, items.len()) {
                    Some(batch) => {
                        m.stats.timed_out_launches += 1;
                        self.launch(now, module, batch);
                    }
                    None => {
                        if let Some(deadline) = m.combiner.deadline().filter(|&d| d > now) {
                            self.schedule(deadline, Pending::Deadline(module));
                        }
                    }
                }
                items.into_iter().map(|(s, i)| (module, s, i)).collect()
            }
            None => Vec::new(),
        }
    }

    fn schedule(&mut self, at: f64, what: Pending) {
        self.heap.push(Reverse((Time(at), self.sequence)));
        self.pending.insert(self.sequence, what);
        self.sequence += 1;
    }

    /// The emulated device's model: copy in, kernel, copy out on their
    /// engines (one engine for all three without overlap).
    fn launch(&mut self, now: f64, module: usize, items: Vec<Item>) {
        let c = &self.config;
        let sim = self.modules[module].as_mut().expect("a device module");
        let m = &sim.model;
        let n = items.len() as f64;
        let (t_in, kernel, t_out, overlap) = match &sim.measured {
            Some(launches) => {
                let (t_in, kernel, t_out) = launches.times(
                    items.len(),
                    m.bytes_in * items.len(),
                    m.bytes_out * items.len(),
                );
                (t_in, kernel, t_out, launches.overlap)
            }
            None => {
                let bw = c.bandwidth_bytes_s.max(1.0);
                (
                    c.transfer_latency_s + n * m.bytes_in as f64 / bw,
                    c.launch_latency_s + n * m.device_cost_s / c.speedup.max(1e-9),
                    c.transfer_latency_s + n * m.bytes_out as f64 / bw,
                    c.overlap,
                )
            }
        };
        let (end, bottleneck) = if overlap {
            let e0 = now.max(self.free[0]) + t_in;
            let e1 = e0.max(self.free[1]) + kernel;
            let e2 = e1.max(self.free[2]) + t_out;
            self.free = [e0, e1, e2];
            (e2, t_in.max(kernel).max(t_out))
        } else {
            let e = now.max(self.free[0]) + t_in + kernel + t_out;
            self.free = [e; 3];
            (e, t_in + kernel + t_out)
        };
        let total = end - now;
        sim.stats.launch(
            items.len(),
            m.bytes_in * items.len(),
            m.bytes_out * items.len(),
            &LaunchTimes {
                queued_s: (total - (t_in + kernel + t_out)).max(0.0),
                transfer_in_s: t_in,
                kernel_s: kernel,
                transfer_out_s: t_out,
                total_s: total,
            },
        );
        self.busy_all += bottleneck;
        self.schedule(
            end,
            Pending::Landed {
                module,
                items,
                bottleneck,
            },
        );
    }
}

impl SimDevice {
    /// The predicted figures of each device module, as `evflow run`
    /// reports them (`devices`); as in a run, a module without a host
    /// implementation decides no split.
    pub fn reports(&self) -> Vec<DeviceModuleReport> {
        self.modules
            .iter()
            .flatten()
            .map(|m| {
                let has_host = m.model.has_host;
                m.stats.report(
                    &m.model.label,
                    Some(self.name.clone()),
                    has_host.then(|| m.split.mode()),
                    if has_host { m.split.history() } else { &[] },
                    m.measured.map_or(self.config.overlap, |l| l.overlap),
                )
            })
            .collect()
    }
}
