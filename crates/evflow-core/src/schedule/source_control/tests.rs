//! The source control's decisions, step by step.
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

/// A stop requested by the read that finds the end of the input,
/// noticed by another event's completion before that read is reported:
/// no interruption. Requested during a read that brings an event: an
/// interruption, and the event (its block open) still starts.
#[test]
fn a_stop_during_a_read_is_decided_when_the_read_ends() {
    use SourceStep::*;
    for (read, interrupted) in [(None, false), (Some(EventId::new(1, 1, 2)), true)] {
        let mut sc = SourceControl::new(2);
        let stop = StopHandle::new();
        sc.set_stop(stop.clone());
        let mut out = Vec::new();
        sc.poll(&mut out);
        sc.read_done(0, Some(EventId::new(1, 1, 1)), &mut out);
        out.clear();
        sc.transitions_done(&mut out);
        assert_eq!(out, vec![Start(0), Read(1)]);
        out.clear();
        stop.request();
        sc.event_done(0, &mut out);
        assert!(!sc.interrupted(), "decided before the read ended");
        sc.read_done(1, read, &mut out);
        assert_eq!(sc.interrupted(), interrupted, "{read:?}");
        assert_eq!(out.contains(&Start(1)), read.is_some(), "{out:?}");
    }
}

/// A luminosity block number that comes back (1, 2, 1) while the
/// earlier block of that number is still open: the new block begins
/// only after that one ended (both would be known as (1, 1) to the
/// hooks).
#[test]
fn a_block_number_that_comes_back_waits_for_the_open_block_of_that_number() {
    use SourceStep::*;
    use Transition::*;
    let mut sc = SourceControl::new(4);
    sc.set_concurrent_lumis(3);
    let mut out = Vec::new();
    sc.poll(&mut out);
    sc.read_done(0, Some(EventId::new(1, 1, 1)), &mut out);
    out.clear();
    sc.transitions_done(&mut out);
    assert_eq!(out, vec![Start(0), Read(1)]);
    out.clear();
    sc.read_done(1, Some(EventId::new(1, 2, 2)), &mut out);
    assert_eq!(out, vec![Transitions(vec![BeginLumi(1, 2)])]);
    out.clear();
    sc.transitions_done(&mut out);
    assert_eq!(out, vec![Start(1), Read(2)]);
    out.clear();
    // Lumi 1 again, while block 1:1 (event 1) is open: held.
    sc.read_done(2, Some(EventId::new(1, 1, 3)), &mut out);
    assert!(out.is_empty(), "{out:?}");
    sc.event_done(1, &mut out);
    assert!(out.is_empty(), "block 1:2 ends only after 1:1: {out:?}");
    sc.event_done(0, &mut out);
    assert_eq!(
        out,
        vec![Transitions(vec![
            EndLumi(1, 1),
            EndLumi(1, 2),
            BeginLumi(1, 1)
        ])]
    );
    out.clear();
    sc.transitions_done(&mut out);
    assert_eq!(out, vec![Start(2), Read(0)]);
}

/// A graceful stop while the begin of a held event's block is under
/// way (several blocks open at once): the event starts once the begin
/// is done, and its block ends after it. Before, the event was dropped
/// and its block began and ended empty.
#[test]
fn a_graceful_stop_during_a_blocks_begin_still_runs_its_event() {
    use SourceStep::*;
    use Transition::*;
    let mut sc = SourceControl::new(3);
    sc.set_concurrent_lumis(2);
    let stop = StopHandle::new();
    sc.set_stop(stop.clone());
    let mut out = Vec::new();
    sc.poll(&mut out);
    sc.read_done(0, Some(EventId::new(1, 1, 1)), &mut out);
    out.clear();
    sc.transitions_done(&mut out);
    assert_eq!(out, vec![Start(0), Read(1)]);
    out.clear();
    sc.read_done(1, Some(EventId::new(1, 2, 2)), &mut out);
    assert_eq!(out, vec![Transitions(vec![BeginLumi(1, 2)])]);
    out.clear();
    // The stop comes while lumi 2 begins (another event's end polls).
    stop.request();
    sc.event_done(0, &mut out);
    assert!(out.is_empty(), "{out:?}");
    sc.transitions_done(&mut out);
    assert_eq!(out, vec![Start(1), Transitions(vec![EndLumi(1, 1)])]);
    out.clear();
    sc.transitions_done(&mut out);
    assert!(out.is_empty(), "{out:?}");
    sc.event_done(1, &mut out);
    assert_eq!(out, vec![Transitions(vec![EndLumi(1, 2), EndRun(1)])]);
    assert!(sc.interrupted());
    // An abort (not graceful) still drops such an event.
    let mut sc = SourceControl::new(3);
    sc.set_concurrent_lumis(2);
    let mut out = Vec::new();
    sc.poll(&mut out);
    sc.read_done(0, Some(EventId::new(1, 1, 1)), &mut out);
    sc.transitions_done(&mut out);
    sc.read_done(1, Some(EventId::new(1, 2, 2)), &mut out);
    out.clear();
    sc.stop(&mut out);
    sc.transitions_done(&mut out);
    assert!(!out.contains(&Start(1)), "{out:?}");
}

#[test]
fn next_block_starts_while_the_previous_one_finishes() {
    use SourceStep::*;
    use Transition::*;
    let mut sc = SourceControl::new(3);
    sc.set_concurrent_lumis(2);
    fn step(
        sc: &mut SourceControl,
        f: &dyn Fn(&mut SourceControl, &mut Vec<SourceStep>),
    ) -> Vec<SourceStep> {
        let mut out = Vec::new();
        f(sc, &mut out);
        out
    }
    let mut out = Vec::new();
    sc.poll(&mut out);
    assert_eq!(out, vec![Read(0)]);
    let ev = |l, e| Some(EventId::new(1, l, e));
    assert_eq!(
        step(&mut sc, &|sc, o| sc.read_done(0, ev(1, 1), o)),
        vec![Transitions(vec![BeginRun(1), BeginLumi(1, 1)])]
    );
    assert_eq!(
        step(&mut sc, &|sc, o| sc.transitions_done(o)),
        vec![Start(0), Read(1)]
    );
    // Lumi 2 begins while event 1 of lumi 1 is in flight.
    assert_eq!(
        step(&mut sc, &|sc, o| sc.read_done(1, ev(2, 2), o)),
        vec![Transitions(vec![BeginLumi(1, 2)])]
    );
    assert_eq!(
        step(&mut sc, &|sc, o| sc.transitions_done(o)),
        vec![Start(1), Read(2)]
    );
    // Lumi 3 must wait: two blocks are open.
    assert!(step(&mut sc, &|sc, o| sc.read_done(2, ev(3, 3), o)).is_empty());
    // Lumi 2 finishes first: it cannot end before lumi 1.
    assert!(step(&mut sc, &|sc, o| sc.event_done(1, o)).is_empty());
    assert_eq!(
        step(&mut sc, &|sc, o| sc.event_done(0, o)),
        vec![Transitions(vec![
            EndLumi(1, 1),
            EndLumi(1, 2),
            BeginLumi(1, 3)
        ])]
    );
    assert_eq!(
        step(&mut sc, &|sc, o| sc.transitions_done(o)),
        vec![Start(2), Read(0)]
    );
    // Events are numbered in the order the decision to start them was
    // taken, whatever thread then acts on it.
    assert_eq!(
        (sc.event_index(0), sc.event_index(1), sc.event_index(2)),
        (0, 1, 2)
    );
    // A new run waits for every block of the old one.
    assert!(
        step(&mut sc, &|sc, o| sc.read_done(
            0,
            Some(EventId::new(2, 1, 4)),
            o
        ))
        .is_empty()
    );
    assert_eq!(
        step(&mut sc, &|sc, o| sc.event_done(2, o)),
        vec![Transitions(vec![
            EndLumi(1, 3),
            EndRun(1),
            BeginRun(2),
            BeginLumi(2, 1)
        ])]
    );
    assert_eq!(
        step(&mut sc, &|sc, o| sc.transitions_done(o)),
        vec![Start(0), Read(2)]
    );
    assert!(step(&mut sc, &|sc, o| sc.read_done(2, None, o)).is_empty());
    assert_eq!(
        step(&mut sc, &|sc, o| sc.event_done(0, o)),
        vec![Transitions(vec![EndLumi(2, 1), EndRun(2)])]
    );
    assert_eq!(
        step(&mut sc, &|sc, o| sc.transitions_done(o)),
        vec![Finished]
    );
    assert_eq!(sc.peak_lumis(), 2);
}
