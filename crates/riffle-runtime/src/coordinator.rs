//! The checkpoint coordinator: triggers epochs, collects every task's snapshot, uploads
//! the state as Parquet while the job runs on, and commits (DESIGN §4).
//!
//! ```text
//!  every interval: inject Barrier(N) at sources ──▶ tasks align, snapshot, pre-commit, ack
//!  acks ──▶ upload state files ──▶ all acked? ──▶ fencing check ──▶ manifest PREPARED
//!        ──▶ sinks commit ──▶ COMMITTED ──▶ _latest.json ──▶ GC keeps the newest K
//! ```
//!
//! A bounded run ends with an end-of-input epoch: once every source subtask ran dry it
//! waits for that barrier, which commits all remaining output. An epoch that does not
//! complete within the timeout is abandoned (its files stay as a partial epoch, swept by
//! the next recovery); more than `tolerable_failures` failed epochs in a row fail the job.

use crate::checkpoint_events::{CheckpointEvent, CheckpointListener};
use crate::crash::{maybe_crash, maybe_pause, CrashPoint};
use crate::file_reuse::ReuseCache;
use crate::job::{BarrierInjector, JobStopper, SnapshotAck};
use crate::savepoint::{SavepointDone, SavepointRequest, SavepointRequests};
use riffle_core::{
    Barrier, BarrierKind, Committable, CounterValues, Epoch, OperatorId, SinkFactory,
};
use riffle_state::manifest::SubtaskEntry;
use riffle_state::recovery::{plan_gc, referenced_files};
use riffle_state::{CheckpointStore, Manifest};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc::UnboundedReceiver;

mod epoch_files;
mod savepoints;
use savepoints::PendingSavepoint;

/// How often and how checkpoints are taken.
#[derive(Debug, Clone)]
pub struct CheckpointConfig {
    /// Time between two epochs' triggers.
    pub interval: Duration,
    /// Least time between one epoch's completion and the next trigger.
    pub min_pause: Duration,
    /// An epoch not complete after this long is abandoned.
    pub timeout: Duration,
    /// Failed epochs in a row the job tolerates; one more fails it.
    pub tolerable_failures: usize,
    /// Committed epochs to keep.
    pub retain: usize,
    /// This run's generation (fencing).
    pub generation: u64,
    /// The first epoch this run takes (one past every existing epoch).
    pub first_epoch: Epoch,
}

impl Default for CheckpointConfig {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(10),
            min_pause: Duration::ZERO,
            timeout: Duration::from_secs(60),
            tolerable_failures: 3,
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
    /// Epochs abandoned (timeout, failure, or the job ended first).
    pub abandoned: Vec<Epoch>,
    /// Time from trigger to COMMITTED, per committed epoch.
    pub durations: Vec<Duration>,
    /// State bytes written per committed epoch.
    pub bytes: Vec<u64>,
    /// Longest barrier alignment seen per committed epoch.
    pub alignment: Vec<Duration>,
    /// Longest synchronous snapshot (the task paused) per committed epoch.
    pub snapshot: Vec<Duration>,
    /// Time spent encoding and writing state files per committed epoch (the job runs on).
    pub upload: Vec<Duration>,
    /// Why epochs failed.
    pub errors: Vec<String>,
    /// The end-of-input epoch committed: all output of a bounded run is published.
    pub end_of_input_committed: bool,
    /// A stop-with-savepoint epoch committed, so the job stopped on request: the
    /// savepoint, or why promoting the committed epoch to a savepoint failed.
    pub stopped: Option<Result<SavepointDone, String>>,
}

/// Static facts the manifest needs about each stateful operator.
#[derive(Debug, Clone)]
pub struct OperatorInfo {
    /// Subtasks.
    pub parallelism: usize,
    /// Key groups.
    pub max_parallelism: u16,
    /// Unchanged state keeps its arrays across snapshots: reuse files (incremental).
    pub stable_state: bool,
    /// What the operator is, as the plan describes it (recorded in manifests).
    pub description: Option<String>,
    /// Its output columns, `name: type, …` (recorded in manifests).
    pub output_schema: Option<String>,
}

struct Pending {
    epoch: Epoch,
    kind: BarrierKind,
    triggered: Instant,
    triggered_at_ms: i64,
    acks: usize,
    files: BTreeMap<String, Vec<SubtaskEntry>>,
    committables: Vec<Committable>,
    /// Counters per operator at the barrier, summed over the acks.
    counters: BTreeMap<String, CounterValues>,
    /// Files of stable-state operators written or reused by this epoch, with their
    /// batches: the reuse candidates of the next epoch once this one commits.
    reusable: ReuseCache,
    bytes: u64,
    alignment: Duration,
    snapshot: Duration,
    upload: Duration,
    /// The savepoint this epoch was triggered for, if any.
    savepoint: Option<PendingSavepoint>,
}

/// Why an epoch did not complete, and what that means for the job.
struct Incomplete {
    reason: String,
    outcome: Outcome,
}

enum Outcome {
    /// The epoch failed; a later one may succeed.
    Retry,
    /// The decision is logged but sinks did not commit: the job must stop and recover.
    SinkCommit,
    /// A newer generation started on this state: this run must stop for good.
    Fenced { current: u64 },
}

impl Incomplete {
    fn retry(e: riffle_state::StateError) -> Self {
        Self {
            reason: e.to_string(),
            outcome: Outcome::Retry,
        }
    }

    /// A failed generation check: fenced when a newer run claimed the state, else
    /// `otherwise` (what a storage failure at this step means for the epoch).
    fn from_check(e: riffle_state::StateError, otherwise: Outcome) -> Self {
        match e {
            riffle_state::StateError::StaleGeneration { current, .. } => Self {
                reason: e.to_string(),
                outcome: Outcome::Fenced { current },
            },
            e => Self {
                reason: e.to_string(),
                outcome: otherwise,
            },
        }
    }
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
    /// Sinks by operator id, to commit their committables.
    pub sinks: HashMap<String, Arc<dyn SinkFactory>>,
    /// Tasks that must ack each epoch.
    pub task_count: usize,
    /// Source subtasks: when all reached end of input, the end-of-input epoch starts.
    pub source_subtasks: usize,
    /// The plan's fingerprint, recorded in manifests.
    pub plan_fingerprint: String,
    /// The job's live metrics (watermark and counters recorded in manifests).
    pub metrics: Option<Arc<crate::JobMetrics>>,
    /// Who hears about checkpoint events.
    pub listeners: Vec<Arc<dyn CheckpointListener>>,
}

/// Channels the coordinator reads and the job it may stop.
pub struct CoordinatorInputs {
    /// Injects barriers at the sources.
    pub injector: BarrierInjector,
    /// Snapshot acknowledgements.
    pub acks: UnboundedReceiver<SnapshotAck>,
    /// One message per source subtask that ran dry.
    pub end_of_input: Option<UnboundedReceiver<()>>,
    /// Fails the job after too many failed checkpoints.
    pub stopper: JobStopper,
    /// Savepoint requests (control endpoint, signals); held while the job runs.
    pub savepoints: Option<SavepointRequests>,
}

impl CheckpointCoordinator {
    fn emit(&self, event: CheckpointEvent) {
        for l in &self.listeners {
            l.on_event(&event);
        }
    }

    /// Triggers epochs and completes them until the ack channel closes (job ended).
    pub async fn run(self, inputs: CoordinatorInputs) -> CheckpointReport {
        let CoordinatorInputs {
            injector,
            mut acks,
            end_of_input,
            stopper,
            savepoints,
        } = inputs;
        let mut requests = match &savepoints {
            Some(r) => Some(r.lock().await),
            None => None,
        };
        // Savepoints asked for while another epoch is in flight, in order.
        let mut waiting: VecDeque<(SavepointRequest, Instant)> = VecDeque::new();
        // A stop-with-savepoint barrier went out: the sources end after it.
        let mut stopping = false;
        let mut ended_rx = end_of_input;
        let mut ended_sources = 0;
        let mut report = CheckpointReport::default();
        let mut next_epoch = self.config.first_epoch;
        let mut pending: Option<Pending> = None;
        // Sink output staged by epochs that failed: it holds rows the next epoch's state
        // has moved past, so it commits with the next epoch that completes.
        let mut carried: Vec<Committable> = Vec::new();
        let mut failures = 0usize;
        let mut last_completed: Option<Instant> = None;
        let mut end_of_input_triggered = false;
        // Files the last committed epoch wrote or reused; only those may be reused
        // (they are referenced by a retained manifest, so GC keeps them).
        let mut reuse = ReuseCache::default();
        let mut ticker = tokio::time::interval(self.config.interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        loop {
            let all_ended = ended_rx.is_some() && ended_sources >= self.source_subtasks;
            // The end-of-input epoch starts as soon as nothing else is in flight.
            let trigger_now =
                all_ended && !end_of_input_triggered && pending.is_none() && !stopping;
            let mut trigger = trigger_now;
            // A waiting savepoint goes out as soon as nothing else is in flight.
            let mut savepoint = None;
            if !trigger_now && pending.is_none() && !stopping && !end_of_input_triggered {
                savepoint = waiting.pop_front();
                trigger = savepoint.is_some();
            }
            if !trigger {
                tokio::select! {
                    _ = ticker.tick(), if !end_of_input_triggered => {
                        if let Some(p) = &pending {
                            if p.triggered.elapsed() < self.config.timeout {
                                continue; // at most one epoch in flight
                            }
                            let p = pending.take();
                            if let Some(mut p) = p {
                                carried.append(&mut p.committables);
                                let reason = format!("epoch {} timed out after {:?}", p.epoch, self.config.timeout);
                                p.savepoint_failed(&reason, &mut report);
                                stopping |= self.fail(&mut report, &mut failures, p.epoch, reason, &stopper);
                            }
                        }
                        let paused = last_completed.is_some_and(|t| t.elapsed() < self.config.min_pause);
                        trigger = !paused && !stopping;
                    }
                    request = async { match &mut requests { Some(rx) => rx.recv().await, None => std::future::pending().await } } => {
                        match request {
                            Some(request) => {
                                let finishing = stopping || end_of_input_triggered || (ended_rx.is_some() && ended_sources >= self.source_subtasks);
                                if let Some(request) = self.accept(request, finishing).await {
                                    waiting.push_back((request, Instant::now()));
                                }
                            }
                            None => requests = None,
                        }
                        continue;
                    }
                    ended = async { match &mut ended_rx { Some(rx) => rx.recv().await, None => std::future::pending().await } } => {
                        match ended {
                            Some(()) => ended_sources += 1,
                            None => ended_rx = None,
                        }
                        continue;
                    }
                    ack = acks.recv() => {
                        let Some(ack) = ack else { break };
                        let Some(p) = pending.as_mut().filter(|p| p.epoch == ack.epoch) else {
                            // A late ack of a failed epoch: its sink output is carried.
                            carried.extend(ack.committables);
                            continue;
                        };
                        let ack_task = format!("{}[{}]", ack.task, ack.subtask);
                        if let Err(e) = self.upload(p, ack, &reuse).await {
                            let epoch = p.epoch;
                            p.savepoint_failed(&e.to_string(), &mut report);
                            carried.append(&mut p.committables);
                            pending = None;
                            stopping |= self.fail(&mut report, &mut failures, epoch, e.to_string(), &stopper);
                            continue;
                        }
                        tracing::debug!(epoch = %p.epoch, acks = p.acks, task = %ack_task, "checkpoint acked");
                        self.emit(CheckpointEvent::Acked { epoch: p.epoch, acks: p.acks, tasks: self.task_count });
                        if p.acks < self.task_count {
                            continue;
                        }
                        let Some(mut done) = pending.take() else { continue };
                        maybe_crash(CrashPoint::AfterSnapshotUpload, done.epoch);
                        match self.complete(&done).await {
                            Ok(manifest) => {
                                reuse = done.reusable;
                                failures = 0;
                                last_completed = Some(Instant::now());
                                let duration = done.triggered.elapsed();
                                report.committed.push(done.epoch);
                                report.durations.push(duration);
                                report.bytes.push(done.bytes);
                                report.alignment.push(done.alignment);
                                report.snapshot.push(done.snapshot);
                                report.upload.push(done.upload);
                                if done.kind == BarrierKind::EndOfInput {
                                    report.end_of_input_committed = true;
                                }
                                self.emit(CheckpointEvent::Completed { epoch: done.epoch, duration, bytes: done.bytes, alignment: done.alignment });
                                // A savepoint's epoch is committed: copy it out.
                                if let Some(sp) = done.savepoint.take() {
                                    let stop = sp.request.stop;
                                    let answer = self.promote(&manifest, &sp.label, sp.requested, stop).await;
                                    if let Err(e) = &answer {
                                        report.errors.push(e.clone());
                                    }
                                    if stop {
                                        report.stopped = Some(answer.clone());
                                    }
                                    let _ = sp.request.reply.send(answer);
                                }
                            }
                            Err(Incomplete { reason, outcome: Outcome::Retry }) => {
                                done.savepoint_failed(&reason, &mut report);
                                carried.append(&mut done.committables);
                                stopping |= self.fail(&mut report, &mut failures, done.epoch, reason, &stopper);
                            }
                            Err(Incomplete { reason, outcome }) => {
                                done.savepoint_failed(&reason, &mut report);
                                report.abandoned.push(done.epoch);
                                report.errors.push(format!("epoch {}: {reason}", done.epoch));
                                let error = match outcome {
                                    // Must not restart: a newer run owns the state.
                                    Outcome::Fenced { current } => crate::RuntimeError::Fenced { generation: self.config.generation, current },
                                    // Sinks of a logged decision must commit before any
                                    // later epoch; only recovery's roll forward can now.
                                    Outcome::SinkCommit | Outcome::Retry => crate::RuntimeError::Checkpoint(format!("epoch {} is PREPARED but its sinks could not commit: {reason}; restart to roll it forward", done.epoch)),
                                };
                                // Listeners hear of a fatal failure too, not only of retried ones.
                                self.emit(CheckpointEvent::Failed {
                                    epoch: done.epoch,
                                    reason: error.to_string(),
                                    consecutive: failures + 1,
                                });
                                stopper.fail_with(error);
                                stopping = true;
                            }
                        }
                        continue;
                    }
                }
            }
            if trigger {
                let end = all_ended && !end_of_input_triggered && savepoint.is_none();
                let kind = if end {
                    end_of_input_triggered = true;
                    BarrierKind::EndOfInput
                } else {
                    match &savepoint {
                        Some((r, _)) if r.stop => {
                            stopping = true;
                            BarrierKind::StopWithSavepoint { drain: r.drain }
                        }
                        Some(_) => BarrierKind::Savepoint,
                        None => BarrierKind::Checkpoint,
                    }
                };
                let epoch = next_epoch;
                next_epoch = Epoch(epoch.0 + 1);
                pending = Some(Pending {
                    epoch,
                    kind,
                    triggered: Instant::now(),
                    triggered_at_ms: now_ms(),
                    acks: 0,
                    files: BTreeMap::new(),
                    committables: std::mem::take(&mut carried),
                    counters: BTreeMap::new(),
                    reusable: ReuseCache::default(),
                    bytes: 0,
                    alignment: Duration::ZERO,
                    snapshot: Duration::ZERO,
                    upload: Duration::ZERO,
                    savepoint: savepoint.map(|(request, requested)| PendingSavepoint {
                        label: request
                            .label
                            .clone()
                            .unwrap_or_else(|| format!("sp-{:06}", epoch.0)),
                        request,
                        requested,
                    }),
                });
                tracing::debug!(%epoch, ?kind, "checkpoint triggered");
                self.emit(CheckpointEvent::Started {
                    epoch,
                    end_of_input: end,
                });
                injector.inject(Barrier { epoch, kind });
            }
        }
        if let Some(p) = pending {
            report.abandoned.push(p.epoch);
        }
        report
    }

    /// Records a failed epoch; fails the job (and returns true, so nothing more is
    /// triggered) once more epochs failed in a row than are tolerable.
    fn fail(
        &self,
        report: &mut CheckpointReport,
        failures: &mut usize,
        epoch: Epoch,
        reason: String,
        stopper: &JobStopper,
    ) -> bool {
        *failures += 1;
        tracing::warn!(%epoch, %reason, consecutive = *failures, "checkpoint failed");
        report.abandoned.push(epoch);
        report.errors.push(format!("epoch {epoch}: {reason}"));
        self.emit(CheckpointEvent::Failed {
            epoch,
            reason: reason.clone(),
            consecutive: *failures,
        });
        if *failures > self.config.tolerable_failures {
            stopper.fail(format!(
                "{} checkpoints failed in a row (tolerable: {}); the last: epoch {epoch}: {reason}",
                *failures, self.config.tolerable_failures
            ));
            return true;
        }
        false
    }

    /// PREPARED → sink commit → COMMITTED → `_latest.json` → GC, with crash points.
    /// Returns the committed manifest.
    async fn complete(&self, pending: &Pending) -> Result<Manifest, Incomplete> {
        // Fencing (docs/engine.md): the newest claim is read right before each step
        // that cannot be taken back. Before PREPARED a failed read only fails the epoch.
        let generation = self.config.generation;
        self.store
            .check_generation(generation, pending.epoch)
            .await
            .map_err(|e| Incomplete::from_check(e, Outcome::Retry))?;
        maybe_pause("after-generation-check", pending.epoch).await;
        let manifest = self.manifest(pending);
        self.store
            .prepare(&manifest)
            .await
            .map_err(Incomplete::retry)?;
        maybe_crash(CrashPoint::AfterManifestPrepared, pending.epoch);
        // A newer run that claimed the state after this check lists checkpoints after
        // its claim, so it sees this PREPARED manifest and rolls it forward itself; one
        // that claimed before it is seen here, and this run publishes nothing.
        self.store
            .check_generation(generation, pending.epoch)
            .await
            .map_err(|e| Incomplete::from_check(e, Outcome::SinkCommit))?;
        maybe_pause("after-prepared-check", pending.epoch).await;
        // Sink commits do blocking I/O (renames, fsync): off the worker threads.
        let sinks = self.sinks.clone();
        let committables = manifest.sink_committables.clone();
        let committed = tokio::task::spawn_blocking(move || {
            for c in &committables {
                match sinks.get(&c.sink) {
                    Some(sink) => sink.commit(c).map_err(|e| {
                        format!("committing sink `{}` subtask {}: {e}", c.sink, c.subtask)
                    })?,
                    None => return Err(format!("no sink `{}` to commit", c.sink)),
                }
            }
            Ok(())
        })
        .await
        .unwrap_or_else(|e| Err(format!("sink commit stopped: {e}")));
        committed.map_err(|reason| Incomplete {
            reason,
            outcome: Outcome::SinkCommit,
        })?;
        maybe_crash(CrashPoint::AfterSinkCommit, pending.epoch);
        // From here on the output is published: a storage failure leaves a PREPARED
        // manifest that the next epoch or recovery supersedes. A newer run may already
        // have rolled this epoch forward and collected it: then writing COMMITTED would
        // bring back a manifest whose files are gone.
        self.store
            .check_generation(generation, pending.epoch)
            .await
            .map_err(|e| Incomplete::from_check(e, Outcome::SinkCommit))?;
        self.store
            .commit(&manifest)
            .await
            .map_err(Incomplete::retry)?;
        maybe_crash(CrashPoint::AfterManifestCommitted, pending.epoch);
        self.store
            .flip_latest(pending.epoch)
            .await
            .map_err(Incomplete::retry)?;
        maybe_crash(CrashPoint::AfterLatestFlip, pending.epoch);
        // Completion notification: sources may now commit offsets externally.
        if let Some(metrics) = &self.metrics {
            metrics
                .completed_epoch
                .fetch_max(pending.epoch.0, std::sync::atomic::Ordering::Release);
        }
        // Garbage collection is the newest generation's job only.
        self.store
            .check_generation(generation, pending.epoch)
            .await
            .map_err(|e| Incomplete::from_check(e, Outcome::Retry))?;
        self.collect_garbage().await.map_err(Incomplete::retry)?;
        Ok(manifest)
    }

    async fn collect_garbage(&self) -> Result<(), riffle_state::StateError> {
        let findings = self.store.findings(false).await?;
        let deleting = plan_gc(&findings, self.config.retain);
        let keep = referenced_files(&findings, &deleting);
        for epoch in deleting {
            self.store.delete_epoch(epoch, &keep).await?;
        }
        Ok(())
    }
}
