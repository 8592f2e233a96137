//! Each row's partition: its values under the spec's transforms, computed by the
//! iceberg crate's transform functions on single values (no Arrow type crosses into the
//! crate), and the partition as a committable carries it.

use super::spec::PartitionError;
use crate::schema::TableColumn;
use iceberg::spec::{
    Datum, Literal, PartitionSpec, PrimitiveType, Schema as IcebergSchema, Struct, Type,
};
use iceberg::transform::{create_transform_function, BoxedTransformFunction};
use riffle_core::arrow::array::{
    Array, ArrayRef, BooleanArray, Date32Array, Int32Array, Int64Array, RecordBatch, StringArray,
    TimestampMicrosecondArray, UInt32Array,
};
use riffle_core::arrow::compute::take;
use std::collections::HashMap;

/// One row's partition: its values under the spec's transforms, in spec order.
pub type PartitionKey = Vec<Option<Datum>>;

/// Computes rows' partitions for one spec.
#[derive(Debug)]
pub struct Partitioner {
    spec: PartitionSpec,
    schema: IcebergSchema,
    /// Per spec field: the output column it reads, that column's type, its transform.
    fields: Vec<(usize, PrimitiveType, BoxedTransformFunction)>,
}

impl Partitioner {
    /// The partitioner of `spec` over output `columns` (the table's types, in output
    /// order); `None` for an unpartitioned spec.
    ///
    /// # Errors
    /// A source column the output lacks, or of a type riffle does not partition by.
    pub fn new(
        spec: &PartitionSpec,
        schema: &IcebergSchema,
        columns: &[TableColumn],
    ) -> Result<Option<Self>, PartitionError> {
        if spec.is_unpartitioned() {
            return Ok(None);
        }
        let mut fields = Vec::with_capacity(spec.fields().len());
        for field in spec.fields() {
            let column = schema.name_by_field_id(field.source_id).unwrap_or("?");
            let index = columns
                .iter()
                .position(|c| c.field_id == field.source_id)
                .ok_or_else(|| PartitionError::NotWritten {
                    column: column.to_string(),
                })?;
            let t = columns[index].iceberg.clone();
            if !matches!(
                t,
                PrimitiveType::Int
                    | PrimitiveType::Long
                    | PrimitiveType::String
                    | PrimitiveType::Boolean
                    | PrimitiveType::Date
                    | PrimitiveType::Timestamp
                    | PrimitiveType::Timestamptz
            ) {
                return Err(PartitionError::UnsupportedType {
                    field: field.name.clone(),
                    column_type: t.to_string(),
                });
            }
            let function = create_transform_function(&field.transform).map_err(|e| {
                PartitionError::Invalid {
                    field: field.name.clone(),
                    reason: e.message().to_string(),
                }
            })?;
            fields.push((index, t, function));
        }
        Ok(Some(Self {
            spec: spec.clone(),
            schema: schema.clone(),
            fields,
        }))
    }

    /// The spec's id.
    pub fn spec_id(&self) -> i32 {
        self.spec.spec_id()
    }

    /// The directory of partition `key` under the table's `data/`.
    pub fn path(&self, key: &PartitionKey) -> String {
        partition_path(&self.spec, &self.schema, key)
    }

    /// Splits `batch` (in the file schema's types) by partition, rows in their order.
    ///
    /// # Errors
    /// A transform that fails on a value.
    pub fn split(
        &self,
        batch: &RecordBatch,
    ) -> riffle_core::Result<Vec<(PartitionKey, RecordBatch)>> {
        let mut keys: Vec<PartitionKey> = Vec::new();
        let mut rows: Vec<Vec<u32>> = Vec::new();
        let mut index: HashMap<PartitionKey, usize> = HashMap::new();
        for row in 0..batch.num_rows() {
            let key = self
                .fields
                .iter()
                .map(|(column, t, function)| {
                    let Some(value) = datum_at(batch.column(*column), row, t) else {
                        return Ok(None);
                    };
                    function.transform_literal(&value).map_err(|e| {
                        riffle_core::Error::external(
                            "iceberg",
                            format!("partitioning {value}: {e}"),
                        )
                    })
                })
                .collect::<riffle_core::Result<PartitionKey>>()?;
            let at = match index.get(&key) {
                Some(&at) => at,
                None => {
                    index.insert(key.clone(), keys.len());
                    keys.push(key);
                    rows.push(Vec::new());
                    keys.len() - 1
                }
            };
            rows[at].push(row as u32);
        }
        if keys.len() == 1 {
            return Ok(vec![(keys.remove(0), batch.clone())]);
        }
        keys.into_iter()
            .zip(rows)
            .map(|(key, rows)| {
                let indices = UInt32Array::from(rows);
                let columns = batch
                    .columns()
                    .iter()
                    .map(|c| take(c, &indices, None))
                    .collect::<Result<Vec<ArrayRef>, _>>()?;
                Ok((key, RecordBatch::try_new(batch.schema(), columns)?))
            })
            .collect()
    }
}

/// The value at `row` of `column` (of the file type of `t`) as an Iceberg datum.
fn datum_at(column: &ArrayRef, row: usize, t: &PrimitiveType) -> Option<Datum> {
    if column.is_null(row) {
        return None;
    }
    Some(match t {
        PrimitiveType::Int => Datum::int(column.as_any().downcast_ref::<Int32Array>()?.value(row)),
        PrimitiveType::Long => {
            Datum::long(column.as_any().downcast_ref::<Int64Array>()?.value(row))
        }
        PrimitiveType::String => {
            Datum::string(column.as_any().downcast_ref::<StringArray>()?.value(row))
        }
        PrimitiveType::Boolean => {
            Datum::bool(column.as_any().downcast_ref::<BooleanArray>()?.value(row))
        }
        PrimitiveType::Date => {
            Datum::date(column.as_any().downcast_ref::<Date32Array>()?.value(row))
        }
        PrimitiveType::Timestamp => Datum::timestamp_micros(
            column
                .as_any()
                .downcast_ref::<TimestampMicrosecondArray>()?
                .value(row),
        ),
        PrimitiveType::Timestamptz => Datum::timestamptz_micros(
            column
                .as_any()
                .downcast_ref::<TimestampMicrosecondArray>()?
                .value(row),
        ),
        _ => return None,
    })
}

/// The directory of a partition under the table's `data/`: `name=value/…`, each value
/// as Iceberg shows it (`2026-12-03`, `2026-12-03-18`) with characters other than
/// letters, digits, `.`, `_` and `-` replaced by `_` — the directory only groups files;
/// readers take a file's partition from the manifest, not from its path.
pub fn partition_path(spec: &PartitionSpec, schema: &IcebergSchema, key: &PartitionKey) -> String {
    spec.fields()
        .iter()
        .zip(key)
        .map(|(field, value)| {
            let source = schema
                .field_by_id(field.source_id)
                .map(|f| f.field_type.as_ref().clone())
                .unwrap_or(Type::Primitive(PrimitiveType::String));
            let result = field.transform.result_type(&source).unwrap_or(source);
            let literal = value.clone().map(Literal::from);
            let shown = field.transform.to_human_string(&result, literal.as_ref());
            let shown: String = shown
                .chars()
                .take(64)
                .map(|c| {
                    if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            format!("{}={shown}", field.name)
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// A partition key as the committable carries it: each value in Iceberg's single-value
/// encoding (hex), `None` for null.
pub fn encode(key: &PartitionKey) -> Vec<Option<String>> {
    key.iter()
        .map(|v| {
            v.as_ref()
                .map(|d| crate::data_files::hex(&d.to_bytes().unwrap_or_default()))
        })
        .collect()
}

/// The partition struct of a data file of `spec`, from its encoded key.
///
/// # Errors
/// Values that do not decode to the spec's result types.
pub fn decode(
    spec: &PartitionSpec,
    schema: &IcebergSchema,
    encoded: &[Option<String>],
) -> Result<Struct, PartitionError> {
    let types = spec
        .partition_type(schema)
        .map_err(|e| PartitionError::Invalid {
            field: String::new(),
            reason: e.message().to_string(),
        })?;
    if types.fields().len() != encoded.len() {
        return Err(PartitionError::Invalid {
            field: String::new(),
            reason: format!(
                "a data file has {} partition values, the spec {} fields",
                encoded.len(),
                types.fields().len()
            ),
        });
    }
    types
        .fields()
        .iter()
        .zip(encoded)
        .map(|(field, value)| {
            let Some(hex) = value else {
                return Ok(None);
            };
            let invalid = || PartitionError::Invalid {
                field: field.name.clone(),
                reason: format!("value {hex} does not decode"),
            };
            let Type::Primitive(t) = field.field_type.as_ref() else {
                return Err(invalid());
            };
            let bytes = crate::data_files::unhex(hex).ok_or_else(invalid)?;
            let datum = Datum::try_from_bytes(&bytes, t.clone()).map_err(|_| invalid())?;
            Ok(Some(Literal::from(datum)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{declared, schema};
    use super::super::spec::new_spec;
    use super::*;
    use riffle_core::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
    use std::sync::Arc;

    fn columns() -> Vec<TableColumn> {
        [
            ("auction", 1, PrimitiveType::Long),
            ("channel", 2, PrimitiveType::String),
            ("date_time", 3, PrimitiveType::Timestamp),
        ]
        .into_iter()
        .map(|(name, field_id, iceberg)| TableColumn {
            name: name.into(),
            field_id,
            iceberg,
        })
        .collect()
    }

    #[test]
    fn rows_split_by_their_transformed_values_and_keys_round_trip_through_the_committable() {
        let spec = new_spec(
            &declared(&[
                ("identity", "channel"),
                ("bucket[16]", "auction"),
                ("day", "date_time"),
            ]),
            &schema(),
        )
        .unwrap();
        let partitioner = Partitioner::new(&spec, &schema(), &columns())
            .unwrap()
            .unwrap();
        let arrow = Schema::new(vec![
            Field::new("auction", DataType::Int64, true),
            Field::new("channel", DataType::Utf8, true),
            Field::new(
                "date_time",
                DataType::Timestamp(TimeUnit::Microsecond, None),
                true,
            ),
        ]);
        // 2026-12-03T00:00:00 and an hour later: the same day.
        let day = 1_796_256_000_000_000i64;
        let batch = RecordBatch::try_new(
            Arc::new(arrow),
            vec![
                Arc::new(Int64Array::from(vec![34, 34, 34])),
                Arc::new(StringArray::from(vec![Some("a/b c"), Some("a/b c"), None])),
                Arc::new(TimestampMicrosecondArray::from(vec![
                    day,
                    day + 3_600_000_000,
                    day,
                ])),
            ],
        )
        .unwrap();
        let parts = partitioner.split(&batch).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].1.num_rows(), 2);
        assert_eq!(parts[1].1.num_rows(), 1);
        // Iceberg's spec: bucket hash of 34 is 2017239379, so bucket[16] is 3.
        assert_eq!(
            parts[0].0,
            vec![
                Some(Datum::string("a/b c")),
                Some(Datum::int(3)),
                Some(Datum::date(20_790)),
            ]
        );
        assert_eq!(parts[1].0[0], None);
        assert_eq!(
            partitioner.path(&parts[0].0),
            "channel=a_b_c/auction_bucket=3/date_time_day=2026-12-03"
        );
        assert_eq!(
            partitioner.path(&parts[1].0),
            "channel=null/auction_bucket=3/date_time_day=2026-12-03"
        );
        let decoded = decode(&spec, &schema(), &encode(&parts[0].0)).unwrap();
        assert_eq!(
            decoded,
            Struct::from_iter([
                Some(Literal::string("a/b c")),
                Some(Literal::int(3)),
                Some(Literal::date(20_790)),
            ])
        );
        assert!(decode(&spec, &schema(), &encode(&parts[0].0)[..2]).is_err());
    }

    #[test]
    fn a_table_partitioned_by_a_column_the_query_does_not_write_or_cannot_split_is_refused() {
        let spec = new_spec(&declared(&[("identity", "price")]), &schema()).unwrap();
        let e = Partitioner::new(&spec, &schema(), &columns()).unwrap_err();
        assert_eq!(
            e,
            PartitionError::NotWritten {
                column: "price".into()
            }
        );
        let mut with_price = columns();
        with_price.push(TableColumn {
            name: "price".into(),
            field_id: 4,
            iceberg: PrimitiveType::Double,
        });
        let e = Partitioner::new(&spec, &schema(), &with_price).unwrap_err();
        assert!(matches!(e, PartitionError::UnsupportedType { .. }), "{e}");
        let unpartitioned = new_spec(&[], &schema()).unwrap();
        assert!(Partitioner::new(&unpartitioned, &schema(), &columns())
            .unwrap()
            .is_none());
    }
}
