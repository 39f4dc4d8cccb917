//! Precedence constraints added to a path after the job started (see
//! `OrderingPlanner::add_precedence`).

use std::fmt;

/// Why `OrderingPlanner::add_precedence` refused constraints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrecedenceRefused {
    /// Not an `adaptive` path, or one that has samples already: its
    /// decisions rest on the constraints it had.
    Decided,
    /// A position beyond the path's steps (or a step before itself).
    Position(usize, usize),
    /// The constraints would make a cycle: no order respects them.
    Cycle(usize, usize),
    /// The order in force breaks them.
    OrderInForce,
}

impl fmt::Display for PrecedenceRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Decided => write!(f, "the path is not adaptive or has decided already"),
            Self::Position(a, b) => write!(f, "({a}, {b}) is not a pair of the path's steps"),
            Self::Cycle(a, b) => write!(f, "step {b} after step {a} makes a cycle"),
            Self::OrderInForce => write!(f, "the order in force breaks the constraints"),
        }
    }
}
