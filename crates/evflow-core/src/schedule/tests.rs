//! The coordinator's order of decided tasks.
use super::*;
use crate::Concurrency;
use crate::error::ModuleResult;
use crate::event::Event;
use crate::module::{Analyzer, Producer, Transitions};
use crate::process::{ModuleDesc, Process};
use crate::source::EmptySource;

struct Nothing;
impl Transitions for Nothing {}
impl Producer for Nothing {
    fn produce(&self, _: &Event<'_>) -> ModuleResult {
        Ok(())
    }
}
impl Analyzer for Nothing {
    fn analyze(&self, _: &Event<'_>) -> ModuleResult {
        Ok(())
    }
}

/// Runs every task but modules to completion; returns the module tasks.
fn settle(c: &Coordinator, mut tasks: Vec<Task>, reads: &mut u64) -> Vec<Task> {
    let mut modules = Vec::new();
    while let Some(task) = tasks.pop() {
        let mut out = Vec::new();
        match task {
            Task::Read { slot } => {
                *reads += 1;
                let id = (*reads <= 3).then_some(EventId {
                    run: 1,
                    lumi: 1,
                    event: *reads,
                });
                c.read_done(slot, id, &mut out, &NoObserver);
            }
            Task::Transitions(_) => c.transitions_done(&mut out, &NoObserver),
            Task::Module { .. } => modules.push(task),
            Task::Finished => {}
        }
        tasks.extend(out);
    }
    modules
}

/// A serial module granted to the next event when the last one's run
/// ends: the granted run comes first (the thread runs it at once) and
/// the read that refills the finished event's slot last (the task loop
/// takes the newest of the rest next), not the read first, which made
/// the thread run the new event's first module while the serial module
/// stayed reserved and idle.
#[test]
fn a_granted_serial_run_goes_before_the_read_of_the_next_event() {
    let mut p = Process::new("grant");
    p.set_source(EmptySource::new(3));
    p.add(ModuleDesc::producer("a", Nothing).produces([""]));
    p.add(
        ModuleDesc::analyzer("out", Nothing)
            .consumes(["a"])
            .concurrency(Concurrency::Serial),
    );
    p.end_path("e", ["out"]);
    let graph = Arc::new(p.compile().unwrap());
    let (a, out_module) = (0, 1);
    assert_eq!(graph.modules[out_module].label, "out");
    let c = Coordinator::new(graph, 2, None);
    let mut reads = 0;
    let mut first = Vec::new();
    c.begin(&mut first);
    let runs_of_a = settle(&c, first, &mut reads);
    assert_eq!(runs_of_a.len(), 2, "{runs_of_a:?}");
    // `a` ends on both events: `out` runs on slot 0, slot 1 queues.
    let mut granted = Vec::new();
    for task in &runs_of_a {
        let Task::Module {
            slot,
            module,
            instance,
            ..
        } = *task
        else {
            unreachable!()
        };
        assert_eq!(module, a);
        let mut out = Vec::new();
        c.module_done(slot, module, instance, Outcome::Pass, &mut out, &NoObserver);
        granted.extend(out);
    }
    let [
        Task::Module {
            slot,
            module,
            instance,
            ..
        },
    ] = granted[..]
    else {
        panic!("{granted:?}")
    };
    assert_eq!(module, out_module);
    let mut out = Vec::new();
    c.module_done(slot, module, instance, Outcome::Pass, &mut out, &NoObserver);
    let other = 1 - slot;
    assert!(
        matches!(out.first(), Some(&Task::Module { slot: s, module: m, .. }) if s == other && m == out_module),
        "{out:?}"
    );
    assert_eq!(out.last(), Some(&Task::Read { slot }), "{out:?}");
    // Without a grant the read still comes first: the read of the
    // third event done, `out` ends on the other event with nothing
    // queued.
    let Some(&Task::Module { instance, .. }) = out.first() else {
        unreachable!()
    };
    let third = settle(&c, vec![out.pop().unwrap()], &mut reads);
    assert!(
        matches!(third[..], [Task::Module { module, .. }] if module == a),
        "{third:?}"
    );
    let mut after = Vec::new();
    c.module_done(
        other,
        out_module,
        instance,
        Outcome::Pass,
        &mut after,
        &NoObserver,
    );
    assert_eq!(
        after.first(),
        Some(&Task::Read { slot: other }),
        "{after:?}"
    );
}
