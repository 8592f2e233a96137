//! Groups' state columns as one byte string per group, and back: Arrow's row format
//! over the columns an operator's snapshot writes, so a spilled group holds exactly
//! what its checkpoint row would.

use riffle_core::arrow::array::ArrayRef;
use riffle_core::arrow::datatypes::Field;
use riffle_core::arrow::row::{RowConverter, Rows, SortField};
use riffle_core::{Error, Result};

/// Encodes and decodes the state columns of one operator's groups.
pub(crate) struct ValueCodec {
    fields: Vec<Field>,
    converter: RowConverter,
}

impl ValueCodec {
    /// A codec for state columns with `fields`.
    ///
    /// # Errors
    /// A column type Arrow's row format cannot hold.
    pub(crate) fn new(fields: Vec<Field>) -> Result<Self> {
        let sort: Vec<SortField> = fields
            .iter()
            .map(|f| SortField::new(f.data_type().clone()))
            .collect();
        let converter = RowConverter::new(sort)
            .map_err(|e| Error::Spill(format!("state columns cannot be spilled: {e}")))?;
        Ok(Self { fields, converter })
    }

    /// The fields of the state columns.
    pub(crate) fn fields(&self) -> &[Field] {
        &self.fields
    }

    /// One byte string per row of `columns`.
    ///
    /// # Errors
    /// Columns of other types than the codec's.
    pub(crate) fn encode(&self, columns: &[ArrayRef]) -> Result<Vec<Vec<u8>>> {
        let rows = self.converter.convert_columns(columns)?;
        Ok(rows.iter().map(|r| r.as_ref().to_vec()).collect())
    }

    /// Each row of `columns` encoded: row `i` of the result is
    /// [`encode`](Self::encode)'s `i`th byte string, without a copy of its own.
    ///
    /// # Errors
    /// Columns of other types than the codec's.
    pub(crate) fn encode_rows(&self, columns: &[ArrayRef]) -> Result<Rows> {
        Ok(self.converter.convert_columns(columns)?)
    }

    /// The state columns of the groups `values` holds, as [`encode`](Self::encode)
    /// made them.
    ///
    /// # Errors
    /// Arrow failures decoding.
    pub(crate) fn decode(&self, values: &[&[u8]]) -> Result<Vec<ArrayRef>> {
        let parser = self.converter.parser();
        let columns = self
            .converter
            .convert_rows(values.iter().map(|v| parser.parse(v)))?;
        columns
            .into_iter()
            .zip(&self.fields)
            .map(|(c, f)| {
                if c.data_type() == f.data_type() {
                    Ok(c)
                } else {
                    Ok(riffle_core::arrow::compute::cast(&c, f.data_type())?)
                }
            })
            .collect()
    }
}
