//! Columns of riffle's output as Iceberg columns, and back: the table schema created
//! from a query, the check of a query against an existing table, and the Arrow schema
//! of the Parquet data files (each column carrying its Iceberg field id, which is how
//! readers such as PyIceberg and Spark find columns in a data file).
//!
//! Pure functions over schemas; no Arrow type is handed to the iceberg crate (its
//! Arrow is an older major version than riffle's).

use iceberg::spec::{NestedField, PrimitiveType, Schema as IcebergSchema, Type};
use riffle_core::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use riffle_core::parquet::arrow::PARQUET_FIELD_ID_META_KEY;
use std::collections::HashMap;
use std::sync::Arc;

/// Why an output column cannot go into an Iceberg table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaMismatch {
    /// riffle has no Iceberg type for the column's type.
    #[error("column `{column}` has type {arrow}, which riffle does not write to Iceberg ({hint})")]
    Unsupported {
        column: String,
        arrow: String,
        hint: &'static str,
    },
    /// The existing table has no column of this name.
    #[error("the table has no column `{column}` (it has: {existing})")]
    Missing { column: String, existing: String },
    /// The existing table's column has another type.
    #[error("column `{column}` is {table} in the table but {query} in the query")]
    Incompatible {
        column: String,
        table: String,
        query: String,
    },
    /// A required column of the table that the query does not write.
    #[error("the table's required column `{column}` is not written by the query")]
    RequiredNotWritten { column: String },
}

/// The Iceberg type riffle writes an Arrow column of type `data_type` as.
///
/// Timestamps become microsecond timestamps (Iceberg v2 has no finer unit): riffle's
/// nanosecond event times lose their sub-microsecond digits in the table.
pub fn iceberg_type(column: &str, data_type: &DataType) -> Result<PrimitiveType, SchemaMismatch> {
    let unsupported = |hint| SchemaMismatch::Unsupported {
        column: column.to_string(),
        arrow: data_type.to_string(),
        hint,
    };
    Ok(match data_type {
        DataType::Boolean => PrimitiveType::Boolean,
        DataType::Int8 | DataType::Int16 | DataType::Int32 => PrimitiveType::Int,
        DataType::UInt8 | DataType::UInt16 => PrimitiveType::Int,
        DataType::Int64 | DataType::UInt32 => PrimitiveType::Long,
        DataType::Float32 => PrimitiveType::Float,
        DataType::Float64 => PrimitiveType::Double,
        DataType::Decimal128(precision, scale) if *scale >= 0 && *precision <= 38 => {
            PrimitiveType::Decimal {
                precision: u32::from(*precision),
                scale: u32::try_from(*scale).unwrap_or(0),
            }
        }
        DataType::Date32 => PrimitiveType::Date,
        DataType::Timestamp(_, Some(_)) => PrimitiveType::Timestamptz,
        DataType::Timestamp(_, None) => PrimitiveType::Timestamp,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => PrimitiveType::String,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => PrimitiveType::Binary,
        DataType::UInt64 => return Err(unsupported("cast it to BIGINT or DECIMAL(20, 0)")),
        DataType::Struct(_) => {
            return Err(unsupported(
                "select its fields as columns, e.g. `window.start AS window_start`",
            ))
        }
        _ => return Err(unsupported("cast it to a number, string or timestamp")),
    })
}

/// The Arrow type riffle writes into data files for an Iceberg column of type `t`: the
/// physical type a reader of the table expects.
pub fn file_type(t: &PrimitiveType) -> DataType {
    match t {
        PrimitiveType::Boolean => DataType::Boolean,
        PrimitiveType::Int => DataType::Int32,
        PrimitiveType::Long => DataType::Int64,
        PrimitiveType::Float => DataType::Float32,
        PrimitiveType::Double => DataType::Float64,
        PrimitiveType::Decimal { precision, scale } => DataType::Decimal128(
            u8::try_from(*precision).unwrap_or(38),
            i8::try_from(*scale).unwrap_or(0),
        ),
        PrimitiveType::Date => DataType::Date32,
        PrimitiveType::Timestamptz => {
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
        }
        PrimitiveType::Timestamp => DataType::Timestamp(TimeUnit::Microsecond, None),
        PrimitiveType::Binary | PrimitiveType::Fixed(_) | PrimitiveType::Uuid => DataType::Binary,
        _ => DataType::Utf8,
    }
}

/// One output column as the table holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct TableColumn {
    /// The column's name.
    pub name: String,
    /// Its Iceberg field id.
    pub field_id: i32,
    /// Its Iceberg type.
    pub iceberg: PrimitiveType,
}

/// The Iceberg schema of a new table for `output` (field ids 1, 2, … in column order;
/// every column optional, as SQL results may hold nulls).
///
/// # Errors
/// A column riffle cannot write to Iceberg, named.
pub fn new_table_schema(output: &Schema) -> Result<IcebergSchema, SchemaMismatch> {
    let mut fields = Vec::with_capacity(output.fields().len());
    for (i, field) in output.fields().iter().enumerate() {
        let t = iceberg_type(field.name(), field.data_type())?;
        let id = i32::try_from(i + 1).unwrap_or(i32::MAX);
        fields.push(Arc::new(NestedField::optional(
            id,
            field.name(),
            Type::Primitive(t),
        )));
    }
    IcebergSchema::builder()
        .with_fields(fields)
        .build()
        .map_err(|e| SchemaMismatch::Unsupported {
            column: String::new(),
            arrow: e.to_string(),
            hint: "the schema was not accepted",
        })
}

/// Matches `output`'s columns (by name) with `table`'s: each output column must exist in
/// the table with the same type (an `int` column also takes a narrower integer, a
/// `long` an `int`), and every required table column must be written.
///
/// # Errors
/// Every mismatch is reported; the first is returned, naming the column.
pub fn match_table(
    output: &Schema,
    table: &IcebergSchema,
) -> Result<Vec<TableColumn>, SchemaMismatch> {
    let existing: Vec<&str> = table
        .as_struct()
        .fields()
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    let mut columns = Vec::with_capacity(output.fields().len());
    for field in output.fields() {
        let want = iceberg_type(field.name(), field.data_type())?;
        let Some(column) = table.field_by_name(field.name()) else {
            return Err(SchemaMismatch::Missing {
                column: field.name().clone(),
                existing: existing.join(", "),
            });
        };
        let Type::Primitive(have) = column.field_type.as_ref() else {
            return Err(SchemaMismatch::Incompatible {
                column: field.name().clone(),
                table: column.field_type.to_string(),
                query: want.to_string(),
            });
        };
        if !writes_into(&want, have) {
            return Err(SchemaMismatch::Incompatible {
                column: field.name().clone(),
                table: have.to_string(),
                query: want.to_string(),
            });
        }
        columns.push(TableColumn {
            name: field.name().clone(),
            field_id: column.id,
            iceberg: have.clone(),
        });
    }
    for f in table.as_struct().fields() {
        if f.required && !output.fields().iter().any(|o| o.name() == &f.name) {
            return Err(SchemaMismatch::RequiredNotWritten {
                column: f.name.clone(),
            });
        }
    }
    Ok(columns)
}

/// Whether values of Iceberg type `query` can be written into a column of type `table`
/// without loss: the same type, or Iceberg's allowed promotions.
fn writes_into(query: &PrimitiveType, table: &PrimitiveType) -> bool {
    match (query, table) {
        (a, b) if a == b => true,
        (PrimitiveType::Int, PrimitiveType::Long) => true,
        (PrimitiveType::Float, PrimitiveType::Double) => true,
        (
            PrimitiveType::Decimal {
                precision: p1,
                scale: s1,
            },
            PrimitiveType::Decimal {
                precision: p2,
                scale: s2,
            },
        ) => s1 == s2 && p1 <= p2,
        _ => false,
    }
}

/// The Arrow schema of the data files: the table's types and names, each field carrying
/// its Iceberg field id.
pub fn file_schema(columns: &[TableColumn]) -> SchemaRef {
    let fields: Vec<Field> = columns
        .iter()
        .map(|c| {
            Field::new(&c.name, file_type(&c.iceberg), true).with_metadata(HashMap::from([(
                PARQUET_FIELD_ID_META_KEY.to_string(),
                c.field_id.to_string(),
            )]))
        })
        .collect();
    Arc::new(Schema::new(fields))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output() -> Schema {
        Schema::new(vec![
            Field::new("auction", DataType::Int64, false),
            Field::new("price", DataType::Int32, true),
            Field::new("channel", DataType::Utf8, true),
            Field::new(
                "ts",
                DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
                false,
            ),
        ])
    }

    #[test]
    fn a_new_table_numbers_the_columns_in_order() {
        let schema = new_table_schema(&output()).unwrap();
        let fields = schema.as_struct().fields();
        let named: Vec<(i32, &str, String)> = fields
            .iter()
            .map(|f| (f.id, f.name.as_str(), f.field_type.to_string()))
            .collect();
        assert_eq!(
            named,
            vec![
                (1, "auction", "long".to_string()),
                (2, "price", "int".to_string()),
                (3, "channel", "string".to_string()),
                (4, "ts", "timestamptz".to_string()),
            ]
        );
    }

    #[test]
    fn an_existing_table_is_matched_by_name_and_the_file_schema_carries_its_field_ids() {
        let table = IcebergSchema::builder()
            .with_fields(vec![
                Arc::new(NestedField::optional(
                    7,
                    "channel",
                    Type::Primitive(PrimitiveType::String),
                )),
                Arc::new(NestedField::required(
                    3,
                    "auction",
                    Type::Primitive(PrimitiveType::Long),
                )),
                Arc::new(NestedField::optional(
                    4,
                    "price",
                    Type::Primitive(PrimitiveType::Long),
                )),
                Arc::new(NestedField::optional(
                    9,
                    "ts",
                    Type::Primitive(PrimitiveType::Timestamptz),
                )),
                Arc::new(NestedField::optional(
                    10,
                    "extra",
                    Type::Primitive(PrimitiveType::Int),
                )),
            ])
            .build()
            .unwrap();
        let columns = match_table(&output(), &table).unwrap();
        let ids: Vec<i32> = columns.iter().map(|c| c.field_id).collect();
        assert_eq!(ids, vec![3, 4, 7, 9]);
        // The int price goes into the table's long column.
        assert_eq!(columns[1].iceberg, PrimitiveType::Long);
        let file = file_schema(&columns);
        assert_eq!(file.field(1).data_type(), &DataType::Int64);
        assert_eq!(
            file.field(3).data_type(),
            &DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
        );
        assert_eq!(
            file.field(0).metadata().get(PARQUET_FIELD_ID_META_KEY),
            Some(&"3".to_string())
        );
    }

    #[test]
    fn mismatches_name_the_column() {
        let table = IcebergSchema::builder()
            .with_fields(vec![
                Arc::new(NestedField::optional(
                    1,
                    "auction",
                    Type::Primitive(PrimitiveType::Int),
                )),
                Arc::new(NestedField::required(
                    2,
                    "bidder",
                    Type::Primitive(PrimitiveType::Long),
                )),
            ])
            .build()
            .unwrap();
        let one = Schema::new(vec![Field::new("auction", DataType::Int64, false)]);
        assert_eq!(
            match_table(&one, &table).unwrap_err(),
            SchemaMismatch::Incompatible {
                column: "auction".into(),
                table: "int".into(),
                query: "long".into()
            }
        );
        let two = Schema::new(vec![Field::new("auction", DataType::Int32, false)]);
        assert_eq!(
            match_table(&two, &table).unwrap_err(),
            SchemaMismatch::RequiredNotWritten {
                column: "bidder".into()
            }
        );
        let three = Schema::new(vec![Field::new("seller", DataType::Int64, false)]);
        assert!(matches!(
            match_table(&three, &table).unwrap_err(),
            SchemaMismatch::Missing { column, .. } if column == "seller"
        ));
        let nested = Schema::new(vec![Field::new(
            "window",
            DataType::Struct(vec![Field::new("start", DataType::Int64, false)].into()),
            false,
        )]);
        assert!(new_table_schema(&nested)
            .unwrap_err()
            .to_string()
            .contains("`window.start AS window_start`"));
    }
}
