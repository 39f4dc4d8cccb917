//! Decisions about reading events and run / luminosity-block transitions.
//!
//! At most `events_in_flight` events hold a slot at once (back-pressure on
//! the source, which reads one event at a time). Up to `concurrent_lumis`
//! luminosity blocks of one run are open at once: when the source moves to
//! a new block, its `BeginLumi` runs and its events start while the last
//! events of the previous blocks still run. A block's `EndLumi` runs once
//! all its events finished and every older block ended (end-lumis come in
//! block order). With one block at a time, an event of a new block is held
//! until every event of the previous one finished. A new run waits for
//! every block of the previous run to end (`EndRun`, `BeginRun`). One
//! transition list runs at a time, and no read starts while it runs, so
//! every module instance sees its hooks in one order.
//!
//! A requested [`StopHandle`] is a decision taken here, the same for every
//! executor and the simulator: no read starts after it, the events in
//! flight end normally, then the end transitions run.

use std::collections::VecDeque;

use serde::Serialize;

use crate::ids::EventId;
use crate::stop::StopHandle;

/// A run or luminosity-block boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Transition {
    BeginRun(u32),
    BeginLumi(u32, u32),
    EndLumi(u32, u32),
    EndRun(u32),
}

/// What the source side asks the executor to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceStep {
    /// Read the next event into this slot.
    Read(usize),
    /// The event read into this slot may start processing.
    Start(usize),
    /// Run these transitions, in order. Events of other luminosity blocks
    /// may be in flight meanwhile (never events of the blocks they end).
    Transitions(Vec<Transition>),
    /// The job is over: every event and every transition is done.
    Finished,
}

/// An open luminosity block: begun, not yet ended.
#[derive(Debug)]
struct Block {
    run: u32,
    lumi: u32,
    /// Sequence number of the block in the job, to find it from a slot.
    serial: u64,
    /// Events of the block in flight.
    processing: usize,
}

#[derive(Debug)]
pub struct SourceControl {
    free_slots: Vec<usize>,
    reading: bool,
    exhausted: bool,
    stopped: bool,
    processing: usize,
    peak_processing: usize,
    /// An event of a block not yet begun, waiting for its transitions.
    held: Option<(usize, EventId)>,
    /// Open blocks, oldest first; new events go to the last one.
    blocks: VecDeque<Block>,
    /// The most blocks open at once.
    concurrent_lumis: usize,
    next_serial: u64,
    /// Block serial of each slot's event.
    slot_block: Vec<u64>,
    /// Events started so far, and each slot's event's position among them.
    started: u64,
    slot_index: Vec<u64>,
    run: Option<u32>,
    in_transition: bool,
    ending: bool,
    finished: bool,
    stop: Option<StopHandle>,
    /// A stop request ended reading before the end of the input.
    interrupted: bool,
    peak_blocks: usize,
}

impl SourceControl {
    /// One luminosity block at a time; see [`SourceControl::set_concurrent_lumis`].
    pub fn new(events_in_flight: usize) -> Self {
        assert!(events_in_flight > 0, "events in flight must be at least 1");
        Self {
            free_slots: (0..events_in_flight).rev().collect(),
            reading: false,
            exhausted: false,
            stopped: false,
            processing: 0,
            peak_processing: 0,
            held: None,
            blocks: VecDeque::new(),
            concurrent_lumis: 1,
            next_serial: 0,
            slot_block: vec![0; events_in_flight],
            started: 0,
            slot_index: vec![0; events_in_flight],
            run: None,
            in_transition: false,
            ending: false,
            finished: false,
            stop: None,
            interrupted: false,
            peak_blocks: 0,
        }
    }

    /// Lets events of up to `n` luminosity blocks (of one run) be in flight
    /// at once (`n` >= 1).
    pub fn set_concurrent_lumis(&mut self, n: usize) {
        assert!(n > 0, "concurrent luminosity blocks must be at least 1");
        self.concurrent_lumis = n;
    }

    /// Reading stops once `stop` is requested (see [`StopHandle`]).
    pub fn set_stop(&mut self, stop: StopHandle) {
        self.stop = Some(stop);
    }

    /// Asks for whatever the source side can do now.
    pub fn poll(&mut self, out: &mut Vec<SourceStep>) {
        // A stop requested while a read is under way is applied when the
        // read ends: only then is it known whether the input was exhausted
        // (a stop that comes with the end of the input interrupts nothing).
        if !self.stopped
            && !self.reading
            && self.stop.as_ref().is_some_and(StopHandle::is_requested)
        {
            self.interrupted = !self.exhausted;
            self.halt(true);
        }
        if self.finished || self.reading || self.in_transition {
            return;
        }
        self.transitions(out);
        if self.in_transition || self.finished || self.held.is_some() {
            return;
        }
        if !(self.exhausted || self.stopped)
            && let Some(slot) = self.free_slots.pop()
        {
            self.reading = true;
            out.push(SourceStep::Read(slot));
        }
    }

    /// The read into `slot` ended: with an event, or `None` at the end of
    /// the input (or on a read error).
    pub fn read_done(&mut self, slot: usize, event: Option<EventId>, out: &mut Vec<SourceStep>) {
        self.reading = false;
        match event {
            None => {
                self.exhausted = true;
                self.free_slots.push(slot);
            }
            // An abort drops the event; a graceful stop still processes an
            // event whose read was under way, if its block is open.
            Some(_) if self.stopped && !self.interrupted => self.free_slots.push(slot),
            Some(id) if self.is_last_block(id) => self.start(slot, out),
            Some(_) if self.stopped => self.free_slots.push(slot),
            Some(id) => self.held = Some((slot, id)),
        }
        self.poll(out);
    }

    /// The event in `slot` finished (or failed).
    pub fn event_done(&mut self, slot: usize, out: &mut Vec<SourceStep>) {
        self.processing -= 1;
        let serial = self.slot_block[slot];
        if let Some(block) = self.blocks.iter_mut().find(|b| b.serial == serial) {
            block.processing -= 1;
        }
        self.free_slots.push(slot);
        self.poll(out);
    }

    /// The transitions handed out last are done.
    pub fn transitions_done(&mut self, out: &mut Vec<SourceStep>) {
        self.in_transition = false;
        if self.ending {
            self.finished = true;
            out.push(SourceStep::Finished);
            return;
        }
        // The held event's block has begun: it starts.
        if let Some((slot, id)) = self.held
            && self.is_last_block(id)
        {
            self.held = None;
            self.start(slot, out);
        }
        self.poll(out);
    }

    /// Stop reading (job abort): events in flight still end normally.
    pub fn stop(&mut self, out: &mut Vec<SourceStep>) {
        self.halt(false);
        self.poll(out);
    }

    /// No read starts any more; an event read but waiting for its block to
    /// begin is dropped (it never started) — except, on a `graceful` stop,
    /// one whose block's begin is already handed out: that block would
    /// otherwise begin and end without its event (the event starts when
    /// the transitions are done, as a read under way at a graceful stop
    /// does when its block is open).
    fn halt(&mut self, graceful: bool) {
        self.stopped = true;
        if let Some((slot, id)) = self.held {
            if graceful && self.is_last_block(id) {
                return;
            }
            self.held = None;
            self.free_slots.push(slot);
        }
    }

    /// Whether a stop request ended reading before the end of the input.
    pub fn interrupted(&self) -> bool {
        self.interrupted
    }

    /// The job index of the event started in `slot` (events are numbered
    /// in the order they start, which is the order they were read). Taken
    /// here, under the same lock as the decision to start, so that a later
    /// event started by another thread cannot take an earlier number.
    pub fn event_index(&self, slot: usize) -> u64 {
        self.slot_index[slot]
    }

    pub fn processing(&self) -> usize {
        self.processing
    }
    pub fn peak_processing(&self) -> usize {
        self.peak_processing
    }
    /// The most luminosity blocks open at once.
    pub fn peak_lumis(&self) -> usize {
        self.peak_blocks
    }
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    fn is_last_block(&self, id: EventId) -> bool {
        self.blocks
            .back()
            .is_some_and(|b| (b.run, b.lumi) == (id.run, id.lumi))
    }

    fn start(&mut self, slot: usize, out: &mut Vec<SourceStep>) {
        let block = self
            .blocks
            .back_mut()
            .expect("an event starts in an open block");
        block.processing += 1;
        self.slot_block[slot] = block.serial;
        self.slot_index[slot] = self.started;
        self.started += 1;
        self.processing += 1;
        self.peak_processing = self.peak_processing.max(self.processing);
        out.push(SourceStep::Start(slot));
    }

    /// Hands out the transitions that may run now, as one list: ends of
    /// finished blocks (oldest first), the begin of the held event's block,
    /// the end of the job.
    fn transitions(&mut self, out: &mut Vec<SourceStep>) {
        if self.in_transition || self.ending {
            return;
        }
        let mut steps = Vec::new();
        // The last block still takes events unless the source moved on.
        let moved_on = self.held.is_some() || self.exhausted || self.stopped;
        while let Some(front) = self.blocks.front() {
            let closed = self.blocks.len() > 1 || moved_on;
            if !(closed && front.processing == 0) {
                break;
            }
            steps.push(Transition::EndLumi(front.run, front.lumi));
            self.blocks.pop_front();
        }
        if let Some((_, id)) = self.held {
            // A block whose number comes back while the earlier block of
            // that number is open waits for it to end: hooks and per-block
            // state know a block by (run, lumi) only.
            let reopened = self
                .blocks
                .iter()
                .any(|b| (b.run, b.lumi) == (id.run, id.lumi));
            let begin = match self.run {
                Some(_) if reopened => false,
                Some(run) if run == id.run => self.blocks.len() < self.concurrent_lumis,
                Some(run) if self.blocks.is_empty() => {
                    steps.push(Transition::EndRun(run));
                    true
                }
                Some(_) => false,
                None => true,
            };
            if begin {
                if self.run != Some(id.run) {
                    steps.push(Transition::BeginRun(id.run));
                    self.run = Some(id.run);
                }
                steps.push(Transition::BeginLumi(id.run, id.lumi));
                // The new block counts as open from now on, even if a hook
                // fails: the end of the job then closes it.
                self.blocks.push_back(Block {
                    run: id.run,
                    lumi: id.lumi,
                    serial: self.next_serial,
                    processing: 0,
                });
                self.next_serial += 1;
                self.peak_blocks = self.peak_blocks.max(self.blocks.len());
            }
        } else if (self.exhausted || self.stopped) && self.processing == 0 && self.blocks.is_empty()
        {
            self.ending = true;
            match self.run.take() {
                Some(run) => steps.push(Transition::EndRun(run)),
                None if steps.is_empty() => {
                    self.finished = true;
                    out.push(SourceStep::Finished);
                    return;
                }
                None => {}
            }
        }
        if !steps.is_empty() {
            self.in_transition = true;
            out.push(SourceStep::Transitions(steps));
        }
    }
}

#[cfg(test)]
mod tests;
