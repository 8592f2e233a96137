//! What the control endpoint reports: the running attempt's counters, the checkpoint
//! events so far and the job's outline. Filled by the run (a checkpoint listener and
//! `set_job` per attempt); read by the endpoint's views ([`super::api`],
//! [`super::scrape`]).

use super::exposition::Buckets;
use super::outline::JobOutline;
use riffle_runtime::checkpoint_events::{
    CheckpointEvent, CheckpointListener, EpochRequests, OperatorStateSize, SubtaskTiming,
};
use riffle_runtime::metrics::JobMetrics;
use riffle_state::RequestTally;
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Checkpoints kept in the in-memory history (`/api/checkpoints`).
const HISTORY: usize = 500;

/// Upper bounds of the checkpoint time histograms, in seconds.
pub(super) const SECONDS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];
/// Upper bounds of the checkpoint size histogram, in bytes (4 KiB to 4 GiB by fours).
pub(super) const BYTES: &[f64] = &[
    4096.0,
    16384.0,
    65536.0,
    262144.0,
    1048576.0,
    4194304.0,
    16777216.0,
    67108864.0,
    268435456.0,
    1073741824.0,
    4294967296.0,
];

/// The job's live state, shared by the run and the control endpoint. Register it as a
/// checkpoint listener and call [`set_job`](Self::set_job) when an attempt starts.
#[derive(Debug, Default)]
pub struct LiveMetrics {
    outline: JobOutline,
    job: Mutex<Option<Arc<JobMetrics>>>,
    attempts: AtomicU64,
    checkpoints: Mutex<CheckpointTally>,
    rates: super::rates::Rates,
}

/// One checkpoint as `/api/checkpoints` lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(super) struct CheckpointRecord {
    pub epoch: u64,
    /// `completed` or `failed`.
    pub status: &'static str,
    /// When it completed or failed, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    pub duration_ms: Option<f64>,
    pub alignment_ms: Option<f64>,
    pub snapshot_ms: Option<f64>,
    pub upload_ms: Option<f64>,
    pub commit_ms: Option<f64>,
    /// State bytes uploaded by this epoch.
    pub bytes: Option<u64>,
    /// Rows and bytes of the whole state per operator.
    pub state: Vec<StateSize>,
    pub failure: Option<String>,
    /// Promoted to this savepoint.
    pub savepoint: Option<String>,
    /// Object-store requests by phase.
    pub requests: Option<EpochRequests>,
    /// Each task's alignment, snapshot and upload times and bytes.
    pub subtasks: Vec<SubtaskTiming>,
}

/// [`OperatorStateSize`] as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(super) struct StateSize {
    pub operator: String,
    pub rows: u64,
    pub bytes: u64,
}

/// Checkpoint counts, histograms and history.
#[derive(Debug)]
pub(super) struct CheckpointTally {
    pub committed: u64,
    pub failed: u64,
    pub savepoints: Vec<String>,
    pub history: VecDeque<CheckpointRecord>,
    pub durations: Buckets,
    pub alignments: Buckets,
    pub snapshots: Buckets,
    pub uploads: Buckets,
    pub commits: Buckets,
    pub sizes: Buckets,
    /// The newest completed checkpoint's state sizes.
    pub state: Vec<OperatorStateSize>,
    /// Object-store requests of completed checkpoints, by phase, summed.
    pub requests: RequestsByPhase,
    /// Sink transactions committed, per sink.
    pub sink_commits: std::collections::BTreeMap<String, u64>,
}

/// [`EpochRequests`] summed over checkpoints.
#[derive(Debug, Default)]
pub(super) struct RequestsByPhase {
    pub upload: RequestTally,
    pub commit: RequestTally,
    pub gc: RequestTally,
}

impl RequestsByPhase {
    fn push(&mut self, epoch: EpochRequests) {
        self.upload = self.upload.plus(epoch.upload);
        self.commit = self.commit.plus(epoch.commit);
        self.gc = self.gc.plus(epoch.gc);
    }

    /// `(phase, tally)` in a fixed order.
    pub(super) fn phases(&self) -> [(&'static str, RequestTally); 3] {
        [
            ("upload", self.upload),
            ("commit", self.commit),
            ("gc", self.gc),
        ]
    }
}

impl Default for CheckpointTally {
    fn default() -> Self {
        Self {
            committed: 0,
            failed: 0,
            savepoints: Vec::new(),
            history: VecDeque::new(),
            durations: Buckets::new(SECONDS),
            alignments: Buckets::new(SECONDS),
            snapshots: Buckets::new(SECONDS),
            uploads: Buckets::new(SECONDS),
            commits: Buckets::new(SECONDS),
            sizes: Buckets::new(BYTES),
            state: Vec::new(),
            requests: RequestsByPhase::default(),
            sink_commits: std::collections::BTreeMap::new(),
        }
    }
}

impl CheckpointTally {
    /// The newest completed checkpoint, if any.
    pub(super) fn last_completed(&self) -> Option<&CheckpointRecord> {
        self.history.iter().rev().find(|r| r.status == "completed")
    }

    /// The newest failure, if any.
    pub(super) fn last_failed(&self) -> Option<&CheckpointRecord> {
        self.history.iter().rev().find(|r| r.status == "failed")
    }

    fn record(&mut self, record: CheckpointRecord) {
        if self.history.len() == HISTORY {
            self.history.pop_front();
        }
        self.history.push_back(record);
    }
}

/// Wall-clock time now, since the Unix epoch (what the endpoint's views stamp and lag
/// against).
pub(super) fn since_unix_epoch() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

fn now_ms() -> u64 {
    u64::try_from(since_unix_epoch().as_millis()).unwrap_or(u64::MAX)
}

fn ms(duration: Duration) -> Option<f64> {
    Some(duration.as_secs_f64() * 1000.0)
}

impl LiveMetrics {
    /// Live metrics of a job with this outline.
    pub fn new(outline: JobOutline) -> Self {
        Self {
            outline,
            ..Self::default()
        }
    }

    /// An attempt started (the first run or a restart); these are its counters.
    pub fn set_job(&self, metrics: Arc<JobMetrics>) {
        self.attempts.fetch_add(1, Ordering::Relaxed);
        *self.job.lock().unwrap_or_else(|e| e.into_inner()) = Some(metrics);
    }

    /// The running attempt's counters, if one started.
    pub(super) fn job(&self) -> Option<Arc<JobMetrics>> {
        self.job.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// A number that grows whenever this run changed what is on storage: a checkpoint
    /// completed or failed, a savepoint, an attempt started.
    pub(super) fn changes(&self) -> u64 {
        let tally = self.checkpoints();
        tally.committed + tally.failed + tally.savepoints.len() as u64 + self.attempts()
    }

    /// Attempts started so far (restarts are one fewer).
    pub(super) fn attempts(&self) -> u64 {
        self.attempts.load(Ordering::Relaxed)
    }

    /// Rates per second over the API's recent readings.
    pub(super) fn rates(&self) -> &super::rates::Rates {
        &self.rates
    }

    pub(super) fn outline(&self) -> &JobOutline {
        &self.outline
    }

    /// Rows and bytes of `operator`'s state at the newest checkpoint, if it has any.
    pub(super) fn state_of(&self, operator: &str) -> Option<(u64, u64)> {
        let tally = self.checkpoints();
        let state = tally.state.iter().find(|s| s.operator == operator)?;
        Some((state.rows, state.bytes))
    }

    pub(super) fn checkpoints(&self) -> MutexGuard<'_, CheckpointTally> {
        self.checkpoints.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl CheckpointListener for LiveMetrics {
    fn on_event(&self, event: &CheckpointEvent) {
        let mut tally = self.checkpoints();
        match event {
            CheckpointEvent::Completed {
                epoch,
                duration,
                bytes,
                alignment,
                snapshot,
                upload,
                commit,
                state,
                requests,
                sink_commits,
                subtasks,
            } => {
                tally.committed += 1;
                tally.durations.observe(duration.as_secs_f64());
                tally.alignments.observe(alignment.as_secs_f64());
                tally.snapshots.observe(snapshot.as_secs_f64());
                tally.uploads.observe(upload.as_secs_f64());
                tally.commits.observe(commit.as_secs_f64());
                tally.sizes.observe(*bytes as f64);
                tally.state = state.clone();
                tally.requests.push(**requests);
                for (sink, n) in sink_commits {
                    *tally.sink_commits.entry(sink.clone()).or_default() += n;
                }
                tally.record(CheckpointRecord {
                    epoch: epoch.0,
                    status: "completed",
                    at_ms: now_ms(),
                    duration_ms: ms(*duration),
                    alignment_ms: ms(*alignment),
                    snapshot_ms: ms(*snapshot),
                    upload_ms: ms(*upload),
                    commit_ms: ms(*commit),
                    bytes: Some(*bytes),
                    state: state
                        .iter()
                        .map(|s| StateSize {
                            operator: s.operator.clone(),
                            rows: s.rows,
                            bytes: s.bytes,
                        })
                        .collect(),
                    failure: None,
                    savepoint: None,
                    requests: Some(**requests),
                    subtasks: subtasks.clone(),
                });
            }
            CheckpointEvent::Failed { epoch, reason, .. } => {
                tally.failed += 1;
                tally.record(CheckpointRecord {
                    epoch: epoch.0,
                    status: "failed",
                    at_ms: now_ms(),
                    duration_ms: None,
                    alignment_ms: None,
                    snapshot_ms: None,
                    upload_ms: None,
                    commit_ms: None,
                    bytes: None,
                    state: Vec::new(),
                    failure: Some(reason.clone()),
                    savepoint: None,
                    requests: None,
                    subtasks: Vec::new(),
                });
            }
            CheckpointEvent::Savepoint(done) => {
                tally.savepoints.push(done.label.clone());
                let epoch = done.epoch.0;
                if let Some(record) = tally.history.iter_mut().rev().find(|r| r.epoch == epoch) {
                    record.savepoint = Some(done.label.clone());
                }
            }
            CheckpointEvent::Started { .. } | CheckpointEvent::Acked { .. } => {}
        }
    }
}
