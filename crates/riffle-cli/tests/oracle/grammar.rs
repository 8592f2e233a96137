//! A small grammar of pipelines, each written twice from one description: as riffle SQL
//! (streaming: watermarks, `tumble`/`hop`/`session`, a file sink) and as DuckDB SQL
//! (batch: plain `GROUP BY` over window starts computed by arithmetic, a gaps-and-islands
//! query for sessions). The two texts share no code path: what riffle's planner and
//! operators do is checked against what DuckDB computes from the same files.
//!
//! The input's late rows (`input.rs`) are dropped and counted by windows and window
//! joins, so DuckDB answers those from the rows on time; every other query is answered
//! from all rows (docs/engine.md, "Windows and late rows").

use super::input::{LateRows, DELAY_S};
use super::shared_texts::where_mod;
use rand::rngs::StdRng;
use rand::Rng;

/// One generated pipeline.
#[derive(Debug, Clone)]
pub enum Query {
    /// Projection and filter.
    Filter { m: i64, r: i64, a: i64, b: i64 },
    /// Keyed tumbling window: count, sum, min, max per key.
    KeyedTumble {
        size_s: i64,
        filter_mod: Option<i64>,
    },
    /// Tumbling window over the empty key (a global aggregate).
    GlobalTumble { size_s: i64 },
    /// Keyed hopping window.
    Hop { slide_s: i64, panes: i64 },
    /// Keyed session window.
    Session { gap_s: i64 },
    /// `SELECT DISTINCT` over an unbounded stream (append-only).
    Distinct { m: i64 },
    /// `GROUP BY` without a window: an updating result into an upsert file sink.
    Updating { filter_mod: Option<i64> },
    /// A filter over an unwindowed `GROUP BY id % g` (as `HAVING` or as an outer
    /// `WHERE`): a changelog whose groups come and go, into a `debezium-json` file sink.
    Having {
        g: i64,
        m: i64,
        r: i64,
        on_count: bool,
        outer: bool,
    },
    /// A `GROUP BY` over an unwindowed `GROUP BY id % g` (optionally filtered by
    /// `HAVING`): an aggregate that takes withdrawn rows back, regrouping the inner
    /// groups by `total % m` (by their count `n` when `m` is 5).
    Regroup {
        g: i64,
        m: i64,
        having: Option<(i64, i64)>,
    },
    /// An unbounded outer join of `ev` and `pay` on the key (`LEFT`, `RIGHT` or `FULL`):
    /// padded rows withdrawn when a match arrives, a keyless changelog.
    OuterJoin { kind: &'static str },
    /// An unbounded join (`INNER`, `LEFT`, `RIGHT` or `FULL`) whose inputs update: `ev`
    /// (or, with `both`, its per-key counts) joined on its key with `pay`'s totals per
    /// `k % g` — every new `pay` row withdraws the joined rows of its group's old total,
    /// and keys from `g` on have no partner.
    ChangelogJoin {
        g: i64,
        kind: &'static str,
        both: bool,
    },
    /// An unbounded inner join of `ev` and `pay` on the key and `v % m = amount % m`
    /// (append-only; late rows join like any other).
    InnerJoin { m: i64 },
    /// `UNION ALL` of a filtered `ev` and `pay`, or of two filtered `GROUP BY`s (two
    /// changelogs, a keyless changelog).
    Union { changelog: bool, m: i64 },
    /// An aggregate over a Top-N of `ev` per key (the `n` largest `v`, ties by `id`), or
    /// over a deduplication (`n = 1`, the newest row per key): the aggregate takes back
    /// the rows that leave a top.
    RankedRegroup { n: i64, newest: bool, m: i64 },
    /// A Top-N over an unwindowed `GROUP BY id % g`: the `n` largest groups per
    /// `k % 3`, whose ranks change as groups grow.
    TopGroups { g: i64, n: i64 },
    /// Window join of `ev` and `pay` on the key and a tumbling window.
    WindowJoin { size_s: i64 },
    /// The same as a `LEFT`, `RIGHT` or `FULL` join: a row that matched nothing in its
    /// window leaves padded when the window closes (append-only).
    OuterWindowJoin { size_s: i64, kind: &'static str },
    /// Interval join: `pay` rows within `[-lo, +hi]` ms of an `ev` row of the same key.
    IntervalJoin { lo_ms: i64, hi_ms: i64 },
    /// The same as a `LEFT`, `RIGHT` or `FULL` join (the bounds in `ON`): a row that
    /// matched nothing within its bounds leaves padded when they close (append-only).
    /// Optionally counted per tumbling window of the joined rows' event time (the later
    /// of the two rows', a padded row's own): padded rows must not arrive late.
    OuterIntervalJoin {
        lo_ms: i64,
        hi_ms: i64,
        kind: &'static str,
        window_s: Option<i64>,
    },
}

/// How the output is compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputKind {
    /// A multiset of rows.
    Append,
    /// An upsert changelog keyed by the first column: the newest row per key.
    Upsert,
    /// Debezium lines keyed by the first column: creates and deletes, replayed.
    Changelog,
    /// Debezium lines of a multiset: a delete takes back one equal row.
    KeylessChangelog,
}

/// How many kinds of query the grammar has.
pub const KINDS: u64 = 17;

/// Which rows DuckDB's views `ev` and `pay` hold (`duckdb_answer.py`); `ev_late` and
/// `pay_late` always hold the late rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rows {
    /// Every row.
    All,
    /// The rows that are not late.
    OnTime,
}

impl Query {
    /// A query of kind `kind % KINDS` with random parameters. Kind 11 is the unbounded
    /// join, by the run of `KINDS` seeds: inner for every third (28, 79, …), of updating
    /// inputs for the next (45, 96, …), else outer (11, 62, …), so that adding the inner
    /// join left every other seed's case as it was.
    pub fn random(kind: u64, rng: &mut StdRng) -> Self {
        match kind % KINDS {
            11 if (kind / KINDS) % 3 == 1 => Query::InnerJoin {
                m: rng.random_range(8..16),
            },
            11 if (kind / KINDS) % 3 == 2 => Query::ChangelogJoin {
                g: rng.random_range(2..20),
                kind: ["INNER", "LEFT", "RIGHT", "FULL"][rng.random_range(0..4)],
                both: rng.random_bool(0.5),
            },
            0 => Query::Filter {
                m: rng.random_range(2..6),
                r: rng.random_range(0..2),
                a: rng.random_range(1..4),
                b: rng.random_range(-5..5),
            },
            1 => Query::KeyedTumble {
                size_s: [1, 2, 5, 10][rng.random_range(0..4)],
                filter_mod: rng.random_bool(0.5).then(|| rng.random_range(2..5)),
            },
            2 => Query::GlobalTumble {
                size_s: [1, 3, 10][rng.random_range(0..3)],
            },
            3 => Query::Hop {
                slide_s: [1, 2][rng.random_range(0..2)],
                panes: rng.random_range(2..5),
            },
            4 => Query::Session {
                gap_s: rng.random_range(1..4),
            },
            5 => Query::Distinct {
                m: rng.random_range(2..9),
            },
            6 => Query::Updating {
                filter_mod: rng.random_bool(0.5).then(|| rng.random_range(2..5)),
            },
            7 => Query::WindowJoin {
                size_s: [1, 2][rng.random_range(0..2)],
            },
            8 => Query::IntervalJoin {
                lo_ms: rng.random_range(0..1500),
                hi_ms: rng.random_range(0..1500),
            },
            9 => {
                let m = rng.random_range(2..5);
                Query::Having {
                    g: rng.random_range(20..80),
                    m,
                    r: rng.random_range(0..m),
                    on_count: rng.random_bool(0.5),
                    outer: rng.random_bool(0.5),
                }
            }
            12 => Query::Union {
                changelog: rng.random_bool(0.5),
                m: rng.random_range(2..5),
            },
            15 => Query::OuterWindowJoin {
                size_s: [1, 2][rng.random_range(0..2)],
                kind: ["LEFT", "RIGHT", "FULL"][rng.random_range(0..3)],
            },
            13 => Query::RankedRegroup {
                n: rng.random_range(1..4),
                newest: rng.random_bool(0.5),
                m: rng.random_range(2..5),
            },
            14 => Query::TopGroups {
                g: rng.random_range(20..80),
                n: rng.random_range(1..4),
            },
            16 => Query::OuterIntervalJoin {
                lo_ms: rng.random_range(0..1500),
                hi_ms: rng.random_range(0..1500),
                kind: ["LEFT", "RIGHT", "FULL"][rng.random_range(0..3)],
                window_s: rng.random_bool(0.5).then(|| rng.random_range(1..3)),
            },
            11 => Query::OuterJoin {
                kind: ["LEFT", "RIGHT", "FULL"][rng.random_range(0..3)],
            },
            _ => Query::Regroup {
                g: rng.random_range(20..80),
                m: rng.random_range(2..6),
                having: rng.random_bool(0.5).then(|| (2, rng.random_range(0..2))),
            },
        }
    }

    /// The output columns, in order (both engines name them alike).
    pub fn columns(&self) -> &'static [&'static str] {
        match self {
            Query::Filter { .. } => &["id", "k", "x", "s"],
            Query::KeyedTumble { .. } => &["k", "ws", "n", "total", "lo", "hi"],
            Query::GlobalTumble { .. } => &["ws", "n", "total"],
            Query::Hop { .. } => &["k", "ws", "n", "total"],
            Query::Session { .. } => &["k", "ws", "we", "n"],
            Query::Distinct { .. } => &["k", "r"],
            Query::Updating { .. } | Query::Having { .. } => &["k", "n", "total"],
            Query::Regroup { .. } => &["r", "groups", "rows_in", "top", "bottom", "sizes"],
            Query::OuterJoin { .. } => &["eid", "pid"],
            Query::ChangelogJoin { both: false, .. } => &["eid", "n", "total"],
            Query::ChangelogJoin { both: true, .. } => &["ek", "n", "pk", "total"],
            Query::InnerJoin { .. } => &["eid", "pid", "d"],
            Query::Union { .. } => &["a", "b"],
            Query::RankedRegroup { .. } => &["r", "n", "total", "hi"],
            Query::TopGroups { .. } => &["p", "rn", "k", "n"],
            Query::WindowJoin { .. } => &["eid", "pid", "ws"],
            Query::OuterIntervalJoin {
                window_s: Some(_), ..
            } => &["ws", "n", "matched"],
            Query::IntervalJoin { .. }
            | Query::OuterWindowJoin { .. }
            | Query::OuterIntervalJoin { .. } => &["eid", "pid"],
        }
    }

    pub fn output_kind(&self) -> OutputKind {
        match self {
            Query::Updating { .. } => OutputKind::Upsert,
            Query::Having { .. } | Query::Regroup { .. } | Query::RankedRegroup { .. } => {
                OutputKind::Changelog
            }
            Query::OuterJoin { .. } | Query::ChangelogJoin { .. } | Query::TopGroups { .. } => {
                OutputKind::KeylessChangelog
            }
            Query::Union {
                changelog: true, ..
            } => OutputKind::KeylessChangelog,
            _ => OutputKind::Append,
        }
    }

    /// The riffle pipeline: sources over `input`, a JSON file sink into `out`, every
    /// source throttled to `rate` rows per second so the run spans many checkpoints and
    /// cutting its files into splits of `split_bytes`.
    pub fn riffle_sql(&self, input: &str, out: &str, rate: u64, split_bytes: u64) -> String {
        let source = |name: &str, columns: &str| {
            format!(
                "CREATE TABLE {name} ({columns}, WATERMARK FOR ts AS ts - INTERVAL '{DELAY_S}' SECOND)\n\
                 WITH ('connector' = 'filesystem', 'path' = '{input}/{name}', 'format' = 'json', 'scan.max-records-per-second' = '{rate}', 'scan.split-size' = '{split_bytes}');\n"
            )
        };
        let mut sql = source("ev", "id BIGINT, k BIGINT, v BIGINT, s VARCHAR, ts BIGINT");
        if matches!(
            self,
            Query::WindowJoin { .. }
                | Query::OuterWindowJoin { .. }
                | Query::IntervalJoin { .. }
                | Query::OuterIntervalJoin { .. }
                | Query::OuterJoin { .. }
                | Query::ChangelogJoin { .. }
                | Query::InnerJoin { .. }
                | Query::Union { .. }
        ) {
            sql += &source("pay", "id BIGINT, k BIGINT, amount BIGINT, ts BIGINT");
        }
        let (sink_columns, format) = match self {
            Query::Updating { .. } => (
                "(k BIGINT, n BIGINT, total BIGINT, PRIMARY KEY (k)) ",
                "json",
            ),
            Query::Having { .. } => ("(k BIGINT, n BIGINT, total BIGINT) ", "debezium-json"),
            Query::OuterJoin { .. } => ("(eid BIGINT, pid BIGINT) ", "debezium-json"),
            Query::ChangelogJoin { both: false, .. } => {
                ("(eid BIGINT, n BIGINT, total BIGINT) ", "debezium-json")
            }
            Query::ChangelogJoin { both: true, .. } => (
                "(ek BIGINT, n BIGINT, pk BIGINT, total BIGINT) ",
                "debezium-json",
            ),
            Query::Union {
                changelog: true, ..
            } => ("(a BIGINT, b BIGINT) ", "debezium-json"),
            Query::Regroup { .. } => (
                "(r BIGINT, groups BIGINT, rows_in BIGINT, top BIGINT, bottom BIGINT, sizes BIGINT) ",
                "debezium-json",
            ),
            Query::RankedRegroup { .. } => (
                "(r BIGINT, n BIGINT, total BIGINT, hi BIGINT) ",
                "debezium-json",
            ),
            Query::TopGroups { .. } => ("(p BIGINT, rn BIGINT, k BIGINT, n BIGINT) ", "debezium-json"),
            _ => ("", "json"),
        };
        sql += &format!(
            "CREATE TABLE out {sink_columns}WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = '{format}');\n"
        );
        let ms = |field: &str| format!("CAST({field} AS BIGINT) / 1000000");
        let select = match self {
            Query::Filter { m, r, a, b } => format!(
                "SELECT id, k, v * {a} + ({b}) AS x, upper(s) AS s FROM ev WHERE v % {m} = {r}"
            ),
            Query::KeyedTumble { size_s, filter_mod } => format!(
                "SELECT k, {ws} AS ws, n, total, lo, hi FROM (\n  SELECT k, count(*) AS n, sum(v) AS total, min(v) AS lo, max(v) AS hi, tumble(INTERVAL '{size_s}' SECOND) AS w\n  FROM ev{filter} GROUP BY k, w)",
                ws = ms("w['start']"),
                filter = where_mod(*filter_mod),
            ),
            Query::GlobalTumble { size_s } => format!(
                "SELECT {ws} AS ws, n, total FROM (\n  SELECT count(*) AS n, sum(v) AS total, tumble(INTERVAL '{size_s}' SECOND) AS w FROM ev GROUP BY w)",
                ws = ms("w['start']"),
            ),
            Query::Hop { slide_s, panes } => format!(
                "SELECT k, {ws} AS ws, n, total FROM (\n  SELECT k, count(*) AS n, sum(v) AS total, hop(INTERVAL '{slide_s}' SECOND, INTERVAL '{size}' SECOND) AS w\n  FROM ev GROUP BY k, w)",
                ws = ms("w['start']"),
                size = slide_s * panes,
            ),
            Query::Session { gap_s } => format!(
                "SELECT k, {ws} AS ws, {we} AS we, n FROM (\n  SELECT k, count(*) AS n, session(INTERVAL '{gap_s}' SECOND) AS w FROM ev GROUP BY k, w)",
                ws = ms("w['start']"),
                we = ms("w['end']"),
            ),
            Query::Distinct { m } => format!("SELECT DISTINCT k, v % {m} AS r FROM ev"),
            Query::Updating { filter_mod } => format!(
                "SELECT k, count(*) AS n, sum(v) AS total FROM ev{} GROUP BY k",
                where_mod(*filter_mod)
            ),
            Query::Having { .. } => self.having_sql(),
            Query::Regroup { .. } => self.regroup_sql(),
            Query::Union { .. } => self.union_sql(),
            Query::RankedRegroup { .. } | Query::TopGroups { .. } => self.ranked_sql(),
            Query::OuterJoin { kind } => {
                format!("SELECT e.id AS eid, p.id AS pid FROM ev e {kind} JOIN pay p ON e.k = p.k")
            }
            Query::InnerJoin { .. } => self.inner_join_sql(),
            Query::ChangelogJoin { .. } => self.changelog_join_sql(),
            Query::WindowJoin { size_s } => format!(
                "SELECT e.id AS eid, p.id AS pid, {ws} AS ws\n\
                 FROM (SELECT id, k, tumble(INTERVAL '{size_s}' SECOND) AS w FROM ev) e\n\
                 JOIN (SELECT id, k, tumble(INTERVAL '{size_s}' SECOND) AS w FROM pay) p\n  ON e.k = p.k AND e.w = p.w",
                ws = ms("e.w['start']"),
            ),
            Query::IntervalJoin { lo_ms, hi_ms } => format!(
                "SELECT e.id AS eid, p.id AS pid FROM ev e JOIN pay p ON e.k = p.k\n\
                 WHERE p.ts BETWEEN e.ts - {lo_ms} AND e.ts + {hi_ms}"
            ),
            Query::OuterWindowJoin { size_s, kind } => format!(
                "SELECT e.id AS eid, p.id AS pid\n\
                 FROM (SELECT id, k, tumble(INTERVAL '{size_s}' SECOND) AS w FROM ev) e\n\
                 {kind} JOIN (SELECT id, k, tumble(INTERVAL '{size_s}' SECOND) AS w FROM pay) p\n  ON e.k = p.k AND e.w = p.w"
            ),
            Query::OuterIntervalJoin { window_s, .. } => match window_s {
                None => self.outer_interval_sql(),
                Some(s) => format!(
                    "SELECT {ws} AS ws, count(*) AS n, count(pid) AS matched FROM (\n  SELECT eid, pid, tumble(INTERVAL '{s}' SECOND) AS w FROM ({joined}))\nGROUP BY w",
                    ws = ms("w['start']"),
                    joined = self.outer_interval_sql(),
                ),
            },
        };
        sql + "INSERT INTO out\n" + &select + ";\n"
    }

    /// The same question for DuckDB, over views `ev` and `pay` of the same files.
    pub fn duckdb_sql(&self) -> String {
        match self {
            Query::Filter { m, r, a, b } => format!(
                "SELECT id, k, v * {a} + ({b}) AS x, upper(s) AS s FROM ev WHERE v % {m} = {r}"
            ),
            Query::KeyedTumble { size_s, filter_mod } => {
                let size = size_s * 1000;
                format!(
                    "SELECT k, (ts // {size}) * {size} AS ws, count(*) AS n, sum(v) AS total, min(v) AS lo, max(v) AS hi\n\
                     FROM ev{} GROUP BY k, ws",
                    where_mod(*filter_mod)
                )
            }
            Query::GlobalTumble { size_s } => {
                let size = size_s * 1000;
                format!("SELECT (ts // {size}) * {size} AS ws, count(*) AS n, sum(v) AS total FROM ev GROUP BY ws")
            }
            Query::Hop { slide_s, panes } => {
                let (slide, size) = (slide_s * 1000, slide_s * panes * 1000);
                // Every window start s (a multiple of the slide) with s <= ts < s + size.
                format!(
                    "SELECT k, ws, count(*) AS n, sum(v) AS total FROM (\n  SELECT k, v, unnest(range((ts // {slide}) * {slide} - {back}, (ts // {slide}) * {slide} + 1, {slide})) AS ws FROM ev)\n\
                     GROUP BY k, ws",
                    back = size - slide
                )
            }
            Query::Session { gap_s } => {
                let gap = gap_s * 1000;
                // Gaps and islands: a row at most the gap after its key's previous row
                // continues that row's session (touching sessions are one, as in Flink).
                format!(
                    "WITH marked AS (\n  SELECT k, ts, CASE WHEN ts - lag(ts) OVER (PARTITION BY k ORDER BY ts, id) <= {gap} THEN 0 ELSE 1 END AS fresh FROM ev),\n\
                     numbered AS (\n  SELECT k, ts, sum(fresh) OVER (PARTITION BY k ORDER BY ts ROWS UNBOUNDED PRECEDING) AS session FROM marked)\n\
                     SELECT k, min(ts) AS ws, max(ts) + {gap} AS we, count(*) AS n FROM numbered GROUP BY k, session"
                )
            }
            Query::Distinct { m } => format!("SELECT DISTINCT k, v % {m} AS r FROM ev"),
            Query::Updating { filter_mod } => format!(
                "SELECT k, count(*) AS n, sum(v) AS total FROM ev{} GROUP BY k",
                where_mod(*filter_mod)
            ),
            // The batch answer is the changelog's final state.
            Query::Having { .. } => self.having_sql(),
            Query::Regroup { .. } => self.regroup_sql(),
            Query::Union { .. } => self.union_sql(),
            Query::RankedRegroup { .. } | Query::TopGroups { .. } => self.ranked_sql(),
            Query::OuterJoin { kind } => {
                format!("SELECT e.id AS eid, p.id AS pid FROM ev e {kind} JOIN pay p ON e.k = p.k")
            }
            Query::InnerJoin { .. } => self.inner_join_sql(),
            Query::ChangelogJoin { .. } => self.changelog_join_sql(),
            Query::WindowJoin { size_s } => {
                let size = size_s * 1000;
                format!(
                    "SELECT e.id AS eid, p.id AS pid, (e.ts // {size}) * {size} AS ws FROM ev e JOIN pay p\n  ON e.k = p.k AND e.ts // {size} = p.ts // {size}"
                )
            }
            Query::IntervalJoin { lo_ms, hi_ms } => format!(
                "SELECT e.id AS eid, p.id AS pid FROM ev e JOIN pay p ON e.k = p.k\n\
                 WHERE p.ts BETWEEN e.ts - {lo_ms} AND e.ts + {hi_ms}"
            ),
            Query::OuterWindowJoin { size_s, kind } => {
                let size = size_s * 1000;
                format!(
                    "SELECT e.id AS eid, p.id AS pid FROM ev e {kind} JOIN pay p\n  ON e.k = p.k AND e.ts // {size} = p.ts // {size}"
                )
            }
            Query::OuterIntervalJoin { window_s, kind, .. } => match window_s {
                // A late row joins nothing (the rows near it in time have left the
                // join's state, the other stream's late rows lie too far away), and
                // leaves padded when it is on an outer side.
                None => {
                    let mut sql = self.outer_interval_sql();
                    if *kind != "RIGHT" {
                        sql += "\nUNION ALL SELECT id, NULL FROM ev_late";
                    }
                    if *kind != "LEFT" {
                        sql += "\nUNION ALL SELECT NULL, id FROM pay_late";
                    }
                    sql
                }
                // A joined row's event time is the later of its rows', a padded row's
                // its own.
                Some(s) => {
                    let size = s * 1000;
                    let joined = self.outer_interval_sql().replacen(
                        "SELECT e.id AS eid, p.id AS pid",
                        "SELECT e.id AS eid, p.id AS pid, CASE WHEN e.ts IS NULL THEN p.ts WHEN p.ts IS NULL THEN e.ts ELSE greatest(e.ts, p.ts) END AS t",
                        1,
                    );
                    format!("SELECT (t // {size}) * {size} AS ws, count(*) AS n, count(pid) AS matched FROM ({joined}) GROUP BY ws")
                }
            },
        }
    }
}

impl Query {
    /// Which rows DuckDB answers from: the rows on time where riffle drops late rows (a
    /// window, a window join, a window over an outer interval join's padded rows, which
    /// leave at their late rows' own time) or where they join nothing (an interval
    /// join; an outer side's late rows are added to DuckDB's answer padded); all rows
    /// where event time plays no part.
    pub fn duckdb_input(&self) -> Rows {
        match self {
            Query::KeyedTumble { .. }
            | Query::GlobalTumble { .. }
            | Query::Hop { .. }
            | Query::Session { .. }
            | Query::WindowJoin { .. }
            | Query::OuterWindowJoin { .. }
            | Query::IntervalJoin { .. }
            | Query::OuterIntervalJoin { .. } => Rows::OnTime,
            Query::Filter { .. }
            | Query::Distinct { .. }
            | Query::Updating { .. }
            | Query::Having { .. }
            | Query::Regroup { .. }
            | Query::OuterJoin { .. }
            | Query::ChangelogJoin { .. }
            | Query::InnerJoin { .. }
            | Query::Union { .. }
            | Query::RankedRegroup { .. }
            | Query::TopGroups { .. } => Rows::All,
        }
    }

    /// How many late rows riffle must count as dropped (the newest committed
    /// checkpoint's `late_rows_dropped`), given the input's late rows.
    pub fn late_rows_dropped(&self, late: &LateRows) -> u64 {
        let all_ev = late.ev_values.len() as u64;
        match self {
            Query::KeyedTumble { filter_mod, .. } => match filter_mod {
                Some(m) => late.ev_where(|v| v % m != 0),
                None => all_ev,
            },
            Query::GlobalTumble { .. } | Query::Hop { .. } | Query::Session { .. } => all_ev,
            Query::WindowJoin { .. } | Query::OuterWindowJoin { .. } => all_ev + late.pay,
            // The window drops the padded late rows of the outer sides; the inner
            // side's late rows leave the join's state unmatched, which is no drop.
            Query::OuterIntervalJoin {
                window_s: Some(_),
                kind,
                ..
            } => match *kind {
                "LEFT" => all_ev,
                "RIGHT" => late.pay,
                _ => all_ev + late.pay,
            },
            _ => 0,
        }
    }
}
