//! Attempts of a checkpointed run in this one process.

use super::{supervise, Attempts, CheckpointedOutcome, CheckpointedRun, NextRecovery, RunObserver};
use crate::coordinator::{CheckpointConfig, CheckpointReport};
use crate::error::{RuntimeError, RuntimeResult};
use crate::graph::JobGraph;
use crate::job::{self, JobConfig};
use riffle_core::Epoch;
use riffle_state::CheckpointStore;

/// Runs `graph` with exactly-once checkpoints into `store` until it ends, restarting
/// from the newest checkpoint after failures as `run.restart` allows: [`supervise`]
/// over attempts in this one process.
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
    let strategy = run.restart;
    let mut attempts = OneProcess {
        graph,
        store,
        recovery: NextRecovery::of(&run),
        run,
        generation: None,
        reports: Vec::new(),
    };
    let (mut outcome, restarts) = supervise(&mut attempts, strategy, observer).await?;
    outcome.restarts = restarts;
    Ok(outcome)
}

/// Attempts in this one process.
struct OneProcess<'a> {
    graph: &'a JobGraph,
    store: &'a CheckpointStore,
    run: CheckpointedRun,
    recovery: NextRecovery,
    /// The generation the last recovery claimed.
    generation: Option<u64>,
    /// The coordinator's reports, one per attempt that started.
    reports: Vec<CheckpointReport>,
}

impl Attempts for OneProcess<'_> {
    type Outcome = CheckpointedOutcome;
    type Error = RuntimeError;

    async fn run(
        &mut self,
        observer: &mut dyn RunObserver,
    ) -> RuntimeResult<Option<CheckpointedOutcome>> {
        let (graph, store) = (self.graph, self.store);
        // A restart claims a newer generation: only a process that still owns the
        // newest one may, or it would fence out the run that took over from it.
        if let Some(g) = self.generation {
            store
                .check_generation(g, Epoch(0))
                .await
                .map_err(crate::recovery::fenced_or_state)?;
        }
        // Recovery that failed for a moment (storage, a sink's system) is retried like
        // any transient failure; one that needs the user ends the run.
        let mut recovered = self.recovery.recover(store, graph).await?;
        self.generation = Some(recovered.generation);
        observer.recovered(&recovered);
        let config = JobConfig {
            restore: recovered.restored.take(),
            ..self.run.job.clone()
        };
        let checkpoints = CheckpointConfig {
            generation: recovered.generation,
            first_epoch: recovered.next_epoch,
            state_id: Some(recovered.state_id.clone()),
            history_from: recovered.history_from,
            taken_back: recovered.taken_back.clone(),
            ..self.run.checkpoints.clone()
        };
        // A subtask that cannot start (its database is unreachable for a moment) is a
        // task failure like any other: restarted under the same strategy.
        let listeners = self.run.listeners.clone();
        let (handle, report) =
            job::start_with_checkpoints(graph, &config, store.clone(), checkpoints, listeners)?;
        // Each subtask holds its part now: the whole loaded checkpoint is freed as they
        // restore, instead of staying in memory for the attempt (docs/engine.md, "State
        // beyond memory").
        drop(config);
        observer.started(&handle.metrics);
        let result = handle.wait().await;
        // Once the tasks are gone the coordinator finishes its last epoch and returns.
        let report = report
            .await
            .map_err(|e| RuntimeError::bug(format!("checkpoint coordinator: {e}")))?;
        let finished = super::finished(&report);
        let stopped = report.stopped.clone();
        self.reports.push(report);
        let summary = result?;
        finished?;
        Ok(Some(CheckpointedOutcome {
            summary,
            reports: std::mem::take(&mut self.reports),
            restarts: 0,
            stopped,
        }))
    }

    fn decides_restarts(&self) -> bool {
        true
    }

    async fn newest_committed(&self) -> Option<Epoch> {
        (self.reports.iter())
            .filter_map(|r| r.committed.last())
            .max()
            .copied()
    }
}
