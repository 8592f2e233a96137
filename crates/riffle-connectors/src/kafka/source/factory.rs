//! What a Kafka source is configured with, and the factory that checks it and builds
//! the subtasks.

use super::{lag, KafkaSource};
use crate::decode::{columns_to_read, reading_note};
use crate::kafka::format::{ValueDecoder, ValueFormat};
use crate::kafka::upsert::UpsertDecoder;
use crate::kafka::KafkaClient;
use crate::MalformedRecords;
use rdkafka::consumer::BaseConsumer;
use riffle_core::arrow::datatypes::{Field, Schema, SchemaRef};
use riffle_core::{Error, OperatorContext, Result, Source, SourceFactory, StreamSchema};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

/// Where a partition without a checkpointed offset starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KafkaStartup {
    /// The oldest retained record.
    Earliest,
    /// Only records produced after the job starts.
    Latest,
    /// The consumer group's committed offset (earliest when it has none).
    GroupOffsets,
    /// The first record at or after this time (epoch milliseconds).
    Timestamp(i64),
}

/// Where a row's event time comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KafkaTimestamp {
    /// A field of the value (epoch milliseconds, a timestamp, or RFC 3339 text).
    Field(String),
    /// The record's own timestamp, stored into this declared column.
    Record(String),
}

/// What a Kafka source reads.
#[derive(Debug, Clone)]
pub struct KafkaSourceConfig {
    /// The brokers.
    pub client: KafkaClient,
    /// The topic.
    pub topic: String,
    /// Consumer group: offsets are committed to it after each COMMITTED checkpoint,
    /// and `GroupOffsets` starts from it.
    pub group_id: Option<String>,
    /// Value layout.
    pub format: ValueFormat,
    /// With an Avro format: the registry, or the schema.
    pub avro: crate::kafka::AvroOptions,
    /// The declared columns (without `_timestamp`).
    pub schema: SchemaRef,
    /// The event time.
    pub timestamp: KafkaTimestamp,
    /// Start of partitions without checkpointed offsets.
    pub startup: KafkaStartup,
    /// Stop at the offsets that are the partitions' ends when the job first starts
    /// (kept in the checkpoint, so a restart stops at the same place); otherwise read
    /// forever.
    pub bounded: bool,
    /// Fail on, or skip and count, records that do not decode.
    pub on_malformed: MalformedRecords,
    /// Rows per batch at most.
    pub batch_rows: usize,
    /// At most this many records per second over all subtasks (catching up on a
    /// backlog without flooding what lies downstream); none: as fast as possible.
    pub max_records_per_second: Option<u64>,
    /// An unbounded source's partition that delivers nothing for this long, while the
    /// others' records are all read, stops holding the watermark back until it
    /// delivers again (its later records may then be late); none: an empty partition
    /// stops event time.
    pub partition_idle_timeout: Option<Duration>,
    /// An upsert topic keyed by these columns (`kafka::upsert`): values are the keys'
    /// new rows (`+U`), tombstones delete them (`-D`). JSON values only.
    pub upsert_key: Option<Vec<String>>,
}

/// Builds Kafka source subtasks.
pub struct KafkaSourceFactory {
    config: Arc<KafkaSourceConfig>,
    output: StreamSchema,
    /// The columns decoded from the value (all but a record-timestamp column).
    value_schema: SchemaRef,
    /// The value's columns read (ascending indices into `value_schema`), if not all.
    read: Option<Vec<usize>>,
}

impl KafkaSourceFactory {
    /// Checks `config` against its declared columns.
    ///
    /// # Errors
    /// No columns, a raw format with other than one string/bytes column, an unknown
    /// event-time column.
    pub fn new(config: KafkaSourceConfig) -> Result<Self> {
        if config.schema.fields().is_empty() {
            return Err(Error::config(
                "columns",
                "a Kafka source needs its columns declared",
            ));
        }
        let (column, from_record) = match &config.timestamp {
            KafkaTimestamp::Field(c) => (c, false),
            KafkaTimestamp::Record(c) => (c, true),
        };
        let index = config.schema.index_of(column).map_err(|_| {
            Error::config("event time", format!("`{column}` is not a declared column"))
        })?;
        let value_schema = if from_record {
            let fields: Vec<Field> = config
                .schema
                .fields()
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != index)
                .map(|(_, f)| f.as_ref().clone())
                .collect();
            Arc::new(Schema::new(fields))
        } else {
            config.schema.clone()
        };
        config.format.check(&value_schema)?;
        if config.format == ValueFormat::Avro {
            // A given writer schema that is not Avro, or does not resolve to the columns,
            // is refused at planning (a registry's schemas are known only at run time).
            crate::kafka::avro::AvroDecoder::new(value_schema.clone(), &config.avro)?;
        }
        if config.upsert_key.is_some() && config.format != ValueFormat::Json {
            return Err(Error::config(
                "value.format",
                "an upsert topic's values are JSON rows: 'value.format' = 'json'",
            ));
        }
        let mut fields: Vec<Field> = config
            .schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect();
        if config.format.is_change_events() || config.upsert_key.is_some() {
            // Change events or upserts: rows with kinds.
            fields.push(riffle_core::row_kind_field());
        }
        let output = StreamSchema::with_timestamp(fields);
        Ok(Self {
            config: Arc::new(config),
            output,
            value_schema,
            read: None,
        })
    }
}

impl SourceFactory for KafkaSourceFactory {
    fn describe(&self) -> String {
        let columns = reading_note(self.read.as_deref(), self.value_schema.fields().len());
        format!(
            "kafka({}, {}{}{columns})",
            self.config.topic,
            self.config.client.bootstrap_servers,
            if self.config.bounded { ", bounded" } else { "" }
        )
    }

    /// JSON and CSV values: the used columns, the event-time one and the NOT NULL
    /// ones are decoded (a raw value is one column, read whole).
    fn reading_only(&self, used: &[usize]) -> Option<Arc<dyn SourceFactory>> {
        // An upsert's whole row is what the normalizer compares and withdraws.
        if self.config.format == ValueFormat::Raw
            || self.config.format.is_avro()
            || self.config.upsert_key.is_some()
        {
            return None;
        }
        let event_time = match &self.config.timestamp {
            KafkaTimestamp::Field(c) | KafkaTimestamp::Record(c) => c,
        };
        let declared = self.config.schema.fields();
        let wanted: Vec<&str> = used
            .iter()
            .filter_map(|&i| declared.get(i))
            .map(|f| f.name().as_str())
            .collect();
        let read = columns_to_read(self.value_schema.fields(), |_, f| {
            wanted.contains(&f.name().as_str()) || f.name() == event_time
        })?;
        Some(Arc::new(Self {
            config: self.config.clone(),
            output: self.output.clone(),
            value_schema: self.value_schema.clone(),
            read: Some(read),
        }))
    }

    fn output_schema(&self) -> &StreamSchema {
        &self.output
    }

    fn can_rescale(&self) -> bool {
        true
    }

    fn create(&self, ctx: &OperatorContext) -> Result<Box<dyn Source>> {
        let config = &self.config;
        let mut client = config.client.config();
        client
            .set(
                "group.id",
                config
                    .group_id
                    .clone()
                    .unwrap_or_else(|| format!("riffle-{}", config.topic)),
            )
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("isolation.level", "read_committed")
            // Positions are explicit: one gone from the log is an error, not a jump to
            // the end (which would skip records silently).
            .set("auto.offset.reset", "error")
            .set("enable.partition.eof", "false")
            .set("statistics.interval.ms", lag::STATISTICS_INTERVAL_MS);
        let context = lag::LagContext::new(&config.topic);
        let consumer: BaseConsumer<lag::LagContext> =
            client.create_with_context(context).map_err(|e| {
                config
                    .client
                    .error(format!("cannot create a consumer: {e}"))
            })?;
        let upsert = match &config.upsert_key {
            Some(key) => {
                let event_field = match &config.timestamp {
                    KafkaTimestamp::Field(c) => Some(c.clone()),
                    KafkaTimestamp::Record(_) => None,
                };
                Some(UpsertDecoder::new(
                    self.value_schema.clone(),
                    key,
                    event_field,
                )?)
            }
            None => None,
        };
        Ok(Box::new(KafkaSource {
            upsert,
            config: config.clone(),
            output: self.output.clone(),
            values: ValueDecoder::new(config.format, self.value_schema.clone(), self.read.clone())
                .with_avro(&config.avro)?,
            consumer,
            subtask: ctx.subtask,
            parallelism: ctx.parallelism,
            counters: ctx.counters.clone(),
            restored: BTreeMap::new(),
            partitions: BTreeMap::new(),
            started: false,
            metadata_waiting_since: None,
            snapshots: VecDeque::new(),
            throttle: None,
            last_delivery: BTreeMap::new(),
            caught_up: BTreeMap::new(),
            split_names: BTreeMap::new(),
            drained_at: None,
        }))
    }
}
