//! When a worker other than 0 concludes that worker 0 is gone (docs/cluster.md,
//! "Failures").
//!
//! One failed exchange with worker 0 proves little: a handshake that timed out may
//! mean this worker was itself paused (SIGSTOP, a VM freeze) while the timer ran. So
//! a follower counts worker 0 as gone only once worker 0 has not answered for the
//! whole patience, however many tries that spans; until then it tries again.

use std::time::{Duration, Instant};

/// How long worker 0 has failed to answer this worker.
#[derive(Debug, Default)]
pub(crate) struct LeaderSilence {
    /// When the first failure since worker 0 last answered happened.
    since: Option<Instant>,
}

impl LeaderSilence {
    /// Worker 0 answered: its silence, if any, is over.
    pub(crate) fn answered(&mut self) {
        self.since = None;
    }

    /// An exchange with worker 0 begun at `tried` failed at `now`: whether worker 0 has
    /// now been silent for at least `patience`, and so is gone.
    pub(crate) fn failed(&mut self, tried: Instant, now: Instant, patience: Duration) -> bool {
        let since = *self.since.get_or_insert(tried);
        now.duration_since(since) >= patience
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATIENCE: Duration = Duration::from_secs(60);

    #[test]
    fn one_failure_within_patience_is_not_a_lost_leader() {
        let now = Instant::now();
        let mut silence = LeaderSilence::default();
        assert!(!silence.failed(now, now, PATIENCE));
    }

    #[test]
    fn failures_spanning_the_patience_lose_the_leader() {
        let start = Instant::now();
        let mut silence = LeaderSilence::default();
        assert!(!silence.failed(start, start, PATIENCE));
        assert!(!silence.failed(
            start + Duration::from_secs(30),
            start + Duration::from_secs(30),
            PATIENCE
        ));
        assert!(silence.failed(start + PATIENCE, start + PATIENCE, PATIENCE));
    }

    #[test]
    fn an_answer_in_between_starts_the_count_again() {
        let start = Instant::now();
        let mut silence = LeaderSilence::default();
        assert!(!silence.failed(start, start, PATIENCE));
        silence.answered();
        assert!(!silence.failed(start + PATIENCE, start + PATIENCE, PATIENCE));
        assert!(silence.failed(start + PATIENCE * 2, start + PATIENCE * 2, PATIENCE));
    }

    #[test]
    fn a_failure_that_itself_waited_the_patience_loses_the_leader_at_once() {
        // `links::connect` waits the patience for an unreachable worker 0 before it
        // fails: the silence began when that first try began.
        let start = Instant::now();
        let mut silence = LeaderSilence::default();
        assert!(silence.failed(start, start + PATIENCE, PATIENCE));
    }
}
