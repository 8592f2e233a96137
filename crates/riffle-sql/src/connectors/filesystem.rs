//! `filesystem`: JSON lines, CSV or Parquet files, read as a replayable source or as a
//! lookup table (read whole when the job starts), or written by the exactly-once file
//! sink.

use super::file_partitions;
use super::{
    bytes_option, count_option, lookup_columns, malformed_option, refuse_options, required,
    required_watermark, Connector, OptionSpec, RunSettings, SinkTable, SourceTable,
};
use crate::ddl::TableDef;
use crate::error::{Result, SqlError};
use riffle_connectors::sinks::{FileFormat, FileSinkFactory};
use riffle_connectors::{FileLookupFactory, FileSourceConfig, FileSourceFactory};
use riffle_core::arrow::datatypes::Schema;
use riffle_core::LookupTableFactory;
use riffle_runtime::WatermarkStrategy;
use std::path::PathBuf;
use std::sync::Arc;

/// Files in a directory.
pub struct FilesystemConnector;

const OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        name: "path",
        help: "a directory, file or glob to read; the directory to write (required)",
    },
    OptionSpec {
        name: "format",
        help: "json, csv or parquet (required); a sink also takes debezium-json, JSON lines in Debezium's before/after/op envelope, which can hold a changelog's withdrawn rows",
    },
    OptionSpec {
        name: "on_malformed",
        help: "source: fail (default) or skip, counting skipped records",
    },
    OptionSpec {
        name: "scan.max-records-per-second",
        help: "source: at most this many rows per wall second over all subtasks (e.g. 50K); unlimited if absent",
    },
    OptionSpec {
        name: "scan.split-size",
        help: "source: cut plain JSON/CSV files into byte ranges of this size (e.g. 64mb) and Parquet files between row groups, so one file is read by several subtasks; default: about four splits per subtask, 4mb to 256mb",
    },
    OptionSpec {
        name: "sink.partition-commit.policy.kind",
        help: "sink, partitioned: success-file writes _SUCCESS into a partition once it closes (the only policy)",
    },
    OptionSpec {
        name: "sink.partition-commit.trigger",
        help: "sink, partitioned: partition-time (the only trigger): a partition closes when every subtask's watermark passes its time plus the delay",
    },
    OptionSpec {
        name: "sink.partition-commit.delay",
        help: "sink, partitioned: how long after its time a partition closes (e.g. 1 min; default 0 s)",
    },
    OptionSpec {
        name: "sink.partition-commit.watermark-time-zone",
        help: "sink, partitioned: UTC (the only zone): the partition times are read as UTC",
    },
    OptionSpec {
        name: "partition.time-extractor.timestamp-pattern",
        help: "sink, partitioned: the partition's time from its values, e.g. '$dt $hm:00' (default: the first partition column), read as yyyy-MM-dd HH:mm:ss or yyyy-MM-dd",
    },
    OptionSpec {
        name: "partition.default-name",
        help: "sink, partitioned: the directory name of a NULL or empty value (default __DEFAULT_PARTITION__)",
    },
    OptionSpec {
        name: "sink.rolling-policy.file-size",
        help: "sink: start a new file once one holds this much (default 128mb)",
    },
    OptionSpec {
        name: "sink.rolling-policy.rollover-interval",
        help: "sink: start a new file once one has been open this long (default: only at checkpoints and by size)",
    },
    OptionSpec {
        name: "sink.rolling-policy.check-interval",
        help: "sink: accepted for Flink's texts; riffle checks a file's age whenever it writes to it",
    },
];

/// Options that only a file source reads.
const SOURCE_ONLY: &[&str] = &[
    "on_malformed",
    "scan.max-records-per-second",
    "scan.split-size",
];

fn format(table: &TableDef) -> Result<FileFormat> {
    let name = required(table, "format", "json")?;
    FileFormat::parse(name).map_err(|_| {
        let why = if name == "debezium-json" {
            "'format' = 'debezium-json' is written by file sinks; reading change streams from files is not supported yet".to_string()
        } else {
            format!("'format' = '{name}': use json, csv or parquet")
        };
        SqlError::connector(&table.name, why)
    })
}

impl Connector for FilesystemConnector {
    fn name(&self) -> &'static str {
        "filesystem"
    }

    fn options(&self) -> &'static [OptionSpec] {
        OPTIONS
    }

    fn writes_partitions(&self) -> bool {
        true
    }

    fn source(&self, table: &TableDef, _: &RunSettings) -> Result<SourceTable> {
        let path = required(table, "path", "data/bids")?;
        refuse_sink_options(table)?;
        let format = format(table)?;
        let on_malformed = malformed_option(table)?;
        let watermark = required_watermark(table, "a file source")?;
        let schema =
            (!table.columns.is_empty()).then(|| Arc::new(Schema::new(table.columns.clone())));
        let factory = FileSourceFactory::new(FileSourceConfig {
            path: path.into(),
            format,
            schema,
            event_time_column: watermark.column.clone(),
            on_malformed,
            batch_rows: 8192,
            max_rows_per_second: count_option(table, "scan.max-records-per-second")?,
            split_bytes: bytes_option(table, "scan.split-size")?,
        })
        .map_err(|e| SqlError::connector(&table.name, e.to_string()))?;
        Ok(SourceTable {
            factory: Arc::new(factory),
            event_time: watermark.column,
            watermarks: WatermarkStrategy {
                max_out_of_orderness: watermark.delay,
                idle_timeout: None,
            },
            expected_rows: None,
            sql_names: None,
            upsert_key: None,
        })
    }

    fn lookup(&self, table: &TableDef) -> Result<Arc<dyn LookupTableFactory>> {
        let path = required(table, "path", "data/side_input")?;
        refuse_sink_options(table)?;
        let format = format(table)?;
        refuse_options(
            table,
            SOURCE_ONLY,
            "applies to a file source; a lookup table's files are read whole and must be well formed",
        )?;
        let schema = lookup_columns(table)?;
        let factory = FileLookupFactory::new(path, format, schema)
            .map_err(|e| SqlError::connector(&table.name, e.to_string()))?;
        Ok(Arc::new(factory))
    }

    fn sink(&self, table: &TableDef, _: &str) -> Result<SinkTable> {
        let path = required(table, "path", "out/results")?;
        for source_only in SOURCE_ONLY {
            if table.options.contains_key(*source_only) {
                return Err(SqlError::connector(
                    &table.name,
                    format!("'{source_only}' applies to file sources, not to a sink"),
                ));
            }
        }
        let dir = PathBuf::from(path.strip_prefix("file://").unwrap_or(path));
        let rolling = file_partitions::rolling(table)?;
        let partitioning = file_partitions::partitioning(table)?;
        if table.options.get("format").map(String::as_str) == Some("debezium-json") {
            return Ok(SinkTable {
                factory: Arc::new(FileSinkFactory::debezium_json(dir, rolling)),
                updates: Ok(()),
                retractions: Ok(()),
                nested: true,
                needs_withdrawals: true,
            });
        }
        let updates = if table.primary_key.is_empty() {
            Err(format!(
                "`{}` is an append-only file sink; declare PRIMARY KEY (…) on it to write the result as upserts (the newest row per key is current)",
                table.name
            ))
        } else {
            Ok(())
        };
        let format = format(table)?;
        let mut factory = FileSinkFactory::new(dir, format, rolling);
        if let Some(partitioning) = partitioning {
            factory = factory.partitioned(partitioning);
        }
        Ok(SinkTable {
            factory: Arc::new(factory),
            updates,
            retractions: Err(format!(
                "`{}` writes {} rows, which cannot withdraw a row; use 'format' = 'debezium-json'",
                table.name,
                format.extension()
            )),
            nested: format != FileFormat::Csv,
            needs_withdrawals: false,
        })
    }
}

/// Refuses a sink's options on a table read as a source.
fn refuse_sink_options(table: &TableDef) -> Result<()> {
    if !table.partitioned_by.is_empty() {
        return Err(SqlError::connector(
            &table.name,
            "PARTITIONED BY on a file source or lookup table: riffle does not read partition values out of paths; declare the columns in the files, or drop the clause",
        ));
    }
    match file_partitions::SINK_ONLY
        .iter()
        .find(|k| table.options.contains_key(**k))
    {
        Some(key) => Err(SqlError::connector(
            &table.name,
            format!("'{key}' applies to a file sink, not to a source"),
        )),
        None => Ok(()),
    }
}
