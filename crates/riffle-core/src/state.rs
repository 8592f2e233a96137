//! Operator state as Arrow batches.

use crate::{Epoch, RecordBatch};

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

/// Schema metadata key of a state batch an operator no longer holds whole: only its
/// first column ([`KEY_GROUP_FIELD`]) is left, which names the file of an earlier,
/// committed snapshot that holds it (see [`hand_over`]). Such a batch can only be
/// referenced, never written.
pub const HANDED_METADATA: &str = "riffle.handed";

/// What remains of `batch`, a state batch already written by a committed snapshot, once
/// its operator stops holding its rows: the first column alone, whose buffer identifies
/// the batch to the writer of checkpoints (the same array, so the same identity), so
/// that later snapshots can name the file that holds it. The rest of its memory is freed.
///
/// Only a snapshot [`may_reference_previous`] allows may hand such a batch; the writer
/// refuses one it cannot resolve to a file.
pub fn hand_over(batch: &RecordBatch) -> RecordBatch {
    let Some(first) = batch.columns().first() else {
        return batch.clone();
    };
    let mut metadata = batch.schema().metadata().clone();
    metadata.insert(HANDED_METADATA.to_string(), order_scope(batch).to_string());
    let field = batch.schema().field(0).clone();
    let schema = crate::arrow::datatypes::Schema::new_with_metadata(vec![field], metadata);
    match RecordBatch::try_new(std::sync::Arc::new(schema), vec![first.clone()]) {
        Ok(handed) => handed,
        // One column of the batch's own type and length: cannot fail; keep it whole.
        Err(_) => batch.clone(),
    }
}

/// Which batches of a snapshot a restore applies in order against each other: those of
/// one schema (metadata included), whose rows may replace each other's. A handed-over
/// batch keeps its schema's (in its [`HANDED_METADATA`]). The value holds within one
/// process only.
pub fn order_scope(batch: &RecordBatch) -> u64 {
    use std::hash::{Hash, Hasher};
    if let Some(scope) = batch.schema().metadata().get(HANDED_METADATA) {
        if let Ok(scope) = scope.parse() {
            return scope;
        }
    }
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    batch.schema().hash(&mut hasher);
    hasher.finish()
}

/// Whether `batch` was [`hand_over`]ed: it holds no state rows of its own.
pub fn is_handed(batch: &RecordBatch) -> bool {
    batch.schema().metadata().contains_key(HANDED_METADATA)
}

/// Whether a snapshot for `epoch` may reference files of the epoch before it, given the
/// newest epoch its process heard committed. Only then is that epoch surely the newest
/// committed one: nothing newer can commit before `epoch` does, so its manifest still
/// references the files and garbage collection keeps them until `epoch`'s manifest
/// references them too. The rule of every writer of acks' state on a cluster worker
/// (one process's coordinator references its last committed epoch, which is never
/// older), and of an operator that [`hand_over`]s its batches.
pub fn may_reference_previous(epoch: Epoch, heard_committed: Option<Epoch>) -> bool {
    epoch.0 > 0 && heard_committed == Some(Epoch(epoch.0 - 1))
}

/// The newest epoch a job committed, as this process heard it: set by the coordinator
/// (or, on a cluster worker, by worker 0's word of each commit), read by sources that
/// commit outside (Kafka offsets) and operators that [`hand_over`] their batches.
#[derive(Debug, Clone, Default)]
pub struct CommittedEpoch(std::sync::Arc<std::sync::atomic::AtomicU64>);

impl CommittedEpoch {
    /// Epoch `epoch` committed; an older word than one heard already changes nothing.
    pub fn heard(&self, epoch: Epoch) {
        self.0
            .fetch_max(epoch.0, std::sync::atomic::Ordering::Release);
    }

    /// The newest committed epoch heard of, if any.
    pub fn newest(&self) -> Option<Epoch> {
        match self.0.load(std::sync::atomic::Ordering::Acquire) {
            0 => None,
            epoch => Some(Epoch(epoch)),
        }
    }
}
