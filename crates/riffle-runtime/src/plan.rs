//! Compiles a [`JobGraph`] into chains: runs of nodes executed by one task per subtask.

use crate::exchange::Exchange;
use crate::graph::{JobGraph, NodeId, NodeKind};
use std::fmt::Write as _;

/// A run of nodes joined by forward edges of equal parallelism, run as one task.
#[derive(Debug, Clone)]
pub struct ChainSpec {
    /// The nodes, head first.
    pub nodes: Vec<NodeId>,
    /// Subtasks of the chain.
    pub parallelism: usize,
}

/// The graph as chains, ready to spawn.
#[derive(Debug, Clone)]
pub struct PhysicalPlan {
    /// Chains in topological order.
    pub chains: Vec<ChainSpec>,
    /// For each node, the chain it is in.
    pub chain_of: Vec<usize>,
}

impl PhysicalPlan {
    /// Chains `graph`: a node joins its input's chain when it has one input over a
    /// forward edge with equal parallelism, and that input feeds nothing else.
    pub fn compile(graph: &JobGraph) -> Self {
        let nodes = graph.nodes();
        let mut consumers = vec![0usize; nodes.len()];
        for node in nodes {
            for edge in &node.inputs {
                consumers[edge.from.0] += 1;
            }
        }
        let mut chains: Vec<ChainSpec> = Vec::new();
        let mut chain_of = vec![usize::MAX; nodes.len()];
        for (i, node) in nodes.iter().enumerate() {
            let chained_to = match node.inputs.as_slice() {
                [edge]
                    if edge.exchange == Exchange::Forward
                        && consumers[edge.from.0] == 1
                        && nodes[edge.from.0].parallelism == node.parallelism =>
                {
                    Some(chain_of[edge.from.0])
                }
                _ => None,
            };
            match chained_to {
                Some(c) => {
                    chains[c].nodes.push(NodeId(i));
                    chain_of[i] = c;
                }
                None => {
                    chain_of[i] = chains.len();
                    chains.push(ChainSpec {
                        nodes: vec![NodeId(i)],
                        parallelism: node.parallelism,
                    });
                }
            }
        }
        Self { chains, chain_of }
    }

    /// The plan as text: tasks, their operators, parallelism, exchanges and state, and
    /// on each edge what its rows are (append-only, upsert, changelog).
    pub fn explain(&self, graph: &JobGraph) -> String {
        let nodes = graph.nodes();
        let kinds = graph.output_kinds();
        let mut out = String::new();
        for (c, chain) in self.chains.iter().enumerate() {
            let _ = writeln!(out, "task {c} (parallelism {})", chain.parallelism);
            for (k, id) in chain.nodes.iter().enumerate() {
                let node = &nodes[id.0];
                let role = match node.kind {
                    NodeKind::Source { .. } => "source",
                    NodeKind::Operator(_) => "operator",
                    NodeKind::Sink(_) => "sink",
                };
                let state = if node.is_stateful() { ", stateful" } else { "" };
                let _ = writeln!(out, "  [{}] {role} {}{state}", node.id, node.describe());
                for edge in &node.inputs {
                    let from = &nodes[edge.from.0];
                    let how = match &edge.exchange {
                        Exchange::Keyed(keys) => {
                            let names: Vec<_> = keys
                                .iter()
                                .map(|&k| from.schema.schema.field(k).name().as_str())
                                .collect();
                            format!("keyed by ({})", names.join(", "))
                        }
                        other if k > 0 => format!("{} (chained)", other.name()),
                        other => other.name().to_string(),
                    };
                    let kind = kinds[edge.from.0].name();
                    let _ = writeln!(out, "      <- [{}] {how}, {kind}", from.id);
                }
            }
        }
        out
    }
}
