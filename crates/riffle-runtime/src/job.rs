//! Starting a compiled job and waiting for it: the first failure stops every task.
//!
//! ```text
//!  JobGraph ──compile──▶ PhysicalPlan ──wiring──▶ Wiring: tasks and channels (pure)
//!     ──channels──▶ inputs, routers, remote ends ──spawning──▶ one tokio task per
//!                                                  local subtask, handed its state
//!                                                  (restoring)
//! ```

mod channels;
mod checkpointed_start;
mod restoring;
mod spawning;
mod wiring;

use crate::error::RuntimeResult;
use crate::graph::{JobGraph, NodeKind};
pub use crate::handle::{BarrierInjector, JobHandle, JobStopper, JobSummary};
use crate::metrics::JobMetrics;
use crate::placement::Placement;
pub use crate::placement::RemoteEnds;
use crate::plan::PhysicalPlan;
pub use crate::protocol::{SnapshotAck, TaskSignal};
use crate::restore::RestoredJob;
pub use checkpointed_start::{
    attach_coordinator, exactly_once, start_with_checkpoints, CheckpointTarget,
};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};

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
    /// `--state-memory`: the bytes of state this process keeps in memory, shared evenly
    /// by its stateful subtasks, and where they spill the rest.
    pub state_memory: Option<riffle_core::StateMemory>,
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
            state_memory: None,
        }
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
    restoring::refuse_orphans(config.restore.as_deref(), nodes)?;
    let metrics = Arc::new(JobMetrics::default());
    let (ack_tx, ack_rx) = channel_if(collect_acks);
    let wiring = wiring::plan_wiring(&wiring::chain_edges(&plan, nodes), config.placement);
    let mut channels = channels::connect(&wiring, config.channel_capacity, graph.max_parallelism);
    let (stop_tx, stop_rx) = mpsc::unbounded_channel();
    let (signal_tx, signal_rx) = channel_if(config.exactly_once);
    let spawned = spawning::Spawning {
        graph,
        plan: &plan,
        config,
        metrics: &metrics,
        acks: &ack_tx,
        signals: &signal_tx,
    }
    .spawn_all(&wiring.tasks, &mut channels)?;
    let job_tasks = plan.chains.iter().map(|c| c.parallelism).sum();
    let job_sources = plan
        .chains
        .iter()
        .filter(|c| matches!(nodes[c.nodes[0].0].kind, NodeKind::Source { .. }))
        .map(|c| c.parallelism)
        .sum();
    // Acks and task signals of other workers join this process's channels on worker 0.
    let (ack_sender, signal_sender) = if config.placement.is_distributed() {
        (ack_tx, signal_tx)
    } else {
        (None, None)
    };
    Ok(JobHandle {
        metrics,
        barrier_senders: spawned.barrier_senders,
        acks: ack_rx,
        task_signals: signal_rx,
        remote: channels.remote,
        job_tasks,
        job_sources,
        ack_sender,
        signal_sender,
        tasks: spawned.tasks,
        stop_tx,
        stop_rx,
        task_names: spawned.task_names,
        task_ids: spawned.task_ids,
        started: Instant::now(),
        restored_chains: config.restore.as_ref().and_then(|r| r.chains.clone()),
    })
}

/// An unbounded channel, if `wanted`.
fn channel_if<T>(wanted: bool) -> (Option<UnboundedSender<T>>, Option<UnboundedReceiver<T>>) {
    if wanted {
        let (tx, rx) = mpsc::unbounded_channel();
        (Some(tx), Some(rx))
    } else {
        (None, None)
    }
}

/// Runs `graph` to completion on the current tokio runtime.
///
/// # Errors
/// See [`JobHandle::wait`].
pub async fn run(graph: &JobGraph, config: &JobConfig) -> RuntimeResult<JobSummary> {
    start(graph, config, false)?.wait().await
}
