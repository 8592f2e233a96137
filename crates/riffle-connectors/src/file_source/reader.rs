//! Reading one file: lines for JSONL and CSV (with line numbers for errors), row groups
//! for Parquet; turning the event-time column into `_timestamp`.

use super::compression::Compression;
use super::lines::{is_blank, LineBlocks};
use crate::decode::{event_time_nanos, field_of, widen, RecordDecoder};
use crate::sinks::FileFormat;
use riffle_core::arrow::array::{
    Array, AsArray, BooleanArray, StringArray, UInt16Array, UInt64Array,
};
use riffle_core::arrow::array::{ArrayRef, RecordBatchOptions};
use riffle_core::arrow::compute::concat_batches;
use riffle_core::arrow::compute::kernels::cast::{cast_with_options, CastOptions};
use riffle_core::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use riffle_core::operator::OperatorCounters;
use riffle_core::parquet::arrow::arrow_reader::{
    ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder,
};
use riffle_core::parquet::arrow::ProjectionMask;
use riffle_core::state::KEY_GROUP_FIELD;
use riffle_core::{Error, OperatorState, RecordBatch, Result, StreamSchema};
use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// An open file and the position in it.
pub(crate) struct FileReader {
    path: PathBuf,
    kind: Kind,
    schema: SchemaRef,
    batch_rows: usize,
}

enum Kind {
    /// JSONL or CSV: next line number to read (1-based) and the open reader.
    Lines {
        reader: LineBlocks<Box<dyn Read + Send>>,
        next_line: u64,
        decoder: Box<RecordDecoder>,
        /// Where each line of the current batch ends (kept for its allocation).
        ends: Vec<usize>,
    },
    /// Parquet: rows already returned, and the columns read (ascending) if not all.
    Parquet {
        reader: ParquetRecordBatchReader,
        rows: u64,
        read: Option<Vec<usize>>,
    },
}

impl FileReader {
    /// Opens `path`, skipping `skip` lines (JSONL/CSV, after the header) or rows
    /// (Parquet), to read the columns `read` (ascending indices into `schema`; the
    /// others NULL) or all.
    pub(crate) fn open(
        path: &Path,
        format: FileFormat,
        schema: SchemaRef,
        batch_rows: usize,
        skip: u64,
        read: Option<Vec<usize>>,
    ) -> Result<Self> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let kind = match format {
            FileFormat::Parquet => {
                let reader = ParquetRecordBatchReaderBuilder::try_new(file)
                    .and_then(|b| {
                        let columns = match &read {
                            Some(read) => ProjectionMask::roots(b.parquet_schema(), read.clone()),
                            None => ProjectionMask::all(),
                        };
                        b.with_batch_size(batch_rows)
                            .with_offset(skip as usize)
                            .with_projection(columns)
                            .build()
                    })
                    .map_err(|e| Error::MalformedRecord {
                        file: path.into(),
                        line: 0,
                        field: None,
                        message: format!("not a readable Parquet file: {e}"),
                    })?;
                Kind::Parquet {
                    reader,
                    rows: skip,
                    read,
                }
            }
            FileFormat::Jsonl | FileFormat::Csv => {
                let text = Compression::of(path)
                    .reader(file)
                    .map_err(|e| Error::io(path, e))?;
                let mut reader = LineBlocks::new(text);
                let header = u64::from(format == FileFormat::Csv);
                // Position counts lines after the header; a fresh CSV skips its header.
                let to_skip = if skip == 0 { header } else { skip };
                let skipped = reader.skip_lines(to_skip).map_err(|e| Error::io(path, e))?;
                Kind::Lines {
                    reader,
                    next_line: 1 + skipped,
                    decoder: Box::new(RecordDecoder::reading(format, &schema, read)),
                    ends: Vec::new(),
                }
            }
        };
        Ok(Self {
            path: path.into(),
            kind,
            schema,
            batch_rows: batch_rows.max(1),
        })
    }

    /// Where to resume: the next line number minus one (JSONL/CSV) or rows read (Parquet).
    pub(super) fn position(&self) -> u64 {
        match &self.kind {
            Kind::Lines { next_line, .. } => next_line - 1,
            Kind::Parquet { rows, .. } => *rows,
        }
    }

    /// The next batch with `_timestamp` appended, or `None` at end of file.
    pub(super) fn next_batch(
        &mut self,
        skip_malformed: bool,
        event_time: usize,
        out_schema: &StreamSchema,
        counters: &OperatorCounters,
    ) -> Result<Option<RecordBatch>> {
        let Some((batch, lines)) = self.next_records(skip_malformed, counters)? else {
            return Ok(None);
        };
        with_event_time(
            &self.path,
            batch,
            &lines,
            event_time,
            out_schema,
            skip_malformed,
            counters,
        )
        .map(Some)
    }

    /// The next batch of records as the file holds them, with each row's line number
    /// (row number for Parquet), or `None` at end of file.
    pub(crate) fn next_records(
        &mut self,
        skip_malformed: bool,
        counters: &OperatorCounters,
    ) -> Result<Option<(RecordBatch, Vec<u64>)>> {
        Ok(Some(match &mut self.kind {
            Kind::Parquet { reader, rows, read } => match reader.next() {
                None => return Ok(None),
                Some(batch) => {
                    let batch = batch.map_err(|e| Error::MalformedRecord {
                        file: self.path.clone(),
                        line: *rows + 1,
                        field: None,
                        message: format!("unreadable Parquet data: {e}"),
                    })?;
                    let columns = match read {
                        Some(read) => widen(batch.columns(), read, &self.schema, batch.num_rows()),
                        None => batch.columns().to_vec(),
                    };
                    let batch = as_declared(&self.path, columns, &self.schema, batch.num_rows())?;
                    let first = *rows + 1;
                    *rows += batch.num_rows() as u64;
                    let lines: Vec<u64> = (first..first + batch.num_rows() as u64).collect();
                    (batch, lines)
                }
            },
            Kind::Lines {
                reader,
                next_line,
                decoder,
                ends,
            } => {
                let text = reader
                    .next_lines(self.batch_rows, ends)
                    .map_err(|e| Error::io(&self.path, e))?;
                let first = *next_line;
                *next_line += ends.len() as u64;
                let lines = Lines::new(text, ends, first);
                if lines.numbers.is_empty() {
                    return Ok(None);
                }
                let batch = decoder.decode(&lines.records(), lines.numbers.len());
                match batch {
                    Ok(Some(batch)) if batch.num_rows() == lines.numbers.len() => {
                        (batch, lines.numbers)
                    }
                    _ => decode_line_by_line(
                        &self.path,
                        decoder,
                        &self.schema,
                        &lines,
                        skip_malformed,
                        counters,
                    )?,
                }
            }
        }))
    }
}

/// Parquet columns as the table declares them: a file may hold a timestamp in another
/// unit, or an INT where the table has BIGINT. A column that cannot be converted is
/// named with the file.
fn as_declared(
    path: &Path,
    columns: Vec<ArrayRef>,
    schema: &SchemaRef,
    rows: usize,
) -> Result<RecordBatch> {
    let bad = |message: String| Error::MalformedRecord {
        file: path.into(),
        line: 0,
        field: None,
        message,
    };
    if columns.len() != schema.fields().len() {
        return Err(bad(format!(
            "the file has {} columns, the table declares {}",
            columns.len(),
            schema.fields().len()
        )));
    }
    let exact = CastOptions {
        safe: false,
        ..Default::default()
    };
    let columns = columns
        .into_iter()
        .zip(schema.fields())
        .map(|(column, field)| {
            if column.data_type() == field.data_type() {
                return Ok(column);
            }
            cast_with_options(&column, field.data_type(), &exact).map_err(|e| {
                bad(format!(
                    "column `{}` is {} in the file and {} in the table, and does not convert: {e}",
                    field.name(),
                    column.data_type(),
                    field.data_type()
                ))
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let options = RecordBatchOptions::new().with_row_count(Some(rows));
    RecordBatch::try_new_with_options(schema.clone(), columns, &options)
        .map_err(|e| bad(e.to_string()))
}

/// One batch of lines of a file: their text, where each ends, and the numbers of the
/// lines that are not blank (the records).
struct Lines<'a> {
    text: &'a [u8],
    ends: &'a [usize],
    first: u64,
    numbers: Vec<u64>,
}

impl<'a> Lines<'a> {
    fn new(text: &'a [u8], ends: &'a [usize], first: u64) -> Self {
        let numbers = (0..ends.len())
            .filter(|&i| !is_blank(Self::line_at(text, ends, i)))
            .map(|i| first + i as u64)
            .collect();
        Self {
            text,
            ends,
            first,
            numbers,
        }
    }

    fn line_at(text: &'a [u8], ends: &[usize], i: usize) -> &'a [u8] {
        let start = if i == 0 { 0 } else { ends[i - 1] };
        &text[start..ends[i]]
    }

    fn line(&self, number: u64) -> &'a [u8] {
        Self::line_at(self.text, self.ends, (number - self.first) as usize)
    }

    /// The records' text: the whole batch, or, when some lines are blank, the others.
    fn records(&self) -> std::borrow::Cow<'a, [u8]> {
        if self.numbers.len() == self.ends.len() {
            return self.text.into();
        }
        let mut records = Vec::with_capacity(self.text.len());
        for &n in &self.numbers {
            records.extend_from_slice(self.line(n));
        }
        records.into()
    }
}

/// Decodes the records one by one, to name the bad one (failing) or leave it out
/// (skipping and counting it).
fn decode_line_by_line(
    path: &Path,
    decoder: &RecordDecoder,
    schema: &SchemaRef,
    lines: &Lines<'_>,
    skip: bool,
    counters: &OperatorCounters,
) -> Result<(RecordBatch, Vec<u64>)> {
    let mut parts = Vec::new();
    let mut kept = Vec::new();
    for &number in &lines.numbers {
        let line = lines.line(number);
        // A line that is not UTF-8 is a malformed record like any other.
        let result = match std::str::from_utf8(line) {
            Err(e) => Err(format!(
                "not valid UTF-8 (byte {} of the line)",
                e.valid_up_to() + 1
            )),
            Ok(_) => decoder.decode_one(line).and_then(|b| {
                b.filter(|b| b.num_rows() == 1)
                    .ok_or_else(|| "the line holds no record".to_string())
            }),
        };
        match result {
            Ok(batch) => {
                parts.push(batch);
                kept.push(number);
            }
            Err(_) if skip => counters.add_skipped(1),
            Err(message) => {
                return Err(Error::MalformedRecord {
                    file: path.into(),
                    line: number,
                    field: field_of(&message, schema),
                    message: format!("{message}; fix the record, or configure the source to skip malformed records"),
                });
            }
        }
    }
    Ok((concat_batches(schema, &parts)?, kept))
}

/// Appends `_timestamp` from the event-time column; rows whose event time is missing or
/// unparseable are malformed.
fn with_event_time(
    path: &Path,
    batch: RecordBatch,
    lines: &[u64],
    event_time: usize,
    out: &StreamSchema,
    skip: bool,
    counters: &OperatorCounters,
) -> Result<RecordBatch> {
    let column = batch.column(event_time);
    let nanos = event_time_nanos(column)?;
    let field = batch.schema().field(event_time).name().clone();
    let (batch, nanos) = match nanos.logical_nulls().filter(|n| n.null_count() > 0) {
        None => (batch, nanos),
        Some(valid) => {
            if !skip {
                let row = (0..nanos.len()).find(|r| valid.is_null(*r)).unwrap_or(0);
                let value = riffle_core::arrow::util::display::array_value_to_string(column, row)
                    .unwrap_or_default();
                return Err(Error::MalformedRecord {
                    file: path.into(),
                    line: lines[row],
                    field: Some(field),
                    message: format!("event time `{value}` is missing or not a timestamp (use RFC 3339, or epoch milliseconds)"),
                });
            }
            counters.add_skipped(valid.null_count() as u64);
            let mask = riffle_core::arrow::array::BooleanArray::new(valid.into_inner(), None);
            (
                riffle_core::arrow::compute::filter_record_batch(&batch, &mask)?,
                riffle_core::arrow::compute::filter(&nanos, &mask)?,
            )
        }
    };
    let mut columns = batch.columns().to_vec();
    columns.push(nanos);
    Ok(RecordBatch::try_new(out.schema.clone(), columns)?)
}

/// Where a subtask stands in one of its files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct FilePosition {
    /// Lines (JSONL, CSV) or rows (Parquet) already read.
    pub position: u64,
    /// Read to its end.
    pub done: bool,
}

/// The source's offsets: one row per file the subtask owns, with how far it has read
/// it. Files are named by path, not by index, so any subtask of any parallelism can
/// pick out its own files from the state of all old subtasks (a rescale).
pub(super) fn file_positions_state(files: &[(String, FilePosition)]) -> Result<OperatorState> {
    let schema = Arc::new(Schema::new(vec![
        Field::new(KEY_GROUP_FIELD, DataType::UInt16, false),
        Field::new("file", DataType::Utf8, false),
        Field::new("position", DataType::UInt64, false),
        Field::new("done", DataType::Boolean, false),
    ]));
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(UInt16Array::from(vec![0u16; files.len()])),
            Arc::new(StringArray::from_iter_values(
                files.iter().map(|(p, _)| p.as_str()),
            )),
            Arc::new(UInt64Array::from_iter_values(
                files.iter().map(|(_, f)| f.position),
            )),
            Arc::new(BooleanArray::from_iter(
                files.iter().map(|(_, f)| Some(f.done)),
            )),
        ],
    )?;
    Ok(OperatorState {
        batches: vec![batch],
    })
}

/// What a checkpoint says about the source's files.
#[derive(Debug)]
pub(super) enum SavedOffsets {
    /// Every file any old subtask owned, by path.
    Files(HashMap<String, FilePosition>),
    /// An older version's offset: the one file being read (by index in the subtask's
    /// list) and the position in it; only restores at the same parallelism.
    Single {
        path: String,
        file: u64,
        position: u64,
    },
}

/// Reads what [`file_positions_state`] (or an older version) wrote, from the state of
/// every old subtask.
pub(super) fn read_saved_offsets(state: &OperatorState, operator: &str) -> Result<SavedOffsets> {
    let bad = || Error::State {
        operator: operator.into(),
        message: "file source offsets need columns file, position and done".into(),
    };
    let mut files = HashMap::new();
    for batch in &state.batches {
        let path = batch
            .column_by_name("file")
            .and_then(|c| c.as_string_opt::<i32>())
            .ok_or_else(bad)?;
        let u64s = |n: &str| {
            batch
                .column_by_name(n)
                .and_then(|c| c.as_primitive_opt::<riffle_core::arrow::datatypes::UInt64Type>())
                .ok_or_else(bad)
        };
        let position = u64s("position")?;
        let Some(done) = batch
            .column_by_name("done")
            .and_then(|c| c.as_boolean_opt())
        else {
            if state.batches.len() != 1 || batch.num_rows() != 1 {
                return Err(bad());
            }
            return Ok(SavedOffsets::Single {
                path: path.value(0).to_string(),
                file: u64s("file_index")?.value(0),
                position: position.value(0),
            });
        };
        for row in 0..batch.num_rows() {
            files.insert(
                path.value(row).to_string(),
                FilePosition {
                    position: position.value(row),
                    done: done.value(row),
                },
            );
        }
    }
    Ok(SavedOffsets::Files(files))
}
