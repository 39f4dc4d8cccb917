use super::*;
use crate::error::ModuleResult;
use crate::event::Event;
use crate::module::{Filter, Transitions};
use crate::process::{ModuleDesc, PathDesc, Process};
use crate::source::EmptySource;

struct Pass;
impl Transitions for Pass {}
impl Filter for Pass {
    fn filter(&self, _: &Event<'_>) -> ModuleResult<bool> {
        Ok(true)
    }
}

/// Path `sel`: `a > b`, reorderable; `c`: the one step of two paths.
fn graph() -> Graph {
    let mut proc = Process::new("replan");
    proc.set_source(EmptySource::new(1));
    for label in ["a", "b", "c"] {
        proc.add(ModuleDesc::filter(label, Pass));
    }
    proc.add_path(PathDesc::new("sel", ["a", "b"]).reorderable(true));
    proc.add_path(PathDesc::new("one", ["c"]).reorderable(true));
    proc.add_path(PathDesc::new("two", ["c"]).reorderable(true));
    proc.compile().unwrap()
}

#[test]
fn a_path_not_started_takes_the_plan_decided_meanwhile() {
    let g = graph();
    let (a, b) = (g.paths[0].steps[0], g.paths[0].steps[1]);
    let c = g.paths[1].steps[0];
    let mut st = EventState::new(&g);
    let mut ready = Vec::new();
    st.start(
        &g,
        7,
        |p| Arc::new(PathPlan::sequence(g.paths[p].steps.iter().copied())),
        &mut ready,
    );
    assert_eq!(ready, [a, c]);
    // A step of two paths is never withdrawn for one of them.
    assert_eq!(st.unstarted_path(&g, c), None);
    assert_eq!(st.unstarted_path(&g, a), Some(0));
    // A plan with the same first step: `a` runs, under the new plan.
    ready.clear();
    assert!(st.replan(&g, 0, a, Arc::new(PathPlan::sequence([a, b])), &mut ready));
    assert!(ready.is_empty());
    // Another first step: `a` is withdrawn and `b` dispatched instead.
    assert!(!st.replan(&g, 0, a, Arc::new(PathPlan::sequence([b, a])), &mut ready));
    assert_eq!(ready, [b]);
    assert_eq!(st.unstarted_path(&g, a), None);
    ready.clear();
    st.module_done(&g, c, Outcome::Pass, &mut ready);
    st.module_done(&g, b, Outcome::Reject, &mut ready);
    assert!(ready.is_empty());
    assert_eq!(st.path_status()[0], PathStatus::Rejected);
    let mut out = PathOutcome::default();
    st.path_outcome(0, &mut out);
    assert_eq!(out.steps, [(b, false)]);
    assert!(st.is_finished());
}

/// A sampled event (every step evaluated) rejected by `a` does not run
/// `b`, declared after it, for the path, and leaves it out of the
/// path's outcome even when another path runs `b`; `c`, unguarded, is
/// still measured after the rejection.
#[test]
fn a_sampled_event_never_runs_a_step_whose_guard_rejected_it() {
    let mut proc = Process::new("guards");
    proc.set_source(EmptySource::new(1));
    for label in ["a", "b", "c"] {
        proc.add(ModuleDesc::filter(label, Pass));
    }
    proc.add_path(
        PathDesc::new("sel", ["a", "b", "c"])
            .reorderable(true)
            .after("b", "a"),
    );
    proc.add_path(PathDesc::new("other", ["b"]));
    let g = proc.compile().unwrap();
    let [a, b, c] = [0, 1, 2].map(|i| g.paths[0].steps[i]);
    let sampled = |p: PathIdx| {
        let mut plan = PathPlan::sequence(g.paths[p].steps.iter().copied());
        plan.evaluate_all = p == 0;
        Arc::new(plan)
    };
    let mut st = EventState::new(&g);
    let mut ready = Vec::new();
    st.start(&g, 0, sampled, &mut ready);
    assert_eq!(ready, [a, b], "the other path requests b at once");
    ready.clear();
    st.module_done(&g, a, Outcome::Reject, &mut ready);
    // `b` is not the path's step any more: the path goes on with `c`.
    assert_eq!(ready, [c]);
    ready.clear();
    st.module_done(&g, b, Outcome::Pass, &mut ready);
    st.module_done(&g, c, Outcome::Pass, &mut ready);
    assert_eq!(st.path_status()[0], PathStatus::Rejected);
    let mut out = PathOutcome::default();
    st.path_outcome(0, &mut out);
    assert_eq!(out.steps, [(a, false), (c, true)]);
    // Without the other path, `b` never runs on the event.
    let mut st = EventState::new(&g);
    let only_sel = |p: PathIdx| {
        if p == 0 {
            sampled(0)
        } else {
            Arc::new(PathPlan::sequence([]))
        }
    };
    ready.clear();
    st.start(&g, 1, only_sel, &mut ready);
    assert_eq!(ready, [a]);
    ready.clear();
    st.module_done(&g, a, Outcome::Reject, &mut ready);
    assert_eq!(ready, [c]);
}

/// A step a sampled event runs only to measure it after its path's
/// rejection fails: the measurement is lost, the event goes on. When
/// another path then needs the step, it runs again, and that failure
/// fails the event, as without sampling.
#[test]
fn a_failed_measurement_fails_nothing_until_another_path_needs_the_step() {
    let mut proc = Process::new("lost");
    proc.set_source(EmptySource::new(1));
    for label in ["a", "b", "c"] {
        proc.add(ModuleDesc::filter(label, Pass));
    }
    proc.add_path(PathDesc::new("sel", ["a", "b"]).reorderable(true));
    proc.add_path(PathDesc::new("other", ["c", "b"]));
    let g = proc.compile().unwrap();
    let [a, b] = [0, 1].map(|i| g.paths[0].steps[i]);
    let c = g.paths[1].steps[0];
    let plan = |p: PathIdx| {
        let mut plan = PathPlan::sequence(g.paths[p].steps.iter().copied());
        plan.evaluate_all = p == 0;
        Arc::new(plan)
    };
    let mut st = EventState::new(&g);
    let mut ready = Vec::new();
    st.start(&g, 0, plan, &mut ready);
    assert_eq!(ready, [a, c]);
    ready.clear();
    st.module_done(&g, a, Outcome::Reject, &mut ready);
    assert_eq!(ready, [b], "measured after the rejection");
    ready.clear();
    assert!(st.measurement_failed(b));
    st.module_done(&g, b, Outcome::Failed, &mut ready);
    assert!(!st.failed());
    assert_eq!(st.path_status()[0], PathStatus::Rejected);
    let mut out = PathOutcome::default();
    st.path_outcome(0, &mut out);
    assert_eq!(
        out.steps,
        [(a, false)],
        "a lost measurement decides nothing"
    );
    // `other` reaches `b`: it runs again, and now its failure counts.
    st.module_done(&g, c, Outcome::Pass, &mut ready);
    assert_eq!(ready, [b]);
    ready.clear();
    assert!(!st.measurement_failed(b));
    st.module_done(&g, b, Outcome::Failed, &mut ready);
    assert!(st.failed() && st.is_finished());
}
