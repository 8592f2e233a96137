//! Decoding text records (JSON objects, CSV lines) into Arrow, and event-time columns
//! into nanoseconds; shared by the file and Kafka sources, which differ only in how
//! they name a bad record (file and line, or topic, partition and offset).

use crate::date_time_text::timestamp_from_text;
use crate::flat_json::{FlatDecoded, FlatJsonDecoder};
use crate::json_check::{rewritten, JsonLineCheck, TextRule};
use crate::json_numbers::{number_column, read_as_text};
use crate::sinks::FileFormat;
use riffle_core::arrow::array::{new_null_array, ArrayRef, AsArray};
use riffle_core::arrow::compute::concat_batches;
use riffle_core::arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use riffle_core::RecordBatch;
use std::sync::Arc;

/// Decodes batches of text records (JSON objects or CSV lines) of one schema, keeping
/// one Arrow decoder from batch to batch: building one costs about as much as decoding
/// a small batch. After an error the decoder is built anew.
///
/// It may read only some columns (see [`RecordDecoder::reading`]); a record's other
/// fields are then skipped unread, and a bad value in one of them is no error.
pub(crate) struct RecordDecoder {
    format: FileFormat,
    schema: SchemaRef,
    /// `schema` with its TIMESTAMP columns as text (see [`RecordDecoder::decode`]).
    text_schema: SchemaRef,
    /// The schema Arrow's decoder reads: for JSON, `text_schema` with its integer and
    /// DECIMAL columns as text too (see `json_numbers.rs`); for CSV, `text_schema`.
    arrow_schema: SchemaRef,
    /// JSON: the strict check of each line before Arrow's decoder (`json_check.rs`).
    check: JsonLineCheck,
    timestamps: Vec<usize>,
    /// The columns read, ascending; `None`: all. The others are NULL.
    read: Option<Vec<usize>>,
    /// Rows the Arrow decoder takes per batch.
    capacity: usize,
    arrow: Option<ArrowDecoder>,
    /// JSON's fast path (`flat_json.rs`), tried before Arrow's decoder while it is on.
    flat: FlatPath,
    /// Lines given to the fast path, and those of them it did not take.
    flat_lines: u64,
    odd_lines: u64,
}

/// The fast path is turned off once this many of the lines it was given, and more than
/// one in [`ODD_LINE_SHARE`], were of a form it does not take: each such line costs a
/// try on both paths.
const ODD_LINES_BEFORE_ARROW: u64 = 8;
const ODD_LINE_SHARE: u64 = 64;
/// The history of lines the share is judged over (about): halved when it grows past.
const RECENT_LINES: u64 = 1 << 20;

/// Whether JSON's fast path is tried.
enum FlatPath {
    /// Not yet built (or CSV, whose decoding is Arrow's alone).
    Unbuilt,
    On(Box<FlatJsonDecoder>),
    /// The schema has a type it leaves to Arrow, or it handed back a batch that Arrow
    /// decoded: the input has another form (numbers with fractions in VARCHAR columns,
    /// say), and trying each batch twice would only be slower.
    Off,
}

enum ArrowDecoder {
    Json(riffle_core::arrow::json::reader::Decoder),
    Csv(Box<riffle_core::arrow::csv::reader::Decoder>),
}

impl ArrowDecoder {
    /// Every record in `text`; an error if the decoder fills up before the end of
    /// `text` (more records than it was built for).
    fn decode_all(&mut self, text: &[u8]) -> std::result::Result<Option<RecordBatch>, String> {
        let mut rest = text;
        let batch = match self {
            ArrowDecoder::Json(d) => {
                let n = d.decode(rest).map_err(|e| e.to_string())?;
                rest = &rest[n..];
                d.flush().map_err(|e| e.to_string())?
            }
            ArrowDecoder::Csv(d) => {
                while !rest.is_empty() {
                    let n = d.decode(rest).map_err(|e| e.to_string())?;
                    if n == 0 {
                        break;
                    }
                    rest = &rest[n..];
                }
                d.flush().map_err(|e| e.to_string())?
            }
        };
        if !rest.iter().all(u8::is_ascii_whitespace) {
            return Err("more records than lines".into());
        }
        Ok(batch)
    }
}

impl RecordDecoder {
    /// A decoder of `schema` that reads only the columns `read` (ascending indices),
    /// or all of them.
    pub(crate) fn reading(
        format: FileFormat,
        schema: &SchemaRef,
        read: Option<Vec<usize>>,
    ) -> Self {
        let timestamps: Vec<usize> = schema
            .fields()
            .iter()
            .enumerate()
            .filter(|(_, f)| matches!(f.data_type(), DataType::Timestamp(..)))
            .map(|(i, _)| i)
            .collect();
        let json = format == FileFormat::Jsonl;
        let as_text = |numbers_too: bool| {
            let fields: Vec<Field> = schema
                .fields()
                .iter()
                .map(|f| match f.data_type() {
                    DataType::Timestamp(..) => f.as_ref().clone().with_data_type(DataType::Utf8),
                    t if numbers_too && read_as_text(t) => {
                        f.as_ref().clone().with_data_type(DataType::Utf8)
                    }
                    _ => f.as_ref().clone(),
                })
                .collect();
            Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
        };
        let rules = schema
            .fields()
            .iter()
            .enumerate()
            .filter(|(i, _)| read.as_ref().is_none_or(|r| r.contains(i)))
            .filter_map(|(_, f)| match f.data_type() {
                DataType::Timestamp(..) => Some((f.name().clone(), TextRule::DateTime)),
                DataType::Decimal128(..) => None,
                DataType::Utf8 => Some((f.name().clone(), TextRule::Text)),
                t if read_as_text(t) => Some((f.name().clone(), TextRule::Integer)),
                _ => None,
            })
            .collect::<Vec<_>>();
        Self {
            format,
            schema: schema.clone(),
            text_schema: as_text(false),
            arrow_schema: as_text(json),
            check: JsonLineCheck::new(rules),
            timestamps,
            read,
            capacity: 0,
            arrow: None,
            flat: match format {
                FileFormat::Jsonl => FlatPath::Unbuilt,
                _ => FlatPath::Off,
            },
            flat_lines: 0,
            odd_lines: 0,
        }
    }

    /// A decoder like this one, for one record (it keeps no Arrow decoder): Arrow's
    /// alone, whose errors name the field.
    pub(crate) fn decode_one(
        &self,
        text: &[u8],
    ) -> std::result::Result<Option<RecordBatch>, String> {
        self.decode_without_fast_path(text, 1)
    }

    /// The `rows` records of `text` decoded as by a new decoder like this one with
    /// JSON's fast path off.
    pub(crate) fn decode_without_fast_path(
        &self,
        text: &[u8],
        rows: usize,
    ) -> std::result::Result<Option<RecordBatch>, String> {
        let mut fresh = Self::reading(self.format, &self.schema, self.read.clone());
        fresh.flat = FlatPath::Off;
        fresh.decode(text, rows)
    }

    /// `schema` (one of this decoder's) as JSON's decoders read it: JSON fields are
    /// found by name, so a schema of the columns read skips the others.
    fn json_schema(&self, schema: &SchemaRef) -> std::result::Result<SchemaRef, String> {
        Ok(match &self.read {
            Some(read) => Arc::new(schema.project(read).map_err(|e| e.to_string())?),
            None => schema.clone(),
        })
    }

    /// The records of `text` decoded by JSON's fast path, if it is on; a line it does
    /// not take goes through Arrow's decoder alone, and the fast path goes on after it.
    /// `None` when the fast path is off or takes no part of the batch.
    fn decode_flat(
        &mut self,
        text: &[u8],
        rows: usize,
    ) -> std::result::Result<Option<RecordBatch>, String> {
        let mut parts = Vec::new();
        let (mut offset, mut left) = (0, rows);
        if let FlatPath::On(_) | FlatPath::Unbuilt = self.flat {
            self.flat_lines += rows as u64;
            // Judged over recent lines: halve the history now and then.
            if self.flat_lines > RECENT_LINES {
                self.flat_lines /= 2;
                self.odd_lines /= 2;
            }
        }
        loop {
            let rest = &text[offset.min(text.len())..];
            let (batch, at) = match self.decode_flat_prefix(text, offset, left) {
                Some(FlatDecoded::All(batch)) => {
                    parts.push(batch);
                    break;
                }
                Some(FlatDecoded::UpTo { batch, at }) => (batch, at - offset),
                Some(FlatDecoded::Not) | None if parts.is_empty() => return Ok(None),
                Some(FlatDecoded::Not) | None => {
                    parts.extend(self.decode_arrow(rest, left)?);
                    break;
                }
            };
            left -= batch.num_rows();
            parts.push(batch);
            // Data of another form in many lines: Arrow's decoder alone is faster.
            self.odd_lines += 1;
            if self.odd_lines >= ODD_LINES_BEFORE_ARROW
                && self.odd_lines * ODD_LINE_SHARE > self.flat_lines
            {
                self.flat = FlatPath::Off;
                parts.extend(self.decode_arrow(&rest[at..], left)?);
                break;
            }
            // The last record is the rest of the text: one record alone may span lines
            // (a Kafka value printed pretty).
            let line_end = match left {
                1 => rest.len(),
                _ => memchr::memchr(b'\n', &rest[at..]).map_or(rest.len(), |e| at + e),
            };
            parts.extend(self.decode_arrow(&rest[at..line_end], 1)?);
            left -= 1;
            offset += line_end + 1;
            if left == 0 {
                break;
            }
        }
        let Some(first) = parts.first() else {
            return Ok(None);
        };
        concat_batches(&first.schema(), &parts)
            .map(Some)
            .map_err(|e| e.to_string())
    }

    /// One step of [`decode_flat`](Self::decode_flat): the fast path's prefix of `text`.
    fn decode_flat_prefix(&mut self, text: &[u8], from: usize, rows: usize) -> Option<FlatDecoded> {
        if let FlatPath::Unbuilt = self.flat {
            self.flat = match self
                .json_schema(&self.schema)
                .ok()
                .and_then(|s| FlatJsonDecoder::new(&s))
            {
                Some(flat) => FlatPath::On(Box::new(flat)),
                None => FlatPath::Off,
            };
        }
        match &mut self.flat {
            FlatPath::On(flat) => Some(flat.decode_prefix(text, from, rows)),
            _ => None,
        }
    }

    fn build(&self) -> std::result::Result<ArrowDecoder, String> {
        let schema = self.text_schema.clone();
        Ok(match self.format {
            FileFormat::Jsonl => ArrowDecoder::Json(
                riffle_core::arrow::json::ReaderBuilder::new(self.json_schema(&self.arrow_schema)?)
                    .with_coerce_primitive(true)
                    .with_batch_size(self.capacity)
                    .build_decoder()
                    .map_err(|e| e.to_string())?,
            ),
            _ => ArrowDecoder::Csv(Box::new(
                riffle_core::arrow::csv::ReaderBuilder::new(schema)
                    .with_header(false)
                    .with_batch_size(self.capacity)
                    .with_projection(
                        self.read
                            .clone()
                            .unwrap_or_else(|| (0..self.text_schema.fields().len()).collect()),
                    )
                    .build_decoder(),
            )),
        })
    }

    /// Decodes the `rows` records in `text`.
    ///
    /// A TIMESTAMP column takes a number as epoch milliseconds (as Flink reads it) and
    /// text as a date-time (RFC 3339 / ISO 8601, to the nanosecond), value by value: the
    /// column is decoded as text first, so a JSON number keeps its digits. (Arrow's JSON
    /// decoder would take a number as a count of the column's unit, nanoseconds.) Hence
    /// JSON numbers and booleans in VARCHAR columns are read as their text too, as Flink
    /// does.
    ///
    /// JSON goes through the fast path (`flat_json.rs`) first, while it is on; a batch
    /// it hands back is checked line by line (`json_check.rs`), then Arrow's, its
    /// integer and DECIMAL columns read from their text (`json_numbers.rs`).
    pub(crate) fn decode(
        &mut self,
        text: &[u8],
        rows: usize,
    ) -> std::result::Result<Option<RecordBatch>, String> {
        let decoded = match self.decode_flat(text, rows)? {
            Some(batch) => Some(batch),
            None => {
                let decoded = self.decode_arrow(text, rows)?;
                if let FlatPath::On(_) = self.flat {
                    self.flat = FlatPath::Off;
                }
                decoded
            }
        };
        let Some(batch) = decoded else {
            return Ok(None);
        };
        let mut columns = match &self.read {
            Some(read) => widen(batch.columns(), read, &self.text_schema, batch.num_rows()),
            None if self.timestamps.is_empty() => return Ok(Some(batch)),
            None => batch.columns().to_vec(),
        };
        for &i in &self.timestamps {
            let field = self.schema.field(i);
            columns[i] = if self.read.as_ref().is_some_and(|r| !r.contains(&i)) {
                new_null_array(field.data_type(), batch.num_rows())
            } else {
                timestamp_from_text(&columns[i], field)?
            };
        }
        RecordBatch::try_new(self.schema.clone(), columns)
            .map(Some)
            .map_err(|e| e.to_string())
    }

    /// The `rows` records in `text`, by Arrow's decoder; JSON checked first.
    fn decode_arrow(
        &mut self,
        text: &[u8],
        rows: usize,
    ) -> std::result::Result<Option<RecordBatch>, String> {
        let json = self.format == FileFormat::Jsonl;
        let mut with_strings = None;
        if json {
            // (One record is a whole text: a Kafka value's JSON may span lines.)
            let rewrites = match rows {
                1 => self.check.check_record(text)?,
                _ => self.check.check_lines(text)?,
            };
            // Objects and arrays in VARCHAR columns become strings of their text.
            if !rewrites.is_empty() {
                with_strings = Some(rewritten(text, &rewrites));
            }
        }
        let text = with_strings.as_deref().unwrap_or(text);
        let mut arrow = match self.arrow.take() {
            Some(arrow) if rows <= self.capacity => arrow,
            _ => {
                self.capacity = self.capacity.max(rows).max(1);
                self.build()?
            }
        };
        // (On an error `arrow` is dropped, with whatever it held.)
        let decoded = arrow.decode_all(text)?;
        self.arrow = Some(arrow);
        match decoded {
            Some(batch) if json => self.numbers_from_text(&batch).map(Some),
            other => Ok(other),
        }
    }

    /// A batch of JSON's `arrow_schema` with its integer and DECIMAL columns read from
    /// their text, as `text_schema` has them.
    fn numbers_from_text(&self, batch: &RecordBatch) -> std::result::Result<RecordBatch, String> {
        let schema = self.json_schema(&self.text_schema)?;
        let columns = batch
            .columns()
            .iter()
            .zip(schema.fields())
            .map(|(column, field)| match column.data_type() {
                DataType::Utf8 if read_as_text(field.data_type()) => {
                    number_column(column.as_string::<i32>(), field.data_type(), field.name())
                }
                _ => Ok(column.clone()),
            })
            .collect::<std::result::Result<Vec<ArrayRef>, String>>()?;
        RecordBatch::try_new(schema, columns).map_err(|e| e.to_string())
    }
}

/// The columns of `fields` a source decodes for a pipeline: those `wanted` says it uses
/// or needs (its event time), and every NOT NULL one (a NULL there would be no row of
/// the schema); ascending. `None` when that is every column.
pub(crate) fn columns_to_read(
    fields: &Fields,
    wanted: impl Fn(usize, &Field) -> bool,
) -> Option<Vec<usize>> {
    let read: Vec<usize> = (0..fields.len())
        .filter(|&i| wanted(i, &fields[i]) || !fields[i].is_nullable())
        .collect();
    (read.len() < fields.len()).then_some(read)
}

/// `explain`'s word on the columns a source reads: `, reading 4 of 7 columns`, or
/// nothing when it reads them all.
pub(crate) fn reading_note(read: Option<&[usize]>, of: usize) -> String {
    read.map(|read| format!(", reading {} of {of} columns", read.len()))
        .unwrap_or_default()
}

/// The columns of `schema` from the columns `read` (ascending indices) of one batch:
/// the others NULL.
pub(crate) fn widen(
    columns: &[ArrayRef],
    read: &[usize],
    schema: &Schema,
    rows: usize,
) -> Vec<ArrayRef> {
    let mut read_columns = read.iter().zip(columns).peekable();
    (0..schema.fields().len())
        .map(|i| match read_columns.next_if(|(r, _)| **r == i) {
            Some((_, column)) => column.clone(),
            None => new_null_array(schema.field(i).data_type(), rows),
        })
        .collect()
}

/// The field an Arrow decoding error names, if any.
pub(crate) fn field_of(message: &str, schema: &Schema) -> Option<String> {
    if let Some(rest) = message.split("field '").nth(1) {
        return rest.split('\'').next().map(str::to_string);
    }
    // CSV errors name the column by index: "... for column 2 at line ...".
    let column: usize = message
        .split("for column ")
        .nth(1)?
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()?;
    schema.fields().get(column).map(|f| f.name().clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use riffle_core::arrow::datatypes::{TimeUnit, TimestampMillisecondType};

    fn bids() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("auction", DataType::Int64, true),
            Field::new(
                "dateTime",
                DataType::Timestamp(TimeUnit::Millisecond, None),
                true,
            ),
        ]))
    }

    fn times(batch: &RecordBatch) -> Vec<Option<i64>> {
        batch
            .column(1)
            .as_primitive::<TimestampMillisecondType>()
            .iter()
            .collect()
    }

    #[test]
    fn one_decoder_decodes_batch_after_batch_and_recovers_from_a_bad_one() {
        let mut decoder = RecordDecoder::reading(FileFormat::Jsonl, &bids(), None);
        let first = decoder
            .decode(b"{\"auction\":1,\"dateTime\":1000}\n{\"auction\":2}\n", 2)
            .unwrap()
            .unwrap();
        assert_eq!(first.num_rows(), 2);
        assert!(decoder.decode(b"{\"auction\":\"x\"}\n", 1).is_err());
        let after = decoder
            .decode(
                b"{\"auction\":3,\"dateTime\":\"1970-01-01T00:00:02Z\"}\n",
                1,
            )
            .unwrap()
            .unwrap();
        assert_eq!(
            after
                .column(0)
                .as_primitive::<riffle_core::arrow::datatypes::Int64Type>()
                .value(0),
            3
        );
        assert_eq!(times(&after), vec![Some(2000)]);
    }

    #[test]
    fn json_of_another_form_is_arrows_line_by_line_and_turns_the_fast_path_off_when_common() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("auction", DataType::Int64, true),
            Field::new("extra", DataType::Utf8, true),
        ]));
        let mut decoder = RecordDecoder::reading(FileFormat::Jsonl, &schema, None);
        let text = |batch: &RecordBatch| -> Vec<Option<String>> {
            batch
                .column(1)
                .as_string::<i32>()
                .iter()
                .map(|v| v.map(str::to_string))
                .collect()
        };
        let flat = decoder
            .decode(
                b"{\"auction\":1,\"extra\":\"a\"}\n{\"auction\":2,\"extra\":7}\n",
                2,
            )
            .unwrap()
            .unwrap();
        assert_eq!(text(&flat), [Some("a".into()), Some("7".into())]);
        assert!(matches!(decoder.flat, FlatPath::On(_)));
        // A bad record is an error on either path, and leaves the fast path on.
        assert!(decoder.decode(b"{\"auction\":\"x\"}\n", 1).is_err());
        assert!(matches!(decoder.flat, FlatPath::On(_)));
        // A number with a fraction keeps its text in a VARCHAR column: Arrow's work, for
        // that line alone; the lines around it stay on the fast path.
        let mixed = decoder
            .decode(
                b"{\"auction\":3,\"extra\":\"b\"}\n{\"auction\":4,\"extra\":1.50}\n{\"auction\":5,\"extra\":\"c\"}\n{\"auction\":6,\"extra\":2.0}",
                4,
            )
            .unwrap()
            .unwrap();
        assert_eq!(
            text(&mixed),
            [
                Some("b".into()),
                Some("1.50".into()),
                Some("c".into()),
                Some("2.0".into())
            ]
        );
        let auctions = mixed
            .column(0)
            .as_primitive::<riffle_core::arrow::datatypes::Int64Type>();
        assert_eq!(auctions.values(), &[3, 4, 5, 6]);
        assert!(matches!(decoder.flat, FlatPath::On(_)));
        // Blank lines between records (Kafka values ending in a newline, joined by
        // another) are no records, on either path; nor is an empty poll.
        let blank = decoder
            .decode(
                b"{\"auction\":7,\"extra\":\"a\"}\n\n{\"auction\":8,\"extra\":1.5}\r\n \n{\"auction\":9}\n\n",
                3,
            )
            .unwrap()
            .unwrap();
        assert_eq!(text(&blank), [Some("a".into()), Some("1.5".into()), None]);
        assert_eq!(decoder.decode(b"", 0).unwrap().unwrap().num_rows(), 0);
        assert!(matches!(decoder.flat, FlatPath::On(_)));
        // Such lines in more than one line in 64 (and at least 8): Arrow's decoder alone.
        let many: String = (0..16)
            .map(|i| format!("{{\"auction\":{i},\"extra\":{i}.5}}\n"))
            .collect();
        let arrows = decoder.decode(many.as_bytes(), 16).unwrap().unwrap();
        assert_eq!(arrows.num_rows(), 16);
        assert_eq!(text(&arrows)[15], Some("15.5".into()));
        assert!(matches!(decoder.flat, FlatPath::Off));
        let after = decoder
            .decode(b"{\"auction\":4,\"extra\":\"b\"}\n", 1)
            .unwrap()
            .unwrap();
        assert_eq!(text(&after), [Some("b".into())]);
    }

    #[test]
    fn a_batch_of_more_records_than_rows_is_an_error_not_a_lost_record() {
        let mut csv = RecordDecoder::reading(FileFormat::Csv, &bids(), None);
        assert!(csv.decode(b"1,\n2,\n3,\n", 2).is_err());
        assert_eq!(
            csv.decode(b"1,\n2,\n3,\n", 3).unwrap().unwrap().num_rows(),
            3
        );
        // A JSON line holds one record and nothing after it, however many rows are
        // asked for (Arrow's decoder read the three records of two lines as three).
        let mut json = RecordDecoder::reading(FileFormat::Jsonl, &bids(), None);
        let text = b"{\"auction\":1} {\"auction\":2}\n{\"auction\":3}\n";
        for rows in [2, 3] {
            let err = json.decode(text, rows).unwrap_err();
            assert!(err.starts_with("text after the record"), "{err}");
        }
    }

    /// Each case of issue #45, refused on the fast path (a new decoder tries it first)
    /// and on the fallback (`decode_one`: Arrow's decoder alone), naming the field
    /// where there is one.
    #[test]
    fn json_that_arrow_read_as_a_wrong_value_is_refused_on_both_paths() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("t", DataType::Timestamp(TimeUnit::Nanosecond, None), true),
            Field::new("n", DataType::Int64, true),
            Field::new("f", DataType::Float64, true),
            Field::new("s", DataType::Utf8, true),
        ]));
        for (line, field, says) in [
            (r#"{"t":"2023"}"#, Some("t"), "is not a date-time"),
            (r#"{"t":"20230101"}"#, Some("t"), "is not a date-time"),
            (
                r#"{"n":-9223372036854775809}"#,
                Some("n"),
                "outside the range of BIGINT",
            ),
            (r#"{"s":-}"#, None, "not JSON"),
            (r#"{"s":1e}"#, None, "not JSON"),
            (r#"{"s":1.2.3}"#, None, "not JSON"),
            (r#"{"s":007}"#, None, "not JSON"),
            (r#"{"f":1.}"#, None, "not JSON"),
            (r#"{"f":00.5}"#, None, "not JSON"),
            (r#"{"n":007}"#, None, "not JSON"),
            (r#"{"n":1,"n":2}"#, Some("n"), "appears twice"),
            (r#"{"x":1,"x":2}"#, Some("x"), "appears twice"),
            (r#"{"id":1,"s":"a""#, None, "not JSON"),
            (r#"}{"id":2}"#, None, "not JSON"),
            ("{\"s\":\"a\tb\"}", None, "control character"),
            ("{\"s\":\"a\u{1}b\"}", None, "control character"),
            (r#"{"id":1} x"#, None, "text after the record"),
            (
                r#"{"t":"2263-01-01T00:00:00Z"}"#,
                Some("t"),
                "2262-04-11 23:47:16.854775807",
            ),
            (
                r#"{"t":9300000000000}"#,
                Some("t"),
                "outside the range of TIMESTAMP",
            ),
        ] {
            let text = format!("{line}\n");
            let mut decoder = RecordDecoder::reading(FileFormat::Jsonl, &schema, None);
            for err in [
                decoder.decode(text.as_bytes(), 1).unwrap_err(),
                decoder.decode_one(text.as_bytes()).unwrap_err(),
            ] {
                assert!(err.contains(says), "{line}: {err}");
                assert_eq!(field_of(&err, &schema).as_deref(), field, "{line}: {err}");
            }
        }
        // One record alone may span lines (a Kafka value printed pretty).
        let mut decoder = RecordDecoder::reading(FileFormat::Jsonl, &schema, None);
        let pretty = b"{\n  \"id\": 1,\n  \"s\": \"a\"\n}";
        assert_eq!(decoder.decode_one(pretty).unwrap().unwrap().num_rows(), 1);
        assert_eq!(decoder.decode(pretty, 1).unwrap().unwrap().num_rows(), 1);
        // The broken pair read as one batch of two lines: not two records.
        let mut decoder = RecordDecoder::reading(FileFormat::Jsonl, &schema, None);
        assert!(decoder
            .decode(b"{\"id\":1,\"s\":\"a\"\n}{\"id\":2}\n", 2)
            .is_err());
    }

    #[test]
    fn timestamps_are_epoch_millis_or_date_times_value_by_value() {
        let mut decoder = RecordDecoder::reading(FileFormat::Csv, &bids(), None);
        let all_millis = decoder.decode(b"1,1000\n2,-5\n3,\n", 3).unwrap().unwrap();
        assert_eq!(times(&all_millis), vec![Some(1000), Some(-5), None]);
        let all_text = decoder
            .decode(b"1,1970-01-01T00:00:01.5Z\n2,1970-01-01 00:00:03\n", 2)
            .unwrap()
            .unwrap();
        assert_eq!(times(&all_text), vec![Some(1500), Some(3000)]);
        let mixed = decoder
            .decode(b"1,+7\n2,1970-01-01T00:00:01Z\n", 2)
            .unwrap()
            .unwrap();
        assert_eq!(times(&mixed), vec![Some(7), Some(1000)]);
        let bad = decoder.decode(b"1,12\n2,soon\n", 2).unwrap_err();
        assert!(
            bad.contains("`soon` is neither epoch milliseconds"),
            "{bad}"
        );
    }

    /// The table of docs/connectors.md ("JSON values into columns"): each JSON value
    /// into each column type, on the fast path where it takes the line and on the
    /// fallback, read alike.
    #[test]
    fn each_json_value_is_read_into_each_column_type_as_documented() {
        let columns = [
            ("i", DataType::Int64),
            ("d", DataType::Decimal128(10, 2)),
            ("f", DataType::Float64),
            ("b", DataType::Boolean),
            ("s", DataType::Utf8),
            ("t", DataType::Timestamp(TimeUnit::Nanosecond, None)),
        ];
        let bad = "malformed";
        // A JSON value, then its reading into i, d, f, b, s and t.
        let table: [(&str, [&str; 6]); 10] = [
            ("null", ["", "", "", "", "", ""]),
            (
                "12",
                ["12", "12.00", "12.0", bad, "12", "1970-01-01T00:00:00.012"],
            ),
            ("1.9", ["1", "1.90", "1.9", bad, "1.9", bad]),
            ("-1.005", ["-1", "-1.01", "-1.005", bad, "-1.005", bad]),
            (r#""12""#, ["12", "12.00", "12.0", bad, "12", bad]),
            (r#""1.5""#, [bad, "1.50", "1.5", bad, "1.5", bad]),
            ("true", [bad, bad, bad, "true", "true", bad]),
            (
                r#""2025-01-31T12:00:00Z""#,
                [
                    bad,
                    bad,
                    bad,
                    bad,
                    "2025-01-31T12:00:00Z",
                    "2025-01-31T12:00:00",
                ],
            ),
            (
                r#"{ "a" : 1.50 }"#,
                [bad, bad, bad, bad, r#"{"a":1.5}"#, bad],
            ),
            ("[1, -0]", [bad, bad, bad, bad, "[1,0]", bad]),
        ];
        let mut wrong = Vec::new();
        for (value, expected) in table {
            for ((name, data_type), expected) in columns.iter().zip(expected) {
                let schema = Arc::new(Schema::new(vec![Field::new(
                    *name,
                    data_type.clone(),
                    true,
                )]));
                let line = format!("{{\"{name}\":{value}}}\n");
                let read = |batch: std::result::Result<Option<RecordBatch>, String>| match batch {
                    Ok(Some(b)) => {
                        riffle_core::arrow::util::display::array_value_to_string(b.column(0), 0)
                            .unwrap_or_else(|e| e.to_string())
                    }
                    Ok(None) => "no row".into(),
                    Err(_) => bad.into(),
                };
                let mut decoder = RecordDecoder::reading(FileFormat::Jsonl, &schema, None);
                let (either, fallback) = (
                    read(decoder.decode(line.as_bytes(), 1)),
                    read(decoder.decode_one(line.as_bytes())),
                );
                if either != expected || fallback != expected {
                    let fallback = format!("(fallback {fallback})");
                    wrong.push(format!(
                        "{value} into {data_type}: {either} {fallback}, documented {expected}"
                    ));
                }
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn a_source_reads_the_wanted_and_the_not_null_columns_or_says_all() {
        let fields = Fields::from(vec![
            Field::new("a", DataType::Int64, true),
            Field::new("b", DataType::Int64, false),
            Field::new("c", DataType::Int64, true),
        ]);
        let read = columns_to_read(&fields, |i, _| i == 0);
        assert_eq!(read, Some(vec![0, 1]));
        assert_eq!(reading_note(read.as_deref(), 3), ", reading 2 of 3 columns");
        assert_eq!(columns_to_read(&fields, |_, f| f.name() != "b"), None);
        assert_eq!(reading_note(None, 3), "");
    }
}
