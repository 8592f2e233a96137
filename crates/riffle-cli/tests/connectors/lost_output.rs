//! Sinks that lost epochs riffle's checkpoints record as committed, changed between
//! runs as an operator might: a PostgreSQL ledger dropped and its table truncated (the
//! Iceberg catalog restored from an older backup, or deleted, is in
//! `iceberg_lost_output.rs`). Recovery refuses, naming the missing epochs, and changes
//! nothing (docs/engine.md, "Output a sink lost").

use super::common::stderr;
use super::kafka::KafkaBroker;
use super::postgres::PgServer;
use super::{committed_transactions, crash, example, pipeline, run, succeed};

/// Runs `cmd`, requires that recovery refused it for lost output, and returns its
/// standard error.
pub(super) fn refused_for_lost_output(cmd: &mut std::process::Command) -> String {
    let out = cmd.output().unwrap();
    let text = stderr(&out);
    assert!(!out.status.success(), "the run was not refused:\n{text}");
    assert!(
        text.contains("no longer holds epoch(s)") && text.contains("nothing was changed"),
        "{text}"
    );
    text
}

/// The PostgreSQL sink's ledger dropped and its table truncated (an operator "starting
/// over" by hand while the state stays): the resumed run would go on from epoch 3
/// without the rows of epochs 1..=3.
#[test]
fn a_postgres_table_truncated_with_its_ledger_dropped_is_refused() {
    let server = PgServer::start();
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "CREATE TABLE bid (WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND)
           WITH ('connector' = 'nexmark', 'event_type' = 'bid', 'events' = '60K', 'throttle' = '30K', 'block_events' = '500');
         CREATE TABLE bids_lost WITH ('connector' = 'postgres', 'url' = '{url}', 'create' = 'true');
         INSERT INTO bids_lost SELECT auction, bidder, price, date_time FROM bid;",
        url = server.url()
    );
    let file = pipeline(dir.path(), "lost", &text);
    let state = dir.path().join("state");
    crash(&mut run(&file, &state, 2), "after-latest-flip:3");
    assert!(!server.rows("SELECT 1 FROM bids_lost LIMIT 1").is_empty());
    server.psql(
        "riffle",
        "DROP TABLE riffle_sink_ledger; TRUNCATE bids_lost;",
    );
    let text = refused_for_lost_output(&mut run(&file, &state, 2));
    assert!(text.contains("bids_lost"), "{text}");
    assert!(server.rows("SELECT 1 FROM bids_lost LIMIT 1").is_empty());
    // Started over from empty state, the table is written again.
    succeed(run(&file, &state, 2).arg("--no-restore"));
    assert!(!server.rows("SELECT 1 FROM bids_lost LIMIT 1").is_empty());
}

/// The Kafka sink's topic deleted and made anew between runs: its records of epochs
/// 1..=10 are gone, though the sink's ledger group may still say they committed.
#[test]
fn a_kafka_topic_deleted_and_made_anew_is_refused() {
    let broker = KafkaBroker::start();
    let dir = tempfile::tempdir().unwrap();
    broker.create_topic("lost", 1);
    let text = example("nexmark_to_kafka")
        .replace("127.0.0.1:9092", &broker.bootstrap)
        .replace("'topic' = 'bids'", "'topic' = 'lost'")
        .replace(
            "'events' = '50K'",
            "'events' = '30K', 'throttle' = '20K', 'block_events' = '500'",
        )
        .replace("  'properties.batch.num.messages' = '1',\n", "");
    let file = pipeline(dir.path(), "lost", &text);
    let state = dir.path().join("state");
    crash(&mut run(&file, &state, 2), "after-latest-flip:10");
    assert!(!committed_transactions(&state).is_empty());
    broker.delete_topic("lost");
    broker.create_topic("lost", 1);
    let text = refused_for_lost_output(&mut run(&file, &state, 2));
    assert!(text.contains("kafka(lost"), "{text}");
}
