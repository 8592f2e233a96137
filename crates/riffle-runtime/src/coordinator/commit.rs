//! Completing one epoch: the commit protocol's steps in order, what a failure at each
//! step means for the epoch (pure, [`CommitStep::on_failure`]), and the driver that
//! takes the steps against storage and sinks ([`commit_epoch`]).
//!
//! ```text
//!  check ─▶ PREPARED ─▶ check ─▶ sinks commit ─▶ check ─▶ COMMITTED ─▶ _latest ─▶ GC (list, check, delete)
//!  │        │           │        │               │        │             │          │
//!  retry    retry       recover  recover         recover  retry         retry      retry
//! ```
//!
//! (Each `check` reads the newest generation claim; a newer one fences this run at any
//! of them, docs/engine.md "Fencing".) Once PREPARED is written the commit is decided:
//! from then until COMMITTED, a failure must not let the job take another epoch, since
//! only recovery's roll forward can publish the decided output in order. After
//! COMMITTED the output is out, and a failure only costs the epoch its bookkeeping.
//!
//! The driver is also what the commit-protocol simulation runs
//! (`tests/simulation.rs`), so that the steps it interleaves are the real ones.

use crate::crash::{maybe_crash, maybe_pause, CrashPoint};
use riffle_core::{committables_by_sink, Committable, Epoch, SinkFactory};
use riffle_state::recovery::{plan_gc, referenced_files};
use riffle_state::{CheckpointStore, Manifest, RequestCounts, RequestTally, StateError};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// One step of completing an epoch, in protocol order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitStep {
    /// No newer run may have claimed the state before the decision is logged.
    CheckBeforePrepare,
    /// The manifest is written PREPARED by conditional create: the commit decision.
    Prepare,
    /// No newer run before output becomes visible.
    CheckBeforePublish,
    /// Every sink publishes what it staged (idempotent).
    PublishSinks,
    /// No newer run before the manifest says COMMITTED (a newer run may have rolled
    /// this epoch forward and collected it already).
    CheckBeforeCommitted,
    /// The manifest is rewritten COMMITTED.
    WriteCommitted,
    /// `_latest.json` points at the epoch (a hint).
    FlipLatest,
    /// Epochs beyond the retained ones are deleted: GC lists the checkpoints, then
    /// checks that no newer run has claimed the state, then deletes what the listing
    /// showed. In that order a run deletes nothing a newer one wrote: whatever a newer
    /// run wrote before the listing, it wrote after its claim, which the check then
    /// sees; and what it writes later lies in epochs past every one listed.
    CollectGarbage,
}

/// What went wrong at a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepFailure {
    /// A newer generation claimed the state.
    Fenced {
        /// The newest claim.
        current: u64,
    },
    /// Storage or a sink failed (the step may or may not have taken effect).
    Failed,
}

/// What an epoch that did not complete means for the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EpochOutcome {
    /// The epoch failed; its sink output is carried to the next epoch, which may
    /// succeed.
    Retry,
    /// The decision is logged (PREPARED) but not all output is published: the run must
    /// stop and let recovery roll the epoch forward before any later epoch.
    MustRecover,
    /// A newer run owns the state: this run stops for good and never restarts.
    Fenced {
        /// The newest claim.
        current: u64,
    },
}

impl CommitStep {
    /// Every step, in the order [`commit_epoch`] takes them.
    pub const ORDER: [CommitStep; 8] = [
        CommitStep::CheckBeforePrepare,
        CommitStep::Prepare,
        CommitStep::CheckBeforePublish,
        CommitStep::PublishSinks,
        CommitStep::CheckBeforeCommitted,
        CommitStep::WriteCommitted,
        CommitStep::FlipLatest,
        CommitStep::CollectGarbage,
    ];

    /// The step after this one, or `None` when the epoch is complete.
    pub fn next(self) -> Option<CommitStep> {
        let at = Self::ORDER.iter().position(|s| *s == self)?;
        Self::ORDER.get(at + 1).copied()
    }

    /// Whether this step comes after `other` in [`ORDER`](Self::ORDER).
    pub fn follows(self, other: CommitStep) -> bool {
        let at = |s: CommitStep| Self::ORDER.iter().position(|o| *o == s);
        at(self) > at(other)
    }

    /// What a failure of this step means for the epoch. Fencing stops the run at any
    /// step. Otherwise: before the decision is logged (and at the decision itself,
    /// which the next epoch's manifest supersedes) the epoch is retried; between the
    /// decision and COMMITTED only recovery may go on; after COMMITTED the output is
    /// published and the next epoch simply goes ahead.
    pub fn on_failure(self, failure: StepFailure) -> EpochOutcome {
        if let StepFailure::Fenced { current } = failure {
            return EpochOutcome::Fenced { current };
        }
        match self {
            CommitStep::CheckBeforePrepare | CommitStep::Prepare => EpochOutcome::Retry,
            CommitStep::CheckBeforePublish
            | CommitStep::PublishSinks
            | CommitStep::CheckBeforeCommitted => EpochOutcome::MustRecover,
            CommitStep::WriteCommitted | CommitStep::FlipLatest | CommitStep::CollectGarbage => {
                EpochOutcome::Retry
            }
        }
    }

    /// Whether the epoch's deadline (`--checkpoint-timeout` after its trigger) cuts this
    /// step off. Every step but the sink commit: sinks commit on the blocking pool,
    /// where an abandoned commit would go on and race recovery's roll forward of the
    /// same epoch; sinks bound their own requests instead.
    pub fn has_deadline(self) -> bool {
        self != CommitStep::PublishSinks
    }

    /// The crash point reached when this step has succeeded, if any.
    fn crash_point(self) -> Option<CrashPoint> {
        match self {
            CommitStep::Prepare => Some(CrashPoint::AfterManifestPrepared),
            CommitStep::PublishSinks => Some(CrashPoint::AfterSinkCommit),
            CommitStep::WriteCommitted => Some(CrashPoint::AfterManifestCommitted),
            CommitStep::FlipLatest => Some(CrashPoint::AfterLatestFlip),
            _ => None,
        }
    }

    /// The `RIFFLE_PAUSE_AT` name of the moment right after this step, if tests pause
    /// there.
    fn pause_point(self) -> Option<&'static str> {
        match self {
            CommitStep::CheckBeforePrepare => Some("after-generation-check"),
            CommitStep::CheckBeforePublish => Some("after-prepared-check"),
            _ => None,
        }
    }
}

/// An epoch that did not complete: at which step, why, and what it means.
#[derive(Debug, Clone)]
pub struct EpochIncomplete {
    /// The step that failed.
    pub step: CommitStep,
    /// What the run does now.
    pub outcome: EpochOutcome,
    /// The failure, for messages.
    pub reason: String,
}

impl EpochIncomplete {
    /// Whether the epoch committed all the same: only the garbage collection after
    /// `_latest.json` failed.
    pub fn committed(&self) -> bool {
        self.step.follows(CommitStep::FlipLatest)
    }
}

/// Where sink commits run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkCommits {
    /// On the blocking pool: they rename files and fsync (the running job).
    Blocking,
    /// On the calling task, after one yield to the executor: the simulation, which
    /// polls tasks itself and interleaves them at every point they yield.
    Inline,
}

/// What [`commit_epoch`] needs besides the manifest.
pub struct EpochCommitter<'a> {
    /// The pipeline's checkpoints.
    pub store: &'a CheckpointStore,
    /// Sinks by operator id.
    pub sinks: &'a HashMap<String, Arc<dyn SinkFactory>>,
    /// Committed epochs GC keeps.
    pub retain: usize,
    /// Where sink commits run.
    pub sink_commits: SinkCommits,
    /// When the epoch times out (its trigger plus `--checkpoint-timeout`): a step
    /// still running then fails, as far as [`CommitStep::has_deadline`] allows.
    pub deadline: Option<std::time::Instant>,
    /// Where the store counts its requests, and their tally when garbage collection
    /// started (set by [`commit_epoch`](Self::commit_epoch)), so that GC's requests
    /// can be told from the commit's.
    pub requests: Option<(&'a RequestCounts, std::sync::Mutex<Option<RequestTally>>)>,
}

impl EpochCommitter<'_> {
    /// The request tally when garbage collection started, if it did.
    pub fn requests_before_gc(&self) -> Option<RequestTally> {
        let (_, mark) = self.requests.as_ref()?;
        *mark.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes every [`CommitStep`] for `manifest` (PREPARED, of this run's generation),
    /// stopping at the first that fails.
    ///
    /// # Errors
    /// The step that failed and what its failure means ([`CommitStep::on_failure`]).
    pub async fn commit_epoch(&self, manifest: &Manifest) -> Result<(), EpochIncomplete> {
        let mut step = Some(CommitStep::CheckBeforePrepare);
        while let Some(now) = step {
            if let (CommitStep::CollectGarbage, Some((counts, mark))) = (now, &self.requests) {
                *mark.lock().unwrap_or_else(|e| e.into_inner()) = Some(counts.tally());
            }
            let taken = match self.deadline.filter(|_| now.has_deadline()) {
                Some(deadline) => {
                    let deadline = tokio::time::Instant::from_std(deadline);
                    tokio::time::timeout_at(deadline, self.take(now, manifest))
                        .await
                        .unwrap_or_else(|_| {
                            Err((
                                StepFailure::Failed,
                                format!(
                                    "epoch {}: {now:?} did not finish within the checkpoint timeout",
                                    manifest.epoch
                                ),
                            ))
                        })
                }
                None => self.take(now, manifest).await,
            };
            if let Err((failure, reason)) = taken {
                return Err(EpochIncomplete {
                    step: now,
                    outcome: now.on_failure(failure),
                    reason,
                });
            }
            if let Some(point) = now.crash_point() {
                maybe_crash(point, manifest.epoch);
            }
            if let Some(pause) = now.pause_point() {
                maybe_pause(pause, manifest.epoch).await;
            }
            step = now.next();
        }
        Ok(())
    }

    async fn take(
        &self,
        step: CommitStep,
        manifest: &Manifest,
    ) -> Result<(), (StepFailure, String)> {
        let storage = |e: StateError| match e {
            StateError::StaleGeneration { current, .. } => {
                (StepFailure::Fenced { current }, e.to_string())
            }
            e => (StepFailure::Failed, e.to_string()),
        };
        let generation = manifest.generation;
        let epoch = manifest.epoch;
        match step {
            CommitStep::CheckBeforePrepare
            | CommitStep::CheckBeforePublish
            | CommitStep::CheckBeforeCommitted => self
                .store
                .check_generation(generation, epoch)
                .await
                .map_err(storage),
            CommitStep::Prepare => self.store.prepare(manifest).await.map_err(storage),
            CommitStep::PublishSinks => self
                .publish(manifest.sink_committables.clone())
                .await
                .map_err(|reason| (StepFailure::Failed, reason)),
            CommitStep::WriteCommitted => self.store.commit(manifest).await.map_err(storage),
            CommitStep::FlipLatest => self.store.flip_latest(epoch).await.map_err(storage),
            CommitStep::CollectGarbage => self
                .collect_garbage(generation, epoch)
                .await
                .map_err(storage),
        }
    }

    async fn publish(&self, committables: Vec<Committable>) -> Result<(), String> {
        let sinks = self.sinks.clone();
        let commit_all = move || {
            for (id, group) in committables_by_sink(&committables) {
                match sinks.get(id).and_then(|s| s.committer()) {
                    Some(committer) => committer
                        .commit_all(&group)
                        .map_err(|e| format!("committing sink `{id}`: {e}"))?,
                    None => return Err(format!("no exactly-once sink `{id}` to commit")),
                }
            }
            Ok(())
        };
        match self.sink_commits {
            SinkCommits::Blocking => tokio::task::spawn_blocking(commit_all)
                .await
                .unwrap_or_else(|e| Err(format!("sink commit stopped: {e}"))),
            SinkCommits::Inline => {
                YieldOnce(false).await;
                commit_all()
            }
        }
    }

    async fn collect_garbage(&self, generation: u64, epoch: Epoch) -> Result<(), StateError> {
        let findings = self.store.findings(false).await?;
        // After the listing: see `CommitStep::CollectGarbage`.
        self.store.check_generation(generation, epoch).await?;
        let deleting = plan_gc(&findings, self.retain);
        let keep = referenced_files(&findings, &deleting);
        for epoch in deleting {
            self.store.delete_epoch(epoch, &keep).await?;
        }
        Ok(())
    }
}

/// Pending once, then ready: hands control back to whoever polls.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const FENCED: StepFailure = StepFailure::Fenced { current: 7 };

    #[test]
    fn the_steps_run_in_protocol_order_and_end_after_gc() {
        let mut step = Some(CommitStep::CheckBeforePrepare);
        let mut seen = Vec::new();
        while let Some(s) = step {
            seen.push(s);
            step = s.next();
        }
        assert_eq!(seen, CommitStep::ORDER);
    }

    #[test]
    fn a_zombie_generation_cannot_commit() {
        // Fenced at any step stops the run for good, whatever was already done.
        for step in CommitStep::ORDER {
            assert_eq!(
                step.on_failure(FENCED),
                EpochOutcome::Fenced { current: 7 },
                "{step:?}"
            );
        }
    }

    #[test]
    fn a_failure_before_the_decision_is_logged_retries_the_epoch() {
        assert_eq!(
            CommitStep::CheckBeforePrepare.on_failure(StepFailure::Failed),
            EpochOutcome::Retry
        );
        // A PREPARED write that failed (or whose answer was lost) is superseded by the
        // next epoch's manifest, which carries the same committables.
        assert_eq!(
            CommitStep::Prepare.on_failure(StepFailure::Failed),
            EpochOutcome::Retry
        );
    }

    #[test]
    fn a_failure_between_prepared_and_committed_needs_recovery() {
        for step in [
            CommitStep::CheckBeforePublish,
            CommitStep::PublishSinks,
            CommitStep::CheckBeforeCommitted,
        ] {
            assert_eq!(
                step.on_failure(StepFailure::Failed),
                EpochOutcome::MustRecover,
                "{step:?}"
            );
        }
    }

    #[test]
    fn the_checkpoint_timeout_cuts_off_every_step_but_the_sink_commit() {
        for step in CommitStep::ORDER {
            assert_eq!(
                step.has_deadline(),
                step != CommitStep::PublishSinks,
                "{step:?}"
            );
        }
    }

    /// A store that answers after 30 s (a hung S3 request): the epoch's deadline ends
    /// the step, not the store, and the epoch is retried.
    #[test]
    fn a_step_on_a_hung_store_fails_at_the_epochs_deadline() {
        use object_store::throttle::{ThrottleConfig, ThrottledStore};
        let hung = Duration::from_secs(30);
        let store: Arc<dyn object_store::ObjectStore> = Arc::new(ThrottledStore::new(
            object_store::memory::InMemory::new(),
            ThrottleConfig {
                wait_list_per_call: hung,
                wait_get_per_call: hung,
                wait_put_per_call: hung,
                ..ThrottleConfig::default()
            },
        ));
        let root = riffle_state::StateRoot {
            bulk: store.clone(),
            store,
            prefix: object_store::path::Path::from("s"),
            local_dir: None,
            url: "memory://hung".into(),
        };
        let store = CheckpointStore::new(root, "p");
        let sinks = HashMap::new();
        let manifest = Manifest::prepared("p", 1, Epoch(1), 0);
        let started = std::time::Instant::now();
        let committer = EpochCommitter {
            store: &store,
            sinks: &sinks,
            retain: 2,
            sink_commits: SinkCommits::Inline,
            deadline: Some(started + Duration::from_millis(200)),
            requests: None,
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let incomplete = runtime
            .block_on(committer.commit_epoch(&manifest))
            .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_eq!(incomplete.step, CommitStep::CheckBeforePrepare);
        assert_eq!(incomplete.outcome, EpochOutcome::Retry);
        assert!(
            incomplete.reason.contains("checkpoint timeout"),
            "{}",
            incomplete.reason
        );
    }

    #[test]
    fn a_failure_after_the_output_is_published_lets_the_next_epoch_go_ahead() {
        for step in [
            CommitStep::WriteCommitted,
            CommitStep::FlipLatest,
            CommitStep::CollectGarbage,
        ] {
            assert_eq!(
                step.on_failure(StepFailure::Failed),
                EpochOutcome::Retry,
                "{step:?}"
            );
        }
    }
}
