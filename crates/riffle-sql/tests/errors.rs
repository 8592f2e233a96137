//! What a user sees when a pipeline file is wrong: the place, the construct, the fix.

use crate::common;

use common::{assert_mentions, error, plan, BID};

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
    let sink = |clause: &str, with: &str| {
        error(&format!(
            "{BID}CREATE TABLE out (auction BIGINT, price BIGINT) {clause} WITH ({with});\nINSERT INTO out SELECT auction, price FROM bid;"
        ))
    };
    let files = "'connector' = 'filesystem', 'path' = 'x', 'format' = 'json'";
    let e = sink("PARTITIONED BY (auction)", "'connector' = 'stdout'");
    assert_mentions(
        &e,
        &[
            "PARTITIONED BY on `out`",
            "'stdout'",
            "only the filesystem and iceberg connectors",
        ],
    );
    // A file sink partitions by values, not by Iceberg's transforms.
    let e = sink("PARTITIONED BY (bucket(4, auction))", files);
    assert_mentions(&e, &["bucket(4, auction)", "DATE_FORMAT"]);
    // A file source does not read partition values out of its paths.
    let e = error(&format!(
        "CREATE TABLE src (auction BIGINT, dt STRING, date_time TIMESTAMP(3), WATERMARK FOR date_time AS date_time) PARTITIONED BY (dt) WITH ({files});\nCREATE TABLE out WITH ('connector' = 'stdout');\nINSERT INTO out SELECT * FROM src;"
    ));
    assert_mentions(&e, &["PARTITIONED BY", "source"]);
    // Hive's typed form is not a partition term.
    let e = sink("PARTITIONED BY (auction BIGINT)", files);
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

/// Two tables of one pipeline naming one output would write the same file names or
/// append to one table under two ledgers: refused at planning, naming both tables,
/// whatever the spelling.
#[test]
fn two_sinks_naming_one_output_are_refused() {
    let cwd = std::env::current_dir().unwrap();
    let abs = format!("file://{}/out", cwd.display());
    let files = |path: &str| {
        format!("WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'json')")
    };
    let pg = |url: &str, table: &str| {
        format!("(auction BIGINT, price BIGINT) WITH ('connector' = 'postgres', 'url' = '{url}', 'table' = '{table}')")
    };
    let kafka = |servers: &str, topic: &str| {
        format!("WITH ('connector' = 'kafka', 'topic' = '{topic}', 'bootstrap.servers' = '{servers}', 'format' = 'json')")
    };
    let mut shared = vec![
        (files("out"), files("./out/")),
        (files("out"), files(&abs)),
        (files("out"), files("out/inner")),
        (
            pg("postgres://u@127.0.0.1/db", "t"),
            pg("postgres://v@127.0.0.1:5432/db", "public.t"),
        ),
        (kafka("k1:9092,k2:9092", "topic"), kafka("K2:9092", "topic")),
    ];
    #[cfg(feature = "iceberg")]
    {
        let iceberg = |uri: &str| {
            format!("(auction BIGINT, price BIGINT) WITH ('connector' = 'iceberg', 'catalog.uri' = '{uri}', 'warehouse' = 'file:///tmp/w', 'table' = 'ns.t')")
        };
        shared.push((
            iceberg("sqlite://./catalog.db"),
            iceberg(&format!("sqlite://{}/catalog.db", cwd.display())),
        ));
        shared.push((
            iceberg("postgresql://a:secret@host:5432/cat"),
            iceberg("postgresql://host:5432/cat/"),
        ));
    }
    for (a, b) in &shared {
        let text = format!(
            "{BID}CREATE TABLE first {a};\nCREATE TABLE second {b};\nINSERT INTO first SELECT auction, price FROM bid;\nINSERT INTO second SELECT auction, price FROM bid WHERE price > 10;\n"
        );
        let e = error(&text);
        assert_mentions(
            &e,
            &[
                "line 2",
                "tables `first`",
                "and `second`",
                "name the same output",
                "hint:",
            ],
        );
        assert!(
            !e.contains("secret"),
            "a password in a URL is never shown:\n{e}"
        );
    }
    // Different places plan.
    let apart = [
        (files("out_a"), files("out_b")),
        (
            pg("postgres://u@127.0.0.1/db", "t"),
            pg("postgres://u@127.0.0.1/db", "u"),
        ),
        (kafka("k1:9092", "a"), kafka("k1:9092", "b")),
    ];
    for (a, b) in &apart {
        let text = format!(
            "{BID}CREATE TABLE first {a};\nCREATE TABLE second {b};\nINSERT INTO first SELECT auction, price FROM bid;\nINSERT INTO second SELECT auction, price FROM bid;\n"
        );
        plan(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    }
}
