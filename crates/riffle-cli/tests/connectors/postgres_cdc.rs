//! `postgres-cdc` end to end: a PostgreSQL table's rows and changes, read through a
//! replication slot, copied into a table keyed by id and aggregated per owner, through
//! eight `kill -9`s at rotating parallelisms and a restore onto two workers, while a
//! writer changes the table (inserts, updates, deletes, primary-key changes, large
//! TOASTed values left unchanged by later updates, one transaction of thousands of rows). Both tables must equal PostgreSQL's
//! own answer over the source table as it ends, and the slot must confirm the changes
//! read, so that PostgreSQL releases their WAL.

use super::postgres::PgServer;
use super::{pipeline, run_restarting};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Rows in the table before the job first starts: at 20 K rows a second the snapshot
/// takes at least a second, so the first two kills (892 and 946 ms after their starts;
/// a restart during the snapshot reads it again) land while it is read.
const FIRST_ROWS: i64 = 20_000;

/// The writer's script: `transactions` small transactions spread over time (one of
/// them thousands of rows long), from a fixed pseudo-random sequence.
fn workload(mut seed: u64, transactions: usize) -> String {
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut script = String::new();
    let mut next_id = FIRST_ROWS;
    for t in 0..transactions {
        script += "BEGIN;\n";
        let at = 1_000_000 + t as i64;
        if t == transactions / 2 {
            // Spans many checkpoints: a kill lands inside it with luck, a checkpoint
            // inside it for sure.
            script += &format!(
                "UPDATE accounts SET balance = balance + 1, updated_at = {at} WHERE id % 7 = 0;\n"
            );
        }
        for _ in 0..1 + next(4) {
            let id = next(next_id as u64) as i64;
            script += &match next(7) {
                0 => format!("UPDATE accounts SET owner = 'o{}', updated_at = {at} WHERE id = {id};\n", next(12)),
                1 => format!("DELETE FROM accounts WHERE id = {id};\n"),
                2 => {
                    next_id += 1;
                    format!("INSERT INTO accounts VALUES ({next_id}, 'o{}', {}, NULL, {at});\n", next(12), next(1000))
                }
                3 => format!("UPDATE accounts SET id = id + 1000000, updated_at = {at} WHERE id = {id} AND id < 1000000;\n"),
                4 => format!(
                    "UPDATE accounts SET note = (SELECT string_agg(md5(random()::text), '') FROM generate_series(1, 100)), updated_at = {at} WHERE id = {id};\n"
                ),
                _ => format!("UPDATE accounts SET balance = balance + {}, updated_at = {at} WHERE id = {id};\n", next(100)),
            };
        }
        script += "COMMIT;\nSELECT pg_sleep(0.01);\n";
    }
    script
}

#[test]
fn a_tables_changes_reach_postgresql_exactly_through_kills_and_rescales() {
    let server = PgServer::start();
    server.psql(
        "riffle",
        &format!(
            "CREATE TABLE accounts (id BIGINT PRIMARY KEY, owner TEXT, balance BIGINT, note TEXT, updated_at BIGINT NOT NULL);
             ALTER TABLE accounts REPLICA IDENTITY FULL;
             INSERT INTO accounts SELECT i, 'o' || (i % 12), i % 1000, NULL, 1 FROM generate_series(0, {}) i;",
            FIRST_ROWS - 1
        ),
    );
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "CREATE TABLE accounts (id BIGINT, owner VARCHAR, balance BIGINT, note VARCHAR, updated_at BIGINT,
           PRIMARY KEY (id) NOT ENFORCED, WATERMARK FOR updated_at AS updated_at - INTERVAL '1' SECOND)
           WITH ('connector' = 'postgres-cdc', 'hostname' = '127.0.0.1', 'port' = '{}',
                 'username' = 'riffle', 'database-name' = 'riffle', 'table-name' = 'accounts',
                 'slot.name' = 'riffle_accounts', 'scan.max-records-per-second' = '20K');
         CREATE TABLE accounts_copy (id BIGINT, owner VARCHAR, balance BIGINT, note VARCHAR, PRIMARY KEY (id))
           WITH ('connector' = 'postgres', 'url' = '{url}', 'create' = 'true');
         CREATE TABLE per_owner (owner VARCHAR, accounts BIGINT, total BIGINT, PRIMARY KEY (owner))
           WITH ('connector' = 'postgres', 'url' = '{url}', 'create' = 'true');
         INSERT INTO accounts_copy SELECT id, owner, balance, note FROM accounts;
         INSERT INTO per_owner SELECT owner, count(*), sum(balance) FROM accounts GROUP BY owner;",
        server.port,
        url = server.url()
    );
    let file = pipeline(dir.path(), "postgres_cdc", &text);
    let state = dir.path().join("state");
    let script = dir.path().join("workload.sql");
    std::fs::write(&script, workload(0x9e37_79b9_7f4a_7c15, 600)).unwrap();

    std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            server.psql_file("riffle", &script);
        });
        let mut seed: u64 = 0x5bd1_e995_2545_f491;
        for kill in 0..8 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let log = dir.path().join(format!("run-{kill}.log"));
            let mut child = run_restarting(&file, &state, kill % 3 + 1)
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .unwrap();
            let started = Instant::now();
            while started.elapsed() < Duration::from_millis(100 + seed % 1500) {
                if child.try_wait().unwrap().is_some() {
                    panic!(
                        "run {kill} stopped by itself: {}",
                        std::fs::read_to_string(&log).unwrap_or_default()
                    );
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            eprintln!(
                "run {kill}:\n{}",
                text.lines()
                    .filter(|l| !l.contains("web page"))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
        writer.join().unwrap();
    });
    let written_up_to = server.rows("SELECT pg_current_wal_lsn()").join("");

    // The job never ends: run it, restored onto two workers, until both tables equal
    // PostgreSQL's answer.
    let log = dir.path().join("last.log");
    let mut last = run_restarting(&file, &state, 2)
        .args(["--workers", "2"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let copy = "SELECT id || ',' || owner || ',' || balance || ',' || md5(coalesce(note, '')) FROM {} ORDER BY id";
    let owners = "SELECT owner || ',' || accounts || ',' || total FROM per_owner ORDER BY 1";
    let expected_owners = "SELECT owner || ',' || count(*) || ',' || sum(balance) FROM accounts GROUP BY owner ORDER BY 1";
    let source = server.rows(&copy.replace("{}", "accounts"));
    let expected = server.rows(expected_owners);
    assert!(
        source.len() > 15_000 && expected.len() == 12,
        "{} rows",
        source.len()
    );
    let started = Instant::now();
    let (mut got_copy, mut got_owners) = (Vec::new(), Vec::new());
    while started.elapsed() < Duration::from_secs(90) {
        assert!(
            last.try_wait().unwrap().is_none(),
            "the job stopped: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        got_copy = server.rows(&copy.replace("{}", "accounts_copy"));
        got_owners = server.rows(owners);
        if got_copy == source && got_owners == expected {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let confirmed = || {
        server.rows(&format!(
            "SELECT confirmed_flush_lsn >= '{written_up_to}'::pg_lsn FROM pg_replication_slots WHERE slot_name = 'riffle_accounts'"
        ))
    };
    let waited = Instant::now();
    while confirmed() != ["t"] && waited.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(200));
    }
    let lag = server.rows(
        "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn) FROM pg_replication_slots",
    );
    // As Ctrl-C would: stop the job (its workers too) with a savepoint.
    // SAFETY: signalling a process this test started.
    unsafe { libc::kill(last.id() as i32, libc::SIGTERM) };
    let stopped = last.wait().unwrap();
    let log = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(stopped.success(), "the stop failed: {log}");
    if let Err(e) = crate::common::same_rows(&got_copy, &source, "PostgreSQL's table") {
        panic!("the copy keyed by id: {e}\n{log}");
    }
    if let Err(e) = crate::common::same_rows(&got_owners, &expected, "PostgreSQL's GROUP BY") {
        panic!("per owner: {e}\n{log}");
    }
    assert_eq!(
        confirmed(),
        ["t"],
        "the slot did not confirm what was read (WAL behind it: {lag:?} bytes)\n{log}"
    );
    eprintln!("postgres-cdc: slot lag after catching up: {lag:?} bytes");
    assert!(server.rows("SELECT gid FROM pg_prepared_xacts").is_empty());
}

/// Runs `file` on `state` until `done` holds, then kills it (the job never ends).
fn run_until(file: &std::path::Path, state: &std::path::Path, done: impl Fn() -> bool) {
    let log = state.with_extension("log");
    let mut job = run_restarting(file, state, 1)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !done() {
        let stopped = job.try_wait().unwrap().is_some();
        if stopped || started.elapsed() > Duration::from_secs(60) {
            let _ = job.kill();
            panic!(
                "the job {}: {}",
                if stopped {
                    "stopped"
                } else {
                    "did not get there"
                },
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    job.kill().unwrap();
    job.wait().unwrap();
}

/// An operator restores a backup of the state root taken before the slot confirmed
/// later changes: PostgreSQL would stream from the slot's position, past changes the
/// backup never saw. The restore is refused, naming both positions, and the table
/// written keeps what it had. A TRUNCATE of the table stops the job with a message.
#[test]
fn a_restore_older_than_the_slot_and_a_truncate_are_refused() {
    let server = PgServer::start();
    server.psql(
        "riffle",
        "CREATE TABLE items (id BIGINT PRIMARY KEY, v BIGINT, at BIGINT NOT NULL);
         INSERT INTO items SELECT i, 0, 1 FROM generate_series(1, 100) i;
         CREATE TABLE items_copy (id BIGINT PRIMARY KEY, v BIGINT);",
    );
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "CREATE TABLE items (id BIGINT, v BIGINT, at BIGINT,
           PRIMARY KEY (id) NOT ENFORCED, WATERMARK FOR at AS at)
           WITH ('connector' = 'postgres-cdc', 'hostname' = '127.0.0.1', 'port' = '{}',
                 'username' = 'riffle', 'database-name' = 'riffle', 'table-name' = 'items',
                 'slot.name' = 'riffle_items');
         CREATE TABLE items_copy (id BIGINT, v BIGINT, PRIMARY KEY (id))
           WITH ('connector' = 'postgres', 'url' = '{}', 'create' = 'true');
         INSERT INTO items_copy SELECT id, v FROM items;",
        server.port,
        server.url()
    );
    let file = pipeline(dir.path(), "items", &text);
    let (state, backup) = (dir.path().join("state"), dir.path().join("backup"));
    let sum = || {
        server
            .rows("SELECT count(*) || ',' || coalesce(sum(v), 0) FROM items_copy")
            .join("")
    };
    run_until(&file, &state, || sum() == "100,0");
    crate::common::copy_dir(&state, &backup);
    server.psql("riffle", "UPDATE items SET v = 1, at = 2;");
    let confirmed_past = |lsn: &str| {
        server.rows(&format!(
            "SELECT confirmed_flush_lsn >= '{lsn}'::pg_lsn FROM pg_replication_slots WHERE slot_name = 'riffle_items'"
        )) == ["t"]
    };
    let after_update = server.rows("SELECT pg_current_wal_lsn()").join("");
    run_until(&file, &state, || {
        sum() == "100,100" && confirmed_past(&after_update)
    });

    let out = super::run(&file, &backup, 1).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the old backup resumed: {stderr}");
    assert!(
        stderr.contains("past this checkpoint's position"),
        "not refused for the slot's position: {stderr}"
    );
    assert_eq!(sum(), "100,100", "the refused run changed the table");

    server.psql("riffle", "TRUNCATE items;");
    let out = super::run(&file, &state, 1).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("was truncated"),
        "a TRUNCATE went by: {stderr}"
    );
    assert_eq!(sum(), "100,100");
}

/// Tables whose changes could not be read exactly are refused before anything is read,
/// each naming what to change: a declared key narrower than the table's, a partitioned
/// table, a publication that leaves deletes out, a password written inline.
#[test]
fn tables_whose_changes_would_mislead_are_refused() {
    let server = PgServer::start();
    server.psql(
        "riffle",
        "CREATE TABLE pairs (a BIGINT, b BIGINT, at BIGINT NOT NULL, PRIMARY KEY (a, b));
         CREATE TABLE parted (id BIGINT PRIMARY KEY, at BIGINT NOT NULL) PARTITION BY RANGE (id);
         CREATE TABLE plain (id BIGINT PRIMARY KEY, at BIGINT NOT NULL);
         CREATE PUBLICATION inserts_only FOR TABLE plain WITH (publish = 'insert, update');",
    );
    let dir = tempfile::tempdir().unwrap();
    let refusal = |name: &str, columns: &str, key: &str, extra: &str| {
        let text = format!(
            "CREATE TABLE {name} ({columns}, at BIGINT, PRIMARY KEY ({key}) NOT ENFORCED, WATERMARK FOR at AS at)
               WITH ('connector' = 'postgres-cdc', 'hostname' = '127.0.0.1', 'port' = '{}',
                     'username' = 'riffle', 'database-name' = 'riffle', 'table-name' = '{name}',
                     'slot.name' = 'riffle_{name}'{extra});
             CREATE TABLE out_{name} WITH ('connector' = 'blackhole');
             INSERT INTO out_{name} SELECT * FROM {name};",
            server.port
        );
        let file = pipeline(dir.path(), name, &text);
        let out = super::run(&file, &dir.path().join(format!("state-{name}")), 1)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{name} was read");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let narrower = refusal("pairs", "a BIGINT, b BIGINT", "a", "");
    assert!(narrower.contains("is not a key of"), "{narrower}");
    let parted = refusal("parted", "id BIGINT", "id", "");
    assert!(parted.contains("a partitioned table"), "{parted}");
    let deletes = refusal(
        "plain",
        "id BIGINT",
        "id",
        ", 'debezium.publication.name' = 'inserts_only'",
    );
    assert!(
        deletes.contains("does not publish every insert, update, delete"),
        "{deletes}"
    );
    let inline = refusal("plain", "id BIGINT", "id", ", 'password' = 'secret'");
    assert!(
        inline.contains("password.env") && !inline.contains("secret'"),
        "{inline}"
    );
    assert!(
        server
            .rows("SELECT slot_name FROM pg_replication_slots")
            .is_empty(),
        "a refused table left a slot behind"
    );
}
