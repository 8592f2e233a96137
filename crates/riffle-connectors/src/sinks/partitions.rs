//! Hive-style partitions of a file sink (`PARTITIONED BY (dt, hm)` writes
//! `dt=2026-12-06/hm=10%3A15/part-…`), as Flink's filesystem connector lays them out,
//! and its partition commit: a `_SUCCESS` file in a partition once every sink subtask's
//! watermark passed the partition's time plus a delay (Flink's `partition-time`
//! trigger with the `success-file` policy).

use riffle_core::arrow::array::{Array, ArrayRef, StringArray, UInt32Array};
use riffle_core::arrow::compute::{cast, take_record_batch};
use riffle_core::arrow::datatypes::DataType;
use riffle_core::{Error, EventTime, RecordBatch, Result};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// The name of the file that marks a committed partition.
pub const SUCCESS_FILE: &str = "_SUCCESS";

/// How a sink partitions its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partitioning {
    /// The partition columns, outermost first; they are not written into the files.
    pub columns: Vec<String>,
    /// The directory name of a NULL or empty value (`partition.default-name`).
    pub default_name: String,
    /// When a partition is marked committed, if at all.
    pub commit: Option<PartitionCommit>,
}

/// Flink's `partition-time` trigger with the `success-file` policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionCommit {
    /// `partition.time-extractor.timestamp-pattern`: the partition's time, with
    /// `$column` standing for each partition value (`$dt $hm:00`).
    pub pattern: String,
    /// `sink.partition-commit.delay`.
    pub delay: Duration,
}

/// Flink's default name of a NULL partition value.
pub const DEFAULT_PARTITION_NAME: &str = "__DEFAULT_PARTITION__";

/// Escapes a partition value for a directory name as Flink (and Hive) do: `%XX` for
/// control characters (NUL too) and `"#%'*/:=?\{[]^`.
pub fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        let escaped = matches!(
            c,
            '\u{0}'
                ..='\u{1f}'
                    | '"'
                    | '#'
                    | '%'
                    | '\''
                    | '*'
                    | '/'
                    | ':'
                    | '='
                    | '?'
                    | '\\'
                    | '\u{7f}'
                    | '{'
                    | '['
                    | ']'
                    | '^'
        );
        if escaped {
            out.push_str(&format!("%{:02X}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// Undoes [`escape`].
pub fn unescape(name: &str) -> String {
    let bytes = name.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Partitioning {
    /// `batch` split by partition: each partition's relative directory
    /// (`dt=…/hm=…`) and its rows without the partition columns, in the order each
    /// partition first appears.
    ///
    /// # Errors
    /// A partition column is missing, or its values cannot be written as text.
    pub fn split(&self, batch: &RecordBatch) -> Result<Vec<(String, RecordBatch)>> {
        let mut values: Vec<StringArray> = Vec::with_capacity(self.columns.len());
        let mut indices = Vec::with_capacity(self.columns.len());
        for column in &self.columns {
            let index = batch.schema().index_of(column).map_err(|_| {
                Error::config(
                    "PARTITIONED BY",
                    format!("the partition column `{column}` is not among the rows written"),
                )
            })?;
            let kind = batch.column(index).data_type();
            if matches!(
                kind,
                DataType::Timestamp(_, _) | DataType::Float32 | DataType::Float64
            ) {
                return Err(Error::config(
                    "PARTITIONED BY",
                    format!("the partition column `{column}` is {kind}, whose text Flink and riffle write differently; partition by a formatted string (DATE_FORMAT(ts, 'yyyy-MM-dd') AS dt)"),
                ));
            }
            let text: ArrayRef = cast(batch.column(index), &DataType::Utf8)?;
            let text = text
                .as_any()
                .downcast_ref::<StringArray>()
                .cloned()
                .ok_or_else(|| Error::config("PARTITIONED BY", "a value that is no text"))?;
            values.push(text);
            indices.push(index);
        }
        let mut rows_of: Vec<(String, Vec<u32>)> = Vec::new();
        let mut position: BTreeMap<String, usize> = BTreeMap::new();
        for row in 0..batch.num_rows() {
            let dir = self.directory(&values, row)?;
            let at = *position.entry(dir.clone()).or_insert_with(|| {
                rows_of.push((dir, Vec::new()));
                rows_of.len() - 1
            });
            rows_of[at].1.push(row as u32);
        }
        let kept: Vec<usize> = (0..batch.num_columns())
            .filter(|i| !indices.contains(i))
            .collect();
        let data = batch.project(&kept)?;
        rows_of
            .into_iter()
            .map(|(dir, rows)| {
                let rows = if rows.len() == batch.num_rows() {
                    data.clone()
                } else {
                    take_record_batch(&data, &UInt32Array::from(rows))?
                };
                Ok((dir, rows))
            })
            .collect()
    }

    fn directory(&self, values: &[StringArray], row: usize) -> Result<String> {
        let mut parts = Vec::with_capacity(self.columns.len());
        for (column, values) in self.columns.iter().zip(values) {
            let value = match values.is_null(row) {
                true => "",
                false => values.value(row),
            };
            let value = match value.is_empty() {
                true => escape(&self.default_name),
                false => escape(value),
            };
            let part = format!("{}={value}", escape(column));
            // A file system takes names of 255 bytes at most.
            if part.len() > 255 {
                let start: String = value.chars().take(40).collect();
                return Err(Error::config(
                    "PARTITIONED BY",
                    format!(
                        "a value of `{column}` makes a directory name of {} bytes (at most 255): `{start}…`",
                        part.len()
                    ),
                ));
            }
            parts.push(part);
        }
        Ok(parts.join("/"))
    }
}

impl PartitionCommit {
    /// The time of the partition at `dir` (`dt=2026-12-06/hm=10%3A15`), in event-time
    /// nanoseconds: the pattern with each `$column` replaced by its value, read as
    /// `yyyy-MM-dd HH:mm:ss` or `yyyy-MM-dd` (UTC). `None` when it is neither.
    pub fn time_of(&self, dir: &str) -> Option<EventTime> {
        let values: BTreeMap<String, String> = dir
            .split('/')
            .filter_map(|part| part.split_once('='))
            .map(|(column, value)| (unescape(column), unescape(value)))
            .collect();
        // One pass over the pattern: a `$` inside a value is no name.
        let mut text = String::new();
        let mut rest = self.pattern.as_str();
        while let Some(at) = rest.find('$') {
            text.push_str(&rest[..at]);
            let after = &rest[at + 1..];
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            text.push_str(values.get(&after[..end])?);
            rest = &after[end..];
        }
        text.push_str(rest);
        let text = text.trim();
        let time = chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S")
            .ok()
            .or_else(|| {
                chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
                    .ok()
                    .and_then(|d| d.and_hms_opt(0, 0, 0))
            })?;
        time.and_utc().timestamp_nanos_opt()
    }

    /// Whether the partition at `dir` is complete once every subtask's watermark has
    /// reached `watermark`.
    pub fn closes(&self, dir: &str, watermark: EventTime) -> bool {
        let delay = i64::try_from(self.delay.as_nanos()).unwrap_or(i64::MAX);
        self.time_of(dir)
            .is_some_and(|t| t.saturating_add(delay) <= watermark)
    }
}

/// Every directory under `root` a partitioned sink may have written into, at any
/// depth (a partitioning changed between runs leaves others), relative to it, `root`
/// itself first as `""`: those whose names hold `=`.
///
/// # Errors
/// A directory cannot be read.
pub fn written_dirs(root: &Path) -> Result<Vec<String>> {
    let mut found = vec![String::new()];
    let mut level = vec![String::new()];
    // Deeper than any sink partitions: a loop of links cannot hold the walk.
    for _ in 0..32 {
        let next = subdirectories(root, &level)?;
        if next.is_empty() {
            break;
        }
        found.extend(next.iter().cloned());
        level = next;
    }
    Ok(found)
}

/// The partition directories (names holding `=`, not hidden) directly under each of
/// `dirs`, relative to `root`.
fn subdirectories(root: &Path, dirs: &[String]) -> Result<Vec<String>> {
    let mut next = Vec::new();
    for rel in dirs {
        let dir = root.join(rel);
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(&dir, e)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| Error::io(&dir, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if name.starts_with('.') || !name.contains('=') || !is_dir {
                continue;
            }
            next.push(match rel.is_empty() {
                true => name,
                false => format!("{rel}/{name}"),
            });
        }
    }
    next.sort();
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use riffle_core::arrow::array::{Int64Array, StringArray};
    use riffle_core::arrow::datatypes::{Field, Schema};
    use std::sync::Arc;

    #[test]
    fn values_are_escaped_as_flink_names_partition_directories() {
        assert_eq!(escape("10:15"), "10%3A15");
        assert_eq!(escape("a/b=c d"), "a%2Fb%3Dc d");
        assert_eq!(escape("2026-12-06"), "2026-12-06");
        assert_eq!(unescape("10%3A15"), "10:15");
        assert_eq!(unescape(&escape("50% off?\n")), "50% off?\n");
        assert_eq!(unescape("bad%zz"), "bad%zz");
    }

    fn partitioning() -> Partitioning {
        Partitioning {
            columns: vec!["dt".into(), "hm".into()],
            default_name: DEFAULT_PARTITION_NAME.into(),
            commit: Some(PartitionCommit {
                pattern: "$dt $hm:00".into(),
                delay: Duration::from_secs(60),
            }),
        }
    }

    #[test]
    fn a_batch_splits_into_partitions_without_their_columns() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("price", DataType::Int64, false),
            Field::new("dt", DataType::Utf8, true),
            Field::new("hm", DataType::Utf8, true),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(vec![1, 2, 3, 4])),
                Arc::new(StringArray::from(vec![
                    Some("2026-12-06"),
                    Some("2026-12-06"),
                    None,
                    Some("2026-12-06"),
                ])),
                Arc::new(StringArray::from(vec!["10:15", "10:16", "10:15", "10:15"])),
            ],
        )
        .unwrap();
        let parts = partitioning().split(&batch).unwrap();
        let dirs: Vec<&str> = parts.iter().map(|(d, _)| d.as_str()).collect();
        assert_eq!(
            dirs,
            [
                "dt=2026-12-06/hm=10%3A15",
                "dt=2026-12-06/hm=10%3A16",
                "dt=__DEFAULT_PARTITION__/hm=10%3A15"
            ]
        );
        assert_eq!(parts[0].1.num_columns(), 1);
        let prices = parts[0]
            .1
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        assert_eq!(prices.values(), &[1, 4]);
    }

    #[test]
    fn a_partition_closes_when_the_watermark_passes_its_time_and_the_delay() {
        let commit = partitioning().commit.unwrap();
        let dir = "dt=2026-12-06/hm=10%3A15";
        let time = commit.time_of(dir).unwrap();
        let expected = chrono::NaiveDate::from_ymd_opt(2026, 12, 6)
            .unwrap()
            .and_hms_opt(10, 15, 0)
            .unwrap()
            .and_utc()
            .timestamp_nanos_opt()
            .unwrap();
        assert_eq!(time, expected);
        let minute = 60_000_000_000;
        assert!(!commit.closes(dir, time + minute - 1));
        assert!(commit.closes(dir, time + minute));
        // A directory the pattern cannot read never closes.
        assert!(!commit.closes("dt=__DEFAULT_PARTITION__/hm=10%3A15", i64::MAX));
    }

    #[test]
    fn a_dollar_inside_a_value_is_no_name() {
        let commit = PartitionCommit {
            pattern: "$dt 00:00:00".into(),
            delay: Duration::ZERO,
        };
        assert_eq!(commit.time_of("dt=%24dt"), None);
        assert!(commit.time_of("dt=1970-01-01").is_some());
    }

    #[test]
    fn a_value_too_long_for_a_directory_name_is_an_error_naming_the_column() {
        let long = "x".repeat(300);
        let schema = Arc::new(Schema::new(vec![
            Field::new("v", DataType::Int64, false),
            Field::new("dt", DataType::Utf8, false),
            Field::new("hm", DataType::Utf8, false),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(vec![1])),
                Arc::new(StringArray::from(vec![long.as_str()])),
                Arc::new(StringArray::from(vec!["10:15"])),
            ],
        )
        .unwrap();
        let error = partitioning().split(&batch).unwrap_err().to_string();
        assert!(error.contains("`dt`") && error.contains("255"), "{error}");
        assert_eq!(escape("a\u{0}b"), "a%00b");
    }

    #[test]
    fn a_date_alone_is_midnight() {
        let commit = PartitionCommit {
            pattern: "$dt".into(),
            delay: Duration::ZERO,
        };
        assert_eq!(commit.time_of("dt=1970-01-02"), Some(86_400_000_000_000));
    }
}
