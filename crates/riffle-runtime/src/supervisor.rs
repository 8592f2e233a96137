//! Running a checkpointed job to the end: recover, start, and after a task failure
//! restart from the newest checkpoint as a [`RestartBudget`] allows.

mod restarts;

pub use restarts::{Restart, RestartBudget, RestartStrategy};

use crate::checkpoint_events::CheckpointListener;
use crate::coordinator::{CheckpointConfig, CheckpointReport};
use crate::error::{CheckpointFailure, RuntimeError, RuntimeResult};
use crate::graph::JobGraph;
use crate::job::{self, JobConfig, JobSummary};
use crate::metrics::JobMetrics;
use crate::recovery::{recover, recover_from, ExplicitRestore, Recovered, RecoveryOptions};
use crate::savepoint::SavepointDone;
use riffle_state::CheckpointStore;
use std::sync::Arc;

/// Whether a failure is worth a restart: task failures, broken streams between workers
/// and transient checkpoint failures are; a failure that needs the user (an unusable
/// checkpoint, an output another pipeline owns), a bug, a plan error or a fenced run
/// would only fail again. The one classification for one process and N workers.
pub fn restartable(error: &RuntimeError) -> bool {
    match error {
        RuntimeError::Task { .. } | RuntimeError::Panic { .. } => true,
        RuntimeError::Peer(_) => true,
        RuntimeError::Checkpoint { failure, .. } => *failure == CheckpointFailure::Transient,
        RuntimeError::Fenced { .. }
        | RuntimeError::SinkLostOutput(_)
        | RuntimeError::Graph(_)
        | RuntimeError::Restore { .. }
        | RuntimeError::Core(_) => false,
    }
}

/// What the caller hears while the job runs (progress lines, logs, tests).
pub trait RunObserver {
    /// Recovery chose where the (re)started job resumes.
    fn recovered(&mut self, _recovered: &Recovered) {}
    /// A job attempt started; its live metrics.
    fn started(&mut self, _metrics: &Arc<JobMetrics>) {}
    /// An attempt failed; `restart` is the restart that follows, if any (always `None`
    /// on a cluster worker other than 0, which rejoins whatever attempt worker 0 starts).
    fn failed(&mut self, _error: &RuntimeError, _restart: Option<Restart>) {}
}

/// A no-op observer.
impl RunObserver for () {}

/// Everything a checkpointed run needs besides the graph and the store.
#[derive(Clone, Default)]
pub struct CheckpointedRun {
    /// Channels and other job settings (`restore` is filled in by recovery).
    pub job: JobConfig,
    /// Interval, timeout, retention (generation and first epoch come from recovery).
    pub checkpoints: CheckpointConfig,
    /// Restarts after failures (counted by a [`RestartBudget`]).
    pub restart: RestartStrategy,
    /// Start the first attempt from empty state (existing checkpoints are kept).
    pub start_empty: bool,
    /// Resume past damaged checkpoints even when a sink cannot take back what they
    /// published (those rows are then written twice).
    pub accept_replayed_output: bool,
    /// Starting from empty state over exactly-once output an earlier run published:
    /// remove that output first (without it such a start is refused).
    pub replace_output: bool,
    /// Checkpoint event listeners.
    pub listeners: Vec<Arc<dyn CheckpointListener>>,
    /// Start the first attempt from a named savepoint or checkpoint (later attempts
    /// restart from the newest checkpoint, which is at least that one).
    pub restore_from: Option<ExplicitRestore>,
}

/// How a checkpointed run went.
#[derive(Debug)]
pub struct CheckpointedOutcome {
    /// The summary of the attempt that finished.
    pub summary: JobSummary,
    /// Checkpoint reports, one per attempt.
    pub reports: Vec<CheckpointReport>,
    /// Restarts after failures.
    pub restarts: u32,
    /// The run stopped on request with a savepoint (or the reason promoting its
    /// committed epoch to a savepoint failed); `None` when it ran to its end.
    pub stopped: Option<Result<SavepointDone, String>>,
}

/// Runs `graph` with exactly-once checkpoints into `store` until it ends, restarting
/// from the newest checkpoint after failures as `run.restart` allows.
///
/// # Errors
/// Recovery failed, the job failed with no restarts left, or its end-of-input
/// checkpoint did not commit (output after the last committed epoch is unpublished; run
/// again to resume).
pub async fn run_checkpointed(
    graph: &JobGraph,
    store: &CheckpointStore,
    run: CheckpointedRun,
    observer: &mut dyn RunObserver,
) -> RuntimeResult<CheckpointedOutcome> {
    let mut reports: Vec<CheckpointReport> = Vec::new();
    let mut budget = RestartBudget::new(run.restart);
    let mut start_empty = run.start_empty;
    let mut restore_from = run.restore_from.clone();
    let mut generation: Option<u64> = None;
    loop {
        // A restart claims a newer generation: only a process that still owns the
        // newest one may, or it would fence out the run that took over from it.
        if let Some(g) = generation {
            store
                .check_generation(g, riffle_core::Epoch(0))
                .await
                .map_err(crate::recovery::fenced_or_state)?;
        }
        let recovering = match &restore_from {
            Some(explicit) => recover_from(store, graph, explicit).await,
            None => {
                let options = RecoveryOptions {
                    start_empty,
                    accept_replayed_output: run.accept_replayed_output,
                    replace_output: run.replace_output,
                };
                recover(store, graph, options).await
            }
        };
        // Recovery that failed for a moment (storage, a sink's system) is retried like
        // any transient failure; one that needs the user ends the run.
        let recovered = match recovering {
            Ok(recovered) => recovered,
            Err(error) => {
                back_off(&mut budget, &reports, error, observer).await?;
                continue;
            }
        };
        restore_from = None;
        start_empty = false;
        generation = Some(recovered.generation);
        observer.recovered(&recovered);
        let config = JobConfig {
            restore: recovered.restored.clone(),
            ..run.job.clone()
        };
        let checkpoints = CheckpointConfig {
            generation: recovered.generation,
            first_epoch: recovered.next_epoch,
            state_id: Some(recovered.state_id.clone()),
            history_from: recovered.history_from,
            ..run.checkpoints.clone()
        };
        let started = job::start_with_checkpoints(
            graph,
            &config,
            store.clone(),
            checkpoints,
            run.listeners.clone(),
        );
        // A subtask that cannot start (its database is unreachable for a moment) is a
        // task failure like any other: restarted under the same strategy.
        let (handle, report) = match started {
            Ok(started) => started,
            Err(error) => {
                back_off(&mut budget, &reports, error, observer).await?;
                continue;
            }
        };
        observer.started(&handle.metrics);
        let result = handle.wait().await;
        // Once the tasks are gone the coordinator finishes its last epoch and returns.
        let report = report
            .await
            .map_err(|e| RuntimeError::bug(format!("checkpoint coordinator: {e}")))?;
        let end_committed = report.end_of_input_committed;
        let stopped = report.stopped.clone();
        let last_error = report.errors.last().cloned();
        reports.push(report);
        let error = match result {
            Ok(summary) if end_committed || stopped.is_some() => {
                return Ok(CheckpointedOutcome {
                    summary,
                    reports,
                    restarts: budget.restarts(),
                    stopped,
                })
            }
            Ok(_) => RuntimeError::transient(format!(
                "the job ended but its final checkpoint did not commit ({}); output after the last committed epoch is not published",
                last_error.unwrap_or_else(|| "no reason recorded".into())
            )),
            Err(e) => e,
        };
        back_off(&mut budget, &reports, error, observer).await?;
    }
}

/// After a failure: waits for the restart, or returns the error when it is not worth
/// one or `budget` allows no more. The attempts' `reports` say which epochs committed.
async fn back_off(
    budget: &mut RestartBudget,
    reports: &[CheckpointReport],
    error: RuntimeError,
    observer: &mut dyn RunObserver,
) -> RuntimeResult<()> {
    let newest_committed = reports.iter().filter_map(|r| r.committed.last()).max();
    let restart = restartable(&error)
        .then(|| budget.failed(newest_committed.copied()))
        .flatten();
    observer.failed(&error, restart);
    tracing::warn!(%error, restarts = budget.restarts(), "job failed");
    match restart {
        Some(restart) => {
            tokio::time::sleep(restart.delay).await;
            Ok(())
        }
        None => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fenced_run_is_never_restarted() {
        let fenced = RuntimeError::Fenced {
            generation: 1,
            current: 2,
        };
        assert!(!restartable(&fenced));
        // Whatever a checkpoint error's text says, it is not taken for fencing.
        assert!(restartable(&RuntimeError::transient(
            "fenced by nothing at all"
        )));
    }

    #[test]
    fn only_transient_checkpoint_failures_are_restarted() {
        assert!(restartable(&RuntimeError::transient("storage is slow")));
        assert!(!restartable(&RuntimeError::needs_user(
            "no usable checkpoint"
        )));
        assert!(!restartable(&RuntimeError::bug("a broken rule")));
        assert!(!restartable(&RuntimeError::SinkLostOutput(Vec::new())));
    }

    #[test]
    fn storage_failures_are_transient_and_damage_needs_the_user() {
        use riffle_state::StateError;
        let damaged = StateError::Corrupt {
            path: "x".into(),
            reason: "crc".into(),
        };
        assert_eq!(
            CheckpointFailure::of_state(&damaged),
            CheckpointFailure::NeedsUser
        );
        let io = StateError::Io {
            path: "x".into(),
            source: std::io::Error::other("disk"),
        };
        assert_eq!(
            CheckpointFailure::of_state(&io),
            CheckpointFailure::Transient
        );
    }
}
