//! The coordinator's decisions, with no I/O: when an epoch starts and of which kind,
//! what an ack, a timeout, a failure or a completion changes, which sink output is
//! carried into the next epoch, and when the job must fail. The run loop
//! (`CheckpointCoordinator::run`) feeds it events and does what it answers; the clock
//! is passed in, so every rule is tested here as a named behaviour.
//!
//! Rules (docs/engine.md, "Barriers and alignment"):
//! - At most one epoch is in flight.
//! - Once every source subtask ran dry, the end-of-input epoch starts as soon as nothing
//!   else is in flight; nothing starts after it.
//! - A requested savepoint waits for its turn and goes out as soon as nothing is in
//!   flight; nothing starts after a stop-with-savepoint.
//! - Otherwise an epoch starts at each tick of the interval, unless the last completion
//!   was less than `min_pause` ago.
//! - An epoch not complete `timeout` after its start is abandoned.
//! - A failed epoch's sink output (staged for rows the next epoch's state has moved past)
//!   is carried into the next epoch and commits with it; so is what a late ack of a
//!   failed epoch brings.
//! - More than `tolerable_failures` failed epochs in a row fail the job; a completed one
//!   resets the count.

use super::commit::EpochOutcome;
use riffle_core::{BarrierKind, Committable, Epoch};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// What the schedule needs to know of the job and its configuration.
#[derive(Debug, Clone)]
pub struct ScheduleConfig {
    /// An epoch not complete after this long is abandoned.
    pub timeout: Duration,
    /// Least time between one epoch's completion and the next periodic start.
    pub min_pause: Duration,
    /// Failed epochs in a row the job tolerates.
    pub tolerable_failures: usize,
    /// Tasks that ack every epoch.
    pub task_count: usize,
    /// Source subtasks that report running dry.
    pub source_subtasks: usize,
    /// The first epoch this run takes.
    pub first_epoch: Epoch,
}

/// A savepoint request waiting for its turn; `S` is what the caller keeps with it (the
/// reply channel).
#[derive(Debug)]
pub struct WaitingSavepoint<S> {
    /// The job stops after it.
    pub stop: bool,
    /// With `stop`: every open window fires first.
    pub drain: bool,
    /// The caller's part.
    pub request: S,
}

/// An epoch to start: inject its barrier.
#[derive(Debug)]
pub struct Start<S> {
    /// Its number.
    pub epoch: Epoch,
    /// Its kind.
    pub kind: BarrierKind,
    /// The savepoint request it serves, if any.
    pub savepoint: Option<S>,
}

/// What an ack changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acked {
    /// It belongs to no epoch in flight (a failed one): its sink output was carried.
    Late,
    /// Counted; more acks are due.
    Waiting {
        /// Acks so far.
        acks: usize,
    },
    /// Every task acked: the epoch can complete.
    All {
        /// Acks so far.
        acks: usize,
    },
}

/// What a failed epoch means for the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failed {
    /// The job goes on; `consecutive` epochs failed in a row.
    Tolerated {
        /// Failures in a row, this one included.
        consecutive: usize,
    },
    /// The job must fail: too many in a row, or a failure nothing later can mend.
    FailJob {
        /// Failures in a row, this one included.
        consecutive: usize,
    },
}

/// What a tick of the interval did.
#[derive(Debug)]
pub struct Tick<S> {
    /// The epoch in flight timed out and was abandoned.
    pub timed_out: Option<(Epoch, Failed)>,
    /// An epoch to start.
    pub start: Option<Start<S>>,
}

#[derive(Debug)]
struct InFlight {
    epoch: Epoch,
    kind: BarrierKind,
    started: Instant,
    acks: usize,
    committables: Vec<Committable>,
}

/// The coordinator's state between events.
#[derive(Debug)]
pub struct Schedule<S> {
    config: ScheduleConfig,
    next_epoch: Epoch,
    in_flight: Option<InFlight>,
    carried: Vec<Committable>,
    /// Sink output committed epochs held back for a later publication (see
    /// `grouping`); the newest committed manifest records the same.
    held: Vec<Committable>,
    failures: usize,
    last_completed: Option<Instant>,
    end_of_input_started: bool,
    stopping: bool,
    ended_sources: usize,
    sources_report_end: bool,
    /// Tasks yet to say they restored: no epoch starts before every one did.
    restoring: usize,
    waiting: VecDeque<WaitingSavepoint<S>>,
}

impl<S> Schedule<S> {
    /// A run's schedule; `tasks_report` when tasks say they restored (no epoch starts
    /// before every one did) and sources that they ran dry (bounded runs), so that the
    /// end-of-input epoch can start.
    pub fn new(config: ScheduleConfig, tasks_report: bool) -> Self {
        Self {
            restoring: if tasks_report { config.task_count } else { 0 },
            next_epoch: config.first_epoch,
            config,
            in_flight: None,
            carried: Vec::new(),
            held: Vec::new(),
            failures: 0,
            last_completed: None,
            end_of_input_started: false,
            stopping: false,
            ended_sources: 0,
            sources_report_end: tasks_report,
            waiting: VecDeque::new(),
        }
    }

    fn all_ended(&self) -> bool {
        self.sources_report_end && self.ended_sources >= self.config.source_subtasks
    }

    /// Whether the job is on its way out: no new savepoint can be served.
    pub fn finishing(&self) -> bool {
        self.stopping || self.end_of_input_started || self.all_ended()
    }

    /// Whether periodic ticks still matter (not after the end-of-input epoch started).
    pub fn ticking(&self) -> bool {
        !self.end_of_input_started
    }

    /// The epoch in flight, if any.
    pub fn in_flight(&self) -> Option<Epoch> {
        self.in_flight.as_ref().map(|f| f.epoch)
    }

    /// The sink output the epoch in flight commits: carried from failed epochs, then
    /// what its acks brought.
    pub fn committables(&self) -> &[Committable] {
        self.in_flight
            .as_ref()
            .map_or(&[], |f| f.committables.as_slice())
    }

    /// Sink output held back by committed epochs, not published yet.
    pub fn held(&self) -> &[Committable] {
        &self.held
    }

    /// A source subtask ran dry.
    pub fn source_ended(&mut self) {
        self.ended_sources += 1;
    }

    /// A task restored its state (or had none) and takes input.
    pub fn task_restored(&mut self) {
        self.restoring = self.restoring.saturating_sub(1);
    }

    /// The tasks' reports stopped (their channel closed: every task ended).
    pub fn tasks_stopped_reporting(&mut self) {
        self.sources_report_end = false;
        self.restoring = 0;
    }

    /// A savepoint request (already checked) waits for its turn.
    pub fn savepoint_requested(&mut self, savepoint: WaitingSavepoint<S>) {
        self.waiting.push_back(savepoint);
    }

    /// The epoch to start right now without waiting for a tick: the end-of-input epoch
    /// or a waiting savepoint, when nothing is in flight.
    pub fn start_now(&mut self, now: Instant) -> Option<Start<S>> {
        let busy = self.in_flight.is_some() || self.restoring > 0;
        if busy || self.stopping || self.end_of_input_started {
            return None;
        }
        if self.all_ended() {
            return Some(self.start(now, None));
        }
        let savepoint = self.waiting.pop_front()?;
        Some(self.start(now, Some(savepoint)))
    }

    /// The interval ticked: abandon an epoch in flight past its timeout; start a
    /// periodic epoch when nothing is in flight, unless paused after a completion.
    pub fn tick(&mut self, now: Instant) -> Tick<S> {
        let mut timed_out = None;
        if let Some(f) = &self.in_flight {
            if now.saturating_duration_since(f.started) < self.config.timeout {
                return Tick {
                    timed_out: None,
                    start: None,
                };
            }
            let epoch = f.epoch;
            timed_out = Some((epoch, self.epoch_failed()));
        }
        let paused = self
            .last_completed
            .is_some_and(|t| now.saturating_duration_since(t) < self.config.min_pause);
        let start =
            (!paused && !self.stopping && !self.end_of_input_started && self.restoring == 0)
                .then(|| self.start(now, None));
        Tick { timed_out, start }
    }

    fn start(&mut self, now: Instant, savepoint: Option<WaitingSavepoint<S>>) -> Start<S> {
        let kind = match &savepoint {
            None if self.all_ended() => {
                self.end_of_input_started = true;
                BarrierKind::EndOfInput
            }
            None => BarrierKind::Checkpoint,
            Some(sp) if sp.stop => {
                self.stopping = true;
                BarrierKind::StopWithSavepoint { drain: sp.drain }
            }
            Some(_) => BarrierKind::Savepoint,
        };
        let epoch = self.next_epoch;
        self.next_epoch = Epoch(epoch.0 + 1);
        self.in_flight = Some(InFlight {
            epoch,
            kind,
            started: now,
            acks: 0,
            committables: std::mem::take(&mut self.carried),
        });
        Start {
            epoch,
            kind,
            savepoint: savepoint.map(|s| s.request),
        }
    }

    /// A task acked `epoch`, bringing the sink output it staged.
    pub fn ack(&mut self, epoch: Epoch, committables: Vec<Committable>) -> Acked {
        match self.in_flight.as_mut().filter(|f| f.epoch == epoch) {
            None => {
                self.carried.extend(committables);
                Acked::Late
            }
            Some(f) => {
                f.acks += 1;
                f.committables.extend(committables);
                if f.acks >= self.config.task_count {
                    Acked::All { acks: f.acks }
                } else {
                    Acked::Waiting { acks: f.acks }
                }
            }
        }
    }

    /// The epoch in flight failed (its state could not be written, or a commit step
    /// failed in a way the next epoch mends): its sink output is carried.
    pub fn epoch_failed(&mut self) -> Failed {
        if let Some(mut f) = self.in_flight.take() {
            self.carried.append(&mut f.committables);
        }
        self.failures += 1;
        if self.failures > self.config.tolerable_failures {
            self.stopping = true;
            Failed::FailJob {
                consecutive: self.failures,
            }
        } else {
            Failed::Tolerated {
                consecutive: self.failures,
            }
        }
    }

    /// The epoch in flight's commit failed with `outcome` (see
    /// [`EpochOutcome`](super::commit::EpochOutcome)).
    pub fn commit_failed(&mut self, outcome: EpochOutcome) -> Failed {
        match outcome {
            EpochOutcome::Retry => self.epoch_failed(),
            // Only recovery can go on (or nobody, when fenced): nothing more starts.
            EpochOutcome::MustRecover | EpochOutcome::Fenced { .. } => {
                self.in_flight = None;
                self.stopping = true;
                Failed::FailJob {
                    consecutive: self.failures + 1,
                }
            }
        }
    }

    /// The epoch in flight committed, holding `held` back for a later epoch (what its
    /// manifest records); returns its kind.
    pub fn completed(&mut self, now: Instant, held: Vec<Committable>) -> Option<BarrierKind> {
        let f = self.in_flight.take()?;
        self.held = held;
        self.failures = 0;
        self.last_completed = Some(now);
        Some(f.kind)
    }

    /// The job ended: the epoch still in flight, if any, is abandoned.
    pub fn abandon(&mut self) -> Option<Epoch> {
        self.in_flight.take().map(|f| f.epoch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> ScheduleConfig {
        ScheduleConfig {
            timeout: Duration::from_secs(10),
            min_pause: Duration::ZERO,
            tolerable_failures: 2,
            task_count: 2,
            source_subtasks: 2,
            first_epoch: Epoch(5),
        }
    }

    /// `s` once every task said it restored.
    fn restored<S>(mut s: Schedule<S>) -> Schedule<S> {
        for _ in 0..config().task_count {
            s.task_restored();
        }
        s
    }

    #[test]
    fn no_epoch_starts_before_every_task_restored() {
        let mut s: Schedule<()> = Schedule::new(config(), true);
        let t0 = Instant::now();
        s.task_restored();
        // A restore longer than the timeout is no failed checkpoint: none started.
        let later = t0 + Duration::from_secs(60);
        let tick = s.tick(later);
        assert!(tick.start.is_none() && tick.timed_out.is_none());
        s.savepoint_requested(WaitingSavepoint {
            stop: false,
            drain: false,
            request: (),
        });
        assert!(s.start_now(later).is_none(), "the savepoint waits too");
        s.task_restored();
        let (epoch, kind) = s.start_now(later).map(|st| (st.epoch, st.kind)).unwrap();
        assert_eq!((epoch, kind), (Epoch(5), BarrierKind::Savepoint));
        // Without reports (every task ended), nothing waits.
        let mut s: Schedule<()> = Schedule::new(config(), true);
        s.tasks_stopped_reporting();
        assert!(s.tick(t0).start.is_some());
    }

    fn committable(epoch: u64, subtask: usize) -> Committable {
        Committable {
            sink: "out".into(),
            subtask,
            epoch: Epoch(epoch),
            payload: format!("{epoch}-{subtask}"),
        }
    }

    fn started(tick: Tick<()>) -> (Epoch, BarrierKind) {
        let s = tick.start.expect("an epoch starts");
        (s.epoch, s.kind)
    }

    #[test]
    fn epochs_start_at_ticks_one_at_a_time_from_the_first_epoch() {
        let t0 = Instant::now();
        let mut s: Schedule<()> = restored(Schedule::new(config(), true));
        assert_eq!(started(s.tick(t0)), (Epoch(5), BarrierKind::Checkpoint));
        // In flight and not timed out: the next tick starts nothing.
        let tick = s.tick(t0 + Duration::from_secs(1));
        assert!(tick.start.is_none() && tick.timed_out.is_none());
        assert_eq!(s.ack(Epoch(5), vec![]), Acked::Waiting { acks: 1 });
        assert_eq!(s.ack(Epoch(5), vec![]), Acked::All { acks: 2 });
        assert_eq!(s.completed(t0, Vec::new()), Some(BarrierKind::Checkpoint));
        assert_eq!(started(s.tick(t0 + Duration::from_secs(2))).0, Epoch(6));
    }

    #[test]
    fn committables_of_a_timed_out_epoch_commit_with_the_next() {
        let t0 = Instant::now();
        let mut s: Schedule<()> = restored(Schedule::new(config(), true));
        started(s.tick(t0));
        s.ack(Epoch(5), vec![committable(5, 0)]);
        let tick = s.tick(t0 + Duration::from_secs(10));
        assert_eq!(
            tick.timed_out,
            Some((Epoch(5), Failed::Tolerated { consecutive: 1 }))
        );
        assert_eq!(tick.start.map(|s| s.epoch), Some(Epoch(6)));
        // The straggler's ack of the abandoned epoch is carried too.
        assert_eq!(s.ack(Epoch(5), vec![committable(5, 1)]), Acked::Late);
        s.ack(Epoch(6), vec![committable(6, 0)]);
        assert_eq!(
            s.committables(),
            [committable(5, 0), committable(6, 0)],
            "what epoch 6 commits"
        );
        // The late ack is carried into the epoch after 6 (it arrived after 6 started).
        s.ack(Epoch(6), vec![]);
        s.completed(t0, Vec::new());
        started(s.tick(t0 + Duration::from_secs(11)));
        assert_eq!(s.committables(), [committable(5, 1)]);
    }

    #[test]
    fn a_failed_commit_that_the_next_epoch_mends_carries_its_output() {
        let t0 = Instant::now();
        let mut s: Schedule<()> = restored(Schedule::new(config(), true));
        started(s.tick(t0));
        s.ack(Epoch(5), vec![committable(5, 0)]);
        s.ack(Epoch(5), vec![committable(5, 1)]);
        assert_eq!(
            s.commit_failed(EpochOutcome::Retry),
            Failed::Tolerated { consecutive: 1 }
        );
        started(s.tick(t0));
        assert_eq!(s.committables(), [committable(5, 0), committable(5, 1)]);
    }

    #[test]
    fn too_many_failures_in_a_row_fail_the_job_and_a_completion_resets_the_count() {
        let t0 = Instant::now();
        let mut s: Schedule<()> = restored(Schedule::new(config(), true));
        for consecutive in 1..=2 {
            started(s.tick(t0));
            assert_eq!(s.epoch_failed(), Failed::Tolerated { consecutive });
        }
        started(s.tick(t0));
        s.ack(Epoch(7), vec![]);
        s.ack(Epoch(7), vec![]);
        s.completed(t0, Vec::new());
        for consecutive in 1..=2 {
            started(s.tick(t0));
            assert_eq!(s.epoch_failed(), Failed::Tolerated { consecutive });
        }
        started(s.tick(t0));
        assert_eq!(s.epoch_failed(), Failed::FailJob { consecutive: 3 });
        assert!(
            s.tick(t0).start.is_none(),
            "nothing starts after the job failed"
        );
    }

    #[test]
    fn a_zombie_generation_or_a_decided_epoch_stops_the_schedule() {
        for outcome in [
            EpochOutcome::Fenced { current: 9 },
            EpochOutcome::MustRecover,
        ] {
            let t0 = Instant::now();
            let mut s: Schedule<()> = restored(Schedule::new(config(), true));
            started(s.tick(t0));
            assert_eq!(s.commit_failed(outcome), Failed::FailJob { consecutive: 1 });
            assert!(s.tick(t0).start.is_none());
            assert!(s.start_now(t0).is_none());
        }
    }

    #[test]
    fn the_end_of_input_epoch_starts_once_every_source_ended_and_nothing_is_in_flight() {
        let t0 = Instant::now();
        let mut s: Schedule<()> = restored(Schedule::new(config(), true));
        started(s.tick(t0));
        s.source_ended();
        assert!(s.start_now(t0).is_none(), "one source is still running");
        s.source_ended();
        assert!(s.start_now(t0).is_none(), "epoch 5 is in flight");
        s.ack(Epoch(5), vec![]);
        s.ack(Epoch(5), vec![]);
        s.completed(t0, Vec::new());
        let end = s.start_now(t0).expect("end of input");
        assert_eq!((end.epoch, end.kind), (Epoch(6), BarrierKind::EndOfInput));
        assert!(s.finishing() && !s.ticking());
        s.ack(Epoch(6), vec![]);
        s.ack(Epoch(6), vec![]);
        assert_eq!(s.completed(t0, Vec::new()), Some(BarrierKind::EndOfInput));
        assert!(s.start_now(t0).is_none() && s.tick(t0).start.is_none());
    }

    #[test]
    fn an_unbounded_run_never_starts_an_end_of_input_epoch() {
        let t0 = Instant::now();
        let mut s: Schedule<()> = Schedule::new(config(), false);
        s.source_ended();
        s.source_ended();
        assert!(s.start_now(t0).is_none());
        assert_eq!(started(s.tick(t0)).1, BarrierKind::Checkpoint);
    }

    #[test]
    fn a_waiting_savepoint_goes_out_as_soon_as_nothing_is_in_flight() {
        let t0 = Instant::now();
        let mut s: Schedule<&str> = restored(Schedule::new(config(), true));
        s.tick(t0).start.expect("epoch 5");
        s.savepoint_requested(WaitingSavepoint {
            stop: false,
            drain: false,
            request: "first",
        });
        assert!(s.start_now(t0).is_none(), "it waits for epoch 5");
        s.ack(Epoch(5), vec![]);
        s.ack(Epoch(5), vec![]);
        s.completed(t0, Vec::new());
        let sp = s.start_now(t0).expect("the savepoint's epoch");
        assert_eq!(
            (sp.epoch, sp.kind, sp.savepoint),
            (Epoch(6), BarrierKind::Savepoint, Some("first"))
        );
    }

    #[test]
    fn nothing_starts_after_a_stop_with_savepoint() {
        let t0 = Instant::now();
        let mut s: Schedule<()> = restored(Schedule::new(config(), true));
        s.savepoint_requested(WaitingSavepoint {
            stop: true,
            drain: true,
            request: (),
        });
        let stop = s.start_now(t0).expect("the stop");
        assert_eq!(stop.kind, BarrierKind::StopWithSavepoint { drain: true });
        assert!(s.finishing());
        s.ack(Epoch(5), vec![]);
        s.ack(Epoch(5), vec![]);
        s.completed(t0, Vec::new());
        assert!(s.tick(t0 + Duration::from_secs(60)).start.is_none());
        assert!(s.start_now(t0).is_none());
    }

    #[test]
    fn min_pause_delays_the_next_periodic_epoch() {
        let t0 = Instant::now();
        let mut s: Schedule<()> = restored(Schedule::new(
            ScheduleConfig {
                min_pause: Duration::from_secs(3),
                ..config()
            },
            true,
        ));
        started(s.tick(t0));
        s.ack(Epoch(5), vec![]);
        s.ack(Epoch(5), vec![]);
        s.completed(t0 + Duration::from_secs(1), Vec::new());
        assert!(s.tick(t0 + Duration::from_secs(2)).start.is_none());
        assert_eq!(started(s.tick(t0 + Duration::from_secs(4))).0, Epoch(6));
    }

    #[test]
    fn an_epoch_still_in_flight_when_the_job_ends_is_abandoned() {
        let t0 = Instant::now();
        let mut s: Schedule<()> = restored(Schedule::new(config(), true));
        assert_eq!(s.abandon(), None);
        started(s.tick(t0));
        assert_eq!(s.abandon(), Some(Epoch(5)));
    }
}
