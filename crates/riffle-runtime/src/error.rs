//! Errors of building and running a job.

use riffle_core::OperatorId;

/// Result with [`RuntimeError`].
pub type RuntimeResult<T> = std::result::Result<T, RuntimeError>;

/// Why a job could not be built or did not finish.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The graph is malformed (unknown node, wrong number of inputs, …).
    #[error("invalid job graph: {0}")]
    Graph(String),

    /// An operator, source or sink subtask failed.
    #[error("operator `{operator}` (subtask {subtask}) failed: {source}")]
    Task {
        operator: OperatorId,
        subtask: usize,
        #[source]
        source: riffle_core::Error,
    },

    /// A task panicked: a bug in riffle.
    #[error("task `{task}` panicked: {message} (this is a bug in riffle; please report it)")]
    Panic { task: String, message: String },

    /// A newer run (generation `current`) claimed this pipeline's state while this one
    /// (generation `generation`) ran: this process must stop and never restart, since
    /// a restart would claim a newer generation still and fence out the rightful run
    /// (docs/engine.md, "Fencing").
    #[error("fenced: this run is generation {generation} but generation {current} has started on the same state; this process stops (it does not restart)")]
    Fenced { generation: u64, current: u64 },

    /// Checkpoint storage failed or holds nothing usable.
    #[error("checkpoint error: {0}")]
    Checkpoint(String),

    /// A stream to or from another worker of a job spread over several broke: the
    /// attempt fails on every worker and the job resumes from its newest checkpoint.
    #[error("between workers: {0}")]
    Peer(String),

    /// Checkpointed state cannot be given to the job as planned.
    #[error("cannot restore `{operator}` from the checkpoint: {message}")]
    Restore {
        operator: OperatorId,
        message: String,
    },

    /// Building the job from its factories failed.
    #[error(transparent)]
    Core(#[from] riffle_core::Error),
}
