//! `riffle run` / `riffle explain` on SQL pipeline files, as a user runs them.

use crate::common;

use common::savepoints::{ok, savepoint};
use common::{published, riffle, stderr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn example(name: &str) -> String {
    let path = format!(
        "{}/../../examples/nexmark/{name}.sql",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The q5 example at 2K events per event-second (windows close as the job runs),
/// written into `dir`; returns the file. Throttled to about 2 s of wall time so that
/// even on a loaded machine it lives through the checkpoints a crash test aims at
/// (unthrottled it can end in 0.4 s, after only 4 checkpoints).
fn slow_q5(dir: &Path) -> PathBuf {
    let text = example("q5").replace(
        "'events' = '10M'",
        "'events' = '400K', 'rate' = '2K', 'throttle' = '200K'",
    );
    let file = dir.join("q5.sql");
    std::fs::write(&file, text).unwrap();
    file
}

/// `riffle run file` from `cwd` (file sinks write under it), checkpointed into
/// `cwd/state` every 30 ms, without in-process restarts.
fn run_checkpointed(cwd: &Path, file: &Path, parallelism: usize) -> Command {
    let mut cmd = riffle();
    cmd.current_dir(cwd)
        .arg("run")
        .arg(file)
        .args(["--parallelism", &parallelism.to_string()])
        .args([
            "--checkpoint-interval",
            "30ms",
            "--state",
            "state",
            "--restart",
            "none",
        ]);
    cmd
}

#[test]
fn a_sql_pipeline_is_exactly_once_across_crashes() {
    let clean = tempfile::tempdir().unwrap();
    let file = slow_q5(clean.path());
    let out = run_checkpointed(clean.path(), &file, 2).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stderr(&out);
    assert!(
        text.contains("riffle: running q5.sql at parallelism 2"),
        "{text}"
    );
    assert!(
        text.contains("checkpoints"),
        "no checkpoint summary: {text}"
    );
    let expected = published(&clean.path().join("out/q5"));
    assert!(
        expected.len() > 20,
        "too few rows to prove anything: {}",
        expected.len()
    );
    for at in ["after-manifest-prepared:3", "after-sink-commit:5"] {
        let dir = tempfile::tempdir().unwrap();
        let file = slow_q5(dir.path());
        let crashed = run_checkpointed(dir.path(), &file, 2)
            .env("RIFFLE_CRASH_AT", at)
            .output()
            .unwrap();
        assert!(
            !crashed.status.success() && stderr(&crashed).contains("RIFFLE_CRASH_AT: crashing"),
            "did not crash at {at}: {}",
            stderr(&crashed)
        );
        // Resumed at another parallelism: state is rescaled, output stays exact.
        let resumed = run_checkpointed(dir.path(), &file, 3).output().unwrap();
        assert!(resumed.status.success(), "{}", stderr(&resumed));
        assert_eq!(
            published(&dir.path().join("out/q5")),
            expected,
            "crash at {at}: output differs from the crash-free run"
        );
    }
}

#[test]
fn explain_shows_operators_exchanges_and_state() {
    let file = format!(
        "{}/../../examples/nexmark/q5.sql",
        env!("CARGO_MANIFEST_DIR")
    );
    let out = riffle()
        .args(["explain", &file, "--parallelism", "4"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    for part in [
        "task 0 (parallelism 4)",
        "[bid] source nexmark(bid",
        "[window_aggregate_1] operator hop(10s, 2s) count(*)",
        "keyed by (auction)",
        "[max_rows_global_1] operator tumble(2s) rows with max(num) [global], stateful",
        "(parallelism 1)",
        "[q5] sink files(jsonl, out/q5)",
        "planned in",
    ] {
        assert!(text.contains(part), "`{part}` missing from:\n{text}");
    }
}

#[test]
fn a_wrong_file_fails_with_its_name_line_and_a_hint() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.sql");
    std::fs::write(
        &file,
        "CREATE TABLE bid WITH ('connector' = 'nexmark', 'event_type' = 'bid');\nCREATE TABLE out WITH ('connector' = 'stdout');\n\nINSERT INTO out SELECT auction FROM bid ORDER BY price;\n",
    )
    .unwrap();
    let out = riffle().arg("run").arg(&file).output().unwrap();
    assert!(!out.status.success());
    let text = stderr(&out);
    assert!(
        text.contains("bad.sql: line 4, column 1: ORDER BY is not supported on a stream")
            && text.contains("hint:"),
        "{text}"
    );
}

/// The JSON rows a pipeline of `text` prints to a `stdout` table, run at p1.
fn stdout_rows(text: &str) -> Vec<serde_json::Value> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.sql");
    std::fs::write(&file, text).unwrap();
    let out = riffle()
        .arg("run")
        .arg(&file)
        .args(["-p", "1"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_join_with_the_windows_max_reads_the_subquerys_columns_in_its_own_order() {
    // The subquery names the maximum before the window, unlike its GROUP BY: the
    // max-rows plan once gave `max_price` the window and `w` the price.
    let rows = stdout_rows(
        "CREATE TABLE bid (WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND) WITH ('connector' = 'nexmark', 'event_type' = 'bid', 'events' = '200K', 'rate' = '10K');
         CREATE TABLE out WITH ('connector' = 'stdout');
         INSERT INTO out SELECT b.auction, b.price, m.max_price, m.w['start'] AS window_start
         FROM (SELECT *, tumble(INTERVAL '10' SECOND) AS w FROM bid) b
         JOIN (SELECT max(price) AS max_price, tumble(INTERVAL '10' SECOND) AS w FROM bid GROUP BY w) m
           ON b.w = m.w AND b.price = m.max_price;",
    );
    assert!(rows.len() >= 2, "{rows:?}");
    for v in &rows {
        assert_eq!(v["price"], v["max_price"], "{v}");
        assert!(
            v["window_start"]
                .as_str()
                .is_some_and(|s| s.ends_with("0Z")),
            "{v}"
        );
    }
}

#[test]
fn stdout_tables_print_rows() {
    let rows = stdout_rows(
        "CREATE TABLE bid WITH ('connector' = 'nexmark', 'event_type' = 'bid', 'events' = '100');\nCREATE TABLE out WITH ('connector' = 'stdout');\nINSERT INTO out SELECT auction, upper(channel) AS channel FROM bid WHERE auction % 2 = 0;\n",
    );
    assert!(!rows.is_empty());
    for v in &rows {
        assert_eq!(v["auction"].as_i64().unwrap() % 2, 0, "{v}");
        let channel = v["channel"].as_str().unwrap();
        assert_eq!(channel, channel.to_uppercase(), "{v}");
    }
}

#[test]
fn a_sql_pipeline_stops_with_a_savepoint_and_resumes_rescaled() {
    let clean = tempfile::tempdir().unwrap();
    let file = slow_q5(clean.path());
    ok(&mut run_checkpointed(clean.path(), &file, 2));
    let expected = published(&clean.path().join("out/q5"));
    assert!(!expected.is_empty());

    let dir = tempfile::tempdir().unwrap();
    let file = slow_q5(dir.path());
    let job = run_checkpointed(dir.path(), &file, 2)
        .args(["--throttle", "100K"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let state = dir.path().join("state");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !(state.join("q5/_latest.json").exists() && state.join("q5/_control.json").exists()) {
        assert!(Instant::now() < deadline, "no checkpoint within 60 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    ok(savepoint(&state, "q5").args(["create", "--stop", "--label", "upgrade"]));
    let stopped = job.wait_with_output().unwrap();
    assert!(stopped.status.success(), "{}", stderr(&stopped));
    // The SQL file, planned at parallelism 3, fits the savepoint.
    let check = ok(savepoint(&state, "q5")
        .args(["check", "upgrade", "--parallelism", "3", "--sql"])
        .arg(&file));
    let text = String::from_utf8_lossy(&check.stdout);
    assert!(
        text.contains("window_aggregate_1") && text.contains("ok:"),
        "{text}"
    );
    let resumed = ok(run_checkpointed(dir.path(), &file, 3).args(["--from-savepoint", "upgrade"]));
    assert!(
        stderr(&resumed).contains("from savepoint `upgrade`"),
        "{}",
        stderr(&resumed)
    );
    assert_eq!(published(&dir.path().join("out/q5")), expected);
}

/// A nexmark table declared with Flink's column names (`dateTime`, as the Flink suite's
/// views name them) reads the same rows as one with riffle's (`date_time`).
#[test]
fn a_nexmark_table_reads_by_flinks_column_names() {
    let dir = tempfile::tempdir().unwrap();
    let run = |columns: &str, time: &str, out: &str| {
        let text = format!(
            "CREATE TABLE bid ({columns}, WATERMARK FOR {time} AS {time} - INTERVAL '4' SECOND)\n\
             WITH ('connector' = 'nexmark', 'event_type' = 'bid', 'events' = '20K');\n\
             CREATE TABLE out WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'json');\n\
             INSERT INTO out SELECT auction, price, {time} AS t FROM bid WHERE MOD(auction, 7) = 0;"
        );
        let file = dir.path().join(format!("{out}.sql"));
        std::fs::write(&file, text).unwrap();
        let output = riffle()
            .current_dir(dir.path())
            .arg("run")
            .arg(&file)
            .output()
            .unwrap();
        (output.status.success(), stderr(&output))
    };
    let flink = "auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, `dateTime` TIMESTAMP(3), extra VARCHAR";
    let ours = flink.replace("`dateTime`", "date_time");
    let (ok_flink, e) = run(flink, "`dateTime`", "flink");
    assert!(ok_flink, "{e}");
    let (ok_ours, e) = run(&ours, "date_time", "ours");
    assert!(ok_ours, "{e}");
    let rows = published(&dir.path().join("flink"));
    assert!(rows.len() > 100, "{} rows", rows.len());
    assert_eq!(rows, published(&dir.path().join("ours")));
    // A mix of the two spellings is refused, listing both.
    let mixed = flink.replace("price", "Price");
    let (ok, e) = run(&mixed, "`dateTime`", "mixed");
    assert!(!ok);
    assert!(e.contains("date_time") && e.contains("dateTime"), "{e}");
}

#[test]
fn a_declared_json_column_that_no_record_carries_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let bids = dir.path().join("bids");
    std::fs::create_dir_all(&bids).unwrap();
    for part in 0..2 {
        std::fs::write(
            bids.join(format!("part-{part}.jsonl")),
            format!("{{\"auction\": {part}, \"itemName\": \"x\", \"price\": null, \"ts\": 1700000000000}}\n"),
        )
        .unwrap();
    }
    let file = dir.path().join("p.sql");
    // `itemname` is not the key `itemName`; `price` is present but NULL.
    std::fs::write(
        &file,
        format!(
            "CREATE TABLE bid (auction BIGINT, itemname VARCHAR, itemName VARCHAR, price BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');\nCREATE TABLE out WITH ('connector' = 'blackhole');\nINSERT INTO out SELECT auction, itemname, itemName, price FROM bid;\n",
            bids.display()
        ),
    )
    .unwrap();
    let out = riffle()
        .arg("run")
        .arg(&file)
        .args(["-p", "2"])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("the declared column `itemname` is NULL in all 2 rows read"),
        "{err}"
    );
    // Reported once, by the last subtask to finish; a column with values is not, and
    // one NULL in every row is (the reader cannot tell a missing key from a null).
    assert_eq!(
        err.matches("declared column `itemname`").count(),
        1,
        "{err}"
    );
    assert!(!err.contains("declared column `itemName`"), "{err}");
    assert!(err.contains("declared column `price`"), "{err}");
}

#[test]
fn a_boolean_as_text_is_true_or_false_in_capitals_as_in_flink() {
    let rows = stdout_rows(
        "CREATE TABLE bid WITH ('connector' = 'nexmark', 'event_type' = 'bid', 'events' = '100');\nCREATE TABLE out WITH ('connector' = 'stdout');\nINSERT INTO out SELECT auction % 2 = 0 AS even, CAST(auction % 2 = 0 AS VARCHAR) AS text FROM bid;\n",
    );
    assert!(!rows.is_empty());
    for row in &rows {
        let expected = if row["even"].as_bool().unwrap() {
            "TRUE"
        } else {
            "FALSE"
        };
        assert_eq!(row["text"], expected, "{row}");
    }
}

/// Flink functions whose DataFusion namesakes differ for some arguments give Flink's
/// values (from Flink's "System (Built-in) Functions" page, or its code where the page
/// is silent).
#[test]
fn flink_functions_give_flinks_values_where_datafusions_differ() {
    let calls = [
        ("LOG(100.0)", serde_json::json!(100f64.ln())),
        ("LOG(2, 8)", serde_json::json!(3.0)),
        ("GREATEST(1, 5, 3)", serde_json::json!(5)),
        ("GREATEST(1, CAST(NULL AS INT), 3)", serde_json::Value::Null),
        ("LEAST(2, CAST(NULL AS INT))", serde_json::Value::Null),
        (
            "CONCAT('a', CAST(NULL AS VARCHAR))",
            serde_json::Value::Null,
        ),
        ("left('abcdef', 3)", serde_json::json!("abc")),
        ("left('abcdef', -2)", serde_json::json!("")),
        ("right('abcdef', -2)", serde_json::json!("")),
        ("SUBSTRING('abcdef', 2, 3)", serde_json::json!("bcd")),
        ("SUBSTRING('abcdef', 0, 3)", serde_json::json!("abc")),
        ("SUBSTRING('abcdef', -2)", serde_json::json!("ef")),
        ("SUBSTRING('abcdef', -9)", serde_json::json!("")),
        ("SUBSTRING('abcdef', 2, -1)", serde_json::Value::Null),
        ("SUBSTRING('abcdef' FROM 2 FOR 2)", serde_json::json!("bc")),
        ("SUBSTR('abcdef', 5)", serde_json::json!("ef")),
        (
            "FROM_UNIXTIME(44)",
            serde_json::json!("1970-01-01 00:00:44"),
        ),
        (
            "FROM_UNIXTIME(44, 'yyyy/MM/dd HH:mm')",
            serde_json::json!("1970/01/01 00:00"),
        ),
        ("TRUNCATE(42.324, 2)", serde_json::json!(42.32)),
        // Java's Double.toString (DataFusion wrote `10000000.0`, `0.0001`). Computed
        // from a column: DataFusion folds a cast of a constant at planning.
        ("CAST(zero + 1 AS VARCHAR)", serde_json::json!("1.0")),
        ("CAST(zero + 1e7 AS VARCHAR)", serde_json::json!("1.0E7")),
        ("CONCAT('x', zero + 0.0001)", serde_json::json!("x1.0E-4")),
        (
            "CAST(CAST(zero + 2.5 AS FLOAT) AS VARCHAR)",
            serde_json::json!("2.5"),
        ),
        (
            "UNIX_TIMESTAMP('1970-01-01 00:00:44')",
            serde_json::json!(44),
        ),
        (
            "UNIX_TIMESTAMP('1970/01/01 00:01', 'yyyy/MM/dd HH:mm')",
            serde_json::json!(60),
        ),
        ("UNIX_TIMESTAMP('not a time')", serde_json::json!(i64::MIN)),
        ("TO_DATE('2024-01-02')", serde_json::json!("2024-01-02")),
        (
            "TO_DATE('02/01/2024', 'dd/MM/yyyy')",
            serde_json::json!("2024-01-02"),
        ),
        (
            "DATE_FORMAT(TO_TIMESTAMP_LTZ(1000, 3), 'yyyy-MM-dd HH:mm:ss')",
            serde_json::json!("1970-01-01 00:00:01"),
        ),
        (
            "DATE_FORMAT(TO_TIMESTAMP_LTZ(60, 0), 'HH:mm:ss')",
            serde_json::json!("00:01:00"),
        ),
    ];
    let select: Vec<String> = calls
        .iter()
        .enumerate()
        .map(|(i, (call, _))| format!("{call} AS c{i}"))
        .collect();
    let rows = stdout_rows(&format!(
        "CREATE TABLE bid WITH ('connector' = 'nexmark', 'event_type' = 'bid', 'events' = '20');\nCREATE TABLE out WITH ('connector' = 'stdout');\nINSERT INTO out SELECT {} FROM (SELECT CAST(price AS DOUBLE) * 0 AS zero FROM bid);\n",
        select.join(", ")
    ));
    let row = rows.first().expect("a row");
    for (i, (call, expected)) in calls.iter().enumerate() {
        assert_eq!(&row[format!("c{i}")], expected, "{call}");
    }
}

#[test]
fn files_added_between_runs_are_read_once_by_the_restored_job() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir_all(&input).unwrap();
    let write = |name: &str, ids: std::ops::Range<i64>| {
        let lines: String = ids
            .map(|i| format!("{{\"id\": {i}, \"ts\": {}}}\n", 1_700_000_000_000 + i))
            .collect();
        std::fs::write(input.join(name), lines).unwrap();
    };
    // The added file sorts before the first, moving every split after it.
    write("b.jsonl", 0..500);
    let file = dir.path().join("p.sql");
    std::fs::write(
        &file,
        format!(
            "CREATE TABLE ev (id BIGINT, ts BIGINT, WATERMARK FOR ts AS ts) WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');\n\
             CREATE TABLE out WITH ('connector' = 'filesystem', 'path' = 'out', 'format' = 'json');\n\
             INSERT INTO out SELECT id FROM ev;\n",
            input.display()
        ),
    )
    .unwrap();
    let first = run_checkpointed(dir.path(), &file, 2).output().unwrap();
    assert!(first.status.success(), "{}", stderr(&first));
    write("a.jsonl", 500..800);
    write("c.jsonl", 800..1000);
    let second = run_checkpointed(dir.path(), &file, 3).output().unwrap();
    let err = stderr(&second);
    assert!(second.status.success(), "{err}");
    assert!(err.contains("from checkpoint epoch"), "{err}");
    let mut ids: Vec<i64> = published(&dir.path().join("out"))
        .iter()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]
                .as_i64()
                .unwrap()
        })
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..1000).collect::<Vec<_>>(), "every row once");
}
