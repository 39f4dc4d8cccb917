//! [`TriggerResults`]: every path's decision for one event, as output
//! modules see it.

use std::sync::Arc;

use crate::graph::Graph;

/// Every path's decision for one event, handed to output modules.
#[derive(Clone, Debug)]
pub struct TriggerResults {
    graph: Arc<Graph>,
    accepted: Vec<bool>,
}

impl TriggerResults {
    pub(crate) fn new(graph: Arc<Graph>, accepted: Vec<bool>) -> Self {
        Self { graph, accepted }
    }
    /// Whether the path named `name` accepted the event (`None`: no such path).
    pub fn accepted(&self, name: &str) -> Option<bool> {
        self.graph.path_index(name).map(|p| self.accepted[p])
    }
    /// (path name, accepted) for every path, in declaration order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, bool)> {
        self.graph
            .paths
            .iter()
            .map(|p| p.name.as_str())
            .zip(self.accepted.iter().copied())
    }
}
