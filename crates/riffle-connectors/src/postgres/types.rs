//! Arrow → PostgreSQL: the column type each Arrow type is written as, and a batch's
//! columns converted into values tokio-postgres can send (binary COPY rows, or arrays
//! for `UNNEST` upserts).
//!
//! | Arrow | PostgreSQL |
//! |---|---|
//! | Int8, Int16, UInt8 | SMALLINT |
//! | Int32, UInt16 | INTEGER |
//! | Int64, UInt32, UInt64 (values above i64::MAX are refused) | BIGINT |
//! | Float32 | REAL |
//! | Float64 | DOUBLE PRECISION |
//! | Boolean | BOOLEAN |
//! | Utf8, LargeUtf8, Utf8View | TEXT |
//! | Binary, LargeBinary, BinaryView | BYTEA |
//! | Timestamp (any unit, any zone), Date32, Date64 | TIMESTAMPTZ (UTC) |
//! | Decimal128 (at most 28 digits: `rust_decimal`'s range) | NUMERIC |

use riffle_core::arrow::array::{ArrayRef, AsArray};
use riffle_core::arrow::compute::kernels::cast::{cast_with_options, CastOptions};
use riffle_core::arrow::datatypes::{
    DataType, Field, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, TimeUnit,
    TimestampNanosecondType,
};
use riffle_core::{Error, Result};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio_postgres::types::{ToSql, Type};

/// The PostgreSQL type a column is written as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PgType {
    /// `SMALLINT`
    SmallInt,
    /// `INTEGER`
    Integer,
    /// `BIGINT`
    BigInt,
    /// `REAL`
    Real,
    /// `DOUBLE PRECISION`
    Double,
    /// `BOOLEAN`
    Boolean,
    /// `TEXT`
    Text,
    /// `BYTEA`
    Bytea,
    /// `TIMESTAMPTZ`
    TimestampTz,
    /// `NUMERIC`
    Numeric,
}

impl PgType {
    /// The type for an Arrow field, or an error naming the column and what to do.
    pub fn of(field: &Field) -> Result<Self> {
        Ok(match field.data_type() {
            DataType::Int8 | DataType::Int16 | DataType::UInt8 => PgType::SmallInt,
            DataType::Int32 | DataType::UInt16 => PgType::Integer,
            DataType::Int64 | DataType::UInt32 | DataType::UInt64 => PgType::BigInt,
            DataType::Float32 => PgType::Real,
            DataType::Float64 => PgType::Double,
            DataType::Boolean => PgType::Boolean,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => PgType::Text,
            DataType::Binary | DataType::LargeBinary | DataType::BinaryView => PgType::Bytea,
            DataType::Timestamp(_, _) | DataType::Date32 | DataType::Date64 => PgType::TimestampTz,
            DataType::Decimal128(_, _) => PgType::Numeric,
            other => {
                return Err(Error::config(
                    field.name(),
                    format!(
                        "a column of type {other} cannot be written to PostgreSQL; select \
                         scalar columns (for a window, `w['start']` and `w['end']`)"
                    ),
                ))
            }
        })
    }

    /// The type's name in SQL.
    pub fn sql(self) -> &'static str {
        match self {
            PgType::SmallInt => "SMALLINT",
            PgType::Integer => "INTEGER",
            PgType::BigInt => "BIGINT",
            PgType::Real => "REAL",
            PgType::Double => "DOUBLE PRECISION",
            PgType::Boolean => "BOOLEAN",
            PgType::Text => "TEXT",
            PgType::Bytea => "BYTEA",
            PgType::TimestampTz => "TIMESTAMPTZ",
            PgType::Numeric => "NUMERIC",
        }
    }

    /// The type as tokio-postgres names it (binary COPY needs it).
    pub fn postgres(self) -> Type {
        match self {
            PgType::SmallInt => Type::INT2,
            PgType::Integer => Type::INT4,
            PgType::BigInt => Type::INT8,
            PgType::Real => Type::FLOAT4,
            PgType::Double => Type::FLOAT8,
            PgType::Boolean => Type::BOOL,
            PgType::Text => Type::TEXT,
            PgType::Bytea => Type::BYTEA,
            PgType::TimestampTz => Type::TIMESTAMPTZ,
            PgType::Numeric => Type::NUMERIC,
        }
    }

    /// Whether a column PostgreSQL reports as `data_type` (information_schema) takes
    /// this type's values without loss.
    pub fn fits(self, data_type: &str) -> bool {
        let accepted: &[&str] = match self {
            PgType::SmallInt => &[
                "smallint",
                "integer",
                "bigint",
                "numeric",
                "real",
                "double precision",
            ],
            PgType::Integer => &["integer", "bigint", "numeric", "double precision"],
            PgType::BigInt => &["bigint", "numeric"],
            PgType::Real => &["real", "double precision", "numeric"],
            PgType::Double => &["double precision", "numeric"],
            PgType::Boolean => &["boolean"],
            PgType::Text => &["text", "character varying", "character"],
            PgType::Bytea => &["bytea"],
            PgType::TimestampTz => &["timestamp with time zone", "timestamp without time zone"],
            PgType::Numeric => &["numeric"],
        };
        accepted.contains(&data_type)
    }
}

/// One column of a batch as values for PostgreSQL.
pub(crate) enum PgColumn {
    I16(Vec<Option<i16>>),
    I32(Vec<Option<i32>>),
    I64(Vec<Option<i64>>),
    F32(Vec<Option<f32>>),
    F64(Vec<Option<f64>>),
    Bool(Vec<Option<bool>>),
    Text(Vec<Option<String>>),
    Bytes(Vec<Option<Vec<u8>>>),
    Time(Vec<Option<SystemTime>>),
    Decimal(Vec<Option<rust_decimal::Decimal>>),
}

impl PgColumn {
    /// Converts `array` (of the Arrow type `ty` was chosen for) into `ty`'s values.
    pub(crate) fn convert(array: &ArrayRef, ty: PgType, name: &str) -> Result<Self> {
        if ty == PgType::Numeric {
            return decimals(array, name).map(PgColumn::Decimal);
        }
        let canonical = match ty {
            PgType::SmallInt => DataType::Int16,
            PgType::Integer => DataType::Int32,
            PgType::BigInt => DataType::Int64,
            PgType::Real => DataType::Float32,
            PgType::Double => DataType::Float64,
            PgType::Boolean => DataType::Boolean,
            PgType::Text => DataType::Utf8,
            PgType::Bytea => DataType::Binary,
            PgType::TimestampTz => DataType::Timestamp(TimeUnit::Nanosecond, None),
            PgType::Numeric => array.data_type().clone(),
        };
        // A strict cast: a UInt64 above i64::MAX fails instead of becoming NULL.
        let strict = CastOptions {
            safe: false,
            ..Default::default()
        };
        let converted = cast_with_options(array, &canonical, &strict)
            .map_err(|e| Error::config(name, format!("cannot be written as {}: {e}", ty.sql())))?;
        let a = converted.as_ref();
        Ok(match ty {
            PgType::SmallInt => PgColumn::I16(a.as_primitive::<Int16Type>().iter().collect()),
            PgType::Integer => PgColumn::I32(a.as_primitive::<Int32Type>().iter().collect()),
            PgType::BigInt => PgColumn::I64(a.as_primitive::<Int64Type>().iter().collect()),
            PgType::Real => PgColumn::F32(a.as_primitive::<Float32Type>().iter().collect()),
            PgType::Double => PgColumn::F64(a.as_primitive::<Float64Type>().iter().collect()),
            PgType::Boolean => PgColumn::Bool(a.as_boolean().iter().collect()),
            PgType::Text => PgColumn::Text(
                a.as_string::<i32>()
                    .iter()
                    .map(|v| v.map(str::to_string))
                    .collect(),
            ),
            PgType::Bytea => PgColumn::Bytes(
                a.as_binary::<i32>()
                    .iter()
                    .map(|v| v.map(<[u8]>::to_vec))
                    .collect(),
            ),
            PgType::TimestampTz => PgColumn::Time(
                a.as_primitive::<TimestampNanosecondType>()
                    .iter()
                    .map(|v| v.map(system_time))
                    .collect(),
            ),
            PgType::Numeric => PgColumn::Decimal(decimals(array, name)?),
        })
    }

    /// The value in `row`.
    pub(crate) fn value(&self, row: usize) -> &(dyn ToSql + Sync) {
        match self {
            PgColumn::I16(v) => &v[row],
            PgColumn::I32(v) => &v[row],
            PgColumn::I64(v) => &v[row],
            PgColumn::F32(v) => &v[row],
            PgColumn::F64(v) => &v[row],
            PgColumn::Bool(v) => &v[row],
            PgColumn::Text(v) => &v[row],
            PgColumn::Bytes(v) => &v[row],
            PgColumn::Time(v) => &v[row],
            PgColumn::Decimal(v) => &v[row],
        }
    }

    /// The whole column as one array parameter.
    pub(crate) fn as_array(&self) -> &(dyn ToSql + Sync) {
        match self {
            PgColumn::I16(v) => v,
            PgColumn::I32(v) => v,
            PgColumn::I64(v) => v,
            PgColumn::F32(v) => v,
            PgColumn::F64(v) => v,
            PgColumn::Bool(v) => v,
            PgColumn::Text(v) => v,
            PgColumn::Bytes(v) => v,
            PgColumn::Time(v) => v,
            PgColumn::Decimal(v) => v,
        }
    }
}

/// A Decimal128 column as exact decimals; a value of more than 28 digits is refused.
fn decimals(array: &ArrayRef, name: &str) -> Result<Vec<Option<rust_decimal::Decimal>>> {
    let DataType::Decimal128(_, scale) = array.data_type() else {
        return Err(Error::config(name, "expected a DECIMAL column"));
    };
    let scale = u32::try_from(*scale)
        .map_err(|_| Error::config(name, "a DECIMAL with a negative scale cannot be written"))?;
    array
        .as_primitive::<riffle_core::arrow::datatypes::Decimal128Type>()
        .iter()
        .map(|v| {
            v.map(|v| {
                rust_decimal::Decimal::try_from_i128_with_scale(v, scale).map_err(|e| {
                    Error::config(
                        name,
                        format!("{v}e-{scale} cannot be written as NUMERIC: {e}"),
                    )
                })
            })
            .transpose()
        })
        .collect()
}

fn system_time(nanos: i64) -> SystemTime {
    if nanos >= 0 {
        UNIX_EPOCH + Duration::from_nanos(nanos as u64)
    } else {
        UNIX_EPOCH - Duration::from_nanos(nanos.unsigned_abs())
    }
}

/// `name` quoted as a PostgreSQL identifier.
pub(crate) fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A possibly schema-qualified table name (`schema.table`) quoted part by part.
pub(crate) fn quote_table(name: &str) -> String {
    name.split('.')
        .map(quote_ident)
        .collect::<Vec<_>>()
        .join(".")
}
