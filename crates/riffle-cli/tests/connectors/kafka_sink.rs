//! The Kafka sink: the topic after a crash at every step of the commit protocol, an
//! upsert log beside a PostgreSQL upsert table, a changelog as tombstones, and reading and
//! writing over TLS.

use super::kafka::KafkaBroker;
use super::postgres::PgServer;
use super::{
    committed_transactions, crash, example, live_bids, pipeline, run, succeed, CRASH_POINTS,
};
use std::path::Path;

/// The values of `topic` that committed transactions wrote, sorted.
fn committed_values(broker: &KafkaBroker, topic: &str, state: &Path) -> Vec<String> {
    broker.committed_values(topic, 1, &committed_transactions(state))
}

/// The nexmark → Kafka example with its broker, topic and size replaced, throttled to
/// 20K events/s so that it takes many checkpoints, producing batches (readers here
/// read until the topic is quiet, so tansu's miscounted offsets do not matter).
fn nexmark_to_kafka(broker: &KafkaBroker, topic: &str, events: &str) -> String {
    example("nexmark_to_kafka")
        .replace("127.0.0.1:9092", &broker.bootstrap)
        .replace("'topic' = 'bids'", &format!("'topic' = '{topic}'"))
        .replace(
            "'events' = '50K'",
            &format!("'events' = '{events}', 'throttle' = '20K', 'block_events' = '500'"),
        )
        .replace("  'properties.batch.num.messages' = '1',\n", "")
}

#[test]
fn the_kafka_sink_topic_is_exact_after_every_crash_point() {
    let broker = KafkaBroker::start();
    let dir = tempfile::tempdir().unwrap();
    broker.create_topic("clean", 1);
    let file = pipeline(
        dir.path(),
        "clean",
        &nexmark_to_kafka(&broker, "clean", "30K"),
    );
    let state = dir.path().join("state-clean");
    succeed(&mut run(&file, &state, 2));
    let expected = committed_values(&broker, "clean", &state);
    assert!(expected.len() > 20_000, "{}", expected.len());
    assert_eq!(
        broker.read_all("clean", 1).len(),
        expected.len(),
        "a crash-free run aborts nothing"
    );
    for (i, at) in CRASH_POINTS.iter().enumerate() {
        let topic = format!("crash{i}");
        broker.create_topic(&topic, 1);
        let file = pipeline(
            dir.path(),
            &topic,
            &nexmark_to_kafka(&broker, &topic, "30K"),
        );
        let state = dir.path().join(format!("state-{topic}"));
        crash(&mut run(&file, &state, 2), at);
        let resumed = succeed(&mut run(&file, &state, 2));
        assert!(resumed.contains("from checkpoint epoch"), "{resumed}");
        if at.starts_with("after-manifest-prepared") {
            // The Kafka transaction died with the process: the epoch is replayed.
            assert!(
                resumed.contains("not rolling PREPARED epoch 3 forward")
                    && resumed.contains("resuming `crash1` from checkpoint epoch 2"),
                "{resumed}"
            );
        }
        assert_eq!(
            committed_values(&broker, &topic, &state),
            expected,
            "topic differs after a crash at {at}"
        );
    }
}

#[test]
fn an_updating_result_upserts_into_a_keyed_topic_as_into_a_table() {
    let broker = KafkaBroker::start();
    let server = PgServer::start();
    let dir = tempfile::tempdir().unwrap();
    broker.create_topic("per_auction", 2);
    let text = format!(
        "CREATE TABLE bid (WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND)
           WITH ('connector' = 'nexmark', 'event_type' = 'bid', 'events' = '40K', 'throttle' = '20K', 'block_events' = '500');
         CREATE TABLE per_auction (auction BIGINT, bids BIGINT, top BIGINT, PRIMARY KEY (auction))
           WITH ('connector' = 'kafka', 'bootstrap.servers' = '{}', 'topic' = 'per_auction');
         CREATE TABLE per_auction_pg (auction BIGINT, bids BIGINT, top BIGINT, PRIMARY KEY (auction))
           WITH ('connector' = 'postgres', 'url' = '{}', 'create' = 'true');
         INSERT INTO per_auction SELECT auction, count(*) AS bids, max(price) AS top FROM bid GROUP BY auction;
         INSERT INTO per_auction_pg SELECT auction, count(*) AS bids, max(price) AS top FROM bid GROUP BY auction;",
        broker.bootstrap,
        server.url()
    );
    let file = pipeline(dir.path(), "upsert", &text);
    let state = dir.path().join("state");
    // Killed with epoch 2 prepared: Kafka's transaction died with the process, so the
    // epoch is replayed, and PostgreSQL's prepared part of it is rolled back. (Epoch 2
    // exists however slow checkpoints are on a loaded machine: if no periodic one comes
    // first, it is the end-of-input epoch.)
    crash(&mut run(&file, &state, 2), "after-manifest-prepared:2");
    let resumed = succeed(&mut run(&file, &state, 3));
    assert!(
        resumed.contains("not rolling PREPARED epoch 2 forward"),
        "{resumed}"
    );
    // The topic is an upsert log keyed by auction: each auction's records lie in one
    // partition, and its last committed record is its row in the table.
    let mut partitions: std::collections::BTreeMap<i64, std::collections::BTreeSet<i32>> =
        Default::default();
    for (partition, _, value) in broker.read_all("per_auction", 2) {
        let row: serde_json::Value = serde_json::from_slice(&value).unwrap();
        partitions
            .entry(row["auction"].as_i64().unwrap())
            .or_default()
            .insert(partition);
    }
    assert!(partitions.values().all(|p| p.len() == 1), "{partitions:?}");
    let committed = committed_transactions(&state);
    let mut last: std::collections::BTreeMap<i64, String> = Default::default();
    for (value, header) in broker.read_all_with_headers("per_auction", 2) {
        if header.is_some_and(|h| committed.contains(&h)) {
            let row: serde_json::Value = serde_json::from_slice(&value).unwrap();
            let auction = row["auction"].as_i64().unwrap();
            last.insert(auction, format!("{auction},{},{}", row["bids"], row["top"]));
        }
    }
    let table = server
        .rows("SELECT auction || ',' || bids || ',' || top FROM per_auction_pg ORDER BY auction");
    assert!(table.len() > 100, "{}", table.len());
    assert_eq!(last.into_values().collect::<Vec<_>>(), table);
    assert_eq!(
        server.rows("SELECT sum(bids) FROM per_auction_pg"),
        [format!("{}", 40_000 * 46 / 50)]
    );
}

#[test]
fn kafka_over_tls_reads_and_writes_exactly_once() {
    let broker = KafkaBroker::start_with_tls();
    let dir = tempfile::tempdir().unwrap();
    broker.create_topic("bids", 3);
    broker.create_topic("priced", 2);
    broker.produce("bids", &live_bids(0..600));
    // The broker's certificate is signed by a throw-away CA: the job trusts it by
    // `ssl.ca.location`.
    let tls = format!(
        "'bootstrap.servers' = '{}', 'properties.security.protocol' = 'ssl', 'properties.ssl.ca.location' = '{}'",
        broker.bootstrap,
        broker.ca().display()
    );
    let file = pipeline(
        dir.path(),
        "tls",
        &format!(
            "CREATE TABLE bids (auction BIGINT, bidder BIGINT, price BIGINT, date_time TIMESTAMP,
               WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND)
             WITH ('connector' = 'kafka', {tls}, 'topic' = 'bids', 'format' = 'json',
                   'scan.bounded.mode' = 'latest-offset');
             CREATE TABLE priced WITH ('connector' = 'kafka', {tls}, 'topic' = 'priced', 'format' = 'csv');
             INSERT INTO priced SELECT bidder, price * 2 AS doubled FROM bids WHERE auction < 20;"
        ),
    );
    let state = dir.path().join("state");
    succeed(&mut run(&file, &state, 2));
    let mut expected: Vec<String> = (0..600)
        .filter(|i| i % 40 < 20)
        .map(|i| format!("{i},{}", i * 2))
        .collect();
    expected.sort();
    assert_eq!(
        broker.committed_values("priced", 2, &committed_transactions(&state)),
        expected
    );
}

#[test]
fn a_having_result_into_a_keyed_topic_withdraws_rows_with_tombstones() {
    let broker = KafkaBroker::start();
    let server = PgServer::start();
    let dir = tempfile::tempdir().unwrap();
    broker.create_topic("odd", 2);
    let text = format!(
        "CREATE TABLE bid (WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND)
           WITH ('connector' = 'nexmark', 'event_type' = 'bid', 'events' = '40K', 'throttle' = '20K', 'block_events' = '500');
         CREATE TABLE odd (auction BIGINT, bids BIGINT, total BIGINT, PRIMARY KEY (auction))
           WITH ('connector' = 'kafka', 'bootstrap.servers' = '{}', 'topic' = 'odd');
         CREATE TABLE raw (auction BIGINT, price BIGINT)
           WITH ('connector' = 'postgres', 'url' = '{}', 'create' = 'true');
         INSERT INTO odd SELECT auction, count(*) AS bids, sum(price) AS total FROM bid
           GROUP BY auction HAVING count(*) % 3 = 1;
         INSERT INTO raw SELECT auction, price FROM bid;",
        broker.bootstrap,
        server.url()
    );
    let file = pipeline(dir.path(), "odd", &text);
    let state = dir.path().join("state");
    crash(&mut run(&file, &state, 2), "after-manifest-prepared:2");
    succeed(&mut run(&file, &state, 3));
    // Replay the committed records: a value is the key's row, a tombstone removes it.
    let committed = committed_transactions(&state);
    let mut now: std::collections::BTreeMap<i64, String> = Default::default();
    let mut tombstones = 0;
    for (key, value) in broker.committed_keyed("odd", 2, &committed) {
        let auction: i64 = String::from_utf8(key.expect("an upsert log's records are keyed"))
            .unwrap()
            .parse()
            .unwrap();
        match value {
            None => {
                tombstones += 1;
                assert!(
                    now.remove(&auction).is_some(),
                    "a tombstone for {auction}, which was not there"
                );
            }
            Some(value) => {
                let row: serde_json::Value = serde_json::from_slice(&value).unwrap();
                now.insert(
                    auction,
                    format!("{auction},{},{}", row["bids"], row["total"]),
                );
            }
        }
    }
    // PostgreSQL's own answer over the bids riffle appended beside the topic.
    let expected = server.rows(
        "SELECT auction || ',' || count(*) || ',' || sum(price) FROM raw
         GROUP BY auction HAVING count(*) % 3 = 1 ORDER BY auction",
    );
    assert!(expected.len() > 100, "{}", expected.len());
    assert!(
        tombstones > 100,
        "{tombstones} tombstones: the case withdraws too little"
    );
    assert_eq!(now.into_values().collect::<Vec<_>>(), expected);
}
