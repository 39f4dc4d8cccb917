//! Modules whose call runs its work as a parallel-for: ranges that the
//! calling thread and idle cores take one by one
//! ([`ModuleDesc::parallel_ranges`](crate::ModuleDesc::parallel_ranges)).
//! The grain below which ranges are merged is shared by the modules that
//! run such calls and by the simulated clock that predicts them.

/// Shortest range worth handing to another thread: waking a helper (and,
/// for sleeping work, a timer) costs tens of µs, so shorter ranges are
/// merged (as TBB's auto partitioner does).
pub const RANGE_GRAIN_S: f64 = 100e-6;

/// How many ranges `seconds` of work in `ranges` ranges is run as: at most
/// `ranges`, none shorter than [`RANGE_GRAIN_S`], at least one.
///
/// ```
/// use evflow_core::parallel_for::effective_ranges;
///
/// assert_eq!(effective_ranges(0.1, 100), 100); // 1 ms each
/// assert_eq!(effective_ranges(0.001, 100), 10); // merged to 100 µs each
/// assert_eq!(effective_ranges(0.0, 100), 1);
/// ```
pub fn effective_ranges(seconds: f64, ranges: u32) -> u32 {
    let by_grain = (seconds / RANGE_GRAIN_S).floor();
    let by_grain = if by_grain.is_finite() && by_grain >= 1.0 {
        by_grain.min(f64::from(u32::MAX)) as u32
    } else {
        1
    };
    ranges.clamp(1, by_grain.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_merged_down_to_the_grain() {
        assert_eq!(effective_ranges(0.1, 100), 100);
        assert_eq!(effective_ranges(0.001, 100), 10);
        assert_eq!(effective_ranges(0.0, 100), 1);
        assert_eq!(effective_ranges(1.0, 0), 1);
        assert_eq!(effective_ranges(f64::NAN, 8), 1);
        assert_eq!(effective_ranges(f64::INFINITY, 8), 1);
    }
}
