//! The Kafka source and sink against a real Kafka-protocol broker (tansu): partitions
//! spread over subtasks, offsets as state (restore and rescale read each record once),
//! per-partition watermarks, formats, malformed records named by topic, partition and
//! offset; transactions committed only by commit, the ledger that tells a later
//! process what committed, and fencing of a dead process's producers.

use crate::certs;
#[path = "support/kafka.rs"]
mod broker;

use broker::KafkaBroker;
use riffle_connectors::kafka::{
    KafkaClient, KafkaDelivery, KafkaSinkConfig, KafkaSinkFactory, KafkaSourceConfig,
    KafkaSourceFactory, KafkaStartup, KafkaTimestamp, ValueFormat,
};
use riffle_connectors::MalformedRecords;
use riffle_core::arrow::array::{AsArray, Int64Array, StringArray, TimestampNanosecondArray};
use riffle_core::arrow::datatypes::{DataType, Field, Int64Type, Schema, TimeUnit};
use riffle_core::{
    Committable, Committer, Epoch, EventTime, OperatorContext, OperatorState, RecordBatch,
    SinkContext, SinkFactory, SourceFactory, SourcePoll, StagedOutput, StreamSchema,
};
use std::sync::Arc;
use std::time::Duration;

fn bids_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("auction", DataType::Int64, true),
        Field::new("price", DataType::Int64, true),
        Field::new("ts", DataType::Timestamp(TimeUnit::Millisecond, None), true),
    ]))
}

fn source_config(broker: &KafkaBroker, topic: &str) -> KafkaSourceConfig {
    KafkaSourceConfig {
        client: KafkaClient::new(&broker.bootstrap),
        topic: topic.into(),
        group_id: Some(format!("test-{topic}")),
        format: ValueFormat::Json,
        avro: Default::default(),
        schema: bids_schema(),
        timestamp: KafkaTimestamp::Field("ts".into()),
        startup: KafkaStartup::Earliest,
        bounded: true,
        on_malformed: MalformedRecords::Fail,
        batch_rows: 7,
        max_records_per_second: None,
        partition_idle_timeout: None,
        upsert_key: None,
    }
}

/// `n` JSON bids spread round-robin over `partitions`: auction i, price i * 10, ts i s.
fn bids(n: i64, partitions: i32) -> Vec<(i32, Vec<u8>, i64)> {
    (0..n)
        .map(|i| {
            let json = format!(
                "{{\"auction\":{i},\"price\":{},\"ts\":\"1970-01-01T00:00:{:02}Z\"}}",
                i * 10,
                i % 60
            );
            ((i % partitions as i64) as i32, json.into_bytes(), 1_000 * i)
        })
        .collect()
}

/// Runs subtask `subtask` of `parallelism` until it ends or `limit` rows, restoring
/// `state` first; returns the auctions read and the state at the end.
fn read(
    factory: &KafkaSourceFactory,
    subtask: usize,
    parallelism: usize,
    state: Option<OperatorState>,
    limit: usize,
) -> (Vec<i64>, OperatorState) {
    let ctx = OperatorContext::detached("kafka", subtask, parallelism);
    let mut source = factory.create(&ctx).unwrap();
    if let Some(state) = state {
        source.restore(state).unwrap();
    }
    let mut auctions = Vec::new();
    let mut idle = 0;
    while auctions.len() < limit {
        match source.poll_next().unwrap() {
            SourcePoll::Batch(b) => {
                idle = 0;
                auctions.extend(b.column(0).as_primitive::<Int64Type>().values().iter());
            }
            SourcePoll::Pending => {
                idle += 1;
                assert!(
                    idle < 400,
                    "the source stalled after {} rows",
                    auctions.len()
                );
            }
            SourcePoll::End => break,
        }
    }
    (auctions, source.snapshot(Epoch(1)).unwrap())
}

fn merge(states: Vec<OperatorState>) -> OperatorState {
    OperatorState::of(states.into_iter().flat_map(|s| s.batches).collect())
}

#[test]
fn partitions_spread_over_subtasks_and_offsets_restore_and_rescale() {
    let broker = KafkaBroker::start();
    broker.create_topic("bids", 3);
    broker.produce("bids", &bids(90, 3));
    let factory = KafkaSourceFactory::new(source_config(&broker, "bids")).unwrap();
    // Two subtasks read part of their partitions, are "checkpointed", and three new
    // subtasks resume from the union of their state.
    let (a, sa) = read(&factory, 0, 2, None, 20);
    let (b, sb) = read(&factory, 1, 2, None, 10);
    let mut all: Vec<i64> = a.iter().chain(&b).copied().collect();
    for subtask in 0..3 {
        let (rest, _) = read(
            &factory,
            subtask,
            3,
            Some(merge(vec![sa.clone(), sb.clone()])),
            usize::MAX,
        );
        all.extend(rest);
    }
    all.sort();
    assert_eq!(all, (0..90).collect::<Vec<_>>(), "each record exactly once");
}

#[test]
fn the_watermark_follows_the_slowest_partition() {
    let broker = KafkaBroker::start();
    broker.create_topic("skew", 2);
    // Partition 0 is at second 50, partition 1 only at second 5.
    let mut records = Vec::new();
    for i in 0..10i64 {
        records.push((
            0,
            format!("{{\"auction\":{i},\"price\":1,\"ts\":{}}}", 50_000 + i).into_bytes(),
            0,
        ));
    }
    records.push((1, b"{\"auction\":99,\"price\":1,\"ts\":5000}".to_vec(), 0));
    broker.produce("skew", &records);
    let mut config = source_config(&broker, "skew");
    config.bounded = false;
    let factory = KafkaSourceFactory::new(config).unwrap();
    let mut source = factory
        .create(&OperatorContext::detached("kafka", 0, 1))
        .unwrap();
    let mut rows = 0;
    for _ in 0..400 {
        if let SourcePoll::Batch(b) = source.poll_next().unwrap() {
            rows += b.num_rows();
        }
        if rows == 11 {
            break;
        }
    }
    assert_eq!(rows, 11);
    assert_eq!(source.event_time_frontier(), Some(5_000_000_000));
}

/// Polls `source` until it has read `n` more rows.
fn poll_rows(source: &mut dyn riffle_core::Source, n: usize) {
    let mut rows = 0;
    for _ in 0..400 {
        if let SourcePoll::Batch(b) = source.poll_next().unwrap() {
            rows += b.num_rows();
        }
        if rows >= n {
            return;
        }
    }
    panic!("read {rows} rows, expected {n}");
}

#[test]
fn a_quiet_partition_stops_holding_the_watermark_back_until_it_delivers() {
    let broker = KafkaBroker::start();
    broker.create_topic("quiet", 2);
    let bid = |partition: i32, auction: i64, ms: i64| {
        let json = format!("{{\"auction\":{auction},\"price\":1,\"ts\":{ms}}}");
        (partition, json.into_bytes(), 0)
    };
    broker.produce("quiet", &[bid(0, 1, 50_000)]);
    let timeout = Duration::from_secs(1);
    let mut config = source_config(&broker, "quiet");
    config.bounded = false;
    let waiting = KafkaSourceFactory::new(config.clone()).unwrap();
    config.partition_idle_timeout = Some(timeout);
    let factory = KafkaSourceFactory::new(config).unwrap();
    let ctx = OperatorContext::detached("kafka", 0, 1);
    let (mut patient, mut source) = (waiting.create(&ctx).unwrap(), factory.create(&ctx).unwrap());
    poll_rows(patient.as_mut(), 1);
    poll_rows(source.as_mut(), 1);
    std::thread::sleep(timeout + Duration::from_millis(200));
    // Partition 1 has delivered nothing: without a timeout it holds event time at its
    // start for ever; with one, partition 0 alone moves it once 1 s has passed.
    broker.produce("quiet", &[bid(0, 2, 60_000)]);
    poll_rows(patient.as_mut(), 1);
    poll_rows(source.as_mut(), 1);
    assert_eq!(patient.event_time_frontier(), Some(EventTime::MIN));
    assert_eq!(source.event_time_frontier(), Some(60_000_000_000));
    // Once partition 1 delivers, it holds event time back again.
    broker.produce("quiet", &[bid(1, 3, 55_000)]);
    poll_rows(source.as_mut(), 1);
    assert_eq!(source.event_time_frontier(), Some(55_000_000_000));
}

#[test]
fn malformed_records_name_topic_partition_and_offset_or_are_skipped() {
    let broker = KafkaBroker::start();
    broker.create_topic("dirty", 1);
    broker.produce(
        "dirty",
        &[
            (0, b"{\"auction\":1,\"price\":10,\"ts\":1000}".to_vec(), 0),
            (0, b"{\"auction\":2,\"price\":".to_vec(), 0),
            (
                0,
                b"{\"auction\":3,\"price\":\"x\",\"ts\":3000}".to_vec(),
                0,
            ),
            (0, b"{\"auction\":4,\"price\":40}".to_vec(), 0),
            (0, b"{\"auction\":5,\"price\":50,\"ts\":5000}".to_vec(), 0),
        ],
    );
    let factory = KafkaSourceFactory::new(source_config(&broker, "dirty")).unwrap();
    let mut source = factory
        .create(&OperatorContext::detached("kafka", 0, 1))
        .unwrap();
    let err = loop {
        match source.poll_next() {
            Err(e) => break e.to_string(),
            Ok(SourcePoll::End) => panic!("the malformed record was accepted"),
            Ok(_) => {}
        }
    };
    assert!(
        err.contains("Kafka topic `dirty` partition 0 offset 1")
            && err.contains("'on_malformed' = 'skip'"),
        "{err}"
    );
    let mut config = source_config(&broker, "dirty");
    config.on_malformed = MalformedRecords::Skip;
    let factory = KafkaSourceFactory::new(config).unwrap();
    let ctx = OperatorContext::detached("kafka", 0, 1);
    let mut source = factory.create(&ctx).unwrap();
    let mut auctions: Vec<i64> = Vec::new();
    loop {
        match source.poll_next().unwrap() {
            SourcePoll::Batch(b) => {
                auctions.extend(b.column(0).as_primitive::<Int64Type>().values().iter())
            }
            SourcePoll::End => break,
            SourcePoll::Pending => {}
        }
    }
    assert_eq!(auctions, [1, 5]);
    assert_eq!(
        ctx.counters.values().records_skipped,
        3,
        "bad JSON, bad price, no event time"
    );
}

/// The first batch a single subtask of `config` reads.
fn first_batch(config: KafkaSourceConfig) -> RecordBatch {
    let factory = KafkaSourceFactory::new(config).unwrap();
    let mut source = factory
        .create(&OperatorContext::detached("k", 0, 1))
        .unwrap();
    loop {
        if let SourcePoll::Batch(b) = source.poll_next().unwrap() {
            return b;
        }
    }
}

#[test]
fn record_timestamps_csv_and_raw_values() {
    let broker = KafkaBroker::start();
    broker.create_topic("lines", 1);
    broker.produce(
        "lines",
        &[(0, b"7,70".to_vec(), 7_000), (0, b"8,80".to_vec(), 8_000)],
    );
    let mut config = source_config(&broker, "lines");
    config.format = ValueFormat::Csv;
    config.timestamp = KafkaTimestamp::Record("ts".into());
    let batch = first_batch(config);
    assert_eq!(batch.num_rows(), 2);
    assert_eq!(
        batch.column(1).as_primitive::<Int64Type>().values(),
        &[70, 80]
    );
    let ts = batch
        .column(3)
        .as_primitive::<riffle_core::arrow::datatypes::TimestampNanosecondType>();
    assert_eq!(ts.values(), &[7_000_000_000, 8_000_000_000]);

    let mut config = source_config(&broker, "lines");
    config.format = ValueFormat::Raw;
    config.schema = Arc::new(Schema::new(vec![
        Field::new("line", DataType::Utf8, true),
        Field::new("at", DataType::Timestamp(TimeUnit::Millisecond, None), true),
    ]));
    config.timestamp = KafkaTimestamp::Record("at".into());
    let batch = first_batch(config);
    let lines: Vec<&str> = batch
        .column(0)
        .as_string::<i32>()
        .iter()
        .flatten()
        .collect();
    assert_eq!(lines, ["7,70", "8,80"]);

    let mut config = source_config(&broker, "lines");
    config.format = ValueFormat::Raw;
    let err = KafkaSourceFactory::new(config).err().unwrap().to_string();
    assert!(err.contains("exactly one VARCHAR or BYTEA column"), "{err}");
}

fn out_schema() -> StreamSchema {
    StreamSchema::with_timestamp(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
    ])
}

fn out_batch(ids: std::ops::Range<i64>) -> RecordBatch {
    let schema = out_schema();
    let ids: Vec<i64> = ids.collect();
    let names: Vec<String> = ids.iter().map(|i| format!("n{i}")).collect();
    RecordBatch::try_new(
        schema.schema.clone(),
        vec![
            Arc::new(Int64Array::from(ids.clone())),
            Arc::new(StringArray::from(names)),
            Arc::new(TimestampNanosecondArray::from(ids).with_timezone("UTC")),
        ],
    )
    .unwrap()
}

fn ctx(subtask: usize) -> SinkContext {
    SinkContext {
        subtask,
        parallelism: 2,
        exactly_once: true,
        generation: 1,
    }
}

fn committable(epoch: u64, payload: String) -> Committable {
    Committable {
        sink: "out".into(),
        subtask: 0,
        epoch: Epoch(epoch),
        payload,
    }
}

fn transaction_of(payload: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(payload).unwrap();
    v["transaction"].as_str().unwrap().to_string()
}

#[test]
fn transactions_commit_with_the_checkpoint_and_a_new_process_reads_the_ledger() {
    let broker = KafkaBroker::start();
    broker.create_topic("out", 1);
    let config = KafkaSinkConfig::new(KafkaClient::new(&broker.bootstrap), "out", "job/out");
    let factory = KafkaSinkFactory::new(config.clone());
    assert!(!factory.commit_outlives_process());
    let schema = out_schema();
    let mut a = factory.create(&schema, &ctx(0)).unwrap();
    let mut b = factory.create(&schema, &ctx(1)).unwrap();
    a.write(&out_batch(0..3)).unwrap();
    b.write(&out_batch(3..5)).unwrap();
    let pa = a
        .pre_commit(Epoch(7))
        .unwrap()
        .expect("a transaction is open");
    // b's rows of the next epoch go into another transaction.
    let pb = b.pre_commit(Epoch(7)).unwrap().unwrap();
    b.write(&out_batch(5..6)).unwrap();
    assert_eq!(
        transaction_of(&pa),
        transaction_of(&pb),
        "one transaction per epoch"
    );
    assert_eq!(
        factory.staged_output(&committable(7, pa.clone())).unwrap(),
        StagedOutput::Staged
    );
    factory.commit(&committable(7, pa.clone())).unwrap();
    factory.commit(&committable(7, pb)).unwrap();
    let committed = vec![transaction_of(&pa)];
    let want = [
        r#"{"id":0,"name":"n0"}"#,
        r#"{"id":1,"name":"n1"}"#,
        r#"{"id":2,"name":"n2"}"#,
        r#"{"id":3,"name":"n3"}"#,
        r#"{"id":4,"name":"n4"}"#,
    ];
    let values = broker.committed_values("out", 1, &committed);
    assert_eq!(values, want);
    // Epoch 8 is prepared, then the process "dies" before the checkpoint commits.
    a.pre_commit(Epoch(8)).unwrap();
    let p8 = b.pre_commit(Epoch(8)).unwrap().unwrap();
    drop((a, b, factory));
    let after = KafkaSinkFactory::new(config);
    // The ledger: epoch 7 committed (roll forward is a no-op), epoch 8 did not (replay).
    assert_eq!(
        after.staged_output(&committable(7, String::new())).unwrap(),
        StagedOutput::Published
    );
    after.commit(&committable(7, String::new())).unwrap();
    assert_eq!(
        after.staged_output(&committable(8, p8.clone())).unwrap(),
        StagedOutput::Lost
    );
    let err = after.commit(&committable(8, p8)).unwrap_err().to_string();
    assert!(err.contains("recovery replays the epoch"), "{err}");
    assert_eq!(after.abort_staged(2).unwrap(), 0);
}

#[test]
fn at_least_once_publishes_at_every_barrier() {
    let broker = KafkaBroker::start();
    broker.create_topic("plain", 1);
    let mut config =
        KafkaSinkConfig::new(KafkaClient::new(&broker.bootstrap), "plain", "job/plain");
    config.delivery = KafkaDelivery::AtLeastOnce;
    config.key_columns = vec!["id".into()];
    let factory = KafkaSinkFactory::new(config);
    assert!(!factory.is_transactional());
    let mut sink = factory.create(&out_schema(), &ctx(0)).unwrap();
    sink.write(&out_batch(0..2)).unwrap();
    assert!(sink.pre_commit(Epoch(1)).unwrap().is_none());
    let records = broker.read_all("plain", 1);
    assert_eq!(records.len(), 2);
}

#[test]
fn group_offsets_follow_committed_checkpoints_and_start_a_new_job() {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::TopicPartitionList;
    let broker = KafkaBroker::start();
    broker.create_topic("events", 1);
    // Record i at i seconds (record timestamp), auction i.
    let records: Vec<(i32, Vec<u8>, i64)> = (0..10i64)
        .map(|i| {
            let json = format!("{{\"auction\":{i},\"price\":1,\"ts\":{}}}", i * 1000);
            (0, json.into_bytes(), i * 1000)
        })
        .collect();
    broker.produce("events", &records);
    let committed = |group: &str| {
        let consumer: BaseConsumer = broker.client().set("group.id", group).create().unwrap();
        let mut list = TopicPartitionList::new();
        list.add_partition("events", 0);
        let found = consumer
            .committed_offsets(list, std::time::Duration::from_secs(10))
            .unwrap();
        found.elements()[0].offset()
    };
    let factory = KafkaSourceFactory::new(source_config(&broker, "events")).unwrap();
    let ctx = OperatorContext::detached("kafka", 0, 1);
    let mut source = factory.create(&ctx).unwrap();
    let mut read = 0;
    while read < 4 {
        if let SourcePoll::Batch(b) = source.poll_next().unwrap() {
            read += b.num_rows();
        }
    }
    // Offsets of a snapshot reach the group only once its checkpoint commits.
    source.snapshot(Epoch(5)).unwrap();
    source.on_checkpoint_complete(Epoch(4)).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(committed("test-events"), rdkafka::Offset::Invalid);
    source.on_checkpoint_complete(Epoch(5)).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while committed("test-events") != rdkafka::Offset::Offset(read as i64) {
        assert!(
            std::time::Instant::now() < deadline,
            "the group offset was not committed"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // A new job without a checkpoint, starting from the group's offsets, reads the rest.
    let mut config = source_config(&broker, "events");
    config.startup = KafkaStartup::GroupOffsets;
    let (rest, _) = read_all(config);
    assert_eq!(rest, (read as i64..10).collect::<Vec<_>>());
    // (`KafkaStartup::Timestamp` is not checked here: tansu answers every lookup by time
    // with offset 0.)
    // Latest: nothing that was there before the start.
    let mut config = source_config(&broker, "events");
    config.startup = KafkaStartup::Latest;
    assert!(read_all(config).0.is_empty());
}

/// Every auction a single subtask of `config` reads to its bounded end.
fn read_all(config: KafkaSourceConfig) -> (Vec<i64>, OperatorState) {
    read(
        &KafkaSourceFactory::new(config).unwrap(),
        0,
        1,
        None,
        usize::MAX,
    )
}

#[test]
fn tls_and_sasl_are_built_in() {
    // A client asking for SASL over TLS must be created, not refused with "not
    // available at build time" (the TLS test exercises TLS itself against a broker).
    use rdkafka::consumer::BaseConsumer;
    let mut config = rdkafka::ClientConfig::new();
    config
        .set("bootstrap.servers", "127.0.0.1:1")
        .set("group.id", "g")
        .set("security.protocol", "sasl_ssl")
        .set("sasl.username", "u")
        .set("sasl.password", "p");
    for mechanism in ["PLAIN", "SCRAM-SHA-512", "OAUTHBEARER"] {
        if let Err(e) = config
            .clone()
            .set("sasl.mechanism", mechanism)
            .create::<BaseConsumer>()
        {
            panic!("{mechanism}: {e}");
        }
    }
}

/// A source subtask reports how many records each partition has yet to read: the
/// partition's end, as librdkafka's statistics report it, minus the next offset. Held
/// behind by a rate cap, what it read and what it has yet to read add up to what the
/// topic holds.
#[test]
fn each_partition_reports_the_records_it_has_yet_to_read() {
    let broker = KafkaBroker::start();
    broker.create_topic("lagging", 2);
    broker.produce("lagging", &bids(400, 2));
    let mut config = source_config(&broker, "lagging");
    config.bounded = false;
    config.max_records_per_second = Some(40);
    let factory = KafkaSourceFactory::new(config).unwrap();
    let ctx = OperatorContext::detached("kafka", 0, 1);
    let counters = ctx.counters.clone();
    let mut source = factory.create(&ctx).unwrap();
    let mut read = 0u64;
    let mut seen = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while seen.len() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "no pending records reported"
        );
        if let SourcePoll::Batch(b) = source.poll_next().unwrap() {
            read += b.num_rows() as u64;
        }
        let pending = counters.pending();
        let splits: Vec<&str> = pending.iter().map(|(s, _)| s.as_str()).collect();
        if splits == ["lagging/0", "lagging/1"] {
            let behind: u64 = pending.iter().map(|(_, n)| n).sum();
            assert_eq!(read + behind, 400, "{pending:?} after {read} read");
            if seen.last().is_none_or(|(r, _)| *r < read) {
                seen.push((read, behind));
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(seen[1].1 < seen[0].1, "{seen:?}");
}
