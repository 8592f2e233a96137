//! The options of a partitioned file sink (`PARTITIONED BY (dt, hm)` on the
//! `filesystem` connector), in Flink's names, and its rolling policy.

use super::{bytes_option, duration_option};
use crate::ddl::TableDef;
use crate::error::{Result, SqlError};
use riffle_connectors::sinks::partitions::{PartitionCommit, Partitioning, DEFAULT_PARTITION_NAME};
use riffle_connectors::sinks::RollingPolicy;
use std::time::Duration;

/// Options only a sink reads (their help is in the connector's option list).
pub(super) const SINK_ONLY: &[&str] = &[
    "sink.partition-commit.policy.kind",
    "sink.partition-commit.trigger",
    "sink.partition-commit.delay",
    "sink.partition-commit.watermark-time-zone",
    "partition.time-extractor.timestamp-pattern",
    "partition.default-name",
    "sink.rolling-policy.file-size",
    "sink.rolling-policy.rollover-interval",
    "sink.rolling-policy.check-interval",
];

fn option<'a>(table: &'a TableDef, key: &str) -> Option<&'a str> {
    table.options.get(key).map(|v| v.trim())
}

/// The rolling policy of a file sink.
///
/// # Errors
/// A size or duration that is none.
pub(super) fn rolling(table: &TableDef) -> Result<RollingPolicy> {
    let mut policy = RollingPolicy::default();
    if let Some(bytes) = bytes_option(table, "sink.rolling-policy.file-size")? {
        policy.max_file_bytes = bytes;
    }
    policy.max_file_age = duration_option(table, "sink.rolling-policy.rollover-interval", None)?;
    // Read for its errors only: age is checked at every write.
    duration_option(table, "sink.rolling-policy.check-interval", None)?;
    Ok(policy)
}

/// The partitioning of a file sink declared `PARTITIONED BY (…)`; `None` without the
/// clause (whose partition options are then refused).
///
/// # Errors
/// A transform in the clause, a column the table does not declare, every column a
/// partition column, or a partition option riffle cannot honour.
pub(super) fn partitioning(table: &TableDef) -> Result<Option<Partitioning>> {
    let fail = |message: String| SqlError::connector(&table.name, message);
    if table.partitioned_by.is_empty() {
        if let Some(key) = SINK_ONLY
            .iter()
            .find(|k| k.contains("partition") && table.options.contains_key(**k))
        {
            return Err(fail(format!(
                "'{key}' applies to a partitioned sink: declare PARTITIONED BY (…) or drop it"
            )));
        }
        return Ok(None);
    }
    let mut columns = Vec::new();
    for term in &table.partitioned_by {
        if let Some(function) = &term.function {
            return Err(fail(format!(
                "PARTITIONED BY ({term}): a filesystem sink partitions by column values; compute the value in the query (e.g. DATE_FORMAT(ts, 'yyyy-MM-dd') AS dt) and partition by that column ({function} is an Iceberg transform)"
            )));
        }
        let declared = table.columns.iter().find(|f| f.name() == &term.column);
        if declared.is_none() && !table.columns.is_empty() {
            return Err(fail(format!(
                "PARTITIONED BY ({}): the table declares no column `{}`",
                term.column, term.column
            )));
        }
        if let Some(field) = declared {
            use riffle_core::arrow::datatypes::DataType as T;
            if matches!(
                field.data_type(),
                T::Timestamp(_, _) | T::Float32 | T::Float64
            ) {
                return Err(fail(format!(
                    "PARTITIONED BY ({}): a {} partition value has no one text Flink and riffle agree on; partition by a formatted string column instead (DATE_FORMAT(ts, 'yyyy-MM-dd') AS dt)",
                    term.column,
                    field.data_type()
                )));
            }
        }
        if term.column.starts_with(['.', '_']) {
            return Err(fail(format!(
                "PARTITIONED BY ({}): readers skip directories whose names start with `.` or `_`; rename the column",
                term.column
            )));
        }
        columns.push(term.column.clone());
    }
    if !table.columns.is_empty() && columns.len() >= table.columns.len() {
        return Err(fail(
            "every column is a partition column: the files would hold no values".into(),
        ));
    }
    if table.options.get("format").map(String::as_str) == Some("debezium-json") {
        return Err(fail(
            "PARTITIONED BY with 'format' = 'debezium-json': a changelog's withdrawals would land in other partitions than their rows; write it unpartitioned".into(),
        ));
    }
    let default_name = option(table, "partition.default-name")
        .unwrap_or(DEFAULT_PARTITION_NAME)
        .to_string();
    Ok(Some(Partitioning {
        commit: commit(table, &columns)?,
        columns,
        default_name,
    }))
}

/// The partition commit, if asked for.
fn commit(table: &TableDef, columns: &[String]) -> Result<Option<PartitionCommit>> {
    let fail = |message: String| SqlError::connector(&table.name, message);
    let kind = option(table, "sink.partition-commit.policy.kind");
    match kind {
        None => {
            if let Some(key) = [
                "sink.partition-commit.trigger",
                "sink.partition-commit.delay",
                "partition.time-extractor.timestamp-pattern",
            ]
            .into_iter()
            .find(|k| table.options.contains_key(*k))
            {
                return Err(fail(format!(
                    "'{key}' has no effect without 'sink.partition-commit.policy.kind' = 'success-file'"
                )));
            }
            return Ok(None);
        }
        Some(kind) if kind.eq_ignore_ascii_case("success-file") => {}
        Some(other) => {
            return Err(fail(format!(
                "'sink.partition-commit.policy.kind' = '{other}': riffle writes success-file only (no metastore, no custom policy)"
            )))
        }
    }
    match option(table, "sink.partition-commit.trigger") {
        Some(t) if t.eq_ignore_ascii_case("partition-time") => {}
        other => {
            return Err(fail(format!(
                "'sink.partition-commit.trigger' = '{}': riffle commits partitions by partition-time only (a processing-time commit would depend on when the job ran); add 'sink.partition-commit.trigger' = 'partition-time'",
                other.unwrap_or("process-time', Flink's default, '")
            )))
        }
    }
    if let Some(zone) = option(table, "sink.partition-commit.watermark-time-zone") {
        if !zone.eq_ignore_ascii_case("UTC") {
            return Err(fail(format!(
                "'sink.partition-commit.watermark-time-zone' = '{zone}': riffle reads partition times as UTC only"
            )));
        }
    }
    let delay = match option(table, "sink.partition-commit.delay") {
        None => Duration::ZERO,
        Some(text) => {
            let split = text
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(text.len());
            let (number, unit) = text.split_at(split);
            let unit = match unit.trim() {
                "" => "ms",
                unit => unit,
            };
            crate::ddl::parse_duration(number, unit).ok_or_else(|| {
                fail(format!(
                    "'sink.partition-commit.delay' = '{text}' is not a duration such as 0 s or 1 min"
                ))
            })?
        }
    };
    let pattern = option(table, "partition.time-extractor.timestamp-pattern")
        .map(str::to_string)
        .unwrap_or_else(|| format!("${}", columns[0]));
    if let Some(unknown) = pattern_names(&pattern).find(|n| !columns.iter().any(|c| c == n)) {
        return Err(fail(format!(
            "'partition.time-extractor.timestamp-pattern' = '{pattern}' names `${unknown}`, which is no partition column ({})",
            columns.join(", ")
        )));
    }
    Ok(Some(PartitionCommit { pattern, delay }))
}

/// The `$name`s of a timestamp pattern.
fn pattern_names(pattern: &str) -> impl Iterator<Item = &str> {
    pattern.split('$').skip(1).map(|rest| {
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        &rest[..end]
    })
}
