//! Ordering policies for reorderable paths: `fixed`, `adaptive` and
//! `hepframe`, each a [`Planner`](crate::schedule::Planner).
//!
//! * `fixed`: the written order.
//! * `adaptive`: measures each step's cost per visited event, where every
//!   event stops along the order in force, and the joint pass distribution
//!   of the path's steps on a small, cost-budgeted sample of events that go
//!   on after a rejection (through the cheap steps always, the expensive
//!   ones rarely), post-stratified on where events stop; at checkpoints
//!   whose interval doubles while the order is stable, it chooses the order
//!   of least expected cost (exact dynamic programming over the feasible
//!   prefix sets, A-Greedy when that is too large). The stop counts are
//!   tested for changes continuously; a significant change (drift) restarts
//!   learning.
//! * `hepframe`: HEP-Frame's published heuristic, as a baseline: the levels
//!   of the constraint DAG one after the other (a barrier between levels),
//!   each level ordered by `0.7 × pass fraction + 0.3 × normalised time`
//!   and, by default, evaluated concurrently.
//!
//! See `docs/filter-ordering.md` for the algorithms and their guarantees.
//!
//! ```
//! use evflow_core::*;
//! use evflow_core::ordering::{OrderingOptions, Policy};
//! use evflow_workloads::{self as synthetic, Timing, Work};
//!
//! let mut p = Process::new("cuts");
//! p.set_source(EmptySource::new(2000));
//! p.add(synthetic::filter("slow", Timing::constant(20e-6, Work::Busy), &[], 0.9, 1));
//! p.add(synthetic::filter("fast", Timing::constant(1e-6, Work::Busy), &[], 0.2, 2));
//! p.add_path(PathDesc::new("sel", ["slow", "fast"]).reorderable(true));
//! let options = RunOptions {
//!     planner: Some(OrderingOptions::new(Policy::Adaptive).factory()),
//!     ..RunOptions::default()
//! };
//! let report = run(p, &options).unwrap();
//! // "fast" rejects 80% of the events for a twentieth of the cost: it moved first.
//! assert_eq!(report.orderings.last().unwrap().order, ["fast", "slow"]);
//! ```

mod costs;
mod exchange;
mod exchange_after;
mod exchange_outside;
pub mod model;
mod planner;
mod policy;
mod precedence;

use std::sync::Arc;

pub use costs::{CostEstimate, ProbedProducer, robust_batch_cost, robust_cost};
pub use exchange::{
    MAX_EXCHANGED_ORDERS, MAX_EXCHANGED_SAMPLES, OrderingStatistics, OutsideProducerCost,
    PathStatistics, SharedProducerCost, StatisticsError, StepCost, StopCounts, merge_statistics,
};
pub use planner::OrderingPlanner;
pub use policy::{OrderingOptions, Policy, Tuning};
pub use precedence::PrecedenceRefused;

use crate::options::PlannerFactory;

impl OrderingOptions {
    /// The factory to put in [`RunOptions::planner`](crate::RunOptions) or
    /// `SimOptions::planner`.
    pub fn factory(self) -> PlannerFactory {
        let options = Arc::new(self);
        Arc::new(move |graph| Arc::new(OrderingPlanner::new(graph, &options)))
    }
}
