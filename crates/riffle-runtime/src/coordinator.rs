//! The checkpoint coordinator: triggers epochs, collects every task's snapshot, uploads
//! the state as Parquet while the job runs on, and writes the manifest last.
//!
//! ```text
//!  every interval: inject Barrier(N) at sources ──▶ tasks align, snapshot, ack
//!  acks ──▶ upload state files (async) ──▶ all acked? ──▶ manifest PREPARED (create)
//!        ──▶ COMMITTED ──▶ _latest.json ──▶ GC keeps the newest K committed epochs
//! ```
//!
//! With no transactional sink, PREPARED is followed at once by COMMITTED (DESIGN §4.6).
//! An epoch that does not complete within the timeout is abandoned: its files stay as a
//! partial epoch, swept by the next recovery.

use crate::job::{BarrierInjector, SnapshotAck};
use riffle_core::{Barrier, BarrierKind, Epoch, OperatorId};
use riffle_state::manifest::{OperatorEntry, SubtaskEntry};
use riffle_state::recovery::plan_gc;
use riffle_state::{CheckpointStore, Manifest, StateError};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc::UnboundedReceiver;

/// How often and how checkpoints are taken.
#[derive(Debug, Clone)]
pub struct CheckpointConfig {
    /// Time between two epochs' triggers.
    pub interval: Duration,
    /// An epoch not complete after this long is abandoned.
    pub timeout: Duration,
    /// Committed epochs to keep.
    pub retain: usize,
    /// This run's generation (fencing).
    pub generation: u64,
    /// The first epoch this run takes (one past the restored epoch).
    pub first_epoch: Epoch,
}

impl Default for CheckpointConfig {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(10),
            timeout: Duration::from_secs(60),
            retain: 3,
            generation: 1,
            first_epoch: Epoch(1),
        }
    }
}

/// What the coordinator did over a run.
#[derive(Debug, Clone, Default)]
pub struct CheckpointReport {
    /// Epochs committed, in order.
    pub committed: Vec<Epoch>,
    /// Epochs abandoned (timeout, or the job ended first).
    pub abandoned: Vec<Epoch>,
    /// Time from trigger to COMMITTED, per committed epoch.
    pub durations: Vec<Duration>,
    /// State bytes written per committed epoch.
    pub bytes: Vec<u64>,
    /// Longest barrier alignment seen per committed epoch.
    pub alignment: Vec<Duration>,
    /// Storage errors that failed an epoch (the job went on).
    pub errors: Vec<String>,
}

/// Static facts the manifest needs about each stateful operator.
#[derive(Debug, Clone)]
pub struct OperatorInfo {
    /// Subtasks.
    pub parallelism: usize,
    /// Key groups.
    pub max_parallelism: u16,
}

struct Pending {
    epoch: Epoch,
    triggered: Instant,
    triggered_at_ms: i64,
    acks: usize,
    files: BTreeMap<String, Vec<SubtaskEntry>>,
    bytes: u64,
    alignment: Duration,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Runs checkpoints for a started job until its tasks are gone.
pub struct CheckpointCoordinator {
    /// Storage of this pipeline's checkpoints.
    pub store: CheckpointStore,
    /// Interval, timeout, retention, generation.
    pub config: CheckpointConfig,
    /// Pipeline name for manifests.
    pub pipeline: String,
    /// Parallelism of every operator whose state may appear in acks.
    pub operators: HashMap<OperatorId, OperatorInfo>,
    /// Tasks that must ack each epoch.
    pub task_count: usize,
    /// The plan's fingerprint, recorded in manifests.
    pub plan_fingerprint: String,
    /// The job's live metrics (watermark and counters recorded in manifests).
    pub metrics: Option<std::sync::Arc<crate::JobMetrics>>,
}

impl CheckpointCoordinator {
    /// Triggers epochs and completes them until the ack channel closes (job ended).
    pub async fn run(
        self,
        injector: BarrierInjector,
        mut acks: UnboundedReceiver<SnapshotAck>,
    ) -> CheckpointReport {
        let mut report = CheckpointReport::default();
        let mut next_epoch = self.config.first_epoch;
        let mut pending: Option<Pending> = None;
        let mut ticker = tokio::time::interval(self.config.interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        loop {
            tokio::select! {
                _ = ticker.tick() => {
                    if let Some(p) = &pending {
                        if p.triggered.elapsed() < self.config.timeout {
                            continue; // at most one epoch in flight
                        }
                        // Timed out: abandon it; the new epoch below replaces it.
                        report.abandoned.push(p.epoch);
                    }
                    let epoch = next_epoch;
                    next_epoch = Epoch(epoch.0 + 1);
                    pending = Some(Pending { epoch, triggered: Instant::now(), triggered_at_ms: now_ms(), acks: 0, files: BTreeMap::new(), bytes: 0, alignment: Duration::ZERO });
                    injector.inject(Barrier { epoch, kind: BarrierKind::Checkpoint });
                }
                ack = acks.recv() => {
                    let Some(ack) = ack else { break };
                    let Some(p) = pending.as_mut().filter(|p| p.epoch == ack.epoch) else { continue };
                    if let Err(e) = self.upload(p, ack).await {
                        report.errors.push(e.to_string());
                        report.abandoned.push(p.epoch);
                        pending = None;
                        continue;
                    }
                    if p.acks == self.task_count {
                        let done = pending.take();
                        if let Some(done) = done {
                            match self.complete(&done).await {
                                Ok(()) => {
                                    report.committed.push(done.epoch);
                                    report.durations.push(done.triggered.elapsed());
                                    report.bytes.push(done.bytes);
                                    report.alignment.push(done.alignment);
                                }
                                Err(e) => {
                                    report.errors.push(e.to_string());
                                    report.abandoned.push(done.epoch);
                                }
                            }
                        }
                    }
                }
            }
        }
        if let Some(p) = pending {
            report.abandoned.push(p.epoch);
        }
        report
    }

    async fn upload(&self, pending: &mut Pending, ack: SnapshotAck) -> Result<(), StateError> {
        pending.acks += 1;
        pending.alignment = pending.alignment.max(ack.alignment);
        for (operator, state) in ack.states {
            if state.batches.is_empty() && !self.operators.contains_key(&operator) {
                continue;
            }
            let files = self
                .store
                .write_state(pending.epoch, &operator.0, ack.subtask, &state)
                .await?;
            pending.bytes += files.iter().map(|f| f.bytes).sum::<u64>();
            pending
                .files
                .entry(operator.0)
                .or_default()
                .push(SubtaskEntry {
                    subtask: ack.subtask,
                    files,
                });
        }
        Ok(())
    }

    async fn complete(&self, pending: &Pending) -> Result<(), StateError> {
        let mut manifest = Manifest::prepared(
            &self.pipeline,
            self.config.generation,
            pending.epoch,
            pending.triggered_at_ms,
        );
        for (operator, subtasks) in &pending.files {
            let info = self
                .operators
                .get(&OperatorId(operator.clone()))
                .cloned()
                .unwrap_or(OperatorInfo {
                    parallelism: subtasks.len().max(1),
                    max_parallelism: riffle_core::DEFAULT_MAX_PARALLELISM,
                });
            let mut subtasks = subtasks.clone();
            subtasks.sort_by_key(|s| s.subtask);
            manifest.operators.push(OperatorEntry {
                operator: operator.clone(),
                parallelism: info.parallelism,
                max_parallelism: info.max_parallelism,
                subtasks,
            });
        }
        manifest.plan_fingerprint = self.plan_fingerprint.clone();
        if let Some(metrics) = &self.metrics {
            // Read when the last ack arrived: the watermark sinks had reached by then.
            manifest.watermark = metrics.sink_watermark();
            let totals = metrics.operator_totals();
            manifest.counters.insert(
                "late_rows_dropped".into(),
                totals.iter().map(|t| t.late_rows_dropped).sum(),
            );
            manifest.counters.insert(
                "windows_emitted".into(),
                totals.iter().map(|t| t.windows_emitted).sum(),
            );
            manifest.counters.insert(
                "records_skipped".into(),
                totals.iter().map(|t| t.records_skipped).sum(),
            );
        }
        manifest.written_at_ms = now_ms();
        self.store.prepare(&manifest).await?;
        self.store.commit(&manifest).await?;
        self.store.flip_latest(pending.epoch).await?;
        self.collect_garbage().await
    }

    async fn collect_garbage(&self) -> Result<(), StateError> {
        let findings = self.store.findings(false).await?;
        for epoch in plan_gc(&findings, self.config.retain) {
            self.store.delete_epoch(epoch).await?;
        }
        Ok(())
    }
}
