//! Upsert topics (Flink's `upsert-kafka`): a record's value is the whole new row of its
//! key, and a record without a value (a tombstone) deletes the key's row.
//!
//! The source emits each value as `+U` and each tombstone as `-D` carrying only the key
//! columns (the others NULL; the event time is the record's timestamp). These are not
//! yet a changelog — an upsert does not say what it replaces — so the planner puts the
//! upsert normalizer (`riffle_operators::UpsertNormalizeFactory`), keyed by the primary
//! key, right after the source (docs/engine.md, "Changelog streams").
//!
//! A key is a JSON object of the key columns (Flink's `'key.format' = 'json'`), or, for
//! a single key column, its bare text (what riffle's keyed Kafka sink writes).

use super::format::{BadRecord, DecodedChanges, ValueDecoder, ValueFormat, Values};
use riffle_core::arrow::array::{new_null_array, ArrayRef, Int64Array, RecordBatch};
use riffle_core::arrow::compute::interleave;
use riffle_core::arrow::compute::kernels::cast::cast;
use riffle_core::arrow::datatypes::{DataType, Schema, SchemaRef, TimeUnit};
use riffle_core::{Error, Result, RowKind};
use std::sync::Arc;

/// Decodes an upsert topic's records: values as rows, tombstones as deletes of keys.
pub(crate) struct UpsertDecoder {
    values: ValueDecoder,
    keys: ValueDecoder,
    key_schema: SchemaRef,
    value_schema: SchemaRef,
    /// The value column holding the event time, which a tombstone takes from its
    /// record's timestamp; `None` when the event time is the record's timestamp anyway.
    event_field: Option<String>,
}

impl UpsertDecoder {
    /// Values are JSON rows of `value_schema`; `key` names the key columns.
    ///
    /// # Errors
    /// A key column that is not a value column.
    pub(crate) fn new(
        value_schema: SchemaRef,
        key: &[String],
        event_field: Option<String>,
    ) -> Result<Self> {
        let fields = key
            .iter()
            .map(|k| {
                value_schema.field_with_name(k).cloned().map_err(|_| {
                    Error::config(
                        "PRIMARY KEY",
                        format!("the key column `{k}` is not a column of the value"),
                    )
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let key_schema = Arc::new(Schema::new(fields));
        Ok(Self {
            values: ValueDecoder::new(ValueFormat::Json, value_schema.clone(), None),
            keys: ValueDecoder::new(ValueFormat::Json, key_schema.clone(), None),
            key_schema,
            value_schema,
            event_field,
        })
    }

    /// The changes of one poll's records, in record order. `keys` are the records'
    /// keys, `times` their timestamps (epoch ms).
    pub(crate) fn decode(
        &mut self,
        values: &Values,
        keys: &Values,
        times: &[Option<i64>],
        skip: bool,
    ) -> std::result::Result<DecodedChanges, BadRecord> {
        let n = values.len();
        let (upserts, tombstones): (Vec<usize>, Vec<usize>) =
            (0..n).partition(|&i| values.get(i).is_some());
        let mut skipped = Vec::new();
        let upsert_values: Values = upserts.iter().map(|&i| values.get(i)).collect();
        let (rows, bad) = self
            .values
            .decode(&upsert_values, skip)
            .map_err(|b| at(b, &upserts))?;
        skipped.extend(bad.iter().map(|&b| upserts[b]));
        let upserts: Vec<usize> = kept(&upserts, &bad);
        // Tombstones: their keys as JSON objects of the key columns.
        let mut key_lines = Values::default();
        let mut lines = Vec::with_capacity(tombstones.len());
        for &i in &tombstones {
            let line = match keys.get(i) {
                Some(key) => self.key_object(key),
                None => Err(
                    "a record without a value (a tombstone) must have a key: the key it deletes"
                        .to_string(),
                ),
            };
            match line {
                Ok(line) => lines.push(line),
                Err(_) if skip => skipped.push(i),
                Err(message) => {
                    return Err(BadRecord {
                        index: i,
                        field: Some("key".into()),
                        message,
                    })
                }
            }
        }
        let tombstones: Vec<usize> = tombstones
            .into_iter()
            .filter(|i| !skipped.contains(i))
            .collect();
        for line in &lines {
            key_lines.push(Some(line.as_bytes()));
        }
        let (key_rows, bad) = self
            .keys
            .decode(&key_lines, skip)
            .map_err(|b| at(b, &tombstones))?;
        skipped.extend(bad.iter().map(|&b| tombstones[b]));
        let tombstones = kept(&tombstones, &bad);
        let deletes = self
            .deleted_rows(&key_rows, &tombstones, times)
            .map_err(|e| BadRecord {
                index: tombstones.first().copied().unwrap_or(0),
                field: Some("key".into()),
                message: e.to_string(),
            })?;
        // Both kinds of row back in record order.
        let mut order: Vec<(usize, usize, usize)> = upserts
            .iter()
            .enumerate()
            .map(|(r, &i)| (i, 0, r))
            .chain(tombstones.iter().enumerate().map(|(r, &i)| (i, 1, r)))
            .collect();
        order.sort_unstable();
        let picks: Vec<(usize, usize)> = order.iter().map(|&(_, side, r)| (side, r)).collect();
        let columns = (0..self.value_schema.fields().len())
            .map(|c| interleave(&[rows.column(c).as_ref(), deletes[c].as_ref()], &picks))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| BadRecord {
                index: 0,
                field: None,
                message: e.to_string(),
            })?;
        let batch =
            RecordBatch::try_new(self.value_schema.clone(), columns).map_err(|e| BadRecord {
                index: 0,
                field: None,
                message: e.to_string(),
            })?;
        skipped.sort_unstable();
        Ok(DecodedChanges {
            batch,
            kinds: order
                .iter()
                .map(|&(_, side, _)| match side {
                    0 => RowKind::UpdateAfter,
                    _ => RowKind::Delete,
                })
                .collect(),
            records: order.iter().map(|&(i, _, _)| i).collect(),
            skipped,
        })
    }

    /// A record key as one JSON line of the key columns: a JSON object as it is, or the
    /// bare text of a single key column.
    fn key_object(&self, key: &[u8]) -> std::result::Result<String, String> {
        let text = std::str::from_utf8(key).map_err(|_| "the key is not UTF-8 text".to_string())?;
        let trimmed = text.trim();
        if trimmed.starts_with('{') {
            return Ok(trimmed.to_string());
        }
        let [field] = self.key_schema.fields().as_ref() else {
            return Err(format!(
                "the key `{trimmed}` is not a JSON object of the key columns ({})",
                self.key_schema
                    .fields()
                    .iter()
                    .map(|f| f.name().as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        };
        let value = match field.data_type() {
            DataType::Utf8 | DataType::LargeUtf8 => serde_json::Value::String(text.into()),
            _ => serde_json::from_str(trimmed)
                .map_err(|_| format!("the key `{trimmed}` is not a {}", field.data_type()))?,
        };
        Ok(serde_json::json!({ field.name(): value }).to_string())
    }

    /// Rows of the value's columns for deleted keys: the key columns, the event time
    /// from the record, NULL elsewhere.
    fn deleted_rows(
        &self,
        keys: &RecordBatch,
        records: &[usize],
        times: &[Option<i64>],
    ) -> Result<Vec<ArrayRef>> {
        let n = records.len();
        self.value_schema
            .fields()
            .iter()
            .map(|f| {
                if let Some(column) = keys.column_by_name(f.name()) {
                    return Ok(column.clone());
                }
                if self.event_field.as_deref() == Some(f.name().as_str()) {
                    let ms: ArrayRef =
                        Arc::new(records.iter().map(|&i| times[i]).collect::<Int64Array>());
                    return Ok(match f.data_type() {
                        DataType::Int64 => ms,
                        other => cast(
                            &cast(&ms, &DataType::Timestamp(TimeUnit::Millisecond, None))?,
                            other,
                        )?,
                    });
                }
                Ok(new_null_array(f.data_type(), n))
            })
            .collect()
    }
}

/// The error's record index in the poll, from its index among `records`.
fn at(mut bad: BadRecord, records: &[usize]) -> BadRecord {
    bad.index = records.get(bad.index).copied().unwrap_or(0);
    bad
}

/// `records` without the positions `bad`.
fn kept(records: &[usize], bad: &[usize]) -> Vec<usize> {
    records
        .iter()
        .enumerate()
        .filter(|(k, _)| !bad.contains(k))
        .map(|(_, &i)| i)
        .collect()
}
