//! Which joins with a window's maximum run as `WindowMaxRows` by time: Flink's q7 text
//! and its exact variants do; any other bound runs as the join it is (its answers are
//! compared with DuckDB in the CLI's suite test, `more/*_rows_by_time.sql`).

use crate::common;

use common::{plan, BID};
use riffle_runtime::PhysicalPlan;

/// Flink's q7 with `filter` as the join's time condition and `window` the tumble size.
fn q7(window: &str, select: &str, filter: &str) -> String {
    format!(
        "{BID}CREATE TABLE out WITH ('connector' = 'blackhole');
         INSERT INTO out SELECT B.auction, B.price, B.bidder, B.date_time
         FROM bid B JOIN (
           SELECT {select}
           FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(date_time), INTERVAL '{window}' SECOND))
           GROUP BY window_start, window_end
         ) B1 ON B.price = B1.maxprice
         WHERE {filter};"
    )
}

fn explained(text: &str) -> String {
    let p = plan(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    PhysicalPlan::compile(&p.graph).explain(&p.graph)
}

const FLINK: &str = "B.date_time BETWEEN B1.`dateTime` - INTERVAL '10' SECOND AND B1.`dateTime`";
const END: &str = "MAX(price) AS maxprice, window_end AS `dateTime`";

#[test]
fn flink_q7s_join_with_the_windows_max_by_time_runs_as_max_rows() {
    let e = explained(&q7("10", END, FLINK));
    assert!(
        e.contains("[start, end] of a tumble(10s) holding its max(price) [global]"),
        "{e}"
    );
    assert!(!e.contains("join"), "{e}");
    // The window's start instead of its end, the bounds the other way round, the end
    // left out, and MIN.
    let starts = "MAX(price) AS maxprice, window_start, window_end";
    let e = explained(&q7(
        "10",
        starts,
        "B1.window_start <= B.date_time AND B.date_time < B1.window_end",
    ));
    assert!(
        e.contains("[start, end) of a tumble(10s) holding its max(price)"),
        "{e}"
    );
    let min = "MIN(price) AS maxprice, window_end AS `dateTime`";
    let e = explained(&q7("10", min, FLINK));
    assert!(e.contains("holding its min(price)"), "{e}");
}

#[test]
fn other_time_bounds_run_as_the_join_they_are() {
    for (window, filter) in [
        // Half the window.
        ("10", "B.date_time BETWEEN B1.`dateTime` - INTERVAL '5' SECOND AND B1.`dateTime`"),
        // Bounds of a window of another size.
        ("5", FLINK),
        // The window's start left out.
        ("10", "B.date_time > B1.`dateTime` - INTERVAL '10' SECOND AND B.date_time <= B1.`dateTime`"),
        // One bound only.
        ("10", "B.date_time <= B1.`dateTime`"),
        // The rows' time shifted by a second.
        ("10", "B.date_time + INTERVAL '1' SECOND BETWEEN B1.`dateTime` - INTERVAL '10' SECOND AND B1.`dateTime`"),
    ] {
        let e = explained(&q7(window, END, filter));
        assert!(!e.contains("max_rows"), "{filter}:\n{e}");
        assert!(e.contains("join"), "{filter}:\n{e}");
    }
}

#[test]
fn null_safe_equality_text_values_and_processing_time_run_as_the_join() {
    // IS NOT DISTINCT FROM matches a window whose maximum is NULL; the operator never
    // matches NULL.
    let null_safe = q7("10", END, FLINK).replace(
        "ON B.price = B1.maxprice",
        "ON B.price IS NOT DISTINCT FROM B1.maxprice",
    );
    let text = q7(
        "10",
        "MAX(url) AS maxprice, window_end AS `dateTime`",
        FLINK,
    )
    .replace("ON B.price = B1.maxprice", "ON B.url = B1.maxprice");
    // In processing time the bounds compare the read time cut to milliseconds.
    let proctime = q7("10", END, FLINK)
        .replace(
            "CREATE TABLE out",
            "CREATE VIEW b AS SELECT *, PROCTIME() AS p FROM bid;\nCREATE TABLE out",
        )
        .replace("FROM bid B JOIN", "FROM b B JOIN")
        .replace("TABLE bid, DESCRIPTOR(date_time)", "TABLE b, DESCRIPTOR(p)")
        .replace("B.date_time BETWEEN", "B.p BETWEEN");
    for query in [null_safe, text, proctime] {
        let e = explained(&query);
        assert!(!e.contains("max_rows"), "{query}:\n{e}");
    }
}

#[test]
fn a_join_with_the_windows_max_over_window_tvfs_runs_as_max_rows() {
    let tvf = "TABLE(TUMBLE(TABLE bid, DESCRIPTOR(date_time), INTERVAL '10' SECOND))";
    let text = format!(
        "{BID}CREATE TABLE out WITH ('connector' = 'blackhole');
         INSERT INTO out SELECT B.auction, B.price, B1.window_start, B1.maxprice
         FROM {tvf} B JOIN (
           SELECT MAX(price) AS maxprice, window_start, window_end FROM {tvf}
           GROUP BY window_start, window_end
         ) B1 ON B.window_start = B1.window_start AND B.price = B1.maxprice;"
    );
    let e = explained(&text);
    assert!(
        e.contains("tumble(10s) rows with max(price) [global]"),
        "{e}"
    );
    assert!(!e.contains("window join"), "{e}");
}

#[test]
fn hops_read_per_row_and_cumulates_joined_on_their_start_run_as_the_join() {
    // A row of a per-row HOP is in several windows: the join expands it first.
    let hop =
        "TABLE(HOP(TABLE bid, DESCRIPTOR(date_time), INTERVAL '2' SECOND, INTERVAL '10' SECOND))";
    let hops = format!(
        "{BID}CREATE TABLE out WITH ('connector' = 'blackhole');
         INSERT INTO out SELECT B.auction, B.price, B1.window_start, B1.maxprice
         FROM {hop} B JOIN (
           SELECT MAX(price) AS maxprice, window_start, window_end FROM {hop}
           GROUP BY window_start, window_end
         ) B1 ON B.window_start = B1.window_start AND B.window_end = B1.window_end
           AND B.price = B1.maxprice;"
    );
    // Cumulating windows share their start: joined on it alone, a row meets several.
    let cumulate = format!(
        "{BID}CREATE VIEW counts AS SELECT auction, window_start, window_end, COUNT(*) AS num
           FROM TABLE(CUMULATE(TABLE bid, DESCRIPTOR(date_time), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
           GROUP BY auction, window_start, window_end;
         CREATE TABLE out WITH ('connector' = 'blackhole');
         INSERT INTO out SELECT c.auction, c.num, m.window_end, m.maxn
         FROM counts c JOIN (SELECT window_start, window_end, MAX(num) AS maxn FROM counts
                             GROUP BY window_start, window_end) m
         ON c.window_start = m.window_start AND c.num = m.maxn;"
    );
    for query in [cumulate, hops] {
        let e = explained(&query);
        assert!(!e.contains("max_rows"), "{query}:\n{e}");
    }
}
