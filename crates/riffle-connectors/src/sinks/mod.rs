//! Sinks: blackhole, stdout and rolling files (partitioned or not).

mod blackhole;
mod collect;
mod debezium;
mod file_commit;
mod files;
mod output_owner;
pub mod partitions;
mod stdout;

pub use blackhole::BlackholeSinkFactory;
pub use collect::CollectSinkFactory;
pub use debezium::debezium_envelope;
pub use files::{read_jsonl_lines, FileFormat, FileSinkFactory, RollingPolicy};
pub use stdout::{StdoutFormat, StdoutSinkFactory};

use riffle_core::{RecordBatch, Result, ROW_KIND_FIELD, TIMESTAMP_FIELD};

/// Drops the internal `_timestamp` column: outputs carry only the user's columns.
pub fn without_timestamp(batch: &RecordBatch) -> Result<RecordBatch> {
    without_column(batch, TIMESTAMP_FIELD)
}

/// Drops a changelog's `_row_kind` column, once a sink has read the kinds.
pub fn without_row_kind(batch: &RecordBatch) -> Result<RecordBatch> {
    without_column(batch, ROW_KIND_FIELD)
}

fn without_column(batch: &RecordBatch, name: &str) -> Result<RecordBatch> {
    match batch.schema().index_of(name) {
        Ok(i) => {
            let keep: Vec<usize> = (0..batch.num_columns()).filter(|c| *c != i).collect();
            Ok(batch.project(&keep)?)
        }
        Err(_) => Ok(batch.clone()),
    }
}
