//! A changelog into PostgreSQL: `HAVING` over a `GROUP BY` without a window, whose
//! groups come and go as their counts change, applied as upserts and deletes. The table
//! must equal PostgreSQL's own answer to the same question over the bids riffle appended
//! beside it — PostgreSQL's executor shares nothing with riffle's — after a clean run,
//! a crash mid-commit, `kill -9`s, and restores at other parallelisms. And a LEFT JOIN
//! whose right side arrives late: padded rows published, withdrawn and replaced. And
//! Debezium change events from Kafka, aggregated, against the source table's final state.

use super::kafka::KafkaBroker;
use super::postgres::PgServer;
use super::{crash, kill_randomly, pipeline, run, succeed};
use std::collections::BTreeMap;

/// Nexmark bids into an append table of (auction, price) and a changelog of the
/// auctions whose bid count is 1 more than a multiple of 3.
fn having_to_postgres(server: &PgServer, suffix: &str) -> String {
    format!(
        "CREATE TABLE bid (WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND)
           WITH ('connector' = 'nexmark', 'event_type' = 'bid', 'events' = '60K', 'throttle' = '30K', 'block_events' = '500');
         CREATE TABLE raw_{suffix} (auction BIGINT, price BIGINT)
           WITH ('connector' = 'postgres', 'url' = '{url}', 'create' = 'true');
         CREATE TABLE odd_{suffix} (auction BIGINT, bids BIGINT, total BIGINT, PRIMARY KEY (auction))
           WITH ('connector' = 'postgres', 'url' = '{url}', 'create' = 'true');
         INSERT INTO raw_{suffix} SELECT auction, price FROM bid;
         INSERT INTO odd_{suffix}
           SELECT auction, count(*) AS bids, sum(price) AS total FROM bid
           GROUP BY auction HAVING count(*) % 3 = 1;",
        url = server.url()
    )
}

/// riffle's table, and PostgreSQL's answer over the appended bids.
fn riffle_and_postgres(server: &PgServer, suffix: &str) -> (Vec<String>, Vec<String>) {
    (
        server.rows(&format!(
            "SELECT auction || ',' || bids || ',' || total FROM odd_{suffix} ORDER BY 1"
        )),
        server.rows(&format!(
            "SELECT auction || ',' || count(*) || ',' || sum(price) FROM raw_{suffix}
             GROUP BY auction HAVING count(*) % 3 = 1 ORDER BY 1"
        )),
    )
}

fn assert_same(server: &PgServer, suffix: &str, bids: &[String], after: &str) {
    let (riffle, postgres) = riffle_and_postgres(server, suffix);
    assert_eq!(
        server.rows(&format!("SELECT count(*) FROM raw_{suffix}")),
        bids,
        "appended bids differ from the clean run's after {after}"
    );
    assert!(
        postgres.len() > 100,
        "too few groups to prove anything: {}",
        postgres.len()
    );
    assert_eq!(
        riffle, postgres,
        "the HAVING table differs from PostgreSQL's answer after {after}"
    );
}

#[test]
fn a_having_result_in_postgres_equals_postgres_own_answer_through_crashes_and_rescales() {
    let server = PgServer::start();
    let dir = tempfile::tempdir().unwrap();

    let file = pipeline(dir.path(), "clean", &having_to_postgres(&server, "clean"));
    succeed(&mut run(&file, &dir.path().join("state-clean"), 2));
    let bids = server.rows("SELECT count(*) FROM raw_clean");
    assert_same(&server, "clean", &bids, "a clean run");
    // Groups that left the result: counts past 1 that are not 1 more than a multiple
    // of 3 were present once and must have been deleted.
    let left = server.rows(
        "SELECT count(*) FROM (SELECT auction FROM raw_clean GROUP BY auction
           HAVING count(*) > 1 AND count(*) % 3 <> 1) gone",
    );
    assert!(
        left[0].parse::<u64>().unwrap() > 100,
        "too few deletes: {left:?}"
    );

    // A crash after the sink's commit, resumed at 3; before it, resumed at 1.
    for (suffix, at, resume) in [
        ("c1", "after-sink-commit:3", 3),
        ("c2", "after-manifest-prepared:3", 1),
    ] {
        let file = pipeline(dir.path(), suffix, &having_to_postgres(&server, suffix));
        let state = dir.path().join(format!("state-{suffix}"));
        crash(&mut run(&file, &state, 2), at);
        succeed(&mut run(&file, &state, resume));
        assert_same(
            &server,
            suffix,
            &bids,
            &format!("a crash at {at}, resumed at p{resume}"),
        );
    }

    // kill -9 three times at p2, p3, p1, then run to the end at p2.
    let file = pipeline(dir.path(), "k", &having_to_postgres(&server, "k"));
    let state = dir.path().join("state-k");
    let parallelism = std::cell::Cell::new(1);
    kill_randomly(3, 0x9e37_79b9, || {
        parallelism.set(parallelism.get() % 3 + 1);
        run(&file, &state, parallelism.get())
    });
    succeed(&mut run(&file, &state, 2));
    assert_same(&server, "k", &bids, "three kill -9s at p2, p3, p1");
    assert!(
        server.rows("SELECT gid FROM pg_prepared_xacts").is_empty(),
        "prepared transactions left behind"
    );
}

/// Orders (id, cust) at 4K rows/s and customers (cust, name) at 300 rows/s, as JSON
/// files: most customers arrive after their orders, and customers 600..699 never do.
fn write_orders_and_customers(dir: &std::path::Path) -> Vec<String> {
    let orders = dir.join("orders");
    let customers = dir.join("customers");
    std::fs::create_dir_all(&orders).unwrap();
    std::fs::create_dir_all(&customers).unwrap();
    let mut text = String::new();
    let mut expected = Vec::new();
    for id in 0..4000i64 {
        let cust = id * 7 % 700;
        text += &format!(
            "{{\"id\": {id}, \"cust\": {cust}, \"ts\": {}}}\n",
            1_000_000 + id
        );
        let name = if cust < 600 {
            format!("c{cust}")
        } else {
            "NULL".into()
        };
        expected.push(format!("{id},{cust},{name}"));
    }
    std::fs::write(orders.join("part-0.jsonl"), text).unwrap();
    let text: String = (0..600i64)
        .map(|c| {
            format!(
                "{{\"cust\": {}, \"name\": \"c{}\", \"ts\": {}}}\n",
                c,
                c,
                1_000_000 + c
            )
        })
        .collect();
    std::fs::write(customers.join("part-0.jsonl"), text).unwrap();
    expected.sort();
    expected
}

fn left_join_pipeline(input: &std::path::Path, server: &PgServer, out: &std::path::Path) -> String {
    format!(
        "CREATE TABLE orders (id BIGINT, cust BIGINT, ts BIGINT, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
           WITH ('connector' = 'filesystem', 'path' = '{orders}', 'format' = 'json', 'scan.max-records-per-second' = '4K');
         CREATE TABLE customers (cust BIGINT, name VARCHAR, ts BIGINT, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
           WITH ('connector' = 'filesystem', 'path' = '{customers}', 'format' = 'json', 'scan.max-records-per-second' = '300');
         CREATE TABLE enriched (id BIGINT, cust BIGINT, name VARCHAR, PRIMARY KEY (id))
           WITH ('connector' = 'postgres', 'url' = '{url}', 'create' = 'true');
         CREATE TABLE enriched_log (id BIGINT, cust BIGINT, name VARCHAR)
           WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'debezium-json');
         INSERT INTO enriched SELECT o.id, o.cust, c.name FROM orders o LEFT JOIN customers c ON o.cust = c.cust;
         INSERT INTO enriched_log SELECT o.id, o.cust, c.name FROM orders o LEFT JOIN customers c ON o.cust = c.cust;",
        orders = input.join("orders").display(),
        customers = input.join("customers").display(),
        url = server.url(),
        out = out.display(),
    )
}

#[test]
fn a_left_join_whose_right_side_arrives_late_ends_equal_to_the_batch_answer_through_kills() {
    let server = PgServer::start();
    let dir = tempfile::tempdir().unwrap();
    let expected = write_orders_and_customers(dir.path());
    let out = dir.path().join("log");
    let file = pipeline(
        dir.path(),
        "left_join",
        &left_join_pipeline(dir.path(), &server, &out),
    );
    let state = dir.path().join("state");
    // kill -9 twice, at p2 then p1, then to the end at p3.
    let parallelism = std::cell::Cell::new(0);
    kill_randomly(2, 0x51ed_270b, || {
        parallelism.set(parallelism.get() % 2 + 1);
        run(&file, &state, 3 - parallelism.get())
    });
    succeed(&mut run(&file, &state, 3));
    let table = server
        .rows("SELECT id || ',' || cust || ',' || coalesce(name, 'NULL') FROM enriched ORDER BY 1");
    assert_eq!(table.len(), expected.len());
    assert_eq!(
        table, expected,
        "the LEFT JOIN table differs from the batch answer"
    );
    // The padded rows were published, then withdrawn when their customer came.
    let mut withdrawn_padded = 0;
    for entry in std::fs::read_dir(&out).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            for line in std::fs::read_to_string(&path).unwrap().lines() {
                let v: serde_json::Value = serde_json::from_str(line).unwrap();
                if v["op"] == "d" && v["before"]["name"].is_null() {
                    withdrawn_padded += 1;
                }
            }
        }
    }
    assert!(
        withdrawn_padded > 100,
        "only {withdrawn_padded} padded rows were withdrawn"
    );
}

/// Accounts by id: (region, balance).
type Accounts = BTreeMap<i64, (String, i64)>;

/// Debezium change events of an `accounts` table (id, region, balance, updated_at):
/// inserts, updates (some moving an account to another region) and deletes of the same
/// ids, each id's events in order on partition `id % 2`, and Debezium's tombstone after
/// each delete. Returns the records and the table's final rows.
fn account_changes() -> (Vec<(i32, Vec<u8>, i64)>, Accounts) {
    const REGIONS: [&str; 4] = ["north", "south", "east", "west"];
    let mut live = Accounts::new();
    let mut records = Vec::new();
    let mut x: u64 = 0x2545_f491;
    let mut next = |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    };
    let row = |id: i64, (region, balance): &(String, i64), at: i64| {
        format!(r#"{{"id": {id}, "region": "{region}", "balance": {balance}, "updated_at": {at}}}"#)
    };
    for step in 0..6000i64 {
        let at = 1_000_000 + step;
        let id = next(400) as i64;
        let partition = (id % 2) as i32;
        let value = match live.get(&id).cloned() {
            None => {
                let now = (REGIONS[next(4) as usize].to_string(), next(1000) as i64);
                let event = format!(
                    r#"{{"before": null, "after": {}, "op": "c"}}"#,
                    row(id, &now, at)
                );
                live.insert(id, now);
                event
            }
            Some(old) if next(4) == 0 => {
                live.remove(&id);
                let event = format!(
                    r#"{{"before": {}, "after": null, "op": "d"}}"#,
                    row(id, &old, at)
                );
                records.push((partition, event.into_bytes(), at));
                // Debezium's tombstone for compaction: no change.
                records.push((partition, Vec::new(), at));
                continue;
            }
            Some(old) => {
                let region = if next(3) == 0 {
                    REGIONS[next(4) as usize].to_string()
                } else {
                    old.0.clone()
                };
                let now = (region, next(1000) as i64);
                let event = format!(
                    r#"{{"before": {}, "after": {}, "op": "u", "source": {{"table": "accounts"}}}}"#,
                    row(id, &old, at),
                    row(id, &now, at)
                );
                live.insert(id, now);
                event
            }
        };
        records.push((partition, value.into_bytes(), at));
    }
    (records, live)
}

#[test]
fn debezium_changes_from_kafka_aggregate_into_postgres_as_the_source_table_stands_through_kills() {
    let broker = KafkaBroker::start();
    let server = PgServer::start();
    let dir = tempfile::tempdir().unwrap();
    broker.create_topic("accounts", 2);
    let (records, live) = account_changes();
    broker.produce("accounts", &records);
    let text = format!(
        "CREATE TABLE accounts (id BIGINT, region VARCHAR, balance BIGINT, updated_at BIGINT,
           WATERMARK FOR updated_at AS updated_at - INTERVAL '1' SECOND)
           WITH ('connector' = 'kafka', 'bootstrap.servers' = '{}', 'topic' = 'accounts',
                 'format' = 'debezium-json', 'group.id' = 'riffle-accounts',
                 'scan.bounded.mode' = 'latest-offset', 'scan.max-records-per-second' = '3K');
         CREATE TABLE per_region (region VARCHAR, accounts BIGINT, total BIGINT, PRIMARY KEY (region))
           WITH ('connector' = 'postgres', 'url' = '{}', 'create' = 'true');
         INSERT INTO per_region
           SELECT region, count(*) AS accounts, sum(balance) AS total FROM accounts GROUP BY region;",
        broker.bootstrap,
        server.url()
    );
    let file = pipeline(dir.path(), "accounts", &text);
    let state = dir.path().join("state");
    let parallelism = std::cell::Cell::new(0);
    kill_randomly(3, 0x7f4a_7c15, || {
        parallelism.set(parallelism.get() % 3 + 1);
        run(&file, &state, parallelism.get())
    });
    succeed(&mut run(&file, &state, 2));
    // The source table's final state, aggregated here.
    let mut expected: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for (region, balance) in live.values() {
        let e = expected.entry(region.clone()).or_default();
        e.0 += 1;
        e.1 += balance;
    }
    let expected: Vec<String> = expected
        .iter()
        .map(|(r, (n, total))| format!("{r},{n},{total}"))
        .collect();
    let table = server
        .rows("SELECT region || ',' || accounts || ',' || total FROM per_region ORDER BY region");
    assert_eq!(table, expected);
}
