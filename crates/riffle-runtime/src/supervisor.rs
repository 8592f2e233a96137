//! Running a checkpointed job to the end: recover, start, and after a task failure
//! restart from the newest checkpoint as a [`RestartBudget`] allows. [`supervise`] is
//! the one restart loop, over the [`Attempts`] of a placement: this process's
//! ([`run_checkpointed`]) or a cluster worker's.

mod attempts;
mod one_process;
mod restarts;

pub use attempts::{finished, supervise, AttemptError, Attempts, NextRecovery};
pub use one_process::run_checkpointed;
pub use restarts::{Restart, RestartBudget, RestartStrategy};

use crate::checkpoint_events::CheckpointListener;
use crate::coordinator::{CheckpointConfig, CheckpointReport};
use crate::error::{CheckpointFailure, RuntimeError};
use crate::job::{JobConfig, JobSummary};
use crate::metrics::JobMetrics;
use crate::recovery::{ExplicitRestore, Recovered};
use crate::savepoint::SavepointDone;
use std::sync::Arc;

/// Whether a failure is worth a restart: task failures, broken streams between workers
/// and transient checkpoint failures are; a failure that needs the user (an unusable
/// checkpoint, an output another pipeline owns), a bug, a plan error or a fenced run
/// would only fail again. The one classification for one process and N workers.
pub fn restartable(error: &RuntimeError) -> bool {
    match error {
        RuntimeError::Task { .. } | RuntimeError::Panic { .. } => true,
        RuntimeError::Peer(_) | RuntimeError::Protocol { .. } => true,
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
