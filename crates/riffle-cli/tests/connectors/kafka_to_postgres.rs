//! Kafka in, PostgreSQL out: twenty random kills, an unbounded job stopped with a
//! savepoint and resumed rescaled, and malformed records; and a Kafka source on three
//! workers, whose consumer group's offsets follow the checkpoints.

use super::common::stderr;
use super::common::stop_with_savepoint;
use super::kafka::KafkaBroker;
use super::postgres::PgServer;
use super::{
    example, kafka_to_postgres, kill_randomly, live_bids, pipeline, run, run_restarting, succeed,
};
use std::process::Stdio;
use std::time::{Duration, Instant};

#[test]
fn kafka_to_postgres_survives_twenty_random_kills() {
    let broker = KafkaBroker::start();
    let server = PgServer::start();
    let dir = tempfile::tempdir().unwrap();
    produce_bids(&broker, dir.path());
    let clean = pipeline(
        dir.path(),
        "clean",
        &kafka_to_postgres(&broker, &server, "stats_clean"),
    );
    let started = Instant::now();
    succeed(&mut run(&clean, &dir.path().join("state-clean"), 2));
    eprintln!("crash-free run: {:?}", started.elapsed());
    let query = |table: &str| window_rows(&server, table);
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
    let kills = 20;
    kill_randomly(kills, 0x9e37_79b9_7f4a_7c15, || run(&soak, &state, 2));
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

/// 30K Nexmark bids in the topic `bids` (3 partitions), written by riffle's own Kafka
/// sink (the first half of the README example) with one writer, as the README runs it:
/// each partition in event-time order.
fn produce_bids(broker: &KafkaBroker, dir: &std::path::Path) {
    broker.create_topic("bids", 3);
    let input = example("nexmark_to_kafka")
        .replace("127.0.0.1:9092", &broker.bootstrap)
        .replace("'events' = '50K'", "'events' = '30K'");
    let producer = pipeline(dir, "produce", &input);
    succeed(&mut run(&producer, &dir.join("state-produce"), 1));
}

/// The window statistics in `table`, a row per window as text, sorted.
fn window_rows(server: &PgServer, table: &str) -> Vec<String> {
    server.rows(&format!(
        "SELECT auction || ',' || window_start || ',' || window_end || ',' || bids || ',' || max_price FROM {table} ORDER BY 1"
    ))
}

/// The same pipeline on 3 worker processes (docs/cluster.md), read at 2K records/s,
/// while any worker (worker 0, the coordinator, every third time) is killed ten times:
/// the table equals a single process's crash-free run. PostgreSQL's prepared
/// transactions of the other workers' sink subtasks are committed by worker 0.
#[test]
fn kafka_to_postgres_on_three_workers_survives_killed_workers() {
    use super::common::workers::{kill_workers_randomly, launched};
    let broker = KafkaBroker::start();
    let server = PgServer::start();
    let dir = tempfile::tempdir().unwrap();
    produce_bids(&broker, dir.path());
    let clean = pipeline(
        dir.path(),
        "clean",
        &kafka_to_postgres(&broker, &server, "stats_clean"),
    );
    succeed(&mut run(&clean, &dir.path().join("state-clean"), 3));
    let query = |table: &str| window_rows(&server, table);
    let expected = query("stats_clean");
    assert!(expected.len() > 1_000, "{}", expected.len());

    let soak = kafka_to_postgres(&broker, &server, "stats_workers")
        .replace(
            "'scan.max-records-per-second' = '1G'",
            "'scan.max-records-per-second' = '2K'",
        )
        .replace(",\n  PRIMARY KEY (auction, window_start)", "");
    assert!(!soak.contains("PRIMARY KEY"));
    let soak = pipeline(dir.path(), "workers", &soak);
    let log = dir.path().join("launcher.log");
    let mut cmd = run_restarting(&soak, &dir.path().join("state-workers"), 3);
    cmd.args([
        "--workers",
        "3",
        "--restart-attempts",
        "30",
        "--restart-delay",
        "0s",
    ]);
    let mut launcher = launched(cmd, &log);
    let victims = kill_workers_randomly(&mut launcher, &log, 3, 10, 0x5851_f42d_4c95_7f2d);
    let status = launcher.wait().unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(status.success(), "{text}");
    assert!(victims.contains(&0));
    let got = query("stats_workers");
    assert!(
        got == expected,
        "after killing workers {victims:?}: {} rows, expected {}\n{text}",
        got.len(),
        expected.len()
    );
    assert!(server.rows("SELECT gid FROM pg_prepared_xacts").is_empty());
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

/// A Kafka source on three workers at parallelism 3: partition i is read on worker i,
/// and each worker's source commits the consumer group's offsets of every checkpoint
/// that committed. Only worker 0's sources once heard of commits (from the coordinator
/// in their process), so the offsets of partitions 1 and 2 never moved.
#[test]
fn a_kafka_source_on_three_workers_commits_the_group_offsets_of_every_partition() {
    use super::common::workers::launched;
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let broker = KafkaBroker::start();
    let dir = tempfile::tempdir().unwrap();
    broker.create_topic("spread", 3);
    broker.produce("spread", &live_bids(0..3000));
    let file = pipeline(
        dir.path(),
        "spread",
        &format!(
            "CREATE TABLE bids (auction BIGINT, bidder BIGINT, price BIGINT, date_time TIMESTAMP,
               WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND)
             WITH ('connector' = 'kafka', 'bootstrap.servers' = '{bootstrap}', 'topic' = 'spread',
                   'format' = 'json', 'group.id' = 'riffle-spread');
             CREATE TABLE copied WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'json');
             INSERT INTO copied SELECT auction, bidder, price FROM bids;",
            bootstrap = broker.bootstrap,
            out = dir.path().join("out").display()
        ),
    );
    let log = dir.path().join("launcher.log");
    let mut cmd = run_restarting(&file, &dir.path().join("state"), 3);
    cmd.args(["--workers", "3"]);
    let mut launcher = launched(cmd, &log);
    let group_offsets = || {
        let consumer: BaseConsumer = broker
            .client()
            .set("group.id", "riffle-spread")
            .create()
            .unwrap();
        let mut list = rdkafka::TopicPartitionList::new();
        for p in 0..3 {
            list.add_partition("spread", p);
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
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut offsets = group_offsets();
    while offsets != [1000; 3] && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        offsets = group_offsets();
    }
    // As Ctrl-C would: the job stops with a savepoint, every worker exits.
    // SAFETY: signalling a process this test started.
    unsafe { libc::kill(launcher.id() as i32, libc::SIGTERM) };
    let status = launcher.wait().unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        offsets, [1000; 3],
        "the group's offsets per partition (partition i is read on worker i)\n{text}"
    );
    assert!(status.success(), "{text}");
}
