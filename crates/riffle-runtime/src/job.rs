//! Spawning a compiled job and waiting for it: the first failure stops every task.

use crate::chain::{Chain, ChainLink, ChainSink};
pub use crate::checkpointed_start::{
    attach_coordinator, exactly_once, start_with_checkpoints, CheckpointTarget,
};
use crate::error::{RuntimeError, RuntimeResult};
use crate::exchange::{Exchange, OutputRouter};
use crate::graph::{JobGraph, NodeKind};
pub use crate::handle::{BarrierInjector, JobHandle, JobStopper};
use crate::metrics::{JobMetrics, OperatorTotals};
use crate::placement::{ChannelKey, Placement};
use crate::plan::PhysicalPlan;
use crate::restore::{RestoredJob, RestoredWatermark, StateOwner};
use crate::source_task::SourceTask;
use crate::task::{run_channel_task, ChainOrCancel, InputChannel};
use riffle_core::{
    Committable, Epoch, EventTime, Message, OperatorContext, OperatorId, OperatorState,
    SinkContext, SinkSummary,
};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::{self, Receiver, Sender};
use tokio::task::JoinSet;

/// Settings of a run that are not part of the graph.
#[derive(Debug, Clone)]
pub struct JobConfig {
    /// Messages each channel buffers before the sender waits (backpressure).
    pub channel_capacity: usize,
    /// State to start from (a checkpoint), if any.
    pub restore: Option<Arc<RestoredJob>>,
    /// Sinks publish only what checkpoints commit, and a bounded run ends with an
    /// [`EndOfInput`](riffle_core::BarrierKind::EndOfInput) checkpoint that commits the
    /// rest. Set by [`start_with_checkpoints`].
    pub exactly_once: bool,
    /// The run's generation, handed to sinks. Set by [`start_with_checkpoints`].
    pub generation: u64,
    /// Savepoint requests the checkpoint coordinator serves (control endpoint, signals).
    pub savepoints: Option<crate::savepoint::SavepointRequests>,
    /// Which subtasks this process runs (all of them unless the job spans workers).
    pub placement: Placement,
}

impl Default for JobConfig {
    fn default() -> Self {
        Self {
            channel_capacity: 16,
            restore: None,
            exactly_once: false,
            generation: 0,
            savepoints: None,
            placement: Placement::single(),
        }
    }
}

/// The ends of channels whose other end is on another worker; the cluster layer carries
/// their messages over the network, in order (docs/cluster.md).
#[derive(Default)]
pub struct RemoteEnds {
    /// Channels a local task sends on and a task of worker `.1` receives: drain and ship.
    pub outgoing: Vec<(ChannelKey, usize, Receiver<Message>)>,
    /// Channels a local task receives on and a remote task sends on: feed them from the
    /// network; dropping one without [`Message::End`] fails the receiving task.
    pub incoming: Vec<(ChannelKey, Sender<Message>)>,
}

/// A task's acknowledgement of a barrier: its state at that epoch.
#[derive(Debug)]
pub struct SnapshotAck {
    /// The task (its chain's head operator).
    pub task: OperatorId,
    /// The subtask.
    pub subtask: usize,
    /// The epoch snapshotted.
    pub epoch: Epoch,
    /// State of every operator in the chain (and the source's offsets).
    pub states: Vec<(OperatorId, OperatorState)>,
    /// What the chain's sink staged for this epoch.
    pub committables: Vec<Committable>,
    /// The task's input watermark at the barrier.
    pub watermark: EventTime,
    /// Operators of the chain that saw a lower watermark than the task's, because an
    /// operator before them holds it back: the one each saw, which it resumes from.
    pub held_watermarks: Vec<(riffle_core::OperatorId, EventTime)>,
    /// Counters of the task's operators (and source) at the barrier.
    pub counters: Vec<(OperatorId, riffle_core::CounterValues)>,
    /// Time spent aligning barriers.
    pub alignment: Duration,
    /// Time the task was paused taking the snapshot and pre-committing its sink.
    pub snapshot: Duration,
    /// State files the task's worker already wrote to the store, per operator: of a job
    /// spread over workers, each writes its own subtasks' state and the coordinator
    /// only records the files (docs/cluster.md). Empty in a single process.
    pub written: Vec<(OperatorId, Vec<riffle_state::manifest::FileEntry>)>,
}

/// What a finished job did.
#[derive(Debug, Clone, Default)]
pub struct JobSummary {
    /// Wall time from start to the last task's end.
    pub elapsed: Duration,
    /// Rows read by sources.
    pub source_rows: u64,
    /// Rows written by sinks.
    pub sink_rows: u64,
    /// Per sink subtask, what it wrote.
    pub sinks: Vec<(OperatorId, SinkSummary)>,
    /// Per operator, late rows and windows.
    pub operators: Vec<OperatorTotals>,
}

impl JobSummary {
    /// Late rows dropped over all operators.
    pub fn late_rows_dropped(&self) -> u64 {
        self.operators.iter().map(|o| o.late_rows_dropped).sum()
    }

    /// Malformed source records skipped over all sources.
    pub fn records_skipped(&self) -> u64 {
        self.operators.iter().map(|o| o.records_skipped).sum()
    }
}

pub(crate) struct TaskIdentity {
    pub(crate) name: OperatorId,
    pub(crate) subtask: usize,
}

pub(crate) struct TaskExit {
    pub(crate) sink: Option<(OperatorId, SinkSummary)>,
}

pub(crate) type TaskOutcome<T> = std::result::Result<T, ChainOrCancel>;

/// The checkpointed state of one subtask, if the job restores.
fn restored_state(
    config: &JobConfig,
    id: &OperatorId,
    subtask: usize,
    parallelism: usize,
    max_parallelism: u16,
    owner: StateOwner,
) -> RuntimeResult<Option<riffle_core::OperatorState>> {
    let Some(restore) = &config.restore else {
        return Ok(None);
    };
    restore
        .state_for(id, subtask, parallelism, max_parallelism, owner)
        .map_err(|message| RuntimeError::Restore {
            operator: id.clone(),
            message,
        })
}

/// The watermark a restored chain subtask resumes at: the smallest over its nodes that
/// the checkpoint holds.
fn restored_watermark(
    config: &JobConfig,
    chain: &crate::plan::ChainSpec,
    nodes: &[crate::graph::Node],
    subtask: usize,
) -> Option<EventTime> {
    let restore = config.restore.as_ref()?;
    lowest_restored(chain.nodes.iter().map(|id| {
        let node = &nodes[id.0];
        let from_every_subtask = match &node.kind {
            crate::graph::NodeKind::Source { factory, .. } => factory.restores_from_every_subtask(),
            _ => false,
        };
        restore.watermark_for(&node.id, subtask, chain.parallelism, from_every_subtask)
    }))
}

/// The lowest of a chain's restored watermarks: an unknown one is lower than any, and
/// nodes the checkpoint does not hold do not count.
fn lowest_restored(watermarks: impl Iterator<Item = RestoredWatermark>) -> Option<EventTime> {
    let mut lowest = None;
    for w in watermarks {
        match w {
            RestoredWatermark::NotHeld => {}
            RestoredWatermark::Unknown => return None,
            RestoredWatermark::At(t) => lowest = Some(lowest.map_or(t, |l: EventTime| l.min(t))),
        }
    }
    lowest
}

/// Wraps a factory's error with the node and subtask it was building.
fn failed(id: &OperatorId, subtask: usize) -> impl FnOnce(riffle_core::Error) -> RuntimeError + '_ {
    move |source| RuntimeError::Task {
        operator: id.clone(),
        subtask,
        source,
    }
}

/// Compiles and starts `graph` on the current tokio runtime.
///
/// With `collect_acks`, barrier acknowledgements are delivered on [`JobHandle::acks`].
///
/// # Errors
/// A factory could not create a subtask.
pub fn start(graph: &JobGraph, config: &JobConfig, collect_acks: bool) -> RuntimeResult<JobHandle> {
    let plan = PhysicalPlan::compile(graph);
    let nodes = graph.nodes();
    if let Some(restore) = &config.restore {
        // State the new plan has no operator for would be silently lost: refuse.
        let mut orphans: Vec<&str> = restore
            .operators
            .keys()
            .filter(|id| !nodes.iter().any(|n| &n.id == *id))
            .map(|id| id.0.as_str())
            .collect();
        if !orphans.is_empty() {
            orphans.sort_unstable();
            return Err(RuntimeError::Restore {
                operator: OperatorId(orphans.join(", ")),
                message:
                    "the checkpoint holds state for these operators, which the job no longer has"
                        .into(),
            });
        }
    }
    let metrics = Arc::new(JobMetrics::default());
    let (ack_tx, ack_rx) = if collect_acks {
        let (tx, rx) = mpsc::unbounded_channel();
        (Some(tx), Some(rx))
    } else {
        (None, None)
    };

    // Channels: for every edge into a chain head, one channel per (upstream subtask,
    // downstream subtask) pair (only u == d for forward edges). Of a job spread over
    // workers, this process makes the channels with at least one local end.
    let placement = config.placement;
    // Chains whose sink commits only in the process that staged (Kafka): on worker 0.
    let pinned: Vec<bool> = plan
        .chains
        .iter()
        .map(|chain| {
            chain.nodes.iter().any(
                |id| matches!(&nodes[id.0].kind, NodeKind::Sink(f) if !f.commit_outlives_process()),
            )
        })
        .collect();
    let local = |chain: usize, subtask: usize| placement.is_local(subtask, pinned[chain]);
    let mut remote = RemoteEnds::default();
    let mut inputs_of: HashMap<(usize, usize), Vec<InputChannel>> = HashMap::new();
    // (chain, subtask) -> routers of its tail.
    let mut routers_of: HashMap<(usize, usize), Vec<OutputRouter>> = HashMap::new();
    for (c, chain) in plan.chains.iter().enumerate() {
        let head = &nodes[chain.nodes[0].0];
        for (logical_input, edge) in head.inputs.iter().enumerate() {
            let up_chain = plan.chain_of[edge.from.0];
            let up_parallelism = plan.chains[up_chain].parallelism;
            let mut senders_by_upstream: Vec<Vec<Sender<Message>>> =
                vec![Vec::new(); up_parallelism];
            for d in 0..chain.parallelism {
                for (u, senders) in senders_by_upstream.iter_mut().enumerate() {
                    if edge.exchange == Exchange::Forward && u != d {
                        continue;
                    }
                    let (sends_here, receives_here) = (local(up_chain, u), local(c, d));
                    if !sends_here && !receives_here {
                        continue;
                    }
                    let (tx, rx): (Sender<Message>, Receiver<Message>) =
                        mpsc::channel(config.channel_capacity);
                    let key = ChannelKey {
                        chain: c,
                        input: logical_input,
                        from: u,
                        to: d,
                    };
                    if sends_here {
                        senders.push(tx);
                    } else {
                        remote.incoming.push((key, tx));
                    }
                    if receives_here {
                        inputs_of.entry((c, d)).or_default().push(InputChannel {
                            logical_input,
                            receiver: rx,
                        });
                    } else {
                        remote
                            .outgoing
                            .push((key, placement.worker_of(d, pinned[c]), rx));
                    }
                }
            }
            for (u, senders) in senders_by_upstream.into_iter().enumerate() {
                if !local(up_chain, u) {
                    continue;
                }
                routers_of
                    .entry((up_chain, u))
                    .or_default()
                    .push(OutputRouter::new(
                        edge.exchange.clone(),
                        senders,
                        graph.max_parallelism,
                    ));
            }
        }
    }

    let (stop_tx, stop_rx) = mpsc::unbounded_channel();
    let mut tasks = JoinSet::new();
    let mut task_names = Vec::new();
    let mut task_ids = HashMap::new();
    let mut barrier_senders = Vec::new();
    let (end_tx, end_rx) = if config.exactly_once {
        let (tx, rx) = mpsc::unbounded_channel();
        (Some(tx), Some(rx))
    } else {
        (None, None)
    };
    for (c, chain) in plan.chains.iter().enumerate() {
        let head = &nodes[chain.nodes[0].0];
        // Each subtask of each node gets its own counters, registered for the summary.
        let context = |id: &OperatorId, subtask: usize| {
            let counters = metrics.register_operator(id, subtask);
            // A resumed run continues the checkpoint's totals (kept on subtask 0).
            if let Some(restored) = config.restore.as_ref().filter(|_| subtask == 0) {
                if let Some(values) = restored.counters.get(id) {
                    counters.add_values(*values);
                }
            }
            OperatorContext {
                operator_id: id.clone(),
                subtask,
                parallelism: chain.parallelism,
                max_parallelism: graph.max_parallelism,
                counters,
            }
        };
        for subtask in (0..chain.parallelism).filter(|&s| local(c, s)) {
            let mut links = Vec::new();
            let mut sink = None;
            for id in &chain.nodes {
                let node = &nodes[id.0];
                match &node.kind {
                    NodeKind::Source { .. } => {}
                    NodeKind::Operator(factory) => {
                        let ctx = context(&node.id, subtask);
                        let operator = factory.create(&ctx).map_err(failed(&node.id, subtask))?;
                        let restore = restored_state(
                            config,
                            &node.id,
                            subtask,
                            chain.parallelism,
                            graph.max_parallelism,
                            StateOwner::Operator,
                        )?;
                        links.push(ChainLink {
                            id: node.id.clone(),
                            operator,
                            restore,
                            counters: ctx.counters.clone(),
                            flow: metrics.register_flow(&node.id, subtask),
                        });
                    }
                    NodeKind::Sink(factory) => {
                        let ctx = SinkContext {
                            subtask,
                            parallelism: chain.parallelism,
                            exactly_once: config.exactly_once,
                            generation: config.generation,
                        };
                        let created = factory
                            .create(&node.schema, &ctx)
                            .map_err(failed(&node.id, subtask))?;
                        sink = Some(ChainSink {
                            id: node.id.clone(),
                            sink: created,
                            watermark_slot: metrics.register_sink(),
                            flow: metrics.register_flow(&node.id, subtask),
                        });
                    }
                }
            }
            // A source's flow is registered first, so samples list operators in plan order.
            let source_flow = matches!(head.kind, NodeKind::Source { .. })
                .then(|| metrics.register_flow(&head.id, subtask));
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
                metrics.clone(),
            );
            let mut routers = routers_of.remove(&(c, subtask)).unwrap_or_default();
            if let Some(flow) = &tail_flow {
                for router in &mut routers {
                    router.count_blocked_into(flow.clone());
                }
            }
            let identity = TaskIdentity {
                name: head.id.clone(),
                subtask,
            };
            let index = task_names.len();
            task_names.push((head.id.clone(), subtask));
            match &head.kind {
                NodeKind::Source {
                    factory,
                    watermarks,
                } => {
                    let ctx = context(&head.id, subtask);
                    let source_counters = ctx.counters.clone();
                    let mut source = factory.create(&ctx).map_err(failed(&head.id, subtask))?;
                    if let Some(state) = restored_state(
                        config,
                        &head.id,
                        subtask,
                        chain.parallelism,
                        graph.max_parallelism,
                        StateOwner::Source {
                            can_rescale: factory.can_rescale(),
                            from_every_subtask: factory.restores_from_every_subtask(),
                        },
                    )? {
                        source.restore(state).map_err(failed(&head.id, subtask))?;
                    }
                    let (btx, brx) = mpsc::unbounded_channel();
                    barrier_senders.push(btx);
                    let task = SourceTask {
                        identity,
                        source_id: head.id.clone(),
                        source,
                        timestamp_index: head.schema.timestamp_index,
                        watermarks: *watermarks,
                        chain: chain_runner,
                        routers,
                        barriers: brx,
                        acks: ack_tx.clone(),
                        metrics: metrics.clone(),
                        restored_watermark: restored_watermark(config, chain, nodes, subtask),
                        counters: source_counters,
                        flow: source_flow.unwrap_or_default(),
                        end_of_input: end_tx.clone(),
                    };
                    let handle = tasks.spawn(async move { (index, task.run().await) });
                    task_ids.insert(handle.id(), index);
                }
                _ => {
                    let inputs = inputs_of.remove(&(c, subtask)).unwrap_or_default();
                    let acks = ack_tx.clone();
                    let watermark = restored_watermark(config, chain, nodes, subtask);
                    let handle = tasks.spawn(async move {
                        (
                            index,
                            run_channel_task(
                                identity,
                                inputs,
                                chain_runner,
                                routers,
                                acks,
                                watermark,
                            )
                            .await,
                        )
                    });
                    task_ids.insert(handle.id(), index);
                }
            }
        }
    }
    let job_tasks = plan.chains.iter().map(|c| c.parallelism).sum();
    let job_sources = plan
        .chains
        .iter()
        .filter(|c| matches!(nodes[c.nodes[0].0].kind, NodeKind::Source { .. }))
        .map(|c| c.parallelism)
        .sum();
    // Acks and ends of input of other workers join this process's channels on worker 0.
    let (ack_sender, end_sender) = if placement.is_distributed() {
        (ack_tx, end_tx)
    } else {
        (None, None)
    };
    Ok(JobHandle {
        metrics,
        barrier_senders,
        acks: ack_rx,
        end_of_input: end_rx,
        remote,
        job_tasks,
        job_sources,
        ack_sender,
        end_sender,
        tasks,
        stop_tx,
        stop_rx,
        task_names,
        task_ids,
        started: Instant::now(),
    })
}

/// Runs `graph` to completion on the current tokio runtime.
///
/// # Errors
/// See [`JobHandle::wait`].
pub async fn run(graph: &JobGraph, config: &JobConfig) -> RuntimeResult<JobSummary> {
    start(graph, config, false)?.wait().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_resumes_at_its_lowest_restored_watermark_and_unknown_is_lowest() {
        use RestoredWatermark::{At, NotHeld, Unknown};
        assert_eq!(
            lowest_restored([At(7), NotHeld, At(3)].into_iter()),
            Some(3)
        );
        assert_eq!(lowest_restored([At(7), Unknown, At(3)].into_iter()), None);
        assert_eq!(lowest_restored([NotHeld].into_iter()), None);
    }
}
