//! Whether and when a failed job restarts: the one rule the in-process supervisor, a
//! cluster's worker 0 and the `--workers` launcher share.
//!
//! A job that runs for months fails now and then (a pod evicted, a broker restarted);
//! what ends it is failing again and again without getting anywhere. So the budget
//! counts failures *in a row*: a failure is in a row with the one before only if no
//! checkpoint committed between them. Once a checkpoint commits after a restart the
//! count starts over, and so does an exponential back-off.
//!
//! ```text
//!   fail ─ commit ─ fail ─ fail ─ commit ─ fail ─ fail ─ fail ─ fail
//!    1               1      2               1      2      3      4 > attempts: stop
//! ```
//!
//! The budget learns of commits as the newest committed epoch its caller knows when a
//! failure happens (from the coordinator's reports, or the state root's `_latest.json`
//! for a caller outside the coordinator's process), so it needs no I/O itself.

use riffle_core::Epoch;
use std::time::Duration;

/// How a failed job is restarted from its newest checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestartStrategy {
    /// A failure ends the run.
    None,
    /// Up to `attempts` failures in a row are restarted, `delay` after each.
    FixedDelay { attempts: u32, delay: Duration },
    /// Up to `attempts` failures in a row are restarted, the delay doubling from
    /// `initial` up to `max` with each failure in the row.
    ExponentialBackoff {
        attempts: u32,
        initial: Duration,
        max: Duration,
    },
}

impl Default for RestartStrategy {
    fn default() -> Self {
        RestartStrategy::FixedDelay {
            attempts: 3,
            delay: Duration::from_secs(1),
        }
    }
}

impl RestartStrategy {
    /// The wait before restarting after failure `in_a_row` of a row (1-based), or
    /// `None` when the strategy allows no more in a row.
    pub fn delay(&self, in_a_row: u32) -> Option<Duration> {
        match *self {
            RestartStrategy::None => None,
            RestartStrategy::FixedDelay { attempts, delay } => {
                (in_a_row <= attempts).then_some(delay)
            }
            RestartStrategy::ExponentialBackoff {
                attempts,
                initial,
                max,
            } => (in_a_row <= attempts).then(|| {
                let factor = 2u32.saturating_pow(in_a_row.saturating_sub(1).min(30));
                initial.saturating_mul(factor).min(max)
            }),
        }
    }
}

/// A restart the budget allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Restart {
    /// Restarts over the job's life so far, this one included (for logs and metrics;
    /// it never ends the job).
    pub number: u32,
    /// Failures in a row, this one included: those since a checkpoint last committed.
    pub in_a_row: u32,
    /// How long to wait before restarting.
    pub delay: Duration,
}

/// Counts a job's failures and decides each restart under a [`RestartStrategy`]
/// (see the module comment for the rule).
#[derive(Debug, Clone)]
pub struct RestartBudget {
    strategy: RestartStrategy,
    /// Failures since the last one after which a checkpoint committed.
    in_a_row: u32,
    /// Restarts allowed so far.
    restarts: u32,
    /// The newest committed epoch known at any failure so far: a later failure is in a
    /// row with the earlier ones unless a newer epoch committed since.
    committed_at_failure: Option<Epoch>,
}

impl RestartBudget {
    /// A budget with no failures yet.
    pub fn new(strategy: RestartStrategy) -> Self {
        Self {
            strategy,
            in_a_row: 0,
            restarts: 0,
            committed_at_failure: None,
        }
    }

    /// The job failed (in a way worth a restart); `newest_committed` is the newest
    /// epoch the caller knows to be committed by now (`None`: none). Returns the
    /// restart to make, or `None` when this failure is one too many in a row.
    pub fn failed(&mut self, newest_committed: Option<Epoch>) -> Option<Restart> {
        // `None` sorts before every epoch, so a first commit counts as one. An epoch
        // older than one seen before (a stale `_latest.json`) is no progress.
        let committed_since = newest_committed > self.committed_at_failure;
        self.committed_at_failure = self.committed_at_failure.max(newest_committed);
        self.in_a_row = if committed_since {
            1
        } else {
            self.in_a_row.saturating_add(1)
        };
        let delay = self.strategy.delay(self.in_a_row)?;
        self.restarts = self.restarts.saturating_add(1);
        Some(Restart {
            number: self.restarts,
            in_a_row: self.in_a_row,
            delay,
        })
    }

    /// Restarts allowed so far.
    pub fn restarts(&self) -> u32 {
        self.restarts
    }

    /// Failures in a row so far, the last one included (also when it was one too many).
    pub fn in_a_row(&self) -> u32 {
        self.in_a_row
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXED: RestartStrategy = RestartStrategy::FixedDelay {
        attempts: 3,
        delay: Duration::from_millis(5),
    };

    #[test]
    fn fixed_delay_counts_attempts() {
        let s = RestartStrategy::FixedDelay {
            attempts: 2,
            delay: Duration::from_millis(5),
        };
        assert_eq!(s.delay(1), Some(Duration::from_millis(5)));
        assert_eq!(s.delay(2), Some(Duration::from_millis(5)));
        assert_eq!(s.delay(3), None);
        assert_eq!(RestartStrategy::None.delay(1), None);
    }

    #[test]
    fn exponential_backoff_doubles_up_to_the_cap() {
        let s = RestartStrategy::ExponentialBackoff {
            attempts: 10,
            initial: Duration::from_millis(100),
            max: Duration::from_millis(500),
        };
        let delays: Vec<_> = (1..=5).filter_map(|r| s.delay(r)).collect();
        let ms: Vec<u128> = delays.iter().map(Duration::as_millis).collect();
        assert_eq!(ms, vec![100, 200, 400, 500, 500]);
        assert_eq!(s.delay(11), None);
    }

    #[test]
    fn failures_in_a_row_end_the_job_after_the_attempts() {
        let mut budget = RestartBudget::new(FIXED);
        // No checkpoint ever commits: the fourth failure is one too many.
        let rows: Vec<Option<u32>> = (0..4)
            .map(|_| budget.failed(None).map(|r| r.in_a_row))
            .collect();
        assert_eq!(rows, vec![Some(1), Some(2), Some(3), None]);
        assert_eq!((budget.restarts(), budget.in_a_row()), (3, 4));
    }

    #[test]
    fn a_commit_between_failures_starts_the_count_over() {
        let mut budget = RestartBudget::new(FIXED);
        // Ten failures over the job's life, a checkpoint committed after each restart.
        for epoch in 1..=10 {
            let restart = budget.failed(Some(Epoch(epoch * 7)));
            assert_eq!(restart.map(|r| r.in_a_row), Some(1), "failure {epoch}");
        }
        assert_eq!(budget.restarts(), 10);
    }

    #[test]
    fn a_row_counts_only_failures_without_a_commit_between() {
        let mut budget = RestartBudget::new(FIXED);
        let mut row = |epoch: Option<u64>| budget.failed(epoch.map(Epoch)).map(|r| r.in_a_row);
        assert_eq!(row(None), Some(1));
        assert_eq!(row(None), Some(2));
        assert_eq!(row(Some(4)), Some(1), "epoch 4 committed: a new row");
        assert_eq!(row(Some(4)), Some(2));
        assert_eq!(row(Some(4)), Some(3));
        assert_eq!(row(Some(4)), None, "four in a row since epoch 4");
    }

    #[test]
    fn a_first_failure_is_one_in_a_row_whatever_the_newest_epoch() {
        for newest in [None, Some(Epoch(12))] {
            let restart = RestartBudget::new(FIXED).failed(newest);
            assert_eq!(restart.map(|r| (r.number, r.in_a_row)), Some((1, 1)));
        }
    }

    #[test]
    fn an_older_newest_epoch_is_no_progress() {
        let mut budget = RestartBudget::new(FIXED);
        assert_eq!(budget.failed(Some(Epoch(9))).map(|r| r.in_a_row), Some(1));
        // A hint that went back (a damaged epoch skipped) did not commit anything new.
        assert_eq!(budget.failed(Some(Epoch(7))).map(|r| r.in_a_row), Some(2));
        assert_eq!(budget.failed(Some(Epoch(8))).map(|r| r.in_a_row), Some(3));
        assert_eq!(budget.failed(Some(Epoch(10))).map(|r| r.in_a_row), Some(1));
    }

    #[test]
    fn backoff_grows_in_a_row_and_starts_over_after_a_commit() {
        let mut budget = RestartBudget::new(RestartStrategy::ExponentialBackoff {
            attempts: 5,
            initial: Duration::from_secs(1),
            max: Duration::from_secs(60),
        });
        let mut wait = |epoch: u64| budget.failed(Some(Epoch(epoch))).map(|r| r.delay.as_secs());
        assert_eq!(
            [wait(3), wait(3), wait(3)],
            [Some(1), Some(2), Some(4)],
            "doubling in a row"
        );
        assert_eq!(wait(5), Some(1), "a commit resets the back-off");
        assert_eq!(wait(5), Some(2));
    }

    #[test]
    fn without_a_strategy_no_failure_restarts() {
        let mut budget = RestartBudget::new(RestartStrategy::None);
        assert_eq!(budget.failed(None), None);
        assert_eq!(budget.failed(Some(Epoch(3))), None);
        assert_eq!(budget.restarts(), 0);
        let mut zero = RestartBudget::new(RestartStrategy::FixedDelay {
            attempts: 0,
            delay: Duration::ZERO,
        });
        assert_eq!(zero.failed(None), None);
    }
}
