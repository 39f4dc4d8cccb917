//! Decisions about reading events and run / luminosity-block transitions.
//!
//! At most `events_in_flight` events hold a slot at once (back-pressure on
//! the source, which reads one event at a time). An event of a new luminosity
//! block or run is held until every event of the previous one finished, then
//! the transitions run, then the held event starts.

use serde::Serialize;

use crate::ids::EventId;

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
    /// Run these transitions, in order, with no event in flight.
    Transitions(Vec<Transition>),
    /// The job is over: every event and every transition is done.
    Finished,
}

#[derive(Debug)]
pub struct SourceControl {
    free_slots: Vec<usize>,
    reading: bool,
    exhausted: bool,
    stopped: bool,
    processing: usize,
    peak_processing: usize,
    held: Option<(usize, EventId)>,
    current: Option<(u32, u32)>,
    in_transition: bool,
    ending: bool,
    finished: bool,
}

impl SourceControl {
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
            current: None,
            in_transition: false,
            ending: false,
            finished: false,
        }
    }

    /// Asks for whatever the source side can do now.
    pub fn poll(&mut self, out: &mut Vec<SourceStep>) {
        if self.finished || self.reading || self.in_transition || self.held.is_some() {
            return;
        }
        if !(self.exhausted || self.stopped) {
            if let Some(slot) = self.free_slots.pop() {
                self.reading = true;
                out.push(SourceStep::Read(slot));
            }
            return;
        }
        if self.processing == 0 && !self.ending {
            self.ending = true;
            match self.current.take() {
                Some((run, lumi)) => {
                    self.in_transition = true;
                    out.push(SourceStep::Transitions(vec![
                        Transition::EndLumi(run, lumi),
                        Transition::EndRun(run),
                    ]));
                }
                None => {
                    self.finished = true;
                    out.push(SourceStep::Finished);
                }
            }
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
            Some(_) if self.stopped => self.free_slots.push(slot),
            Some(id) if self.current == Some((id.run, id.lumi)) => self.start(slot, out),
            Some(id) => {
                self.held = Some((slot, id));
                self.begin_transition_if_idle(out);
            }
        }
        self.poll(out);
    }

    /// The event in `slot` finished (or failed).
    pub fn event_done(&mut self, slot: usize, out: &mut Vec<SourceStep>) {
        self.processing -= 1;
        self.free_slots.push(slot);
        self.begin_transition_if_idle(out);
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
        if let Some((slot, _)) = self.held.take() {
            self.start(slot, out);
        }
        self.poll(out);
    }

    /// Stop reading (job abort): events in flight still end normally.
    pub fn stop(&mut self, out: &mut Vec<SourceStep>) {
        self.stopped = true;
        if let Some((slot, _)) = self.held.take() {
            self.free_slots.push(slot);
        }
        self.poll(out);
    }

    pub fn processing(&self) -> usize {
        self.processing
    }
    pub fn peak_processing(&self) -> usize {
        self.peak_processing
    }
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    fn start(&mut self, slot: usize, out: &mut Vec<SourceStep>) {
        self.processing += 1;
        self.peak_processing = self.peak_processing.max(self.processing);
        out.push(SourceStep::Start(slot));
    }

    fn begin_transition_if_idle(&mut self, out: &mut Vec<SourceStep>) {
        if self.processing != 0 || self.in_transition {
            return;
        }
        let Some((_, id)) = self.held else { return };
        let mut steps = Vec::new();
        match self.current {
            Some((run, lumi)) if run == id.run => steps.push(Transition::EndLumi(run, lumi)),
            Some((run, lumi)) => {
                steps.push(Transition::EndLumi(run, lumi));
                steps.push(Transition::EndRun(run));
                steps.push(Transition::BeginRun(id.run));
            }
            None => steps.push(Transition::BeginRun(id.run)),
        }
        steps.push(Transition::BeginLumi(id.run, id.lumi));
        // The new block counts as open from now on, even if a hook fails:
        // the end of the job then closes it.
        self.current = Some((id.run, id.lumi));
        self.in_transition = true;
        out.push(SourceStep::Transitions(steps));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn back_pressure_and_transitions() {
        let mut sc = SourceControl::new(2);
        let mut out = Vec::new();
        sc.poll(&mut out);
        assert_eq!(out, vec![SourceStep::Read(0)]);
        out.clear();
        sc.read_done(0, Some(EventId::new(1, 1, 1)), &mut out);
        assert_eq!(
            out,
            vec![SourceStep::Transitions(vec![
                Transition::BeginRun(1),
                Transition::BeginLumi(1, 1)
            ])]
        );
        out.clear();
        sc.transitions_done(&mut out);
        assert_eq!(out, vec![SourceStep::Start(0), SourceStep::Read(1)]);
        out.clear();
        sc.read_done(1, Some(EventId::new(1, 1, 2)), &mut out);
        // Both slots busy: no further read until an event ends.
        assert_eq!(out, vec![SourceStep::Start(1)]);
        out.clear();
        sc.event_done(0, &mut out);
        assert_eq!(out, vec![SourceStep::Read(0)]);
        out.clear();
        sc.read_done(0, Some(EventId::new(1, 2, 3)), &mut out);
        assert!(out.is_empty(), "new lumi waits for event 2: {out:?}");
        sc.event_done(1, &mut out);
        assert_eq!(
            out,
            vec![SourceStep::Transitions(vec![
                Transition::EndLumi(1, 1),
                Transition::BeginLumi(1, 2)
            ])]
        );
        out.clear();
        sc.transitions_done(&mut out);
        assert_eq!(out, vec![SourceStep::Start(0), SourceStep::Read(1)]);
        out.clear();
        sc.read_done(1, None, &mut out);
        assert!(out.is_empty());
        sc.event_done(0, &mut out);
        assert_eq!(
            out,
            vec![SourceStep::Transitions(vec![
                Transition::EndLumi(1, 2),
                Transition::EndRun(1)
            ])]
        );
        out.clear();
        sc.transitions_done(&mut out);
        assert_eq!(out, vec![SourceStep::Finished]);
        assert_eq!(sc.peak_processing(), 2);
    }
}
