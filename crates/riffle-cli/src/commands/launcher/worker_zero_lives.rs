//! Whether a worker that exited well heard the job's end from a worker 0 that died
//! since, and must run again.
//!
//! A worker other than 0 exits well once it has heard the job's end from worker 0. If
//! worker 0 dies before it exits itself, the job is not over: the restarted worker 0
//! resumes from a checkpoint that needs every worker (docs/cluster.md, "Failures"). A
//! worker that heard the end from the dead worker 0 must then run again, whether it
//! exited before that death or a moment after it, on its way out. A worker that lived
//! through the death rejoined the new worker 0's attempt and heard the end from it: it
//! is done. The generation tells them apart: the new worker 0's attempts claim
//! generations past every one the dead worker 0 claimed.

/// Worker 0's deaths so far, and what each worker was started under.
#[derive(Debug)]
pub(super) struct WorkerZeroLives {
    /// How many times worker 0 died.
    deaths: usize,
    /// The newest generation claimed when worker 0 last died (`None`: unknown).
    void_through: Option<u64>,
    /// Per worker, `deaths` when it was last started.
    started_under: Vec<usize>,
}

impl WorkerZeroLives {
    /// `workers` workers, none started yet.
    pub(super) fn new(workers: usize) -> Self {
        Self {
            deaths: 0,
            void_through: None,
            started_under: vec![0; workers],
        }
    }

    /// Worker `i` was started (again).
    pub(super) fn started(&mut self, i: usize) {
        self.started_under[i] = self.deaths;
    }

    /// Worker 0 died (not a clean exit) with `newest_claimed` the newest generation
    /// on the store: an end of that generation or an older one is void. A lookup that
    /// failed (`None`) keeps what an earlier death learned: the store outage that made
    /// it fail may well be what killed worker 0 again.
    pub(super) fn worker_0_died(&mut self, newest_claimed: Option<u64>) {
        self.deaths += 1;
        self.void_through = self.void_through.max(newest_claimed);
    }

    /// Whether worker `i`, exiting well after it last finished an attempt of
    /// `finished` (its `finished (generation …)` line), must be started again: worker
    /// 0 died since it was started and that attempt was the dead worker 0's. Unknown
    /// generations keep it finished: starting a worker after the job's end would leave
    /// it waiting for a worker 0 that is gone.
    pub(super) fn heard_a_void_end(&self, i: usize, finished: Option<u64>) -> bool {
        let died_since = self.started_under[i] < self.deaths;
        match (finished, self.void_through) {
            (Some(g), Some(void)) => i != 0 && died_since && g <= void,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::WorkerZeroLives;

    fn started(workers: usize) -> WorkerZeroLives {
        let mut lives = WorkerZeroLives::new(workers);
        (0..workers).for_each(|i| lives.started(i));
        lives
    }

    #[test]
    fn a_worker_exiting_well_while_worker_0_lives_is_done() {
        let lives = started(3);
        assert!(!lives.heard_a_void_end(1, Some(3)));
        assert!(!lives.heard_a_void_end(2, Some(3)));
    }

    #[test]
    fn a_worker_on_its_way_out_when_worker_0_died_runs_again() {
        let mut lives = started(2);
        // Worker 1 heard the end of generation 3 and is on its way out when worker 0
        // is killed.
        lives.worker_0_died(Some(3));
        assert!(lives.heard_a_void_end(1, Some(3)));
        // Started again, it is done when it next exits well.
        lives.started(1);
        assert!(!lives.heard_a_void_end(1, Some(3)));
    }

    #[test]
    fn a_worker_that_lived_through_the_death_and_finished_the_new_attempt_is_done() {
        let mut lives = started(2);
        lives.worker_0_died(Some(3));
        lives.started(0);
        // Worker 1 rejoined the new worker 0's attempt, generation 4, and heard its end.
        assert!(!lives.heard_a_void_end(1, Some(4)));
    }

    #[test]
    fn workers_started_after_the_death_are_done_when_they_exit_well() {
        let mut lives = started(3);
        lives.worker_0_died(Some(3));
        lives.started(0);
        lives.started(2);
        assert!(
            lives.heard_a_void_end(1, Some(3)),
            "started before the death"
        );
        assert!(!lives.heard_a_void_end(2, Some(3)), "started after it");
    }

    #[test]
    fn a_failed_store_lookup_keeps_what_an_earlier_death_learned() {
        let mut lives = started(2);
        lives.worker_0_died(Some(3));
        lives.started(0);
        // The restarted worker 0 dies at once, and the store does not answer.
        lives.worker_0_died(None);
        assert!(lives.heard_a_void_end(1, Some(3)));
    }

    #[test]
    fn unknown_generations_and_worker_0_itself_keep_a_worker_finished() {
        let mut lives = started(2);
        lives.worker_0_died(None);
        assert!(
            !lives.heard_a_void_end(1, Some(3)),
            "the store did not answer"
        );
        lives.worker_0_died(Some(3));
        assert!(!lives.heard_a_void_end(1, None), "no finished line");
        assert!(
            !lives.heard_a_void_end(0, Some(3)),
            "worker 0's clean exit ends the job"
        );
    }
}
