//! The 64-bit hash behind every deterministic pseudo-random choice of the
//! engine (which events a path samples) and of the synthetic workloads
//! (which events a filter passes): a pure function, so that runs repeat.

/// A well-mixed 64-bit hash (splitmix64 finaliser).
///
/// ```
/// use evflow_core::hash::mix;
/// assert_ne!(mix(1), mix(2));
/// assert_eq!(mix(7), mix(7));
/// ```
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
