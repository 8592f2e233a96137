//! Exactly-once with real systems, as a user runs riffle: a PostgreSQL server and a
//! Kafka-protocol broker started here on 127.0.0.1, pipelines crashed at every crash
//! point of the checkpoint protocol and killed at random, and the tables and topics
//! compared with a crash-free run's; an unbounded job stopped with a savepoint and
//! resumed at another parallelism.

mod common;

#[path = "../../riffle-connectors/tests/support/certs.rs"]
mod certs;
#[path = "../../riffle-connectors/tests/support/kafka.rs"]
mod kafka;
#[path = "../../riffle-connectors/tests/support/postgres.rs"]
mod postgres;

use common::{riffle, stderr, stop_with_savepoint};
use kafka::KafkaBroker;
use postgres::PgServer;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CRASH_POINTS: [&str; 5] = [
    "after-snapshot-upload:3",
    "after-manifest-prepared:3",
    "after-sink-commit:3",
    "after-manifest-committed:3",
    "after-latest-flip:3",
];

fn example(name: &str) -> String {
    let path = format!("{}/../../examples/{name}.sql", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Writes `text` as `dir/name.sql`.
fn pipeline(dir: &Path, name: &str, text: &str) -> PathBuf {
    let file = dir.join(format!("{name}.sql"));
    std::fs::write(&file, text).unwrap();
    file
}

/// `riffle run file` checkpointed every 50 ms into `state` (all checkpoints kept).
fn run_restarting(file: &Path, state: &Path, parallelism: usize) -> Command {
    let mut cmd = riffle();
    cmd.arg("run")
        .arg(file)
        .args(["--parallelism", &parallelism.to_string()])
        .args(["--checkpoint-interval", "50ms"])
        .args(["--retain-checkpoints", "100000"])
        .arg("--state")
        .arg(state);
    cmd
}

/// [`run_restarting`] without in-process restarts: a failure ends the process.
fn run(file: &Path, state: &Path, parallelism: usize) -> Command {
    let mut cmd = run_restarting(file, state, parallelism);
    cmd.args(["--restart", "none"]);
    cmd
}

fn succeed(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    stderr(&out)
}

fn crash(cmd: &mut Command, at: &str) {
    let out = cmd.env("RIFFLE_CRASH_AT", at).output().unwrap();
    assert!(
        !out.status.success() && stderr(&out).contains("RIFFLE_CRASH_AT: crashing"),
        "did not crash at {at}: {}",
        stderr(&out)
    );
}

/// Nexmark bids, slow enough for many checkpoints, into an append table and an upsert
/// table of PostgreSQL.
fn nexmark_to_postgres(server: &PgServer, suffix: &str) -> String {
    format!(
        "CREATE TABLE bid (WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND)
           WITH ('connector' = 'nexmark', 'event_type' = 'bid', 'events' = '60K', 'throttle' = '30K', 'block_events' = '500');
         CREATE TABLE priced_{suffix} WITH (
           'connector' = 'postgres', 'url' = '{url}', 'create' = 'true');
         CREATE TABLE per_auction_{suffix} (auction BIGINT, bids BIGINT, top BIGINT, PRIMARY KEY (auction))
           WITH ('connector' = 'postgres', 'url' = '{url}', 'create' = 'true');
         INSERT INTO priced_{suffix}
           SELECT auction, bidder, price * 0.908 AS euros, date_time FROM bid WHERE price % 3 = 0;
         INSERT INTO per_auction_{suffix}
           SELECT auction, count(*) AS bids, max(price) AS top FROM bid GROUP BY auction;",
        url = server.url()
    )
}

fn tables(server: &PgServer, suffix: &str) -> (Vec<String>, Vec<String>) {
    (
        server.rows(&format!(
            "SELECT auction || ',' || bidder || ',' || euros || ',' || date_time FROM priced_{suffix} ORDER BY 1"
        )),
        server.rows(&format!(
            "SELECT auction || ',' || bids || ',' || top FROM per_auction_{suffix} ORDER BY 1"
        )),
    )
}

#[test]
fn postgres_append_and_upsert_tables_are_exact_after_every_crash_point() {
    let server = PgServer::start();
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(dir.path(), "clean", &nexmark_to_postgres(&server, "clean"));
    succeed(&mut run(&file, &dir.path().join("state-clean"), 2));
    let (appended, upserted) = tables(&server, "clean");
    assert!(appended.len() > 10_000, "{}", appended.len());
    assert!(upserted.len() > 100, "{}", upserted.len());
    let duplicates = server.rows(
        "SELECT count(*) - count(DISTINCT (auction, bidder, euros, date_time)) FROM priced_clean",
    );
    for (i, at) in CRASH_POINTS.iter().enumerate() {
        let suffix = format!("c{i}");
        let file = pipeline(dir.path(), &suffix, &nexmark_to_postgres(&server, &suffix));
        let state = dir.path().join(format!("state-{suffix}"));
        crash(&mut run(&file, &state, 2), at);
        // Resumed at another parallelism: the sink's transactions are per subtask.
        let resumed = succeed(&mut run(&file, &state, 3));
        assert!(resumed.contains("from checkpoint epoch"), "{resumed}");
        if at.starts_with("after-manifest-prepared") {
            // Prepared transactions outlive the process: the epoch rolls forward.
            assert!(
                resumed.contains("rolled PREPARED epoch forward: re-committed"),
                "{resumed}"
            );
        }
        assert_eq!(
            tables(&server, &suffix),
            (appended.clone(), upserted.clone()),
            "tables differ after a crash at {at}"
        );
        assert!(
            server.rows("SELECT gid FROM pg_prepared_xacts").is_empty(),
            "prepared transactions left behind after {at}"
        );
    }
    assert_eq!(
        server.rows(
            "SELECT count(*) - count(DISTINCT (auction, bidder, euros, date_time)) FROM priced_c0"
        ),
        duplicates
    );
}

#[test]
fn a_postgres_connection_broken_mid_epoch_restarts_the_job_and_loses_nothing() {
    let server = PgServer::start();
    let dir = tempfile::tempdir().unwrap();
    let clean = pipeline(dir.path(), "clean", &nexmark_to_postgres(&server, "clean"));
    succeed(&mut run(&clean, &dir.path().join("state-clean"), 2));
    let expected = tables(&server, "clean");
    let file = pipeline(
        dir.path(),
        "broken",
        &nexmark_to_postgres(&server, "broken"),
    );
    let child = run_restarting(&file, &dir.path().join("state-broken"), 2)
        .args(["--restart", "fixed", "--restart-delay", "100ms"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Mid-run (the job writes for about 2 s), cut every connection of the sinks.
    let connected = Instant::now();
    while server
        .rows("SELECT pid FROM pg_stat_activity WHERE application_name = 'riffle'")
        .len()
        < 3
    {
        assert!(
            connected.elapsed() < Duration::from_secs(30),
            "the job never connected"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(400));
    let cut = server.rows(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'riffle'",
    );
    assert!(!cut.is_empty(), "no riffle connection to cut");
    let out = child.wait_with_output().unwrap();
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("PostgreSQL at")
            && text.contains("riffle: restart 1 from the newest checkpoint"),
        "the job did not fail and restart: {text}"
    );
    assert_eq!(tables(&server, "broken"), expected);
    assert!(server.rows("SELECT gid FROM pg_prepared_xacts").is_empty());
}

/// Committed `riffle.transaction` names of a Kafka sink, from every COMMITTED manifest
/// under `state` (the test keeps them all).
fn committed_transactions(state: &Path) -> Vec<String> {
    let mut names = Vec::new();
    let mut stack = vec![state.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|x| x != "json") {
                continue;
            }
            let Ok(json) =
                serde_json::from_slice::<serde_json::Value>(&std::fs::read(&path).unwrap())
            else {
                continue;
            };
            if json["status"] != "COMMITTED" {
                continue;
            }
            for c in json["sink_committables"].as_array().into_iter().flatten() {
                let payload: serde_json::Value =
                    serde_json::from_str(c["payload"].as_str().unwrap_or("{}")).unwrap_or_default();
                if let Some(name) = payload["transaction"].as_str() {
                    names.push(name.to_string());
                }
            }
        }
    }
    names
}

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
    // Killed with epoch 3 prepared: Kafka's transaction died with the process, so the
    // epoch is replayed, and PostgreSQL's prepared part of it is rolled back.
    crash(&mut run(&file, &state, 2), "after-manifest-prepared:3");
    let resumed = succeed(&mut run(&file, &state, 3));
    assert!(
        resumed.contains("not rolling PREPARED epoch 3 forward"),
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

/// The README's example, with its addresses replaced (at full speed unless a test
/// sets a rate).
fn kafka_to_postgres(broker: &KafkaBroker, server: &PgServer, table: &str) -> String {
    example("kafka_to_postgres")
        .replace(
            "'scan.max-records-per-second' = '10K'",
            "'scan.max-records-per-second' = '1G'",
        )
        .replace("127.0.0.1:9092", &broker.bootstrap)
        .replace("postgres://riffle@127.0.0.1:5432/riffle", &server.url())
        .replace("bid_stats", table)
}

#[test]
fn kafka_to_postgres_survives_twenty_random_kills() {
    let broker = KafkaBroker::start();
    let server = PgServer::start();
    let dir = tempfile::tempdir().unwrap();
    broker.create_topic("bids", 3);
    // The input comes from riffle's own Kafka sink (the first half of the README example).
    // One record per batch, as the example says, for the bounded reader below.
    let input = example("nexmark_to_kafka")
        .replace("127.0.0.1:9092", &broker.bootstrap)
        .replace("'events' = '50K'", "'events' = '30K'");
    let producer = pipeline(dir.path(), "produce", &input);
    // One writer, as the README runs it: each partition in event-time order.
    succeed(&mut run(&producer, &dir.path().join("state-produce"), 1));

    let clean = pipeline(
        dir.path(),
        "clean",
        &kafka_to_postgres(&broker, &server, "stats_clean"),
    );
    let started = Instant::now();
    succeed(&mut run(&clean, &dir.path().join("state-clean"), 2));
    eprintln!("crash-free run: {:?}", started.elapsed());
    let query = |table: &str| {
        server.rows(&format!(
            "SELECT auction || ',' || window_start || ',' || window_end || ',' || bids || ',' || max_price FROM {table} ORDER BY 1"
        ))
    };
    let expected = query("stats_clean");
    assert!(expected.len() > 1_000, "{}", expected.len());
    // Every bid is in some window: nothing was late (the test is about crashes).
    assert_eq!(
        server.rows("SELECT sum(bids) FROM stats_clean"),
        [format!("{}", 30_000 * 46 / 50)]
    );

    // Read at 3K records/s (9 s for the whole topic), so that the job outlasts the kills
    // below together with a wide margin; appending (no key), so that a window written
    // twice would show as a duplicate row instead of being overwritten.
    let soak = kafka_to_postgres(&broker, &server, "stats_soak")
        .replace(
            "'scan.max-records-per-second' = '1G'",
            "'scan.max-records-per-second' = '3K'",
        )
        .replace(",\n  PRIMARY KEY (auction, window_start)", "");
    assert!(!soak.contains("PRIMARY KEY"));
    let soak = pipeline(dir.path(), "soak", &soak);
    let state = dir.path().join("state-soak");
    let mut kills = 0;
    // A fixed pseudo-random sequence of delays, 100..600 ms: some kills land in recovery
    // and start-up, most mid-run.
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    while kills < 20 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let delay = Duration::from_millis(100 + seed % 500);
        let mut child = run(&soak, &state, 2)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let started = Instant::now();
        let mut finished = false;
        while started.elapsed() < delay {
            if child.try_wait().unwrap().is_some() {
                finished = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(
            !finished,
            "the job finished after {kills} kills: make the input bigger"
        );
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        kills += 1;
    }
    let last = succeed(&mut run(&soak, &state, 2));
    assert!(last.contains("from checkpoint epoch"), "{last}");
    let got = query("stats_soak");
    let missing: Vec<&String> = expected
        .iter()
        .filter(|r| !got.contains(r))
        .take(5)
        .collect();
    let extra: Vec<&String> = got
        .iter()
        .filter(|r| !expected.contains(r))
        .take(5)
        .collect();
    assert!(
        got == expected,
        "after {kills} kills: {} rows, expected {}; missing {missing:?}; unexpected {extra:?}\n{last}",
        got.len(),
        expected.len()
    );
    assert!(server.rows("SELECT gid FROM pg_prepared_xacts").is_empty());
}

/// Bids `range` as JSON over 3 partitions: bid i is auction i % 40, price i, at
/// second i / 100.
fn live_bids(range: std::ops::Range<i64>) -> Vec<(i32, Vec<u8>, i64)> {
    range
        .map(|i| {
            let json = format!(
                "{{\"auction\":{},\"bidder\":{i},\"price\":{i},\"date_time\":{}}}",
                i % 40,
                i * 10
            );
            ((i % 3) as i32, json.into_bytes(), i * 10)
        })
        .collect()
}

/// Waits until `per_auction` counts `bids` bids (committed rows only are visible).
fn wait_for_bids(server: &PgServer, bids: i64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let exists = server.rows("SELECT to_regclass('per_auction') IS NOT NULL") == ["t"];
        if exists
            && server.rows("SELECT coalesce(sum(bids), 0) FROM per_auction") == [bids.to_string()]
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the table did not reach {bids} bids in 60 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn an_unbounded_kafka_job_stops_with_a_savepoint_and_resumes_rescaled() {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let broker = KafkaBroker::start();
    let server = PgServer::start();
    let dir = tempfile::tempdir().unwrap();
    broker.create_topic("live", 3);
    broker.produce("live", &live_bids(0..3000));
    let file = pipeline(
        dir.path(),
        "live",
        &format!(
            "CREATE TABLE bids (auction BIGINT, bidder BIGINT, price BIGINT, date_time TIMESTAMP,
               WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND)
             WITH ('connector' = 'kafka', 'bootstrap.servers' = '{bootstrap}', 'topic' = 'live',
                   'format' = 'json', 'group.id' = 'riffle-live');
             CREATE TABLE per_auction (auction BIGINT, bids BIGINT, top BIGINT, PRIMARY KEY (auction))
               WITH ('connector' = 'postgres', 'url' = '{url}', 'create' = 'true');
             INSERT INTO per_auction
               SELECT auction, count(*) AS bids, max(price) AS top FROM bids GROUP BY auction;",
            bootstrap = broker.bootstrap,
            url = server.url()
        ),
    );
    let state = dir.path().join("state");
    // The group's committed offsets: those of the newest committed checkpoint.
    let group_offsets = || {
        let consumer: BaseConsumer = broker
            .client()
            .set("group.id", "riffle-live")
            .create()
            .unwrap();
        let mut list = rdkafka::TopicPartitionList::new();
        for p in 0..3 {
            list.add_partition("live", p);
        }
        let found = consumer
            .committed_offsets(list, Duration::from_secs(10))
            .unwrap();
        found
            .elements()
            .iter()
            .map(|e| e.offset().to_raw().unwrap_or(-1))
            .collect::<Vec<i64>>()
    };
    let wait_for_offsets = |each: i64| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while group_offsets() != [each; 3] {
            assert!(
                Instant::now() < deadline,
                "group offsets {:?}, expected {each} each",
                group_offsets()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };

    // An unbounded job reads the topic, is stopped with a savepoint (SIGTERM, as
    // Ctrl-C), more bids arrive while it is down, and it resumes at parallelism 3.
    let job = run_restarting(&file, &state, 2)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_bids(&server, 3000);
    wait_for_offsets(1000);
    let (label, _) = stop_with_savepoint(job);
    broker.produce("live", &live_bids(3000..6000));
    let job = run_restarting(&file, &state, 3)
        .args(["--from-savepoint", &label])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_bids(&server, 6000);
    wait_for_offsets(2000);
    let (_, text) = stop_with_savepoint(job);
    assert!(
        text.contains(&format!("from savepoint `{label}`")) && text.contains("rescaled 2 → 3"),
        "{text}"
    );

    // Every bid counted once: 150 per auction, the top price the auction's last bid.
    let expected: Vec<String> = (0..40).map(|a| format!("{a},150,{}", 5960 + a)).collect();
    let mut got = server.rows("SELECT auction || ',' || bids || ',' || top FROM per_auction");
    got.sort_by_key(|r| r.split(',').next().unwrap().parse::<i64>().unwrap());
    assert_eq!(got, expected);
    assert!(server.rows("SELECT gid FROM pg_prepared_xacts").is_empty());
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
fn malformed_kafka_records_stop_the_job_with_their_place_or_are_skipped() {
    let broker = KafkaBroker::start();
    let server = PgServer::start();
    let dir = tempfile::tempdir().unwrap();
    broker.create_topic("bids", 1);
    broker.produce(
        "bids",
        &[
            (
                0,
                br#"{"auction":1,"bidder":1,"price":10,"date_time":"2025-01-01T00:00:01Z"}"#
                    .to_vec(),
                0,
            ),
            (0, br#"{"auction":1,"bidder":2,"price":"#.to_vec(), 0),
            (
                0,
                br#"{"auction":1,"bidder":3,"price":30,"date_time":"2025-01-01T00:00:02Z"}"#
                    .to_vec(),
                0,
            ),
        ],
    );
    let file = pipeline(
        dir.path(),
        "dirty",
        &kafka_to_postgres(&broker, &server, "dirty"),
    );
    let out = run(&file, &dir.path().join("state-dirty"), 1)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text = stderr(&out);
    assert!(
        text.contains("Kafka topic `bids` partition 0 offset 1")
            && text.contains("'on_malformed' = 'skip'"),
        "{text}"
    );
    let skipping = kafka_to_postgres(&broker, &server, "skipping").replace(
        "'format' = 'json',",
        "'format' = 'json', 'on_malformed' = 'skip',",
    );
    let file = pipeline(dir.path(), "skipping", &skipping);
    let text = succeed(&mut run(&file, &dir.path().join("state-skip"), 1));
    assert!(text.contains("skipped"), "{text}");
    assert_eq!(
        server.rows("SELECT auction || ',' || bids || ',' || max_price FROM skipping"),
        ["1,2,30"]
    );
}

#[test]
fn connector_errors_say_what_to_fix_and_keep_secrets_out_of_sight() {
    let dir = tempfile::tempdir().unwrap();
    let text = "CREATE TABLE bid (WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND)
         WITH ('connector' = 'nexmark', 'event_type' = 'bid', 'events' = '1K');
       CREATE TABLE out WITH ('connector' = 'postgres', 'url' = 'postgres://riffle@127.0.0.1:1/riffle',
         'password.env' = 'RIFFLE_TEST_PG_PASSWORD', 'create' = 'true');
       INSERT INTO out SELECT auction, price FROM bid;";
    let file = pipeline(dir.path(), "unreachable", text);
    let out = run(&file, &dir.path().join("state"), 1)
        .env("RIFFLE_TEST_PG_PASSWORD", "hunter2")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("PostgreSQL at 127.0.0.1:1/riffle") && err.contains("cannot connect"),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "the password was printed: {err}");
    let explained = riffle()
        .arg("explain")
        .arg(&file)
        .env("RIFFLE_TEST_PG_PASSWORD", "hunter2")
        .output()
        .unwrap();
    assert!(
        !stderr(&explained).contains("hunter2")
            && !String::from_utf8_lossy(&explained.stdout).contains("hunter2")
    );

    let unset = riffle()
        .arg("explain")
        .arg(&file)
        .env_remove("RIFFLE_TEST_PG_PASSWORD")
        .output()
        .unwrap();
    assert!(
        stderr(&unset).contains("`RIFFLE_TEST_PG_PASSWORD`, which is not set"),
        "{}",
        stderr(&unset)
    );
    let inline = text.replace("riffle@127", "riffle:hunter2@127");
    let file = pipeline(dir.path(), "inline", &inline);
    let out = riffle()
        .arg("explain")
        .arg(&file)
        .env("RIFFLE_TEST_PG_PASSWORD", "x")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(
        err.contains("password.env") && !err.contains("hunter2"),
        "{err}"
    );
}
