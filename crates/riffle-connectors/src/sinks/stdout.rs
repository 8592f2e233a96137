//! A sink that prints rows to standard output.

use super::{without_row_kind, without_timestamp};
use riffle_core::arrow::array::{ArrayRef, StringArray};
use riffle_core::arrow::datatypes::{DataType, Field, Schema};
use riffle_core::arrow::json::LineDelimitedWriter;
use riffle_core::arrow::util::pretty::pretty_format_batches;
use riffle_core::{
    row_kinds, Error, RecordBatch, Result, Sink, SinkContext, SinkFactory, SinkSummary,
    StreamSchema, ROW_KIND_FIELD,
};
use std::io::Write;
use std::sync::Arc;

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

/// A changelog's row kinds as Flink's print connector shows them (`+I`, `-U`, `+U`,
/// `-D`), in a first column `_row_kind`; other batches unchanged.
fn with_printed_kinds(batch: RecordBatch) -> Result<RecordBatch> {
    let Some(kinds) = row_kinds(&batch)? else {
        return Ok(batch);
    };
    let rest = without_row_kind(&batch)?;
    let mut fields = vec![Field::new(ROW_KIND_FIELD, DataType::Utf8, false)];
    fields.extend(rest.schema().fields().iter().map(|f| f.as_ref().clone()));
    let mut columns: Vec<ArrayRef> = vec![Arc::new(StringArray::from_iter_values(
        kinds.iter().map(|k| k.short()),
    ))];
    columns.extend(rest.columns().iter().cloned());
    Ok(RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns,
    )?)
}

impl Sink for StdoutSink {
    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let batch = with_printed_kinds(without_timestamp(batch)?)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use riffle_core::arrow::array::Int64Array;
    use riffle_core::arrow::util::pretty::pretty_format_batches;
    use riffle_core::{row_kind_array, row_kind_field, RowKind};

    #[test]
    fn a_changelog_is_printed_with_flinks_row_kinds_first() {
        let schema = Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            row_kind_field(),
        ]);
        let batch = RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(Int64Array::from(vec![1, 1])),
                Arc::new(row_kind_array([
                    RowKind::UpdateBefore,
                    RowKind::UpdateAfter,
                ])),
            ],
        )
        .unwrap();
        let printed = pretty_format_batches(&[with_printed_kinds(batch).unwrap()])
            .unwrap()
            .to_string();
        assert!(printed.contains("| _row_kind | k |"), "{printed}");
        assert!(printed.contains("| -U        | 1 |"), "{printed}");
        assert!(printed.contains("| +U        | 1 |"), "{printed}");
    }
}
