//! Spawning: each local subtask's chain built from its factories, handed its restored
//! state, and started as a tokio task — a source task, or a task fed by channels.

use super::channels::Channels;
use super::restoring::{restored_state, restored_watermark, resumed_counters};
use super::JobConfig;
use crate::chain::{Chain, ChainLink, ChainSink};
use crate::error::{RuntimeError, RuntimeResult};
use crate::exchange::OutputRouter;
use crate::graph::{JobGraph, Node, NodeKind, WatermarkStrategy};
use crate::metrics::{FlowCounters, JobMetrics};
use crate::plan::{ChainSpec, PhysicalPlan};
use crate::protocol::{SnapshotAck, TaskExit, TaskIdentity, TaskOutcome, TaskSignal};
use crate::restore::StateOwner;
use crate::source_task::SourceTask;
use crate::task::run_channel_task;
use riffle_core::{
    Barrier, EventTime, OperatorContext, OperatorId, SinkContext, SourceFactory, StateMemory,
};
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use tokio::sync::mpsc::{self, UnboundedSender};
use tokio::task::JoinSet;

/// What the job's handle keeps of the tasks spawned.
#[derive(Default)]
pub(super) struct Spawned {
    pub(super) tasks: JoinSet<(usize, TaskOutcome<TaskExit>)>,
    /// Per task index, its head operator and subtask.
    pub(super) task_names: Vec<(OperatorId, usize)>,
    /// Task index by tokio's id, to name a task that panicked.
    pub(super) task_ids: HashMap<tokio::task::Id, usize>,
    /// Into every source task, in spawn order.
    pub(super) barrier_senders: Vec<UnboundedSender<Barrier>>,
}

impl Spawned {
    fn spawn(
        &mut self,
        index: usize,
        task: impl Future<Output = TaskOutcome<TaskExit>> + Send + 'static,
    ) {
        let handle = self.tasks.spawn(async move { (index, task.await) });
        self.task_ids.insert(handle.id(), index);
    }
}

/// Everything spawning reads: the job, its settings, and where tasks report.
pub(super) struct Spawning<'a> {
    pub(super) graph: &'a JobGraph,
    pub(super) plan: &'a PhysicalPlan,
    pub(super) config: &'a JobConfig,
    pub(super) metrics: &'a Arc<JobMetrics>,
    /// Where tasks acknowledge barriers, when the job collects acks.
    pub(super) acks: &'a Option<UnboundedSender<SnapshotAck>>,
    /// Where tasks say they restored and sources that their input ended, in
    /// exactly-once mode.
    pub(super) signals: &'a Option<UnboundedSender<TaskSignal>>,
}

/// The parts of one subtask's task that do not depend on what heads its chain.
struct TaskParts {
    identity: TaskIdentity,
    chain: Chain,
    routers: Vec<OutputRouter>,
    source_flow: Option<Arc<FlowCounters>>,
    /// The watermark the task resumes at, if the job restores.
    restored_watermark: Option<EventTime>,
}

impl Spawning<'_> {
    /// Spawns `tasks`, (chain, subtask) each, in order, taking their channels.
    ///
    /// # Errors
    /// A factory could not create a subtask, or its state could not be restored.
    pub(super) fn spawn_all(
        &self,
        tasks: &[(usize, usize)],
        channels: &mut Channels,
    ) -> RuntimeResult<Spawned> {
        let mut spawned = Spawned::default();
        let state_memory = self.state_memory_share(tasks);
        for &(c, subtask) in tasks {
            self.spawn_task(c, subtask, channels, &mut spawned, state_memory.as_ref())?;
        }
        Ok(spawned)
    }

    /// Each budgeted operator subtask's share of the process's `--state-memory`: the
    /// budget split evenly over the subtasks `tasks` run here of operators that keep to
    /// it ([`OperatorFactory::keeps_to_state_memory`]); the others hold their state
    /// outside it, and a share given to them would be memory no one uses.
    fn state_memory_share(&self, tasks: &[(usize, usize)]) -> Option<StateMemory> {
        let budget = self.config.state_memory.as_ref()?;
        let budgeted = tasks
            .iter()
            .flat_map(|&(c, _)| &self.plan.chains[c].nodes)
            .filter(|id| match &self.graph.nodes()[id.0].kind {
                NodeKind::Operator(factory) => factory.keeps_to_state_memory(),
                _ => false,
            })
            .count();
        Some(StateMemory {
            bytes: budget.bytes / budgeted.max(1) as u64,
            spill_dir: budget.spill_dir.clone(),
        })
    }

    fn spawn_task(
        &self,
        c: usize,
        subtask: usize,
        channels: &mut Channels,
        spawned: &mut Spawned,
        state_memory: Option<&StateMemory>,
    ) -> RuntimeResult<()> {
        let chain = &self.plan.chains[c];
        let head = &self.graph.nodes()[chain.nodes[0].0];
        let (links, sink) = self.chain_members(chain, subtask, state_memory)?;
        // A source's flow is registered first, so samples list operators in plan order.
        let source_flow = matches!(head.kind, NodeKind::Source { .. })
            .then(|| self.metrics.register_flow(&head.id, subtask));
        // The operator whose output leaves the task is the one a full channel blocks.
        let tail_flow = links
            .last()
            .map(|l| l.flow.clone())
            .or_else(|| source_flow.clone());
        let chain_runner = Chain::new(
            head.id.clone(),
            source_flow.clone(),
            links,
            sink,
            self.metrics.clone(),
        );
        let mut routers = channels
            .routers_of
            .remove(&(c, subtask))
            .unwrap_or_default();
        if let Some(flow) = &tail_flow {
            for router in &mut routers {
                router.count_blocked_into(flow.clone());
            }
        }
        let parts = TaskParts {
            identity: TaskIdentity {
                name: head.id.clone(),
                subtask,
            },
            chain: chain_runner,
            routers,
            source_flow,
            restored_watermark: restored_watermark(
                self.restore(),
                chain,
                self.graph.nodes(),
                subtask,
            ),
        };
        let index = spawned.task_names.len();
        spawned.task_names.push((head.id.clone(), subtask));
        match &head.kind {
            NodeKind::Source {
                factory,
                watermarks,
            } => {
                let (task, barriers) =
                    self.source_task(head, factory.as_ref(), *watermarks, chain, parts)?;
                spawned.barrier_senders.push(barriers);
                spawned.spawn(index, task.run());
            }
            _ => {
                let inputs = channels.inputs_of.remove(&(c, subtask)).unwrap_or_default();
                let task = run_channel_task(
                    parts.identity,
                    inputs,
                    parts.chain,
                    parts.routers,
                    self.acks.clone(),
                    self.signals.clone(),
                    parts.restored_watermark,
                );
                spawned.spawn(index, task);
            }
        }
        Ok(())
    }

    /// The operators and the sink of one subtask of `chain`, each handed its state.
    fn chain_members(
        &self,
        chain: &ChainSpec,
        subtask: usize,
        state_memory: Option<&StateMemory>,
    ) -> RuntimeResult<(Vec<ChainLink>, Option<ChainSink>)> {
        let mut links = Vec::new();
        let mut sink = None;
        for id in &chain.nodes {
            let node = &self.graph.nodes()[id.0];
            match &node.kind {
                NodeKind::Source { .. } => {}
                NodeKind::Operator(factory) => {
                    let mut ctx = self.operator_context(&node.id, subtask, chain.parallelism);
                    if factory.keeps_to_state_memory() {
                        ctx.state_memory = state_memory.cloned();
                    }
                    // Only an operator whose files the writer reuses may hand over
                    // what committed snapshots wrote (`FileReuse` keeps the same set).
                    if factory.stable_state() {
                        ctx.committed = self.metrics.completed_epoch.clone();
                    }
                    let operator = factory.create(&ctx).map_err(failed(&node.id, subtask))?;
                    let restore = restored_state(
                        self.restore(),
                        &node.id,
                        subtask,
                        chain.parallelism,
                        self.graph.max_parallelism,
                        StateOwner::Operator {
                            keyed: crate::restore_share::keyed(factory.as_ref()),
                        },
                    )?
                    // Only files the writer reuses may be gone on from.
                    .map(|state| state.continuing_if(factory.stable_state()));
                    if restore.is_some() {
                        ctx.counters.note_restore_pending();
                    }
                    links.push(ChainLink {
                        id: node.id.clone(),
                        operator,
                        restore,
                        counters: ctx.counters.clone(),
                        flow: self.metrics.register_flow(&node.id, subtask),
                    });
                }
                NodeKind::Sink(factory) => {
                    let ctx = SinkContext {
                        subtask,
                        parallelism: chain.parallelism,
                        exactly_once: self.config.exactly_once,
                        generation: self.config.generation,
                    };
                    let created = factory
                        .create(&node.schema, &ctx)
                        .map_err(failed(&node.id, subtask))?;
                    sink = Some(ChainSink {
                        id: node.id.clone(),
                        sink: created,
                        watermark_slot: self.metrics.register_sink(),
                        flow: self.metrics.register_flow(&node.id, subtask),
                    });
                }
            }
        }
        Ok((links, sink))
    }

    /// The task of a source subtask, its source restored, and the sender of its barriers.
    fn source_task(
        &self,
        head: &Node,
        factory: &dyn SourceFactory,
        watermarks: WatermarkStrategy,
        chain: &ChainSpec,
        parts: TaskParts,
    ) -> RuntimeResult<(SourceTask, UnboundedSender<Barrier>)> {
        let subtask = parts.identity.subtask;
        let ctx = self.operator_context(&head.id, subtask, chain.parallelism);
        let counters = ctx.counters.clone();
        let mut source = factory.create(&ctx).map_err(failed(&head.id, subtask))?;
        let owner = StateOwner::Source {
            can_rescale: factory.can_rescale(),
            from_every_subtask: factory.restores_from_every_subtask(),
        };
        let state = restored_state(
            self.restore(),
            &head.id,
            subtask,
            chain.parallelism,
            self.graph.max_parallelism,
            owner,
        )?;
        if let Some(state) = state {
            // A source's positions are small: decoded whole, here.
            let state = state.decode().map_err(|message| RuntimeError::Restore {
                operator: head.id.clone(),
                message,
            })?;
            source.restore(state).map_err(failed(&head.id, subtask))?;
        }
        let (barrier_tx, barrier_rx) = mpsc::unbounded_channel();
        let task = SourceTask {
            identity: parts.identity,
            source_id: head.id.clone(),
            source,
            timestamp_index: head.schema.timestamp_index,
            watermarks,
            chain: parts.chain,
            routers: parts.routers,
            barriers: barrier_rx,
            acks: self.acks.clone(),
            metrics: self.metrics.clone(),
            restored_watermark: parts.restored_watermark,
            counters,
            flow: parts.source_flow.unwrap_or_default(),
            signals: self.signals.clone(),
        };
        Ok((task, barrier_tx))
    }

    /// A subtask's context, its counters registered for the summary and continuing the
    /// checkpoint's totals.
    fn operator_context(
        &self,
        id: &OperatorId,
        subtask: usize,
        parallelism: usize,
    ) -> OperatorContext {
        let counters = self.metrics.register_operator(id, subtask);
        if let Some(values) = resumed_counters(self.restore(), id, subtask) {
            counters.add_values(values);
        }
        OperatorContext {
            operator_id: id.clone(),
            subtask,
            parallelism,
            max_parallelism: self.graph.max_parallelism,
            counters,
            state_memory: None,
            committed: riffle_core::CommittedEpoch::default(),
        }
    }

    fn restore(&self) -> Option<&crate::restore::RestoredJob> {
        self.config.restore.as_deref()
    }
}

/// Wraps a factory's error with the node and subtask it was building.
fn failed(id: &OperatorId, subtask: usize) -> impl FnOnce(riffle_core::Error) -> RuntimeError + '_ {
    move |source| RuntimeError::Task {
        operator: id.clone(),
        subtask,
        source,
    }
}
