//! Debezium's JSON change events as changelog rows: `{"before": row, "after": row,
//! "op": …}` with `op` `c` (create) or `r` (snapshot read) → `+I` of `after`, `u` →
//! `-U` of `before` and `+U` of `after`, `d` → `-D` of `before`, as Flink's
//! `debezium-json` format reads them. An update without `before` (a PostgreSQL table
//! without `REPLICA IDENTITY FULL`) cannot be taken back and is a malformed record.
//! A record with no value (the tombstone Debezium writes after a delete, for log
//! compaction) carries no change and is passed over.

use riffle_core::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, StructArray};
use riffle_core::arrow::compute::interleave;
use riffle_core::arrow::compute::kernels::nullif::nullif;
use riffle_core::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use riffle_core::arrow::error::ArrowError;
use riffle_core::{RecordBatch, RowKind};
use std::sync::Arc;

/// The envelope's schema for rows of `schema`: `before`, `after` (both nullable structs
/// of its columns) and `op`.
pub(crate) fn envelope_schema(schema: &SchemaRef) -> SchemaRef {
    let row = DataType::Struct(
        schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect(),
    );
    Arc::new(Schema::new(vec![
        Field::new("before", row.clone(), true),
        Field::new("after", row, true),
        Field::new("op", DataType::Utf8, true),
    ]))
}

/// Envelopes wrapped with their schema, as Kafka Connect's JSON converter writes them
/// with `schemas.enable`: `{"schema": …, "payload": <envelope>}`. The schema is not read
/// (the table's declared columns say what the rows hold).
pub(crate) fn wrapped_schema(schema: &SchemaRef) -> SchemaRef {
    let envelope = envelope_schema(schema);
    Arc::new(Schema::new(vec![Field::new(
        "payload",
        DataType::Struct(envelope.fields().clone()),
        true,
    )]))
}

/// The envelopes inside decoded [`wrapped_schema`] records. A record without a
/// payload gets no `op`, which makes it malformed.
///
/// # Errors
/// Arrow could not rebuild the columns.
pub(crate) fn payloads(wrapped: &RecordBatch) -> Result<RecordBatch, ArrowError> {
    let (fields, mut columns, nulls) = wrapped.column(0).as_struct().clone().into_parts();
    if let Some(nulls) = nulls {
        let missing = BooleanArray::new(!nulls.inner(), None);
        let op = columns.len() - 1;
        columns[op] = nullif(&columns[op], &missing)?;
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
}

/// The rows decoded envelopes stand for.
pub(crate) struct Changes {
    /// Rows of the declared schema.
    pub batch: RecordBatch,
    /// Each row's kind.
    pub kinds: Vec<RowKind>,
    /// Each row's envelope (row of the input batch).
    pub envelopes: Vec<usize>,
}

/// An envelope that stands for no change: its row and why.
pub(crate) struct BadEnvelope {
    pub index: usize,
    pub message: String,
}

/// The changes `envelopes` (a batch of [`envelope_schema`]) stand for, as rows of
/// `schema`; a bad envelope is left out (`skip`: its index is returned) or the error.
pub(crate) fn changes(
    envelopes: &RecordBatch,
    schema: &SchemaRef,
    skip: bool,
) -> Result<(Changes, Vec<usize>), BadEnvelope> {
    let before = envelopes.column(0).as_struct();
    let after = envelopes.column(1).as_struct();
    let op = envelopes.column(2).as_string::<i32>();
    // (image: 0 before, 1 after; envelope) per output row.
    let mut picks: Vec<(usize, usize)> = Vec::new();
    let mut kinds = Vec::new();
    let mut skipped = Vec::new();
    for i in 0..envelopes.num_rows() {
        let has = |s: &StructArray| s.is_valid(i);
        let code = op.is_valid(i).then(|| op.value(i));
        let rows: Result<Vec<(usize, RowKind)>, String> = match code {
            Some("c" | "r") if has(after) => Ok(vec![(1, RowKind::Insert)]),
            Some("u") if has(before) && has(after) => {
                Ok(vec![(0, RowKind::UpdateBefore), (1, RowKind::UpdateAfter)])
            }
            Some("u") if has(after) => Err("an update without `before`: it cannot be taken back (for PostgreSQL, set the table's REPLICA IDENTITY to FULL)".into()),
            Some("d") if has(before) => Ok(vec![(0, RowKind::Delete)]),
            Some(o @ ("c" | "r" | "u" | "d")) => Err(format!("op `{o}` without the row it needs (`after` for c, r, u; `before` for d)")),
            Some(other) => Err(format!("unknown op `{other}`; Debezium writes c, r, u or d")),
            None => Err("no `op`: not a Debezium change event".into()),
        };
        match rows {
            Ok(rows) => {
                for (image, kind) in rows {
                    picks.push((image, i));
                    kinds.push(kind);
                }
            }
            Err(_) if skip => skipped.push(i),
            Err(message) => return Err(BadEnvelope { index: i, message }),
        }
    }
    let columns = (0..schema.fields().len())
        .map(|c| {
            let sides: [&dyn Array; 2] = [before.column(c).as_ref(), after.column(c).as_ref()];
            interleave(&sides, &picks)
        })
        .collect::<Result<Vec<ArrayRef>, _>>()
        .map_err(|e| BadEnvelope {
            index: 0,
            message: e.to_string(),
        })?;
    let nullable = Arc::new(Schema::new(
        schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect::<Vec<_>>(),
    ));
    let batch = RecordBatch::try_new(nullable, columns).map_err(|e| BadEnvelope {
        index: 0,
        message: e.to_string(),
    })?;
    let envelopes = picks.iter().map(|(_, i)| *i).collect();
    Ok((
        Changes {
            batch,
            kinds,
            envelopes,
        },
        skipped,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::RecordDecoder;
    use crate::sinks::FileFormat;
    use riffle_core::arrow::array::Int64Array;
    use riffle_core::arrow::datatypes::Int64Type;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("v", DataType::Int64, true),
        ]))
    }

    fn envelopes(lines: &[&str]) -> RecordBatch {
        let text = lines.join("\n") + "\n";
        let decoder = RecordDecoder::reading(FileFormat::Jsonl, &envelope_schema(&schema()), None);
        let mut decoder = decoder;
        decoder
            .decode(text.as_bytes(), lines.len())
            .unwrap()
            .unwrap()
    }

    #[test]
    fn each_op_becomes_flinks_row_kinds() {
        let batch = envelopes(&[
            r#"{"before": null, "after": {"id": 1, "v": 10}, "op": "c"}"#,
            r#"{"before": {"id": 1, "v": 10}, "after": {"id": 1, "v": 11}, "op": "u", "source": {"lsn": 5}}"#,
            r#"{"before": {"id": 1, "v": 11}, "after": null, "op": "d"}"#,
            r#"{"before": null, "after": {"id": 2, "v": null}, "op": "r"}"#,
        ]);
        let (changes, skipped) = changes(&batch, &schema(), false).ok().unwrap();
        assert!(skipped.is_empty());
        let shorts: Vec<_> = changes.kinds.iter().map(|k| k.short()).collect();
        assert_eq!(shorts, ["+I", "-U", "+U", "-D", "+I"]);
        assert_eq!(changes.envelopes, [0, 1, 1, 2, 3]);
        let ids = changes.batch.column(0).as_primitive::<Int64Type>();
        assert_eq!(ids, &Int64Array::from(vec![1, 1, 1, 1, 2]));
        let v = changes.batch.column(1).as_primitive::<Int64Type>();
        assert_eq!(
            v,
            &Int64Array::from(vec![Some(10), Some(10), Some(11), Some(11), None])
        );
    }

    #[test]
    fn an_update_without_before_is_named_or_skipped_never_half_applied() {
        let batch = envelopes(&[
            r#"{"before": null, "after": {"id": 1, "v": 10}, "op": "c"}"#,
            r#"{"before": null, "after": {"id": 1, "v": 11}, "op": "u"}"#,
            r#"{"before": null, "after": {"id": 1, "v": 12}, "op": "x"}"#,
        ]);
        let bad = changes(&batch, &schema(), false).err().unwrap();
        assert_eq!(bad.index, 1);
        assert!(bad.message.contains("REPLICA IDENTITY"), "{}", bad.message);
        let (changes, skipped) = changes(&batch, &schema(), true).ok().unwrap();
        assert_eq!(skipped, [1, 2]);
        assert_eq!(changes.kinds, [RowKind::Insert]);
    }
}
