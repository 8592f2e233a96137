//! The baseline of `scripts/bench-connectors`: how fast a bare librdkafka consumer reads
//! a topic from this broker (no decoding, no riffle), to compare the Kafka source with.

use crate::error::BenchError;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};
use std::time::{Duration, Instant};

/// Reads `records` records of `topic` from the beginning of every partition; returns
/// records per second.
///
/// # Errors
/// The broker cannot be reached, or fewer records arrive.
pub fn consume_rate(bootstrap: &str, topic: &str, records: u64) -> Result<f64, BenchError> {
    let fail = |e: String| BenchError::Kafka(e);
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "riffle-bench-baseline")
        .set("enable.auto.commit", "false")
        .set("log_level", "3")
        .create()
        .map_err(|e| fail(e.to_string()))?;
    let metadata = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .map_err(|e| fail(e.to_string()))?;
    let partitions = metadata
        .topics()
        .first()
        .map_or(0, |t| t.partitions().len() as i32);
    let mut list = TopicPartitionList::new();
    for p in 0..partitions {
        list.add_partition_offset(topic, p, Offset::Beginning)
            .map_err(|e| fail(e.to_string()))?;
    }
    consumer.assign(&list).map_err(|e| fail(e.to_string()))?;
    let started = Instant::now();
    let mut read = 0u64;
    while read < records {
        match consumer.poll(Duration::from_secs(10)) {
            Some(Ok(_)) => read += 1,
            Some(Err(e)) => return Err(fail(e.to_string())),
            None => return Err(fail(format!("only {read} of {records} records arrived"))),
        }
    }
    Ok(read as f64 / started.elapsed().as_secs_f64())
}
