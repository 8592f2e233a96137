//! The Debezium JSON envelope for a changelog written to files: each row becomes
//! `{"before": …, "after": …, "op": …}` as Flink's `debezium-json` format writes it — an
//! insert or the new value of an update is `"op": "c"` with `after`, a withdrawn row
//! (`-U`, `-D`) is `"op": "d"` with `before`. Replaying the lines in order (create =
//! upsert by key, delete = remove) gives the result's current rows.

use riffle_core::arrow::array::{StringArray, StructArray};
use riffle_core::arrow::buffer::NullBuffer;
use riffle_core::arrow::datatypes::{DataType, Field, Schema};
use riffle_core::{row_kinds, RecordBatch, Result};
use std::sync::Arc;

/// The envelope of every row of `batch` (its `_row_kind`, when it has one, decides the
/// op; without one every row is an insert). `_timestamp` must already be dropped.
///
/// # Errors
/// A row-kind column that holds no kind.
pub fn debezium_envelope(batch: &RecordBatch) -> Result<RecordBatch> {
    let kinds = row_kinds(batch)?;
    let retracted = |i: usize| kinds.as_ref().is_some_and(|k| k[i].is_retraction());
    let rows_only = super::without_row_kind(batch)?;
    let fields = rows_only.schema().fields().clone();
    let columns = rows_only.columns().to_vec();
    let rows = batch.num_rows();
    let present = |want_retracted: bool| {
        NullBuffer::from_iter((0..rows).map(|i| retracted(i) == want_retracted))
    };
    let row = DataType::Struct(fields.clone());
    let before = StructArray::try_new(fields.clone(), columns.clone(), Some(present(true)))?;
    let after = StructArray::try_new(fields, columns, Some(present(false)))?;
    let op = StringArray::from_iter_values((0..rows).map(|i| if retracted(i) { "d" } else { "c" }));
    let envelope = Schema::new(vec![
        Field::new("before", row.clone(), true),
        Field::new("after", row, true),
        Field::new("op", DataType::Utf8, false),
    ]);
    Ok(RecordBatch::try_new(
        Arc::new(envelope),
        vec![Arc::new(before), Arc::new(after), Arc::new(op)],
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use riffle_core::arrow::array::{Int64Array, Int8Array};
    use riffle_core::arrow::json::writer::{LineDelimited, WriterBuilder};
    use riffle_core::{row_kind_array, row_kind_field, RowKind};

    fn lines(batch: &RecordBatch) -> Vec<String> {
        let mut out = Vec::new();
        let mut w = WriterBuilder::new()
            .with_explicit_nulls(true)
            .build::<_, LineDelimited>(&mut out);
        w.write(batch).unwrap();
        w.finish().unwrap();
        String::from_utf8(out)
            .unwrap()
            .lines()
            .map(String::from)
            .collect()
    }

    #[test]
    fn each_kind_becomes_flinks_debezium_line() {
        let schema = Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("n", DataType::Int64, true),
            row_kind_field(),
        ]);
        let kinds = [
            RowKind::Insert,
            RowKind::UpdateBefore,
            RowKind::UpdateAfter,
            RowKind::Delete,
        ];
        let batch = RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(Int64Array::from(vec![1, 1, 1, 1])),
                Arc::new(Int64Array::from(vec![Some(1), Some(1), None, None])),
                Arc::new(row_kind_array(kinds)),
            ],
        )
        .unwrap();
        assert_eq!(
            lines(&debezium_envelope(&batch).unwrap()),
            [
                r#"{"before":null,"after":{"k":1,"n":1},"op":"c"}"#,
                r#"{"before":{"k":1,"n":1},"after":null,"op":"d"}"#,
                r#"{"before":null,"after":{"k":1,"n":null},"op":"c"}"#,
                r#"{"before":{"k":1,"n":null},"after":null,"op":"d"}"#,
            ]
        );
    }

    #[test]
    fn rows_without_kinds_are_creates_and_a_bad_kind_is_an_error() {
        let schema = Schema::new(vec![Field::new("k", DataType::Int64, false)]);
        let batch =
            RecordBatch::try_new(Arc::new(schema), vec![Arc::new(Int64Array::from(vec![7]))])
                .unwrap();
        assert_eq!(
            lines(&debezium_envelope(&batch).unwrap()),
            [r#"{"before":null,"after":{"k":7},"op":"c"}"#]
        );
        let schema = Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            row_kind_field(),
        ]);
        let batch = RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(Int64Array::from(vec![7])),
                Arc::new(Int8Array::from(vec![9])),
            ],
        )
        .unwrap();
        assert!(debezium_envelope(&batch).is_err());
    }
}
