//! Partitioned tables: a declared `PARTITIONED BY` as an Iceberg partition spec, the
//! check of a declaration against an existing table's spec, and each row's partition —
//! its values under the spec's transforms, computed by the iceberg crate's transform
//! functions on single values (no Arrow type crosses into the crate).

mod rows;
mod spec;

pub use rows::{decode, encode, PartitionKey, Partitioner};
pub use spec::{check_declared, new_spec, transform_name, DeclaredField, PartitionError};

/// The schema and declarations both halves' tests partition.
#[cfg(test)]
mod fixtures {
    use super::DeclaredField;
    use iceberg::spec::{NestedField, PrimitiveType, Schema as IcebergSchema, Type};
    use std::sync::Arc;

    pub(super) fn schema() -> IcebergSchema {
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

    pub(super) fn declared(fields: &[(&str, &str)]) -> Vec<DeclaredField> {
        fields
            .iter()
            .map(|(transform, column)| DeclaredField {
                column: column.to_string(),
                transform: transform.to_string(),
            })
            .collect()
    }
}
