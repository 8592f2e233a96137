//! What a task hands back: its snapshot at each barrier (to the checkpoint coordinator)
//! and how it ended (to the job's handle).
//!
//! A leaf: it imports nothing of the runtime, so the tasks, the handle and the
//! coordinator all speak it without depending on one another or on `job`.

use riffle_core::{
    Committable, CounterValues, Epoch, Error, EventTime, OperatorId, OperatorState, SinkSummary,
};
use riffle_state::manifest::FileEntry;
use std::time::Duration;

/// What a task tells the checkpoint coordinator besides its acks, once each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum TaskSignal {
    /// The task restored its state (or had none) and takes input: no epoch starts
    /// before every task did, so that a slow restore is not a checkpoint that timed out
    /// (as Flink triggers checkpoints only once every task runs).
    Restored,
    /// A source subtask ran dry and waits for the end-of-input barrier.
    InputEnded,
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
    /// State of every operator in the chain (and the source's offsets), until
    /// [`write_ack_state`](crate::write_ack_state) writes it as `written`.
    pub states: Vec<(OperatorId, OperatorState)>,
    /// What the chain's sink staged for this epoch.
    pub committables: Vec<Committable>,
    /// The task's input watermark at the barrier.
    pub watermark: EventTime,
    /// Operators of the chain that saw a lower watermark than the task's, because an
    /// operator before them holds it back: the one each saw, which it resumes from.
    pub held_watermarks: Vec<(OperatorId, EventTime)>,
    /// Counters of the task's operators (and source) at the barrier.
    pub counters: Vec<(OperatorId, CounterValues)>,
    /// Time spent aligning barriers.
    pub alignment: Duration,
    /// Time the task was paused taking the snapshot and pre-committing its sink.
    pub snapshot: Duration,
    /// State files written to the store, per operator, by
    /// [`write_ack_state`](crate::write_ack_state): in one process the coordinator
    /// writes them as the ack arrives; of a job spread over workers each writes its
    /// own subtasks' state and the coordinator only records the files (docs/cluster.md).
    pub written: Vec<(OperatorId, Vec<FileEntry>)>,
}

/// Which task this is, for its acks and its failure.
pub(crate) struct TaskIdentity {
    pub(crate) name: OperatorId,
    pub(crate) subtask: usize,
}

/// What a task that ended well leaves behind.
pub(crate) struct TaskExit {
    pub(crate) sink: Option<(OperatorId, SinkSummary)>,
}

/// A failure inside a chain, naming the operator.
pub struct ChainError {
    /// Which operator failed.
    pub operator: OperatorId,
    /// What went wrong.
    pub error: Error,
}

/// Why a task stopped early.
pub(crate) enum ChainOrCancel {
    /// An operator failed.
    Failed(ChainError),
    /// A neighbour went away; the job is shutting down because of another failure.
    Cancelled,
    /// An input broke the barrier protocol (a peer worker, or a bug).
    Protocol(crate::align::AlignError),
}

impl From<ChainError> for ChainOrCancel {
    fn from(e: ChainError) -> Self {
        ChainOrCancel::Failed(e)
    }
}

/// How a task ends: well, or failed or cancelled.
pub(crate) type TaskOutcome<T> = std::result::Result<T, ChainOrCancel>;
