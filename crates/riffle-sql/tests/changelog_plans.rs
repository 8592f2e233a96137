//! How planning reads changelogs: which sinks take an updating result, what `explain`
//! says of each edge, and the change-stream sources (Debezium JSON, upsert-kafka).

use crate::common;

use common::{assert_mentions, error, plan, BID};
use riffle_runtime::PhysicalPlan;

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
fn a_debezium_sink_reads_an_updating_result_as_a_changelog() {
    // Debezium events withdraw a key's old row (`d` of the before) before its new one,
    // so the aggregate, global aggregate and Top-N feeding one emit their `-U`.
    let debezium = "WITH ('connector' = 'filesystem', 'path' = 'x', 'format' = 'debezium-json')";
    for (query, last) in [
        ("SELECT auction, count(*) AS n FROM bid GROUP BY auction", "aggregate_1"),
        ("SELECT count(*) AS n FROM bid", "aggregate_1"),
        ("SELECT * FROM (SELECT auction, price, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rn FROM bid) WHERE rn <= 3", "top_n_1"),
    ] {
        let planned = plan(&format!("{BID}CREATE TABLE out {debezium};\nINSERT INTO out {query};"))
            .unwrap_or_else(|e| panic!("{query}: {e}"));
        let explained = PhysicalPlan::compile(&planned.graph).explain(&planned.graph);
        let edge = explained
            .lines()
            .find(|l| l.contains(&format!("<- [{last}]")))
            .unwrap_or_else(|| panic!("no edge from {last}:\n{explained}"));
        assert!(edge.ends_with(", changelog"), "{query}:\n{explained}");
        // Into a keyed upsert table the same result stays an upsert stream.
        let upsert = plan(&format!("{BID}CREATE TABLE out WITH ('connector' = 'stdout');\nINSERT INTO out {query};")).unwrap();
        let explained = PhysicalPlan::compile(&upsert.graph).explain(&upsert.graph);
        assert!(explained.contains(", upsert"), "{query}:\n{explained}");
    }
}

#[test]
fn a_rank_range_filters_the_top_n_by_its_bigint_rank() {
    // `rn > 1 AND rn <= 3`: ranks 2 and 3 (DataFusion types the row number UInt64, the
    // Top-N's rank is BIGINT, so the filter's constant is cast to it).
    for range in [
        "rn > 1 AND rn <= 3",
        "rn BETWEEN 2 AND 3",
        "rn = 2",
        "rn <= 3 AND rn <> 1",
    ] {
        let planned = plan(&format!(
            "{BID}CREATE TABLE out WITH ('connector' = 'stdout');\nINSERT INTO out SELECT * FROM (SELECT auction, price, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rn FROM bid) WHERE {range};"
        ))
        .unwrap_or_else(|e| panic!("{range}: {e}"));
        let explained = PhysicalPlan::compile(&planned.graph).explain(&planned.graph);
        assert!(explained.contains("filter("), "{range}:\n{explained}");
        assert!(!explained.contains("UInt64"), "{range}:\n{explained}");
    }
    let e = error(&format!(
        "{BID}CREATE TABLE out WITH ('connector' = 'stdout');\nINSERT INTO out SELECT * FROM (SELECT auction, price, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rn FROM bid) WHERE rn > 1;"
    ));
    assert_mentions(&e, &["without an upper bound", "rn <= N", "hint:"]);
}

#[test]
fn a_shared_view_goes_to_an_upsert_sink_and_a_debezium_sink_in_either_order() {
    let view = "CREATE VIEW agg AS SELECT auction, count(*) AS n FROM bid GROUP BY auction;\n";
    let stdout = "CREATE TABLE o1 WITH ('connector' = 'stdout');\n";
    let debezium =
        "CREATE TABLE o2 WITH ('connector' = 'filesystem', 'path' = 'x', 'format' = 'debezium-json');\n";
    for inserts in [
        "INSERT INTO o1 SELECT * FROM agg;\nINSERT INTO o2 SELECT * FROM agg;",
        "INSERT INTO o2 SELECT * FROM agg;\nINSERT INTO o1 SELECT * FROM agg;",
    ] {
        let planned = plan(&format!("{BID}{view}{stdout}{debezium}{inserts}"))
            .unwrap_or_else(|e| panic!("{inserts}: {e}"));
        let explained = PhysicalPlan::compile(&planned.graph).explain(&planned.graph);
        // The Debezium files read a changelog, whichever INSERT came first.
        assert!(explained.contains(", changelog"), "{inserts}:\n{explained}");
    }
}

#[test]
fn a_join_of_an_updating_result_reads_both_sides_as_changelogs() {
    let counts = "(SELECT auction, count(*) AS bids FROM bid GROUP BY auction)";
    for (join, kind) in [
        ("JOIN", "inner join of changelogs"),
        ("LEFT JOIN", "left outer join of changelogs"),
        ("RIGHT JOIN", "right outer join of changelogs"),
        ("FULL JOIN", "full outer join of changelogs"),
    ] {
        let p = plan(&format!(
            "{BID}CREATE TABLE out WITH ('connector' = 'stdout');\n\
             INSERT INTO out SELECT b.auction, b.price, c.bids FROM bid b {join} {counts} c ON b.auction = c.auction;"
        ))
        .unwrap_or_else(|e| panic!("{join}: {e}"));
        let explained = PhysicalPlan::compile(&p.graph).explain(&p.graph);
        assert!(explained.contains(kind), "{join}:\n{explained}");
        // The aggregate feeds the join its withdrawals; the join's rows are a changelog.
        assert!(
            explained.contains("changelog -U/+U"),
            "{join}:\n{explained}"
        );
        let into_out = explained
            .lines()
            .find(|l| l.contains("<- [join_"))
            .unwrap_or_else(|| panic!("no edge from the join:\n{explained}"));
        assert!(into_out.ends_with(", changelog"), "{explained}");
    }
    // Two updating results, the join's own output joined again, and a computed key.
    plan(&format!(
        "{BID}CREATE TABLE out WITH ('connector' = 'stdout');\n\
         INSERT INTO out SELECT x.auction, x.bids, y.n FROM {counts} x\n\
         FULL JOIN (SELECT bidder % 100 AS k, count(*) AS n FROM bid GROUP BY bidder % 100) y ON x.auction % 100 = y.k;"
    ))
    .unwrap();
    // A table keyed by another column than the join's receives a row's new pair and its
    // old pair's withdrawal from different subtasks: they are put in order per its key.
    let keyed = |key: &str| {
        let p = plan(&format!(
            "{BID}CREATE TABLE out (price BIGINT, auction BIGINT, bids BIGINT, PRIMARY KEY ({key})) WITH ('connector' = 'postgres', 'url' = 'postgres://u@127.0.0.1:1/db');\n\
             INSERT INTO out SELECT b.price, b.auction, c.bids FROM bid b JOIN {counts} c ON b.auction = c.auction;"
        ))
        .unwrap();
        PhysicalPlan::compile(&p.graph).explain(&p.graph)
    };
    let explained = keyed("price");
    assert!(
        explained.contains("changelog in order per table key (price)"),
        "{explained}"
    );
    assert!(explained.contains("<- [join_"), "{explained}");
    // So is a union of two changelogs (a row may move from one input to the other).
    let p = plan(&format!(
        "{BID}CREATE TABLE out (auction BIGINT, tier VARCHAR, PRIMARY KEY (auction)) WITH ('connector' = 'postgres', 'url' = 'postgres://u@127.0.0.1:1/db');\n\
         INSERT INTO out SELECT auction, 'low' FROM {counts} WHERE bids < 4\n\
         UNION ALL SELECT auction, 'high' FROM {counts} WHERE bids >= 4;"
    ))
    .unwrap();
    let explained = PhysicalPlan::compile(&p.graph).explain(&p.graph);
    assert!(
        explained.contains("changelog in order per table key (auction)"),
        "{explained}"
    );
    // A changelog keyed by the table's own key is applied as it comes.
    let p = plan(&format!(
        "{BID}CREATE TABLE out (auction BIGINT, bids BIGINT, PRIMARY KEY (auction)) WITH ('connector' = 'postgres', 'url' = 'postgres://u@127.0.0.1:1/db');\n\
         INSERT INTO out SELECT * FROM {counts} WHERE bids > 1;"
    ))
    .unwrap();
    let explained = PhysicalPlan::compile(&p.graph).explain(&p.graph);
    assert!(!explained.contains("in order per table key"), "{explained}");
    // Into a sink that cannot withdraw rows, refused as for any changelog.
    let e = error(&format!(
        "{BID}CREATE TABLE out (auction BIGINT, bids BIGINT) WITH ('connector' = 'filesystem', 'path' = 'x', 'format' = 'json');\n\
         INSERT INTO out SELECT b.auction, c.bids FROM bid b JOIN {counts} c ON b.auction = c.auction;"
    ));
    assert_mentions(&e, &["withdraws rows", "debezium-json"]);
}

#[test]
fn joins_of_updating_results_that_cannot_run_exactly_are_refused_by_name() {
    let counts = "(SELECT auction, count(*) AS bids FROM bid GROUP BY auction)";
    let stdout = "CREATE TABLE out WITH ('connector' = 'stdout');\n";
    let e = error(&format!(
        "{BID}{stdout}INSERT INTO out SELECT b.auction, c.bids FROM bid b LEFT JOIN {counts} c ON b.auction = c.auction AND b.price > c.bids;"
    ));
    assert_mentions(
        &e,
        &["LEFT JOIN of an updating result with a condition", "hint:"],
    );
    let e = error(&format!(
        "{BID}{stdout}INSERT INTO out SELECT auction FROM bid WHERE auction NOT IN (SELECT auction FROM {counts} c WHERE bids > 3);"
    ));
    assert_mentions(&e, &["NOT IN over an updating result", "hint:"]);
    // `IN` over groups of other columns could match a key twice.
    let pairs = "(SELECT auction, bidder, count(*) AS n FROM bid GROUP BY auction, bidder)";
    let e = error(&format!(
        "{BID}{stdout}INSERT INTO out SELECT auction FROM bid WHERE auction IN (SELECT auction FROM {pairs} WHERE n > 1);"
    ));
    assert_mentions(&e, &["IN over an updating result", "hint:"]);
    // An inner join's condition filters the joined changelog; `IN` over an aggregate
    // grouped by the key, and an inner join reading only left columns, are that join.
    for query in [
        format!("SELECT b.auction FROM bid b JOIN {counts} c ON b.auction = c.auction AND b.price > c.bids"),
        format!("SELECT auction, price FROM bid WHERE auction IN (SELECT auction FROM {counts} c WHERE bids > 3)"),
        // Reading only the right side, of two aggregates: DataFusion's right semi join.
        format!("SELECT b.bidder, b.n FROM {counts} a JOIN (SELECT bidder, count(*) AS n FROM bid GROUP BY bidder) b ON a.auction = b.bidder"),
    ] {
        let p = plan(&format!("{BID}{stdout}INSERT INTO out {query};"))
            .unwrap_or_else(|e| panic!("{query}: {e}"));
        let explained = PhysicalPlan::compile(&p.graph).explain(&p.graph);
        assert!(explained.contains("inner join of changelogs"), "{query}:\n{explained}");
    }
}

#[test]
fn a_value_that_changes_between_a_row_and_its_withdrawal_is_refused_over_a_changelog() {
    let counts = "(SELECT auction, count(*) AS bids FROM bid GROUP BY auction)";
    let stdout = "CREATE TABLE out WITH ('connector' = 'stdout');\n";
    for query in [
        format!("SELECT auction, random() AS r FROM {counts} WHERE bids > 1"),
        format!("SELECT auction FROM {counts} WHERE bids * random() < 3"),
        format!(
            "SELECT b.auction, c.bids, random() AS r FROM bid b JOIN {counts} c ON b.auction = c.auction"
        ),
    ] {
        let e = error(&format!("{BID}{stdout}INSERT INTO out {query};"));
        assert_mentions(&e, &["`random()` over a changelog", "hint:"]);
    }
    // Over append-only rows, or computed before the aggregate, it is a plain value.
    plan(&format!(
        "{BID}{stdout}INSERT INTO out SELECT auction, random() AS r FROM bid;"
    ))
    .unwrap();
    plan(&format!(
        "{BID}{stdout}INSERT INTO out SELECT r, count(*) FROM (SELECT CAST(random() * 10 AS BIGINT) AS r FROM bid) GROUP BY r;"
    ))
    .unwrap();
}
