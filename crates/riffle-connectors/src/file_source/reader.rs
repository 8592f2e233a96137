//! Reading one split of a file: lines for JSONL and CSV (with line numbers for errors),
//! row groups for Parquet (`parquet_split.rs`); turning the event-time column into
//! `_timestamp`.

use super::compression::Compression;
use super::lines::{is_blank, newlines_before, LineBlocks};
use super::parquet_split::ParquetSplit;
use super::read_ahead::ReadAhead;
use super::split::TO_END;
use crate::decode::{field_of, RecordDecoder};
use crate::sinks::FileFormat;
use crate::time_columns::event_time_nanos;
use riffle_core::arrow::array::Array;
use riffle_core::arrow::compute::concat_batches;
use riffle_core::arrow::datatypes::SchemaRef;
use riffle_core::operator::OperatorCounters;
use riffle_core::{Error, RecordBatch, Result, StreamSchema, TimeBounds};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// An open file and the position in it.
pub(crate) struct FileReader {
    path: PathBuf,
    kind: Kind,
    schema: SchemaRef,
    batch_rows: usize,
}

/// Which part of a file to read, and how far it was read: see [`super::split`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Extent {
    /// Bytes (plain text) or row groups (Parquet); compressed text is read whole.
    pub start: u64,
    pub end: u64,
    /// Plain text: the offset of the next line to read. Compressed text: lines read.
    /// Parquet: rows of the extent read.
    pub position: u64,
}

impl Extent {
    /// The whole file, from its start.
    pub(crate) const WHOLE: Extent = Extent {
        start: 0,
        end: TO_END,
        position: 0,
    };
}

/// The line number of the first line a reader hands out, less one.
#[derive(Debug, Clone, Copy)]
enum LineBase {
    Known(u64),
    /// Not counted yet: the lines before this byte offset. Counted only to name the
    /// line of an error, so that a split in the middle of a file starts at once.
    Before(u64),
}

enum Kind {
    /// JSONL or CSV: the open reader and the lines handed out so far.
    Lines {
        reader: LineBlocks<Box<dyn Read + Send>>,
        base: LineBase,
        handed_out: u64,
        /// Positions are byte offsets (plain text), or line counts (compressed text).
        by_bytes: bool,
        decoder: Box<RecordDecoder>,
        /// Where each line of the current batch ends (kept for its allocation).
        ends: Vec<usize>,
    },
    /// Parquet: the split's reader.
    Parquet(ParquetSplit),
}

impl FileReader {
    /// Opens the `extent` of `path` where it was left, to read the columns `read`
    /// (ascending indices into `schema`; the others NULL) or all. With `times`
    /// (a timestamp column and a range), Parquet row groups whose statistics put that
    /// column wholly outside the range are passed over.
    pub(crate) fn open(
        path: &Path,
        format: FileFormat,
        schema: SchemaRef,
        batch_rows: usize,
        extent: Extent,
        read: Option<Vec<usize>>,
        times: Option<(usize, TimeBounds)>,
    ) -> Result<Self> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let kind = match format {
            FileFormat::Parquet => Kind::Parquet(ParquetSplit::open(
                path, file, batch_rows, extent, read, times,
            )?),
            FileFormat::Jsonl | FileFormat::Csv => {
                let header = u64::from(format == FileFormat::Csv);
                let io = |e| Error::io(path, e);
                let (reader, base, by_bytes) = match Compression::of(path) {
                    // A line begins at `position`; from the byte before it (a newline),
                    // skipping to the next line start finds it, or, for a fresh split,
                    // the first line that begins in the split.
                    Compression::None if extent.position > 0 => {
                        let mut file = file;
                        let from = extent.position - 1;
                        file.seek(SeekFrom::Start(from)).map_err(io)?;
                        let input: Box<dyn Read + Send> = Box::new(file);
                        let mut reader = LineBlocks::between(input, from, extent.end);
                        reader.skip_lines(1).map_err(io)?;
                        let base = LineBase::Before(reader.offset());
                        (reader, base, true)
                    }
                    // From the file's start: a CSV header is skipped.
                    Compression::None => {
                        let input: Box<dyn Read + Send> = Box::new(file);
                        let mut reader = LineBlocks::between(input, 0, extent.end);
                        let skipped = reader.skip_lines(header).map_err(io)?;
                        (reader, LineBase::Known(skipped), true)
                    }
                    // Compressed: decompressed from the start, on a thread of its own,
                    // skipping the lines read.
                    compressed => {
                        let inflated = compressed.reader(file).map_err(io)?;
                        let ahead: Box<dyn Read + Send> =
                            Box::new(ReadAhead::spawn(inflated).map_err(io)?);
                        let mut reader = LineBlocks::new(ahead);
                        let to_skip = extent.position.max(header);
                        let skipped = reader.skip_lines(to_skip).map_err(io)?;
                        (reader, LineBase::Known(skipped), false)
                    }
                };
                Kind::Lines {
                    reader,
                    base,
                    handed_out: 0,
                    by_bytes,
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

    /// Where to resume: see [`Extent::position`].
    pub(super) fn position(&self) -> u64 {
        match &self.kind {
            Kind::Lines {
                reader,
                by_bytes: true,
                ..
            } => reader.offset(),
            Kind::Lines {
                base, handed_out, ..
            } => base.known() + handed_out,
            Kind::Parquet(split) => split.position(),
        }
    }

    /// An error naming a line counted from where this reader started, with the line
    /// counted from the file's start instead.
    fn numbered_from_file_start(&self, error: Error) -> Error {
        let Kind::Lines {
            base: LineBase::Before(offset),
            ..
        } = &self.kind
        else {
            return error;
        };
        match error {
            Error::MalformedRecord {
                file,
                line,
                field,
                message,
            } => match File::open(&self.path).and_then(|f| newlines_before(f, *offset)) {
                Ok(before) => Error::MalformedRecord {
                    file,
                    line: before + line,
                    field,
                    message,
                },
                Err(e) => Error::io(&self.path, e),
            },
            other => other,
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
        let batch = match self.read_records(skip_malformed, counters) {
            Ok(Some((batch, lines))) => with_event_time(
                &self.path,
                batch,
                &lines,
                event_time,
                out_schema,
                skip_malformed,
                counters,
            )
            .map(Some),
            other => other.map(|_| None),
        };
        batch.map_err(|e| self.numbered_from_file_start(e))
    }

    /// The next batch of records as the file holds them, with each row's line number
    /// (row number for Parquet), or `None` at the end of the extent.
    pub(crate) fn next_records(
        &mut self,
        skip_malformed: bool,
        counters: &OperatorCounters,
    ) -> Result<Option<(RecordBatch, Vec<u64>)>> {
        self.read_records(skip_malformed, counters)
            .map_err(|e| self.numbered_from_file_start(e))
    }

    /// [`Self::next_records`], its line numbers counted from where the reader started
    /// when that line's number is not known.
    fn read_records(
        &mut self,
        skip_malformed: bool,
        counters: &OperatorCounters,
    ) -> Result<Option<(RecordBatch, Vec<u64>)>> {
        Ok(Some(match &mut self.kind {
            Kind::Parquet(split) => match split.next_batch(&self.path, &self.schema)? {
                None => return Ok(None),
                Some(batch) => batch,
            },
            Kind::Lines {
                reader,
                base,
                handed_out,
                decoder,
                ends,
                ..
            } => {
                let text = reader
                    .next_lines(self.batch_rows, ends)
                    .map_err(|e| Error::io(&self.path, e))?;
                let first = base.known() + *handed_out + 1;
                let file_start =
                    *handed_out == 0 && matches!(base, LineBase::Known(0) | LineBase::Before(0));
                *handed_out += ends.len() as u64;
                let lines = Lines::new(text, ends, first, file_start);
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

impl LineBase {
    /// The known part: all of it, or none until it is counted.
    fn known(self) -> u64 {
        match self {
            LineBase::Known(lines) => lines,
            LineBase::Before(_) => 0,
        }
    }
}

/// A UTF-8 byte order mark: some editors and exports on Windows begin a file with it.
pub(super) const BYTE_ORDER_MARK: &[u8] = b"\xEF\xBB\xBF";

/// One batch of lines of a file: their text, where each ends, and the numbers of the
/// lines that are not blank (the records).
struct Lines<'a> {
    text: &'a [u8],
    ends: &'a [usize],
    first: u64,
    numbers: Vec<u64>,
    /// Where the first line's text begins: past a byte order mark that begins the file
    /// (no part of the record, but no error either), else 0.
    start: usize,
}

impl<'a> Lines<'a> {
    /// The lines of `text` ending at `ends`, the first of them line `first` of the
    /// file, and the file's first line when `file_start`.
    fn new(text: &'a [u8], ends: &'a [usize], first: u64, file_start: bool) -> Self {
        let start = match file_start && text.starts_with(BYTE_ORDER_MARK) {
            true => BYTE_ORDER_MARK.len(),
            false => 0,
        };
        let numbers = (0..ends.len())
            .filter(|&i| !is_blank(Self::line_at(text, ends, start, i)))
            .map(|i| first + i as u64)
            .collect();
        Self {
            text,
            ends,
            first,
            numbers,
            start,
        }
    }

    fn line_at(text: &'a [u8], ends: &[usize], start: usize, i: usize) -> &'a [u8] {
        let begins = if i == 0 { start } else { ends[i - 1] };
        &text[begins..ends[i]]
    }

    fn line(&self, number: u64) -> &'a [u8] {
        Self::line_at(
            self.text,
            self.ends,
            self.start,
            (number - self.first) as usize,
        )
    }

    /// The records' text: the whole batch, or, when some lines are blank, the others.
    fn records(&self) -> std::borrow::Cow<'a, [u8]> {
        if self.numbers.len() == self.ends.len() {
            return self.text[self.start..].into();
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
