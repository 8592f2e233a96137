//! Operator state as Arrow batches.

use crate::RecordBatch;

/// Name of the key-group column (UInt16) that leads every state batch.
pub const KEY_GROUP_FIELD: &str = "_key_group";

/// Schema metadata key of a state batch: comma-separated columns that identify a row;
/// a row in a later file with the same values replaces the earlier one (delta
/// snapshots). Readers of state (`riffle state query`) keep the last row per key.
pub const ROW_KEY_METADATA: &str = "riffle.row_key";

/// Schema metadata key of a state batch that holds an operator's own bookkeeping (the
/// window aggregate's `fired_through_end`), not rows a user would query: restored like any
/// state, left out of `riffle state query`.
pub const INTERNAL_METADATA: &str = "riffle.internal";

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
