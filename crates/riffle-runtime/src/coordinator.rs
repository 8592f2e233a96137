//! The checkpoint coordinator: triggers epochs, collects every task's snapshot, uploads
//! the state as Parquet while the job runs on, and commits (docs/state-format.md, "The commit protocol of one epoch").
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

use crate::checkpoint_events::{
    CheckpointEvent, CheckpointListener, EpochRequests, OperatorStateSize, SubtaskTiming,
};
use crate::crash::{maybe_crash, CrashPoint};
use crate::file_reuse::FileReuse;
use crate::handle::{BarrierInjector, JobStopper};
use crate::protocol::SnapshotAck;
use crate::protocol::TaskSignal;
use crate::savepoint::{SavepointDone, SavepointRequest, SavepointRequests};
use riffle_core::{
    Barrier, BarrierKind, Committable, CounterValues, Epoch, OperatorId, SinkFactory,
};
use riffle_state::manifest::SubtaskEntry;
use riffle_state::{CheckpointStore, Manifest};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc::UnboundedReceiver;

pub mod commit;
mod epoch_files;
pub mod grouping;
mod savepoints;
pub mod schedule;
use commit::{EpochCommitter, EpochIncomplete, EpochOutcome, SinkCommits};
use savepoints::PendingSavepoint;
use schedule::{Acked, Failed, Schedule, ScheduleConfig, Start, WaitingSavepoint};

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
    /// The identity of the pipeline's state, recorded in manifests (`Manifest::state_id`).
    pub state_id: Option<String>,
    /// The first epoch of the state's history, recorded in manifests
    /// (`Manifest::history_from`).
    pub history_from: Option<Epoch>,
    /// Epochs of that history whose output was taken back (`Manifest::taken_back`).
    pub taken_back: Vec<Epoch>,
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
            state_id: None,
            history_from: None,
            taken_back: Vec::new(),
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
    /// The commit protocol's steps (PREPARED through GC, sinks publishing) per
    /// committed epoch.
    pub commit: Vec<Duration>,
    /// Object-store requests per committed epoch, by phase.
    pub requests: Vec<EpochRequests>,
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

/// The coordinator's file reuse: what it wrote, and the last epoch it committed, whose
/// files the next epoch's snapshots may reference (when it is the epoch before).
struct LastCommittedReuse {
    files: FileReuse,
    committed: Option<Epoch>,
}

struct Pending {
    epoch: Epoch,
    kind: BarrierKind,
    triggered: Instant,
    triggered_at_ms: i64,
    files: BTreeMap<String, Vec<SubtaskEntry>>,
    /// Counters per operator at the barrier, summed over the acks.
    counters: BTreeMap<String, CounterValues>,
    bytes: u64,
    alignment: Duration,
    snapshot: Duration,
    upload: Duration,
    /// The savepoint this epoch was triggered for, if any.
    savepoint: Option<PendingSavepoint>,
    /// The store's request counts when the epoch was triggered.
    requests_at_trigger: riffle_state::RequestTally,
    /// Each acked task's times and bytes.
    timings: Vec<SubtaskTiming>,
}

/// How many committables of each sink `manifest` commits.
fn commits_per_sink(manifest: &Manifest) -> Vec<(String, u64)> {
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for c in &manifest.sink_committables {
        *counts.entry(c.sink.clone()).or_default() += 1;
    }
    counts.into_iter().collect()
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
    /// Where `store` counts its requests (see [`CheckpointStore::counted`]).
    pub requests: Arc<riffle_state::RequestCounts>,
}

/// Channels the coordinator reads and the job it may stop.
pub struct CoordinatorInputs {
    /// Injects barriers at the sources.
    pub injector: BarrierInjector,
    /// Snapshot acknowledgements.
    pub acks: UnboundedReceiver<SnapshotAck>,
    /// What tasks tell: each that it restored, each source subtask that ran dry.
    pub task_signals: Option<UnboundedReceiver<TaskSignal>>,
    /// Fails the job after too many failed checkpoints.
    pub stopper: JobStopper,
    /// Savepoint requests (control endpoint, signals); held while the job runs.
    pub savepoints: Option<SavepointRequests>,
    /// The chains this process's subtasks continue from the restored checkpoint.
    pub restored_chains: Option<crate::restored_chains::RestoredChains>,
}

impl CheckpointCoordinator {
    fn emit(&self, event: CheckpointEvent) {
        for l in &self.listeners {
            l.on_event(&event);
        }
    }

    /// Starts epochs and completes them until the ack channel closes (job ended). The
    /// decisions are the [`Schedule`]'s; this loop waits for events, does the I/O and
    /// reports.
    pub async fn run(self, inputs: CoordinatorInputs) -> CheckpointReport {
        let CoordinatorInputs {
            injector,
            mut acks,
            task_signals,
            stopper,
            savepoints,
            restored_chains,
        } = inputs;
        let mut requests = match &savepoints {
            Some(r) => Some(r.lock().await),
            None => None,
        };
        let mut signals_rx = task_signals;
        let mut schedule: Schedule<(SavepointRequest, Instant)> = Schedule::new(
            ScheduleConfig {
                timeout: self.config.timeout,
                min_pause: self.config.min_pause,
                tolerable_failures: self.config.tolerable_failures,
                task_count: self.task_count,
                source_subtasks: self.source_subtasks,
                first_epoch: self.config.first_epoch,
            },
            signals_rx.is_some(),
        );
        let mut report = CheckpointReport::default();
        let mut pending: Option<Pending> = None;
        // Files of stable-state operators' snapshots; only the last committed epoch's
        // may be reused (a retained manifest references them, so GC keeps them).
        // The restored epoch is committed: chains continued from its files reference
        // them (`FileReuse::continuing`).
        let files = FileReuse::for_operators(
            (self.operators.iter())
                .filter(|(_, info)| info.stable_state)
                .map(|(id, _)| id.0.clone()),
        )
        .continuing(restored_chains);
        let mut reuse = LastCommittedReuse {
            committed: files.committed_or_restored(None),
            files,
        };
        let mut ticker = tokio::time::interval(self.config.interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        loop {
            let start = match schedule.start_now(Instant::now()) {
                Some(start) => Some(start),
                None => tokio::select! {
                    _ = ticker.tick(), if schedule.ticking() => {
                        let tick = schedule.tick(Instant::now());
                        if let Some((epoch, failed)) = tick.timed_out {
                            let reason = format!("epoch {epoch} timed out after {:?}", self.config.timeout);
                            if let Some(mut p) = pending.take() {
                                p.savepoint_failed(&reason, &mut report);
                            }
                            self.failed(&mut report, epoch, reason, failed, &stopper);
                        }
                        tick.start
                    }
                    request = async { match &mut requests { Some(rx) => rx.recv().await, None => std::future::pending().await } } => {
                        match request {
                            Some(request) => {
                                if let Some(request) = self.accept(request, schedule.finishing()).await {
                                    schedule.savepoint_requested(WaitingSavepoint {
                                        stop: request.stop,
                                        drain: request.drain,
                                        request: (request, Instant::now()),
                                    });
                                }
                            }
                            None => requests = None,
                        }
                        None
                    }
                    signal = async { match &mut signals_rx { Some(rx) => rx.recv().await, None => std::future::pending().await } } => {
                        match signal {
                            Some(TaskSignal::Restored) => schedule.task_restored(),
                            Some(TaskSignal::InputEnded) => schedule.source_ended(),
                            None => {
                                signals_rx = None;
                                schedule.tasks_stopped_reporting();
                            }
                        }
                        None
                    }
                    ack = acks.recv() => {
                        let Some(ack) = ack else { break };
                        self.on_ack(ack, &mut schedule, &mut pending, &mut reuse, &mut report, &stopper).await;
                        None
                    }
                },
            };
            if let Some(start) = start {
                pending = Some(self.start(start, &injector));
            }
        }
        if let Some(epoch) = schedule.abandon() {
            report.abandoned.push(epoch);
        }
        report
    }

    /// Injects the barrier of an epoch the schedule started; returns what the epoch
    /// gathers while its acks come in.
    fn start(
        &self,
        start: Start<(SavepointRequest, Instant)>,
        injector: &BarrierInjector,
    ) -> Pending {
        let Start {
            epoch,
            kind,
            savepoint,
        } = start;
        tracing::debug!(%epoch, ?kind, "checkpoint triggered");
        self.emit(CheckpointEvent::Started {
            epoch,
            end_of_input: kind == BarrierKind::EndOfInput,
        });
        injector.inject(Barrier { epoch, kind });
        Pending {
            epoch,
            kind,
            triggered: Instant::now(),
            triggered_at_ms: now_ms(),
            files: BTreeMap::new(),
            counters: BTreeMap::new(),
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
            requests_at_trigger: self.requests.tally(),
            timings: Vec::new(),
        }
    }

    /// One task's snapshot of an epoch: its state is written; once every task acked,
    /// the epoch completes.
    async fn on_ack(
        &self,
        ack: SnapshotAck,
        schedule: &mut Schedule<(SavepointRequest, Instant)>,
        pending: &mut Option<Pending>,
        reuse: &mut LastCommittedReuse,
        report: &mut CheckpointReport,
        stopper: &JobStopper,
    ) {
        let epoch = ack.epoch;
        let ack_task = format!("{}[{}]", ack.task, ack.subtask);
        let mut ack = ack;
        let committables = std::mem::take(&mut ack.committables);
        let acked = schedule.ack(epoch, committables);
        let acks = match acked {
            Acked::Late => return,
            Acked::Waiting { acks } | Acked::All { acks } => acks,
        };
        let Some(p) = pending.as_mut().filter(|p| p.epoch == epoch) else {
            return;
        };
        if let Err(e) = self.upload(p, ack, reuse).await {
            if let Some(mut p) = pending.take() {
                p.savepoint_failed(&e.to_string(), report);
            }
            let failed = schedule.epoch_failed();
            self.failed(report, epoch, e.to_string(), failed, stopper);
            return;
        }
        tracing::debug!(%epoch, acks, task = %ack_task, "checkpoint acked");
        self.emit(CheckpointEvent::Acked {
            epoch,
            acks,
            tasks: self.task_count,
        });
        if !matches!(acked, Acked::All { .. }) {
            return;
        }
        let Some(mut done) = pending.take() else {
            return;
        };
        maybe_crash(CrashPoint::AfterSnapshotUpload, done.epoch);
        let committing = Instant::now();
        match self
            .complete(&done, schedule.held(), schedule.committables())
            .await
        {
            Ok((manifest, requests)) => {
                let commit = committing.elapsed();
                schedule.completed(Instant::now(), manifest.held_committables.clone());
                reuse.files.forget_before(done.epoch);
                reuse.committed = Some(done.epoch);
                self.committed(done, (&manifest, requests, commit), report)
                    .await;
            }
            Err(incomplete) => {
                // Committed but for the garbage collection: later snapshots reference
                // its files, as its operators, told it committed, expect.
                if incomplete.committed() {
                    reuse.files.forget_before(done.epoch);
                    reuse.committed = Some(done.epoch);
                }
                let EpochIncomplete {
                    reason, outcome, ..
                } = incomplete;
                done.savepoint_failed(&reason, report);
                let failed = schedule.commit_failed(outcome);
                self.commit_failed(done.epoch, (reason, outcome, failed), report, stopper);
            }
        }
    }

    /// An epoch committed: reported, heard by listeners, and promoted to the savepoint
    /// it was taken for.
    async fn committed(
        &self,
        mut done: Pending,
        (manifest, requests, commit): (&Manifest, EpochRequests, Duration),
        report: &mut CheckpointReport,
    ) {
        let duration = done.triggered.elapsed();
        report.committed.push(done.epoch);
        report.durations.push(duration);
        report.bytes.push(done.bytes);
        report.alignment.push(done.alignment);
        report.snapshot.push(done.snapshot);
        report.upload.push(done.upload);
        report.commit.push(commit);
        report.requests.push(requests);
        if done.kind == BarrierKind::EndOfInput {
            report.end_of_input_committed = true;
        }
        self.emit(CheckpointEvent::Completed {
            epoch: done.epoch,
            duration,
            bytes: done.bytes,
            alignment: done.alignment,
            snapshot: done.snapshot,
            upload: done.upload,
            commit,
            state: OperatorStateSize::of(manifest),
            requests: Box::new(requests),
            sink_commits: commits_per_sink(manifest),
            subtasks: std::mem::take(&mut done.timings),
        });
        // A savepoint's epoch is committed: copy it out.
        if let Some(sp) = done.savepoint.take() {
            let stop = sp.request.stop;
            let answer = self.promote(manifest, &sp.label, sp.requested, stop).await;
            if let Err(e) = &answer {
                report.errors.push(e.clone());
            }
            if stop {
                report.stopped = Some(answer.clone());
            }
            let _ = sp.request.reply.send(answer);
        }
    }

    /// An epoch's commit failed: retried with a later epoch, or, when the run must not
    /// go on (fenced) or only recovery can finish it (PREPARED), the job fails.
    fn commit_failed(
        &self,
        epoch: Epoch,
        (reason, outcome, failed): (String, EpochOutcome, Failed),
        report: &mut CheckpointReport,
        stopper: &JobStopper,
    ) {
        let error = match outcome {
            EpochOutcome::Retry => {
                self.failed(report, epoch, reason, failed, stopper);
                return;
            }
            // Must not restart: a newer run owns the state.
            EpochOutcome::Fenced { current } => crate::RuntimeError::Fenced {
                generation: self.config.generation,
                current,
            },
            // Sinks of a logged decision must commit before any later epoch;
            // only recovery's roll forward can now.
            EpochOutcome::MustRecover => crate::RuntimeError::transient(format!(
                "epoch {epoch} is PREPARED but its sinks could not commit: {reason}; restart to roll it forward"
            )),
        };
        report.abandoned.push(epoch);
        report.errors.push(format!("epoch {epoch}: {reason}"));
        // Listeners hear of a fatal failure too, not only of retried ones.
        let consecutive = match failed {
            Failed::Tolerated { consecutive } | Failed::FailJob { consecutive } => consecutive,
        };
        self.emit(CheckpointEvent::Failed {
            epoch,
            reason: error.to_string(),
            consecutive,
        });
        stopper.fail_with(error);
    }

    /// Records a failed epoch; fails the job once the schedule says so.
    fn failed(
        &self,
        report: &mut CheckpointReport,
        epoch: Epoch,
        reason: String,
        failed: Failed,
        stopper: &JobStopper,
    ) {
        let (consecutive, fail_job) = match failed {
            Failed::Tolerated { consecutive } => (consecutive, false),
            Failed::FailJob { consecutive } => (consecutive, true),
        };
        tracing::warn!(%epoch, %reason, consecutive, "checkpoint failed");
        report.abandoned.push(epoch);
        report.errors.push(format!("epoch {epoch}: {reason}"));
        self.emit(CheckpointEvent::Failed {
            epoch,
            reason: reason.clone(),
            consecutive,
        });
        if fail_job {
            stopper.fail(format!(
                "{consecutive} checkpoints failed in a row (tolerable: {}); the last: epoch {epoch}: {reason}",
                self.config.tolerable_failures
            ));
        }
    }

    /// Takes the commit protocol's steps for `pending` (see [`commit`]), publishing
    /// what earlier epochs `held` and it `staged` as far as the sinks' epochs per
    /// commit say (see [`grouping`]); returns the committed manifest.
    async fn complete(
        &self,
        pending: &Pending,
        held: &[Committable],
        staged: &[Committable],
    ) -> Result<(Manifest, EpochRequests), EpochIncomplete> {
        let publication =
            grouping::split_publication(held, staged, pending.epoch, pending.kind, |sink| {
                self.sinks
                    .get(sink)
                    .filter(|f| f.commit_outlives_process())
                    .map_or(1, |f| f.epochs_per_commit())
            });
        let mut manifest = self.manifest(pending, &publication.publish);
        manifest.held_committables = publication.hold;
        let committing = self.requests.tally();
        let upload = committing.since(pending.requests_at_trigger);
        manifest.requests = Some(upload);
        let committer = EpochCommitter {
            store: &self.store,
            sinks: &self.sinks,
            retain: self.config.retain,
            sink_commits: SinkCommits::Blocking,
            deadline: Some(pending.triggered + self.config.timeout),
            requests: Some((&self.requests, std::sync::Mutex::new(None))),
        };
        let committed = committer.commit_epoch(&manifest).await;
        let end = self.requests.tally();
        let before_gc = committer.requests_before_gc().unwrap_or(end);
        let requests = EpochRequests {
            upload,
            commit: before_gc.since(committing),
            gc: end.since(before_gc),
        };
        // Completion notification: sources may now commit offsets externally (also
        // when only the GC after `_latest.json` failed: the epoch is committed).
        let done = committed
            .as_ref()
            .map_or_else(EpochIncomplete::committed, |()| true);
        if let (true, Some(metrics)) = (done, &self.metrics) {
            metrics.checkpoint_completed(pending.epoch);
        }
        committed.map(|()| (manifest, requests))
    }
}
