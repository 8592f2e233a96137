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

    /// Checkpointing or recovery failed; `failure` says whether a restart may get
    /// past it (docs/engine.md, "Failure").
    #[error("checkpoint error: {message}")]
    Checkpoint {
        failure: CheckpointFailure,
        message: String,
    },

    /// A stream to or from another worker of a job spread over several broke: the
    /// attempt fails on every worker and the job resumes from its newest checkpoint.
    #[error("between workers: {0}")]
    Peer(String),

    /// Sinks no longer hold output that committed checkpoints record as published:
    /// resuming would leave those rows missing, so recovery changed nothing and the run
    /// stops (docs/engine.md, "Output a sink lost").
    #[error("{}", lost_output_message(.0))]
    SinkLostOutput(Vec<LostOutput>),

    /// A task's input broke the barrier protocol (`align.rs`): a peer worker that sent a
    /// barrier out of order, or a bug. The attempt fails and the job resumes from its
    /// newest checkpoint.
    #[error("task `{task}`: {source}")]
    Protocol {
        task: String,
        source: crate::align::AlignError,
    },

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

/// What a checkpoint failure asks for: the one classification both placements (one
/// process, N workers) restart by. No decision reads an error's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointFailure {
    /// Storage or an external system failed or was slow: the same run may get past it,
    /// so a restart retries (under the restart budget).
    Transient,
    /// The state or an output is not as this run needs it (no usable checkpoint, an
    /// output another pipeline owns, a sink holding rows no checkpoint accounts for):
    /// no restart helps, and the message says what to do.
    NeedsUser,
    /// riffle broke one of its own rules: a bug to report; not retried.
    Bug,
}

impl CheckpointFailure {
    /// What a failure of the checkpoint store asks for.
    pub fn of_state(error: &riffle_state::StateError) -> Self {
        use riffle_state::StateError;
        match error {
            StateError::Storage { .. }
            | StateError::Io { .. }
            | StateError::ManifestExists { .. }
            // The operator writes its state whole at the next epoch (a streamed part
            // from a new snapshot of its tier).
            | StateError::NotHeld { .. }
            | StateError::Read { .. } => CheckpointFailure::Transient,
            StateError::Root { .. }
            | StateError::Corrupt { .. }
            | StateError::StaleGeneration { .. }
            | StateError::Savepoint { .. }
            | StateError::Archive { .. } => CheckpointFailure::NeedsUser,
            StateError::Encode { .. } => CheckpointFailure::Bug,
        }
    }
}

impl RuntimeError {
    /// A checkpoint failure a restart may get past.
    pub fn transient(message: impl Into<String>) -> Self {
        RuntimeError::Checkpoint {
            failure: CheckpointFailure::Transient,
            message: message.into(),
        }
    }

    /// A checkpoint failure only the user can resolve; `message` says how.
    pub fn needs_user(message: impl Into<String>) -> Self {
        RuntimeError::Checkpoint {
            failure: CheckpointFailure::NeedsUser,
            message: message.into(),
        }
    }

    /// A broken rule of riffle's own.
    pub fn bug(message: impl Into<String>) -> Self {
        RuntimeError::Checkpoint {
            failure: CheckpointFailure::Bug,
            message: format!(
                "{} (this is a bug in riffle; please report it)",
                message.into()
            ),
        }
    }
}

/// What one sink lost of the epochs committed checkpoints record as published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostOutput {
    /// The sink's operator id.
    pub sink: String,
    /// Its description (`iceberg(ns.t, sqlite:///…)`).
    pub describe: String,
    /// The epochs it no longer holds.
    pub epochs: Vec<riffle_core::Epoch>,
}

fn lost_output_message(lost: &[LostOutput]) -> String {
    let sinks: Vec<String> = lost
        .iter()
        .map(|l| {
            let epochs: Vec<String> = l.epochs.iter().map(ToString::to_string).collect();
            format!(
                "sink `{}` ({}) no longer holds epoch(s) {}",
                l.sink,
                l.describe,
                epochs.join(", ")
            )
        })
        .collect();
    format!(
        "{}, which this pipeline's checkpoints record as committed: its output was changed outside riffle since (a catalog restored from an older backup, a table dropped or truncated, a directory emptied, a topic recreated); resuming would leave those rows missing, so nothing was changed. Restore the sink's output to where it was, or, to write everything again from the start, remove that output and start over with --no-restore",
        sinks.join("; ")
    )
}
