//! The producer riffle's Kafka sink uses: librdkafka's blocking producer with a context
//! that keeps the first failed delivery and where each partition's newest record
//! landed, and a send that waits while the queue is full.

use super::sink::KafkaSinkConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, Message, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, ProducerContext};
use rdkafka::ClientContext;
use riffle_core::Result;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

/// Keeps the first failed delivery, which fails the flush that waits for it, and the
/// offset of the newest record delivered to each partition since the last
/// [`new_transaction`](DeliveryContext::new_transaction): a transaction's committable records
/// them, so recovery can later find its records in the topic.
#[derive(Default)]
pub(super) struct DeliveryContext {
    pub(super) failure: Mutex<Option<String>>,
    newest: Mutex<BTreeMap<i32, i64>>,
}

impl DeliveryContext {
    /// The newest delivered offset of each partition written to so far.
    pub(super) fn newest(&self) -> BTreeMap<i32, i64> {
        self.newest.lock().map(|n| n.clone()).unwrap_or_default()
    }

    /// A new transaction begins on this producer: forgets the offsets delivered so far
    /// and a failure of an earlier, aborted transaction's records (purged when it was
    /// aborted), which is not this transaction's.
    pub(super) fn new_transaction(&self) {
        if let Ok(mut newest) = self.newest.lock() {
            newest.clear();
        }
        if let Ok(mut failure) = self.failure.lock() {
            failure.take();
        }
    }
}

impl ClientContext for DeliveryContext {}

impl ProducerContext for DeliveryContext {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        match result {
            Ok(delivered) => {
                if let Ok(mut newest) = self.newest.lock() {
                    let offset = newest.entry(delivered.partition()).or_insert(-1);
                    *offset = (*offset).max(delivered.offset());
                }
            }
            Err((e, _)) => {
                if let Ok(mut failure) = self.failure.lock() {
                    failure.get_or_insert_with(|| e.to_string());
                }
            }
        }
    }
}

pub(super) type KafkaProducer = BaseProducer<DeliveryContext>;

/// How long a flush or a transaction request may take.
pub(super) const FLUSH_TIMEOUT: Duration = Duration::from_secs(60);

/// Sends one record, waiting while librdkafka's queue is full.
pub(super) fn send(
    producer: &KafkaProducer,
    config: &KafkaSinkConfig,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    transaction: Option<&str>,
) -> Result<()> {
    let mut record = BaseRecord::<[u8], [u8]>::to(&config.topic);
    if let Some(value) = value {
        record = record.payload(value);
    }
    if let Some(key) = key {
        record = record.key(key);
    }
    if let Some(name) = transaction {
        record = record.headers(OwnedHeaders::new().insert(Header {
            key: "riffle.transaction",
            value: Some(name),
        }));
    }
    loop {
        match producer.send(record) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                record = back;
                producer.poll(Duration::from_millis(10));
            }
            Err((e, _)) => {
                return Err(config
                    .client
                    .error(format!("producing to topic `{}`: {e}", config.topic)))
            }
        }
    }
}
