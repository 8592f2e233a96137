//! The Flink Nexmark suite's query texts (`flink-suite/`, verbatim) and the one change
//! riffle makes to them: their DDL. The suite's `datagen` table and its views become
//! riffle tables with the same column names (`dateTime`, `itemName`, …), each sink is
//! declared as the caller says (a blackhole for `riffle bench --flink-suite`, a
//! JSON-lines file in the suite test), q13's `side_input` is read as the caller says,
//! and q14's Java UDF is declared as a SQL expression. Nothing else in a text changes.

use crate::error::BenchError;
use riffle_runtime::JobGraph;
use riffle_sql::{plan_pipeline, ConnectorRegistry, PlanOptions, RunSettings};
use std::path::Path;
use std::time::Duration;

/// The suite's 23 texts by name, and q6 in the form that runs.
pub const QUERIES: [(&str, &str); 24] = [
    ("q0", include_str!("../flink-suite/q0.sql")),
    ("q1", include_str!("../flink-suite/q1.sql")),
    ("q2", include_str!("../flink-suite/q2.sql")),
    ("q3", include_str!("../flink-suite/q3.sql")),
    ("q4", include_str!("../flink-suite/q4.sql")),
    ("q5", include_str!("../flink-suite/q5.sql")),
    ("q6", include_str!("../flink-suite/q6.sql")),
    (
        "q6_corrected",
        include_str!("../flink-suite/q6_corrected.sql"),
    ),
    ("q7", include_str!("../flink-suite/q7.sql")),
    ("q8", include_str!("../flink-suite/q8.sql")),
    ("q9", include_str!("../flink-suite/q9.sql")),
    ("q10", include_str!("../flink-suite/q10.sql")),
    ("q11", include_str!("../flink-suite/q11.sql")),
    ("q12", include_str!("../flink-suite/q12.sql")),
    ("q13", include_str!("../flink-suite/q13.sql")),
    ("q14", include_str!("../flink-suite/q14.sql")),
    ("q15", include_str!("../flink-suite/q15.sql")),
    ("q16", include_str!("../flink-suite/q16.sql")),
    ("q17", include_str!("../flink-suite/q17.sql")),
    ("q18", include_str!("../flink-suite/q18.sql")),
    ("q19", include_str!("../flink-suite/q19.sql")),
    ("q20", include_str!("../flink-suite/q20.sql")),
    ("q21", include_str!("../flink-suite/q21.sql")),
    ("q22", include_str!("../flink-suite/q22.sql")),
];

/// The queries riffle runs, in order: every suite query, q6 in its corrected form.
pub fn runnable() -> impl Iterator<Item = (&'static str, &'static str)> {
    QUERIES.into_iter().filter(|(name, _)| *name != "q6")
}

/// The text of the suite query `name`.
pub fn text(name: &str) -> Option<&'static str> {
    QUERIES.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// A declared sink column: name and Flink type, as written.
#[derive(Debug, Clone)]
pub struct Column {
    pub name: String,
    pub flink_type: String,
}

/// What replaces a text's DDL.
pub struct Declarations<'a> {
    /// The tables the queries read (`person`, `auction`, `bid`), in front of the text.
    pub sources: &'a str,
    /// The sink's `WITH (…)` options, without the parentheses.
    pub sink: &'a str,
    /// The sink's `PRIMARY KEY`, when the result is updating and the sink needs one.
    pub sink_key: &'a [&'a str],
    /// q13's `side_input` table's `WITH (…)` options.
    pub side_input: &'a str,
}

/// A suite query with its DDL replaced.
pub struct Replaced {
    /// The pipeline riffle runs.
    pub text: String,
    /// The sink's columns, in order.
    pub columns: Vec<Column>,
    /// Whether the text declares q13's `side_input` table.
    pub reads_side_input: bool,
}

/// Functions the suite declares as Java classes, declared as SQL expressions: the
/// suite's `CountChar` counts the occurrences of a character in a string (0 for NULL).
const FUNCTIONS: [(&str, &str); 1] = [(
    "count_char",
    "CREATE FUNCTION count_char(s VARCHAR, c VARCHAR) RETURNS BIGINT AS 'CASE WHEN s IS NULL THEN 0 ELSE char_length(s) - char_length(replace(s, substr(c, 1, 1), '''')) END';\n",
)];

/// The suite's three tables read from riffle's `nexmark` generator, with the suite's
/// column names: `events` events at `rate` per second of event time, watermarks
/// `delay_ms` behind.
pub fn nexmark_sources(events: u64, rate: u64, delay_ms: u128) -> String {
    let table = |name: &str, columns: &str| {
        format!(
            "CREATE TABLE {name} (\n  {columns},\n  WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '{delay_ms}' MILLISECOND\n) WITH ('connector' = 'nexmark', 'event_type' = '{name}', 'events' = '{events}', 'rate' = '{rate}');\n"
        )
    };
    [
        table("person", "id BIGINT, name VARCHAR, emailAddress VARCHAR, creditCard VARCHAR, city VARCHAR, state VARCHAR, `dateTime` TIMESTAMP(3), extra VARCHAR"),
        table("auction", "id BIGINT, itemName VARCHAR, description VARCHAR, initialBid BIGINT, reserve BIGINT, `dateTime` TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT, extra VARCHAR"),
        table("bid", "auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, `dateTime` TIMESTAMP(3), extra VARCHAR"),
    ]
    .concat()
}

/// How a suite query is run for a benchmark.
pub struct SuiteRun<'a> {
    /// Events each of the three tables generates.
    pub events: u64,
    /// Events per second of event time.
    pub rate: u64,
    /// Watermark delay.
    pub watermark_delay: Duration,
    /// Subtasks per operator.
    pub parallelism: usize,
    /// Where q13's side table is written (`side_input.csv`: keys 0 to 9999).
    pub side_input_dir: &'a Path,
}

/// Plans suite query `name` (or one of riffle's changelog benchmarks,
/// `changelog_queries.rs`) on the `nexmark` generator into a blackhole sink; returns the
/// graph and the planning time.
///
/// # Errors
/// An unknown name, a side table that cannot be written, or a text that does not plan.
pub fn plan(name: &str, run: &SuiteRun) -> Result<(JobGraph, Duration), BenchError> {
    let flink = text(name)
        .or_else(|| crate::changelog_queries::text(name))
        .ok_or_else(|| {
            let mut names: Vec<&str> = runnable().map(|(n, _)| n).collect();
            names.extend(crate::changelog_queries::QUERIES.iter().map(|(n, _)| *n));
            BenchError::Sql(format!(
                "no suite query `{name}`; the suite has {}",
                names.join(", ")
            ))
        })?;
    let side_input = format!(
        "'connector' = 'filesystem', 'path' = '{}', 'format' = 'csv'",
        run.side_input_dir.join("side_input.csv").display()
    );
    let sources = nexmark_sources(run.events, run.rate, run.watermark_delay.as_millis());
    let replaced = replace(
        flink,
        &Declarations {
            sources: &sources,
            sink: "'connector' = 'blackhole'",
            sink_key: &[],
            side_input: &side_input,
        },
    )
    .map_err(BenchError::Sql)?;
    if replaced.reads_side_input {
        std::fs::create_dir_all(run.side_input_dir)
            .and_then(|_| {
                let rows: String = (0..10_000).map(|k| format!("{k},side {k}\n")).collect();
                std::fs::write(
                    run.side_input_dir.join("side_input.csv"),
                    format!("key,value\n{rows}"),
                )
            })
            .map_err(|e| BenchError::Sql(format!("writing q13's side table: {e}")))?;
    }
    let options = PlanOptions {
        name: format!("flink-{name}"),
        parallelism: run.parallelism,
        max_parallelism: riffle_core::DEFAULT_MAX_PARALLELISM,
        settings: RunSettings::default(),
    };
    let pipeline = plan_pipeline(&replaced.text, &options, &ConnectorRegistry::default())
        .map_err(|e| BenchError::Sql(format!("{name}: {e}")))?;
    Ok((pipeline.graph, pipeline.planning_time))
}

/// Drops `-- …` comments (the suite's texts have none inside strings).
fn strip_comments(text: &str) -> String {
    text.lines()
        .map(|l| l.find("--").map_or(l, |p| &l[..p]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The statements of a text, split at `;` outside parentheses and quotes.
fn statements(text: &str) -> Vec<String> {
    let (mut out, mut current, mut depth, mut quoted) = (Vec::new(), String::new(), 0i32, false);
    for c in text.chars() {
        match c {
            '\'' => quoted = !quoted,
            '(' if !quoted => depth += 1,
            ')' if !quoted => depth -= 1,
            ';' if !quoted && depth == 0 => {
                out.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    out.push(current);
    out.into_iter().filter(|s| !s.trim().is_empty()).collect()
}

/// The text between the first `(` of `s` and its matching `)`, if any.
fn column_list(s: &str) -> Option<&str> {
    let open = s.find('(')?;
    let mut depth = 0;
    for (i, c) in s[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(&s[open + 1..open + i]);
                }
            }
            _ => {}
        }
    }
    None
}

/// The columns of a column list, split at top-level commas.
fn columns(list: &str) -> Vec<Column> {
    let (mut parts, mut current, mut depth) = (Vec::new(), String::new(), 0);
    for c in list.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    parts.push(current);
    parts
        .iter()
        .map(|p| p.trim())
        .filter(|p| !p.is_empty())
        .filter_map(|p| {
            let (name, ty) = p.split_once(char::is_whitespace)?;
            Some(Column {
                name: name.trim_matches('`').to_string(),
                flink_type: ty.trim().to_string(),
            })
        })
        .collect()
}

/// `flink_text` with its DDL replaced as `with` says.
///
/// # Errors
/// A Java function the suite declares that has no SQL declaration here, or a table
/// without a column list.
pub fn replace(flink_text: &str, with: &Declarations) -> Result<Replaced, String> {
    let mut text = with.sources.to_string();
    let mut sink_columns = Vec::new();
    let mut reads_side_input = false;
    for statement in statements(&strip_comments(flink_text)) {
        let trimmed = statement.trim();
        let upper = trimmed.to_uppercase();
        let name = trimmed
            .split_whitespace()
            .nth(2)
            .unwrap_or_default()
            .split('(')
            .next()
            .unwrap_or_default();
        if upper.starts_with("CREATE TABLE NEXMARK_") {
            let list = column_list(trimmed).ok_or_else(|| format!("`{name}` has no columns"))?;
            sink_columns = columns(list);
            let key = if with.sink_key.is_empty() {
                String::new()
            } else {
                format!(
                    ",\n  PRIMARY KEY ({}) NOT ENFORCED",
                    with.sink_key.join(", ")
                )
            };
            text.push_str(&format!(
                "CREATE TABLE {name} ({}{key}\n) WITH ({});\n",
                list.trim_end(),
                with.sink
            ));
        } else if upper.starts_with("CREATE TABLE SIDE_INPUT") {
            reads_side_input = true;
            let list = column_list(trimmed).ok_or_else(|| format!("`{name}` has no columns"))?;
            text.push_str(&format!(
                "CREATE TABLE side_input ({}\n) WITH ({});\n",
                list.trim_end(),
                with.side_input
            ));
        } else if upper.starts_with("CREATE FUNCTION ") {
            let (_, sql) = FUNCTIONS
                .iter()
                .find(|(n, _)| *n == name)
                .ok_or_else(|| format!("no SQL declaration of the suite's function {name}"))?;
            text.push_str(sql);
        } else {
            text.push_str(trimmed);
            text.push_str(";\n");
        }
    }
    Ok(Replaced {
        text,
        columns: sink_columns,
        reads_side_input,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_ddl_changes() {
        let q = "-- a comment; with a semicolon\nCREATE TABLE nexmark_q9 (\n  a BIGINT,\n  `d` DECIMAL(23, 3)\n) PARTITIONED BY (a) WITH (\n  'connector' = 'blackhole'\n);\n\nINSERT INTO nexmark_q9 SELECT a, 0.5 * a FROM bid WHERE x = ';';";
        let with = Declarations {
            sources: "SRC;\n",
            sink: "'connector' = 'x'",
            sink_key: &["a"],
            side_input: "",
        };
        let r = replace(q, &with).unwrap();
        assert_eq!(r.columns.len(), 2);
        assert_eq!(r.columns[1].name, "d");
        assert_eq!(r.columns[1].flink_type, "DECIMAL(23, 3)");
        assert!(r.text.starts_with("SRC;\nCREATE TABLE nexmark_q9 (\n  a BIGINT,\n  `d` DECIMAL(23, 3),\n  PRIMARY KEY (a) NOT ENFORCED\n) WITH ('connector' = 'x');\n"), "{}", r.text);
        assert!(
            r.text
                .ends_with("INSERT INTO nexmark_q9 SELECT a, 0.5 * a FROM bid WHERE x = ';';\n"),
            "{}",
            r.text
        );
    }

    #[test]
    fn every_changelog_benchmark_plans_on_the_suite_tables() {
        let dir = tempfile::tempdir().unwrap();
        let run = SuiteRun {
            events: 1000,
            rate: 10_000_000,
            watermark_delay: Duration::from_secs(4),
            parallelism: 2,
            side_input_dir: dir.path(),
        };
        for (name, _) in crate::changelog_queries::QUERIES {
            if let Err(e) = plan(name, &run) {
                panic!("{name} does not plan: {e}");
            }
        }
    }

    #[test]
    fn every_runnable_text_has_its_ddl_replaced() {
        let with = Declarations {
            sources: "",
            sink: "'connector' = 'blackhole'",
            sink_key: &[],
            side_input: "'connector' = 'filesystem'",
        };
        for (name, flink) in runnable() {
            let r = replace(flink, &with).unwrap();
            assert!(
                !r.text.contains("datagen") && !r.text.contains("PARTITIONED"),
                "{name}"
            );
            assert!(!r.columns.is_empty(), "{name}");
            assert_eq!(r.reads_side_input, name == "q13", "{name}");
        }
    }
}
