//! Operator state as Arrow batches.

use crate::arrow::array::{ArrayRef, UInt16Array};
use crate::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use crate::{Epoch, RecordBatch};
use std::sync::{Arc, Mutex};

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
    /// Rows too many to hold at once, each standing in `batches` as its
    /// [`placeholder`](StreamedBatches::placeholder), in order.
    pub streamed: Vec<StreamedBatches>,
}

impl OperatorState {
    /// The state of `batches`, all held in memory.
    pub fn of(batches: Vec<RecordBatch>) -> Self {
        Self {
            batches,
            streamed: Vec::new(),
        }
    }

    /// Total rows over all batches (a streamed part counts as its placeholder's one row).
    pub fn rows(&self) -> usize {
        self.batches.iter().map(|b| b.num_rows()).sum()
    }

    /// The streamed part `batch` stands in for, if it is a placeholder.
    pub fn streamed_for(&self, batch: &RecordBatch) -> Option<&StreamedBatches> {
        self.streamed.iter().find(|s| s.stands_for(batch))
    }
}

/// Where a [`StreamedBatches`] part's rows come from, one batch at a time.
pub type BatchSource = Box<dyn Iterator<Item = crate::Result<RecordBatch>> + Send>;

/// State rows an operator gives as a source of batches of one schema, not in memory (a
/// spill tier's groups, read from a snapshot of its store): the writer of checkpoints
/// pulls them a batch at a time into files of bounded size, so a snapshot of state
/// larger than memory never holds it whole (docs/engine.md, "State beyond memory").
///
/// In the snapshot, and in the operator's chain afterwards, the rows are stood for by
/// a [`placeholder`](Self::placeholder): a handed-over batch ([`hand_over`]) whose
/// identity names, to the writer, the files they went to. Clones share the one source,
/// which can be read once.
#[derive(Clone)]
pub struct StreamedBatches {
    schema: SchemaRef,
    placeholder: RecordBatch,
    source: Arc<Mutex<Option<BatchSource>>>,
}

impl std::fmt::Debug for StreamedBatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamedBatches")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

impl StreamedBatches {
    /// Rows of `schema` (whose first column is [`KEY_GROUP_FIELD`]) that `source` gives.
    pub fn new(schema: SchemaRef, source: BatchSource) -> Self {
        // One row of its own allocation: a placeholder's identity is its buffer's
        // address, unique while the placeholder lives.
        let column: ArrayRef = Arc::new(UInt16Array::from(vec![0u16]));
        let key_group = Field::new(KEY_GROUP_FIELD, DataType::UInt16, false);
        let handed = handed_schema(&schema, scope_of(&schema), key_group);
        // A UInt16 column of one row under a schema of that one field: cannot fail.
        let placeholder = RecordBatch::try_new(Arc::new(handed), vec![column])
            .unwrap_or_else(|_| RecordBatch::new_empty(schema.clone()));
        Self {
            schema,
            placeholder,
            source: Arc::new(Mutex::new(Some(source))),
        }
    }

    /// The schema of the rows.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// The batch that stands for these rows in the snapshot's batches and, once
    /// written, in the operator's chain.
    pub fn placeholder(&self) -> &RecordBatch {
        &self.placeholder
    }

    /// Whether `batch` is this part's placeholder (or what [`hand_over`] left of it).
    pub fn stands_for(&self, batch: &RecordBatch) -> bool {
        let mine = batch_identity(&self.placeholder);
        mine.is_some() && batch_identity(batch) == mine
    }

    /// The rows' source, taken: the one reader of them.
    ///
    /// # Errors
    /// It was taken already.
    pub fn take_source(&self) -> crate::Result<BatchSource> {
        self.source
            .lock()
            .map_or(None, |mut source| source.take())
            .ok_or_else(|| crate::Error::Spill("a streamed state part was read twice".into()))
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
    let schema = batch.schema();
    let schema = handed_schema(&schema, order_scope(batch), schema.field(0).clone());
    match RecordBatch::try_new(Arc::new(schema), vec![first.clone()]) {
        Ok(handed) => handed,
        // One column of the batch's own type and length: cannot fail; keep it whole.
        Err(_) => batch.clone(),
    }
}

/// The schema of a handed-over batch of `schema`, in order scope `scope`: `first`
/// (its `_key_group` field) alone, with `schema`'s metadata and the scope in
/// [`HANDED_METADATA`].
fn handed_schema(schema: &SchemaRef, scope: u64, first: Field) -> Schema {
    let mut metadata = schema.metadata().clone();
    metadata.insert(HANDED_METADATA.to_string(), scope.to_string());
    Schema::new_with_metadata(vec![first], metadata)
}

/// A batch's identity, as the writer of checkpoints knows it: where its first column's
/// values live, and its extent. The same array, kept alive, keeps it; a handed-over
/// batch ([`hand_over`]) keeps its batch's.
pub fn batch_identity(batch: &RecordBatch) -> Option<(usize, usize, usize)> {
    let data = batch.columns().first()?.to_data();
    let buffer = data.buffers().first()?;
    Some((buffer.as_ptr() as usize, data.offset(), batch.num_rows()))
}

/// Which batches of a snapshot a restore applies in order against each other: those of
/// one schema (metadata included), whose rows may replace each other's. A handed-over
/// batch keeps its schema's (in its [`HANDED_METADATA`]). The value holds within one
/// process only.
pub fn order_scope(batch: &RecordBatch) -> u64 {
    if let Some(scope) = batch.schema().metadata().get(HANDED_METADATA) {
        if let Ok(scope) = scope.parse() {
            return scope;
        }
    }
    scope_of(&batch.schema())
}

/// The [`order_scope`] of batches of `schema`.
fn scope_of(schema: &SchemaRef) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    schema.hash(&mut hasher);
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
