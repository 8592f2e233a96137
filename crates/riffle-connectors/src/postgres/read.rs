//! PostgreSQL → Arrow: rows a query returned, as a batch of the columns' declared Arrow
//! types. The query casts each column to the PostgreSQL type riffle writes for that
//! Arrow type ([`PgType`]), so each is read as one Rust type and then cast.

use super::types::PgType;
use riffle_core::arrow::array::{
    ArrayRef, BinaryArray, BooleanArray, Decimal128Array, Float32Array, Float64Array, Int16Array,
    Int32Array, Int64Array, StringArray, TimestampNanosecondArray,
};
use riffle_core::arrow::compute::cast;
use riffle_core::arrow::datatypes::{DataType, SchemaRef};
use riffle_core::{Error, RecordBatch, Result};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};
use tokio_postgres::Row;

/// `rows` (whose columns are `schema`'s, each cast to its [`PgType`]) as a batch.
pub(crate) fn rows_to_batch(schema: &SchemaRef, rows: &[Row]) -> Result<RecordBatch> {
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for (i, field) in schema.fields().iter().enumerate() {
        let ty = PgType::of(field)?;
        let read = |e: tokio_postgres::Error| {
            Error::config(field.name(), format!("cannot be read as {}: {e}", ty.sql()))
        };
        let array: ArrayRef = match ty {
            PgType::SmallInt => Arc::new(
                rows.iter()
                    .map(|r| r.try_get::<_, Option<i16>>(i))
                    .collect::<std::result::Result<Int16Array, _>>()
                    .map_err(read)?,
            ),
            PgType::Integer => Arc::new(
                rows.iter()
                    .map(|r| r.try_get::<_, Option<i32>>(i))
                    .collect::<std::result::Result<Int32Array, _>>()
                    .map_err(read)?,
            ),
            PgType::BigInt => Arc::new(
                rows.iter()
                    .map(|r| r.try_get::<_, Option<i64>>(i))
                    .collect::<std::result::Result<Int64Array, _>>()
                    .map_err(read)?,
            ),
            PgType::Real => Arc::new(
                rows.iter()
                    .map(|r| r.try_get::<_, Option<f32>>(i))
                    .collect::<std::result::Result<Float32Array, _>>()
                    .map_err(read)?,
            ),
            PgType::Double => Arc::new(
                rows.iter()
                    .map(|r| r.try_get::<_, Option<f64>>(i))
                    .collect::<std::result::Result<Float64Array, _>>()
                    .map_err(read)?,
            ),
            PgType::Boolean => Arc::new(
                rows.iter()
                    .map(|r| r.try_get::<_, Option<bool>>(i))
                    .collect::<std::result::Result<BooleanArray, _>>()
                    .map_err(read)?,
            ),
            PgType::Text => Arc::new(
                rows.iter()
                    .map(|r| r.try_get::<_, Option<String>>(i))
                    .collect::<std::result::Result<StringArray, _>>()
                    .map_err(read)?,
            ),
            PgType::Bytea => Arc::new(
                rows.iter()
                    .map(|r| r.try_get::<_, Option<Vec<u8>>>(i))
                    .collect::<std::result::Result<BinaryArray, _>>()
                    .map_err(read)?,
            ),
            PgType::TimestampTz => Arc::new(
                rows.iter()
                    .map(|r| {
                        r.try_get::<_, Option<SystemTime>>(i)
                            .map(|t| t.map(epoch_nanos))
                    })
                    .collect::<std::result::Result<TimestampNanosecondArray, _>>()
                    .map_err(read)?,
            ),
            PgType::Numeric => {
                let DataType::Decimal128(precision, scale) = field.data_type() else {
                    return Err(Error::config(field.name(), "expected a DECIMAL column"));
                };
                let mut values = Vec::with_capacity(rows.len());
                for r in rows {
                    let v = r
                        .try_get::<_, Option<rust_decimal::Decimal>>(i)
                        .map_err(read)?;
                    values.push(v.map(|mut d| {
                        d.rescale(u32::try_from(*scale).unwrap_or(0));
                        d.mantissa()
                    }));
                }
                Arc::new(
                    Decimal128Array::from(values)
                        .with_precision_and_scale(*precision, *scale)
                        .map_err(|e| Error::config(field.name(), e.to_string()))?,
                )
            }
        };
        let array = if array.data_type() == field.data_type() {
            array
        } else {
            cast(&array, field.data_type())
                .map_err(|e| Error::config(field.name(), format!("cannot be read: {e}")))?
        };
        columns.push(array);
    }
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

/// Nanoseconds since the epoch (negative before it).
fn epoch_nanos(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as i64,
        Err(e) => -(e.duration().as_nanos() as i64),
    }
}
