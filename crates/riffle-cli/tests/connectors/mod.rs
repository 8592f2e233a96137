//! Exactly-once with real systems, as a user runs riffle: a PostgreSQL server and a
//! Kafka-protocol broker started here on 127.0.0.1, pipelines crashed at every crash
//! point of the checkpoint protocol and killed at random, and the tables and topics
//! compared with a crash-free run's; an unbounded job stopped with a savepoint and
//! resumed at another parallelism. This file holds what the tests share.

use crate::common;

use crate::kafka;
#[cfg(feature = "iceberg")]
use crate::{moto, postgres};

mod avro_kafka;
mod cdc_join;
mod errors;
#[cfg(feature = "iceberg")]
mod iceberg;
mod kafka_rescale;
mod kafka_sink;
mod kafka_to_postgres;
mod lost_output;
mod postgres_cdc;
mod postgres_changelog;
mod postgres_sink;
mod upsert_kafka;

use common::{riffle, stderr};
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

/// Starts `job()` `kills` times and kills each (SIGKILL) after a delay from a fixed
/// pseudo-random sequence (xorshift from `seed`) of 100..600 ms: some kills land in
/// recovery and start-up, most mid-run. Fails when a job ends before its kill, with how
/// it ended: a failure is a defect, a success means the input is too small for the test.
fn kill_randomly(kills: usize, mut seed: u64, job: impl Fn() -> Command) {
    let log = std::env::temp_dir().join(format!("riffle-kill-{}-{seed:x}.log", std::process::id()));
    for kill in 0..kills {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let delay = Duration::from_millis(100 + seed % 500);
        let mut child = job()
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while started.elapsed() < delay {
            if let Some(status) = child.try_wait().unwrap() {
                let said = std::fs::read_to_string(&log).unwrap_or_default();
                let _ = std::fs::remove_file(&log);
                panic!(
                    "run {} of {kills} ended ({status}) after {:?}, before its kill at {delay:?}{}:\n{said}",
                    kill + 1,
                    started.elapsed(),
                    if status.success() { ": make the input bigger or slower" } else { "" },
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
    }
    let _ = std::fs::remove_file(&log);
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
            // COMMITTED: the commit marker beside an epoch's manifest (a savepoint's
            // manifest says so itself).
            let marked = path.with_file_name("_committed.json").exists();
            if json["status"] != "COMMITTED" && !(marked && json.get("sink_committables").is_some())
            {
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
