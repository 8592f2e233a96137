//! Operator state as Arrow batches.

use crate::RecordBatch;

/// Name of the key-group column (UInt16) that leads every state batch.
pub const KEY_GROUP_FIELD: &str = "_key_group";

/// An operator subtask's state: typed batches whose first column is
/// [`KEY_GROUP_FIELD`], so a restore at another parallelism can pick its key groups.
#[derive(Debug, Default, Clone)]
pub struct OperatorState {
    /// The state rows. Batches of one schema (metadata included) are stored in one file;
    /// an operator that gives parts of its state distinct schemas keeps them apart.
    pub batches: Vec<RecordBatch>,
}

impl OperatorState {
    /// Total rows over all batches.
    pub fn rows(&self) -> usize {
        self.batches.iter().map(|b| b.num_rows()).sum()
    }
}
