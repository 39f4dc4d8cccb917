//! The filter-ordering problem and its solvers: pure functions on costs,
//! precedence masks and an empirical joint pass distribution. No clocks, no
//! threads, no engine types: the planners call them at checkpoints, the
//! tests and the benchmark's oracle call them directly.
//!
//! A path of `n` steps is ordered. Step `j` costs `costs[j]` seconds each
//! time it runs; `preds[j]` is the bit mask of the steps that must run
//! before it. An event runs the steps in order and stops at the first
//! rejection, so the expected cost per event of an order `π` is
//! `Σ_k c(π_k) · P(the event passes π_1 … π_{k-1})`. A producer that
//! several steps need runs with the first of them: `c(π_k)` then includes
//! the shared producers that `π_k` needs and `π_1 … π_{k-1}` do not
//! (`shared`), a cost that depends on the set of steps run before only.
//!
//! * `joint`: the joint pass distribution and the expected cost of an order;
//! * `exact`: the exact search over feasible prefix sets;
//! * `heuristic`: A-Greedy, the rank rule, HEP-Frame's levels, and the
//!   precedence utilities;
//! * `shared`: the cost of the producers several steps need, charged to
//!   the first of them to run.

mod exact;
mod heuristic;
mod joint;
mod shared;
#[cfg(test)]
mod tests;

pub use exact::*;
pub use heuristic::*;
pub use joint::*;
pub use shared::*;
