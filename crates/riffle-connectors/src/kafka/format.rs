//! Record values ⇄ Arrow rows: JSON objects, CSV lines, the raw value as one string
//! or bytes column, or Debezium change events (`debezium.rs`).

use super::debezium;
use crate::decode::{field_of, RecordDecoder};
use crate::sinks::FileFormat;
use riffle_core::arrow::array::{ArrayRef, AsArray, BinaryArray, StringArray};
use riffle_core::arrow::compute::concat_batches;
use riffle_core::arrow::datatypes::{DataType, SchemaRef};
use riffle_core::{Error, RecordBatch, Result, RowKind};
use std::sync::Arc;

/// How a record's value is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueFormat {
    /// One JSON object per record.
    Json,
    /// One CSV line per record (no header), columns in declared order.
    Csv,
    /// The whole value as the table's only column (VARCHAR or BYTEA).
    Raw,
    /// Debezium's JSON change events (`{"before", "after", "op"}`): a changelog.
    DebeziumJson,
    /// The same wrapped with their schema, `{"schema": …, "payload": {"before", …}}`
    /// (Kafka Connect's JSON converter with `schemas.enable`); read only.
    DebeziumJsonWithSchema,
    /// One Avro datum per record (`avro.rs`).
    Avro,
    /// Confluent's wire format: a schema registry id, then the Avro datum (`avro.rs`).
    AvroConfluent,
}

impl ValueFormat {
    /// Parses `json`, `csv`, `raw`, `debezium-json`, `avro` or `avro-confluent`.
    ///
    /// # Errors
    /// Any other name.
    pub fn parse(name: &str) -> Result<Self> {
        match name.to_ascii_lowercase().as_str() {
            "json" => Ok(ValueFormat::Json),
            "csv" => Ok(ValueFormat::Csv),
            "raw" => Ok(ValueFormat::Raw),
            "debezium-json" => Ok(ValueFormat::DebeziumJson),
            "avro" => Ok(ValueFormat::Avro),
            "avro-confluent" => Ok(ValueFormat::AvroConfluent),
            other => Err(Error::config(
                "format",
                format!(
                    "unknown Kafka value format `{other}`; use json, csv, raw, debezium-json, avro or avro-confluent"
                ),
            )),
        }
    }

    /// Whether values are Avro (`avro.rs` decodes and encodes them).
    pub fn is_avro(self) -> bool {
        matches!(self, ValueFormat::Avro | ValueFormat::AvroConfluent)
    }

    /// Whether values are Debezium change events (the table is a changelog).
    pub fn is_change_events(self) -> bool {
        matches!(
            self,
            ValueFormat::DebeziumJson | ValueFormat::DebeziumJsonWithSchema
        )
    }

    /// Checks that `schema` suits the format (raw takes exactly one string or bytes
    /// column).
    pub(crate) fn check(self, schema: &SchemaRef) -> Result<()> {
        if self == ValueFormat::Raw {
            let ok = schema.fields().len() == 1
                && matches!(
                    schema.field(0).data_type(),
                    DataType::Utf8 | DataType::Binary
                );
            if !ok {
                return Err(Error::config(
                    "format",
                    "the raw format puts the whole value in one column: declare exactly one VARCHAR or BYTEA column",
                ));
            }
        }
        Ok(())
    }
}

/// The values of one poll's records in one buffer, each followed by a newline: the
/// buffer is a batch of text records as it stands, so a value is copied once out of
/// the client's buffer and nothing is allocated per record.
#[derive(Debug, Default)]
pub(crate) struct Values {
    text: Vec<u8>,
    /// Where each value lies in `text`; `None`: the record has no value.
    spans: Vec<Option<std::ops::Range<usize>>>,
}

impl Values {
    pub(crate) fn push(&mut self, value: Option<&[u8]>) {
        self.spans.push(value.map(|v| {
            let start = self.text.len();
            self.text.extend_from_slice(v);
            self.text.push(b'\n');
            start..start + v.len()
        }));
    }

    pub(crate) fn len(&self) -> usize {
        self.spans.len()
    }

    pub(crate) fn get(&self, index: usize) -> Option<&[u8]> {
        self.spans[index].clone().map(|span| &self.text[span])
    }

    fn each(&self) -> Vec<Option<&[u8]>> {
        (0..self.len()).map(|i| self.get(i)).collect()
    }
}

impl<'a> FromIterator<Option<&'a [u8]>> for Values {
    fn from_iter<I: IntoIterator<Item = Option<&'a [u8]>>>(values: I) -> Self {
        let mut all = Values::default();
        values.into_iter().for_each(|v| all.push(v));
        all
    }
}

/// A record that could not be decoded: its index in the input, the field, the reason.
#[derive(Debug)]
pub(crate) struct BadRecord {
    pub index: usize,
    pub field: Option<String>,
    pub message: String,
}

/// Decodes record values of one format and schema, batch after batch (with one
/// long-lived decoder).
pub(crate) struct ValueDecoder {
    format: ValueFormat,
    /// What a value holds: the declared columns, or Debezium's envelope of them.
    schema: SchemaRef,
    /// Debezium: the declared columns.
    declared: SchemaRef,
    records: RecordDecoder,
    /// Avro values' decoder ([`Self::with_avro`]).
    avro: Option<super::avro::AvroDecoder>,
}

/// The changes a poll's Debezium records stand for.
pub(crate) struct DecodedChanges {
    /// Rows of the declared columns.
    pub batch: RecordBatch,
    pub kinds: Vec<RowKind>,
    /// Each row's record (index into the poll's values).
    pub records: Vec<usize>,
    /// Malformed records left out.
    pub skipped: Vec<usize>,
}

impl ValueDecoder {
    /// Reads the columns `read` (ascending indices into `schema`; the others NULL), or
    /// all of them.
    pub(crate) fn new(format: ValueFormat, schema: SchemaRef, read: Option<Vec<usize>>) -> Self {
        let declared = schema.clone();
        let (schema, read) = match format {
            ValueFormat::DebeziumJson => (debezium::envelope_schema(&schema), None),
            ValueFormat::DebeziumJsonWithSchema => (debezium::wrapped_schema(&schema), None),
            _ => (schema, read),
        };
        Self {
            records: RecordDecoder::reading(text_format(format), &schema, read),
            format,
            schema,
            declared,
            avro: None,
        }
    }

    /// The decoder of Avro values (`'format' = 'avro'` or `'avro-confluent'`).
    ///
    /// # Errors
    /// A given schema that is not Avro or does not resolve to the columns.
    pub(crate) fn with_avro(mut self, options: &super::avro::AvroOptions) -> Result<Self> {
        if self.format.is_avro() {
            self.avro = Some(super::avro::AvroDecoder::new(
                self.declared.clone(),
                options,
            )?);
        }
        Ok(self)
    }

    /// Whether values are change events (rows come with kinds: [`Self::decode_changes`]).
    pub(crate) fn is_changelog(&self) -> bool {
        self.format.is_change_events()
    }

    /// Decodes Debezium change events into rows with kinds. Records without a value or
    /// with an empty one (Debezium's tombstones after a delete) carry no change and are
    /// passed over, as Flink's `debezium-json` does.
    pub(crate) fn decode_changes(
        &mut self,
        values: &Values,
        skip: bool,
    ) -> std::result::Result<DecodedChanges, BadRecord> {
        let present: Vec<usize> = (0..values.len())
            .filter(|&i| values.get(i).is_some_and(|v| !v.is_empty()))
            .collect();
        let events: Values = present.iter().map(|&i| values.get(i)).collect();
        let (decoded, bad_events) = self.decode(&events, skip).map_err(|mut bad| {
            bad.index = present[bad.index];
            bad
        })?;
        let envelopes = match self.format {
            ValueFormat::DebeziumJsonWithSchema => {
                debezium::payloads(&decoded).map_err(|e| BadRecord {
                    index: 0,
                    field: Some("payload".into()),
                    message: e.to_string(),
                })?
            }
            _ => decoded,
        };
        // Envelope row → record.
        let record_of: Vec<usize> = (0..events.len())
            .filter(|i| !bad_events.contains(i))
            .map(|i| present[i])
            .collect();
        let (changes, bad_rows) =
            debezium::changes(&envelopes, &self.declared, skip).map_err(|bad| BadRecord {
                index: record_of.get(bad.index).copied().unwrap_or(0),
                field: Some("op".into()),
                message: bad.message,
            })?;
        let mut skipped: Vec<usize> = bad_events.iter().map(|&i| present[i]).collect();
        skipped.extend(bad_rows.iter().map(|&r| record_of[r]));
        Ok(DecodedChanges {
            records: changes.envelopes.iter().map(|&r| record_of[r]).collect(),
            batch: changes.batch,
            kinds: changes.kinds,
            skipped,
        })
    }

    /// Decodes `values` into rows. All good: the batch. Otherwise the bad records are
    /// found one by one; `skip` leaves them out (their indices are returned) or the
    /// first one is the error.
    pub(crate) fn decode(
        &mut self,
        values: &Values,
        skip: bool,
    ) -> std::result::Result<(RecordBatch, Vec<usize>), BadRecord> {
        if self.format == ValueFormat::Raw {
            return decode_raw(&self.schema, &values.each(), skip);
        }
        if let Some(avro) = &mut self.avro {
            return avro.decode(values, skip);
        }
        if values.spans.iter().all(Option::is_some) {
            if let Ok(Some(batch)) = self.records.decode(&values.text, values.len()) {
                if batch.num_rows() == values.len() {
                    return Ok((batch, Vec::new()));
                }
            }
        }
        decode_one_by_one(&self.records, &self.schema, &values.each(), skip)
    }
}

fn text_format(format: ValueFormat) -> FileFormat {
    match format {
        ValueFormat::Csv => FileFormat::Csv,
        _ => FileFormat::Jsonl,
    }
}

/// Decodes each value on its own, to name the bad one or leave it out.
fn decode_one_by_one(
    records: &RecordDecoder,
    schema: &SchemaRef,
    values: &[Option<&[u8]>],
    skip: bool,
) -> std::result::Result<(RecordBatch, Vec<usize>), BadRecord> {
    let mut parts = Vec::new();
    let mut skipped = Vec::new();
    for (index, value) in values.iter().enumerate() {
        let result = match value {
            None => Err("the record has no value".to_string()),
            Some(v) => records.decode_one(v).and_then(|b| {
                b.filter(|b| b.num_rows() == 1)
                    .ok_or_else(|| "the value holds no single record".to_string())
            }),
        };
        match result {
            Ok(batch) => parts.push(batch),
            Err(_) if skip => skipped.push(index),
            Err(message) => {
                return Err(BadRecord {
                    index,
                    field: field_of(&message, schema),
                    message,
                })
            }
        }
    }
    let batch = concat_batches(schema, &parts).map_err(|e| BadRecord {
        index: 0,
        field: None,
        message: e.to_string(),
    })?;
    Ok((batch, skipped))
}

fn decode_raw(
    schema: &SchemaRef,
    values: &[Option<&[u8]>],
    skip: bool,
) -> std::result::Result<(RecordBatch, Vec<usize>), BadRecord> {
    let field = schema.field(0);
    let mut skipped = Vec::new();
    let column: ArrayRef = if field.data_type() == &DataType::Binary {
        Arc::new(BinaryArray::from(values.to_vec()))
    } else {
        let mut strings = Vec::with_capacity(values.len());
        for (index, v) in values.iter().enumerate() {
            match v.map(std::str::from_utf8) {
                None => strings.push(None),
                Some(Ok(s)) => strings.push(Some(s)),
                Some(Err(_)) if skip => skipped.push(index),
                Some(Err(e)) => {
                    return Err(BadRecord {
                        index,
                        field: Some(field.name().clone()),
                        message: format!(
                        "the value is not UTF-8 text ({e}); declare the column BYTEA to read bytes"
                    ),
                    })
                }
            }
        }
        Arc::new(StringArray::from(strings))
    };
    let batch = RecordBatch::try_new(schema.clone(), vec![column]).map_err(|e| BadRecord {
        index: 0,
        field: None,
        message: e.to_string(),
    })?;
    Ok((batch, skipped))
}

/// One value per row of `batch` (which holds only the columns to write).
///
/// # Errors
/// A value cannot be encoded (raw needs one string or bytes column).
pub(crate) fn encode_rows(format: ValueFormat, batch: &RecordBatch) -> Result<Vec<Vec<u8>>> {
    match format {
        ValueFormat::Json => {
            let mut out = Vec::new();
            let mut writer = riffle_core::arrow::json::LineDelimitedWriter::new(&mut out);
            writer.write(batch)?;
            writer.finish()?;
            drop(writer);
            // JSON escapes newlines inside strings, so each line is one row.
            Ok(out
                .split(|b| *b == b'\n')
                .filter(|l| !l.is_empty())
                .map(<[u8]>::to_vec)
                .collect())
        }
        ValueFormat::Csv => (0..batch.num_rows())
            .map(|row| {
                let mut out = Vec::new();
                let mut writer = riffle_core::arrow::csv::WriterBuilder::new()
                    .with_header(false)
                    .build(&mut out);
                writer.write(&batch.slice(row, 1))?;
                drop(writer);
                while out.last() == Some(&b'\n') {
                    out.pop();
                }
                Ok(out)
            })
            .collect(),
        // Rows with their kinds as Debezium change events (`create`, or `delete` for a
        // withdrawn row).
        ValueFormat::DebeziumJson => {
            encode_rows(ValueFormat::Json, &crate::sinks::debezium_envelope(batch)?)
        }
        ValueFormat::Avro | ValueFormat::AvroConfluent => Err(Error::plan(
            "Avro values are encoded by the sink's own encoder (kafka/avro.rs)",
        )),
        ValueFormat::DebeziumJsonWithSchema => Err(Error::config(
            "debezium-json.schema-include",
            "riffle writes Debezium events without their schema; leave the option unset on a sink",
        )),
        ValueFormat::Raw => {
            if batch.num_columns() != 1 {
                return Err(Error::config(
                    "format",
                    "the raw format writes one column; select exactly one VARCHAR or BYTEA column",
                ));
            }
            let column = batch.column(0);
            match column.data_type() {
                DataType::Utf8 => Ok(column
                    .as_string::<i32>()
                    .iter()
                    .map(|v| v.unwrap_or_default().as_bytes().to_vec())
                    .collect()),
                DataType::Binary => Ok(column
                    .as_binary::<i32>()
                    .iter()
                    .map(|v| v.unwrap_or_default().to_vec())
                    .collect()),
                other => Err(Error::config(
                    "format",
                    format!("the raw format writes a VARCHAR or BYTEA column, not {other}"),
                )),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use riffle_core::arrow::datatypes::{Field, Int64Type, Schema};

    #[test]
    fn debezium_events_with_or_without_their_schema_and_tombstones_decode_alike() {
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, true)]));
        let plain: [Option<&[u8]>; 4] = [
            Some(br#"{"before": null, "after": {"id": 1}, "op": "c"}"#),
            None,
            Some(b""),
            Some(br#"{"before": {"id": 1}, "after": {"id": 2}, "op": "u"}"#),
        ];
        let wrapped: [Option<&[u8]>; 4] = [
            Some(br#"{"schema": {"type": "struct"}, "payload": {"before": null, "after": {"id": 1}, "op": "c"}}"#),
            None,
            Some(b""),
            Some(br#"{"schema": {"type": "struct"}, "payload": {"before": {"id": 1}, "after": {"id": 2}, "op": "u"}}"#),
        ];
        for (format, values) in [
            (ValueFormat::DebeziumJson, plain),
            (ValueFormat::DebeziumJsonWithSchema, wrapped),
        ] {
            let mut decoder = ValueDecoder::new(format, schema.clone(), None);
            let values: Values = values.into_iter().collect();
            let changes = decoder.decode_changes(&values, false).ok().unwrap();
            let kinds: Vec<_> = changes.kinds.iter().map(|k| k.short()).collect();
            assert_eq!(kinds, ["+I", "-U", "+U"], "{format:?}");
            assert_eq!(changes.records, [0, 3, 3]);
            assert!(changes.skipped.is_empty());
            let ids = changes.batch.column(0).as_primitive::<Int64Type>();
            assert_eq!(ids.values().to_vec(), [1, 1, 2]);
        }
        // A wrapped event without its payload is malformed, named by its record.
        let mut decoder = ValueDecoder::new(ValueFormat::DebeziumJsonWithSchema, schema, None);
        let values: Values = [Some(&br#"{"schema": {}}"#[..])].into_iter().collect();
        assert_eq!(
            decoder.decode_changes(&values, false).err().unwrap().index,
            0
        );
    }

    #[test]
    fn a_value_holding_two_records_is_bad_not_half_read() {
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, true)]));
        let mut values = ValueDecoder::new(ValueFormat::Json, schema, None);
        let batch: [Option<&[u8]>; 3] = [
            Some(b"{\"id\": 1}"),
            Some(b"{\"id\": 2} {\"id\": 9}"),
            Some(b"{\"id\": 3}"),
        ];
        let batch: Values = batch.into_iter().collect();
        let bad = values.decode(&batch, false).expect_err("must be bad");
        assert_eq!(bad.index, 1);
        let Ok((rows, skipped)) = values.decode(&batch, true) else {
            panic!("skipping must succeed")
        };
        assert_eq!(skipped, vec![1]);
        let ids: Vec<i64> = rows.column(0).as_primitive::<Int64Type>().values().to_vec();
        assert_eq!(ids, vec![1, 3]);
        // The decoder goes on after a bad batch.
        let last: Values = [batch.get(2)].into_iter().collect();
        let Ok((rows, _)) = values.decode(&last, false) else {
            panic!("a good batch must decode")
        };
        assert_eq!(rows.num_rows(), 1);
    }

    #[test]
    fn a_value_decoder_reading_some_columns_skips_the_others_unread() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("note", DataType::Int64, true),
        ]));
        let batch: [Option<&[u8]>; 2] = [
            Some(b"{\"id\": 1, \"note\": \"not a number\"}"),
            Some(b"{\"id\": 2, \"note\": 5}"),
        ];
        let batch: Values = batch.into_iter().collect();
        let mut all = ValueDecoder::new(ValueFormat::Json, schema.clone(), None);
        assert_eq!(all.decode(&batch, false).expect_err("bad note").index, 0);
        let mut ids = ValueDecoder::new(ValueFormat::Json, schema, Some(vec![0]));
        let Ok((rows, _)) = ids.decode(&batch, false) else {
            panic!("the note is not read")
        };
        let got: Vec<i64> = rows.column(0).as_primitive::<Int64Type>().values().to_vec();
        assert_eq!(got, vec![1, 2]);
        assert_eq!(rows.column(1).null_count(), 2);
    }
}
