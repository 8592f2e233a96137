//! Reading both answers as rows and comparing them as multisets, and reading the late
//! rows riffle counted.

use super::grammar::{OutputKind, Query, Rows};
use super::input::LATE_ID_FROM;
use riffle_state::layout::COMMITTED_MARKER;
use riffle_state::{Manifest, ManifestStatus};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// One row as canonical JSON text (an array of the output columns' values).
pub type Row = String;

/// The committed output of riffle's file sink: the rows of every published file (staged
/// `.inprogress` files are not output). An upsert changelog is reduced to the newest
/// row per key, in commit order (epoch, then file); a Debezium changelog is replayed in
/// that order, and a delete must withdraw the key's current row exactly and a create must not
/// land on a current row (else the output holds a row saying so, which no answer has).
pub fn riffle_rows(out: &Path, query: &Query) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut newest: BTreeMap<Row, Row> = BTreeMap::new();
    for path in crate::common::committed_jsonl_files(out) {
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            let value: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{}: not JSON ({e}): {line}", path.display()));
            let changelog = matches!(
                query.output_kind(),
                OutputKind::Changelog | OutputKind::KeylessChangelog
            );
            let op = value.get("op").and_then(|o| o.as_str()).unwrap_or("");
            let image = match (changelog, op) {
                (false, _) => &value,
                (true, "d") => &value["before"],
                (true, _) => &value["after"],
            };
            let row: Vec<serde_json::Value> = query
                .columns()
                .iter()
                .map(|c| image.get(*c).cloned().unwrap_or(serde_json::Value::Null))
                .collect();
            let text = serde_json::Value::Array(row.clone()).to_string();
            match query.output_kind() {
                OutputKind::Changelog if op == "d" => {
                    if newest.remove(&row[0].to_string()).as_ref() != Some(&text) {
                        rows.push(format!("withdrew {text}, which was not the current row"));
                    }
                }
                OutputKind::Changelog => {
                    if let Some(old) = newest.insert(row[0].to_string(), text.clone()) {
                        rows.push(format!("created {text} over the current row {old}"));
                    }
                }
                OutputKind::KeylessChangelog if op == "d" => {
                    match rows.iter().position(|r| *r == text) {
                        Some(at) => {
                            rows.swap_remove(at);
                        }
                        None => rows.push(format!("withdrew {text}, which was not there")),
                    }
                }
                OutputKind::Append | OutputKind::KeylessChangelog => rows.push(text),
                OutputKind::Upsert => {
                    newest.insert(row[0].to_string(), text);
                }
            }
        }
    }
    if matches!(
        query.output_kind(),
        OutputKind::Upsert | OutputKind::Changelog
    ) {
        rows.extend(newest.into_values());
    }
    rows.sort();
    rows
}

/// The late rows riffle counted as dropped: the `late_rows_dropped` counter of the
/// newest committed checkpoint under `state` (the end-of-input epoch's, after a
/// finished run). Counters are checkpointed, so a row counted by an attempt that crashed
/// before its next checkpoint is counted again only by the replay: the count is as
/// exactly-once as the output.
pub fn late_rows_counted(state: &Path, pipeline: &str) -> Result<u64, String> {
    let dir = state.join(pipeline).join("checkpoints");
    let mut newest: Option<Manifest> = None;
    for entry in std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let epoch_dir = entry.unwrap().path();
        let path = epoch_dir.join("_manifest.json");
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let manifest: Manifest = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not a manifest ({e})", path.display()))?;
        // COMMITTED is a marker beside the manifest (docs/state-format.md).
        let committed = manifest.status == ManifestStatus::Committed
            || epoch_dir.join(COMMITTED_MARKER).exists();
        if committed && newest.as_ref().is_none_or(|n| n.epoch < manifest.epoch) {
            newest = Some(manifest);
        }
    }
    let newest = newest.ok_or_else(|| format!("no committed checkpoint in {}", dir.display()))?;
    Ok(newest
        .counters
        .get("late_rows_dropped")
        .copied()
        .unwrap_or(0))
}

/// DuckDB's answer to `query` over the files under `input`.
pub fn duckdb_rows(input: &Path, query: &Query, scratch: &Path) -> Vec<Row> {
    let python = std::env::var("RIFFLE_DUCKDB_PYTHON").expect(
        "RIFFLE_DUCKDB_PYTHON names a Python with the duckdb package; scripts/test installs it",
    );
    let query_file = scratch.join("duckdb.sql");
    std::fs::write(&query_file, query.duckdb_sql()).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/oracle/duckdb_answer.py");
    let rows = match query.duckdb_input() {
        Rows::All => "all",
        Rows::OnTime => "on_time",
    };
    let output = Command::new(python)
        .arg(script)
        .arg(input)
        .arg(&query_file)
        .arg(LATE_ID_FROM.to_string())
        .arg(rows)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "DuckDB failed on\n{}\n{}",
        query.duckdb_sql(),
        String::from_utf8_lossy(&output.stderr)
    );
    let mut rows: Vec<Row> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l)
                .unwrap()
                .to_string()
        })
        .collect();
    rows.sort();
    rows
}

/// What differs between riffle's rows and DuckDB's, or `None` when they are the same
/// multiset.
pub fn difference(riffle: &[Row], duckdb: &[Row]) -> Option<String> {
    if riffle == duckdb {
        return None;
    }
    fn count(rows: &[Row]) -> BTreeMap<&str, i64> {
        let mut m: BTreeMap<&str, i64> = BTreeMap::new();
        for r in rows {
            *m.entry(r.as_str()).or_default() += 1;
        }
        m
    }
    let (a, b) = (count(riffle), count(duckdb));
    let mut missing = Vec::new();
    let mut extra = Vec::new();
    for (row, n) in &b {
        let have = a.get(row).copied().unwrap_or(0);
        if have < *n {
            missing.push(format!("{row} ×{}", n - have));
        }
    }
    for (row, n) in &a {
        let want = b.get(row).copied().unwrap_or(0);
        if *n > want {
            extra.push(format!("{row} ×{}", n - want));
        }
    }
    let show = |v: &[String]| v.iter().take(5).cloned().collect::<Vec<_>>().join("; ");
    Some(format!(
        "riffle {} rows, DuckDB {} rows; {} missing from riffle (e.g. {}), {} extra in riffle (lost or duplicated: e.g. {})",
        riffle.len(),
        duckdb.len(),
        missing.len(),
        show(&missing),
        extra.len(),
        show(&extra)
    ))
}
