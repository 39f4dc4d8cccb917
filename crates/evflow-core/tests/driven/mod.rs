//! Pieces shared by the tests that drive the ordering planner by hand with
//! scripted decisions and timings: a seeded hash for the data and the
//! noise, and a filter that never runs.

// Each test file uses part of it.
#![allow(dead_code)]

use evflow_core::*;

/// SplitMix64's finaliser: a well-mixed 64-bit hash of a key.
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A uniform number in [0, 1) from a key.
pub fn unit(key: u64) -> f64 {
    (mix(key) >> 11) as f64 / (1u64 << 53) as f64
}

/// A filter that is never run: the planner is driven by hand.
pub struct Idle;
impl Transitions for Idle {}
impl Filter for Idle {
    fn filter(&self, _: &Event<'_>) -> ModuleResult<bool> {
        Ok(true)
    }
}
