//! The peer window job written in SQL over a `sequence` table, the form
//! `riffle bench --workers` runs: in one process and on two workers its committed output
//! equals DuckDB's answer over the same rows.

use crate::common;

use common::riffle;
use std::path::Path;

const EVENTS: u64 = 3_000_000;

fn pipeline(out: &Path) -> String {
    format!(
        "CREATE TABLE peer (id BIGINT, k BIGINT, v BIGINT, ts TIMESTAMP(3), \
           WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) \
         WITH ('connector' = 'sequence', 'events' = '{EVENTS}', 'batch_rows' = '5000');
         CREATE TABLE out WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
         INSERT INTO out
         SELECT k, window_start, window_end, COUNT(*) AS cnt, SUM(v) AS sum_v
         FROM TABLE(TUMBLE(TABLE peer, DESCRIPTOR(ts), INTERVAL '10' SECOND))
         GROUP BY k, window_start, window_end;",
        out.display()
    )
}

/// Runs the job at `parallelism` on `workers` processes (1: in the `riffle run`
/// process) and compares its output with DuckDB's; returns the rows compared.
fn agrees_with_duckdb(parallelism: usize, workers: usize) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let file = dir.path().join("peer_window.sql");
    std::fs::write(&file, pipeline(&out)).unwrap();
    let mut cmd = riffle();
    cmd.arg("run")
        .arg(&file)
        .args([
            "-p",
            &parallelism.to_string(),
            "--workers",
            &workers.to_string(),
        ])
        .args(["--checkpoint-interval", "100ms", "--state"])
        .arg(dir.path().join("state"));
    let run = cmd.output().unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let python = std::env::var("RIFFLE_DUCKDB_PYTHON").expect(
        "RIFFLE_DUCKDB_PYTHON names a Python with the duckdb package; scripts/test installs it",
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/common/peer_window_answer.py");
    let answer = std::process::Command::new(python)
        .arg(script)
        .args([EVENTS.to_string(), parallelism.to_string()])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        answer.status.success(),
        "DuckDB: {}",
        String::from_utf8_lossy(&answer.stderr)
    );
    let answer: serde_json::Value = serde_json::from_slice(&answer.stdout).unwrap();
    assert_eq!(answer["missing"], serde_json::json!([]), "{answer}");
    assert_eq!(answer["extra"], serde_json::json!([]), "{answer}");
    answer["rows"].as_u64().unwrap()
}

#[test]
fn the_peer_window_job_in_sql_equals_duckdb_in_one_process_and_on_two_workers() {
    // 3 M rows at 100,000 per event-second: three 10 s windows of 1,000 keys.
    assert_eq!(agrees_with_duckdb(2, 1), 3000);
    assert_eq!(agrees_with_duckdb(3, 2), 3000);
}

#[test]
fn a_sequence_table_with_other_columns_is_refused_naming_its_columns() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.sql");
    std::fs::write(
        &file,
        "CREATE TABLE peer (id BIGINT, ts TIMESTAMP(3)) WITH ('connector' = 'sequence', 'events' = '10');
         CREATE TABLE out WITH ('connector' = 'blackhole');
         INSERT INTO out SELECT id FROM peer;",
    )
    .unwrap();
    let run = riffle().arg("run").arg(&file).output().unwrap();
    let text = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success());
    assert!(text.contains("(id, k, v, ts)"), "{text}");
}
