//! A CDC table's changes as Arrow rows: which of the table's columns are which declared
//! columns (checked when PostgreSQL describes the table), and text values cast to the
//! declared types. pgoutput and the snapshot's query both give each value in its type's
//! text form (with the session pinned to UTC and ISO dates), so one cast serves both.

use riffle_core::arrow::array::{ArrayRef, Int8Array, RecordBatch, StringArray};
use riffle_core::arrow::compute::kernels::cast::{cast_with_options, CastOptions};
use riffle_core::arrow::datatypes::{DataType, SchemaRef};
use riffle_core::{Error, Result, RowKind, StreamSchema};
use std::sync::Arc;

/// One change: the key's new row (`+U`) or its deletion (`-D`, key columns only).
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub kind: RowKind,
    /// Text values in declared-column order (`None`: NULL, or not given).
    pub values: Vec<Option<String>>,
}

/// How the table PostgreSQL describes maps onto the declared columns.
#[derive(Debug, Clone)]
pub struct ColumnMap {
    /// For each declared column, its index in PostgreSQL's tuple.
    at: Vec<usize>,
}

/// A column of the table as PostgreSQL describes it.
#[derive(Debug, Clone)]
pub struct PgColumn {
    pub name: String,
    /// Part of the replica identity (the values a delete carries).
    pub identity: bool,
}

impl ColumnMap {
    /// Maps the declared `schema`'s columns (by name) onto `columns`; the declared
    /// `key` must be within what a delete names: the replica identity, or every column
    /// (`full`).
    ///
    /// # Errors
    /// A declared column the table lacks, or a key column outside the replica identity.
    pub fn new(
        table: &str,
        schema: &SchemaRef,
        key: &[String],
        columns: &[PgColumn],
        full: bool,
    ) -> Result<Self> {
        let mut at = Vec::with_capacity(schema.fields().len());
        for field in schema.fields() {
            let found = columns.iter().position(|c| c.name == *field.name());
            let Some(i) = found else {
                let names: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
                return Err(Error::config(
                    "columns",
                    format!(
                        "`{}` is not a column of PostgreSQL's table {table} (it has {})",
                        field.name(),
                        names.join(", ")
                    ),
                ));
            };
            at.push(i);
        }
        for k in key {
            let identity = columns.iter().any(|c| c.name == *k && c.identity);
            if !identity && !full {
                return Err(Error::config(
                    "PRIMARY KEY",
                    format!(
                        "`{k}` is not in the replica identity of {table}, so a deleted row would not say its `{k}`: declare the table's own primary key, or run ALTER TABLE {table} REPLICA IDENTITY FULL"
                    ),
                ));
            }
        }
        Ok(Self { at })
    }

    /// The declared columns' values from a tuple of PostgreSQL's (`None`: NULL).
    pub fn pick(&self, tuple: &[Option<String>]) -> Vec<Option<String>> {
        self.at
            .iter()
            .map(|&i| tuple.get(i).cloned().flatten())
            .collect()
    }
}

/// A commit time (microseconds since the Unix epoch) as text of the event-time column's
/// `data_type`: epoch milliseconds for a BIGINT column, RFC 3339 otherwise.
pub fn time_text(unix_micros: i64, data_type: &DataType) -> String {
    match data_type {
        DataType::Int64 => unix_micros.div_euclid(1000).to_string(),
        _ => chrono::DateTime::from_timestamp_micros(unix_micros)
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true))
            .unwrap_or_default(),
    }
}

/// The declared key must be one of the table's own keys (its primary key, or a unique
/// index over NOT NULL columns, with no predicate or expression): a key narrower than
/// that merges distinct rows into one.
///
/// # Errors
/// No such key has exactly the declared columns.
pub fn check_key(table: &str, declared: &[String], unique: &[Vec<String>]) -> Result<()> {
    let mut wanted: Vec<&str> = declared.iter().map(String::as_str).collect();
    wanted.sort_unstable();
    let found = unique.iter().any(|key| {
        let mut key: Vec<&str> = key.iter().map(String::as_str).collect();
        key.sort_unstable();
        key == wanted
    });
    if found {
        return Ok(());
    }
    let keys: Vec<String> = unique
        .iter()
        .map(|k| format!("({})", k.join(", ")))
        .collect();
    Err(Error::config(
        "PRIMARY KEY",
        format!(
            "({}) is not a key of {table}, whose keys are {}: declare one of them, or rows that share ({}) would replace each other",
            declared.join(", "),
            if keys.is_empty() { "none".to_string() } else { keys.join(", ") },
            declared.join(", ")
        ),
    ))
}

/// Fractional digits of a DECIMAL value beyond the column's `scale` that are not zero
/// (Arrow's cast rounds them away).
fn beyond_scale(text: &str, scale: i8) -> bool {
    let digits = text.split_once('.').map_or("", |(_, f)| f);
    let digits = digits.split(['e', 'E']).next().unwrap_or("");
    let keep = usize::try_from(scale).unwrap_or(0);
    digits.len() > keep && digits[keep..].bytes().any(|b| b != b'0')
}

/// Builds batches of changes in the source's output layout: the declared columns, the
/// row kind, the event time.
pub struct ChangeBatches {
    output: StreamSchema,
    declared: SchemaRef,
    /// The declared column holding event time.
    event_column: usize,
}

impl ChangeBatches {
    pub fn new(output: StreamSchema, declared: SchemaRef, event_column: usize) -> Self {
        Self {
            output,
            declared,
            event_column,
        }
    }

    /// `changes` as one batch. A delete without its event-time value takes `fallback`'s
    /// (the commit's time, as text of the event column's type), given per change.
    ///
    /// # Errors
    /// A value that is not of its column's type (naming the column and the value).
    pub fn batch(&self, changes: &[Change]) -> Result<RecordBatch> {
        let strict = CastOptions {
            safe: false,
            ..Default::default()
        };
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.declared.fields().len() + 2);
        for (c, field) in self.declared.fields().iter().enumerate() {
            let zone = matches!(field.data_type(), DataType::Timestamp(_, _));
            let text: StringArray = changes
                .iter()
                .map(|ch| {
                    ch.values[c].as_deref().map(|v| match zone {
                        // PostgreSQL writes UTC (the session's zone) as `+00`.
                        true => v
                            .strip_suffix("+00")
                            .map_or_else(|| v.to_string(), |t| format!("{t}Z")),
                        false => v.to_string(),
                    })
                })
                .collect();
            if let DataType::Decimal128(_, scale) | DataType::Decimal256(_, scale) =
                field.data_type()
            {
                if let Some(value) = text.iter().flatten().find(|v| beyond_scale(v, *scale)) {
                    return Err(Error::config(
                        "columns",
                        format!(
                            "a value of `{}` ({value}) has more decimal places than its type {} keeps: declare a larger scale",
                            field.name(),
                            field.data_type()
                        ),
                    ));
                }
            }
            let text: ArrayRef = Arc::new(text);
            let cast = cast_with_options(&text, field.data_type(), &strict).map_err(|e| {
                Error::config(
                    "columns",
                    format!(
                        "a value of `{}` is not {}: {e}",
                        field.name(),
                        field.data_type()
                    ),
                )
            })?;
            columns.push(cast);
        }
        let kinds: Int8Array = changes.iter().map(|ch| Some(ch.kind as i8)).collect();
        columns.push(Arc::new(kinds));
        let event = crate::time_columns::event_time_nanos(&columns[self.event_column])?;
        if event.null_count() > 0 {
            return Err(Error::config(
                "columns",
                format!(
                    "a change without its event time: `{}` is NULL",
                    self.declared.field(self.event_column).name()
                ),
            ));
        }
        columns.push(event);
        RecordBatch::try_new(self.output.schema.clone(), columns)
            .map_err(|e| Error::external("postgres-cdc", e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use riffle_core::arrow::array::{Array, Int64Array};
    use riffle_core::arrow::datatypes::{Field, Schema};

    fn declared() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("name", DataType::Utf8, true),
            Field::new("ok", DataType::Boolean, true),
            Field::new("at", DataType::Int64, true),
        ]))
    }

    fn pg(names: &[(&str, bool)]) -> Vec<PgColumn> {
        names
            .iter()
            .map(|(n, identity)| PgColumn {
                name: n.to_string(),
                identity: *identity,
            })
            .collect()
    }

    #[test]
    fn declared_columns_are_found_by_name_in_any_order() {
        let table = pg(&[
            ("at", false),
            ("extra", false),
            ("ok", false),
            ("name", false),
            ("id", true),
        ]);
        let map = ColumnMap::new("t", &declared(), &["id".into()], &table, false).unwrap();
        let tuple: Vec<Option<String>> = ["5", "x", "t", "n", "7"]
            .iter()
            .map(|v| Some(v.to_string()))
            .collect();
        assert_eq!(
            map.pick(&tuple),
            vec![
                Some("7".into()),
                Some("n".into()),
                Some("t".into()),
                Some("5".into())
            ]
        );
    }

    #[test]
    fn a_key_outside_the_replica_identity_is_refused_unless_identity_is_full() {
        let table = pg(&[("id", false), ("name", true), ("ok", false), ("at", false)]);
        let refused = ColumnMap::new("t", &declared(), &["id".into()], &table, false);
        assert!(refused
            .unwrap_err()
            .to_string()
            .contains("REPLICA IDENTITY FULL"));
        assert!(ColumnMap::new("t", &declared(), &["id".into()], &table, true).is_ok());
    }

    #[test]
    fn a_declared_column_the_table_lacks_is_named() {
        let table = pg(&[("id", true)]);
        let refused = ColumnMap::new("public.t", &declared(), &["id".into()], &table, false);
        let message = refused.unwrap_err().to_string();
        assert!(
            message.contains("`name`") && message.contains("public.t"),
            "{message}"
        );
    }

    #[test]
    fn a_declared_key_must_be_one_of_the_tables_keys() {
        let keys = vec![
            vec!["a".to_string(), "b".to_string()],
            vec!["code".to_string()],
        ];
        assert!(check_key("t", &["b".into(), "a".into()], &keys).is_ok());
        assert!(check_key("t", &["code".into()], &keys).is_ok());
        let narrower = check_key("t", &["a".into()], &keys)
            .unwrap_err()
            .to_string();
        assert!(narrower.contains("(a, b)"), "{narrower}");
        assert!(check_key("t", &["a".into()], &[]).is_err());
    }

    #[test]
    fn decimal_places_beyond_the_scale_are_noticed_but_trailing_zeros_are_not() {
        assert!(beyond_scale("12.50", 0));
        assert!(!beyond_scale("12.00", 0));
        assert!(!beyond_scale("12.5", 2));
        assert!(beyond_scale("0.125", 2));
        assert!(!beyond_scale("7", 0));
    }

    #[test]
    fn a_commit_time_is_written_in_the_event_columns_own_form() {
        let micros = 1_765_000_000_123_456;
        assert_eq!(time_text(micros, &DataType::Int64), "1765000000123");
        let text = time_text(
            micros,
            &DataType::Timestamp(riffle_core::arrow::datatypes::TimeUnit::Millisecond, None),
        );
        assert!(text.ends_with(".123456Z"), "{text}");
    }

    #[test]
    fn text_values_become_the_declared_types_with_kinds_and_event_time() {
        let mut fields: Vec<Field> = declared()
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        fields.push(riffle_core::row_kind_field());
        let output = StreamSchema::with_timestamp(fields);
        let batches = ChangeBatches::new(output, declared(), 3);
        let upsert = Change {
            kind: RowKind::UpdateAfter,
            values: vec![
                Some("7".into()),
                Some("n".into()),
                Some("f".into()),
                Some("1000".into()),
            ],
        };
        let delete = Change {
            kind: RowKind::Delete,
            values: vec![Some("8".into()), None, None, Some("2000".into())],
        };
        let batch = batches.batch(&[upsert, delete]).unwrap();
        let ids = batch
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        assert_eq!(ids.values(), &[7, 8]);
        assert!(batch.column(1).is_null(1));
        assert_eq!(batch.num_columns(), 6);
        let bad = Change {
            kind: RowKind::UpdateAfter,
            values: vec![Some("seven".into()), None, None, Some("1".into())],
        };
        let message = batches.batch(&[bad]).unwrap_err().to_string();
        assert!(message.contains("`id`"), "{message}");
    }
}
