//! Instrumented modules and log analysis shared by the concurrency,
//! control-flow, error and stress tests.
//!
//! Every instrumented module takes a ticket from one sequence counter (a
//! SeqCst `AtomicU64`) when it starts and another when it ends, and records
//! `(label, instance, event, phase, start, end, thread)`. Because all
//! tickets come from one atomic, two executions overlapped in real time iff
//! their `[start, end]` intervals intersect: no clock is ever read and no
//! assertion depends on timing.
//!
//! To let overlaps materialise even on a 2-core machine, a module may carry
//! a [`Hold`]: on entry it waits (yielding, for a bounded number of
//! iterations shared by all its users) until `target` executions using the
//! same hold are inside at once. A correct engine that allows the overlap
//! meets the target at once; an engine that forbids it only costs the
//! bounded budget, once.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering::SeqCst};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use evflow_core::*;
use evflow_workloads as synthetic;

// ---------------------------------------------------------------- the log

/// Which step of a module an execution record is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// produce / filter / analyze / write.
    Run,
    /// The asynchronous first step of an external-work producer.
    Acquire,
    /// The produce step after external work.
    Produce,
}

/// One module execution.
#[derive(Clone, Debug, PartialEq)]
pub struct Exec {
    pub label: Arc<str>,
    pub instance: u32,
    pub event: EventId,
    pub phase: Phase,
    pub start: u64,
    pub end: u64,
    /// Index of the engine pool thread it ran on.
    pub thread: Option<usize>,
    pub os_thread: std::thread::ThreadId,
    /// The filter decision (true for other kinds), `None` when it failed.
    pub passed: Option<bool>,
    /// `rayon::current_num_threads()` seen by the module.
    pub pool_threads: usize,
}

impl Exec {
    /// Whether the module produced its results (not a failed execution).
    pub fn ok(&self) -> bool {
        self.passed.is_some()
    }
    /// The step that completes a module for an event (not an acquire).
    pub fn completes(&self) -> bool {
        self.phase != Phase::Acquire
    }
}

/// A transition hook call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Hook {
    BeginJob,
    EndJob,
    BeginRun(u32),
    EndRun(u32),
    BeginLumi(u32, u32),
    EndLumi(u32, u32),
}

#[derive(Clone, Debug)]
pub struct HookRec {
    pub label: Arc<str>,
    pub instance: u32,
    pub hook: Hook,
    pub seq: u64,
}

/// What an output module received for one event.
#[derive(Clone, Debug)]
pub struct Written {
    pub label: Arc<str>,
    pub event: EventId,
    pub results: Vec<(String, bool)>,
    pub unknown_path: Option<bool>,
}

/// Everything the instrumented modules of one job record.
#[derive(Default)]
pub struct Log {
    seq: AtomicU64,
    execs: Mutex<Vec<Exec>>,
    hooks: Mutex<Vec<HookRec>>,
    written: Mutex<Vec<Written>>,
    /// Events read by a [`CountingSource`] (or anything else using it).
    pub reads: AtomicU64,
    /// Events read by a [`TicketSource`].
    read_at: Mutex<Vec<ReadAt>>,
}

/// An event read by a [`TicketSource`]: the ticket taken once the source
/// has given it, and the thread that read it.
#[derive(Clone, Copy, Debug)]
pub struct ReadAt {
    pub event: u64,
    pub ticket: u64,
    pub os_thread: std::thread::ThreadId,
}

impl Log {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }
    /// Takes the next ticket of the sequence.
    pub fn tick(&self) -> u64 {
        self.seq.fetch_add(1, SeqCst)
    }
    pub fn now(&self) -> u64 {
        self.seq.load(SeqCst)
    }
    pub fn push(&self, e: Exec) {
        self.execs.lock().unwrap().push(e);
    }
    pub fn reads_at(&self) -> Vec<ReadAt> {
        self.read_at.lock().unwrap().clone()
    }
    pub fn execs(&self) -> Vec<Exec> {
        let mut v = self.execs.lock().unwrap().clone();
        v.sort_by_key(|e| e.start);
        v
    }
    pub fn hooks(&self) -> Vec<HookRec> {
        let mut v = self.hooks.lock().unwrap().clone();
        v.sort_by_key(|h| h.seq);
        v
    }
    pub fn written(&self) -> Vec<Written> {
        self.written.lock().unwrap().clone()
    }
    /// Executions of `label`.
    pub fn of(&self, label: &str) -> Vec<Exec> {
        self.execs()
            .into_iter()
            .filter(|e| &*e.label == label)
            .collect()
    }
    /// Completed executions (not acquires) of `label`, per event number.
    pub fn runs_per_event(&self, label: &str) -> BTreeMap<u64, usize> {
        let mut m = BTreeMap::new();
        for e in self.of(label).into_iter().filter(Exec::completes) {
            *m.entry(e.event.event).or_insert(0) += 1;
        }
        m
    }
    fn hook(&self, label: &Arc<str>, instance: u32, hook: Hook) {
        let seq = self.tick();
        self.hooks.lock().unwrap().push(HookRec {
            label: label.clone(),
            instance,
            hook,
            seq,
        });
    }
}

// ------------------------------------------------------ forcing overlaps

/// A bounded rendezvous; see the module documentation.
pub struct Hold {
    target: u32,
    /// Wait until `target` are inside *now* (not just once ever).
    sustained: bool,
    active: AtomicU32,
    met: AtomicBool,
    budget: AtomicI64,
    peak: AtomicU32,
    /// The budget also ends here: on a loaded machine each yield can
    /// take a scheduler's time slice, and 400 000 of them outlasted the
    /// 60 s watchdog (load average 7 on 2 cores).
    deadline: Instant,
}

/// Longest a hold's executions wait in all, whatever their budget.
const HOLD_WALL: Duration = Duration::from_secs(10);

impl Hold {
    /// Waits for `target` executions inside at once, spending at most
    /// `budget` yield iterations in total over all executions.
    pub fn new(target: u32, budget: i64) -> Arc<Self> {
        Arc::new(Self {
            target,
            sustained: false,
            active: AtomicU32::new(0),
            met: AtomicBool::new(false),
            budget: AtomicI64::new(budget),
            peak: AtomicU32::new(0),
            deadline: Instant::now() + HOLD_WALL,
        })
    }
    /// Like [`Hold::new`], but every execution waits (within the shared
    /// budget) until `target` executions are inside at the same time, so
    /// the pressure lasts for the whole job.
    pub fn sustained(target: u32, budget: i64) -> Arc<Self> {
        let mut h = Self::new(target, budget);
        Arc::get_mut(&mut h).expect("fresh hold").sustained = true;
        h
    }
    pub fn enter(&self) {
        let now = self.active.fetch_add(1, SeqCst) + 1;
        self.peak.fetch_max(now, SeqCst);
        if now >= self.target {
            self.met.store(true, SeqCst);
        }
        let done = || {
            if self.sustained {
                self.active.load(SeqCst) >= self.target
            } else {
                self.met.load(SeqCst)
            }
        };
        while !done() && self.budget.fetch_sub(1, SeqCst) > 0 && Instant::now() < self.deadline {
            std::thread::yield_now();
        }
    }
    pub fn leave(&self) {
        self.active.fetch_sub(1, SeqCst);
    }
    /// Whether `target` executions were ever inside at once.
    pub fn met(&self) -> bool {
        self.met.load(SeqCst)
    }
    /// Most executions inside at once.
    pub fn peak(&self) -> u32 {
        self.peak.load(SeqCst)
    }
}

/// A little CPU work that the optimiser cannot remove.
pub fn spin(iterations: u32) {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for i in 0..iterations {
        x = std::hint::black_box(x.rotate_left(7) ^ u64::from(i));
    }
    std::hint::black_box(x);
}

/// Yields until `cond` holds, at most `max` times; returns whether it held.
pub fn wait_until(max: u32, mut cond: impl FnMut() -> bool) -> bool {
    for _ in 0..max {
        if cond() {
            return true;
        }
        std::thread::yield_now();
    }
    cond()
}

// ----------------------------------------------------- product values

pub fn hash_str(s: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

/// The value the probe that puts `tag` stores for event number `event`.
pub fn value_of(tag: &str, event: u64) -> u64 {
    synthetic::mix(hash_str(tag)) ^ event
}

fn tag_of(label: &str, instance: &str) -> String {
    if instance.is_empty() {
        label.to_string()
    } else {
        format!("{label}:{instance}")
    }
}

/// A deterministic pseudo-random fraction in [0, 1) of (seed, label, event).
pub fn unit(seed: u64, label: &str, event: u64) -> f64 {
    let h = synthetic::mix(synthetic::mix(seed ^ hash_str(label)) ^ event);
    (h >> 11) as f64 / (1u64 << 53) as f64
}

// ------------------------------------------------------------- probes

pub type PassFn = Arc<dyn Fn(EventId) -> bool + Send + Sync>;

/// A condition a stalled execution waits for (yielding, bounded).
pub type StallFn = Arc<dyn Fn() -> bool + Send + Sync>;

/// An instrumented module of any kind.
#[derive(Clone)]
pub struct Probe {
    pub label: Arc<str>,
    pub log: Arc<Log>,
    pub instance: u32,
    pub work: u32,
    /// Rendezvous entered in order on every execution.
    pub holds: Vec<Arc<Hold>>,
    pub fail_on: Arc<HashSet<u64>>,
    pub panic_on: Arc<HashSet<u64>>,
    pub pass: Option<PassFn>,
    pub reads: Vec<String>,
    pub declare_reads: bool,
    pub puts: Vec<String>,
    pub hook_fail: Option<(Hook, bool)>,
    /// On this event, wait for the condition (yielding, at most so many
    /// times) before recording the start.
    pub stall: Option<(u64, u32, StallFn)>,
}

impl Probe {
    pub fn new(log: &Arc<Log>, label: &str) -> Self {
        Self {
            label: label.into(),
            log: log.clone(),
            instance: 0,
            work: 50,
            holds: Vec::new(),
            fail_on: Arc::default(),
            panic_on: Arc::default(),
            pass: None,
            reads: Vec::new(),
            declare_reads: true,
            puts: Vec::new(),
            hook_fail: None,
            stall: None,
        }
    }
    pub fn work(mut self, iterations: u32) -> Self {
        self.work = iterations;
        self
    }
    /// On `event`, waits until `until` holds (yielding, at most `max` times)
    /// before recording the start: the engine has handed the execution to
    /// this thread, which then makes no progress, as a thread taken off its
    /// core by the OS on a loaded machine.
    pub fn stall_on(mut self, event: u64, max: u32, until: StallFn) -> Self {
        self.stall = Some((event, max, until));
        self
    }
    pub fn hold(mut self, hold: &Arc<Hold>) -> Self {
        self.holds.push(hold.clone());
        self
    }
    pub fn fail_on(mut self, events: &[u64]) -> Self {
        self.fail_on = Arc::new(events.iter().copied().collect());
        self
    }
    pub fn panic_on(mut self, events: &[u64]) -> Self {
        self.panic_on = Arc::new(events.iter().copied().collect());
        self
    }
    pub fn pass(mut self, f: impl Fn(EventId) -> bool + Send + Sync + 'static) -> Self {
        self.pass = Some(Arc::new(f));
        self
    }
    /// Products to read (and check), declared as consumes.
    pub fn reads(mut self, tags: &[&str]) -> Self {
        self.reads.extend(tags.iter().map(|s| s.to_string()));
        self
    }
    /// Instance names to put (`""` for the unnamed product).
    pub fn puts(mut self, instances: &[&str]) -> Self {
        self.puts.extend(instances.iter().map(|s| s.to_string()));
        self
    }
    pub fn fail_hook(mut self, hook: Hook, panic: bool) -> Self {
        self.hook_fail = Some((hook, panic));
        self
    }

    fn consumes(&self) -> Vec<String> {
        if self.declare_reads {
            self.reads.clone()
        } else {
            Vec::new()
        }
    }
    pub fn producer(self) -> ModuleDesc {
        let (label, consumes, puts) = (self.label.to_string(), self.consumes(), self.puts.clone());
        ModuleDesc::producer(label, self)
            .consumes(consumes)
            .produces(puts)
    }
    pub fn filter(self) -> ModuleDesc {
        let (label, consumes, puts) = (self.label.to_string(), self.consumes(), self.puts.clone());
        ModuleDesc::filter(label, self)
            .consumes(consumes)
            .produces(puts)
    }
    pub fn analyzer(self) -> ModuleDesc {
        let (label, consumes, puts) = (self.label.to_string(), self.consumes(), self.puts.clone());
        ModuleDesc::analyzer(label, self)
            .consumes(consumes)
            .produces(puts)
    }
    pub fn output(self) -> ModuleDesc {
        let (label, consumes) = (self.label.to_string(), self.consumes());
        ModuleDesc::output(label, self).consumes(consumes)
    }
    /// `n` clones numbered 0..n, as a module of `kind`.
    pub fn cloned(self, n: u32, kind: ModuleKind) -> ModuleDesc {
        let (label, consumes, puts) = (self.label.to_string(), self.consumes(), self.puts.clone());
        let mut next = 0;
        let desc = ModuleDesc::cloned(label, n, move || {
            let mut p = self.clone();
            p.instance = next;
            next += 1;
            match kind {
                ModuleKind::Producer => ModuleImpl::Producer(Box::new(p)),
                ModuleKind::Filter => ModuleImpl::Filter(Box::new(p)),
                ModuleKind::Analyzer => ModuleImpl::Analyzer(Box::new(p)),
                ModuleKind::Output => ModuleImpl::Output(Box::new(p)),
            }
        });
        let desc = desc.consumes(consumes);
        if kind == ModuleKind::Output {
            desc
        } else {
            desc.produces(puts)
        }
    }

    /// The body shared by every kind: record, wait, work, check inputs,
    /// put outputs, decide.
    fn body(&self, ev: &Event<'_>, phase: Phase) -> ModuleResult<bool> {
        let id = ev.id();
        if let Some((event, max, until)) = &self.stall
            && *event == id.event
        {
            wait_until(*max, || until());
        }
        let start = self.log.tick();
        for h in &self.holds {
            h.enter();
        }
        spin(self.work);
        let mut result = self.check_reads(ev);
        if result.is_ok() {
            result = self.put_all(ev);
        }
        let decision = self.pass.as_ref().is_none_or(|f| f(id));
        for h in &self.holds {
            h.leave();
        }
        let fails = result.is_err()
            || self.fail_on.contains(&id.event)
            || self.panic_on.contains(&id.event);
        let end = self.log.tick();
        self.log.push(Exec {
            label: self.label.clone(),
            instance: self.instance,
            event: id,
            phase,
            start,
            end,
            thread: parallel::current_thread_index(),
            os_thread: std::thread::current().id(),
            passed: if fails { None } else { Some(decision) },
            pool_threads: parallel::current_num_threads(),
        });
        if self.panic_on.contains(&id.event) {
            panic!("probe {} panics on event {}", self.label, id.event);
        }
        if self.fail_on.contains(&id.event) {
            return Err(ModuleError::msg(format!(
                "probe {} fails on event {}",
                self.label, id.event
            )));
        }
        result.map(|()| decision)
    }

    fn check_reads(&self, ev: &Event<'_>) -> ModuleResult {
        for tag in &self.reads {
            let v: &u64 = ev.get(tag)?;
            let want = value_of(tag, ev.id().event);
            if *v != want {
                return Err(ModuleError::msg(format!(
                    "{}: product {tag} of {} is {v}, not {want}",
                    self.label,
                    ev.id()
                )));
            }
        }
        Ok(())
    }

    fn put_all(&self, ev: &Event<'_>) -> ModuleResult {
        for instance in &self.puts {
            ev.put(
                instance,
                value_of(&tag_of(&self.label, instance), ev.id().event),
            )?;
        }
        Ok(())
    }

    fn on_hook(&self, hook: Hook) -> ModuleResult {
        self.log.hook(&self.label, self.instance, hook);
        match self.hook_fail {
            Some((h, true)) if h == hook => panic!("probe {} panics in {hook:?}", self.label),
            Some((h, false)) if h == hook => Err(ModuleError::msg(format!(
                "probe {} fails in {hook:?}",
                self.label
            ))),
            _ => Ok(()),
        }
    }
}

impl Transitions for Probe {
    fn begin_job(&self) -> ModuleResult {
        self.on_hook(Hook::BeginJob)
    }
    fn end_job(&self) -> ModuleResult {
        self.on_hook(Hook::EndJob)
    }
    fn begin_run(&self, run: u32) -> ModuleResult {
        self.on_hook(Hook::BeginRun(run))
    }
    fn end_run(&self, run: u32) -> ModuleResult {
        self.on_hook(Hook::EndRun(run))
    }
    fn begin_lumi(&self, run: u32, lumi: u32) -> ModuleResult {
        self.on_hook(Hook::BeginLumi(run, lumi))
    }
    fn end_lumi(&self, run: u32, lumi: u32) -> ModuleResult {
        self.on_hook(Hook::EndLumi(run, lumi))
    }
}

impl Producer for Probe {
    fn produce(&self, ev: &Event<'_>) -> ModuleResult {
        self.body(ev, Phase::Run).map(|_| ())
    }
}
impl Filter for Probe {
    fn filter(&self, ev: &Event<'_>) -> ModuleResult<bool> {
        self.body(ev, Phase::Run)
    }
}
impl Analyzer for Probe {
    fn analyze(&self, ev: &Event<'_>) -> ModuleResult {
        self.body(ev, Phase::Run).map(|_| ())
    }
}
impl Output for Probe {
    fn write(&self, ev: &Event<'_>, results: &TriggerResults) -> ModuleResult {
        self.log.written.lock().unwrap().push(Written {
            label: self.label.clone(),
            event: ev.id(),
            results: results.iter().map(|(n, a)| (n.to_string(), a)).collect(),
            unknown_path: results.accepted("no such path"),
        });
        self.body(ev, Phase::Run).map(|_| ())
    }
}

// ---------------------------------------------------- external work

type Job = Box<dyn FnOnce() + Send>;

/// A thread outside the engine's pool that finishes external work.
pub struct Helper {
    tx: Mutex<mpsc::Sender<Job>>,
}

impl Helper {
    pub fn new() -> Arc<Self> {
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("external-work".into())
            .spawn(move || {
                while let Ok(job) = rx.recv() {
                    job();
                }
            })
            .expect("spawn helper");
        Arc::new(Self { tx: Mutex::new(tx) })
    }
    pub fn run(&self, job: impl FnOnce() + Send + 'static) {
        self.tx
            .lock()
            .unwrap()
            .send(Box::new(job))
            .expect("helper alive");
    }
}

/// When the helper finishes the external work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delay {
    /// At once.
    Immediate,
    /// Once some other module started after the acquire ended (bounded).
    AfterOthers,
    /// Once the acquire returned (bounded): sidesteps the engine acting on
    /// a completion while its acquire still runs.
    AfterReturn,
}

/// How the acquire of one event goes wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcquireFault {
    /// The completion is finished with an error.
    CompletionErr,
    /// The completion is dropped without finishing.
    CompletionDropped,
    /// acquire returns Err without handing the completion off.
    ErrNoHandoff,
    /// acquire hands the completion off, waits until it was finished Ok,
    /// then returns Err.
    ErrAfterFinished,
}

/// An external-work producer: acquire hands its `Completion` to a
/// [`Helper`]; produce puts the products.
#[derive(Clone)]
pub struct AsyncProbe {
    pub base: Probe,
    pub helper: Arc<Helper>,
    pub delay: Delay,
    pub faults: Arc<HashMap<u64, AcquireFault>>,
    /// After handing off, acquire waits (bounded) until produce of the
    /// same event started: a correct engine never lets that happen.
    pub linger: u32,
    /// `Delay::AfterOthers`: how often another module did start after the
    /// acquire ended before the helper finished the work, and how often the
    /// helper gave up waiting for that.
    pub others_ran: Arc<AtomicU64>,
    pub gave_up: Arc<AtomicU64>,
    acquired: Arc<Mutex<HashMap<u64, u32>>>,
    produced: Arc<Mutex<HashSet<u64>>>,
}

impl AsyncProbe {
    pub fn new(base: Probe, helper: &Arc<Helper>, delay: Delay) -> Self {
        Self {
            base,
            helper: helper.clone(),
            delay,
            faults: Arc::default(),
            linger: 0,
            others_ran: Arc::default(),
            gave_up: Arc::default(),
            acquired: Arc::default(),
            produced: Arc::default(),
        }
    }
    pub fn faults(mut self, faults: &[(u64, AcquireFault)]) -> Self {
        self.faults = Arc::new(faults.iter().copied().collect());
        self
    }
    pub fn linger(mut self, max_yields: u32) -> Self {
        self.linger = max_yields;
        self
    }
    pub fn producer(self) -> ModuleDesc {
        let b = &self.base;
        let (label, consumes, puts) = (b.label.to_string(), b.consumes(), b.puts.clone());
        ModuleDesc::producer(label, self)
            .consumes(consumes)
            .produces(puts)
            .external_work(true)
    }
    pub fn cloned(self, n: u32) -> ModuleDesc {
        let b = &self.base;
        let (label, consumes, puts) = (b.label.to_string(), b.consumes(), b.puts.clone());
        let mut next = 0;
        ModuleDesc::cloned(label, n, move || {
            let mut p = self.clone();
            p.base.instance = next;
            next += 1;
            ModuleImpl::Producer(Box::new(p))
        })
        .consumes(consumes)
        .produces(puts)
        .external_work(true)
    }
}

impl Transitions for AsyncProbe {
    fn begin_job(&self) -> ModuleResult {
        self.base.begin_job()
    }
    fn end_job(&self) -> ModuleResult {
        self.base.end_job()
    }
    fn begin_run(&self, run: u32) -> ModuleResult {
        self.base.begin_run(run)
    }
    fn end_run(&self, run: u32) -> ModuleResult {
        self.base.end_run(run)
    }
    fn begin_lumi(&self, run: u32, lumi: u32) -> ModuleResult {
        self.base.begin_lumi(run, lumi)
    }
    fn end_lumi(&self, run: u32, lumi: u32) -> ModuleResult {
        self.base.end_lumi(run, lumi)
    }
}

impl Producer for AsyncProbe {
    fn acquire(&self, ev: &Event<'_>, done: Completion) -> ModuleResult {
        let b = &self.base;
        let id = ev.id();
        let start = b.log.tick();
        self.acquired.lock().unwrap().insert(id.event, b.instance);
        let reads = b.check_reads(ev);
        spin(b.work);
        let fault = self.faults.get(&id.event).copied();
        let my_end = Arc::new(AtomicU64::new(u64::MAX));
        let finished = Arc::new(AtomicBool::new(false));
        let mut result = reads;
        match fault {
            Some(AcquireFault::ErrNoHandoff) => {
                result = Err(ModuleError::msg(format!(
                    "acquire of {} fails on event {}",
                    b.label, id.event
                )));
                drop(done);
            }
            _ => {
                let (log, delay, my_end2, finished2) =
                    (b.log.clone(), self.delay, my_end.clone(), finished.clone());
                let label = b.label.clone();
                let (others_ran, gave_up) = (self.others_ran.clone(), self.gave_up.clone());
                self.helper.run(move || {
                    // (ErrAfterFinished: acquire waits for this finish.)
                    if fault != Some(AcquireFault::ErrAfterFinished) {
                        match delay {
                            Delay::Immediate => {}
                            // Wait until the acquire ended, then until some
                            // other module started after it.
                            Delay::AfterOthers => {
                                let ran = wait_until(200_000, || {
                                    let e = my_end2.load(SeqCst);
                                    e != u64::MAX && log.now() > e + 1
                                });
                                let counter = if ran { &others_ran } else { &gave_up };
                                counter.fetch_add(1, SeqCst);
                            }
                            Delay::AfterReturn => {
                                wait_until(1_000_000, || my_end2.load(SeqCst) != u64::MAX);
                            }
                        }
                    }
                    match fault {
                        Some(AcquireFault::CompletionErr) => done.finish(Err(ModuleError::msg(
                            format!("external work of {label} fails on event {}", id.event),
                        ))),
                        Some(AcquireFault::CompletionDropped) => drop(done),
                        _ => done.finish(Ok(())),
                    }
                    finished2.store(true, SeqCst);
                });
                if fault == Some(AcquireFault::ErrAfterFinished) {
                    wait_until(1_000_000, || finished.load(SeqCst));
                    result = Err(ModuleError::msg(format!(
                        "acquire of {} fails on event {}",
                        b.label, id.event
                    )));
                }
                if self.linger > 0 {
                    let produced = self.produced.clone();
                    wait_until(self.linger, || produced.lock().unwrap().contains(&id.event));
                }
            }
        }
        let end = b.log.tick();
        b.log.push(Exec {
            label: b.label.clone(),
            instance: b.instance,
            event: id,
            phase: Phase::Acquire,
            start,
            end,
            thread: parallel::current_thread_index(),
            os_thread: std::thread::current().id(),
            passed: result.is_ok().then_some(true),
            pool_threads: parallel::current_num_threads(),
        });
        my_end.store(end, SeqCst);
        result
    }

    fn produce(&self, ev: &Event<'_>) -> ModuleResult {
        self.produced.lock().unwrap().insert(ev.id().event);
        if !self.acquired.lock().unwrap().contains_key(&ev.id().event) {
            return Err(ModuleError::msg(format!(
                "{}: produce of {} before its acquire",
                self.base.label,
                ev.id()
            )));
        }
        self.base.body(ev, Phase::Produce).map(|_| ())
    }
}

// ------------------------------------------------------------ sources

/// An [`EmptySource`] that counts reads and can fail or panic at one event.
pub struct TestSource {
    inner: EmptySource,
    log: Arc<Log>,
    fail_at: Option<u64>,
    panic_at: Option<u64>,
}

impl TestSource {
    pub fn new(inner: EmptySource, log: &Arc<Log>) -> Self {
        Self {
            inner,
            log: log.clone(),
            fail_at: None,
            panic_at: None,
        }
    }
    pub fn fail_at(mut self, event: u64) -> Self {
        self.fail_at = Some(event);
        self
    }
    pub fn panic_at(mut self, event: u64) -> Self {
        self.panic_at = Some(event);
        self
    }
}

impl Source for TestSource {
    fn next_event(
        &mut self,
        products: &mut SourceProducts,
    ) -> Result<Option<EventId>, ModuleError> {
        let n = self.log.reads.fetch_add(1, SeqCst) + 1;
        if self.fail_at == Some(n) {
            return Err(ModuleError::msg(format!(
                "test source cannot read event {n}"
            )));
        }
        if self.panic_at == Some(n) {
            panic!("test source panics reading event {n}");
        }
        self.inner.next_event(products)
    }
    fn describe(&self) -> String {
        "test source".into()
    }
}

/// An [`EmptySource`] that takes a ticket of the log's sequence for each
/// event it gives, with the thread reading it.
pub struct TicketSource {
    inner: EmptySource,
    log: Arc<Log>,
}

impl TicketSource {
    pub fn new(inner: EmptySource, log: &Arc<Log>) -> Self {
        Self {
            inner,
            log: log.clone(),
        }
    }
}

impl Source for TicketSource {
    fn next_event(
        &mut self,
        products: &mut SourceProducts,
    ) -> Result<Option<EventId>, ModuleError> {
        let id = self.inner.next_event(products)?;
        if let Some(id) = id {
            let read = ReadAt {
                event: id.event,
                ticket: self.log.tick(),
                os_thread: std::thread::current().id(),
            };
            self.log.read_at.lock().unwrap().push(read);
        }
        Ok(id)
    }
    fn describe(&self) -> String {
        "ticket source".into()
    }
}

// ------------------------------------------------------------ running

/// Runs `f` on its own thread; panics with "hang" if it does not finish
/// within `secs` seconds, and re-raises its panic if it panicked.
pub fn watchdog<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::Builder::new()
        .name("watched-job".into())
        .spawn(move || {
            let _ = tx.send(f());
        })
        .expect("spawn watched job");
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(v) => {
            let _ = handle.join();
            v
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("hang: the job did not finish within {secs} s")
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => match handle.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => unreachable!("the job sent nothing and did not panic"),
        },
    }
}

/// [`run`] under a 60 s watchdog.
pub fn run_watched(process: Process, options: RunOptions) -> Result<Report, RunError> {
    watchdog(60, move || run(process, &options))
}

pub fn threaded(threads: usize, events_in_flight: usize) -> RunOptions {
    RunOptions {
        threads,
        events_in_flight,
        ..RunOptions::default()
    }
}

pub fn sequential(events_in_flight: usize) -> RunOptions {
    RunOptions {
        threads: 1,
        events_in_flight,
        executor: ExecutorKind::Sequential,
        ..RunOptions::default()
    }
}

pub fn skip(mut o: RunOptions) -> RunOptions {
    o.on_error = ErrorPolicy::SkipEvent;
    o
}

// ----------------------------------------------------------- analysis

pub fn overlaps(a: &Exec, b: &Exec) -> bool {
    a.start < b.end && b.start < a.end
}

/// The most intervals open at once.
pub fn max_concurrency<'a>(execs: impl IntoIterator<Item = &'a Exec>) -> usize {
    sweep(execs.into_iter().map(|e| (e.start, e.end)))
}

fn sweep(intervals: impl Iterator<Item = (u64, u64)>) -> usize {
    let mut points: Vec<(u64, i32)> = Vec::new();
    for (s, e) in intervals {
        points.push((s, 1));
        points.push((e, -1));
    }
    points.sort();
    let (mut now, mut peak) = (0i32, 0i32);
    for (_, d) in points {
        now += d;
        peak = peak.max(now);
    }
    peak as usize
}

/// Some pair of overlapping executions among `execs`, if any.
pub fn find_overlap(execs: &[Exec]) -> Option<(Exec, Exec)> {
    let mut sorted: Vec<&Exec> = execs.iter().collect();
    sorted.sort_by_key(|e| e.start);
    let mut open: Option<&Exec> = None;
    for e in sorted {
        if let Some(o) = open.filter(|o| e.start < o.end) {
            return Some((o.clone(), e.clone()));
        }
        if open.is_none_or(|o| e.end > o.end) {
            open = Some(e);
        }
    }
    None
}

// ------------------------------------------------------------ overtaking

/// Per event number, the first start of its executions.
pub fn first_starts(execs: &[Exec]) -> BTreeMap<u64, u64> {
    let mut first = BTreeMap::new();
    for e in execs {
        let s = first.entry(e.event.event).or_insert(e.start);
        *s = (*s).min(e.start);
    }
    first
}

/// Per event number, the last end of its executions.
pub fn last_ends(execs: &[Exec]) -> BTreeMap<u64, u64> {
    let mut last = BTreeMap::new();
    for e in execs {
        let s = last.entry(e.event.event).or_insert(e.end);
        *s = (*s).max(e.end);
    }
    last
}

/// What one thread recorded, in order: `(first ticket, last ticket,
/// event, read)` of its executions and reads.
type Timeline = Vec<(u64, u64, u64, bool)>;

fn timelines(execs: &[Exec], reads: &[ReadAt]) -> Vec<Timeline> {
    let mut by_thread: HashMap<std::thread::ThreadId, Timeline> = HashMap::new();
    for e in execs {
        let t = by_thread.entry(e.os_thread).or_default();
        t.push((e.start, e.end, e.event.event, false));
    }
    for r in reads {
        let t = by_thread.entry(r.os_thread).or_default();
        t.push((r.ticket, r.ticket, r.event, true));
    }
    let mut all: Vec<Timeline> = by_thread.into_values().collect();
    for t in &mut all {
        t.sort_unstable();
    }
    all
}

/// When the scheduler was given each event's first task, and when a thread
/// took it, bounded by tickets of the threads involved, so that what the
/// OS does to a thread between two of its tickets is not counted:
///
/// * `ready[n]`, a ticket taken after the task was handed in: the next
///   ticket of the thread that read the event (a thread taken off its core
///   while reading hands the task in late), or the event's first start;
/// * `claimed[n]`, a ticket taken before a thread took the task: the last
///   ticket of that thread before the start (0 for none). A thread taken
///   off its core between taking a task and starting it delays the start,
///   not the scheduler's decision.
///
/// Busy threads take tickets all the time: for an event that waits while
/// they run others, both bounds are tight.
pub fn ready_and_claimed(
    execs: &[Exec],
    reads: &[ReadAt],
) -> (BTreeMap<u64, u64>, BTreeMap<u64, u64>) {
    let mut ready = first_starts(execs);
    let mut claimed = BTreeMap::new();
    for t in timelines(execs, reads) {
        let mut before = 0;
        for (i, &(_, end, event, read)) in t.iter().enumerate() {
            if read {
                if let (Some(next), Some(r)) = (t.get(i + 1), ready.get_mut(&event)) {
                    *r = (*r).min(next.0);
                }
            } else {
                let c = claimed.entry(event).or_insert(before);
                *c = (*c).min(before);
            }
            before = end;
        }
    }
    (ready, claimed)
}

/// The event that the most later events overtook while it waited for a
/// thread, and how many: those whose last execution ended after
/// `ready[event]` (0 when absent) and by `first[event]`.
pub fn most_overtaken(
    ready: &BTreeMap<u64, u64>,
    first: &BTreeMap<u64, u64>,
    last_end: &BTreeMap<u64, u64>,
) -> (usize, u64) {
    first
        .iter()
        .map(|(&n, &at)| {
            let from = ready.get(&n).copied().unwrap_or(0);
            let overtaken = last_end
                .range(n + 1..)
                .filter(|&(_, &end)| from < end && end <= at)
                .count();
            (overtaken, n)
        })
        .max()
        .unwrap_or((0, 0))
}

/// The most events whose executions (from the first start to the last end)
/// were open at once.
pub fn events_in_flight(execs: &[Exec]) -> usize {
    let mut spans: HashMap<EventId, (u64, u64)> = HashMap::new();
    for e in execs {
        let s = spans.entry(e.event).or_insert((e.start, e.end));
        s.0 = s.0.min(e.start);
        s.1 = s.1.max(e.end);
    }
    sweep(spans.into_values())
}

/// The most distinct events with a module running at one instant.
pub fn events_running_at_once(execs: &[Exec]) -> usize {
    let mut points: Vec<(u64, bool, EventId)> = Vec::new();
    for e in execs {
        points.push((e.start, true, e.event));
        points.push((e.end, false, e.event));
    }
    points.sort_by_key(|p| p.0);
    let mut running: HashMap<EventId, usize> = HashMap::new();
    let mut peak = 0;
    for (_, open, ev) in points {
        if open {
            *running.entry(ev).or_insert(0) += 1;
        } else {
            let n = running.get_mut(&ev).unwrap();
            *n -= 1;
            if *n == 0 {
                running.remove(&ev);
            }
        }
        peak = peak.max(running.len());
    }
    peak
}

/// Checks that every execution of an event in luminosity block (r, l)
/// lies after every `BeginLumi(r, l)` and `BeginRun(r)` hook and before
/// every `EndLumi(r, l)` and `EndRun(r)` hook, and that each instance's
/// hooks nest: lumis inside their run, each begun once, ended in the order
/// they began (several may be open at once with concurrent luminosity
/// blocks; [`max_open_lumis`] counts them). Returns a description of the
/// first violation.
pub fn check_transitions(execs: &[Exec], hooks: &[HookRec]) -> Result<(), String> {
    for ((label, inst), list) in hooks_per_instance(hooks) {
        let mut run: Option<u32> = None;
        let mut lumis: std::collections::VecDeque<(u32, u32)> = Default::default();
        let mut seen_lumis = BTreeSet::new();
        let mut seen_runs = BTreeSet::new();
        for h in &list {
            let bad = |why: &str| Err(format!("{label}#{inst}: {why} at {h:?} in {list:?}"));
            match *h {
                Hook::BeginJob | Hook::EndJob => {}
                Hook::BeginRun(r) => {
                    if run.is_some() || !seen_runs.insert(r) {
                        return bad("beginRun while a run is open or repeated");
                    }
                    run = Some(r);
                }
                Hook::EndRun(r) => {
                    if run != Some(r) || !lumis.is_empty() {
                        return bad("endRun of a run that is not open, or with a lumi open");
                    }
                    run = None;
                }
                Hook::BeginLumi(r, l) => {
                    if run != Some(r) || !seen_lumis.insert((r, l)) {
                        return bad("beginLumi outside its run or repeated");
                    }
                    lumis.push_back((r, l));
                }
                Hook::EndLumi(r, l) => {
                    if lumis.front() != Some(&(r, l)) {
                        return bad("endLumi of a lumi that is not the oldest open one");
                    }
                    lumis.pop_front();
                }
            }
        }
    }
    // Events inside their lumi and run.
    let mut begin: HashMap<Hook, u64> = HashMap::new();
    let mut end: HashMap<Hook, u64> = HashMap::new();
    for h in hooks {
        match h.hook {
            Hook::BeginRun(_) | Hook::BeginLumi(..) => {
                let b = begin.entry(h.hook).or_insert(0);
                *b = (*b).max(h.seq);
            }
            Hook::EndRun(_) | Hook::EndLumi(..) => {
                let e = end.entry(h.hook).or_insert(u64::MAX);
                *e = (*e).min(h.seq);
            }
            _ => {}
        }
    }
    for e in execs {
        let id = e.event;
        for (b, en) in [
            (
                Hook::BeginLumi(id.run, id.lumi),
                Hook::EndLumi(id.run, id.lumi),
            ),
            (Hook::BeginRun(id.run), Hook::EndRun(id.run)),
        ] {
            let Some(&bs) = begin.get(&b) else {
                return Err(format!("{} ran on {} with no {b:?}", e.label, id));
            };
            if e.start < bs {
                return Err(format!(
                    "{} started on {} (seq {}) before {b:?} ended (seq {bs})",
                    e.label, id, e.start
                ));
            }
            if let Some(&es) = end.get(&en).filter(|&&es| e.end > es) {
                return Err(format!(
                    "{} ended on {} (seq {}) after {en:?} began (seq {es})",
                    e.label, id, e.end
                ));
            }
        }
    }
    Ok(())
}

/// Each instance's hooks, in call order.
pub fn hooks_per_instance(hooks: &[HookRec]) -> BTreeMap<(String, u32), Vec<Hook>> {
    let mut per_instance: BTreeMap<(String, u32), Vec<Hook>> = BTreeMap::new();
    for h in hooks {
        per_instance
            .entry((h.label.to_string(), h.instance))
            .or_default()
            .push(h.hook);
    }
    per_instance
}

/// The most luminosity blocks any instance had open at once.
pub fn max_open_lumis(hooks: &[HookRec]) -> usize {
    let mut most = 0;
    for list in hooks_per_instance(hooks).values() {
        let mut open = 0usize;
        for h in list {
            match h {
                Hook::BeginLumi(..) => open += 1,
                Hook::EndLumi(..) => open = open.saturating_sub(1),
                _ => {}
            }
            most = most.max(open);
        }
    }
    most
}
