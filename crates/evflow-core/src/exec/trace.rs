//! The trace of a job's module executions: every worker thread records its
//! slices into a buffer of its own, and the external-work waits of each
//! event slot into the slot's own buffer, so that no lock is shared by the
//! threads (one trace-wide lock was taken by every thread after every
//! module execution: millions of times in a long job). The buffers are
//! handed whole to the report's [`Trace`], which reads them merged in the
//! order [`TraceSlice::cmp_start`] defines.

use std::sync::Mutex;

use crossbeam_utils::CachePadded;

use crate::report::EXTERNAL_WAIT_TRACKS;
use crate::trace::{Trace, TraceSlice};

/// The track a slice is drawn on, which also picks the buffer it goes to.
#[derive(Clone, Copy, Debug)]
pub(super) enum Track {
    /// A worker thread's: recorded by that thread only.
    Worker(usize),
    /// An event slot's external-work waits: recorded by whichever thread
    /// completes the wait, one at a time for the slot but for rare overlaps.
    Wait(usize),
}

impl Track {
    /// The track's number in the trace (`TraceSlice::thread`).
    pub(super) fn id(self) -> usize {
        match self {
            Track::Worker(thread) => thread,
            Track::Wait(slot) => EXTERNAL_WAIT_TRACKS + slot,
        }
    }
}

/// A buffer's slices in chunks that never move: a list that grows is
/// copied into a larger one each time it fills, and its unused end is up to
/// half of it (one list per buffer peaked at 2.2 times the slices' size,
/// chunks at 1.1: `a_traced_job_holds_its_slices_once`).
#[derive(Default)]
struct Chunks {
    full: Vec<Vec<TraceSlice>>,
    current: Vec<TraceSlice>,
}

impl Chunks {
    /// The first chunk's slices; each next chunk is twice as large, up to
    /// the buffers' chunk size (short jobs' traces stay small).
    const FIRST: usize = 256;

    fn push(&mut self, slice: TraceSlice, chunk: usize) {
        if self.current.len() == self.current.capacity() {
            let size = (self.current.capacity() * 2).clamp(Self::FIRST.min(chunk), chunk);
            let full = std::mem::replace(&mut self.current, Vec::with_capacity(size));
            if !full.is_empty() {
                self.full.push(full);
            }
        }
        self.current.push(slice);
    }
}

type Buffer = CachePadded<Mutex<Chunks>>;

/// A buffer's slices, also after a panic while it was locked (a push does
/// not leave the list inconsistent).
fn lock(buffer: &Buffer) -> std::sync::MutexGuard<'_, Chunks> {
    buffer.lock().unwrap_or_else(|p| p.into_inner())
}

/// One buffer per worker thread and per event slot, each on cache lines of
/// its own. Their locks are taken by one thread each (uncontended, a pair
/// of atomic operations on a line the thread owns), never by all.
pub(super) struct TraceBuffers {
    workers: Vec<Buffer>,
    waits: Vec<Buffer>,
    /// Slices per chunk of a buffer (at most).
    chunk: usize,
}

impl TraceBuffers {
    /// Chunks of 64 Ki slices (5 MiB): few runs for the report's merge (a
    /// heap entry per chunk), and little unused at the end of each buffer.
    pub(super) const CHUNK: usize = 1 << 16;

    pub(super) fn new(threads: usize, slots: usize, chunk: usize) -> Self {
        let buffers = |n: usize| (0..n.max(1)).map(|_| Buffer::default()).collect();
        Self {
            workers: buffers(threads),
            waits: buffers(slots),
            chunk: chunk.max(1),
        }
    }

    pub(super) fn record(&self, track: Track, slice: TraceSlice) {
        let buffer = match track {
            Track::Worker(t) => &self.workers[t % self.workers.len()],
            Track::Wait(s) => &self.waits[s % self.waits.len()],
        };
        lock(buffer).push(slice, self.chunk);
    }

    /// Empties the buffers into a [`Trace`], read in
    /// [`TraceSlice::cmp_start`] order: the same for the same slices
    /// whichever thread recorded them when. Each chunk is sorted in place
    /// and kept where it is: no slice is copied.
    pub(super) fn take(&self) -> Trace {
        let mut chunks = Vec::new();
        for buffer in self.workers.iter().chain(&self.waits) {
            let Chunks { full, current } = std::mem::take(&mut *lock(buffer));
            chunks.extend(full);
            chunks.push(current);
        }
        Trace::from_runs(chunks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::EventId;
    use rand::seq::SliceRandom;
    use rand::{Rng, SeedableRng};
    use std::sync::Arc;

    /// Slices with many ties (coarse times, few tracks and names), so that
    /// every key of the order is needed.
    fn random_slices(rng: &mut rand_chacha::ChaCha8Rng, n: usize) -> Vec<(Track, TraceSlice)> {
        let names: Vec<Arc<str>> = ["a", "b", "source"].map(Arc::from).to_vec();
        (0..n)
            .map(|_| {
                let track = if rng.gen_bool(0.2) {
                    Track::Wait(rng.gen_range(0..3))
                } else {
                    Track::Worker(rng.gen_range(0..4))
                };
                let slice = TraceSlice {
                    name: names[rng.gen_range(0..names.len())].clone(),
                    category: ["module", "queued", "source"][rng.gen_range(0..3)],
                    thread: track.id(),
                    event: rng
                        .gen_bool(0.9)
                        .then(|| EventId::new(1, 1, rng.gen_range(1..6))),
                    start_us: f64::from(rng.gen_range(0..20u32)),
                    duration_us: f64::from(rng.gen_range(0..3u32)),
                };
                (track, slice)
            })
            .collect()
    }

    fn key(s: &TraceSlice) -> (u64, usize, u64, &str, &str, Option<EventId>) {
        let (start, duration) = (s.start_us.to_bits(), s.duration_us.to_bits());
        (start, s.thread, duration, s.category, &s.name, s.event)
    }

    #[test]
    fn the_same_slices_make_the_same_trace_whichever_threads_record_them() {
        for seed in 0..20 {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let mut slices = random_slices(&mut rng, 400);
            // The reference: every slice, sorted by an independent key
            // (non-negative times sort as their bits do).
            let mut expected: Vec<TraceSlice> = slices.iter().map(|(_, s)| s.clone()).collect();
            expected.sort_by(|a, b| key(a).cmp(&key(b)));
            let expected: Vec<_> = expected.iter().map(key).collect();
            for round in 0..3 {
                // Recorded in another order, from 4 threads at once.
                slices.shuffle(&mut rng);
                // Chunks of a few slices: many chunks, some partly full.
                let buffers = TraceBuffers::new(4, 3, 1 + round * 7);
                std::thread::scope(|scope| {
                    for part in slices.chunks(slices.len() / 4 + 1) {
                        let buffers = &buffers;
                        scope.spawn(move || {
                            for (track, slice) in part {
                                buffers.record(*track, slice.clone());
                            }
                        });
                    }
                });
                let trace = buffers.take();
                let got: Vec<_> = trace.iter().map(key).collect();
                assert_eq!(got, expected, "seed {seed}, round {round}");
                assert!(buffers.take().is_empty(), "taking empties the buffers");
            }
        }
    }
}
