//! The Kafka sink.
//!
//! Exactly-once: the sink's subtasks share transactional producers; the k-th epoch of
//! a run is one Kafka transaction, written by every subtask. A subtask flushes at its
//! barrier and moves on to the next transaction (another producer from a small pool,
//! transactional ids `riffle-<label>-<n>`); the coordinator commits the transaction
//! once the epoch's manifest is PREPARED, together with the sink's ledger entry
//! (see [`super::ledger`]). A Kafka transaction dies with the process that opened it,
//! so after a crash recovery asks the ledger: committed epochs roll forward, others are
//! replayed from the checkpoint before them (the coordinator commits Kafka sinks
//! before any other sink, so none has published such an epoch).
//!
//! Every record of a transaction carries the header `riffle.transaction` naming it (the
//! same name is in the epoch's committable, so in the checkpoint manifests): a reader
//! can tell which transaction wrote a record, and tests can check committed output on
//! brokers that do not hide aborted records. The committable also records, per
//! partition, the offset of the transaction's newest record there, by which recovery
//! finds out whether the topic still holds the epoch (see [`super::published`]).
//!
//! At-least-once: each subtask has a plain producer and flushes at every barrier.

use super::format::{encode_rows, ValueFormat};
use super::producer::{send, DeliveryContext, KafkaProducer, FLUSH_TIMEOUT};
use super::transactions::Transactions;
use super::{kafka_name, KafkaClient};
use crate::sinks::{without_row_kind, without_timestamp};
use rdkafka::producer::Producer;
use riffle_core::arrow::util::display::array_value_to_string;
use riffle_core::{
    row_kinds, Committable, Committer, Epoch, Error, OutputPlace, RecordBatch, Result, Sink,
    SinkContext, SinkFactory, SinkSummary, StagedOutput, StreamSchema, Unpublished,
};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How the sink delivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KafkaDelivery {
    /// Transactions committed with checkpoints (the broker must support them).
    ExactlyOnce,
    /// Flushed at every checkpoint; a restart may write some records again.
    AtLeastOnce,
}

/// Where and how a Kafka sink writes.
#[derive(Debug, Clone)]
pub struct KafkaSinkConfig {
    /// The brokers.
    pub client: KafkaClient,
    /// The topic (must exist).
    pub topic: String,
    /// Value layout.
    pub format: ValueFormat,
    /// With an Avro format: the registry and subject, or the schema.
    pub avro: super::AvroOptions,
    /// The columns whose values make the record key: one column's text, or a JSON
    /// object of several (records of a key stay in order on one partition, and a
    /// compacted topic keeps the last per key); empty: no key.
    pub key_columns: Vec<String>,
    /// Keys are JSON objects even of one column (Flink's `upsert-kafka` with
    /// `'key.format' = 'json'`).
    pub json_keys: bool,
    /// Exactly-once or at-least-once.
    pub delivery: KafkaDelivery,
    /// Names the transactional ids and the ledger: `<pipeline>/<table>`.
    pub label: String,
    /// The broker aborts a transaction left open this long (a crashed process's).
    pub transaction_timeout: Duration,
}

impl KafkaSinkConfig {
    /// An exactly-once JSON sink into `topic`.
    pub fn new(client: KafkaClient, topic: impl Into<String>, label: impl Into<String>) -> Self {
        Self {
            client,
            topic: topic.into(),
            format: ValueFormat::Json,
            avro: super::AvroOptions::default(),
            key_columns: Vec::new(),
            json_keys: false,
            delivery: KafkaDelivery::ExactlyOnce,
            label: label.into(),
            transaction_timeout: Duration::from_secs(60),
        }
    }

    pub(super) fn transactional_id(&self, n: usize) -> String {
        format!("riffle-{}-{n}", kafka_name(&self.label))
    }
}

/// Builds Kafka sink subtasks; owns the transactions of an exactly-once sink.
pub struct KafkaSinkFactory {
    config: Arc<KafkaSinkConfig>,
    transactions: Mutex<Option<Arc<Transactions>>>,
}

impl KafkaSinkFactory {
    /// A factory for `config`.
    pub fn new(config: KafkaSinkConfig) -> Self {
        Self {
            config: Arc::new(config),
            transactions: Mutex::new(None),
        }
    }

    fn exactly_once(&self) -> bool {
        self.config.delivery == KafkaDelivery::ExactlyOnce
    }

    /// The shared transactions, opened on first need (which fences every producer of
    /// an earlier process with the same ids).
    fn transactions(&self) -> Result<Arc<Transactions>> {
        let mut slot = self
            .transactions
            .lock()
            .map_err(|_| self.config.client.error("lock poisoned"))?;
        if let Some(t) = slot.as_ref() {
            return Ok(t.clone());
        }
        let t = Arc::new(Transactions::open(self.config.clone())?);
        *slot = Some(t.clone());
        Ok(t)
    }
}

impl SinkFactory for KafkaSinkFactory {
    fn describe(&self) -> String {
        format!(
            "kafka({}, {}, {})",
            self.config.topic,
            self.config.client.bootstrap_servers,
            match self.config.delivery {
                KafkaDelivery::ExactlyOnce => "exactly-once",
                KafkaDelivery::AtLeastOnce => "at-least-once",
            }
        )
    }

    // One place per bootstrap server: two spellings of one cluster's server list
    // share at least one of them.
    fn output_places(&self) -> Vec<OutputPlace> {
        self.config
            .client
            .bootstrap_servers
            .split(',')
            .map(|server| OutputPlace::Named {
                system: format!("kafka {}", server.trim().to_ascii_lowercase()),
                name: self.config.topic.clone(),
            })
            .collect()
    }

    fn commit_outlives_process(&self) -> bool {
        !self.exactly_once()
    }

    fn create(&self, schema: &StreamSchema, ctx: &SinkContext) -> Result<Box<dyn Sink>> {
        if schema.row_kind_index().is_some()
            && self.config.key_columns.is_empty()
            && !self.config.format.is_change_events()
        {
            // The planner refuses this: a tombstone needs the key it deletes.
            return Err(Error::config(
                "key",
                "a changelog (rows that withdraw earlier rows) needs a keyed topic: declare PRIMARY KEY",
            ));
        }
        for key in &self.config.key_columns {
            schema
                .schema
                .index_of(key)
                .map_err(|_| Error::config("key", format!("`{key}` is not an output column")))?;
        }
        let output = if ctx.exactly_once && self.exactly_once() {
            Output::Transactional(self.transactions()?)
        } else {
            let producer: KafkaProducer = self
                .config
                .client
                .config()
                .create_with_context(DeliveryContext::default())
                .map_err(|e| {
                    self.config
                        .client
                        .error(format!("cannot create a producer: {e}"))
                })?;
            Output::Plain(producer)
        };
        Ok(Box::new(KafkaSink {
            avro: self
                .config
                .format
                .is_avro()
                .then(|| super::avro::AvroEncoder::new(self.config.avro.clone())),
            config: self.config.clone(),
            output,
            transaction: 0,
            summary: SinkSummary::default(),
        }))
    }

    fn committer(&self) -> Option<&dyn Committer> {
        self.exactly_once().then_some(self as &dyn Committer)
    }
}

impl Committer for KafkaSinkFactory {
    // Each committable names records of its transaction, which the topic must still
    // hold (see `super::published`).
    fn holds_published(&self, committables: &[&Committable]) -> Result<Vec<bool>> {
        super::published::holds_published(&self.config.client, &self.config.topic, committables)
    }

    fn unpublish(&self, after: Epoch) -> Result<Unpublished> {
        Ok(Unpublished::Cannot(format!(
            "`{}` cannot take back what epochs after {after} published",
            self.describe()
        )))
    }

    fn commit(&self, committable: &Committable) -> Result<()> {
        let transactions = self.transactions()?;
        if transactions.commit_through(committable.epoch)? {
            return Ok(());
        }
        match transactions.ledger.committed()? {
            Some(done) if done >= committable.epoch => Ok(()),
            _ => Err(self.config.client.error(format!(
                "the transaction of epoch {} of topic `{}` is gone without having committed (the process that wrote it stopped); recovery replays the epoch",
                committable.epoch, self.config.topic
            ))),
        }
    }

    fn staged_output(&self, committable: &Committable) -> Result<StagedOutput> {
        let transactions = self.transactions()?;
        if transactions.holds(committable.epoch)? {
            return Ok(StagedOutput::Staged);
        }
        let committed = transactions
            .ledger
            .committed()?
            .is_some_and(|done| done >= committable.epoch);
        Ok(if committed {
            StagedOutput::Published
        } else {
            StagedOutput::Lost
        })
    }

    // The ledger knows whether any epoch committed, not how many records: 1 or 0.
    // Read with a consumer of its own, since opening the transactions would fence the
    // producers of a run that may still be going.
    fn published(&self) -> Result<usize> {
        if !self.exactly_once() {
            return Ok(0);
        }
        let ledger = super::ledger::Ledger::open(
            &self.config.client,
            &self.config.topic,
            &self.config.label,
        )?;
        Ok(usize::from(ledger.committed()?.is_some()))
    }

    // A newer run's producers fence these ids themselves (`init_transactions`).
    fn abort_staged(&self, _generation: u64) -> Result<usize> {
        if !self.exactly_once() {
            return Ok(0);
        }
        self.transactions()?.abort_all()
    }
}

enum Output {
    Transactional(Arc<Transactions>),
    Plain(KafkaProducer),
}

/// One subtask.
struct KafkaSink {
    config: Arc<KafkaSinkConfig>,
    /// Avro values' encoder (it registers its schema once).
    avro: Option<super::avro::AvroEncoder>,
    output: Output,
    /// The transaction this subtask writes: how many barriers it has passed.
    transaction: u64,
    summary: SinkSummary,
}

impl KafkaSink {
    /// Waits for every record sent so far; the first failed delivery is the error.
    fn flush(&self, producer: &KafkaProducer) -> Result<()> {
        producer.flush(FLUSH_TIMEOUT).map_err(|e| {
            self.config
                .client
                .error(format!("flushing to topic `{}`: {e}", self.config.topic))
        })?;
        let failure = producer
            .context()
            .failure
            .lock()
            .map_err(|_| self.config.client.error("lock poisoned"))?
            .take();
        match failure {
            Some(e) => Err(self
                .config
                .client
                .error(format!("delivering to topic `{}`: {e}", self.config.topic))),
            None => Ok(()),
        }
    }
}

impl Sink for KafkaSink {
    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let batch = without_timestamp(batch)?;
        if batch.num_rows() == 0 {
            return Ok(());
        }
        // A withdrawn row of a changelog is a tombstone of its key (the value null), or
        // a Debezium delete event.
        let (values, kinds) = match self.config.format {
            ValueFormat::DebeziumJson | ValueFormat::DebeziumJsonWithSchema => {
                (encode_rows(self.config.format, &batch)?, None)
            }
            format => {
                let rows = without_row_kind(&batch)?;
                let values = match &mut self.avro {
                    Some(avro) => avro.encode(&rows)?,
                    None => encode_rows(format, &rows)?,
                };
                (values, row_kinds(&batch)?)
            }
        };
        let keys = record_keys(&self.config.key_columns, self.config.json_keys, &batch)?;
        let transactional;
        let (producer, name): (&KafkaProducer, Option<&str>) = match &self.output {
            Output::Transactional(t) => {
                transactional = t.producer_for(self.transaction)?;
                (&transactional.0, Some(transactional.1.as_str()))
            }
            Output::Plain(p) => (p, None),
        };
        for (i, value) in values.iter().enumerate() {
            let key = keys.as_ref().map(|k| k[i].as_slice());
            let withdrawn = kinds.as_ref().is_some_and(|k| k[i].is_retraction());
            let value = (!withdrawn).then_some(value.as_slice());
            send(producer, &self.config, key, value, name)?;
        }
        producer.poll(Duration::ZERO);
        self.summary.rows += values.len() as u64;
        Ok(())
    }

    fn pre_commit(&mut self, epoch: Epoch) -> Result<Option<String>> {
        match &self.output {
            Output::Plain(p) => {
                self.flush(p)?;
                Ok(None)
            }
            Output::Transactional(t) => {
                let prepared = t.prepare(self.transaction, epoch)?;
                self.transaction += 1;
                match prepared {
                    Some((producer, name)) => {
                        self.flush(&producer)?;
                        // Records of this transaction recovery can look for later
                        // (docs/engine.md, "Output a sink lost").
                        let newest: Vec<(i32, i64)> =
                            producer.context().newest().into_iter().collect();
                        let payload = serde_json::json!({
                            "topic": self.config.topic,
                            "epoch": epoch.0,
                            "transaction": name,
                            "newest_records": newest,
                        });
                        Ok(Some(payload.to_string()))
                    }
                    None => Ok(None),
                }
            }
        }
    }

    fn finish(&mut self) -> Result<SinkSummary> {
        // Exactly-once: records after the last barrier stay in their open transaction,
        // which recovery aborts; at-least-once publishes them now.
        if let Output::Plain(p) = &self.output {
            self.flush(p)?;
        }
        Ok(std::mem::take(&mut self.summary))
    }
}

/// The record keys of `batch`'s rows: one column's text, or a JSON object of several
/// columns (or of one, with `json`); `None` without key columns.
fn record_keys(
    columns: &[String],
    json: bool,
    batch: &RecordBatch,
) -> Result<Option<Vec<Vec<u8>>>> {
    let column = |name: &String| {
        batch
            .schema()
            .index_of(name)
            .map_err(|_| Error::plan(format!("the sink's input has no column `{name}`")))
    };
    match columns {
        [] => Ok(None),
        [one] if !json => {
            let array = batch.column(column(one)?);
            let keys = (0..batch.num_rows())
                .map(|r| array_value_to_string(array, r).map(String::into_bytes))
                .collect::<std::result::Result<_, _>>()?;
            Ok(Some(keys))
        }
        several => {
            let indices = several.iter().map(column).collect::<Result<Vec<_>>>()?;
            Ok(Some(encode_rows(
                ValueFormat::Json,
                &batch.project(&indices)?,
            )?))
        }
    }
}
