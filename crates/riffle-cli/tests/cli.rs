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
        .filter(|e| {
            !e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with('.')
        })
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

/// `riffle bench --sinks`: q0 into Parquet files and each Iceberg variant (the suite
/// builds the `iceberg` feature), a table row per sink, the first the baseline.
#[test]
fn bench_compares_parquet_files_with_iceberg_tables() {
    let state = tempfile::tempdir().unwrap();
    let result = riffle()
        .args(["bench", "--sinks", "--events", "20K", "--runs", "1"])
        .args(["--checkpoint-interval", "20ms", "--state"])
        .arg(state.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(result.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&result.stdout);
    let rows: Vec<&str> = stdout.lines().filter(|l| l.starts_with("| ")).collect();
    assert_eq!(rows.len(), 8, "{stdout}");
    assert!(
        rows[0].starts_with("| sink (q0, 20.0 K events, p2, 20 ms checkpoints"),
        "{stdout}"
    );
    assert!(
        rows[1].starts_with("| filesystem, Parquet (uncompressed) |")
            && rows[1].contains("| 1.00 |"),
        "{stdout}"
    );
    for (row, name) in rows[2..].iter().zip([
        "Snappy",
        "'zstd'",
        "'lz4'",
        "uncompressed",
        "bucket(8, auction)",
        "'epochs-per-commit' = '10'",
    ]) {
        assert!(
            row.starts_with("| Iceberg, ") && row.contains(name),
            "{stdout}"
        );
    }
    // Every run cleaned up after itself.
    assert_eq!(
        std::fs::read_dir(state.path()).unwrap().count(),
        0,
        "{stdout}"
    );
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
    // --max-parallelism applies before the graph is checked against it.
    let result = riffle()
        .args(["nexmark", "--query", "q1", "--events", "2K"])
        .args(["--parallelism", "130", "--max-parallelism", "256"])
        .output()
        .unwrap();
    assert!(
        result.status.success(),
        "{}",
        String::from_utf8_lossy(&result.stderr)
    );
    let result = riffle()
        .args(["nexmark", "--query", "q1", "--events", "2K"])
        .args(["--parallelism", "300", "--max-parallelism", "256"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&result.stderr)
        .contains("--parallelism 300 exceeds --max-parallelism 256"));
}

#[test]
fn a_killed_checkpointed_run_resumes_from_its_newest_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let args = |extra: &[&str]| {
        let mut cmd = riffle();
        cmd.args([
            "nexmark",
            "--query",
            "q11",
            "--rate",
            "100K",
            "--checkpoint-interval",
            "20ms",
            "--state",
        ])
        .arg(&state)
        .args(extra);
        cmd
    };
    // A long run, killed (SIGKILL) once a checkpoint has committed.
    let mut child = args(&["--events", "500M"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let listed = loop {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let list = riffle()
            .args([
                "checkpoints",
                "list",
                "--pipeline",
                "nexmark-q11",
                "--state",
            ])
            .arg(&state)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&list.stdout).to_string();
        if text.contains("COMMITTED") || std::time::Instant::now() > deadline {
            break text;
        }
    };
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        listed.contains("COMMITTED"),
        "no checkpoint committed within a minute: {listed}"
    );

    // The same pipeline resumes; a different one (other event count) is refused.
    let history = || {
        let out = riffle()
            .args([
                "checkpoints",
                "history",
                "--pipeline",
                "nexmark-q11",
                "--state",
            ])
            .arg(&state)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let records = || {
        history()
            .lines()
            .filter(|l| l.contains(" generation "))
            .count()
    };
    let before = records();
    let other = args(&["--events", "1M"]).output().unwrap();
    assert!(!other.status.success());
    assert!(
        String::from_utf8_lossy(&other.stderr).contains("different pipeline"),
        "{}",
        String::from_utf8_lossy(&other.stderr)
    );
    // The refusal changed nothing on storage: no new recovery record.
    assert_eq!(records(), before, "a refused start wrote a recovery record");
    let mut resumed = args(&["--events", "500M"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = resumed.stderr.take().unwrap();
    let mut first_lines = String::new();
    let mut buf = [0u8; 4096];
    while !first_lines.contains("source offsets") && !first_lines.contains("starting from empty") {
        let n = std::io::Read::read(&mut stderr, &mut buf).unwrap();
        assert!(n > 0, "riffle exited early: {first_lines}");
        first_lines.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    resumed.kill().unwrap();
    resumed.wait().unwrap();
    assert!(
        first_lines.contains("resuming `nexmark-q11` from checkpoint epoch"),
        "{first_lines}"
    );
    assert!(history().contains("restored epoch "), "{}", history());
}

/// `riffle explain … | head -1` and the like: a reader that stops early ends the
/// report quietly, as it would `ls`, instead of a panic with a backtrace.
#[test]
fn a_report_into_a_closed_pipe_ends_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let q5 = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/nexmark/q5.sql");
    let mut child = riffle()
        .args(["explain", q5])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the reader is gone before the first line
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        output.status.success() || output.status.signal() == Some(libc::SIGPIPE),
        "{:?} {stderr}",
        output.status
    );
}

/// `--state-memory` bounds only the unbounded GROUP BY today: a run says which of its
/// stateful operators hold their state outside the budget, and says nothing when every
/// one keeps to it.
#[test]
fn a_run_names_the_operators_whose_state_the_budget_does_not_bound() {
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str, statements: &[&str]| {
        let file = dir.path().join(format!("{name}.sql"));
        std::fs::write(
            &file,
            format!(
                "CREATE TABLE bid WITH ('connector' = 'nexmark', 'event_type' = 'bid', 'events' = '20K');
                 {}",
                statements.join("\n")
            ),
        )
        .unwrap();
        let out = riffle()
            .arg("run")
            .arg(&file)
            .args(["--state-memory", "64MiB"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        stderr
    };
    let group_by = "CREATE TABLE per_bidder (bidder BIGINT, n BIGINT, PRIMARY KEY (bidder)) WITH ('connector' = 'blackhole');
         INSERT INTO per_bidder SELECT bidder, count(*) AS n FROM bid GROUP BY bidder;";
    let window = "CREATE TABLE per_window (window_end TIMESTAMP(3), n BIGINT) WITH ('connector' = 'blackhole');
         INSERT INTO per_window SELECT window_end, count(*) AS n
         FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
         GROUP BY window_start, window_end;";
    let both = run("both", &[group_by, window]);
    let line = both
        .lines()
        .find(|l| l.contains("--state-memory 64MiB"))
        .unwrap_or_else(|| panic!("no notice: {both}"));
    assert!(
        line.contains("is shared by the unbounded GROUP BYs; the state of `")
            && line.contains("window"),
        "{line}"
    );
    let alone = run("alone", &[group_by]);
    assert!(!alone.contains("--state-memory"), "{alone}");
    let none = run("none", &[window]);
    assert!(
        none.contains("--state-memory 64MiB: this job has no unbounded GROUP BY"),
        "{none}"
    );
}
