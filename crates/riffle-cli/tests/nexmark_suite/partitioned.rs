//! Flink's q10 as written: `PARTITIONED BY (dt, hm)` on a `filesystem` CSV sink with a
//! `success-file` partition commit on `partition-time`. Only its path changes. DuckDB
//! reads the directory tree (`hive_partitioning`) and must equal its own answer over
//! the bids; every partition carries `_SUCCESS` once the input ended, and no partition
//! is marked that lacks files.

use super::{answers, input, query_text, schedule, suite_dir, Run};
use std::path::Path;

/// The columns of q10's sink, with DuckDB's types; `dt` and `hm` are directory names.
fn columns() -> String {
    let column = |name: &str, duckdb_type: &str, partition: bool| serde_json::json!({"name": name, "duckdb_type": duckdb_type, "partition": partition});
    serde_json::Value::Array(vec![
        column("auction", "BIGINT", false),
        column("bidder", "BIGINT", false),
        column("price", "BIGINT", false),
        column("dateTime", "TIMESTAMP", false),
        column("extra", "VARCHAR", false),
        column("dt", "VARCHAR", true),
        column("hm", "VARCHAR", true),
    ])
    .to_string()
}

/// The partition directories under `out` (`dt=…/hm=…`), and which hold `_SUCCESS`.
fn partitions(out: &Path) -> Vec<(String, bool, usize)> {
    let mut found = Vec::new();
    for dt in std::fs::read_dir(out).into_iter().flatten().flatten() {
        if !dt.file_name().to_string_lossy().starts_with("dt=") {
            continue;
        }
        for hm in std::fs::read_dir(dt.path()).unwrap().flatten() {
            let files: Vec<String> = std::fs::read_dir(hm.path())
                .unwrap()
                .flatten()
                .map(|f| f.file_name().to_string_lossy().into_owned())
                .collect();
            let parts = files.iter().filter(|f| f.ends_with(".csv")).count();
            let name = format!(
                "{}/{}",
                dt.file_name().to_string_lossy(),
                hm.file_name().to_string_lossy()
            );
            found.push((name, files.iter().any(|f| f == "_SUCCESS"), parts));
        }
    }
    found.sort();
    found
}

/// One run of q10 as written; `Err` says how its output differs.
fn run_q10(run: &Run<'_>, inputs: &Path, work: &Path) -> Result<usize, String> {
    let dir = work.join(format!("q10-partitioned-{}", run.label));
    let out = dir.join("out");
    let text = query_text("q10").replace(
        "file://${NEXMARK_DIR}/data/output/${SUBMIT_TIME}/bid/",
        &format!("file://{}", out.display()),
    );
    if !text.contains("PARTITIONED BY (dt, hm)") || text.contains("${") {
        return Err(format!("not Flink's q10 text any more:\n{text}"));
    }
    std::fs::create_dir_all(&dir).unwrap();
    let sql = dir.join("nexmark_q10.sql");
    std::fs::write(&sql, input::source_ddl(inputs, run.throttle) + &text).unwrap();
    schedule::run(&sql, &dir.join("state"), &run.schedule)?;
    let (riffle, duckdb) = answers(
        inputs,
        &suite_dir().join("duckdb/q10.sql"),
        &out,
        &columns(),
        None,
    )?;
    crate::common::same_rows(&riffle, &duckdb, "DuckDB")?;
    let partitions = partitions(&out);
    if partitions.len() < 2 {
        return Err(format!("too few partitions to check: {partitions:?}"));
    }
    // The input ended: the final watermark closed every partition.
    if let Some((name, _, _)) = partitions.iter().find(|(_, marked, _)| !marked) {
        return Err(format!(
            "partition {name} has no _SUCCESS after the input ended"
        ));
    }
    if let Some((name, _, _)) = partitions.iter().find(|(_, _, files)| *files == 0) {
        return Err(format!("partition {name} is marked but holds no file"));
    }
    Ok(partitions.len())
}

/// q10 as written at p2, and through a crash in the commit, a `kill -9` and restores at
/// other parallelisms. Returns the failures.
pub(super) fn q10_as_written(inputs: &Path, work: &Path) -> Vec<String> {
    let mut failures = Vec::new();
    for run in [Run::clean("p2", 2), Run::through_crashes("crashes", 5)] {
        match run_q10(&run, inputs, work) {
            Ok(partitions) => eprintln!(
                "suite: q10 as written (PARTITIONED BY, success-file) {}: {partitions} partitions, each marked, rows as DuckDB",
                run.schedule.describe()
            ),
            Err(e) => failures.push(format!(
                "q10 as written ({}): {e}",
                run.schedule.describe()
            )),
        }
    }
    failures
}
