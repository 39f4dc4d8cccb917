//! A traced job holds its slices once: the report's trace keeps the
//! threads' buffers, each sorted in place, instead of filling one list from
//! them (which held every slice twice at the end of the job, the freed
//! buffers staying resident with the allocator). Checked with a counting
//! allocator (this test binary's only test, so no other allocates
//! meanwhile): the heap's peak over a traced job, above where it started,
//! stays well below twice the slices' size.

use evflow_core::{EmptySource, Process, RunOptions, TraceSlice, run};
use evflow_workloads::{self as synthetic, Timing, Work};

mod counting;
use counting::Counting;

#[global_allocator]
static ALLOCATOR: Counting = Counting;

#[test]
fn a_traced_job_holds_its_slices_once() {
    const EVENTS: u64 = 150_000;
    let mut p = Process::new("traced");
    p.set_source(EmptySource::new(EVENTS).events_per_lumi(1000));
    let none = Timing::constant(0.0, Work::Busy);
    p.add(synthetic::producer("a", none.clone(), &[], &[""]));
    p.add(synthetic::producer("b", none.clone(), &["a"], &[""]));
    p.add(synthetic::analyzer("c", none, &["b"]));
    p.end_path("e", ["c"]);
    let options = RunOptions {
        threads: 2,
        events_in_flight: 4,
        trace: true,
        ..RunOptions::default()
    };
    let before = counting::live();
    counting::reset_peak();
    let report = run(p, &options).unwrap();
    let peak = counting::peak() - before;
    let slices = report.trace.len();
    // A read and three modules per event.
    assert!(slices as u64 >= 4 * EVENTS, "{slices} slices");
    let slices_bytes = slices * std::mem::size_of::<TraceSlice>();
    // The slices once, the unfilled end of each thread's last chunk and the
    // job's own memory; a list filled from the buffers would add the
    // slices' size again.
    assert!(
        (peak as f64) < 1.5 * slices_bytes as f64,
        "the job's heap peaked at {peak} bytes above its start for {slices_bytes} bytes of \
         slices ({slices} slices)"
    );
}
