//! Chains of snapshot batches continued across a restore: a subtask that restored its
//! own files, as the restored checkpoint wrote them, may go on from them instead of
//! writing its whole state again at its first snapshot, and the checkpoint writer must
//! then know which file holds each of those batches (docs/engine.md, "State beyond
//! memory").
//!
//! The subtasks note here what they continued; the writer of their acks takes it at the
//! run's first snapshot, as if the epoch before it had recorded those files. That epoch
//! stands for the restored one: no epoch between them (partial ones recovery swept,
//! damaged ones it skipped) is anyone's base, so the state before the run's first
//! epoch is the restored state, and the usual rule (a snapshot may reference the epoch
//! before it once committed) holds. Until the run's first commit, the restored epoch
//! is the newest committed one, which garbage collection keeps; from then on a
//! manifest that references its files keeps them.
//! Only a restore of the job's own checkpoint continues chains: a named savepoint's
//! files belong to the user, who may delete them, so the first snapshot after one is
//! whole (as Flink's NO_CLAIM mode).

use riffle_core::{Epoch, RecordBatch};
use riffle_state::FileEntry;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// A state file of the restored checkpoint and the batches it decoded into, handed
/// over ([`riffle_core::hand_over`]).
pub type ChainFile = (FileEntry, Vec<RecordBatch>);

/// Per (operator, subtask), the files it continued from, in order.
pub type Continued = HashMap<(String, usize), Vec<ChainFile>>;

/// The chains a restore's subtasks continued.
#[derive(Debug, Clone)]
pub struct RestoredChains {
    epoch: Epoch,
    continued: Arc<Mutex<Continued>>,
}

impl RestoredChains {
    /// For a restored state that stands for epoch `epoch` (the one before the run's
    /// first).
    pub fn new(epoch: Epoch) -> Self {
        Self {
            epoch,
            continued: Arc::default(),
        }
    }

    /// The epoch the restored state stands for: its files count as that epoch's.
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// `operator`'s subtask `subtask` continues from `files`, in order.
    pub fn continued(&self, operator: &str, subtask: usize, files: Vec<ChainFile>) {
        let mut continued = self
            .continued
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        continued.insert((operator.to_string(), subtask), files);
    }

    /// Every chain continued since the last call, to the writer.
    pub fn take(&self) -> Continued {
        let mut continued = self
            .continued
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        std::mem::take(&mut *continued)
    }
}

/// What a subtask needs to continue its chain: where to note it, as whom.
#[derive(Debug, Clone)]
pub struct ChainSeed {
    pub(crate) chains: RestoredChains,
    pub(crate) operator: String,
    pub(crate) subtask: usize,
}
