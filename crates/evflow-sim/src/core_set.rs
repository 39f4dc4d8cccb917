//! [`CoreSet`]: a set of core numbers with the smallest member at or after
//! any core found in O(log₆₄ cores) — the simulated machine's idle cores
//! and cores with queued tasks, on machines of tens of thousands of cores.

use std::cell::Cell;

/// A set of the numbers `0..capacity`: a bitmap with a summary bitmap over
/// it (bit `w` of the level above is set when word `w` of the level below
/// is not zero), up to a single word.
pub(crate) struct CoreSet {
    /// `levels[0]`: one bit per number; the last level has one word.
    levels: Vec<Vec<u64>>,
    /// Words read by the searches: the work of finding members.
    visits: Cell<u64>,
}

impl CoreSet {
    /// An empty set of numbers below `capacity`.
    pub(crate) fn new(capacity: usize) -> Self {
        let mut levels = Vec::new();
        let mut words = capacity.div_ceil(64).max(1);
        loop {
            levels.push(vec![0u64; words]);
            if words == 1 {
                break;
            }
            words = words.div_ceil(64);
        }
        Self {
            levels,
            visits: Cell::new(0),
        }
    }

    /// The set of every number below `capacity`.
    pub(crate) fn full(capacity: usize) -> Self {
        let mut set = Self::new(capacity);
        for n in 0..capacity {
            set.insert(n);
        }
        set
    }

    pub(crate) fn insert(&mut self, n: usize) {
        let mut n = n;
        for level in &mut self.levels {
            let word = &mut level[n / 64];
            let was_empty = *word == 0;
            *word |= 1 << (n % 64);
            if !was_empty {
                return;
            }
            n /= 64;
        }
    }

    pub(crate) fn remove(&mut self, n: usize) {
        let mut n = n;
        for level in &mut self.levels {
            let word = &mut level[n / 64];
            *word &= !(1 << (n % 64));
            if *word != 0 {
                return;
            }
            n /= 64;
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.levels.last().is_none_or(|top| top[0] == 0)
    }

    /// The smallest member `>= n`.
    pub(crate) fn first_from(&self, n: usize) -> Option<usize> {
        let mut level = 0;
        let mut n = n;
        while let Some(words) = self.levels.get(level) {
            let w = n / 64;
            let word = *words.get(w)?;
            self.visits.set(self.visits.get() + 1);
            let above = word & (!0u64 << (n % 64));
            if above != 0 {
                let mut found = w * 64 + above.trailing_zeros() as usize;
                for below in self.levels[..level].iter().rev() {
                    self.visits.set(self.visits.get() + 1);
                    found = found * 64 + below[found].trailing_zeros() as usize;
                }
                return Some(found);
            }
            // Nothing in this word from n on: the next words, one level up.
            level += 1;
            n = w + 1;
        }
        None
    }

    /// The first member after `n`, going round: `n + 1, ..., 0, ..., n - 1`
    /// (`n` itself is not a candidate).
    pub(crate) fn next_after(&self, n: usize) -> Option<usize> {
        self.first_from(n + 1)
            .or_else(|| self.first_from(0).filter(|&m| m != n))
    }

    /// Removes and returns the smallest member.
    pub(crate) fn pop_first(&mut self) -> Option<usize> {
        let first = self.first_from(0)?;
        self.remove(first);
        Some(first)
    }

    /// Bitmap words the searches have read so far.
    pub(crate) fn visits(&self) -> u64 {
        self.visits.get()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::CoreSet;

    /// Random inserts, removals and searches agree with a `BTreeSet`, for
    /// capacities across one, two and three levels.
    #[test]
    fn agrees_with_an_ordered_set() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for capacity in [1, 2, 63, 64, 65, 200, 4096, 4097, 70_000] {
            let mut set = CoreSet::new(capacity);
            let mut reference = BTreeSet::new();
            for _ in 0..4000 {
                let n = rng.gen_range(0..capacity);
                match rng.gen_range(0..5) {
                    0 | 1 => {
                        set.insert(n);
                        reference.insert(n);
                    }
                    2 => {
                        set.remove(n);
                        reference.remove(&n);
                    }
                    3 => assert_eq!(set.pop_first(), reference.pop_first(), "{capacity}"),
                    _ => {}
                }
                assert_eq!(
                    set.first_from(n),
                    reference.range(n..).next().copied(),
                    "capacity {capacity}, from {n}"
                );
                let round = reference
                    .range(n + 1..)
                    .chain(reference.range(..n))
                    .next()
                    .copied();
                assert_eq!(set.next_after(n), round, "capacity {capacity}, after {n}");
                assert_eq!(set.is_empty(), reference.is_empty());
            }
        }
    }

    #[test]
    fn a_full_set_pops_in_order() {
        let mut set = CoreSet::full(130);
        assert_eq!(
            std::iter::from_fn(|| set.pop_first()).collect::<Vec<_>>(),
            (0..130).collect::<Vec<_>>()
        );
        assert!(set.is_empty());
        assert_eq!(set.first_from(0), None);
        assert_eq!(set.first_from(129), None);
    }

    /// A search reads a word or two per level, whatever the capacity.
    #[test]
    fn a_search_reads_few_words() {
        let capacity = 1 << 18; // three levels
        let mut set = CoreSet::new(capacity);
        set.insert(capacity - 1);
        let before = set.visits();
        assert_eq!(set.first_from(0), Some(capacity - 1));
        assert!(set.visits() - before <= 6, "{}", set.visits() - before);
    }
}
