//! Two databases' change streams joined: Debezium events of `accounts` and of `regions`
//! on Kafka, joined on the region — aggregated per region and manager into one table,
//! and as a LEFT JOIN keyed by the account into another — through ten `kill -9`s at
//! rotating parallelisms. Both tables must equal PostgreSQL's own answer to the same
//! SQL over the source tables' final state: its executor shares nothing with riffle's.
//! Accounts move between regions, so a row's new pair and its old pair's withdrawal
//! leave different join subtasks (the account table puts them back in order per id);
//! regions change managers and are deleted and created again, so padded rows come and go.

use super::kafka::KafkaBroker;
use super::postgres::PgServer;
use super::{kill_randomly, pipeline, run, succeed};
use std::collections::BTreeMap;

const REGIONS: [&str; 5] = ["north", "south", "east", "west", "central"];
const MANAGERS: [&str; 3] = ["ann", "bo", "cy"];

/// Kafka records (partition, value, timestamp) of one topic.
type Records = Vec<(i32, Vec<u8>, i64)>;

/// The change events of both tables, and each table's final rows.
struct Changes {
    accounts: Records,
    regions: Records,
    /// id → (region, balance).
    live_accounts: BTreeMap<i64, (String, i64)>,
    /// region → (manager, bonus).
    live_regions: BTreeMap<String, (String, i64)>,
    moves: usize,
    region_deletes: usize,
}

/// A Debezium event of `before` → `after` (either JSON or `null`), and its tombstone
/// after a delete.
fn event(records: &mut Records, partition: i32, before: &str, after: &str, at: i64) {
    let op = match (before, after) {
        ("null", _) => "c",
        (_, "null") => "d",
        _ => "u",
    };
    let value = format!(r#"{{"before": {before}, "after": {after}, "op": "{op}"}}"#);
    records.push((partition, value.into_bytes(), at));
    if op == "d" {
        records.push((partition, Vec::new(), at));
    }
}

fn changes() -> Changes {
    let mut x: u64 = 0x51_7cc1_b727;
    let mut next = |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    };
    let account = |id: i64, (region, balance): &(String, i64), at: i64| {
        format!(r#"{{"id": {id}, "region": "{region}", "balance": {balance}, "updated_at": {at}}}"#)
    };
    let region = |name: &str, (manager, bonus): &(String, i64), at: i64| {
        format!(
            r#"{{"region": "{name}", "manager": "{manager}", "bonus": {bonus}, "updated_at": {at}}}"#
        )
    };
    let mut c = Changes {
        accounts: Vec::new(),
        regions: Vec::new(),
        live_accounts: BTreeMap::new(),
        live_regions: BTreeMap::new(),
        moves: 0,
        region_deletes: 0,
    };
    for name in REGIONS {
        let now = (MANAGERS[next(3) as usize].to_string(), next(100) as i64);
        event(
            &mut c.regions,
            0,
            "null",
            &region(name, &now, 999_999),
            999_999,
        );
        c.live_regions.insert(name.to_string(), now);
    }
    for step in 0..12_000i64 {
        let at = 1_000_000 + step;
        if next(30) == 0 {
            let name = REGIONS[next(5) as usize];
            let now = (MANAGERS[next(3) as usize].to_string(), next(100) as i64);
            match c.live_regions.get(name).cloned() {
                Some(old) if next(4) == 0 => {
                    event(&mut c.regions, 0, &region(name, &old, at), "null", at);
                    c.live_regions.remove(name);
                    c.region_deletes += 1;
                }
                Some(old) => {
                    event(
                        &mut c.regions,
                        0,
                        &region(name, &old, at),
                        &region(name, &now, at),
                        at,
                    );
                    c.live_regions.insert(name.to_string(), now);
                }
                None => {
                    event(&mut c.regions, 0, "null", &region(name, &now, at), at);
                    c.live_regions.insert(name.to_string(), now);
                }
            }
        }
        let id = next(400) as i64;
        let partition = (id % 2) as i32;
        match c.live_accounts.get(&id).cloned() {
            None => {
                let now = (REGIONS[next(4) as usize].to_string(), next(1000) as i64);
                event(
                    &mut c.accounts,
                    partition,
                    "null",
                    &account(id, &now, at),
                    at,
                );
                c.live_accounts.insert(id, now);
            }
            Some(old) if next(5) == 0 => {
                event(
                    &mut c.accounts,
                    partition,
                    &account(id, &old, at),
                    "null",
                    at,
                );
                c.live_accounts.remove(&id);
            }
            Some(old) => {
                let region = if next(3) == 0 {
                    c.moves += 1;
                    REGIONS[next(4) as usize].to_string()
                } else {
                    old.0.clone()
                };
                let now = (region, next(1000) as i64);
                let (before, after) = (account(id, &old, at), account(id, &now, at));
                event(&mut c.accounts, partition, &before, &after, at);
                c.live_accounts.insert(id, now);
            }
        }
    }
    c
}

#[test]
fn two_change_streams_joined_into_postgres_equal_postgres_own_join_through_ten_kills() {
    let broker = KafkaBroker::start();
    let server = PgServer::start();
    let dir = tempfile::tempdir().unwrap();
    let c = changes();
    assert!(
        c.moves > 500 && c.region_deletes > 2,
        "{} moves, {} deletes",
        c.moves,
        c.region_deletes
    );
    broker.create_topic("accounts", 2);
    broker.create_topic("regions", 1);
    broker.produce("accounts", &c.accounts);
    broker.produce("regions", &c.regions);
    let source = |name: &str, columns: &str| {
        format!(
            "CREATE TABLE {name} ({columns}, updated_at BIGINT,
               WATERMARK FOR updated_at AS updated_at - INTERVAL '1' SECOND)
               WITH ('connector' = 'kafka', 'bootstrap.servers' = '{}', 'topic' = '{name}',
                     'format' = 'debezium-json', 'group.id' = 'riffle-{name}',
                     'scan.bounded.mode' = 'latest-offset', 'scan.max-records-per-second' = '3K');\n",
            broker.bootstrap
        )
    };
    let url = server.url();
    let text = source("accounts", "id BIGINT, region VARCHAR, balance BIGINT")
        + &source("regions", "region VARCHAR, manager VARCHAR, bonus BIGINT")
        + &format!(
            "CREATE TABLE per_manager (region VARCHAR, manager VARCHAR, accounts BIGINT, total BIGINT, PRIMARY KEY (region, manager))
               WITH ('connector' = 'postgres', 'url' = '{url}', 'create' = 'true');
             CREATE TABLE account_view (id BIGINT, balance BIGINT, region VARCHAR, manager VARCHAR, PRIMARY KEY (id))
               WITH ('connector' = 'postgres', 'url' = '{url}', 'create' = 'true');
             INSERT INTO per_manager
               SELECT r.region, r.manager, count(*) AS accounts, sum(a.balance + r.bonus) AS total
               FROM accounts a JOIN regions r ON a.region = r.region GROUP BY r.region, r.manager;
             INSERT INTO account_view
               SELECT a.id, a.balance, a.region, r.manager FROM accounts a LEFT JOIN regions r ON a.region = r.region;"
        );
    let file = pipeline(dir.path(), "cdc_join", &text);
    let state = dir.path().join("state");
    let parallelism = std::cell::Cell::new(0);
    kill_randomly(10, 0x2545_f491_4f6c_dd1d, || {
        parallelism.set(parallelism.get() % 3 + 1);
        run(&file, &state, parallelism.get())
    });
    let last = succeed(&mut run(&file, &state, 2));
    assert!(last.contains("from checkpoint epoch"), "{last}");

    // PostgreSQL's answer over the source tables as they stand.
    let mut load = String::from(
        "CREATE TABLE accounts_final (id BIGINT, region TEXT, balance BIGINT);
         CREATE TABLE regions_final (region TEXT, manager TEXT, bonus BIGINT);",
    );
    for (id, (region, balance)) in &c.live_accounts {
        load += &format!("INSERT INTO accounts_final VALUES ({id}, '{region}', {balance});");
    }
    for (region, (manager, bonus)) in &c.live_regions {
        load += &format!("INSERT INTO regions_final VALUES ('{region}', '{manager}', {bonus});");
    }
    server.psql("riffle", &load);
    let compare = |riffle_sql: &str, postgres_sql: &str, what: &str| {
        let (got, expected) = (server.rows(riffle_sql), server.rows(postgres_sql));
        assert!(
            expected.len() >= 2,
            "{what}: too few rows to prove anything: {expected:?}"
        );
        if let Err(e) = crate::common::same_rows(&got, &expected, "PostgreSQL") {
            panic!("{what}: {e}");
        }
    };
    compare(
        "SELECT region || ',' || manager || ',' || accounts || ',' || total FROM per_manager ORDER BY 1",
        "SELECT r.region || ',' || r.manager || ',' || count(*) || ',' || sum(a.balance + r.bonus)
           FROM accounts_final a JOIN regions_final r ON a.region = r.region GROUP BY r.region, r.manager ORDER BY 1",
        "per region and manager",
    );
    compare(
        "SELECT id || ',' || balance || ',' || region || ',' || coalesce(manager, '-') FROM account_view ORDER BY 1",
        "SELECT a.id || ',' || a.balance || ',' || a.region || ',' || coalesce(r.manager, '-')
           FROM accounts_final a LEFT JOIN regions_final r ON a.region = r.region ORDER BY 1",
        "accounts with their managers",
    );
    assert!(server.rows("SELECT gid FROM pg_prepared_xacts").is_empty());
}
