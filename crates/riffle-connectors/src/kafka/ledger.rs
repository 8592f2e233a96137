//! Which epochs a Kafka sink committed, kept by Kafka itself: every transaction also
//! commits, for a consumer group of the sink's own (`riffle-ledger-<label>`), the epoch
//! as the "offset" of the topic's partition 0. Kafka makes that offset visible only if
//! the transaction commits, so a later process can tell whether an epoch's
//! transaction committed before the one that wrote it died.

use super::{kafka_name, KafkaClient, REQUEST_TIMEOUT};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerGroupMetadata};
use rdkafka::{Offset, TopicPartitionList};
use riffle_core::{Epoch, Result};

/// The ledger of one sink.
pub(super) struct Ledger {
    consumer: BaseConsumer,
    topic: String,
    client: KafkaClient,
}

impl Ledger {
    /// Opens the ledger of the sink labelled `label` writing `topic`.
    pub(super) fn open(client: &KafkaClient, topic: &str, label: &str) -> Result<Self> {
        let group = kafka_name(&format!("riffle-ledger-{label}"));
        let consumer: BaseConsumer = client
            .config()
            .set("group.id", &group)
            .set("enable.auto.commit", "false")
            .create()
            .map_err(|e| client.error(format!("cannot create the ledger consumer: {e}")))?;
        Ok(Self {
            consumer,
            topic: topic.to_string(),
            client: client.clone(),
        })
    }

    /// The group identity a transaction commits the ledger offset for.
    pub(super) fn group(&self) -> Result<ConsumerGroupMetadata> {
        self.consumer.group_metadata().ok_or_else(|| {
            self.client
                .error("the ledger consumer has no group metadata")
        })
    }

    /// The ledger entry a transaction of `epoch` commits.
    pub(super) fn entry(&self, epoch: Epoch) -> Result<TopicPartitionList> {
        let mut list = TopicPartitionList::new();
        list.add_partition_offset(&self.topic, 0, Offset::Offset(epoch.0 as i64))
            .map_err(|e| self.client.error(e))?;
        Ok(list)
    }

    /// The newest epoch a committed transaction recorded, if any.
    pub(super) fn committed(&self) -> Result<Option<Epoch>> {
        let mut list = TopicPartitionList::new();
        list.add_partition(&self.topic, 0);
        let found = self
            .consumer
            .committed_offsets(list, REQUEST_TIMEOUT)
            .map_err(|e| {
                self.client
                    .error(format!("cannot read the sink's commit ledger: {e}"))
            })?;
        Ok(found
            .find_partition(&self.topic, 0)
            .and_then(|e| match e.offset() {
                Offset::Offset(o) if o >= 0 => Some(Epoch(o as u64)),
                _ => None,
            }))
    }
}
