//! A global allocator that counts the heap's live bytes and their peak,
//! for the tests that bound what a trace holds. A test binary installs it
//! with `#[global_allocator] static ALLOCATOR: Counting = Counting;` and
//! keeps one test, so that no other allocates meanwhile.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

pub struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// The bytes allocated and not yet freed.
pub fn live() -> usize {
    LIVE.load(SeqCst)
}

/// The most bytes live at once since the last [`reset_peak`].
pub fn peak() -> usize {
    PEAK.load(SeqCst)
}

/// Starts measuring the peak from the bytes live now.
pub fn reset_peak() {
    PEAK.store(LIVE.load(SeqCst), SeqCst);
}

// SAFETY: every call is passed on unchanged to the system allocator, which
// upholds GlobalAlloc's contract; the counters only add and subtract the
// sizes of the layouts passed.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's layout, as GlobalAlloc::alloc requires.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let live = LIVE.fetch_add(layout.size(), SeqCst) + layout.size();
            PEAK.fetch_max(live, SeqCst);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), SeqCst);
    }
}
