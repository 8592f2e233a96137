//! What a user sees when a pipeline file is wrong: the place, the construct, the fix.

use riffle_runtime::PhysicalPlan;
use riffle_sql::{plan_pipeline, ConnectorRegistry, PlanOptions, SqlError};

const BID: &str =
    "CREATE TABLE bid WITH ('connector' = 'nexmark', 'event_type' = 'bid', 'events' = '1000');\n";

fn plan(text: &str) -> Result<riffle_sql::SqlPipeline, SqlError> {
    let options = PlanOptions {
        name: "test".into(),
        parallelism: 2,
        max_parallelism: riffle_core::DEFAULT_MAX_PARALLELISM,
        settings: Default::default(),
    };
    plan_pipeline(text, &options, &ConnectorRegistry::default())
}

fn error(text: &str) -> String {
    match plan(text) {
        Ok(_) => panic!("planned, but should not have:\n{text}"),
        Err(e) => e.to_string(),
    }
}

fn assert_mentions(message: &str, parts: &[&str]) {
    for p in parts {
        assert!(message.contains(p), "`{p}` missing from:\n{message}");
    }
}

#[test]
fn syntax_errors_name_line_and_column() {
    let e = error(&format!("{BID}CREATE TABLE out WITH ('connector' = 'stdout');\nINSERT INTO out SELEC auction FROM bid;"));
    assert_mentions(&e, &["syntax error at line 3, column"]);
}

#[test]
fn unknown_columns_name_the_statement_line() {
    let e = error(&format!(
        "{BID}CREATE TABLE out WITH ('connector' = 'stdout');\n\nINSERT INTO out SELECT auctoin FROM bid;"
    ));
    assert_mentions(&e, &["line 4, column 24", "auctoin"]);
}

#[test]
fn unknown_options_list_the_valid_ones() {
    let e = error(&format!(
        "{BID}CREATE TABLE out WITH ('connector' = 'filesystem', 'path' = 'x', 'format' = 'json', 'rolling' = '1');\nINSERT INTO out SELECT auction FROM bid;"
    ));
    assert_mentions(
        &e,
        &[
            "table `out`",
            "no option 'rolling'",
            "'path'",
            "'format'",
            "'on_malformed'",
        ],
    );
    let e = error("CREATE TABLE bid WITH ('connector' = 'kafak');\n");
    assert_mentions(
        &e,
        &[
            "unknown connector 'kafak'",
            "nexmark",
            "filesystem",
            "stdout",
            "blackhole",
        ],
    );
    let e = error("CREATE TABLE bid WITH ('connector' = 'nexmark');\nCREATE TABLE out WITH ('connector' = 'stdout');\nINSERT INTO out SELECT * FROM bid;");
    assert_mentions(&e, &["option 'event_type' is required"]);
}

#[test]
fn unbounded_constructs_are_named_with_a_hint() {
    let sink = "CREATE TABLE out WITH ('connector' = 'stdout');\n";
    for (query, named) in [
        ("SELECT auction FROM bid ORDER BY price", "ORDER BY"),
        ("SELECT auction FROM bid LIMIT 10", "LIMIT"),
        (
            "SELECT auction, row_number() OVER (PARTITION BY auction ORDER BY price) AS n FROM bid",
            "OVER",
        ),
        (
            "SELECT a.auction FROM bid a LEFT JOIN bid b ON a.auction = b.bidder AND a.price < b.price",
            "condition besides column equalities",
        ),
        (
            "SELECT a.auction FROM bid a LEFT JOIN bid b ON a.auction = b.bidder AND b.date_time >= a.date_time - INTERVAL '1' SECOND",
            "bounds only one side",
        ),
        (
            "SELECT a.auction FROM bid a LEFT JOIN bid b ON a.auction = b.bidder AND b.date_time BETWEEN a.date_time - INTERVAL '1' SECOND AND a.date_time + INTERVAL '2' SECOND AND a.price < b.price",
            "more than equalities and event-time bounds",
        ),
        (
            "SELECT a.auction FROM bid a JOIN bid b ON a.price < b.price",
            "without an equality",
        ),
    ] {
        let e = error(&format!("{BID}{sink}INSERT INTO out {query};"));
        assert_mentions(
            &e,
            &[
                named,
                "not supported on a stream",
                "hint:",
                "line 3, column 1",
            ],
        );
    }
}

#[test]
fn an_updating_result_needs_a_sink_that_takes_updates() {
    let query = "INSERT INTO out SELECT auction, count(*) AS n FROM bid GROUP BY auction;";
    let e = error(&format!(
        "{BID}CREATE TABLE out WITH ('connector' = 'filesystem', 'path' = 'x', 'format' = 'json');\n{query}"
    ));
    assert_mentions(
        &e,
        &[
            "the result is updating",
            "append-only",
            "PRIMARY KEY",
            "hint:",
        ],
    );
    // Accepted with a primary key equal to the group columns, or by stdout.
    plan(&format!(
        "{BID}CREATE TABLE out (auction BIGINT, n BIGINT, PRIMARY KEY (auction)) WITH ('connector' = 'filesystem', 'path' = 'x', 'format' = 'json');\n{query}"
    ))
    .unwrap();
    plan(&format!(
        "{BID}CREATE TABLE out WITH ('connector' = 'stdout');\n{query}"
    ))
    .unwrap();
    let e = error(&format!(
        "{BID}CREATE TABLE out (auction BIGINT, n BIGINT, PRIMARY KEY (n)) WITH ('connector' = 'filesystem', 'path' = 'x', 'format' = 'json');\n{query}"
    ));
    assert_mentions(&e, &["PRIMARY KEY (n)", "updated per (auction)"]);
}

#[test]
fn a_filtered_updating_result_is_a_changelog_that_only_deleting_sinks_take() {
    let having = "INSERT INTO out SELECT auction, count(*) AS n FROM bid GROUP BY auction HAVING count(*) % 2 = 1;";
    let outer = "INSERT INTO out SELECT * FROM (SELECT auction, count(*) AS n FROM bid GROUP BY auction) WHERE n > 3;";
    for query in [having, outer] {
        for sink in [
            "WITH ('connector' = 'stdout')",
            "WITH ('connector' = 'blackhole')",
            "WITH ('connector' = 'filesystem', 'path' = 'x', 'format' = 'debezium-json')",
            "(auction BIGINT, n BIGINT, PRIMARY KEY (auction)) WITH ('connector' = 'postgres', 'url' = 'postgres://u@127.0.0.1:1/db')",
        ] {
            plan(&format!("{BID}CREATE TABLE out {sink};\n{query}"))
                .unwrap_or_else(|e| panic!("{sink}: {e}"));
        }
        // A keyed topic takes tombstones; an unkeyed one cannot delete.
        let kafka = "WITH ('connector' = 'kafka', 'topic' = 't', 'bootstrap.servers' = '127.0.0.1:1', 'format' = 'json')";
        plan(&format!(
            "{BID}CREATE TABLE out (auction BIGINT, n BIGINT, PRIMARY KEY (auction)) {kafka};\n{query}"
        ))
        .unwrap();
        let e = error(&format!("{BID}CREATE TABLE out {kafka};\n{query}"));
        assert_mentions(&e, &["withdraws rows", "PRIMARY KEY", "hint:"]);
        // Upsert files cannot say "withdrawn".
        let e = error(&format!(
            "{BID}CREATE TABLE out (auction BIGINT, n BIGINT, PRIMARY KEY (auction)) WITH ('connector' = 'filesystem', 'path' = 'x', 'format' = 'json');\n{query}"
        ));
        assert_mentions(&e, &["withdraws rows", "debezium-json", "hint:"]);
    }
    // A filter over a Top-N reads its changelog (DataFusion merges it into the Top-N's
    // own WHERE, whose other conjuncts then filter the ranked rows).
    let top3 = "SELECT * FROM (SELECT auction, price, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rn FROM bid) WHERE rn <= 3";
    let filtered = plan(&format!(
        "{BID}CREATE TABLE out WITH ('connector' = 'stdout');\nINSERT INTO out SELECT * FROM ({top3}) WHERE price % 2 = 0;"
    ))
    .unwrap();
    let explained = PhysicalPlan::compile(&filtered.graph).explain(&filtered.graph);
    assert!(explained.contains("changelog -U/+U"), "{explained}");
    // Each edge says what its rows are: the source's final, the Top-N's a changelog.
    let edge = |from: &str| {
        explained
            .lines()
            .find(|l| l.contains(&format!("<- [{from}]")))
            .unwrap_or_else(|| panic!("no edge from {from}:\n{explained}"))
            .to_string()
    };
    assert!(edge("bid").ends_with(", append-only"), "{explained}");
    assert!(edge("top_n_1").ends_with(", changelog"), "{explained}");
    // Unread by a filter, the Top-N is an upsert stream.
    let upserts = plan(&format!(
        "{BID}CREATE TABLE out WITH ('connector' = 'stdout');\nINSERT INTO out {top3};"
    ))
    .unwrap();
    let explained = PhysicalPlan::compile(&upserts.graph).explain(&upserts.graph);
    assert!(
        explained.contains("<- [top_n_1] forward (chained), upsert")
            || explained.contains("<- [top_n_1] forward, upsert"),
        "{explained}"
    );
    // … and so does an aggregate over one.
    plan(&format!(
        "{BID}CREATE TABLE out WITH ('connector' = 'stdout');\nINSERT INTO out SELECT rn, count(*) AS n, max(price) AS top FROM ({top3}) GROUP BY rn;"
    ))
    .unwrap();
    // An aggregate over a changelog takes rows back: count, sum, avg, min, max and
    // count(DISTINCT) (once per column).
    let inner = "(SELECT auction, count(*) AS n, max(price) AS top FROM bid GROUP BY auction)";
    plan(&format!(
        "{BID}CREATE TABLE out WITH ('connector' = 'stdout');\nINSERT INTO out SELECT n, count(*) AS auctions, sum(top) AS s, avg(top) AS a FROM {inner} GROUP BY n;"
    ))
    .unwrap();
    plan(&format!(
        "{BID}CREATE TABLE out WITH ('connector' = 'stdout');\nINSERT INTO out SELECT n, max(top) AS m, min(top) AS l FROM {inner} GROUP BY n;"
    ))
    .unwrap();
    plan(&format!(
        "{BID}CREATE TABLE out WITH ('connector' = 'stdout');\nINSERT INTO out SELECT n, count(DISTINCT top) AS m FROM {inner} GROUP BY n;"
    ))
    .unwrap();
    let e = error(&format!(
        "{BID}CREATE TABLE out WITH ('connector' = 'stdout');\nINSERT INTO out SELECT n, count(DISTINCT top) AS m, count(DISTINCT top) FILTER (WHERE top > 5) AS m5 FROM {inner} GROUP BY n;"
    ));
    assert_mentions(&e, &["count(DISTINCT", "hint:"]);
    // Outer joins emit padded rows and withdraw them: a keyless changelog, applied by the
    // key a table declares.
    let left = "INSERT INTO out SELECT a.auction, a.price, b.bidder FROM bid a LEFT JOIN bid b ON a.auction = b.bidder;";
    for sink in [
        "WITH ('connector' = 'stdout')",
        "WITH ('connector' = 'filesystem', 'path' = 'x', 'format' = 'debezium-json')",
        "(auction BIGINT, price BIGINT, bidder BIGINT, PRIMARY KEY (auction)) WITH ('connector' = 'postgres', 'url' = 'postgres://u@127.0.0.1:1/db')",
    ] {
        plan(&format!("{BID}CREATE TABLE out {sink};\n{left}")).unwrap_or_else(|e| panic!("{sink}: {e}"));
    }
    let e = error(&format!(
        "{BID}CREATE TABLE out WITH ('connector' = 'filesystem', 'path' = 'x', 'format' = 'json');\n{left}"
    ));
    assert_mentions(&e, &["withdraws rows", "debezium-json"]);
    // An outer window join's padded rows leave when the window closes: append-only, so
    // even plain JSON files take them.
    let windowed = plan(&format!(
        "{BID}CREATE TABLE out WITH ('connector' = 'filesystem', 'path' = 'x', 'format' = 'json');\nINSERT INTO out SELECT a.auction, b.bidder FROM (SELECT *, tumble(INTERVAL '1' SECOND) AS w FROM bid) a FULL JOIN (SELECT *, tumble(INTERVAL '1' SECOND) AS w FROM bid) b ON a.auction = b.bidder AND a.w = b.w;"
    ))
    .unwrap();
    let explained = PhysicalPlan::compile(&windowed.graph).explain(&windowed.graph);
    assert!(explained.contains("full outer join"), "{explained}");
    assert!(!explained.contains(", changelog"), "{explained}");
    // So do an outer interval join's, when their bounds close; the join checks the
    // bounds itself (strict ones too), in either order of the sides.
    let interval = plan(&format!(
        "{BID}CREATE TABLE out WITH ('connector' = 'filesystem', 'path' = 'x', 'format' = 'json');\nINSERT INTO out SELECT a.auction, b.bidder FROM bid a LEFT JOIN bid b ON a.auction = b.bidder AND a.date_time < b.date_time + INTERVAL '1' SECOND AND b.date_time <= a.date_time + INTERVAL '2' SECOND;"
    ))
    .unwrap();
    let explained = PhysicalPlan::compile(&interval.graph).explain(&interval.graph);
    assert!(
        explained.contains(
            "interval left outer join (keep left 2s, right 1s; right - left in (-1s, 2s])"
        ),
        "{explained}"
    );
    assert!(!explained.contains(", changelog"), "{explained}");
    // debezium-json is a sink format only.
    let e = error(
        "CREATE TABLE src (ts BIGINT, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'filesystem', 'path' = 'x', 'format' = 'debezium-json');\nCREATE TABLE out WITH ('connector' = 'stdout');\nINSERT INTO out SELECT ts FROM src;",
    );
    assert_mentions(&e, &["debezium-json", "not supported yet"]);
}

#[test]
fn file_sources_need_their_event_time() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.jsonl"), "{\"ts\": 1, \"v\": 2}\n").unwrap();
    let text = format!(
        "CREATE TABLE src WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');\nCREATE TABLE out WITH ('connector' = 'stdout');\nINSERT INTO out SELECT v FROM src;",
        dir.path().display()
    );
    assert_mentions(&error(&text), &["table `src`", "WATERMARK FOR ts"]);
    let with_watermark = text.replace(
        "CREATE TABLE src WITH",
        "CREATE TABLE src (ts BIGINT, v BIGINT, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH",
    );
    plan(&with_watermark).unwrap();
}

#[test]
fn window_functions_are_checked() {
    let sink = "CREATE TABLE out WITH ('connector' = 'stdout');\n";
    let e = error(&format!(
        "{BID}{sink}INSERT INTO out SELECT count(*) AS n, hop(INTERVAL '3' SECOND, INTERVAL '10' SECOND) AS w FROM bid GROUP BY w;"
    ));
    assert_mentions(&e, &["multiple of the slide", "hint: write hop("]);
    let e = error(&format!(
        "{BID}{sink}INSERT INTO out SELECT auction, hop(INTERVAL '2' SECOND, INTERVAL '10' SECOND) AS w FROM bid;"
    ));
    assert_mentions(
        &e,
        &["outside GROUP BY", "several hopping or cumulating windows"],
    );
    let e = error(&format!(
        "{BID}{sink}INSERT INTO out SELECT count(*) AS n, cumulate(INTERVAL '3' SECOND, INTERVAL '10' SECOND) AS w FROM bid GROUP BY w;"
    ));
    assert_mentions(&e, &["multiple of the step", "hint: write cumulate("]);
    // Rows of HOP and CUMULATE windows join once per window (`window_expand`).
    let cumulate = format!("{BID}{sink}INSERT INTO out SELECT b.auction FROM TABLE(CUMULATE(TABLE bid, DESCRIPTOR(date_time), INTERVAL '1' SECOND, INTERVAL '2' SECOND)) b JOIN TABLE(CUMULATE(TABLE bid, DESCRIPTOR(date_time), INTERVAL '1' SECOND, INTERVAL '2' SECOND)) c ON b.auction = c.auction AND b.window_start = c.window_start AND b.window_end = c.window_end;");
    plan(&cumulate).unwrap();
    let hop = format!("{BID}{sink}INSERT INTO out SELECT b.auction FROM TABLE(HOP(TABLE bid, DESCRIPTOR(date_time), INTERVAL '1' SECOND, INTERVAL '2' SECOND)) b JOIN TABLE(HOP(TABLE bid, DESCRIPTOR(date_time), INTERVAL '1' SECOND, INTERVAL '2' SECOND)) c ON b.auction = c.auction AND b.window_start = c.window_start AND b.window_end = c.window_end;");
    plan(&hop).unwrap();
    // A row's own tumble beside its hopping windows: which window would it be?
    let e = error(&format!("{BID}{sink}INSERT INTO out SELECT b.auction, b.window_start, tumble(INTERVAL '1' SECOND) AS w FROM TABLE(HOP(TABLE bid, DESCRIPTOR(date_time), INTERVAL '1' SECOND, INTERVAL '2' SECOND)) b;"));
    assert_mentions(
        &e,
        &["rows in two kinds of windows at once (hop(2s, 1s) and tumble(1s))"],
    );
    // Windows of two shapes are not one window.
    let e = error(&hop.replacen("INTERVAL '2' SECOND", "INTERVAL '4' SECOND", 1));
    assert_mentions(&e, &["joins windows of different shapes"]);
    // Tumbling windows of the rows themselves join.
    plan(
        &hop.replace("HOP(", "TUMBLE(")
            .replace("INTERVAL '1' SECOND, ", ""),
    )
    .unwrap();
    let e = error(&format!(
        "{BID}{sink}INSERT INTO out SELECT count(*) AS n, tumble(price) AS w FROM bid GROUP BY w;"
    ));
    assert_mentions(&e, &["not a positive interval literal"]);
}

#[test]
fn a_file_without_insert_computes_nothing() {
    let e = error(BID);
    assert_mentions(&e, &["no INSERT INTO"]);
    let e = error(&format!("{BID}SELECT * FROM bid;"));
    assert_mentions(&e, &["nowhere to write", "stdout"]);
}

#[test]
fn watermarks_must_trail_the_event_time_column() {
    let e = error("CREATE TABLE bid (WATERMARK FOR date_time AS date_time + INTERVAL '4' SECOND) WITH ('connector' = 'nexmark', 'event_type' = 'bid');");
    assert_mentions(&e, &["line 1, column 19", "unsupported watermark", "hint:"]);
    let e = error("CREATE TABLE bid (WATERMARK FOR expires AS expires) WITH ('connector' = 'nexmark', 'event_type' = 'auction');\nCREATE TABLE out WITH ('connector' = 'stdout');\nINSERT INTO out SELECT id FROM bid;");
    assert_mentions(&e, &["event time is `date_time`"]);
}

#[test]
fn csv_sinks_refuse_nested_columns() {
    let e = error(&format!(
        "{BID}CREATE TABLE out WITH ('connector' = 'filesystem', 'path' = 'x', 'format' = 'csv');\nINSERT INTO out SELECT count(*) AS n, tumble(INTERVAL '1' SECOND) AS w FROM bid GROUP BY w;"
    ));
    assert_mentions(
        &e,
        &[
            "cannot hold the nested column `w`",
            "w['start'] AS window_start",
        ],
    );
}

#[test]
fn on_malformed_takes_fail_or_skip_in_any_case_for_every_source() {
    let sink =
        "CREATE TABLE out WITH ('connector' = 'stdout');\nINSERT INTO out SELECT a FROM src;";
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, "{\"a\": 1, \"ts\": \"2026-01-01T00:00:00Z\"}\n").unwrap();
    let sources = [
        format!(
            "'connector' = 'filesystem', 'path' = '{}', 'format' = 'json'",
            input.display()
        ),
        "'connector' = 'kafka', 'topic' = 't', 'bootstrap.servers' = '127.0.0.1:1', 'format' = 'json'".to_string(),
    ];
    for source in &sources {
        let table = |choice: &str| {
            format!(
                "CREATE TABLE src (a BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ({source}, 'on_malformed' = '{choice}');\n{sink}"
            )
        };
        let e = error(&table("drop"));
        assert_mentions(
            &e,
            &["table `src`", "'on_malformed' = 'drop'", "fail or skip"],
        );
        for accepted in ["skip", "SKIP", "Fail"] {
            if let Err(e) = plan(&table(accepted)) {
                panic!("{source}: 'on_malformed' = '{accepted}' refused: {e}");
            }
        }
    }
}

#[test]
fn durations_in_options_are_checked() {
    let table = |value: &str| {
        format!(
            "CREATE TABLE src (a BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'kafka', 'topic' = 't', 'bootstrap.servers' = '127.0.0.1:1', 'scan.watermark.idle-timeout' = '{value}');\nCREATE TABLE out WITH ('connector' = 'stdout');\nINSERT INTO out SELECT a FROM src;"
        )
    };
    for bad in ["soon", "0s", "5 fortnights", "-1s"] {
        assert_mentions(
            &error(&table(bad)),
            &[
                &format!("'scan.watermark.idle-timeout' = '{bad}'"),
                "not a duration such as 5s",
            ],
        );
    }
    for good in ["5s", "500 ms", "1 minute", "2.5s", "none", "NONE"] {
        if let Err(e) = plan(&table(good)) {
            panic!("'{good}' refused: {e}");
        }
    }
}

#[test]
fn a_kafka_table_takes_an_updating_result_only_with_its_key() {
    let query = "INSERT INTO out SELECT auction, count(*) AS n FROM bid GROUP BY auction;";
    let kafka = "'connector' = 'kafka', 'bootstrap.servers' = '127.0.0.1:1', 'topic' = 't'";
    let e = error(&format!("{BID}CREATE TABLE out WITH ({kafka});\n{query}"));
    assert_mentions(&e, &["the result is updating", "declare PRIMARY KEY"]);
    let e = error(&format!(
        "{BID}CREATE TABLE out (auction BIGINT, n BIGINT, PRIMARY KEY (auction)) WITH ({kafka}, 'key.field' = 'n');\n{query}"
    ));
    assert_mentions(&e, &["PRIMARY KEY (…) or 'key.field', not both"]);
    let keyed = format!(
        "{BID}CREATE TABLE out (auction BIGINT, n BIGINT, PRIMARY KEY (auction)) WITH ({kafka});\n{query}"
    );
    if let Err(e) = plan(&keyed) {
        panic!("a keyed topic was refused: {e}");
    }
}

#[test]
fn a_partitioned_sink_is_refused_not_written_unpartitioned() {
    let sink = |clause: &str| {
        error(&format!(
            "{BID}CREATE TABLE out (auction BIGINT, price BIGINT) {clause} WITH ('connector' = 'filesystem', 'path' = 'x', 'format' = 'json');\nINSERT INTO out SELECT auction, price FROM bid;"
        ))
    };
    for clause in [
        "PARTITIONED BY (auction)",
        "PARTITIONED BY (bucket(4, auction))",
    ] {
        let e = sink(clause);
        assert_mentions(
            &e,
            &[
                "PARTITIONED BY on `out`",
                "'filesystem'",
                "only the iceberg connector",
            ],
        );
    }
    // Hive's typed form is not a partition term.
    let e = sink("PARTITIONED BY (auction BIGINT)");
    assert_mentions(&e, &["PARTITIONED BY of `out`", "found `BIGINT`"]);
}

#[test]
fn date_format_refuses_pattern_letters_it_does_not_know() {
    let e = error(&format!(
        "{BID}CREATE TABLE out WITH ('connector' = 'stdout');\nINSERT INTO out SELECT DATE_FORMAT(date_time, 'yyyy-ww') AS week FROM bid;"
    ));
    assert_mentions(&e, &["DATE_FORMAT", "`ww`", "not supported"]);
}

#[test]
fn sums_of_strings_are_refused_with_what_to_write() {
    let e = error(&format!(
        "{BID}CREATE TABLE out WITH ('connector' = 'stdout');\nINSERT INTO out SELECT auction, sum(extra) AS s, tumble(INTERVAL '10' SECOND) AS w FROM bid GROUP BY auction, w;"
    ));
    assert_mentions(&e, &["line 3", "sum(Utf8)"]);
}

#[test]
fn row_numbers_run_only_as_a_bounded_top_n() {
    let sink = "CREATE TABLE out WITH ('connector' = 'stdout');\n";
    // Unbounded: every row's number changes as rows arrive.
    let e = error(&format!(
        "{BID}{sink}INSERT INTO out SELECT auction, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rn FROM bid;"
    ));
    assert_mentions(
        &e,
        &["ROW_NUMBER() OVER (…) outside a Top-N", "WHERE rn <= 10"],
    );
    // The top 3 without its rank has no key to update rows by.
    let e = error(&format!(
        "{BID}{sink}INSERT INTO out SELECT auction, price FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rn FROM bid) WHERE rn <= 3;"
    ));
    assert_mentions(
        &e,
        &["updated per `row_number()", "the row number of a Top-N"],
    );
    // Top-1 keyed by the partition alone plans.
    plan(&format!(
        "{BID}{sink}INSERT INTO out SELECT auction, price FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rn FROM bid) WHERE rn = 1;"
    ))
    .unwrap();
}

#[test]
fn java_functions_are_refused_with_the_sql_form() {
    let e = error(&format!(
        "{BID}CREATE FUNCTION count_char AS 'com.github.nexmark.flink.udf.CountChar';\nCREATE TABLE out WITH ('connector' = 'stdout');\nINSERT INTO out SELECT count_char(extra, 'c') AS n FROM bid;"
    ));
    assert_mentions(
        &e,
        &[
            "line 2",
            "riffle runs no JVM",
            "CREATE FUNCTION name(a VARCHAR",
        ],
    );
}

#[test]
fn event_time_beside_processing_time_and_event_time_lookups_are_refused_by_name() {
    let sink = "CREATE TABLE out WITH ('connector' = 'stdout');\n";
    let e = error(&format!(
        "{BID}CREATE VIEW b AS SELECT *, PROCTIME() AS p FROM bid;\n{sink}INSERT INTO out SELECT window_start, count(*) FROM TABLE(TUMBLE(TABLE b, DESCRIPTOR(date_time), INTERVAL '10' SECOND)) GROUP BY window_start, window_end;\nCREATE TABLE out2 WITH ('connector' = 'stdout');\nINSERT INTO out2 SELECT window_start, count(*) FROM TABLE(TUMBLE(TABLE b, DESCRIPTOR(p), INTERVAL '10' SECOND)) GROUP BY window_start, window_end;"
    ));
    assert_mentions(
        &e,
        &[
            "`date_time` is not the time of its rows",
            "sources are read in processing time",
        ],
    );
    let e = error(&format!(
        "{BID}CREATE TABLE side WITH ('connector' = 'nexmark', 'event_type' = 'person', 'events' = '10');\n{sink}INSERT INTO out SELECT b.auction FROM bid b JOIN side FOR SYSTEM_TIME AS OF b.date_time AS s ON b.bidder = s.id;"
    ));
    assert_mentions(
        &e,
        &[
            "line 4, column 55",
            "`date_time` is not a PROCTIME() column",
        ],
    );
}

#[test]
fn a_timestamp_as_text_is_refused_because_its_text_would_differ_from_flinks() {
    let sink = "CREATE TABLE out WITH ('connector' = 'stdout');\n";
    for select in ["CAST(date_time AS VARCHAR)", "CONCAT('at ', date_time)"] {
        let e = error(&format!(
            "{BID}{sink}INSERT INTO out SELECT {select} AS t FROM bid;"
        ));
        assert_mentions(
            &e,
            &["as text", "DATE_FORMAT(", "'yyyy-MM-dd HH:mm:ss.SSS'"],
        );
    }
    // Flink's text, spelled out, plans.
    plan(&format!(
        "{BID}{sink}INSERT INTO out SELECT DATE_FORMAT(date_time, 'yyyy-MM-dd HH:mm:ss.SSS') AS t FROM bid;"
    ))
    .unwrap();
}

#[test]
fn convert_tz_refuses_zones_flink_would_read_as_gmt() {
    let sink = "CREATE TABLE out WITH ('connector' = 'stdout');\n";
    let call = |args: &str| {
        format!(
            "{BID}{sink}INSERT INTO out SELECT CONVERT_TZ(DATE_FORMAT(date_time, 'yyyy-MM-dd HH:mm:ss'), {args}) AS t FROM bid;"
        )
    };
    plan(&call("'UTC', 'America/Los_Angeles'")).expect("IANA names plan");
    let e = error(&call("'UTC', '+08:00'"));
    assert_mentions(&e, &["CONVERT_TZ", "'+08:00'", "GMT+08:00"]);
    let e = error(&call("'UTC', channel"));
    assert_mentions(&e, &["CONVERT_TZ", "string literal"]);
    let e = error(&format!(
        "{BID}{sink}INSERT INTO out SELECT CONVERT_TZ(date_time, 'UTC', 'UTC') AS t FROM bid;"
    ));
    assert_mentions(&e, &["CONVERT_TZ", "DATE_FORMAT"]);
}

#[test]
fn union_all_and_union_plan_with_appended_rows_as_inserts_beside_a_changelog() {
    let sink = "CREATE TABLE out WITH ('connector' = 'stdout');\n";
    for query in [
        "SELECT auction, price FROM bid UNION ALL SELECT bidder, price FROM bid",
        "SELECT auction FROM bid UNION SELECT bidder FROM bid",
        "SELECT auction, count(*) AS n FROM bid GROUP BY auction UNION ALL SELECT bidder, price FROM bid",
        "SELECT auction, count(*) AS n FROM bid GROUP BY auction HAVING count(*) > 1 UNION ALL SELECT bidder, price FROM bid",
    ] {
        plan(&format!("{BID}{sink}INSERT INTO out {query};"))
            .unwrap_or_else(|e| panic!("{query}: {e}"));
    }
}

#[test]
fn debezium_sources_are_changelogs_and_their_schema_option_is_checked() {
    let source = |format: &str| {
        format!(
            "CREATE TABLE acc (id BIGINT, region VARCHAR, balance BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'kafka', 'topic' = 't', 'bootstrap.servers' = '127.0.0.1:1', {format});\n"
        )
    };
    let regroup = "INSERT INTO out SELECT region, count(*) AS n, sum(balance) AS total FROM acc GROUP BY region;";
    for format in [
        "'format' = 'debezium-json'",
        "'format' = 'debezium-json', 'debezium-json.schema-include' = 'true'",
    ] {
        plan(&format!(
            "{}CREATE TABLE out (region VARCHAR, n BIGINT, total BIGINT, PRIMARY KEY (region)) WITH ('connector' = 'postgres', 'url' = 'postgres://u@127.0.0.1:1/db');\n{regroup}",
            source(format)
        ))
        .unwrap_or_else(|e| panic!("{format}: {e}"));
        // A changelog cannot be appended to plain JSON files.
        let e = error(&format!(
            "{}CREATE TABLE out WITH ('connector' = 'filesystem', 'path' = 'x', 'format' = 'json');\nINSERT INTO out SELECT id, balance FROM acc;",
            source(format)
        ));
        assert_mentions(&e, &["withdraws rows", "debezium-json"]);
        // Nor can its DISTINCT rows, which come and go with the rows holding them.
        let e = error(&format!(
            "{}CREATE TABLE out WITH ('connector' = 'filesystem', 'path' = 'x', 'format' = 'json');\nINSERT INTO out SELECT DISTINCT region FROM acc;",
            source(format)
        ));
        assert_mentions(&e, &["withdraws rows", "debezium-json"]);
    }
    let e = error(&format!(
        "{}CREATE TABLE out WITH ('connector' = 'stdout');\nINSERT INTO out SELECT id FROM acc;",
        source("'format' = 'json', 'debezium-json.schema-include' = 'true'")
    ));
    assert_mentions(&e, &["applies to 'format' = 'debezium-json'"]);
}

#[test]
fn upsert_kafka_tables_need_their_key_and_become_changelogs_by_it() {
    let table = |key: &str, options: &str| {
        format!(
            "CREATE TABLE acc (id BIGINT, region VARCHAR, balance BIGINT, ts TIMESTAMP{key}, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'upsert-kafka', 'bootstrap.servers' = '127.0.0.1:1', 'topic' = 't'{options});\n"
        )
    };
    let sink = "CREATE TABLE out (region VARCHAR, n BIGINT, PRIMARY KEY (region)) WITH ('connector' = 'postgres', 'url' = 'postgres://u@127.0.0.1:1/db');\n";
    let query = "INSERT INTO out SELECT region, count(*) AS n FROM acc GROUP BY region;";
    let planned = plan(&format!(
        "{}{sink}{query}",
        table(", PRIMARY KEY (id) NOT ENFORCED", ", 'key.format' = 'json'")
    ))
    .unwrap();
    let explained = PhysicalPlan::compile(&planned.graph).explain(&planned.graph);
    assert!(
        explained.contains("upserts to a changelog by (id)"),
        "{explained}"
    );
    assert!(
        explained.contains("keyed by (id), changelog"),
        "{explained}"
    );
    // The normalized rows are a changelog keyed by id: a table keyed by id takes them.
    plan(&format!(
        "{}CREATE TABLE copy (id BIGINT, balance BIGINT, PRIMARY KEY (id)) WITH ('connector' = 'postgres', 'url' = 'postgres://u@127.0.0.1:1/db');\nINSERT INTO copy SELECT id, balance FROM acc;",
        table(", PRIMARY KEY (id) NOT ENFORCED", "")
    ))
    .unwrap();
    for (key, options, expected) in [
        ("", "", "needs PRIMARY KEY"),
        (
            ", PRIMARY KEY (id) NOT ENFORCED",
            ", 'value.format' = 'csv'",
            "value.format",
        ),
        (
            ", PRIMARY KEY (id) NOT ENFORCED",
            ", 'format' = 'json'",
            "'format'",
        ),
        (
            ", PRIMARY KEY (id) NOT ENFORCED",
            ", 'sink.delivery' = 'at-least-once'",
            "does not apply",
        ),
    ] {
        let e = error(&format!("{}{sink}{query}", table(key, options)));
        assert_mentions(&e, &["acc", expected]);
    }
}

#[test]
fn avro_options_are_checked_at_planning() {
    let source = |options: &str| {
        format!(
            "CREATE TABLE t (id BIGINT, ts BIGINT, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'kafka', 'bootstrap.servers' = '127.0.0.1:1', 'topic' = 't'{options});\nCREATE TABLE out WITH ('connector' = 'stdout');\nINSERT INTO out SELECT id FROM t;"
        )
    };
    for options in [
        ", 'format' = 'avro'",
        ", 'format' = 'avro', 'avro.schema' = '{\"type\": \"record\", \"name\": \"r\", \"fields\": [{\"name\": \"id\", \"type\": \"long\"}, {\"name\": \"ts\", \"type\": \"long\"}]}'",
        ", 'format' = 'avro-confluent', 'avro-confluent.url' = 'http://127.0.0.1:1'",
    ] {
        plan(&source(options)).unwrap_or_else(|e| panic!("{options}: {e}"));
    }
    for (options, expected) in [
        (", 'format' = 'avro-confluent'", "avro-confluent.url"),
        (", 'format' = 'json', 'avro.schema' = '{}'", "does not apply"),
        (", 'format' = 'avro', 'avro-confluent.url' = 'http://x'", "does not apply"),
        (", 'format' = 'avro', 'avro.schema' = 'not json'", "Avro"),
        // A writer schema without the table's column `ts` and no default for it.
        (", 'format' = 'avro', 'avro.schema' = '{\"type\": \"record\", \"name\": \"r\", \"fields\": [{\"name\": \"id\", \"type\": \"string\"}]}'", "resolve"),
    ] {
        let e = error(&source(options));
        assert_mentions(&e, &["`t`", expected]);
    }
}
