//! Iceberg tables through crashes: at every step of the checkpoint protocol with a
//! restore at another parallelism (warehouse in a directory and in S3), at held and
//! committing epochs of grouped commits, a lost commit answer, and twenty `kill -9`s of
//! a Kafka-to-Iceberg job.

use super::*;

#[test]
fn iceberg_tables_hold_the_crash_free_rows_after_every_crash_point_and_a_restore_at_another_parallelism(
) {
    crash_at_every_point_and_restore(&Lake::new());
}

#[test]
fn a_warehouse_in_s3_holds_the_crash_free_rows_after_every_crash_point() {
    let server = MotoServer::start("riffle-lake");
    let lake = Lake::on_s3(&server);
    crash_at_every_point_and_restore(&lake);
    let read = lake.read("bids_clean");
    assert!(
        read.listed.iter().all(|f| f.starts_with("riffle-")) && !read.listed.is_empty(),
        "{:?}",
        read.listed
    );
}

/// Crashes a run at each protocol step and restores it at another parallelism (with a
/// second writer's snapshot between two of riffle's once): the table then holds the
/// crash-free run's rows, each epoch in one snapshot, and no data file of an epoch that
/// never committed.
fn crash_at_every_point_and_restore(lake: &Lake) {
    // 100K events at 100K/s: a second of input, so that even on a loaded machine, with
    // slow checkpoints to S3, the run reaches epoch 3 before its input ends (at 40K, a
    // loaded run once put everything after epoch 1 into epoch 2).
    let clean = lake.bids_pipeline("clean", "bids_clean", "100K");
    succeed(&mut lake.run(&clean, &lake.state("clean"), 2));
    let expected = lake.read("bids_clean").rows;
    assert_eq!(expected.len(), bids_of(100_000));

    for (i, point) in CRASH_POINTS.iter().enumerate() {
        let table = format!("bids_crash{i}");
        let file = lake.bids_pipeline(&table, &table, "100K");
        let state = lake.state(&table);
        crash(&mut lake.run(&file, &state, 2), point);
        // Another writer appends between riffle's commits (after the crash, before
        // recovery rolls the PREPARED epoch forward): riffle must still find its own
        // epochs in the ancestry.
        let foreign = i == 2;
        if foreign {
            let before = lake.append_foreign_row(&table);
            assert!(before.rows.iter().any(|r| r.contains("foreign")));
        }
        let parallelism = if i % 2 == 0 { 3 } else { 1 };
        succeed(&mut lake.run(&file, &state, parallelism));
        let read = lake.read(&table);
        // Recovery deleted the data files of the crashed run's unfinished epochs.
        assert_eq!(read.stored, read.listed, "after crash at {point}");
        let mut rows = read.rows.clone();
        if foreign {
            let at = rows.iter().position(|r| r.contains("foreign")).unwrap();
            rows.remove(at);
        }
        assert_eq!(rows.len(), expected.len(), "after crash at {point}");
        assert!(rows == expected, "after crash at {point}: rows differ");
        assert_each_epoch_once(&read);
        // From the PREPARED manifest on, epoch 3 is rolled forward, not replayed: the
        // crash hit an epoch with rows, which one snapshot holds.
        assert!(
            point == &"after-snapshot-upload:3"
                || read.snapshots.iter().any(|s| s
                    .get("riffle.epochs")
                    .and_then(|e| e.as_str())
                    .is_some_and(|e| e.split(',').any(|e| e == "3"))),
            "{:?}",
            read.snapshots
        );
    }
}

/// The epochs of each of riffle's snapshots, newest first.
fn snapshot_epochs(read: &Read) -> Vec<Vec<u64>> {
    read.snapshots
        .iter()
        .filter_map(|s| s.get("riffle.epochs")?.as_str())
        .map(|e| e.split(',').map(|e| e.parse().unwrap()).collect())
        .collect()
}

#[test]
fn snapshots_covering_three_epochs_hold_the_crash_free_rows_through_crashes_at_held_and_committing_epochs(
) {
    let lake = Lake::new();
    let grouped = |name: &str| {
        let file = lake.bids_pipeline(name, name, "40K");
        with_options(&file, "'epochs-per-commit' = '3'");
        file
    };
    let clean = grouped("grouped_clean");
    succeed(&mut lake.run(&clean, &lake.state("grouped_clean"), 2));
    let read = lake.read("grouped_clean");
    assert_eq!(read.rows.len(), bids_of(40_000));
    assert_each_epoch_once(&read);
    // Every snapshot holds epochs of one span of three, and the next span starts after
    // it (an epoch without rows stages nothing, so a span may hold fewer).
    let snapshots = snapshot_epochs(&read);
    assert!(snapshots.len() >= 2, "{snapshots:?}");
    assert!(snapshots.iter().any(|e| e.len() > 1), "{snapshots:?}");
    for (i, epochs) in snapshots.iter().enumerate() {
        assert!(epochs.last().unwrap() - epochs[0] < 3, "{snapshots:?}");
        if let Some(older) = snapshots.get(i + 1) {
            assert!(epochs[0] >= older[0] + 3, "{snapshots:?}");
        }
    }
    let expected = read.rows;

    // Epoch 2 is held (nothing published) when the run dies after its checkpoint
    // committed, or before it did; epoch 3 publishes 1..=3. Each restore, at another
    // parallelism, publishes what the restored checkpoint held and goes on.
    for (i, point) in [
        "after-snapshot-upload:2",
        "after-manifest-committed:2",
        "after-manifest-prepared:3",
        "after-sink-commit:3",
    ]
    .iter()
    .enumerate()
    {
        let table = format!("grouped_crash{i}");
        let file = grouped(&table);
        let state = lake.state(&table);
        crash(&mut lake.run(&file, &state, 2), point);
        let at_crash = lake.read(&table);
        if point.ends_with(":2") {
            assert!(
                at_crash.rows.is_empty(),
                "{point}: {:?}",
                at_crash.snapshots
            );
        }
        succeed(&mut lake.run(&file, &state, if i % 2 == 0 { 1 } else { 3 }));
        let read = lake.read(&table);
        assert_eq!(read.stored, read.listed, "after crash at {point}");
        assert_eq!(read.rows.len(), expected.len(), "after crash at {point}");
        assert!(read.rows == expected, "after crash at {point}: rows differ");
        assert_each_epoch_once(&read);
        // What the crashed run's last checkpoint held went out in one snapshot, at
        // recovery: after the crash past epoch 2's commit, one that ends at epoch 2.
        if *point == "after-manifest-committed:2" {
            let epochs = snapshot_epochs(&read);
            assert!(
                epochs.iter().any(|e| e.last() == Some(&2)),
                "{:?}",
                read.snapshots
            );
        }
    }

    let zero = lake.bids_pipeline("grouped_zero", "grouped_zero", "5K");
    with_options(&zero, "'epochs-per-commit' = '0'");
    let text = fails(&mut lake.run(&zero, &lake.state("grouped_zero"), 1));
    assert!(
        text.contains("'epochs-per-commit' must be at least 1"),
        "{text}"
    );
}

#[test]
fn a_lost_commit_answer_is_checked_against_the_table_not_retried() {
    let lake = Lake::new();
    let file = lake.bids_pipeline("lost", "bids", "20K");
    let out = run(&file, &lake.state("lost"), 2)
        .env("RIFFLE_ICEBERG_LOSE_FIRST_ANSWER", "1")
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stderr(&out);
    assert!(
        text.contains("but the table holds them: the commit had landed"),
        "{text}"
    );
    let read = lake.read("bids");
    assert_eq!(read.rows.len(), bids_of(20_000));
    assert_each_epoch_once(&read);
}

/// The README's `examples/kafka_to_iceberg.sql` with the catalog and warehouse in `lake`
/// and the broker's address; reading at `rate` records per second.
fn kafka_to_iceberg(lake: &Lake, broker: &KafkaBroker, table: &str, rate: &str) -> String {
    let text = example("kafka_to_iceberg");
    for needle in [
        "'scan.max-records-per-second' = '10K'",
        "sqlite:///tmp/riffle-lake/catalog.db",
        "file:///tmp/riffle-lake/warehouse",
        "nexmark.bid_windows",
    ] {
        assert!(text.contains(needle), "the example changed: {needle}");
    }
    text.replace(
        "'scan.max-records-per-second' = '10K'",
        &format!("'scan.max-records-per-second' = '{rate}'"),
    )
    .replace("127.0.0.1:9092", &broker.bootstrap)
    .replace("'riffle-bid-windows'", &format!("'riffle-{table}'"))
    .replace("sqlite:///tmp/riffle-lake/catalog.db", &lake.catalog_uri)
    .replace("file:///tmp/riffle-lake/warehouse", &lake.warehouse)
    .replace("nexmark.bid_windows", &format!("nexmark.{table}"))
}

#[test]
fn kafka_to_iceberg_survives_twenty_random_kills() {
    let broker = KafkaBroker::start();
    let lake = Lake::new();
    broker.create_topic("bids", 3);
    let input = example("nexmark_to_kafka")
        .replace("127.0.0.1:9092", &broker.bootstrap)
        .replace("'events' = '50K'", "'events' = '30K'");
    let producer = pipeline(&lake.root, "produce", &input);
    succeed(&mut run(&producer, &lake.state("produce"), 1));

    let clean = pipeline(
        &lake.root,
        "clean",
        &kafka_to_iceberg(&lake, &broker, "windows_clean", "1G"),
    );
    succeed(&mut run(&clean, &lake.state("clean"), 2));
    let expected = lake.read("windows_clean").rows;
    assert!(expected.len() > 1_000, "{}", expected.len());

    // At 3K records/s the 27.6K bids take 9 s: the job outlasts the kills.
    let soak = pipeline(
        &lake.root,
        "soak",
        &kafka_to_iceberg(&lake, &broker, "windows_soak", "3K"),
    );
    let state = lake.state("soak");
    kill_randomly(20, 0x2545_f491_4f6c_dd1d, || run(&soak, &state, 2));
    let last = succeed(&mut run(&soak, &state, 3));
    assert!(last.contains("from checkpoint epoch"), "{last}");
    let read = lake.read("windows_soak");
    assert!(
        read.rows == expected,
        "after 20 kills: {} rows, expected {}\n{last}",
        read.rows.len(),
        expected.len()
    );
    let snapshots = read
        .snapshots
        .iter()
        .filter(|s| s.contains_key("riffle.sink-id"))
        .count();
    assert!(snapshots > 1, "{:?}", read.snapshots);
    assert_each_epoch_once_of(&read, "/bid_windows");
    // The killed runs' data files that no snapshot took were deleted.
    assert_eq!(read.stored, read.listed);
}
