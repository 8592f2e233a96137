//! Checkpoint events for metrics, the progress line and tests.

use riffle_core::Epoch;
use std::time::Duration;

/// What happened to a checkpoint.
#[derive(Debug, Clone, PartialEq)]
pub enum CheckpointEvent {
    /// Barriers for `epoch` were injected at every source.
    Started { epoch: Epoch, end_of_input: bool },
    /// A task acknowledged `epoch` (its state is on storage).
    Acked {
        epoch: Epoch,
        acks: usize,
        tasks: usize,
    },
    /// `epoch` is COMMITTED: its state is durable and its sink output published.
    Completed {
        epoch: Epoch,
        /// From trigger to COMMITTED.
        duration: Duration,
        /// State bytes this epoch uploaded (files reused from earlier epochs not counted).
        bytes: u64,
        /// Longest barrier alignment of any task.
        alignment: Duration,
        /// Longest synchronous snapshot of any task (the task paused).
        snapshot: Duration,
        /// Time spent writing the epoch's state files (every task's, one after another).
        upload: Duration,
        /// The commit: PREPARED manifest, sink commits, COMMITTED manifest.
        commit: Duration,
        /// Each operator's whole checkpointed state at this epoch (all files its
        /// manifest entry lists, written now or reused).
        state: Vec<OperatorStateSize>,
        /// Its object-store requests, by phase (boxed: the other events are small).
        requests: Box<EpochRequests>,
        /// Sink transactions it committed, per sink: `(sink, count)` (a PostgreSQL
        /// prepared transaction, a Kafka transaction, a subtask's staged files).
        sink_commits: Vec<(String, u64)>,
        /// Each task's times and bytes, in the order their acks arrived.
        subtasks: Vec<SubtaskTiming>,
    },
    /// `epoch` failed (timeout, storage, sink commit); `consecutive` failures so far.
    Failed {
        epoch: Epoch,
        reason: String,
        consecutive: usize,
    },
    /// A committed epoch was promoted to a savepoint.
    Savepoint(crate::savepoint::SavepointDone),
}

/// One task's part in a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SubtaskTiming {
    /// The task (its chain's head operator).
    pub task: String,
    /// The subtask.
    pub subtask: usize,
    /// From its first input's barrier to its last one's.
    #[serde(serialize_with = "millis")]
    pub alignment: Duration,
    /// The task paused: snapshot and sink pre-commit.
    #[serde(serialize_with = "millis")]
    pub snapshot: Duration,
    /// Writing its state files.
    #[serde(serialize_with = "millis")]
    pub upload: Duration,
    /// State bytes it wrote.
    pub bytes: u64,
}

fn millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1000.0)
}

/// The object-store requests of one epoch, by phase.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct EpochRequests {
    /// Writing the state files (trigger to the commit's start).
    pub upload: riffle_state::RequestTally,
    /// The commit protocol: generation checks, PREPARED and COMMITTED manifests,
    /// `_latest.json`.
    pub commit: riffle_state::RequestTally,
    /// Deleting checkpoints no longer retained.
    pub gc: riffle_state::RequestTally,
}

/// The size of one operator's checkpointed state at an epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorStateSize {
    /// The operator.
    pub operator: String,
    /// Rows in its state files.
    pub rows: u64,
    /// Bytes of its state files.
    pub bytes: u64,
}

impl OperatorStateSize {
    /// Every operator's state size as `manifest` lists it.
    pub fn of(manifest: &riffle_state::Manifest) -> Vec<Self> {
        manifest
            .operators
            .iter()
            .map(|op| {
                let files = op.subtasks.iter().flat_map(|s| &s.files);
                let (rows, bytes) = files.fold((0, 0), |(r, b), f| (r + f.rows, b + f.bytes));
                Self {
                    operator: op.operator.clone(),
                    rows,
                    bytes,
                }
            })
            .collect()
    }
}

/// Receives checkpoint events from the coordinator (called on its task: keep it quick).
pub trait CheckpointListener: Send + Sync {
    /// One event.
    fn on_event(&self, event: &CheckpointEvent);
}

/// Records every event (tests, tools).
#[derive(Debug, Default)]
pub struct RecordingListener {
    events: std::sync::Mutex<Vec<CheckpointEvent>>,
}

impl RecordingListener {
    /// Events so far, in order.
    pub fn events(&self) -> Vec<CheckpointEvent> {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl CheckpointListener for RecordingListener {
    fn on_event(&self, event: &CheckpointEvent) {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(event.clone());
    }
}
