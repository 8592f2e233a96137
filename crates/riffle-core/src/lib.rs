//! riffle-core: the vocabulary every other riffle crate speaks.
//!
//! ```text
//!   Source ──Message::Data/Watermark/Barrier/End──▶ Operator ──▶ … ──▶ Sink
//!     │                                                │
//!     └── offsets (replayable)        state as Arrow batches, partitioned by KeyGroup
//! ```
//!
//! Data moves as Arrow [`RecordBatch`]es carrying an event-time column
//! [`TIMESTAMP_FIELD`] (nanoseconds, UTC). This crate defines the messages on a channel,
//! the time and key-group model, the traits operators, sources and sinks implement, and
//! the crate-wide [`Error`]. It knows nothing of the runtime or any concrete operator.

pub mod error;
pub mod key_group;
pub mod lookup;
pub mod message;
pub mod operator;
pub mod output_place;
pub mod row_kind;
pub mod schema;
pub mod sink;
pub mod source;
pub mod state;
pub mod time;

pub use datafusion_common::arrow;
pub use datafusion_common::arrow::record_batch::RecordBatch;
pub use error::{Error, Result};
pub use key_group::{KeyGroup, KeyHasher, DEFAULT_MAX_PARALLELISM, KEY_HASH_ALGORITHM};
pub use lookup::{LookupMatches, LookupTable, LookupTableFactory};
pub use message::{Barrier, BarrierKind, Epoch, Message};
pub use operator::{
    CounterValues, Operator, OperatorContext, OperatorFactory, OperatorId, StateBytes, StateMemory,
};
pub use output_place::{overlapping_outputs, OutputPlace};
pub use parquet;
pub use row_kind::{
    row_kind_array, row_kind_field, row_kinds, RowKind, StreamKind, ROW_KIND_FIELD,
};
pub use schema::{timestamp_type, StreamSchema, TIMESTAMP_FIELD};
pub use sink::{
    committables_by_sink, sort_for_commit, Committable, Committer, OutputOwner, Sink, SinkContext,
    SinkFactory, SinkSummary, StagedOutput, Unpublished,
};
pub use source::{Source, SourceFactory, SourcePoll, TimeBounds};
pub use state::{
    batch_identity, hand_over, is_handed, may_reference_previous, BatchSource, CommittedEpoch,
    OperatorState, StreamedBatches,
};
pub use time::{EventTime, Watermark};
