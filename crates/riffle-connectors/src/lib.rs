//! riffle-connectors: sources and sinks behind riffle-core's traits.
//!
//! ```text
//!  nexmark generator ─┐                       ┌─▶ blackhole (counts)
//!  peer generator ────┼─▶ RecordBatch stream ─┼─▶ stdout (pretty | jsonl)
//!                     │                       └─▶ files (jsonl | csv | parquet, rolling)
//! ```
//!
//! Every source here is replayable from an offset and splits over parallel subtasks so
//! that the union of subtasks' output equals a single subtask's.

mod date_time_text;
mod decode;
pub mod file_source;
mod flat_json;
pub mod io_runtime;
mod json_check;
mod json_numbers;
mod json_text;
pub mod kafka;
pub mod lookup;
pub mod nexmark;
pub mod peer;
pub mod postgres;
pub mod processing_time;
mod simd_json_gaps;
pub mod sinks;
mod time_columns;

pub use file_source::{FileSourceConfig, FileSourceFactory, MalformedRecords};
pub use lookup::{FileLookupFactory, LookupCache};
pub use nexmark::{NexmarkConfig, NexmarkSourceFactory, NexmarkTable};
pub use peer::PeerSourceFactory;
pub use postgres::{
    CdcStartup, PostgresCdcConfig, PostgresCdcFactory, PostgresLookupConfig, PostgresLookupFactory,
    PostgresSinkConfig, PostgresSinkFactory, Secret, WriteMode,
};
pub use processing_time::ProcessingTimeSourceFactory;
