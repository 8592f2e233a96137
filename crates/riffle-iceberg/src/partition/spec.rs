//! A declared `PARTITIONED BY` as an Iceberg partition spec, and the check of a
//! declaration against an existing table's spec.

use iceberg::spec::{PartitionSpec, Schema as IcebergSchema, Transform};
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
    use super::super::fixtures::{declared, schema};
    use super::*;

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
