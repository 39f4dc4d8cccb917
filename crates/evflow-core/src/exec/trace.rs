//! The trace of a job's module executions: every worker thread records its
//! slices into a buffer of its own, and the external-work waits of each
//! event slot into the slot's own buffer, so that no lock is shared by the
//! threads (one trace-wide lock was taken by every thread after every
//! module execution: millions of times in a long job). The buffers are
//! merged once, when the report is made, into the order
//! [`TraceSlice::cmp_start`] defines.

use std::sync::Mutex;

use crossbeam_utils::CachePadded;

use crate::report::{EXTERNAL_WAIT_TRACKS, TraceSlice};

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

type Buffer = CachePadded<Mutex<Vec<TraceSlice>>>;

/// A buffer's slices, also after a panic while it was locked (a push does
/// not leave the list inconsistent).
fn lock(buffer: &Buffer) -> std::sync::MutexGuard<'_, Vec<TraceSlice>> {
    buffer.lock().unwrap_or_else(|p| p.into_inner())
}

/// One buffer per worker thread and per event slot, each on cache lines of
/// its own. Their locks are taken by one thread each (uncontended, a pair
/// of atomic operations on a line the thread owns), never by all.
pub(super) struct TraceBuffers {
    workers: Vec<Buffer>,
    waits: Vec<Buffer>,
}

impl TraceBuffers {
    pub(super) fn new(threads: usize, slots: usize) -> Self {
        let buffers = |n: usize| (0..n.max(1)).map(|_| Buffer::default()).collect();
        Self {
            workers: buffers(threads),
            waits: buffers(slots),
        }
    }

    pub(super) fn record(&self, track: Track, slice: TraceSlice) {
        let buffer = match track {
            Track::Worker(t) => &self.workers[t % self.workers.len()],
            Track::Wait(s) => &self.waits[s % self.waits.len()],
        };
        lock(buffer).push(slice);
    }

    /// Empties the buffers into one list, in [`TraceSlice::cmp_start`]
    /// order: the same for the same slices whichever thread recorded them
    /// when.
    pub(super) fn take(&self) -> Vec<TraceSlice> {
        let mut buffers: Vec<Vec<TraceSlice>> = self
            .workers
            .iter()
            .chain(&self.waits)
            .map(|b| std::mem::take(&mut *lock(b)))
            .collect();
        // The largest buffer grows to hold the others (a large allocation
        // grows in place: its pages are remapped, not copied), and each
        // other is freed once moved: the slices are never held twice.
        buffers.sort_by_key(|b| std::cmp::Reverse(b.len()));
        let total = buffers.iter().map(Vec::len).sum::<usize>();
        let mut buffers = buffers.into_iter();
        let mut merged = buffers.next().unwrap_or_default();
        merged.reserve_exact(total - merged.len());
        for mut buffer in buffers {
            merged.append(&mut buffer);
        }
        // In place: a stable sort would allocate half the trace again.
        merged.sort_unstable_by(TraceSlice::cmp_start);
        merged
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
                let buffers = TraceBuffers::new(4, 3);
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
                let merged = buffers.take();
                let got: Vec<_> = merged.iter().map(key).collect();
                assert_eq!(got, expected, "seed {seed}, round {round}");
                assert!(buffers.take().is_empty(), "taking empties the buffers");
            }
        }
    }
}
