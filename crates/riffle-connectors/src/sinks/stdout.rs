//! A sink that prints rows to standard output.

use super::without_timestamp;
use riffle_core::arrow::json::LineDelimitedWriter;
use riffle_core::arrow::util::pretty::pretty_format_batches;
use riffle_core::{
    Error, RecordBatch, Result, Sink, SinkContext, SinkFactory, SinkSummary, StreamSchema,
};
use std::io::Write;

/// How rows are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StdoutFormat {
    /// A table per batch.
    Pretty,
    /// One JSON object per line.
    Jsonl,
}

/// Builds stdout sinks.
#[derive(Debug)]
pub struct StdoutSinkFactory {
    format: StdoutFormat,
}

impl StdoutSinkFactory {
    /// Prints in `format`.
    pub fn new(format: StdoutFormat) -> Self {
        Self { format }
    }
}

impl SinkFactory for StdoutSinkFactory {
    fn describe(&self) -> String {
        format!("stdout({:?})", self.format).to_lowercase()
    }

    fn create(&self, _: &StreamSchema, _: &SinkContext) -> Result<Box<dyn Sink>> {
        Ok(Box::new(StdoutSink {
            format: self.format,
            rows: 0,
        }))
    }
}

struct StdoutSink {
    format: StdoutFormat,
    rows: u64,
}

fn stdout_error(e: std::io::Error) -> Error {
    Error::io("<stdout>", e)
}

impl Sink for StdoutSink {
    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let batch = without_timestamp(batch)?;
        self.rows += batch.num_rows() as u64;
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        match self.format {
            StdoutFormat::Pretty => {
                let table = pretty_format_batches(&[batch])?;
                writeln!(out, "{table}").map_err(stdout_error)?;
            }
            StdoutFormat::Jsonl => {
                let mut writer = LineDelimitedWriter::new(&mut out);
                writer.write(&batch)?;
                writer.finish()?;
            }
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<SinkSummary> {
        std::io::stdout().flush().map_err(stdout_error)?;
        Ok(SinkSummary {
            rows: self.rows,
            files: Vec::new(),
        })
    }
}
