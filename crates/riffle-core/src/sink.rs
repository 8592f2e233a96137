//! The sink trait: where rows leave the pipeline.

use crate::error::Result;
use crate::schema::StreamSchema;
use crate::RecordBatch;
use std::path::PathBuf;

/// What one sink subtask wrote.
#[derive(Debug, Default, Clone)]
pub struct SinkSummary {
    /// Rows written.
    pub rows: u64,
    /// Files written, for file sinks.
    pub files: Vec<PathBuf>,
}

/// One subtask of a sink.
pub trait Sink: Send {
    /// Writes rows. Rows may be buffered until [`finish`](Sink::finish).
    ///
    /// # Errors
    /// The destination cannot be written.
    fn write(&mut self, batch: &RecordBatch) -> Result<()>;

    /// Input ended: flush and close everything, and say what was written.
    fn finish(&mut self) -> Result<SinkSummary>;
}

/// Builds sink subtasks.
pub trait SinkFactory: Send + Sync {
    /// Short description for `explain`, e.g. `files(jsonl, out/)`.
    fn describe(&self) -> String;

    /// Creates subtask `subtask` of `parallelism` for rows of `schema`.
    ///
    /// # Errors
    /// The destination cannot be opened.
    fn create(
        &self,
        schema: &StreamSchema,
        subtask: usize,
        parallelism: usize,
    ) -> Result<Box<dyn Sink>>;
}
