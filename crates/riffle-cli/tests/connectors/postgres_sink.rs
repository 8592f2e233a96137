//! The PostgreSQL sink: append and upsert tables after a crash at every step of the
//! commit protocol, and a connection cut mid-run.

use super::common::stderr;
use super::postgres::PgServer;
use super::{crash, pipeline, run, run_restarting, succeed, CRASH_POINTS};
use std::process::Stdio;
use std::time::{Duration, Instant};

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
    let clean = succeed(&mut run(&file, &dir.path().join("state-clean"), 2));
    assert!(!clean.contains("state restored"), "{clean}");
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
        // The run summary says how long the GROUP BY's state took to restore.
        assert!(resumed.contains("  state restored   in "), "{resumed}");
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

/// A PostgreSQL table belongs to the pipeline whose state first wrote it: another
/// pipeline, or this one after its state was lost, is refused, and so is a start over
/// (`--no-restore`) while the ledger says an earlier run committed rows. Rows in a table
/// cannot be taken back, so `--replace-output` is refused too, saying what to delete.
/// Every refusal leaves the tables as they were.
#[test]
fn a_postgres_table_belongs_to_one_pipeline_and_is_never_written_twice() {
    let server = PgServer::start();
    let dir = tempfile::tempdir().unwrap();
    let text = nexmark_to_postgres(&server, "owned");
    let own = pipeline(dir.path(), "own", &text);
    let state = dir.path().join("state-own");
    succeed(&mut run(&own, &state, 2));
    let written = tables(&server, "owned");
    assert!(!written.0.is_empty());
    let owners = server.rows("SELECT target FROM riffle_output_owners ORDER BY 1");
    assert_eq!(
        owners,
        vec!["public.per_auction_owned", "public.priced_owned"]
    );

    let other = pipeline(dir.path(), "other", &text);
    let refusals = [
        (
            run(&other, &dir.path().join("state-other"), 2),
            "belongs to pipeline `own`",
        ),
        (
            run(&own, &dir.path().join("state-lost"), 2),
            "its state is gone",
        ),
        (
            {
                let mut cmd = run(&own, &state, 2);
                cmd.arg("--no-restore");
                cmd
            },
            "starts from empty state",
        ),
        (
            {
                let mut cmd = run(&other, &dir.path().join("state-other"), 2);
                cmd.arg("--replace-output");
                cmd
            },
            "cannot take back",
        ),
    ];
    for (mut cmd, says) in refusals {
        let out = cmd.output().unwrap();
        let text = stderr(&out);
        assert!(
            !out.status.success() && text.contains(says),
            "{says}: {text}"
        );
        assert_eq!(
            tables(&server, "owned"),
            written,
            "{says}: the tables changed"
        );
    }
}
