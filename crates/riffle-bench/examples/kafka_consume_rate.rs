//! The baseline of `scripts/bench-connectors`: how fast a bare librdkafka consumer reads
//! a topic from this broker (no decoding, no riffle).
//!
//! ```sh
//! cargo run --release -p riffle-bench --example kafka_consume_rate -- 127.0.0.1:9092 bids 300000
//! ```

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};
use std::time::{Duration, Instant};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, bootstrap, topic, records] = args.as_slice() else {
        return Err("usage: kafka_consume_rate BOOTSTRAP TOPIC RECORDS".into());
    };
    let records: u64 = records.parse()?;
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "riffle-bench-baseline")
        .set("enable.auto.commit", "false")
        .set("log_level", "3")
        .create()?;
    let metadata = consumer.fetch_metadata(Some(topic), Duration::from_secs(10))?;
    let partitions = metadata.topics()[0].partitions().len() as i32;
    let mut list = TopicPartitionList::new();
    for p in 0..partitions {
        list.add_partition_offset(topic, p, Offset::Beginning)?;
    }
    consumer.assign(&list)?;
    let started = Instant::now();
    let mut read = 0u64;
    while read < records {
        match consumer.poll(Duration::from_secs(10)) {
            Some(message) => {
                message?;
                read += 1;
            }
            None => return Err(format!("only {read} of {records} records arrived").into()),
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    println!("{read} {seconds:.3} {:.0}", read as f64 / seconds);
    Ok(())
}
