//! Decoding text records (JSON objects, CSV lines) into Arrow, and event-time columns
//! into nanoseconds; shared by the file and Kafka sources, which differ only in how
//! they name a bad record (file and line, or topic, partition and offset).

use crate::flat_json::FlatJsonDecoder;
use crate::sinks::FileFormat;
use crate::time_columns::epoch_millis_as;
use riffle_core::arrow::array::{new_null_array, Array, ArrayRef, AsArray};
use riffle_core::arrow::compute::is_not_null;
use riffle_core::arrow::compute::kernels::cast::{cast_with_options, CastOptions};
use riffle_core::arrow::compute::kernels::zip::zip;
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
    timestamps: Vec<usize>,
    /// The columns read, ascending; `None`: all. The others are NULL.
    read: Option<Vec<usize>>,
    /// Rows the Arrow decoder takes per batch.
    capacity: usize,
    arrow: Option<ArrowDecoder>,
    /// JSON's fast path (`flat_json.rs`), tried before Arrow's decoder while it is on.
    flat: FlatPath,
}

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
        let as_text: Vec<Field> = schema
            .fields()
            .iter()
            .map(|f| match f.data_type() {
                DataType::Timestamp(..) => f.as_ref().clone().with_data_type(DataType::Utf8),
                _ => f.as_ref().clone(),
            })
            .collect();
        Self {
            format,
            schema: schema.clone(),
            text_schema: Arc::new(Schema::new_with_metadata(
                as_text,
                schema.metadata().clone(),
            )),
            timestamps,
            read,
            capacity: 0,
            arrow: None,
            flat: match format {
                FileFormat::Jsonl => FlatPath::Unbuilt,
                _ => FlatPath::Off,
            },
        }
    }

    /// A decoder like this one, for one record (it keeps no Arrow decoder): Arrow's
    /// alone, whose errors name the field.
    pub(crate) fn decode_one(
        &self,
        text: &[u8],
    ) -> std::result::Result<Option<RecordBatch>, String> {
        let mut one = Self::reading(self.format, &self.schema, self.read.clone());
        one.flat = FlatPath::Off;
        one.decode(text, 1)
    }

    /// The schema of the records JSON's decoders build: JSON fields are found by name,
    /// so a schema of the columns read skips the others.
    fn json_schema(&self) -> std::result::Result<SchemaRef, String> {
        Ok(match &self.read {
            Some(read) => Arc::new(self.text_schema.project(read).map_err(|e| e.to_string())?),
            None => self.text_schema.clone(),
        })
    }

    /// The records of `text` decoded by JSON's fast path, if it is on and takes them.
    fn decode_flat(&mut self, text: &[u8], rows: usize) -> Option<RecordBatch> {
        if let FlatPath::Unbuilt = self.flat {
            self.flat = match self
                .json_schema()
                .ok()
                .and_then(|s| FlatJsonDecoder::new(&s))
            {
                Some(flat) => FlatPath::On(Box::new(flat)),
                None => FlatPath::Off,
            };
        }
        match &mut self.flat {
            FlatPath::On(flat) => flat.decode(text, rows),
            _ => None,
        }
    }

    fn build(&self) -> std::result::Result<ArrowDecoder, String> {
        let schema = self.text_schema.clone();
        Ok(match self.format {
            FileFormat::Jsonl => ArrowDecoder::Json(
                riffle_core::arrow::json::ReaderBuilder::new(self.json_schema()?)
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
    /// it hands back is Arrow's.
    pub(crate) fn decode(
        &mut self,
        text: &[u8],
        rows: usize,
    ) -> std::result::Result<Option<RecordBatch>, String> {
        let decoded = match self.decode_flat(text, rows) {
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

    /// The `rows` records in `text`, by Arrow's decoder.
    fn decode_arrow(
        &mut self,
        text: &[u8],
        rows: usize,
    ) -> std::result::Result<Option<RecordBatch>, String> {
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
        Ok(decoded)
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

/// A text column as the TIMESTAMP `field`: each value epoch milliseconds when it is an
/// integer, else a date-time; the error names the field and the value.
fn timestamp_from_text(column: &ArrayRef, field: &Field) -> std::result::Result<ArrayRef, String> {
    let safe = CastOptions {
        safe: true,
        ..Default::default()
    };
    let target = field.data_type();
    let text = column.as_string::<i32>();
    let as_text = || match crate::date_time_text::plain_column(text, target) {
        Some(values) => Ok(values),
        None => cast_with_options(column, target, &safe).map_err(|e| e.to_string()),
    };
    let as_millis = || {
        let millis =
            cast_with_options(column, &DataType::Int64, &safe).map_err(|e| e.to_string())?;
        // (A value past the column unit's range becomes NULL, reported below.)
        let from_millis = epoch_millis_as(&millis, target).map_err(|e| e.to_string())?;
        Ok::<_, String>((millis, from_millis))
    };
    let each_as_either = || {
        let (millis, from_millis) = as_millis()?;
        let is_millis = is_not_null(&millis).map_err(|e| e.to_string())?;
        zip(&is_millis, &from_millis, &as_text()?).map_err(|e| e.to_string())
    };
    // Most files hold one kind: then each value is parsed once, not as both kinds.
    let integers = text.iter().flatten().filter(|v| is_integer(v)).count();
    let all_read = |values: &ArrayRef| values.null_count() == column.null_count();
    let values = if integers == 0 {
        Some(as_text()?).filter(all_read)
    } else if integers == column.len() - column.null_count() {
        Some(as_millis()?.1).filter(all_read)
    } else {
        None
    };
    let values = match values {
        Some(values) => values,
        None => each_as_either()?,
    };
    if let Some(bad) = (0..column.len()).find(|i| column.is_valid(*i) && values.is_null(*i)) {
        return Err(format!(
            "field '{}': `{}` is neither epoch milliseconds (in range) nor a date-time (e.g. 2025-01-31T12:00:00Z)",
            field.name(),
            text.value(bad)
        ));
    }
    Ok(values)
}

/// Whether `text` is an integer as Arrow reads one (an optional sign, then digits).
fn is_integer(text: &str) -> bool {
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
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
    fn json_of_another_form_than_the_fast_paths_is_arrows_and_turns_it_off() {
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
        // A number with a fraction keeps its text in a VARCHAR column: Arrow's work.
        let arrows = decoder
            .decode(b"{\"auction\":3,\"extra\":1.50}\n", 1)
            .unwrap()
            .unwrap();
        assert_eq!(text(&arrows), [Some("1.50".into())]);
        assert!(matches!(decoder.flat, FlatPath::Off));
        let after = decoder
            .decode(b"{\"auction\":4,\"extra\":\"b\"}\n", 1)
            .unwrap()
            .unwrap();
        assert_eq!(text(&after), [Some("b".into())]);
    }

    #[test]
    fn a_batch_of_more_records_than_rows_is_an_error_not_a_lost_record() {
        for (format, text) in [
            (
                FileFormat::Jsonl,
                &b"{\"auction\":1} {\"auction\":2}\n{\"auction\":3}\n"[..],
            ),
            (FileFormat::Csv, &b"1,\n2,\n3,\n"[..]),
        ] {
            let mut decoder = RecordDecoder::reading(format, &bids(), None);
            assert!(decoder.decode(text, 2).is_err(), "{format:?}");
            assert_eq!(decoder.decode(text, 3).unwrap().unwrap().num_rows(), 3);
        }
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

    #[test]
    fn integers_are_an_optional_sign_then_digits() {
        assert!(is_integer("123") && is_integer("-5") && is_integer("+7"));
        assert!(!is_integer("") && !is_integer("-") && !is_integer("1.5"));
        assert!(!is_integer("2025-01-01") && !is_integer(" 1"));
    }
}
