//! Avro record values, through the Arrow project's `arrow-avro` reader and writer.
//!
//! - `'format' = 'avro'`: each value is one Avro datum (binary encoding, no framing) of
//!   the writer schema: the one given (`'avro.schema'`) or the one derived from the
//!   table's columns. Read, the datum is resolved against the table's schema.
//! - `'format' = 'avro-confluent'`: Confluent's wire format, a magic byte `0`, the
//!   writer schema's registry id (4 bytes, big-endian), the datum. A sink registers its
//!   schema under the subject `<topic>-value` (or `'avro-confluent.subject'`) once and
//!   frames every value with the id the registry gives; a source fetches each id it
//!   meets from the registry once, caches it, and resolves the datum against the table's
//!   schema, so records written with older or newer compatible schemas read as the table.
//!
//! The Avro view of the columns: every field nullable (`["null", T]`), TIMESTAMP as
//! `timestamp-millis` (Flink's mapping); decoded columns are cast to the declared types.
//! `arrow-avro`'s streaming decoder reads only framed values, so a plain `avro` value is
//! given the Confluent frame of a local id before decoding.

use super::format::{BadRecord, Values};
use super::registry::SchemaRegistry;
use arrow_avro::reader::{Decoder, ReaderBuilder};
use arrow_avro::schema::{
    AvroSchema, Fingerprint, FingerprintAlgorithm, FingerprintStrategy, SchemaStore,
    SCHEMA_METADATA_KEY,
};
use arrow_avro::writer::format::{AvroBinaryFormat, AvroSoeFormat};
use arrow_avro::writer::{Encoder, WriterBuilder};
use riffle_core::arrow::compute::{cast, concat_batches};
use riffle_core::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use riffle_core::{Error, RecordBatch, Result};
use std::collections::HashMap;
use std::sync::Arc;

/// Rows per decoded batch at most (a poll's records are far fewer).
const BATCH_ROWS: usize = 1 << 20;

/// The id a plain `avro` value is framed with before decoding.
const LOCAL_ID: u32 = 0;

/// How record values are Avro.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AvroOptions {
    /// The schema registry (`avro-confluent`); `None`: plain `avro` values.
    pub registry_url: Option<String>,
    /// The writer schema (Avro JSON) given in the table's options; `None`: derived from
    /// the columns.
    pub schema: Option<String>,
    /// The registry subject a sink registers its schema under (`<topic>-value`).
    pub subject: String,
}

/// The columns as Avro sees them: nullable, timestamps in milliseconds (UTC).
fn avro_view(declared: &Schema) -> Schema {
    let fields: Vec<Field> = declared
        .fields()
        .iter()
        .map(|f| {
            let data_type = match f.data_type() {
                DataType::Timestamp(_, _) => {
                    DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()))
                }
                other => other.clone(),
            };
            Field::new(f.name(), data_type, true)
        })
        .collect();
    Schema::new(fields)
}

fn avro_error(e: impl std::fmt::Display) -> Error {
    Error::config("format", format!("Avro: {e}"))
}

/// The schema derived from the columns, as Avro JSON.
fn derived_schema(view: &Schema) -> Result<String> {
    Ok(AvroSchema::try_from(view).map_err(avro_error)?.json_string)
}

/// `reader` (Avro JSON) renamed to the writer's record name: Avro resolves a record
/// only against one of the same name.
fn named_like(reader: &str, writer: &str) -> Result<String> {
    let mut reader: serde_json::Value = serde_json::from_str(reader).map_err(avro_error)?;
    let writer: serde_json::Value = serde_json::from_str(writer).map_err(avro_error)?;
    for key in ["name", "namespace"] {
        match writer.get(key) {
            Some(v) => reader[key] = v.clone(),
            None => {
                if let Some(o) = reader.as_object_mut() {
                    o.remove(key);
                }
            }
        }
    }
    Ok(reader.to_string())
}

/// Decodes Avro values into rows of the declared columns.
pub(crate) struct AvroDecoder {
    declared: SchemaRef,
    /// The table's schema as Avro JSON (the reader schema).
    reader: String,
    registry: Option<SchemaRegistry>,
    /// Writer schemas by id.
    writers: HashMap<u32, String>,
    /// The writer whose record name the reader takes.
    newest: Option<u32>,
    decoder: Option<Decoder>,
}

impl AvroDecoder {
    /// # Errors
    /// A given schema that is not Avro, or columns Avro cannot hold.
    pub(crate) fn new(declared: SchemaRef, options: &AvroOptions) -> Result<Self> {
        let reader = derived_schema(&avro_view(&declared))?;
        let mut writers = HashMap::new();
        let registry = options.registry_url.as_deref().map(SchemaRegistry::new);
        if registry.is_none() {
            writers.insert(
                LOCAL_ID,
                options.schema.clone().unwrap_or_else(|| reader.clone()),
            );
        }
        let mut decoder = Self {
            declared,
            reader,
            registry,
            newest: (!writers.is_empty()).then_some(LOCAL_ID),
            writers,
            decoder: None,
        };
        if decoder.registry.is_none() {
            // A given schema that does not resolve to the table fails here, at the start.
            decoder.decoder = Some(decoder.build()?);
        }
        Ok(decoder)
    }

    fn build(&self) -> Result<Decoder> {
        let mut store = SchemaStore::new_with_type(FingerprintAlgorithm::Id);
        for (&id, schema) in &self.writers {
            store
                .set(Fingerprint::Id(id), AvroSchema::new(schema.clone()))
                .map_err(avro_error)?;
        }
        let reader = match self.newest.and_then(|id| self.writers.get(&id)) {
            Some(writer) => named_like(&self.reader, writer)?,
            None => self.reader.clone(),
        };
        ReaderBuilder::new()
            .with_batch_size(BATCH_ROWS)
            .with_reader_schema(AvroSchema::new(reader))
            .with_writer_schema_store(store)
            .build_decoder()
            .map_err(|e| {
                avro_error(format!(
                    "the writer schema does not resolve to the table's columns: {e}"
                ))
            })
    }

    /// The value as the decoder reads it: framed with its id, which the registry's
    /// values carry already.
    fn framed<'a>(
        &self,
        value: &'a [u8],
    ) -> std::result::Result<std::borrow::Cow<'a, [u8]>, String> {
        if self.registry.is_none() {
            let mut framed = vec![0u8];
            framed.extend_from_slice(&LOCAL_ID.to_be_bytes());
            framed.extend_from_slice(value);
            return Ok(framed.into());
        }
        match value {
            [0, _, _, _, _, ..] => Ok(value.into()),
            _ => Err("the value is not in the Confluent wire format (magic byte 0, 4-byte schema id, Avro datum)".into()),
        }
    }

    /// Fetches the writer schemas of ids not seen yet, and rebuilds the decoder.
    fn learn_ids(&mut self, values: &Values) -> Result<()> {
        let Some(registry) = &self.registry else {
            return Ok(());
        };
        let mut fresh = Vec::new();
        for i in 0..values.len() {
            if let Some([0, a, b, c, d, ..]) = values.get(i) {
                let id = u32::from_be_bytes([*a, *b, *c, *d]);
                if !self.writers.contains_key(&id) && !fresh.contains(&id) {
                    fresh.push(id);
                }
            }
        }
        for &id in &fresh {
            let schema = registry.schema(id)?;
            self.writers.insert(id, schema);
            self.newest = Some(id);
        }
        if !fresh.is_empty() || self.decoder.is_none() {
            self.decoder = Some(self.build()?);
        }
        Ok(())
    }

    /// Decodes `values` in order. Bad records fail the poll, or with `skip` are left
    /// out (their indices returned).
    pub(crate) fn decode(
        &mut self,
        values: &Values,
        skip: bool,
    ) -> std::result::Result<(RecordBatch, Vec<usize>), BadRecord> {
        let bad = |index: usize, message: String| BadRecord {
            index,
            field: None,
            message,
        };
        self.learn_ids(values).map_err(|e| bad(0, e.to_string()))?;
        let mut batches = Vec::new();
        let mut skipped = Vec::new();
        // The records whose rows the decoder holds, not yet flushed.
        let mut pending: Vec<usize> = Vec::new();
        for i in 0..values.len() {
            match self.feed(values, i, &mut batches) {
                Ok(flushed) => {
                    if flushed {
                        pending.clear();
                    }
                    pending.push(i);
                }
                Err(message) => {
                    // A failed value may leave a half-read row behind: start afresh and
                    // read the pending good ones again.
                    self.decoder = Some(self.build().map_err(|e| bad(i, e.to_string()))?);
                    let mut again = Vec::new();
                    for &p in &pending {
                        if self.feed(values, p, &mut batches).map_err(|m| bad(p, m))? {
                            again.clear();
                        }
                        again.push(p);
                    }
                    pending = again;
                    if !skip {
                        return Err(bad(i, message));
                    }
                    skipped.push(i);
                }
            }
        }
        self.flush_into(&mut batches).map_err(|m| bad(0, m))?;
        let batch = self
            .as_declared(&batches)
            .map_err(|e| bad(0, e.to_string()))?;
        Ok((batch, skipped))
    }

    /// Feeds value `i`; whether the rows before it were flushed (a new writer schema).
    fn feed(
        &mut self,
        values: &Values,
        i: usize,
        batches: &mut Vec<RecordBatch>,
    ) -> std::result::Result<bool, String> {
        let value = values.get(i).ok_or("the record has no value")?;
        let framed = self.framed(value)?;
        self.decode_one(&framed, batches)
    }

    /// Feeds one framed value: exactly one row. Whether the rows before it were flushed.
    fn decode_one(
        &mut self,
        framed: &[u8],
        batches: &mut Vec<RecordBatch>,
    ) -> std::result::Result<bool, String> {
        let mut at = 0;
        let mut flushed = false;
        while at < framed.len() {
            let decoder = self.decoder.as_mut().ok_or("no decoder")?;
            let n = decoder.decode(&framed[at..]).map_err(|e| e.to_string())?;
            at += n;
            if at < framed.len() {
                if decoder.batch_is_full() {
                    // A new writer schema: the rows so far leave as their own batch.
                    self.flush_into(batches)?;
                    flushed = true;
                } else if n == 0 {
                    return Err("the Avro datum is cut short".into());
                }
            }
        }
        Ok(flushed)
    }

    fn flush_into(&mut self, batches: &mut Vec<RecordBatch>) -> std::result::Result<(), String> {
        if let Some(decoder) = self.decoder.as_mut() {
            if let Some(batch) = decoder.flush().map_err(|e| e.to_string())? {
                batches.push(batch);
            }
        }
        Ok(())
    }

    /// The decoded batches as one batch of the declared columns and types.
    fn as_declared(&self, batches: &[RecordBatch]) -> Result<RecordBatch> {
        let mut parts = Vec::with_capacity(batches.len());
        for b in batches {
            let columns = self
                .declared
                .fields()
                .iter()
                .map(|f| {
                    let column = b.column_by_name(f.name()).ok_or_else(|| {
                        avro_error(format!("the decoded value has no field `{}`", f.name()))
                    })?;
                    Ok(cast(column, f.data_type())?)
                })
                .collect::<Result<Vec<_>>>()?;
            parts.push(RecordBatch::try_new(self.declared.clone(), columns)?);
        }
        Ok(concat_batches(&self.declared, &parts)?)
    }
}

/// Encodes rows as Avro values.
pub(crate) struct AvroEncoder {
    options: AvroOptions,
    /// Built at the first batch, from its columns (the registry asked once).
    encoder: Option<(SchemaRef, Encoder)>,
}

impl AvroEncoder {
    pub(crate) fn new(options: AvroOptions) -> Self {
        Self {
            options,
            encoder: None,
        }
    }

    fn build(&self, columns: &Schema) -> Result<(SchemaRef, Encoder)> {
        let view = avro_view(columns);
        let writer = match &self.options.schema {
            Some(given) => given.clone(),
            None => derived_schema(&view)?,
        };
        let view = Arc::new(Schema::new_with_metadata(
            view.fields().clone(),
            HashMap::from([(SCHEMA_METADATA_KEY.to_string(), writer.clone())]),
        ));
        let builder = WriterBuilder::new(view.as_ref().clone());
        let encoder = match &self.options.registry_url {
            Some(url) => {
                let id = SchemaRegistry::new(url).register(&self.options.subject, &writer)?;
                builder
                    .with_fingerprint_strategy(FingerprintStrategy::Id(id))
                    .build_encoder::<AvroSoeFormat>()
            }
            None => builder.build_encoder::<AvroBinaryFormat>(),
        }
        .map_err(avro_error)?;
        Ok((view, encoder))
    }

    /// One value per row of `batch` (which holds only the columns to write).
    ///
    /// # Errors
    /// The registry refuses the schema, or a value does not fit it.
    pub(crate) fn encode(&mut self, batch: &RecordBatch) -> Result<Vec<Vec<u8>>> {
        if self.encoder.is_none() {
            self.encoder = Some(self.build(&batch.schema())?);
        }
        let Some((view, encoder)) = self.encoder.as_mut() else {
            return Ok(Vec::new());
        };
        let columns = view
            .fields()
            .iter()
            .zip(batch.columns())
            .map(|(f, c)| Ok(cast(c, f.data_type())?))
            .collect::<Result<Vec<_>>>()?;
        let batch = RecordBatch::try_new(view.clone(), columns)?;
        encoder.encode(&batch).map_err(avro_error)?;
        Ok(encoder.flush().iter().map(|row| row.to_vec()).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use riffle_core::arrow::array::{ArrayRef, AsArray, Int64Array, StringArray};
    use riffle_core::arrow::datatypes::Int64Type;

    fn declared() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("name", DataType::Utf8, true),
        ]))
    }

    fn rows() -> RecordBatch {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(vec![Some(1), Some(2), None])),
            Arc::new(StringArray::from(vec![Some("a"), None, Some("c")])),
        ];
        RecordBatch::try_new(declared(), columns).unwrap()
    }

    #[test]
    fn plain_avro_values_round_trip_and_a_bad_one_is_named() {
        let options = AvroOptions::default();
        let values = AvroEncoder::new(options.clone()).encode(&rows()).unwrap();
        assert_eq!(values.len(), 3);
        let mut all: Values = values.iter().map(|v| Some(v.as_slice())).collect();
        let mut decoder = AvroDecoder::new(declared(), &options).unwrap();
        let (batch, skipped) = decoder.decode(&all, false).unwrap();
        assert!(skipped.is_empty());
        assert_eq!(batch, rows());
        // A cut-short datum between good ones: an error naming it, or skipped.
        all = [
            Some(values[0].as_slice()),
            Some(&values[1][..1]),
            Some(values[2].as_slice()),
        ]
        .into_iter()
        .collect();
        assert_eq!(decoder.decode(&all, false).err().map(|b| b.index), Some(1));
        let (batch, skipped) = decoder.decode(&all, true).unwrap();
        assert_eq!(skipped, [1]);
        let ids = batch.column(0).as_primitive::<Int64Type>();
        assert_eq!(ids.iter().collect::<Vec<_>>(), [Some(1), None]);
    }

    #[test]
    fn a_writer_schema_with_other_fields_resolves_to_the_table() {
        // Written with an extra field and without `name` (which has a default of null).
        let writer = r#"{"type":"record","name":"topLevelRecord","fields":[
            {"name":"id","type":["null","long"]},{"name":"extra","type":"string"}]}"#;
        let written = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("extra", DataType::Utf8, false),
        ]));
        let batch = RecordBatch::try_new(
            written,
            vec![
                Arc::new(Int64Array::from(vec![7])) as ArrayRef,
                Arc::new(StringArray::from(vec!["x"])),
            ],
        )
        .unwrap();
        let options = AvroOptions {
            schema: Some(writer.into()),
            ..AvroOptions::default()
        };
        let values = AvroEncoder::new(options.clone()).encode(&batch).unwrap();
        let all: Values = values.iter().map(|v| Some(v.as_slice())).collect();
        let mut decoder = AvroDecoder::new(declared(), &options).unwrap();
        let (batch, _) = decoder.decode(&all, false).unwrap();
        assert_eq!(batch.column(0).as_primitive::<Int64Type>().value(0), 7);
        assert!(batch.column(1).is_null(0));
    }
}
