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

/// The ten-step pipeline the calibration and first-timing replays drive:
/// each step's cost (seconds) and pass rate, the step whose variable it
/// reads smeared (two twin pairs: 2 reads 1, 4 reads 3), and `(later,
/// earlier)` precedence constraints.
pub const TWIN_COSTS: [f64; 10] = [
    206e-6, 5e-6, 30e-6, 70e-6, 8e-6, 5e-6, 40e-6, 5e-6, 15e-6, 300e-6,
];
pub const TWIN_RATES: [f64; 10] = [0.5, 0.6, 0.55, 0.3, 0.35, 0.5, 0.45, 0.8, 0.9, 0.4];
pub const TWINS: [Option<usize>; 10] = [
    None,
    None,
    Some(1),
    None,
    Some(3),
    None,
    None,
    None,
    None,
    None,
];
pub const TWIN_AFTER: [(usize, usize); 2] = [(2, 0), (9, 3)];

/// A filter that is never run: the planner is driven by hand.
pub struct Idle;
impl Transitions for Idle {}
impl Filter for Idle {
    fn filter(&self, _: &Event<'_>) -> ModuleResult<bool> {
        Ok(true)
    }
}

/// A reorderable path `sel` of `filters` idle filters `f0`, `f1`, …, with
/// the precedence constraints `after` as (later, earlier) indices.
pub fn driven_graph(filters: usize, after: &[(usize, usize)]) -> Graph {
    let mut proc = Process::new("driven");
    proc.set_source(EmptySource::new(1));
    let labels: Vec<String> = (0..filters).map(|j| format!("f{j}")).collect();
    for l in &labels {
        proc.add(ModuleDesc::filter(l.clone(), Idle));
    }
    let mut path = PathDesc::new("sel", labels.iter().cloned()).reorderable(true);
    for &(later, earlier) in after {
        path = path.after(labels[later].clone(), labels[earlier].clone());
    }
    proc.add_path(path);
    proc.compile().unwrap()
}
