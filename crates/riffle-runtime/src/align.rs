//! Barrier alignment: an input that delivered barrier N is not read again until all
//! inputs delivered it.

use riffle_core::{Barrier, Epoch};
use std::time::{Duration, Instant};

/// A barrier out of the protocol's order on one input: the sources inject barriers in
/// epoch order and channels are FIFO, so only a bug or a peer worker that broke the
/// protocol sends one. The task fails with it (the attempt restarts), never panics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AlignError {
    /// A barrier of another epoch arrived while one was being aligned.
    #[error("input {input} delivered the barrier of epoch {got} while epoch {aligning} was being aligned")]
    OtherEpoch {
        input: usize,
        got: Epoch,
        aligning: Epoch,
    },
    /// An input delivered a second barrier before the one it is blocked on completed.
    #[error(
        "input {input} delivered a second barrier (epoch {got}) while blocked on epoch {aligning}"
    )]
    Twice {
        input: usize,
        got: Epoch,
        aligning: Epoch,
    },
    /// A barrier arrived on an input that does not exist.
    #[error("a barrier arrived on input {input}, of {inputs}")]
    NoSuchInput { input: usize, inputs: usize },
}

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
    /// # Errors
    /// A barrier out of order ([`AlignError`]); the aligner is unchanged.
    pub fn on_barrier(&mut self, input: usize, barrier: Barrier) -> Result<Alignment, AlignError> {
        let inputs = self.blocked.len();
        if input >= inputs {
            return Err(AlignError::NoSuchInput { input, inputs });
        }
        match self.pending {
            None => self.pending = Some((barrier, Instant::now())),
            Some((pending, _)) if pending.epoch != barrier.epoch => {
                return Err(AlignError::OtherEpoch {
                    input,
                    got: barrier.epoch,
                    aligning: pending.epoch,
                })
            }
            Some((pending, _)) if self.blocked[input] => {
                return Err(AlignError::Twice {
                    input,
                    got: barrier.epoch,
                    aligning: pending.epoch,
                })
            }
            Some(_) => {}
        }
        self.blocked[input] = true;
        Ok(self.try_complete())
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
    use riffle_core::BarrierKind;

    fn barrier(epoch: u64) -> Barrier {
        Barrier {
            epoch: Epoch(epoch),
            kind: BarrierKind::Checkpoint,
        }
    }

    #[test]
    fn input_is_blocked_until_all_inputs_deliver() {
        let mut a = BarrierAligner::new(3);
        assert_eq!(a.on_barrier(1, barrier(1)).unwrap(), Alignment::Waiting);
        assert!(a.is_blocked(1));
        assert!(!a.is_blocked(0));
        assert_eq!(a.on_barrier(0, barrier(1)).unwrap(), Alignment::Waiting);
        let done = a.on_barrier(2, barrier(1)).unwrap();
        assert!(matches!(done, Alignment::Complete { barrier: b, .. } if b.epoch == Epoch(1)));
        assert!(a.blocked().iter().all(|b| !b));
    }

    #[test]
    fn ended_input_counts_as_aligned() {
        let mut a = BarrierAligner::new(2);
        assert_eq!(a.on_barrier(0, barrier(4)).unwrap(), Alignment::Waiting);
        assert!(matches!(a.on_end(1), Alignment::Complete { .. }));
    }

    #[test]
    fn a_barrier_out_of_order_is_an_error_that_changes_nothing() {
        let mut a = BarrierAligner::new(2);
        a.on_barrier(0, barrier(25)).unwrap();
        // A forged or buggy barrier of another epoch: an error naming both, not a panic.
        let e = a.on_barrier(1, barrier(24)).unwrap_err();
        assert_eq!(
            e,
            AlignError::OtherEpoch {
                input: 1,
                got: Epoch(24),
                aligning: Epoch(25)
            }
        );
        assert!(e.to_string().contains("epoch 24") && e.to_string().contains("epoch 25"));
        assert!(!a.is_blocked(1));
        // The same input again while blocked, and an input that does not exist.
        assert!(matches!(
            a.on_barrier(0, barrier(25)),
            Err(AlignError::Twice { input: 0, .. })
        ));
        assert!(matches!(
            a.on_barrier(7, barrier(25)),
            Err(AlignError::NoSuchInput {
                input: 7,
                inputs: 2
            })
        ));
        // The real barrier still completes the alignment.
        assert!(matches!(
            a.on_barrier(1, barrier(25)).unwrap(),
            Alignment::Complete { .. }
        ));
    }
}
