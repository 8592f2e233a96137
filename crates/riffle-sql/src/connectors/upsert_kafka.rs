//! `upsert-kafka` (Flink's connector of that name): a compacted topic as a table keyed
//! by its PRIMARY KEY. Read, each record's value is its key's new row and a tombstone (a
//! record without a value) deletes the key; the planner turns these into a changelog
//! (docs/sql.md, "Updating results"). Written, each row is a record keyed by the
//! primary key (a JSON object of its columns) and each withdrawn row a tombstone.

use super::kafka::{self, kafka_sink, kafka_source};
use super::{choice_option, Connector, OptionSpec, RunSettings, SinkTable, SourceTable};
use crate::ddl::TableDef;
use crate::error::{Result, SqlError};

/// A Kafka topic of upserts.
pub struct UpsertKafkaConnector;

const OPTIONS: &[OptionSpec] = &[
    kafka::BOOTSTRAP_SERVERS,
    OptionSpec {
        name: "topic",
        help: "the topic (required; it must exist; compacted, so that it keeps each key's last record)",
    },
    OptionSpec {
        name: "key.format",
        help: "json (default): the key is a JSON object of the PRIMARY KEY's columns (a single key column may also be its bare text)",
    },
    OptionSpec {
        name: "value.format",
        help: "json (default): the value is the whole row as a JSON object",
    },
    kafka::GROUP_ID,
    kafka::STARTUP_MODE,
    kafka::STARTUP_TIMESTAMP,
    kafka::BOUNDED_MODE,
    kafka::MAX_RECORDS_PER_SECOND,
    kafka::IDLE_TIMEOUT,
    kafka::TIMESTAMP_COLUMN,
    kafka::ON_MALFORMED,
    kafka::SINK_DELIVERY,
    kafka::PROPERTIES,
];

/// The primary key, and the formats checked (JSON only).
fn key_of(table: &TableDef) -> Result<Vec<String>> {
    choice_option(table, "key.format", &["json"], "json")?;
    choice_option(table, "value.format", &["json"], "json")?;
    if table.primary_key.is_empty() {
        return Err(SqlError::connector(
            &table.name,
            "an upsert-kafka table needs PRIMARY KEY (…) NOT ENFORCED: the columns of the record key",
        ));
    }
    Ok(table.primary_key.clone())
}

impl Connector for UpsertKafkaConnector {
    fn name(&self) -> &'static str {
        "upsert-kafka"
    }

    fn options(&self) -> &'static [OptionSpec] {
        OPTIONS
    }

    fn source(&self, table: &TableDef, _: &RunSettings) -> Result<SourceTable> {
        if table.options.contains_key("sink.delivery") {
            return Err(SqlError::connector(
                &table.name,
                "'sink.delivery' does not apply to an upsert-kafka source",
            ));
        }
        let key = key_of(table)?;
        kafka_source(table, Some(key))
    }

    fn sink(&self, table: &TableDef, pipeline: &str) -> Result<SinkTable> {
        key_of(table)?;
        for option in [
            "group.id",
            "scan.startup.mode",
            "scan.startup.timestamp-millis",
            "scan.bounded.mode",
            "scan.max-records-per-second",
            "scan.watermark.idle-timeout",
            "on_malformed",
            "timestamp.column",
        ] {
            if table.options.contains_key(option) {
                return Err(SqlError::connector(
                    &table.name,
                    format!("'{option}' does not apply to an upsert-kafka sink"),
                ));
            }
        }
        kafka_sink(table, pipeline, true)
    }
}
