//! Key values as comparable byte strings (Arrow's row format), for hashing whole keys of
//! any column types.

use riffle_core::arrow::array::ArrayRef;
use riffle_core::arrow::datatypes::DataType;
use riffle_core::arrow::row::{RowConverter, Rows, SortField};
use riffle_core::{Error, Result};

/// Turns key columns of fixed types into rows.
pub(crate) struct KeyRows {
    converter: RowConverter,
}

impl KeyRows {
    /// Keys of columns typed `types`.
    pub(crate) fn new(types: &[DataType]) -> Result<Self> {
        let fields = types.iter().cloned().map(SortField::new).collect();
        let converter = RowConverter::new(fields)
            .map_err(|e| Error::plan(format!("these columns cannot be a lookup key: {e}")))?;
        Ok(Self { converter })
    }

    /// The rows of `keys` (one array per key column).
    pub(crate) fn rows(&self, keys: &[ArrayRef]) -> Result<Rows> {
        Ok(self.converter.convert_columns(keys)?)
    }
}

/// Whether row `row` of `keys` holds a NULL (which equals nothing).
pub(crate) fn has_null(keys: &[ArrayRef], row: usize) -> bool {
    keys.iter().any(|k| k.is_null(row))
}
