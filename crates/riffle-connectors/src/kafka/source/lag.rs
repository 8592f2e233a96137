//! How far behind the broker a Kafka source subtask is: librdkafka reports each
//! partition's offsets in its statistics (every second, delivered while the consumer
//! polls, so asking costs no request of its own); the source subtracts its position.

use rdkafka::consumer::ConsumerContext;
use rdkafka::statistics::Statistics;
use rdkafka::ClientContext;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// How often librdkafka reports statistics, in milliseconds.
pub(super) const STATISTICS_INTERVAL_MS: &str = "1000";

/// The consumer's context: the newest end offset of each partition of `topic` that
/// statistics reported.
pub(super) struct LagContext {
    topic: String,
    ends: Mutex<BTreeMap<i32, i64>>,
}

impl LagContext {
    pub(super) fn new(topic: &str) -> Self {
        Self {
            topic: topic.to_string(),
            ends: Mutex::new(BTreeMap::new()),
        }
    }

    /// The offset after the last record of `partition` a read-committed consumer can
    /// read, if statistics have reported it.
    pub(super) fn end_of(&self, partition: i32) -> Option<i64> {
        let ends = self.ends.lock().unwrap_or_else(|e| e.into_inner());
        ends.get(&partition).copied()
    }
}

/// Records `partition` has yet to read from `next` when its end is `end`.
pub(super) fn pending(end: i64, next: i64) -> u64 {
    u64::try_from(end.saturating_sub(next)).unwrap_or(0)
}

impl ClientContext for LagContext {
    fn stats(&self, statistics: Statistics) {
        let Some(topic) = statistics.topics.get(&self.topic) else {
            return;
        };
        let mut ends = self.ends.lock().unwrap_or_else(|e| e.into_inner());
        for (partition, stats) in &topic.partitions {
            // The consumer reads committed records only: the last stable offset is its
            // end (-1 while unknown; the high watermark then).
            let end = if stats.ls_offset >= 0 {
                stats.ls_offset
            } else {
                stats.hi_offset
            };
            if *partition >= 0 && end >= 0 {
                ends.insert(*partition, end);
            }
        }
    }
}

impl ConsumerContext for LagContext {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_records_are_never_negative() {
        assert_eq!(pending(100, 40), 60);
        assert_eq!(pending(100, 100), 0);
        // A position past a stale end (statistics lag behind the reads).
        assert_eq!(pending(100, 140), 0);
    }
}
