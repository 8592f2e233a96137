//! riffle-runtime: turns a logical [`JobGraph`] into running tasks.
//!
//! ```text
//!  JobGraph (nodes + edges) ──compile──▶ PhysicalPlan (chains × parallelism)
//!                                              │ spawn
//!   source task ─[bounded channel]─▶ operator task ─▶ … ─▶ sink (chained into a task)
//!       │ watermark = max_seen - delay        │ watermark = min over inputs
//!       └ barrier between two batches         └ barrier alignment, snapshot, forward
//! ```
//!
//! Stateless neighbours with equal parallelism are chained into one task; every other
//! edge is a bounded channel per (upstream subtask, downstream subtask) pair, so each
//! downstream subtask sees each upstream subtask as one input for watermarks and
//! barrier alignment. Exchanges: forward, keyed (key groups, see
//! [`riffle_core::key_group`]), broadcast, round robin.

pub mod align;
pub mod chain;
pub mod checkpoint_events;
pub mod coordinator;
pub mod crash;
pub mod error;
pub mod exchange;
mod file_reuse;
pub mod graph;
pub mod handle;
pub mod job;
pub mod metrics;
pub mod placement;
pub mod plan;
pub mod plan_check;
mod protocol;
pub mod readout;
pub mod recovery;
pub mod resources;
pub mod restore;
pub mod restore_share;
pub mod restored_chains;
pub mod restored_state;
pub mod savepoint;
mod source_task;
pub mod supervisor;
mod task;
pub mod watermark;

pub use checkpoint_events::{
    CheckpointEvent, CheckpointListener, EpochRequests, OperatorStateSize, RecordingListener,
    SubtaskTiming,
};
pub use coordinator::{CheckpointConfig, CheckpointCoordinator, CheckpointReport};
pub use crash::CrashPoint;
pub use error::{CheckpointFailure, LostOutput, RuntimeError, RuntimeResult};
pub use exchange::Exchange;
pub use file_reuse::{may_reuse_previous, write_ack_state, FileReuse};
pub use graph::{JobGraph, NodeId, WatermarkStrategy};
pub use job::{JobConfig, JobStopper, JobSummary, RemoteEnds, SnapshotAck, TaskSignal};
pub use metrics::{FlowValues, JobMetrics, SubtaskSample};
pub use placement::{ChannelKey, Placement};
pub use plan::PhysicalPlan;
pub use restore::{RestoredJob, RestoredWatermark};
pub use restored_state::{RestoredState, StateFiles};
pub use savepoint::{savepoint_channel, SavepointDone, SavepointRequest, SavepointSender};
pub use supervisor::{
    run_checkpointed, CheckpointedOutcome, CheckpointedRun, RestartStrategy, RunObserver,
};
