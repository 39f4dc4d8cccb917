//! Encoding a Chrome trace holds no copy of the trace: its events are made
//! one at a time as they are written. Checked with a counting allocator
//! (this test binary's only test, so no other allocates meanwhile): the
//! peak of the heap while a long trace is encoded stays far below the size
//! of one event per slice.

use std::sync::Arc;

use evflow_core::{EventId, Report, TraceSlice};

mod counting;
use counting::Counting;

#[global_allocator]
static ALLOCATOR: Counting = Counting;

#[test]
fn a_chrome_trace_is_encoded_without_a_copy_of_its_events() {
    const SLICES: usize = 200_000;
    let name: Arc<str> = Arc::from("module");
    let report = Report {
        trace: (0..SLICES)
            .map(|i| TraceSlice {
                name: name.clone(),
                category: "module",
                thread: i % 4,
                event: Some(EventId::new(1, 1, i as u64)),
                start_us: i as f64,
                duration_us: 0.5,
            })
            .collect::<Vec<_>>()
            .into(),
        ..Report::default()
    };
    let mut written = 0usize;
    struct Count<'a>(&'a mut usize);
    impl std::io::Write for Count<'_> {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            *self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let before = counting::live();
    counting::reset_peak();
    serde_json::to_writer(Count(&mut written), &report.chrome_trace()).unwrap();
    let extra = counting::peak() - before;
    assert!(
        written > SLICES * 100,
        "every slice was written ({written} bytes)"
    );
    // One event per slice held at once would take more than the slices'
    // own size; a few small allocations per track name are all it needs.
    let slices_bytes = SLICES * std::mem::size_of::<TraceSlice>();
    assert!(
        extra < 64 * 1024,
        "encoding held {extra} bytes at its peak (the slices take {slices_bytes})"
    );
}
