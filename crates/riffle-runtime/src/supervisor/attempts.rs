//! The one restart loop of a checkpointed run, over the attempts of a placement (one
//! process, or worker I of N), and what every placement's attempt shares: the next
//! recovery and the check that the job finished.

use super::{restartable, RestartBudget, RestartStrategy, RunObserver};
use crate::coordinator::CheckpointReport;
use crate::error::{RuntimeError, RuntimeResult};
use crate::graph::JobGraph;
use crate::recovery::{
    recover, recover_from, state_error, ExplicitRestore, Recovered, RecoveryOptions,
};
use crate::CheckpointedRun;
use riffle_core::Epoch;
use riffle_state::recovery::EpochFinding;
use riffle_state::CheckpointStore;
use std::time::Duration;

/// What the next recovery of a run does. The run's first asks for what the user said;
/// later ones resume from the newest checkpoint. A named restore registers the restored
/// epoch as a checkpoint, so every later recovery resumes from it or a newer one. A
/// start from empty state registers nothing: until the run has a checkpoint of its own,
/// a restart starts from empty state again, never from the history it replaced.
#[derive(Clone)]
pub struct NextRecovery {
    options: RecoveryOptions,
    restore_from: Option<ExplicitRestore>,
    /// The first epoch of a run that started from empty state.
    started_empty_at: Option<Epoch>,
}

impl NextRecovery {
    /// The first recovery of `run`.
    pub fn of(run: &CheckpointedRun) -> Self {
        Self {
            options: RecoveryOptions {
                start_empty: run.start_empty,
                accept_replayed_output: run.accept_replayed_output,
                replace_output: run.replace_output,
            },
            restore_from: run.restore_from.clone(),
            started_empty_at: None,
        }
    }

    /// Recovers `graph` from `store`; after success, the next recovery resumes.
    ///
    /// # Errors
    /// As [`recover`] and [`recover_from`].
    pub async fn recover(
        &mut self,
        store: &CheckpointStore,
        graph: &JobGraph,
    ) -> RuntimeResult<Recovered> {
        if let Some(first) = self.started_empty_at {
            let listing = store.findings(false).await.map_err(state_error)?;
            if has_own_checkpoint(&listing, first) {
                (self.options.start_empty, self.started_empty_at) = (false, None);
            }
        }
        let recovered = match &self.restore_from {
            Some(explicit) => {
                recover_from(store, graph, explicit, self.options.accept_replayed_output).await?
            }
            None => recover(store, graph, self.options).await?,
        };
        self.restore_from = None;
        if self.options.start_empty {
            self.started_empty_at.get_or_insert(recovered.next_epoch);
        }
        Ok(recovered)
    }
}

/// Whether `listing` holds a checkpoint (committed, or PREPARED for recovery to roll
/// forward) of the run whose first epoch is `first`.
fn has_own_checkpoint(listing: &[(Epoch, EpochFinding)], first: Epoch) -> bool {
    listing
        .iter()
        .any(|(epoch, finding)| *epoch >= first && matches!(finding, EpochFinding::Valid(_)))
}

/// The one check that an attempt which ended well finished the job: its end-of-input
/// checkpoint committed, or it stopped with a savepoint.
///
/// # Errors
/// A transient failure: output after the last committed epoch is not published, and
/// the next attempt resumes from that epoch.
pub fn finished(report: &CheckpointReport) -> RuntimeResult<()> {
    if report.end_of_input_committed || report.stopped.is_some() {
        return Ok(());
    }
    Err(RuntimeError::transient(format!(
        "the job ended but its final checkpoint did not commit ({}); output after the last committed epoch is not published",
        report
            .errors
            .last()
            .cloned()
            .unwrap_or_else(|| "no reason recorded".into())
    )))
}

/// A failure of an attempt, whatever the placement's error type.
pub trait AttemptError: std::fmt::Display {
    /// Whether another attempt may succeed (see [`restartable`]).
    fn restartable(&self) -> bool;
    /// The job's own error, which [`RunObserver::failed`] hears.
    fn runtime(&self) -> Option<&RuntimeError>;
}

impl AttemptError for RuntimeError {
    fn restartable(&self) -> bool {
        restartable(self)
    }

    fn runtime(&self) -> Option<&RuntimeError> {
        Some(self)
    }
}

/// Attempts of a checkpointed run in one placement: one process, or worker I of N
/// (the cluster crate's). [`supervise`] is the one restart loop over them.
// Neither placement's loop is spawned, so its futures need not be `Send`.
#[allow(async_fn_in_trait)]
pub trait Attempts {
    /// What a finished run returns.
    type Outcome;
    /// What a failed attempt returns.
    type Error: AttemptError;

    /// Runs one attempt, recovery included, to its end: the outcome if the job
    /// finished, `None` if this placement's part ended but the job goes on in a newer
    /// attempt that it rejoins.
    async fn run(
        &mut self,
        observer: &mut dyn RunObserver,
    ) -> Result<Option<Self::Outcome>, Self::Error>;

    /// Whether this placement decides restarts (one process, worker 0); the others
    /// rejoin whatever attempt comes next, at once.
    fn decides_restarts(&self) -> bool;

    /// Whether another attempt may get past `error`: by default the error's own
    /// classification; a placement may know more (a worker that lost worker 0).
    fn worth_restarting(&self, error: &Self::Error) -> bool {
        error.restartable()
    }

    /// The newest epoch known to have committed, which resets the restart budget.
    async fn newest_committed(&self) -> Option<Epoch>;

    /// Hears a failure and when the next attempt starts (`None`: never).
    fn failed(&self, _error: &Self::Error, _next: Option<Duration>) {}
}

/// Runs `attempts` until the job finishes, restarting after failures that are worth it
/// as a [`RestartBudget`] under `strategy` allows. The outcome and the restarts made.
///
/// # Errors
/// The failure that ended the run: not worth a restart, or none left.
pub async fn supervise<A: Attempts>(
    attempts: &mut A,
    strategy: RestartStrategy,
    observer: &mut dyn RunObserver,
) -> Result<(A::Outcome, u32), A::Error> {
    let mut budget = RestartBudget::new(strategy);
    loop {
        let error = match attempts.run(observer).await {
            Ok(Some(outcome)) => return Ok((outcome, budget.restarts())),
            Ok(None) => continue,
            Err(error) => error,
        };
        let worth = attempts.worth_restarting(&error);
        let (restart, next) = if attempts.decides_restarts() {
            let restart = match worth {
                true => budget.failed(attempts.newest_committed().await),
                false => None,
            };
            (restart, restart.map(|r| r.delay))
        } else {
            (None, worth.then_some(Duration::ZERO))
        };
        if let Some(e) = error.runtime() {
            observer.failed(e, restart);
        }
        tracing::warn!(%error, restarts = budget.restarts(), "job failed");
        attempts.failed(&error, next);
        match next {
            Some(delay) => tokio::time::sleep(delay).await,
            None => return Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Attempts that fail with the given errors in turn, then finish.
    struct Scripted {
        failures: Vec<RuntimeError>,
        decides: bool,
        runs: u32,
    }

    impl Attempts for Scripted {
        type Outcome = u32;
        type Error = RuntimeError;

        async fn run(&mut self, _: &mut dyn RunObserver) -> RuntimeResult<Option<u32>> {
            self.runs += 1;
            match self.failures.is_empty() {
                true => Ok(Some(self.runs)),
                false => Err(self.failures.remove(0)),
            }
        }

        fn decides_restarts(&self) -> bool {
            self.decides
        }

        async fn newest_committed(&self) -> Option<Epoch> {
            None
        }
    }

    fn supervised(attempts: &mut Scripted, attempts_allowed: u32) -> Result<(u32, u32), String> {
        let strategy = RestartStrategy::FixedDelay {
            attempts: attempts_allowed,
            delay: Duration::ZERO,
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        runtime
            .block_on(supervise(attempts, strategy, &mut ()))
            .map_err(|e| e.to_string())
    }

    fn task_failure() -> RuntimeError {
        RuntimeError::transient("a task failed")
    }

    #[test]
    fn a_deciding_placement_restarts_until_its_budget_is_spent() {
        let mut attempts = Scripted {
            failures: vec![task_failure(), task_failure()],
            decides: true,
            runs: 0,
        };
        assert_eq!(supervised(&mut attempts, 2), Ok((3, 2)));
        let mut attempts = Scripted {
            failures: vec![task_failure(), task_failure(), task_failure()],
            decides: true,
            runs: 0,
        };
        assert!(supervised(&mut attempts, 2).is_err());
        assert_eq!(attempts.runs, 3);
    }

    #[test]
    fn a_failure_that_needs_the_user_ends_the_run_in_every_placement() {
        for decides in [true, false] {
            let mut attempts = Scripted {
                failures: vec![RuntimeError::needs_user("no usable checkpoint")],
                decides,
                runs: 0,
            };
            assert!(supervised(&mut attempts, 5).is_err());
            assert_eq!(attempts.runs, 1);
        }
    }

    #[test]
    fn a_placement_that_does_not_decide_rejoins_without_spending_a_budget() {
        // A worker other than 0 follows worker 0's decisions, whatever its own count.
        let mut attempts = Scripted {
            failures: vec![task_failure(), task_failure(), task_failure()],
            decides: false,
            runs: 0,
        };
        assert_eq!(supervised(&mut attempts, 1), Ok((4, 0)));
    }

    #[test]
    fn a_run_started_empty_starts_empty_again_until_it_has_a_checkpoint_of_its_own() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let root = riffle_state::StateRoot::parse("memory://").unwrap();
        let store = CheckpointStore::new(root, "p");
        let graph = JobGraph::new("p");
        let run = CheckpointedRun {
            start_empty: true,
            ..CheckpointedRun::default()
        };
        let mut next = NextRecovery::of(&run);
        assert!(next.options.start_empty);
        let first = runtime.block_on(next.recover(&store, &graph)).unwrap();
        // Until the run has a checkpoint of its own, a restart starts empty again.
        assert_eq!(next.started_empty_at, Some(first.next_epoch));
        runtime.block_on(next.recover(&store, &graph)).unwrap();
        assert!(next.options.start_empty);
        assert!(next.restore_from.is_none());
    }

    #[test]
    fn a_run_resumes_its_own_checkpoints_not_the_history_it_replaced() {
        use riffle_state::Manifest;
        let old = Manifest::prepared("p", 1, Epoch(3), 0);
        let own = Manifest::prepared("p", 2, Epoch(5), 0);
        let listing = vec![(Epoch(3), EpochFinding::Valid(old))];
        assert!(
            !has_own_checkpoint(&listing, Epoch(4)),
            "only the replaced history's"
        );
        let mut listing = listing;
        listing.push((Epoch(4), EpochFinding::Partial));
        assert!(
            !has_own_checkpoint(&listing, Epoch(4)),
            "an incomplete epoch is none"
        );
        listing.push((Epoch(5), EpochFinding::Valid(own)));
        assert!(has_own_checkpoint(&listing, Epoch(4)));
    }
}
