//! The `riffle` binary as a user runs it.

use std::process::Command;

fn riffle() -> Command {
    Command::new(env!("CARGO_BIN_EXE_riffle"))
}

#[test]
fn nexmark_writes_files_and_prints_a_summary() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("q2");
    let result = riffle()
        .args([
            "nexmark",
            "--query",
            "q2",
            "--events",
            "200K",
            "--parallelism",
            "2",
            "--output",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(result.status.success(), "{stderr}");
    assert!(
        stderr.contains("q2 finished") && stderr.contains("late rows dropped 0"),
        "{stderr}"
    );
    let lines: usize = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| {
            std::fs::read_to_string(e.unwrap().path())
                .unwrap()
                .lines()
                .count()
        })
        .sum();
    // Every line is a bid on an auction whose id is a multiple of 123.
    assert!(lines > 0);
    assert!(
        stderr.contains(&format!("/ {lines}")),
        "summary counts the rows written: {stderr}"
    );
}

#[test]
fn bench_prints_json_rows() {
    let result = riffle()
        .args([
            "bench",
            "--queries",
            "q1",
            "--job",
            "peer-window",
            "--events",
            "20K",
            "--peer-events",
            "50K",
            "--runs",
            "1",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        result.status.success(),
        "{}",
        String::from_utf8_lossy(&result.stderr)
    );
    let stdout = String::from_utf8_lossy(&result.stdout);
    let rows: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2, "{stdout}");
    assert_eq!(rows[0]["query"], "q1");
    assert_eq!(rows[0]["rows_out"], 18_400);
    assert_eq!(rows[1]["query"], "peer-window");
    assert!(rows[1]["events_per_second"].as_f64().unwrap() > 0.0);
}

#[test]
fn mistakes_get_clear_errors() {
    let result = riffle()
        .args(["nexmark", "--query", "q6"])
        .output()
        .unwrap();
    assert!(!result.status.success());
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(
        stderr.contains("unknown query `q6`") && stderr.contains("q11"),
        "{stderr}"
    );
    let result = riffle()
        .args([
            "nexmark", "--output", "out", "--format", "xml", "--events", "10",
        ])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&result.stderr).contains("use jsonl, csv or parquet"));
}
