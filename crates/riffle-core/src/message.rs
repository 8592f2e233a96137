//! Messages that flow on the channels between tasks.

use crate::time::Watermark;
use crate::RecordBatch;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A checkpoint number. Epochs only increase within a pipeline's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Epoch(pub u64);

impl fmt::Display for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// What a barrier asks of the tasks it passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BarrierKind {
    /// A periodic checkpoint.
    Checkpoint,
    /// A savepoint; the job runs on.
    Savepoint,
    /// A savepoint after which the job stops; with `drain`, sources first emit
    /// [`Watermark::MAX`] so every open window fires.
    StopWithSavepoint { drain: bool },
    /// The last checkpoint of a bounded run: every source has ended and emitted its final
    /// watermark, so this epoch commits all remaining output. Sources stop after it.
    EndOfInput,
}

/// A checkpoint barrier: every row before it belongs to `epoch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Barrier {
    /// The epoch the barrier closes.
    pub epoch: Epoch,
    /// Checkpoint, savepoint, or stop-with-savepoint.
    pub kind: BarrierKind,
}

/// One message on a channel, in order.
#[derive(Debug, Clone)]
pub enum Message {
    /// Rows.
    Data(RecordBatch),
    /// Event-time progress of the sending subtask.
    Watermark(Watermark),
    /// A checkpoint barrier.
    Barrier(Barrier),
    /// The sender has no more messages.
    End,
}
