//! The job's dataflow graph as the REST API and the web page show it.

use riffle_runtime::graph::{JobGraph, NodeKind};
use serde::Serialize;

/// The operators of a job and the exchanges between them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct JobOutline {
    /// Operators in plan order (sources first).
    pub operators: Vec<OutlineOperator>,
}

/// One operator of [`JobOutline`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OutlineOperator {
    /// Its stable id.
    pub id: String,
    /// `source`, `operator` or `sink`.
    pub kind: &'static str,
    /// What it does (as `riffle explain` says).
    pub description: String,
    /// Its subtasks.
    pub parallelism: usize,
    /// Where its input comes from.
    pub inputs: Vec<OutlineInput>,
}

/// One input edge of an operator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OutlineInput {
    /// The upstream operator's id.
    pub from: String,
    /// `forward`, `keyed`, `broadcast` or `round-robin`.
    pub exchange: &'static str,
}

impl JobOutline {
    /// The outline of `graph`.
    pub fn of(graph: &JobGraph) -> Self {
        let nodes = graph.nodes();
        let operators = nodes
            .iter()
            .map(|node| OutlineOperator {
                id: node.id.0.clone(),
                kind: match node.kind {
                    NodeKind::Source { .. } => "source",
                    NodeKind::Operator(_) => "operator",
                    NodeKind::Sink(_) => "sink",
                },
                description: node.describe(),
                parallelism: node.parallelism,
                inputs: node
                    .inputs
                    .iter()
                    .map(|edge| OutlineInput {
                        from: nodes[edge.from.0].id.0.clone(),
                        exchange: edge.exchange.name(),
                    })
                    .collect(),
            })
            .collect();
        Self { operators }
    }
}
