//! Barrier alignment: an input that delivered barrier N is not read again until all
//! inputs delivered it.

use riffle_core::Barrier;
use std::time::{Duration, Instant};

/// Tracks which inputs are blocked on the barrier being aligned.
#[derive(Debug)]
pub struct BarrierAligner {
    blocked: Vec<bool>,
    ended: Vec<bool>,
    pending: Option<(Barrier, Instant)>,
}

/// The outcome of delivering a barrier on one input.
#[derive(Debug, PartialEq)]
pub enum Alignment {
    /// Still waiting for other inputs.
    Waiting,
    /// Every live input delivered the barrier; snapshot now.
    Complete {
        /// The aligned barrier.
        barrier: Barrier,
        /// Time from the first input's barrier to the last.
        alignment: Duration,
    },
}

impl BarrierAligner {
    /// An aligner for `inputs` channels.
    pub fn new(inputs: usize) -> Self {
        Self {
            blocked: vec![false; inputs],
            ended: vec![false; inputs],
            pending: None,
        }
    }

    /// Whether `input` must not be read now.
    pub fn is_blocked(&self, input: usize) -> bool {
        self.blocked[input]
    }

    /// The blocked flags, indexed by input.
    pub fn blocked(&self) -> &[bool] {
        &self.blocked
    }

    /// `input` delivered `barrier`.
    ///
    /// # Panics
    /// If a barrier of another epoch arrives while one is being aligned: the sources
    /// inject barriers in epoch order and channels are FIFO, so this is a bug.
    pub fn on_barrier(&mut self, input: usize, barrier: Barrier) -> Alignment {
        match self.pending {
            None => self.pending = Some((barrier, Instant::now())),
            Some((pending, _)) => assert_eq!(
                pending.epoch, barrier.epoch,
                "barrier for epoch {} arrived while aligning epoch {}",
                barrier.epoch, pending.epoch
            ),
        }
        self.blocked[input] = true;
        self.try_complete()
    }

    /// `input` ended; it no longer needs to deliver barriers.
    pub fn on_end(&mut self, input: usize) -> Alignment {
        self.ended[input] = true;
        if self.pending.is_some() {
            self.try_complete()
        } else {
            Alignment::Waiting
        }
    }

    fn try_complete(&mut self) -> Alignment {
        let aligned = self
            .blocked
            .iter()
            .zip(&self.ended)
            .all(|(blocked, ended)| *blocked || *ended);
        if !aligned {
            return Alignment::Waiting;
        }
        let (barrier, started) = self
            .pending
            .take()
            .expect("aligning without a pending barrier");
        self.blocked.iter_mut().for_each(|b| *b = false);
        Alignment::Complete {
            barrier,
            alignment: started.elapsed(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use riffle_core::{BarrierKind, Epoch};

    fn barrier(epoch: u64) -> Barrier {
        Barrier {
            epoch: Epoch(epoch),
            kind: BarrierKind::Checkpoint,
        }
    }

    #[test]
    fn input_is_blocked_until_all_inputs_deliver() {
        let mut a = BarrierAligner::new(3);
        assert_eq!(a.on_barrier(1, barrier(1)), Alignment::Waiting);
        assert!(a.is_blocked(1));
        assert!(!a.is_blocked(0));
        assert_eq!(a.on_barrier(0, barrier(1)), Alignment::Waiting);
        let done = a.on_barrier(2, barrier(1));
        assert!(matches!(done, Alignment::Complete { barrier: b, .. } if b.epoch == Epoch(1)));
        assert!(a.blocked().iter().all(|b| !b));
    }

    #[test]
    fn ended_input_counts_as_aligned() {
        let mut a = BarrierAligner::new(2);
        assert_eq!(a.on_barrier(0, barrier(4)), Alignment::Waiting);
        assert!(matches!(a.on_end(1), Alignment::Complete { .. }));
    }
}
