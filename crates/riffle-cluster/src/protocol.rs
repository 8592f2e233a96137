//! The messages workers exchange, besides rows (docs/cluster.md, "How it works").

use riffle_core::{Barrier, Watermark};
use riffle_runtime::ChannelKey;
use riffle_state::Manifest;
use serde::{Deserialize, Serialize};

/// The job's secret (`_control_token` in its state root), which every stream and call
/// between its workers carries: only a process that can read the job's state root
/// speaks for one of its workers.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct JobSecret(String);

impl JobSecret {
    /// The secret `text`.
    pub fn new(text: impl Into<String>) -> Self {
        Self(text.into())
    }

    /// Whether `presented` is this secret, compared in time that does not tell how
    /// much of a guess was right.
    pub fn admits(&self, presented: &JobSecret) -> bool {
        let (a, b) = (self.0.as_bytes(), presented.0.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
    }
}

impl std::fmt::Debug for JobSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JobSecret(…)")
    }
}

/// The first message of every stream a worker opens to another: which stream it is and
/// for which attempt. A stream of another attempt than the receiver's is refused, so a
/// worker left over from a failed attempt (a zombie) cannot feed the new one.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Hello {
    /// The job's secret: a stream without it is refused before anything else.
    pub secret: JobSecret,
    /// The attempt's generation (claimed on the checkpoint store by worker 0).
    pub generation: u64,
    /// The sending worker.
    pub worker: usize,
    /// What the stream carries.
    pub stream: StreamKind,
}

/// What a stream carries.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum StreamKind {
    /// One channel of the dataflow: rows, watermarks, barriers, end.
    Channel(ChannelKey),
    /// A worker's snapshot acks and task signals, to the coordinator on worker 0.
    Acks,
    /// Barriers from the coordinator to the receiving worker's source subtasks, and
    /// word of each committed epoch ([`FromCoordinator`]).
    Barriers,
}

/// A message of a channel stream that is not rows.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum ChannelControl {
    /// Event-time progress of the sending subtask.
    Watermark(Watermark),
    /// A checkpoint barrier.
    Barrier(Barrier),
    /// The sending subtask has no more messages.
    End,
}

/// A message of a barriers stream, from worker 0 to another worker.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum FromCoordinator {
    /// A checkpoint barrier for the receiving worker's source subtasks.
    Barrier(Barrier),
    /// This epoch committed: the receiving worker may reuse its state files in the
    /// next epoch's snapshots (incremental checkpoints).
    Committed(u64),
    /// The coordinator finished: the stream ends here. A stream that ends without it
    /// was cut off by a failed attempt on worker 0.
    End,
}

/// A message of an acks stream.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum ToCoordinator {
    /// A task's snapshot, its state already written by the sending worker.
    Ack(AckHeader),
    /// A task restored, or a source subtask ran dry and waits for the end-of-input
    /// barrier.
    Signal(riffle_runtime::TaskSignal),
}

/// A [`SnapshotAck`](riffle_runtime::SnapshotAck) whose state the sending worker wrote.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AckHeader {
    /// The task (its chain's head operator).
    pub task: String,
    /// The subtask.
    pub subtask: usize,
    /// The epoch.
    pub epoch: u64,
    /// For each operator of the chain: its id and the state files written for it.
    pub written: Vec<(String, Vec<riffle_state::manifest::FileEntry>)>,
    /// What the chain's sink staged.
    pub committables: Vec<riffle_core::Committable>,
    /// The task's input watermark at the barrier.
    pub watermark: i64,
    /// Operators that saw a lower watermark than the task's.
    pub held_watermarks: Vec<(String, i64)>,
    /// Counters of the task's operators.
    pub counters: Vec<(String, riffle_core::CounterValues)>,
    /// Alignment time, nanoseconds.
    pub alignment_nanos: u64,
    /// Snapshot time, nanoseconds.
    pub snapshot_nanos: u64,
}

/// What worker 0 tells the others before an attempt starts.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Attempt {
    /// The attempt's generation.
    pub generation: u64,
    /// The checkpoint every worker restores from, if any.
    pub manifest: Option<Manifest>,
    /// The plan's fingerprint: every worker must have planned the same job.
    pub fingerprint: String,
    /// What worker 0's sources found to read (`JobGraph::input_listing`): every worker
    /// must have found the same files.
    #[serde(default)]
    pub inputs: String,
    /// How many workers the job runs on.
    pub workers: usize,
    /// The first epoch the attempt's checkpoints take.
    pub first_epoch: u64,
    /// The identity of the pipeline's state.
    pub state_id: String,
    /// The first epoch of the restored state's history (`Manifest::history_from`).
    #[serde(default)]
    pub history_from: Option<u64>,
    /// Epochs of that history whose output was taken back (`Manifest::taken_back`).
    #[serde(default)]
    pub taken_back: Vec<u64>,
}

/// What a worker asks worker 0: the attempt to run next, one of generation `at_least`
/// or newer (older ones already ended or failed here).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct AttemptRequest {
    /// The job's secret.
    pub secret: JobSecret,
    /// The asking worker.
    pub worker: usize,
    /// Which process of that worker asks (drawn at its start): a worker restarted
    /// while an attempt runs must not join it (see `service::late_joiner`).
    pub incarnation: u64,
    /// The oldest generation it may run.
    pub at_least: u64,
}

/// Worker 0's answer to an [`AttemptRequest`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum Decision {
    /// Start this attempt.
    Run(Box<Attempt>),
    /// The job ended in this generation: its last checkpoint (end of input, or a stop
    /// with a savepoint) committed. Nothing is left to run.
    Finished { generation: u64 },
    /// Worker 0 has not decided yet (it is running or recovering): ask again.
    Pending,
}

impl Decision {
    /// Whether this decision answers a request for `at_least`.
    pub fn answers(&self, at_least: u64) -> bool {
        match self {
            Decision::Run(attempt) => attempt.generation >= at_least,
            Decision::Finished { .. } => true,
            Decision::Pending => false,
        }
    }
}

/// A savepoint that another worker's control endpoint was asked for, passed on to
/// worker 0, whose coordinator takes it (the `savepoint` action).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SavepointAsk {
    /// The job's secret.
    pub secret: JobSecret,
    /// As [`riffle_runtime::savepoint::SavepointRequest`].
    pub label: Option<String>,
    /// Stop the job after it.
    pub stop: bool,
    /// Drain before stopping.
    pub drain: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_secret_is_admitted() {
        let secret = JobSecret::new("0123456789abcdef");
        assert!(secret.admits(&JobSecret::new("0123456789abcdef")));
        assert!(!secret.admits(&JobSecret::new("0123456789abcdeX")));
        assert!(!secret.admits(&JobSecret::new("0123456789abcde")));
        assert!(!secret.admits(&JobSecret::new("")));
    }

    #[test]
    fn the_secret_is_never_in_debug_output() {
        let hello = Hello {
            secret: JobSecret::new("hunter2"),
            generation: 1,
            worker: 0,
            stream: StreamKind::Acks,
        };
        assert!(!format!("{hello:?}").contains("hunter2"));
    }
}
