//! Partitioned tables: a declared `PARTITIONED BY` as an Iceberg partition spec, the
//! check of a declaration against an existing table's spec, and each row's partition —
//! its values under the spec's transforms, computed by the iceberg crate's transform
//! functions on single values (no Arrow type crosses into the crate).

use crate::schema::TableColumn;
use iceberg::spec::{
    Datum, Literal, PartitionSpec, PrimitiveType, Schema as IcebergSchema, Struct, Transform, Type,
};
use iceberg::transform::{create_transform_function, BoxedTransformFunction};
use riffle_core::arrow::array::{
    Array, ArrayRef, BooleanArray, Date32Array, Int32Array, Int64Array, RecordBatch, StringArray,
    TimestampMicrosecondArray, UInt32Array,
};
use riffle_core::arrow::compute::take;
use std::collections::HashMap;
use std::str::FromStr;

/// One declared partition field: a column and the transform applied to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclaredField {
    /// The source column.
    pub column: String,
    /// Iceberg's name of the transform: `identity`, `year`, `month`, `day`, `hour`,
    /// `bucket[16]`, `truncate[4]`.
    pub transform: String,
}

/// Why a partitioning cannot be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PartitionError {
    /// The transform is not one of Iceberg's, or does not apply to the column.
    #[error("partition field {field}: {reason}")]
    Invalid { field: String, reason: String },
    /// The existing table is partitioned otherwise.
    #[error("the table is partitioned by ({table}), the declaration says ({declared}); declare the table's partitioning, or leave PARTITIONED BY out to write by the table's")]
    Differs { table: String, declared: String },
    /// The table partitions by a column the query does not write.
    #[error("the table is partitioned by `{column}`, which the query does not write")]
    NotWritten { column: String },
    /// riffle computes partitions of these column types only.
    #[error("partition field {field}: riffle partitions by int, bigint, string, boolean, date and timestamp columns, not {column_type}")]
    UnsupportedType { field: String, column_type: String },
}

/// The partition field name Iceberg's Spark DDL gives a transform of `column`.
fn field_name(column: &str, transform: &Transform) -> String {
    match transform {
        Transform::Identity => column.to_string(),
        Transform::Year => format!("{column}_year"),
        Transform::Month => format!("{column}_month"),
        Transform::Day => format!("{column}_day"),
        Transform::Hour => format!("{column}_hour"),
        Transform::Bucket(_) => format!("{column}_bucket"),
        Transform::Truncate(_) => format!("{column}_trunc"),
        _ => format!("{column}_{transform}"),
    }
}

/// The partition spec of a new table with `schema`, from `declared`.
///
/// # Errors
/// An unknown transform, or one that does not apply to its column's type.
pub fn new_spec(
    declared: &[DeclaredField],
    schema: &IcebergSchema,
) -> Result<PartitionSpec, PartitionError> {
    let mut builder = PartitionSpec::builder(schema.clone());
    for field in declared {
        let invalid = |reason: String| PartitionError::Invalid {
            field: format!("{}({})", field.transform, field.column),
            reason,
        };
        let transform =
            Transform::from_str(&field.transform).map_err(|e| invalid(e.to_string()))?;
        builder = builder
            .add_partition_field(
                &field.column,
                field_name(&field.column, &transform),
                transform,
            )
            .map_err(|e| invalid(e.message().to_string()))?;
    }
    builder.build().map_err(|e| PartitionError::Invalid {
        field: String::new(),
        reason: e.message().to_string(),
    })
}

/// `spec` as `transform(column), …`.
pub fn describe(spec: &PartitionSpec, schema: &IcebergSchema) -> String {
    spec.fields()
        .iter()
        .map(|f| {
            let column = schema
                .name_by_field_id(f.source_id)
                .unwrap_or("?")
                .to_string();
            format!("{}({column})", f.transform)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks `declared` against an existing table's `spec`: the same columns with the same
/// transforms, in order. An empty declaration takes the table's spec as it is.
///
/// # Errors
/// A different partitioning.
pub fn check_declared(
    declared: &[DeclaredField],
    spec: &PartitionSpec,
    schema: &IcebergSchema,
) -> Result<(), PartitionError> {
    if declared.is_empty() {
        return Ok(());
    }
    let want = new_spec(declared, schema)?;
    let same = want.fields().len() == spec.fields().len()
        && want
            .fields()
            .iter()
            .zip(spec.fields())
            .all(|(a, b)| a.source_id == b.source_id && a.transform == b.transform);
    if same {
        Ok(())
    } else {
        Err(PartitionError::Differs {
            table: describe(spec, schema),
            declared: describe(&want, schema),
        })
    }
}

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

/// The partition terms of riffle SQL as Iceberg transforms: `days(ts)` → `day`,
/// `bucket(16, id)` → `bucket[16]`, a bare column → `identity`.
///
/// # Errors
/// A function that is not a partition transform.
pub fn transform_name(function: Option<&str>, width: Option<u32>) -> Result<String, String> {
    let plain = |name: &str| match width {
        None => Ok(name.to_string()),
        Some(_) => Err(format!("{name} takes no number")),
    };
    match (function, width) {
        (None, _) => Ok("identity".into()),
        (Some("identity"), _) => plain("identity"),
        (Some("years" | "year"), _) => plain("year"),
        (Some("months" | "month"), _) => plain("month"),
        (Some("days" | "day"), _) => plain("day"),
        (Some("hours" | "hour"), _) => plain("hour"),
        (Some("bucket"), Some(n)) => Ok(format!("bucket[{n}]")),
        (Some("truncate"), Some(w)) => Ok(format!("truncate[{w}]")),
        (Some(f @ ("bucket" | "truncate")), None) => {
            Err(format!("{f} takes a number first: {f}(16, column)"))
        }
        (Some(other), _) => Err(format!(
            "`{other}` is not a partition transform (identity, years, months, days, hours, bucket(n, …), truncate(w, …))"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iceberg::spec::NestedField;
    use riffle_core::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
    use std::sync::Arc;

    fn schema() -> IcebergSchema {
        IcebergSchema::builder()
            .with_fields(vec![
                Arc::new(NestedField::optional(
                    1,
                    "auction",
                    Type::Primitive(PrimitiveType::Long),
                )),
                Arc::new(NestedField::optional(
                    2,
                    "channel",
                    Type::Primitive(PrimitiveType::String),
                )),
                Arc::new(NestedField::optional(
                    3,
                    "date_time",
                    Type::Primitive(PrimitiveType::Timestamp),
                )),
                Arc::new(NestedField::optional(
                    4,
                    "price",
                    Type::Primitive(PrimitiveType::Double),
                )),
            ])
            .build()
            .unwrap()
    }

    fn declared(fields: &[(&str, &str)]) -> Vec<DeclaredField> {
        fields
            .iter()
            .map(|(transform, column)| DeclaredField {
                column: column.to_string(),
                transform: transform.to_string(),
            })
            .collect()
    }

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
    fn a_declared_partitioning_becomes_a_spec_with_spark_style_field_names() {
        let spec = new_spec(
            &declared(&[
                ("identity", "channel"),
                ("day", "date_time"),
                ("bucket[16]", "auction"),
            ]),
            &schema(),
        )
        .unwrap();
        let names: Vec<&str> = spec.fields().iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["channel", "date_time_day", "auction_bucket"]);
        assert_eq!(
            describe(&spec, &schema()),
            "identity(channel), day(date_time), bucket[16](auction)"
        );
    }

    #[test]
    fn a_transform_that_does_not_fit_its_column_is_refused_by_name() {
        let e = new_spec(&declared(&[("day", "auction")]), &schema()).unwrap_err();
        assert!(e.to_string().contains("day(auction)"), "{e}");
        let e = new_spec(&declared(&[("identity", "nope")]), &schema()).unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
        let e = new_spec(&declared(&[("week", "date_time")]), &schema()).unwrap_err();
        assert!(e.to_string().contains("week"), "{e}");
    }

    #[test]
    fn a_declaration_must_match_an_existing_tables_spec_unless_it_is_left_out() {
        let table = new_spec(&declared(&[("hour", "date_time")]), &schema()).unwrap();
        check_declared(&[], &table, &schema()).unwrap();
        check_declared(&declared(&[("hour", "date_time")]), &table, &schema()).unwrap();
        let e = check_declared(&declared(&[("day", "date_time")]), &table, &schema()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the table is partitioned by (hour(date_time)), the declaration says (day(date_time)); declare the table's partitioning, or leave PARTITIONED BY out to write by the table's"
        );
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

    #[test]
    fn sql_partition_terms_name_icebergs_transforms() {
        assert_eq!(transform_name(None, None).unwrap(), "identity");
        assert_eq!(transform_name(Some("days"), None).unwrap(), "day");
        assert_eq!(transform_name(Some("hours"), None).unwrap(), "hour");
        assert_eq!(
            transform_name(Some("bucket"), Some(16)).unwrap(),
            "bucket[16]"
        );
        assert_eq!(
            transform_name(Some("truncate"), Some(4)).unwrap(),
            "truncate[4]"
        );
        assert!(transform_name(Some("bucket"), None).is_err());
        assert!(transform_name(Some("days"), Some(3)).is_err());
        assert!(transform_name(Some("upper"), None).is_err());
    }
}
