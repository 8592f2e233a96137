//! Queries in the shapes of Flink's SQL query pages (docs/dev/table/sql/queries/*:
//! window TVF aggregation, Window Top-N, Top-N, deduplication, joins, OVER, GROUPING
//! SETS, …), compared with **Apache Flink 2.3's own answers**.
//!
//! `cases/NAME.sql` is a query as a Flink user writes it over the tables `bid` and
//! `seller` (`bid.jsonl`, `seller.jsonl`); `flink/NAME.jsonl` is Flink's result as a
//! table, or `flink/NAME.refused` what Flink said when it refused the query. Both were
//! recorded by `scripts/flink-oracle/docs_queries.py` (PyFlink from PyPI), which is run
//! again when a case is added. riffle writes each result as Debezium change events
//! (so a changelog's withdrawals are checked as well as its final rows), at parallelism
//! 1, at 2, and through a crash in the checkpoint commit at 2 restored at 1; the rows it
//! leaves must be Flink's, as multisets.
//!
//! [`CASES`] says for each case what riffle does: runs it (compared), or refuses it at
//! planning naming the construct. A refusal must match one of Flink's or one listed in
//! docs/from-flink.md; a case that starts planning fails here until it is compared.

use crate::common::{committed_jsonl_files, same_rows};
use crate::oracle::schedule::{self, Attempt, Disruption, Schedule};
use riffle_runtime::CrashPoint;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What riffle does with a case.
enum Riffle {
    /// Runs it; its result must be Flink's.
    Runs,
    /// Refuses it at planning; the message names this.
    Refuses(&'static str),
}

use Riffle::{Refuses, Runs};

const CASES: &[(&str, Riffle)] = &[
    ("arithmetic_casts", Runs),
    ("cascading_windows", Runs),
    ("cube", Runs),
    ("cumulate", Runs),
    ("decimal_division", Refuses("DECIMAL division")),
    ("deduplication", Runs),
    ("dense_rank_top_n", Refuses("DENSE_RANK")),
    ("except", Refuses("EXCEPT")),
    ("exists_unbounded", Refuses("over an unbounded stream")),
    ("full_join", Runs),
    ("full_join_of_aggregates", Runs),
    ("global_aggregate", Runs),
    ("group_by", Runs),
    ("grouping_sets", Runs),
    ("grouping_sets_distinct", Runs),
    ("grouping_sets_expression", Runs),
    ("having", Runs),
    ("hop", Runs),
    ("hop_offset", Refuses("HOP with an offset")),
    ("in_unbounded", Refuses("over an unbounded stream")),
    ("inner_join", Runs),
    ("join_of_aggregates", Runs),
    ("join_of_deduplication", Runs),
    ("intersect", Refuses("INTERSECT")),
    ("interval_join", Runs),
    ("left_join_right_condition", Runs),
    ("limit", Refuses("LIMIT")),
    ("match_recognize", Refuses("MATCH_RECOGNIZE")),
    ("order_by_limit", Refuses("ORDER BY")),
    ("over_range", Runs),
    ("over_rows", Runs),
    ("rank_over_aggregate", Refuses("RANK")),
    ("rank_top_n", Refuses("RANK")),
    ("rank_window_top_n", Refuses("RANK")),
    ("round_truncate", Runs),
    ("select_distinct", Runs),
    ("session_group_window", Runs),
    ("top_n", Runs),
    ("top_n_between", Runs),
    ("top_n_fraction", Refuses("on a row number")),
    ("top_n_rank_range", Runs),
    ("top_n_second", Runs),
    ("top_n_without_end", Refuses("without an upper bound")),
    ("tumble", Runs),
    ("tumble_offset", Runs),
    ("tumble_offset_join", Refuses("windows with an offset")),
    ("tumble_offset_rows", Runs),
    ("tumble_offset_top_n", Runs),
    ("union_all", Runs),
    ("union_distinct", Runs),
    ("window_deduplication", Runs),
    ("window_grouping_sets", Runs),
    ("window_in", Runs),
    ("window_join", Runs),
    ("window_not_exists", Runs),
    ("window_not_in", Runs),
    ("window_rollup", Runs),
    ("window_top_n_after_aggregate", Runs),
    ("window_top_n_between", Runs),
    ("with_clause", Runs),
];

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/flink_docs")
}

/// The input tables, as riffle reads them.
fn sources(rate: Option<u64>) -> String {
    let throttle = rate
        .map(|r| format!(", 'scan.max-records-per-second' = '{r}'"))
        .unwrap_or_default();
    [
        ("bid", "auction BIGINT, bidder BIGINT, price DOUBLE, channel VARCHAR, ts TIMESTAMP(3)"),
        ("seller", "auction BIGINT, seller VARCHAR, rating INT, ts TIMESTAMP(3)"),
    ]
    .iter()
    .map(|(name, columns)| {
        format!(
            "CREATE TABLE {name} ({columns}, WATERMARK FOR ts AS ts - INTERVAL '4' SECOND)\n  WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json'{throttle});\n",
            corpus().join(format!("{name}.jsonl")).display()
        )
    })
    .collect()
}

/// The case's pipeline: the sources, its views, and its SELECT into `out` as Debezium
/// change events (an insert-only result is all creates).
fn pipeline(name: &str, out: &Path, rate: Option<u64>) -> String {
    let text = std::fs::read_to_string(corpus().join(format!("cases/{name}.sql"))).unwrap();
    let mut statements: Vec<&str> = text.split(';').filter(|s| !s.trim().is_empty()).collect();
    let select = statements.pop().unwrap().trim();
    let views: String = statements
        .iter()
        .map(|v| format!("{};\n", v.trim()))
        .collect();
    format!(
        "{}{views}CREATE TABLE out WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'debezium-json');\nINSERT INTO out\n{select};\n",
        sources(rate),
        out.display()
    )
}

/// A value as both sides are compared: numbers to 12 significant digits (a sum of
/// doubles differs in its last bits with the order it adds them in, in Flink too),
/// timestamps as `YYYY-MM-DD HH:MM:SS.mmm`.
fn canonical(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Number(n) => format!("{:.11e}", n.as_f64().unwrap()),
        serde_json::Value::String(s) if is_timestamp(s) => {
            let s = s.replacen('T', " ", 1);
            let s = s.trim_end_matches('Z');
            let (whole, fraction) = s.split_once('.').unwrap_or((s, ""));
            format!("{whole}.{:0<3}", &fraction[..fraction.len().min(3)])
        }
        other => other.to_string(),
    }
}

fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 19
        && b[4] == b'-'
        && b[7] == b'-'
        && (b[10] == b'T' || b[10] == b' ')
        && b[13] == b':'
}

/// A row as `{column: value, …}` in column-name order, values canonical.
fn row(image: &serde_json::Map<String, serde_json::Value>) -> String {
    let values: BTreeMap<&String, String> = image.iter().map(|(k, v)| (k, canonical(v))).collect();
    let values: Vec<String> = values.iter().map(|(k, v)| format!("{k:?}: {v}")).collect();
    format!("{{{}}}", values.join(", "))
}

/// Flink's recorded rows.
fn flink_rows(name: &str) -> Vec<String> {
    let text = std::fs::read_to_string(corpus().join(format!("flink/{name}.jsonl")))
        .unwrap_or_else(|e| {
            panic!(
                "no Flink answer for {name} ({e}): run scripts/flink-oracle/docs_queries.py {name}"
            )
        });
    let mut rows: Vec<String> = text
        .lines()
        .map(|l| match serde_json::from_str(l).unwrap() {
            serde_json::Value::Object(values) => row(&values),
            other => panic!("not a row: {other}"),
        })
        .collect();
    rows.sort();
    rows
}

/// riffle's committed change events replayed in commit order (epoch, then file): a
/// create adds its `after`, a delete takes back its `before`, which must be there.
fn riffle_rows(out: &Path) -> Result<Vec<String>, String> {
    let mut table: BTreeMap<String, usize> = BTreeMap::new();
    for path in committed_jsonl_files(out) {
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            let event: serde_json::Value = serde_json::from_str(line).unwrap();
            let (image, delete) = match event["op"].as_str() {
                Some("d") => (&event["before"], true),
                _ => (&event["after"], false),
            };
            let Some(image) = image.as_object() else {
                return Err(format!("an event without its row: {line}"));
            };
            let r = row(image);
            if delete {
                match table.get_mut(&r) {
                    Some(n) if *n > 1 => *n -= 1,
                    Some(_) => {
                        table.remove(&r);
                    }
                    None => return Err(format!("withdrew {r}, which was not there")),
                }
            } else {
                *table.entry(r).or_default() += 1;
            }
        }
    }
    Ok(table
        .into_iter()
        .flat_map(|(r, n)| std::iter::repeat_n(r, n))
        .collect())
}

/// Runs `name` on `schedule`; `Err` says how riffle's rows differ from Flink's.
fn compare(
    name: &str,
    label: &str,
    schedule: &Schedule,
    rate: Option<u64>,
    work: &Path,
) -> Result<usize, String> {
    let dir = work.join(format!("{name}-{label}"));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("out");
    let sql = dir.join(format!("{name}.sql"));
    let text = pipeline(name, &out, rate);
    std::fs::write(&sql, &text).unwrap();
    schedule::run(&sql, &dir.join("state"), schedule).map_err(|e| format!("{e}\n{text}"))?;
    let flink = flink_rows(name);
    same_rows(&riffle_rows(&out)?, &flink, "Flink")
}

/// Plans `name`; `Err` unless riffle refuses it naming `construct`.
fn refused(name: &str, construct: &str, work: &Path) -> Result<(), String> {
    let sql = work.join(format!("{name}.sql"));
    std::fs::write(&sql, pipeline(name, &work.join("unused"), None)).unwrap();
    let explain = Command::new(env!("CARGO_BIN_EXE_riffle"))
        .arg("explain")
        .arg(&sql)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&explain.stderr).into_owned();
    if explain.status.success() {
        return Err(
            "it plans now: compare it with Flink's answer (Runs) and update docs/from-flink.md"
                .into(),
        );
    }
    if !said.contains("error:") || said.contains("panicked") || !said.contains(construct) {
        return Err(format!(
            "not a planning refusal naming `{construct}`: {said}"
        ));
    }
    Ok(())
}

#[test]
fn flink_docs_queries_give_flinks_results_or_are_refused() {
    let work = tempfile::tempdir().unwrap();
    let only = std::env::var("RIFFLE_FLINK_DOCS_ONLY").ok();
    let mut failures = Vec::new();
    let mut compared = 0;
    for (i, (name, riffle)) in CASES.iter().enumerate() {
        if only
            .as_deref()
            .is_some_and(|o| !o.split(',').any(|n| n == *name))
        {
            continue;
        }
        let refused_by_flink = corpus().join(format!("flink/{name}.refused")).exists();
        let result = match riffle {
            Runs if refused_by_flink => Err("Flink refuses it: riffle must too".to_string()),
            Runs => {
                let point = CrashPoint::ALL[i % CrashPoint::ALL.len()].name();
                let crashed = Schedule {
                    attempts: vec![
                        Attempt::single(2, Some(Disruption::CrashAt { point, epochs: 2 })),
                        Attempt::single(1, None),
                    ],
                    state_memory: Some("1KiB"),
                };
                compare(name, "p1", &Schedule::clean(1, 1), None, work.path())
                    .and_then(|_| compare(name, "p2", &Schedule::clean(2, 1), None, work.path()))
                    .and_then(|_| compare(name, "crash", &crashed, Some(400), work.path()))
                    .map(|rows| {
                        compared += 1;
                        eprintln!("flink_docs: {name}: {rows} rows, Flink's");
                    })
            }
            Refuses(construct) => refused(name, construct, work.path()),
        };
        if let Err(e) = result {
            failures.push(format!("{name}: {e}"));
        }
    }
    let listed: Vec<&str> = CASES.iter().map(|(n, _)| *n).collect();
    for entry in std::fs::read_dir(corpus().join("cases")).unwrap() {
        let file = entry.unwrap().file_name().to_string_lossy().into_owned();
        let name = file.trim_end_matches(".sql");
        if !listed.contains(&name) {
            failures.push(format!("{name}: a case not in CASES"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases:\n{}",
        failures.len(),
        CASES.len(),
        failures.join("\n\n")
    );
    assert!(only.is_some() || compared >= 30, "{compared} compared");
}
