//! The logical job graph: sources, operators and sinks with their parallelism and the
//! exchanges between them.

use crate::error::{RuntimeError, RuntimeResult};
use crate::exchange::Exchange;
use riffle_core::{
    OperatorFactory, OperatorId, SinkFactory, SourceFactory, StreamSchema, DEFAULT_MAX_PARALLELISM,
};
use std::sync::Arc;
use std::time::Duration;

/// Index of a node in a [`JobGraph`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NodeId(pub usize);

/// How a source's watermarks are derived from the rows it emits.
#[derive(Debug, Clone, Copy)]
pub struct WatermarkStrategy {
    /// Bounded out-of-orderness: watermark = max event time seen − this.
    pub max_out_of_orderness: Duration,
    /// After this long without data the source declares itself idle, so it does not
    /// hold back the watermark downstream. `None` never goes idle.
    pub idle_timeout: Option<Duration>,
}

impl Default for WatermarkStrategy {
    fn default() -> Self {
        Self {
            max_out_of_orderness: Duration::ZERO,
            idle_timeout: Some(Duration::from_secs(5)),
        }
    }
}

/// What a node does.
#[derive(Clone)]
pub enum NodeKind {
    /// Produces rows.
    Source {
        /// Builds the subtasks.
        factory: Arc<dyn SourceFactory>,
        /// Watermark generation.
        watermarks: WatermarkStrategy,
    },
    /// Transforms rows.
    Operator(Arc<dyn OperatorFactory>),
    /// Consumes rows.
    Sink(Arc<dyn SinkFactory>),
}

/// One input edge of a node.
#[derive(Debug, Clone)]
pub struct Edge {
    /// The upstream node.
    pub from: NodeId,
    /// How rows are routed.
    pub exchange: Exchange,
}

/// A node of the graph.
#[derive(Clone)]
pub struct Node {
    /// Stable id (the user-given name).
    pub id: OperatorId,
    /// What it does.
    pub kind: NodeKind,
    /// Number of subtasks.
    pub parallelism: usize,
    /// Input edges, in input order.
    pub inputs: Vec<Edge>,
    /// Schema of the rows it emits (sinks: of the rows they receive).
    pub schema: StreamSchema,
}

impl Node {
    /// Whether every subtask of its chain runs on worker 0: a sink whose commit dies
    /// with its process (docs/cluster.md, "Placement").
    pub fn runs_on_worker_0(&self) -> bool {
        matches!(&self.kind, NodeKind::Sink(f) if !f.commit_outlives_process())
    }

    /// `explain` text for the node.
    pub fn describe(&self) -> String {
        match &self.kind {
            NodeKind::Source { factory, .. } => factory.describe(),
            NodeKind::Operator(factory) => factory.describe(),
            NodeKind::Sink(factory) => factory.describe(),
        }
    }

    /// What the node computes, for the plan's fingerprint: its description, or a
    /// source's [`plan_identity`](riffle_core::SourceFactory::plan_identity).
    fn identity(&self) -> String {
        match &self.kind {
            NodeKind::Source { factory, .. } => factory.plan_identity(),
            _ => self.describe(),
        }
    }

    /// The node's output columns as `name: type, …` (without the event-time column's
    /// metadata), recorded in manifests so a restore can tell a changed operator.
    pub fn output_columns(&self) -> String {
        self.schema
            .schema
            .fields()
            .iter()
            .map(|f| format!("{}: {}", f.name(), f.data_type()))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Whether the node holds checkpointed state.
    pub fn is_stateful(&self) -> bool {
        match &self.kind {
            NodeKind::Source { .. } => true,
            NodeKind::Operator(factory) => factory.is_stateful(),
            NodeKind::Sink(_) => false,
        }
    }

    /// Whether unchanged state keeps its arrays across snapshots (files can be reused).
    pub fn has_stable_state(&self) -> bool {
        matches!(&self.kind, NodeKind::Operator(factory) if factory.stable_state())
    }

    /// Whether this is a sink.
    pub fn is_sink(&self) -> bool {
        matches!(self.kind, NodeKind::Sink(_))
    }
}

/// A pipeline as a graph of nodes, built with [`source`](JobGraph::source),
/// [`operator`](JobGraph::operator) and [`sink`](JobGraph::sink).
#[derive(Clone)]
pub struct JobGraph {
    /// The pipeline's name (used for state paths later).
    pub name: String,
    /// Number of key groups.
    pub max_parallelism: u16,
    nodes: Vec<Node>,
}

impl JobGraph {
    /// An empty graph.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            max_parallelism: DEFAULT_MAX_PARALLELISM,
            nodes: Vec::new(),
        }
    }

    /// The nodes, in the order they were added (inputs before consumers).
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Per node, what the rows it emits are (append-only, upsert, changelog). Nodes are
    /// added after their inputs, so one pass in order sees every input's kind first.
    pub fn output_kinds(&self) -> Vec<riffle_core::StreamKind> {
        let mut kinds = Vec::with_capacity(self.nodes.len());
        for node in &self.nodes {
            let inputs: Vec<_> = node.inputs.iter().map(|e| kinds[e.from.0]).collect();
            kinds.push(match &node.kind {
                NodeKind::Operator(factory) => factory.output_kind(&inputs),
                NodeKind::Source { .. } | NodeKind::Sink(_) => {
                    riffle_core::StreamKind::of_schema(&node.schema)
                }
            });
        }
        kinds
    }

    /// The stateful operators whose state `--state-memory` does not bound (they hold
    /// it in memory), and whether any operator keeps to it.
    pub fn state_outside_budget(&self) -> (Vec<&OperatorId>, bool) {
        let mut outside = Vec::new();
        let mut budgeted = false;
        for node in &self.nodes {
            if let NodeKind::Operator(factory) = &node.kind {
                if factory.keeps_to_state_memory() {
                    budgeted = true;
                } else if factory.is_stateful() {
                    outside.push(&node.id);
                }
            }
        }
        (outside, budgeted)
    }

    /// Every sink by its id.
    pub fn sinks(&self) -> std::collections::HashMap<String, Arc<dyn SinkFactory>> {
        self.nodes
            .iter()
            .filter_map(|n| match &n.kind {
                NodeKind::Sink(factory) => Some((n.id.0.clone(), factory.clone())),
                _ => None,
            })
            .collect()
    }

    /// A fingerprint of what the plan computes: every node's id, description and output
    /// schema (not parallelism, which a restore may change). Recorded in manifests so a
    /// changed pipeline is not silently restored from old state.
    pub fn fingerprint(&self) -> String {
        let mut text = String::new();
        for n in &self.nodes {
            text.push_str(&format!(
                "{}|{}|{:?};",
                n.id,
                n.identity(),
                n.schema.schema.fields()
            ));
        }
        format!("{:016x}", xxhash_rust::xxh3::xxh3_64(text.as_bytes()))
    }

    /// What each source found to read ([`SourceFactory::input_listing`]), for workers
    /// to check that they found the same: `source: listing` per source that has one.
    pub fn input_listing(&self) -> String {
        let mut text = Vec::new();
        for n in &self.nodes {
            if let NodeKind::Source { factory, .. } = &n.kind {
                if let Some(listing) = factory.input_listing() {
                    text.push(format!("{}: {listing}", n.id));
                }
            }
        }
        text.join("; ")
    }

    /// The schema a node emits.
    pub fn schema(&self, node: NodeId) -> &StreamSchema {
        &self.nodes[node.0].schema
    }

    /// Adds a source.
    pub fn source(
        &mut self,
        name: &str,
        factory: Arc<dyn SourceFactory>,
        parallelism: usize,
        watermarks: WatermarkStrategy,
    ) -> RuntimeResult<NodeId> {
        let schema = factory.output_schema().clone();
        self.push(
            name,
            NodeKind::Source {
                factory,
                watermarks,
            },
            parallelism,
            Vec::new(),
            schema,
        )
    }

    /// Adds an operator fed by `inputs` (one per input the operator takes). The exchange
    /// on each edge follows from the operator: keyed when it declares key columns,
    /// forward when the parallelism matches, round robin otherwise.
    pub fn operator(
        &mut self,
        name: &str,
        factory: Arc<dyn OperatorFactory>,
        parallelism: usize,
        inputs: &[NodeId],
    ) -> RuntimeResult<NodeId> {
        let mut edges = Vec::with_capacity(inputs.len());
        for (i, from) in inputs.iter().enumerate() {
            let upstream = self.node(*from)?;
            let exchange = match factory.key_columns(i) {
                Some(_) if upstream.parallelism == 1 && parallelism == 1 => Exchange::Forward,
                Some(keys) => Exchange::Keyed(keys),
                None if upstream.parallelism == parallelism => Exchange::Forward,
                None => Exchange::RoundRobin,
            };
            edges.push((*from, exchange));
        }
        self.operator_with_exchanges(name, factory, parallelism, &edges)
    }

    /// Adds an operator with the exchange on each input edge chosen by the caller (for
    /// example [`Exchange::Broadcast`] to replicate a small stream to every subtask).
    ///
    /// # Errors
    /// Wrong number of inputs, a keyed exchange for an operator that declares other key
    /// columns, or a forward edge between different parallelisms.
    pub fn operator_with_exchanges(
        &mut self,
        name: &str,
        factory: Arc<dyn OperatorFactory>,
        parallelism: usize,
        inputs: &[(NodeId, Exchange)],
    ) -> RuntimeResult<NodeId> {
        if inputs.len() != factory.input_count() {
            return Err(RuntimeError::Graph(format!(
                "operator `{name}` takes {} input(s), {} given",
                factory.input_count(),
                inputs.len()
            )));
        }
        let mut edges = Vec::with_capacity(inputs.len());
        for (i, (from, exchange)) in inputs.iter().enumerate() {
            let upstream = self.node(*from)?;
            if *exchange == Exchange::Forward && upstream.parallelism != parallelism {
                return Err(RuntimeError::Graph(format!(
                    "`{name}`: a forward edge needs equal parallelism ({} → {parallelism}); use round robin",
                    upstream.parallelism
                )));
            }
            if let (Some(keys), false) = (
                factory.key_columns(i),
                matches!(exchange, Exchange::Keyed(_)),
            ) {
                if parallelism > 1 {
                    return Err(RuntimeError::Graph(format!(
                        "`{name}` is keyed by columns {keys:?} on input {i}; its input must be a keyed exchange"
                    )));
                }
            }
            edges.push(Edge {
                from: *from,
                exchange: exchange.clone(),
            });
        }
        let schema = factory.output_schema().clone();
        self.push(
            name,
            NodeKind::Operator(factory),
            parallelism,
            edges,
            schema,
        )
    }

    /// Adds a sink fed by `input`.
    pub fn sink(
        &mut self,
        name: &str,
        factory: Arc<dyn SinkFactory>,
        parallelism: usize,
        input: NodeId,
    ) -> RuntimeResult<NodeId> {
        self.refuse_shared_output(name, factory.as_ref())?;
        let upstream = self.node(input)?;
        let exchange = if upstream.parallelism == parallelism {
            Exchange::Forward
        } else {
            Exchange::RoundRobin
        };
        let schema = upstream.schema.clone();
        self.push(
            name,
            NodeKind::Sink(factory),
            parallelism,
            vec![Edge {
                from: input,
                exchange,
            }],
            schema,
        )
    }

    /// Refuses a sink whose output overlaps an earlier sink's: two sinks writing one
    /// place tear or lose each other's committed rows (docs/engine.md, "One owner per
    /// output").
    fn refuse_shared_output(&self, name: &str, factory: &dyn SinkFactory) -> RuntimeResult<()> {
        let places = factory.output_places();
        for node in &self.nodes {
            let NodeKind::Sink(other) = &node.kind else {
                continue;
            };
            let shared = other
                .output_places()
                .iter()
                .any(|o| places.iter().any(|p| p.overlaps(o)));
            if shared {
                return Err(RuntimeError::Graph(format!(
                    "sinks `{}` ({}) and `{name}` ({}) name the same output: two sinks writing one place tear or lose each other's committed rows; give each its own",
                    node.id.0,
                    other.describe(),
                    factory.describe()
                )));
            }
        }
        Ok(())
    }

    fn node(&self, id: NodeId) -> RuntimeResult<&Node> {
        self.nodes
            .get(id.0)
            .ok_or_else(|| RuntimeError::Graph(format!("no node {}", id.0)))
    }

    fn push(
        &mut self,
        name: &str,
        kind: NodeKind,
        parallelism: usize,
        inputs: Vec<Edge>,
        schema: StreamSchema,
    ) -> RuntimeResult<NodeId> {
        if parallelism == 0 || parallelism > usize::from(self.max_parallelism) {
            return Err(RuntimeError::Graph(format!(
                "`{name}`: parallelism must be between 1 and {} (max parallelism), got {parallelism}",
                self.max_parallelism
            )));
        }
        if self.nodes.iter().any(|n| n.id.0 == name) {
            return Err(RuntimeError::Graph(format!(
                "two operators are named `{name}`; operator names are their stable ids and must be unique"
            )));
        }
        if let Some(edge) = inputs.iter().find(|e| self.nodes[e.from.0].is_sink()) {
            return Err(RuntimeError::Graph(format!(
                "`{name}` reads from sink `{}`; sinks have no output",
                self.nodes[edge.from.0].id
            )));
        }
        self.nodes.push(Node {
            id: OperatorId(name.to_string()),
            kind,
            parallelism,
            inputs,
            schema,
        });
        Ok(NodeId(self.nodes.len() - 1))
    }
}
