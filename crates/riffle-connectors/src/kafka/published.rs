//! Whether a Kafka topic still holds what committed epochs published
//! (docs/engine.md, "Output a sink lost").
//!
//! An epoch's committable names its transaction and, for each partition it wrote, the
//! offset of the newest record delivered there. Read back, that record carries the
//! transaction's name in its `riffle.transaction` header; in a topic deleted and made
//! anew its offset is past the end or holds another record. A topic only grows, so the
//! newest recorded record of a partition vouches for every older one of the same topic:
//! one read per partition, whatever the number of epochs.
//!
//! What a topic's own policy removes is not a loss riffle can tell, and a check that
//! refuses a healthy restart is worse than none, so these count as held: an offset
//! below the partition's first (retention), and no record at the offset while later
//! ones exist or none do (compaction keeps only a key's newest record and drops old
//! tombstones; an offset may be a transaction marker). Only a record *at* the offset
//! that another transaction wrote, an offset past the end, or a topic or partition that
//! does not exist are a loss. A metadata answer with any other error is an error (a
//! broker restarting), never a loss.
//!
//! The sink's ledger group is not asked: on the test broker a deleted topic's group
//! offsets survive its deletion, and a new process read no offset for committed epochs.

use super::errors::{poll_error, PollError};
use super::{KafkaClient, REQUEST_TIMEOUT};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};
use riffle_core::{Committable, Result};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// What a committable says of its transaction's records.
#[derive(Deserialize)]
struct Payload {
    transaction: String,
    /// (partition, offset) of the newest record delivered to each partition; absent
    /// in committables written before riffle recorded it (those cannot be checked).
    #[serde(default)]
    newest_records: Vec<(i32, i64)>,
}

/// A record a committable vouches for: its transaction's newest on a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Vouched {
    offset: i64,
    transaction: String,
}

/// What the topic holds where a vouched record should be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum AtOffset {
    /// The topic or the partition does not exist.
    NoPartition,
    /// The partition's offsets run from `low` (inclusive) to `high` (exclusive) and
    /// the first record at or after the offset (if inside them, and if there is one)
    /// is `record`: its offset and its `riffle.transaction` header.
    Partition {
        low: i64,
        high: i64,
        record: Option<(i64, Option<String>)>,
    },
}

/// Whether the topic holds the vouched record `offset` of `transaction`, given what is
/// there (see the module's text for what a topic's policy may remove).
pub(super) fn holds(offset: i64, transaction: &str, found: &AtOffset) -> bool {
    match found {
        AtOffset::NoPartition => false,
        AtOffset::Partition { low, .. } if offset < *low => true,
        AtOffset::Partition { high, .. } if offset >= *high => false,
        AtOffset::Partition { record, .. } => match record {
            Some((at, name)) if *at == offset => name.as_deref() == Some(transaction),
            // Compacted away, a transaction marker, or retention that moved on.
            _ => true,
        },
    }
}

/// Per partition, the newest record any of `payloads` vouches for.
fn newest_vouched(payloads: &[Option<Payload>]) -> BTreeMap<i32, Vouched> {
    let mut newest: BTreeMap<i32, Vouched> = BTreeMap::new();
    for payload in payloads.iter().flatten() {
        for &(partition, offset) in &payload.newest_records {
            let slot = newest.entry(partition).or_insert_with(|| Vouched {
                offset: -1,
                transaction: String::new(),
            });
            if offset > slot.offset {
                *slot = Vouched {
                    offset,
                    transaction: payload.transaction.clone(),
                };
            }
        }
    }
    newest
}

/// Whether `topic` holds, whole, what each of `committables` published, in their
/// order: a committable that wrote a partition whose newest vouched record is gone
/// is not held.
pub(super) fn holds_published(
    client: &KafkaClient,
    topic: &str,
    committables: &[&Committable],
) -> Result<Vec<bool>> {
    // Unreadable payloads (none of riffle's) vouch for nothing and count as held.
    let payloads: Vec<Option<Payload>> = (committables.iter())
        .map(|c| serde_json::from_str(&c.payload).ok())
        .collect();
    let newest = newest_vouched(&payloads);
    if newest.is_empty() {
        return Ok(vec![true; committables.len()]);
    }
    let reader = TopicReader::open(client, topic)?;
    let partitions = reader.partitions()?;
    let mut lost_partitions = Vec::new();
    for (partition, vouched) in &newest {
        let found = reader.at_offset(&partitions, *partition, vouched.offset)?;
        if !holds(vouched.offset, &vouched.transaction, &found) {
            lost_partitions.push(*partition);
        }
    }
    Ok(payloads
        .iter()
        .map(|p| {
            p.as_ref().is_none_or(|p| {
                p.newest_records
                    .iter()
                    .all(|(partition, _)| !lost_partitions.contains(partition))
            })
        })
        .collect())
}

/// Reads single records of one topic, committed or not, without a group.
struct TopicReader {
    consumer: BaseConsumer,
    topic: String,
    client: KafkaClient,
}

impl TopicReader {
    fn open(client: &KafkaClient, topic: &str) -> Result<Self> {
        let consumer: BaseConsumer = client
            .config()
            .set("group.id", "riffle-recovery-check")
            .set("enable.auto.commit", "false")
            .set("isolation.level", "read_uncommitted")
            .set("fetch.wait.max.ms", "10")
            // The end of the partition, or an offset retention moved past, is an
            // answer here, not a reason to wait or to jump elsewhere.
            .set("enable.partition.eof", "true")
            .set("auto.offset.reset", "error")
            .create()
            .map_err(|e| client.error(format!("cannot create a consumer: {e}")))?;
        Ok(Self {
            consumer,
            topic: topic.to_string(),
            client: client.clone(),
        })
    }

    /// The topic's partitions (none if it does not exist). Any other error in the
    /// answer (a leader not available while brokers restart, no permission to
    /// describe the topic) is an error, not an empty topic.
    fn partitions(&self) -> Result<Vec<i32>> {
        let metadata = self
            .consumer
            .fetch_metadata(Some(&self.topic), REQUEST_TIMEOUT)
            .map_err(|e| self.client.error(format!("reading metadata: {e}")))?;
        let mut partitions = Vec::new();
        for topic in metadata.topics().iter().filter(|t| t.name() == self.topic) {
            match topic.error().map(RDKafkaErrorCode::from) {
                None => partitions.extend(topic.partitions().iter().map(|p| p.id())),
                Some(RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::UnknownTopic) => {}
                Some(code) => {
                    return Err(self.client.error(format!(
                        "reading the metadata of topic `{}` to check what earlier epochs published: {code} (recovery needs to describe and read the sink's topic)",
                        self.topic
                    )))
                }
            }
        }
        Ok(partitions)
    }

    fn at_offset(&self, partitions: &[i32], partition: i32, offset: i64) -> Result<AtOffset> {
        if !partitions.contains(&partition) {
            return Ok(AtOffset::NoPartition);
        }
        let (low, high) = self
            .consumer
            .fetch_watermarks(&self.topic, partition, REQUEST_TIMEOUT)
            .map_err(|e| {
                self.client.error(format!(
                    "reading the offsets of topic `{}` partition {partition}: {e}",
                    self.topic
                ))
            })?;
        let record = if (low..high).contains(&offset) {
            self.read(partition, offset)?
        } else {
            None
        };
        Ok(AtOffset::Partition { low, high, record })
    }

    /// The first record at or after `offset`: its offset and transaction header; `None`
    /// when the partition ends first or retention moved past the offset meanwhile.
    fn read(&self, partition: i32, offset: i64) -> Result<Option<(i64, Option<String>)>> {
        let mut list = TopicPartitionList::new();
        list.add_partition_offset(&self.topic, partition, Offset::Offset(offset))
            .map_err(|e| self.client.error(e))?;
        self.consumer
            .assign(&list)
            .map_err(|e| self.client.error(e))?;
        let deadline = Instant::now() + REQUEST_TIMEOUT;
        while Instant::now() < deadline {
            let Some(polled) = self.consumer.poll(Duration::from_millis(100)) else {
                continue;
            };
            let message = match polled {
                Ok(message) => message,
                Err(KafkaError::PartitionEOF(p)) if p == partition => return Ok(None),
                Err(e) if poll_error(e.rdkafka_error_code()) == PollError::OffsetGone => {
                    return Ok(None)
                }
                Err(e) => {
                    return Err(self.client.error(format!(
                        "reading topic `{}` partition {partition} to check what earlier epochs published: {e} (recovery needs to read the sink's topic)",
                        self.topic
                    )))
                }
            };
            if message.partition() != partition || message.offset() < offset {
                continue;
            }
            let transaction = message.headers().and_then(|headers| {
                headers
                    .iter()
                    .find(|h| h.key == "riffle.transaction")
                    .and_then(|h| h.value)
                    .map(|v| String::from_utf8_lossy(v).into_owned())
            });
            return Ok(Some((message.offset(), transaction)));
        }
        Err(self.client.error(format!(
            "no record of topic `{}` partition {partition} at offset {offset} arrived within {}s, though the partition's offsets include it",
            self.topic,
            REQUEST_TIMEOUT.as_secs()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::{holds, newest_vouched, AtOffset, Payload};

    fn at(low: i64, high: i64, record: Option<(i64, &str)>) -> AtOffset {
        AtOffset::Partition {
            low,
            high,
            record: record.map(|(o, t)| (o, Some(t.to_string()))),
        }
    }

    #[test]
    fn the_transactions_record_at_its_offset_is_held() {
        assert!(holds(7, "t/1", &at(0, 12, Some((7, "t/1")))));
    }

    #[test]
    fn a_missing_topic_or_partition_holds_nothing() {
        assert!(!holds(7, "t/1", &AtOffset::NoPartition));
    }

    #[test]
    fn an_offset_past_the_end_is_lost() {
        // A topic made anew starts its offsets again.
        assert!(!holds(7, "t/1", &at(0, 3, None)));
        assert!(!holds(7, "t/1", &at(0, 7, None)));
    }

    #[test]
    fn another_record_at_the_offset_is_lost() {
        assert!(!holds(7, "t/1", &at(0, 12, Some((7, "other/1")))));
        let headerless = AtOffset::Partition {
            low: 0,
            high: 12,
            record: Some((7, None)),
        };
        assert!(!holds(7, "t/1", &headerless));
    }

    #[test]
    fn a_record_retention_removed_is_held() {
        assert!(holds(7, "t/1", &at(9, 12, None)));
    }

    #[test]
    fn a_record_compaction_removed_is_held() {
        // A later record of the key, or a tombstone past its retention, took it; what
        // follows is another record, or nothing but a transaction marker.
        assert!(holds(7, "t/1", &at(0, 12, Some((9, "other/1")))));
        assert!(holds(7, "t/1", &at(0, 12, None)));
    }

    #[test]
    fn each_partition_is_vouched_for_by_its_newest_record() {
        let payload = |text: &str| serde_json::from_str::<Payload>(text).ok();
        let a = payload(r#"{"transaction":"a","newest_records":[[0,5],[1,2]]}"#);
        let b = payload(r#"{"transaction":"b","newest_records":[[0,9]]}"#);
        let old = payload(r#"{"transaction":"c"}"#);
        let newest = newest_vouched(&[a, b, old, None]);
        assert_eq!(newest.len(), 2);
        assert_eq!(
            (newest[&0].offset, newest[&0].transaction.as_str()),
            (9, "b")
        );
        assert_eq!(
            (newest[&1].offset, newest[&1].transaction.as_str()),
            (2, "a")
        );
    }
}
