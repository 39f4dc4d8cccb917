//! A job's trace as [`Report::trace`](crate::Report::trace) holds it: the
//! slices in the runs they were recorded in (a worker thread's buffer, an
//! event slot's), each run sorted in place, read in
//! [`TraceSlice::cmp_start`] order by merging the runs as they are read.
//!
//! Merging the runs into one list at the end of a job held the slices twice
//! at its peak: the list was filled while the freed runs stayed resident
//! with the allocator (mimalloc purges freed memory later, and the runs were
//! freed by another thread than the one that allocated them). A traced
//! 3 000-event CMS job peaked at 243 MB for 118 MB of slices, 115 MB of it
//! added while the list was filled (docs/performance.md).

use std::cmp::Ordering;
use std::sync::Arc;

use itertools::KMergeBy;

use serde::Serialize;

use crate::ids::EventId;

/// One interval of a trace.
#[derive(Clone, Debug, Serialize)]
pub struct TraceSlice {
    /// Module label, "source" or a transition name: one allocation per name,
    /// shared by its slices (a long trace holds millions of them).
    pub name: Arc<str>,
    /// "module", "wait" (external work), "queued" (waiting for admission),
    /// "source" or "transition".
    pub category: &'static str,
    /// The track: a worker thread, or from [`crate::EXTERNAL_WAIT_TRACKS`] on, the
    /// external-work waits of an event slot.
    pub thread: usize,
    pub event: Option<EventId>,
    pub start_us: f64,
    pub duration_us: f64,
}

impl TraceSlice {
    /// The order of a job's trace: by start, then track, then end, then
    /// what the slice is of. Slices that start together on one track (a
    /// zero-length one) are still ordered, so that a trace's order depends
    /// on its slices only, not on which thread recorded them when.
    pub fn cmp_start(a: &TraceSlice, b: &TraceSlice) -> std::cmp::Ordering {
        a.start_us
            .total_cmp(&b.start_us)
            .then(a.thread.cmp(&b.thread))
            .then(a.duration_us.total_cmp(&b.duration_us))
            .then(a.category.cmp(b.category))
            .then(a.name.cmp(&b.name))
            .then(a.event.cmp(&b.event))
    }
}

/// The slices of a job's trace, read in [`TraceSlice::cmp_start`] order
/// ([`Trace::iter`]), held once, where they were recorded.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    /// Each in `cmp_start` order (but for a trace made from one list); none
    /// empty.
    runs: Vec<Vec<TraceSlice>>,
    len: usize,
}

impl Trace {
    /// A trace of these runs of slices, each sorted here in place (no
    /// slice is copied).
    pub fn from_runs(runs: impl IntoIterator<Item = Vec<TraceSlice>>) -> Self {
        let mut trace = Self::default();
        for mut run in runs {
            if run.is_empty() {
                continue;
            }
            // Unstable, in place: a stable sort would allocate half the run
            // again (equal slices are equal in every field).
            run.sort_unstable_by(TraceSlice::cmp_start);
            trace.len += run.len();
            trace.runs.push(run);
        }
        trace
    }

    /// The number of slices.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The slices in [`TraceSlice::cmp_start`] order, merged from the
    /// runs as they are read (a heap of one entry per run, no copy).
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            merged: itertools::kmerge_by(self.runs.iter().map(|run| run.iter()), starts_before),
            left: self.len,
        }
    }

    /// The slices in order, in one list (a copy).
    pub fn to_vec(&self) -> Vec<TraceSlice> {
        self.iter().cloned().collect()
    }
}

/// A trace of one list, read in the list's own order (the simulator's
/// trace is in the order it simulated, which ties of its times would lose).
impl From<Vec<TraceSlice>> for Trace {
    fn from(slices: Vec<TraceSlice>) -> Self {
        let len = slices.len();
        let runs = if slices.is_empty() {
            Vec::new()
        } else {
            vec![slices]
        };
        Self { runs, len }
    }
}

impl FromIterator<TraceSlice> for Trace {
    fn from_iter<I: IntoIterator<Item = TraceSlice>>(slices: I) -> Self {
        Self::from(slices.into_iter().collect::<Vec<_>>())
    }
}

impl<'a> IntoIterator for &'a Trace {
    type Item = &'a TraceSlice;
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

/// The order [`Iter`] merges by: `a` starts before `b`.
type StartsBefore<'a> = fn(&&'a TraceSlice, &&'a TraceSlice) -> bool;

fn starts_before(a: &&TraceSlice, b: &&TraceSlice) -> bool {
    TraceSlice::cmp_start(a, b) == Ordering::Less
}

/// The slices of a [`Trace`] in order: [`Trace::iter`].
#[derive(Debug)]
pub struct Iter<'a> {
    merged: KMergeBy<std::slice::Iter<'a, TraceSlice>, StartsBefore<'a>>,
    left: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a TraceSlice;

    fn next(&mut self) -> Option<&'a TraceSlice> {
        let slice = self.merged.next()?;
        self.left -= 1;
        Some(slice)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Iter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::EventId;
    use rand::{Rng, SeedableRng};
    use std::sync::Arc;

    fn slice(rng: &mut rand_chacha::ChaCha8Rng, names: &[Arc<str>]) -> TraceSlice {
        TraceSlice {
            name: names[rng.gen_range(0..names.len())].clone(),
            category: ["module", "queued"][rng.gen_range(0..2)],
            thread: rng.gen_range(0..3),
            event: rng
                .gen_bool(0.9)
                .then(|| EventId::new(1, 1, rng.gen_range(1..4))),
            start_us: f64::from(rng.gen_range(0..10u32)),
            duration_us: f64::from(rng.gen_range(0..2u32)),
        }
    }

    #[test]
    fn runs_read_merged_as_one_sorted_list() {
        let names: Vec<Arc<str>> = ["a", "b"].map(Arc::from).to_vec();
        let key = |s: &TraceSlice| {
            let (start, duration) = (s.start_us.to_bits(), s.duration_us.to_bits());
            (
                start,
                s.thread,
                duration,
                s.category,
                s.name.clone(),
                s.event,
            )
        };
        for seed in 0..20 {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            // Runs of 0 to 40 slices, many equal (coarse keys).
            let runs: Vec<Vec<TraceSlice>> = (0..rng.gen_range(0..8))
                .map(|_| {
                    let n = rng.gen_range(0..40);
                    (0..n).map(|_| slice(&mut rng, &names)).collect()
                })
                .collect();
            let mut expected: Vec<_> = runs.iter().flatten().map(key).collect();
            expected.sort();
            let trace = Trace::from_runs(runs);
            assert_eq!(trace.len(), expected.len(), "seed {seed}");
            assert_eq!(trace.iter().len(), expected.len(), "seed {seed}");
            let got: Vec<_> = trace.iter().map(key).collect();
            assert_eq!(got, expected, "seed {seed}");
            let again: Vec<_> = trace.to_vec().iter().map(key).collect();
            assert_eq!(again, expected, "seed {seed}: read twice");
            // One list is read as it is.
            let list: Vec<TraceSlice> = (0..30).map(|_| slice(&mut rng, &names)).collect();
            let as_is: Vec<_> = list.iter().map(key).collect();
            let got: Vec<_> = Trace::from(list).iter().map(key).collect();
            assert_eq!(got, as_is, "seed {seed}: one list");
        }
        assert!(Trace::default().iter().next().is_none());
        assert!(Trace::from_runs([Vec::new(), Vec::new()]).is_empty());
    }
}
