//! What a row of a changelog stream does to the result: Flink's RowKind.
//!
//! A changelog stream carries a column [`ROW_KIND_FIELD`] (Int8, one of [`RowKind`]'s
//! codes) beside its event time; an append-only or upsert stream has none, and every row
//! of it is an insert (or, for an upsert stream, an upsert of its key). docs/engine.md,
//! "Changelog streams", says who produces and who consumes which.

use crate::arrow::array::{Array, AsArray, Int8Array};
use crate::arrow::datatypes::{DataType, Field, Int8Type};
use crate::error::{Error, Result};
use crate::RecordBatch;

/// Name of the row-kind column of a changelog stream.
pub const ROW_KIND_FIELD: &str = "_row_kind";

/// The field of [`ROW_KIND_FIELD`].
pub fn row_kind_field() -> Field {
    Field::new(ROW_KIND_FIELD, DataType::Int8, false)
}

/// What a row does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i8)]
pub enum RowKind {
    /// A new row (`+I`).
    Insert = 0,
    /// The old value of an updated row, withdrawn (`-U`).
    UpdateBefore = 1,
    /// The new value of an updated row (`+U`).
    UpdateAfter = 2,
    /// A row withdrawn (`-D`).
    Delete = 3,
}

impl RowKind {
    /// The column value.
    pub fn code(self) -> i8 {
        self as i8
    }

    /// The kind a column value stands for.
    ///
    /// # Errors
    /// A value that is no kind's code.
    pub fn from_code(code: i8) -> Result<Self> {
        match code {
            0 => Ok(RowKind::Insert),
            1 => Ok(RowKind::UpdateBefore),
            2 => Ok(RowKind::UpdateAfter),
            3 => Ok(RowKind::Delete),
            other => Err(Error::plan(format!(
                "`{ROW_KIND_FIELD}` holds {other}, which is no row kind (0..=3)"
            ))),
        }
    }

    /// Flink's short form, as its print connector shows it.
    pub fn short(self) -> &'static str {
        match self {
            RowKind::Insert => "+I",
            RowKind::UpdateBefore => "-U",
            RowKind::UpdateAfter => "+U",
            RowKind::Delete => "-D",
        }
    }

    /// Whether the row withdraws a row (`-U`, `-D`) rather than adding one.
    pub fn is_retraction(self) -> bool {
        matches!(self, RowKind::UpdateBefore | RowKind::Delete)
    }
}

/// What a stream's rows are: each final, each replacing its key's earlier row, or each
/// adding or withdrawing a row (docs/engine.md, "Changelog streams"). `riffle explain`
/// shows it on every edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamKind {
    /// Every row is final.
    AppendOnly,
    /// A row replaces the earlier row of its key.
    Upsert,
    /// Rows carry a [`ROW_KIND_FIELD`]: each adds or withdraws a row.
    Changelog,
}

impl StreamKind {
    /// A changelog when `schema` has a row-kind column, else append-only (an upsert
    /// stream looks append-only by its schema: its producer says so).
    pub fn of_schema(schema: &crate::StreamSchema) -> Self {
        match schema.row_kind_index() {
            Some(_) => StreamKind::Changelog,
            None => StreamKind::AppendOnly,
        }
    }

    /// The name `riffle explain` prints.
    pub fn name(self) -> &'static str {
        match self {
            StreamKind::AppendOnly => "append-only",
            StreamKind::Upsert => "upsert",
            StreamKind::Changelog => "changelog",
        }
    }
}

/// The row kinds of `batch`, or `None` when it has no [`ROW_KIND_FIELD`] (every row an
/// insert or upsert).
///
/// # Errors
/// The column is not Int8, holds NULL, or holds a value that is no kind.
pub fn row_kinds(batch: &RecordBatch) -> Result<Option<Vec<RowKind>>> {
    let Some(column) = batch.column_by_name(ROW_KIND_FIELD) else {
        return Ok(None);
    };
    let Some(codes) = column.as_primitive_opt::<Int8Type>() else {
        return Err(Error::plan(format!(
            "`{ROW_KIND_FIELD}` is {}, not Int8",
            column.data_type()
        )));
    };
    if codes.null_count() > 0 {
        return Err(Error::plan(format!("`{ROW_KIND_FIELD}` holds NULL")));
    }
    codes
        .values()
        .iter()
        .map(|&c| RowKind::from_code(c))
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

/// A row-kind column of `kinds`.
pub fn row_kind_array(kinds: impl IntoIterator<Item = RowKind>) -> Int8Array {
    Int8Array::from_iter_values(kinds.into_iter().map(RowKind::code))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arrow::array::{ArrayRef, Int64Array};
    use crate::arrow::datatypes::Schema;
    use std::sync::Arc;

    fn batch(kinds: ArrayRef) -> RecordBatch {
        let schema = Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new(ROW_KIND_FIELD, kinds.data_type().clone(), true),
        ]);
        let keys = Arc::new(Int64Array::from(vec![1; kinds.len()]));
        RecordBatch::try_new(Arc::new(schema), vec![keys, kinds]).unwrap()
    }

    #[test]
    fn every_kind_survives_its_column() {
        let all = [
            RowKind::Insert,
            RowKind::UpdateBefore,
            RowKind::UpdateAfter,
            RowKind::Delete,
        ];
        let b = batch(Arc::new(row_kind_array(all)));
        assert_eq!(row_kinds(&b).unwrap().unwrap(), all);
        let shorts: Vec<_> = all.iter().map(|k| k.short()).collect();
        assert_eq!(shorts, ["+I", "-U", "+U", "-D"]);
        let retracting: Vec<_> = all.iter().map(|k| k.is_retraction()).collect();
        assert_eq!(retracting, [false, true, false, true]);
    }

    #[test]
    fn a_batch_without_the_column_has_no_kinds() {
        let schema = Schema::new(vec![Field::new("k", DataType::Int64, false)]);
        let b = RecordBatch::try_new(Arc::new(schema), vec![Arc::new(Int64Array::from(vec![1]))])
            .unwrap();
        assert!(row_kinds(&b).unwrap().is_none());
    }

    #[test]
    fn a_code_that_is_no_kind_is_an_error_not_an_insert() {
        let b = batch(Arc::new(Int8Array::from(vec![0, 7])));
        assert!(row_kinds(&b).is_err());
        let b = batch(Arc::new(Int8Array::from(vec![Some(0), None])));
        assert!(row_kinds(&b).is_err());
    }
}
