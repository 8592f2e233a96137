//! `kafka`: a topic read as a replayable stream, or written exactly-once by a
//! transactional producer.

use super::{
    choice_option, count_option, duration_option, malformed_option, required, required_watermark,
    secret_from_env, Connector, OptionSpec, RunSettings, SinkTable, SourceTable,
};
use crate::ddl::TableDef;
use crate::error::{Result, SqlError};
use riffle_connectors::kafka::{
    AvroOptions, KafkaClient, KafkaDelivery, KafkaSinkConfig, KafkaSinkFactory, KafkaSourceConfig,
    KafkaSourceFactory, KafkaStartup, KafkaTimestamp, ValueFormat,
};
use riffle_core::arrow::datatypes::Schema;
use riffle_runtime::WatermarkStrategy;
use std::sync::Arc;
use std::time::Duration;

/// A Kafka topic.
pub struct KafkaConnector;

/// How long a quiet partition (or subtask) holds event time back by default.
const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(5);

// Options an `upsert-kafka` table shares with a `kafka` one.
pub(super) const BOOTSTRAP_SERVERS: OptionSpec = OptionSpec {
    name: "bootstrap.servers",
    help: "host:port[,host:port…] of the brokers (required)",
};
pub(super) const GROUP_ID: OptionSpec = OptionSpec {
    name: "group.id",
    help: "source: consumer group that gets the offsets of each committed checkpoint (advisory)",
};
pub(super) const STARTUP_MODE: OptionSpec = OptionSpec {
    name: "scan.startup.mode",
    help: "source, without a checkpoint: earliest (default), latest, group-offsets or timestamp",
};
pub(super) const STARTUP_TIMESTAMP: OptionSpec = OptionSpec {
    name: "scan.startup.timestamp-millis",
    help: "source: the start time for 'scan.startup.mode' = 'timestamp'",
};
pub(super) const BOUNDED_MODE: OptionSpec = OptionSpec {
    name: "scan.bounded.mode",
    help: "source: unbounded (default), or latest-offset to stop at the partitions' ends when the job first starts",
};
pub(super) const MAX_RECORDS_PER_SECOND: OptionSpec = OptionSpec {
    name: "scan.max-records-per-second",
    help: "source: read at most this many records per second (e.g. 10K), to catch up on a backlog gently",
};
pub(super) const IDLE_TIMEOUT: OptionSpec = OptionSpec {
    name: "scan.watermark.idle-timeout",
    help: "source: a partition quiet for this long stops holding event time back, default 5s; none to wait for every partition",
};
pub(super) const TIMESTAMP_COLUMN: OptionSpec = OptionSpec {
    name: "timestamp.column",
    help: "source: a declared column filled from the record timestamp instead of the value",
};
pub(super) const ON_MALFORMED: OptionSpec = OptionSpec {
    name: "on_malformed",
    help: "source: fail (default) or skip, counting skipped records",
};
pub(super) const SINK_DELIVERY: OptionSpec = OptionSpec {
    name: "sink.delivery",
    help: "sink: exactly-once (default; needs broker transactions) or at-least-once",
};
pub(super) const PROPERTIES: OptionSpec = OptionSpec {
    name: "properties.*",
    help: "any librdkafka property, e.g. 'properties.security.protocol' = 'sasl_ssl'; secrets as 'properties.sasl.password.env' = 'VARIABLE'",
};

const OPTIONS: &[OptionSpec] = &[
    BOOTSTRAP_SERVERS,
    OptionSpec {
        name: "topic",
        help: "the topic (required; it must exist)",
    },
    OptionSpec {
        name: "format",
        help: "json (default), csv, raw (the value as the only VARCHAR/BYTEA column), debezium-json (change events: a source reads them as a changelog, a sink writes one as them), avro (one Avro datum per record), or avro-confluent (Confluent's wire format, with a schema registry)",
    },
    OptionSpec {
        name: "avro.schema",
        help: "with 'format' = 'avro': the writer schema (Avro JSON) of the records; default: derived from the columns",
    },
    OptionSpec {
        name: "avro-confluent.url",
        help: "with 'format' = 'avro-confluent' (required): the schema registry's URL, e.g. http://registry:8081",
    },
    OptionSpec {
        name: "avro-confluent.subject",
        help: "sink with 'format' = 'avro-confluent': the subject its schema is registered under; default <topic>-value",
    },
    OptionSpec {
        name: "avro-confluent.schema",
        help: "sink with 'format' = 'avro-confluent': the schema (Avro JSON) to register and write; default: derived from the columns",
    },
    GROUP_ID,
    STARTUP_MODE,
    STARTUP_TIMESTAMP,
    BOUNDED_MODE,
    MAX_RECORDS_PER_SECOND,
    IDLE_TIMEOUT,
    TIMESTAMP_COLUMN,
    ON_MALFORMED,
    SINK_DELIVERY,
    OptionSpec {
        name: "key.field",
        help: "sink: the column whose text is the record key (or declare PRIMARY KEY (…): a JSON object of several columns, and the topic takes updating results as an upsert log)",
    },
    PROPERTIES,
    OptionSpec {
        name: "debezium-json.schema-include",
        help: "source with 'format' = 'debezium-json': true when each event is wrapped as {\"schema\": …, \"payload\": …} (Kafka Connect's JSON converter with schemas.enable); default false",
    },
];

fn client(table: &TableDef) -> Result<KafkaClient> {
    let mut client = KafkaClient::new(required(table, "bootstrap.servers", "127.0.0.1:9092")?);
    for (key, value) in &table.options {
        let Some(property) = key.strip_prefix("properties.") else {
            continue;
        };
        // `properties.sasl.password.env` = 'VAR': the value comes from the environment.
        if let Some(secret) = property.strip_suffix(".env") {
            let value = secret_from_env(table, key)?.unwrap_or_default();
            client.properties.push((secret.to_string(), value));
        } else if property.contains("password") || property.contains("secret") {
            return Err(SqlError::connector(
                &table.name,
                format!("'{key}' would keep a secret in the pipeline file; name an environment variable instead: '{key}.env' = 'VARIABLE'"),
            ));
        } else {
            client
                .properties
                .push((property.to_string(), value.clone()));
        }
    }
    Ok(client)
}

fn format(table: &TableDef) -> Result<ValueFormat> {
    let name = choice_option(
        table,
        "format",
        &[
            "json",
            "csv",
            "raw",
            "debezium-json",
            "avro",
            "avro-confluent",
        ],
        "json",
    )?;
    ValueFormat::parse(name).map_err(|e| SqlError::connector(&table.name, e.to_string()))
}

/// The Avro options of `format`; an Avro option beside another format is an error.
fn avro_options(table: &TableDef, format: ValueFormat, topic: &str) -> Result<AvroOptions> {
    let wanted: &[&str] = match format {
        ValueFormat::Avro => &["avro.schema"],
        ValueFormat::AvroConfluent => &[
            "avro-confluent.url",
            "avro-confluent.subject",
            "avro-confluent.schema",
        ],
        _ => &[],
    };
    for key in table.options.keys() {
        let avro = key.starts_with("avro.") || key.starts_with("avro-confluent.");
        if avro && !wanted.contains(&key.as_str()) {
            return Err(SqlError::connector(
                &table.name,
                format!("'{key}' does not apply to this 'format'; the Avro options are 'avro.schema' (format avro) and 'avro-confluent.url', '.subject', '.schema' (format avro-confluent)"),
            ));
        }
    }
    let schema = table
        .options
        .get("avro.schema")
        .or_else(|| table.options.get("avro-confluent.schema"))
        .cloned();
    let registry_url = match format {
        ValueFormat::AvroConfluent => {
            Some(required(table, "avro-confluent.url", "http://127.0.0.1:8081")?.to_string())
        }
        _ => None,
    };
    Ok(AvroOptions {
        registry_url,
        schema,
        subject: table
            .options
            .get("avro-confluent.subject")
            .cloned()
            .unwrap_or_else(|| format!("{topic}-value")),
    })
}

/// Options that only a source or only a sink takes, refused on the other.
fn refuse(table: &TableDef, keys: &[&str], role: &str) -> Result<()> {
    match keys.iter().find(|k| table.options.contains_key(**k)) {
        Some(k) => Err(SqlError::connector(
            &table.name,
            format!("'{k}' does not apply to a Kafka {role}"),
        )),
        None => Ok(()),
    }
}

impl Connector for KafkaConnector {
    fn name(&self) -> &'static str {
        "kafka"
    }

    fn options(&self) -> &'static [OptionSpec] {
        OPTIONS
    }

    fn source(&self, table: &TableDef, _: &RunSettings) -> Result<SourceTable> {
        refuse(table, &["sink.delivery", "key.field"], "source")?;
        kafka_source(table, None)
    }

    fn sink(&self, table: &TableDef, pipeline: &str) -> Result<SinkTable> {
        refuse(
            table,
            &[
                "group.id",
                "scan.startup.mode",
                "scan.startup.timestamp-millis",
                "scan.bounded.mode",
                "scan.max-records-per-second",
                "scan.watermark.idle-timeout",
                "timestamp.column",
                "on_malformed",
                "debezium-json.schema-include",
            ],
            "sink",
        )?;
        kafka_sink(table, pipeline, false)
    }
}

/// The source of a `kafka` table, or (with the key columns) of an `upsert-kafka` one,
/// whose values are JSON.
pub(super) fn kafka_source(
    table: &TableDef,
    upsert_key: Option<Vec<String>>,
) -> Result<SourceTable> {
    let client = client(table)?;
    let topic = required(table, "topic", "bids")?;
    let mut format = match upsert_key {
        Some(_) => ValueFormat::Json,
        None => format(table)?,
    };
    if choice_option(
        table,
        "debezium-json.schema-include",
        &["true", "false"],
        "false",
    )? == "true"
    {
        if format != ValueFormat::DebeziumJson {
            return Err(SqlError::connector(
                &table.name,
                "'debezium-json.schema-include' applies to 'format' = 'debezium-json'",
            ));
        }
        format = ValueFormat::DebeziumJsonWithSchema;
    }
    if table.columns.is_empty() {
        return Err(SqlError::connector(
                &table.name,
                "a Kafka source needs its columns declared: CREATE TABLE name (col TYPE, …, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (…)",
            ));
    }
    let watermark = required_watermark(table, "a Kafka source")?;
    let timestamp = match table.options.get("timestamp.column") {
        Some(column) if *column == watermark.column => KafkaTimestamp::Record(column.clone()),
        Some(column) => {
            return Err(SqlError::connector(
                &table.name,
                format!(
                    "'timestamp.column' = '{column}' must be the WATERMARK column `{}`",
                    watermark.column
                ),
            ))
        }
        None => KafkaTimestamp::Field(watermark.column.clone()),
    };
    let startup = match choice_option(
        table,
        "scan.startup.mode",
        &["earliest", "latest", "group-offsets", "timestamp"],
        "earliest",
    )? {
        "latest" => KafkaStartup::Latest,
        "group-offsets" => KafkaStartup::GroupOffsets,
        "timestamp" => {
            let text = required(table, "scan.startup.timestamp-millis", "1700000000000")?;
            KafkaStartup::Timestamp(text.trim().parse().map_err(|_| {
                SqlError::connector(
                    &table.name,
                    format!("'scan.startup.timestamp-millis' = '{text}' is not epoch milliseconds"),
                )
            })?)
        }
        _ => KafkaStartup::Earliest,
    };
    let bounded = choice_option(
        table,
        "scan.bounded.mode",
        &["unbounded", "latest-offset"],
        "unbounded",
    )? == "latest-offset";
    let on_malformed = malformed_option(table)?;
    let idle_timeout = duration_option(
        table,
        "scan.watermark.idle-timeout",
        Some(DEFAULT_IDLE_TIMEOUT),
    )?;
    let factory = KafkaSourceFactory::new(KafkaSourceConfig {
        client,
        topic: topic.to_string(),
        group_id: table.options.get("group.id").cloned(),
        avro: avro_options(table, format, topic)?,
        format,
        schema: Arc::new(Schema::new(table.columns.clone())),
        timestamp,
        startup,
        bounded,
        on_malformed,
        batch_rows: 8192,
        max_records_per_second: count_option(table, "scan.max-records-per-second")?,
        partition_idle_timeout: idle_timeout,
        upsert_key: upsert_key.clone(),
    })
    .map_err(|e| SqlError::connector(&table.name, e.to_string()))?;
    Ok(SourceTable {
        factory: Arc::new(factory),
        event_time: watermark.column,
        watermarks: WatermarkStrategy {
            max_out_of_orderness: watermark.delay,
            // A subtask whose partitions are quiet must not hold the others back.
            idle_timeout,
        },
        expected_rows: None,
        sql_names: None,
        upsert_key,
    })
}

/// The sink of a `kafka` table, or of an `upsert-kafka` one (`upsert`: JSON values,
/// keys a JSON object of the primary key's columns).
pub(super) fn kafka_sink(table: &TableDef, pipeline: &str, upsert: bool) -> Result<SinkTable> {
    let client = client(table)?;
    let topic = required(table, "topic", "results")?;
    let mut config = KafkaSinkConfig::new(client, topic, format!("{pipeline}/{}", table.name));
    config.format = match upsert {
        true => ValueFormat::Json,
        false => format(table)?,
    };
    config.json_keys = upsert;
    config.avro = avro_options(table, config.format, topic)?;
    // JSON values can hold a window `{start, end}`; CSV and raw cannot.
    let nested = matches!(config.format, ValueFormat::Json | ValueFormat::DebeziumJson);
    let debezium = config.format == ValueFormat::DebeziumJson;
    // A declared key makes the topic an upsert log: each updated row is a record
    // keyed by it, and a compacted topic keeps the last one per key.
    config.key_columns = match table.options.get("key.field") {
        Some(_) if !table.primary_key.is_empty() => return Err(SqlError::connector(
            &table.name,
            "declare PRIMARY KEY (…) or 'key.field', not both: the primary key is the record key",
        )),
        Some(column) => vec![column.clone()],
        None => table.primary_key.clone(),
    };
    let updates = if table.primary_key.is_empty() {
        Err(format!(
                "`{}` appends records to a Kafka topic; declare PRIMARY KEY (…) on it to write the updates as records keyed by it (an upsert log, for a compacted topic)",
                table.name
            ))
    } else {
        Ok(())
    };
    config.delivery = match choice_option(
        table,
        "sink.delivery",
        &["exactly-once", "at-least-once"],
        "exactly-once",
    )? {
        "at-least-once" => KafkaDelivery::AtLeastOnce,
        _ => KafkaDelivery::ExactlyOnce,
    };
    Ok(SinkTable {
        factory: Arc::new(KafkaSinkFactory::new(config)),
        // A withdrawn row is a tombstone of its key, or a Debezium delete event.
        retractions: if debezium { Ok(()) } else { updates.clone() },
        updates,
        nested,
        needs_withdrawals: debezium,
    })
}
