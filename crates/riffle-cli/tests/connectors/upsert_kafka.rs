//! An `upsert-kafka` table read and written through a real broker (tansu): a compacted
//! topic of accounts — each record the account's whole new row, a tombstone deleting it,
//! keys as JSON objects or bare text — copied and aggregated into PostgreSQL and into
//! another upsert topic. Through `kill -9`s and restores at other parallelisms, the
//! copy must equal the topic's final state, and both aggregates that state's totals.

use super::kafka::{KafkaBroker, KeyedInput};
use super::postgres::PgServer;
use super::{committed_transactions, kill_randomly, pipeline, run, succeed};
use std::collections::BTreeMap;

/// id → (region, balance).
type Accounts = BTreeMap<i64, (String, i64)>;

/// Upserts and deletes of accounts, each id's records in order on partition `id % 2`,
/// a few tombstones of ids never seen (compacted away before the job started), and
/// repeated rows. Returns the records and the final rows.
fn account_upserts() -> (Vec<KeyedInput>, Accounts) {
    const REGIONS: [&str; 3] = ["north", "south", "east"];
    let mut live = Accounts::new();
    let mut records = Vec::new();
    let mut x: u64 = 0x9e37_79b9;
    let mut next = |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    };
    for step in 0..5000i64 {
        let at = 1_000_000 + step;
        let id = next(300) as i64;
        // Half the keys as Flink writes them, half as bare text.
        let key = if id % 4 < 2 {
            format!(r#"{{"id": {id}}}"#)
        } else {
            id.to_string()
        };
        let partition = (id % 2) as i32;
        let value = if live.contains_key(&id) && next(5) == 0 {
            live.remove(&id);
            None
        } else if !live.contains_key(&id) && next(20) == 0 {
            // A delete of an id that is not there changes nothing.
            None
        } else {
            let now = match live.get(&id) {
                // The same row again: no change.
                Some(old) if next(10) == 0 => old.clone(),
                _ => (REGIONS[next(3) as usize].to_string(), next(1000) as i64),
            };
            let row = format!(
                r#"{{"id": {id}, "region": "{}", "balance": {}, "updated_at": {at}}}"#,
                now.0, now.1
            );
            live.insert(id, now);
            Some(row.into_bytes())
        };
        records.push((partition, Some(key.into_bytes()), value, at));
    }
    (records, live)
}

#[test]
fn an_upsert_topic_copied_and_aggregated_ends_as_its_final_state_through_kills() {
    let broker = KafkaBroker::start();
    let server = PgServer::start();
    let dir = tempfile::tempdir().unwrap();
    broker.create_topic("accounts", 2);
    broker.create_topic("regions", 2);
    let (records, live) = account_upserts();
    broker.produce_keyed("accounts", &records);
    let text = format!(
        "CREATE TABLE accounts (id BIGINT, region VARCHAR, balance BIGINT, updated_at BIGINT,
           PRIMARY KEY (id) NOT ENFORCED,
           WATERMARK FOR updated_at AS updated_at - INTERVAL '1' SECOND)
           WITH ('connector' = 'upsert-kafka', 'bootstrap.servers' = '{kafka}', 'topic' = 'accounts',
                 'key.format' = 'json', 'value.format' = 'json',
                 'scan.bounded.mode' = 'latest-offset', 'scan.max-records-per-second' = '3K');
         CREATE TABLE copy (id BIGINT, region VARCHAR, balance BIGINT, PRIMARY KEY (id))
           WITH ('connector' = 'postgres', 'url' = '{pg}', 'create' = 'true');
         CREATE TABLE per_region (region VARCHAR, accounts BIGINT, total BIGINT, PRIMARY KEY (region))
           WITH ('connector' = 'postgres', 'url' = '{pg}', 'create' = 'true');
         CREATE TABLE regions (region VARCHAR, accounts BIGINT, total BIGINT, PRIMARY KEY (region) NOT ENFORCED)
           WITH ('connector' = 'upsert-kafka', 'bootstrap.servers' = '{kafka}', 'topic' = 'regions');
         INSERT INTO copy SELECT id, region, balance FROM accounts;
         INSERT INTO per_region
           SELECT region, count(*) AS accounts, sum(balance) AS total FROM accounts GROUP BY region;
         INSERT INTO regions
           SELECT region, count(*) AS accounts, sum(balance) AS total FROM accounts GROUP BY region;",
        kafka = broker.bootstrap,
        pg = server.url()
    );
    let file = pipeline(dir.path(), "upserts", &text);
    let state = dir.path().join("state");
    let parallelism = std::cell::Cell::new(0);
    kill_randomly(3, 0x51ed_270b, || {
        parallelism.set(parallelism.get() % 3 + 1);
        run(&file, &state, parallelism.get())
    });
    succeed(&mut run(&file, &state, 2));

    let copy = server.rows("SELECT id || ',' || region || ',' || balance FROM copy ORDER BY id");
    let expected: Vec<String> = live
        .iter()
        .map(|(id, (region, balance))| format!("{id},{region},{balance}"))
        .collect();
    assert_eq!(copy, expected, "the copy is the topic's final state");

    let mut totals: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for (region, balance) in live.values() {
        let t = totals.entry(region.clone()).or_default();
        t.0 += 1;
        t.1 += balance;
    }
    let totals: Vec<String> = totals
        .iter()
        .map(|(r, (n, total))| format!("{r},{n},{total}"))
        .collect();
    let table = server
        .rows("SELECT region || ',' || accounts || ',' || total FROM per_region ORDER BY region");
    assert_eq!(table, totals);

    // The upsert topic written: keys are JSON objects of the key; replayed, it holds
    // the same totals.
    let committed = committed_transactions(&state);
    let mut now: BTreeMap<String, String> = BTreeMap::new();
    for (key, value) in broker.committed_keyed("regions", 2, &committed) {
        let key: serde_json::Value =
            serde_json::from_slice(&key.expect("an upsert topic's records are keyed")).unwrap();
        let region = key["region"].as_str().expect("a JSON key").to_string();
        match value {
            None => {
                now.remove(&region);
            }
            Some(value) => {
                let row: serde_json::Value = serde_json::from_slice(&value).unwrap();
                now.insert(
                    region.clone(),
                    format!("{region},{},{}", row["accounts"], row["total"]),
                );
            }
        }
    }
    assert_eq!(now.into_values().collect::<Vec<_>>(), totals);
}
