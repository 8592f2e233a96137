//! SQL over files: a JSON-lines and a CSV source with declared event time, windowed into
//! Parquet and JSON sinks.

use riffle_runtime::job::{self, JobConfig};
use riffle_sql::{plan_pipeline, ConnectorRegistry, PlanOptions};
use std::path::Path;

fn run(text: &str) -> riffle_runtime::JobSummary {
    run_at(text, 2)
}

fn plan_at(text: &str, parallelism: usize) -> riffle_sql::SqlPipeline {
    let options = PlanOptions {
        name: "files".into(),
        parallelism,
        max_parallelism: riffle_core::DEFAULT_MAX_PARALLELISM,
        settings: Default::default(),
    };
    plan_pipeline(text, &options, &ConnectorRegistry::default())
        .unwrap_or_else(|e| panic!("does not plan: {e}"))
}

fn run_at(text: &str, parallelism: usize) -> riffle_runtime::JobSummary {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(job::run(
            &plan_at(text, parallelism).graph,
            &JobConfig::default(),
        ))
        .unwrap()
}

/// The error of a pipeline that must fail, run at parallelism 1.
fn failure(text: &str, why: &str) -> String {
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(job::run(&plan_at(text, 1).graph, &JobConfig::default()))
        .expect_err(why)
        .to_string()
}

fn lines(dir: &Path) -> Vec<serde_json::Value> {
    let mut rows: Vec<serde_json::Value> = riffle_connectors::sinks::read_jsonl_lines(dir)
        .unwrap()
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    rows.sort_by_key(|v| v.to_string());
    rows
}

#[test]
fn json_and_csv_files_are_windowed_into_files() {
    let dir = tempfile::tempdir().unwrap();
    let (json_in, csv_in) = (dir.path().join("clicks"), dir.path().join("views"));
    std::fs::create_dir_all(&json_in).unwrap();
    std::fs::create_dir_all(&csv_in).unwrap();
    // Two users, ts in epoch milliseconds: windows [0, 10s) and [10s, 20s).
    let mut json = String::new();
    let mut csv = String::from("name,ts,ms\n");
    for i in 0..40i64 {
        let who = if i % 4 == 0 { "ann" } else { "bob" };
        json.push_str(&format!(
            "{{\"name\": \"{who}\", \"ts\": {}, \"amount\": {i}}}\n",
            i * 500
        ));
        csv.push_str(&format!("{who},{},{}\n", i * 500, i * 10));
    }
    std::fs::write(json_in.join("part-1.jsonl"), json).unwrap();
    std::fs::write(csv_in.join("part-1.csv"), csv).unwrap();
    let (sums, views) = (dir.path().join("sums"), dir.path().join("views_out"));
    let text = format!(
        "CREATE TABLE clicks (name VARCHAR, ts BIGINT, amount BIGINT,
           WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
         WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
         CREATE TABLE views (name VARCHAR, ts BIGINT, ms BIGINT, WATERMARK FOR ts AS ts)
         WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'csv');
         CREATE TABLE sums WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
         CREATE TABLE slow_views WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
         INSERT INTO sums
         SELECT name, total, n, w['start'] AS window_start FROM (
           SELECT name, sum(amount) AS total, count(*) AS n, tumble(INTERVAL '10' SECOND) AS w
           FROM clicks GROUP BY name, w) t;
         INSERT INTO slow_views SELECT upper(name) AS name, ms FROM views WHERE ms >= 350;",
        json_in.display(),
        csv_in.display(),
        sums.display(),
        views.display()
    );
    let summary = run(&text);
    assert_eq!(summary.source_rows, 80);
    let rows = lines(&sums);
    // Window [0, 10s) holds i = 0..20: ann has 0,4,..,16 (5 rows, sum 40); bob the rest.
    let ann_first = rows
        .iter()
        .find(|r| {
            r["name"] == "ann"
                && r["window_start"]
                    .as_str()
                    .is_some_and(|s| s.starts_with("1970-01-01T00:00:00"))
        })
        .unwrap_or_else(|| panic!("no first window for ann: {rows:?}"));
    assert_eq!(ann_first["total"], 40);
    assert_eq!(ann_first["n"], 5);
    assert_eq!(rows.len(), 4, "{rows:?}");
    let total: i64 = rows.iter().map(|r| r["total"].as_i64().unwrap()).sum();
    assert_eq!(total, (0..40).sum::<i64>());
    let views = lines(&views);
    assert_eq!(views.len(), 5, "{views:?}");
    assert!(views.iter().all(|v| v["ms"].as_i64().unwrap() >= 350
        && v["name"] == v["name"].as_str().unwrap().to_uppercase()));
}

/// Operators keyed by the empty key (a window aggregate grouped by the window alone, a
/// global max, DISTINCT of a constant) gave no rows at all at parallelism 2 and more:
/// the keyed exchange hashed no rows when there were no key columns.
#[test]
fn operators_keyed_by_nothing_give_the_same_rows_at_every_parallelism() {
    let dir = tempfile::tempdir().unwrap();
    let mut answers = Vec::new();
    for parallelism in 1..=4 {
        let (counts, tops, constants) = (
            dir.path().join(format!("counts-{parallelism}")),
            dir.path().join(format!("tops-{parallelism}")),
            dir.path().join(format!("constants-{parallelism}")),
        );
        let text = format!(
            "CREATE TABLE bid (WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND)
               WITH ('connector' = 'nexmark', 'event_type' = 'bid', 'events' = '200K', 'rate' = '10K');
             CREATE TABLE counts WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
             CREATE TABLE tops WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
             CREATE TABLE constants WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
             INSERT INTO counts SELECT n, w['start'] AS window_start FROM (
               SELECT count(*) AS n, tumble(INTERVAL '10' SECOND) AS w FROM bid GROUP BY w);
             INSERT INTO tops SELECT highest, w['start'] AS window_start FROM (
               SELECT max(price) AS highest, tumble(INTERVAL '5' SECOND) AS w FROM bid GROUP BY w);
             INSERT INTO constants SELECT DISTINCT 'bid' AS kind FROM bid;",
            counts.display(),
            tops.display(),
            constants.display()
        );
        let summary = run_at(&text, parallelism);
        let rows = (lines(&counts), lines(&tops), lines(&constants));
        let bids: i64 = rows.0.iter().map(|r| r["n"].as_i64().unwrap()).sum();
        assert_eq!(
            bids as u64, summary.source_rows,
            "p{parallelism}: every bid is counted in some window"
        );
        assert!(
            rows.0.len() >= 2 && rows.1.len() >= 4,
            "p{parallelism}: {rows:?}"
        );
        assert_eq!(rows.2.len(), 1, "p{parallelism}: one distinct constant");
        answers.push(rows);
    }
    for (p, rows) in answers.iter().enumerate().skip(1) {
        assert_eq!(rows, &answers[0], "p{} differs from p1", p + 1);
    }
}

/// A pipeline reading `events (id BIGINT, ts TIMESTAMP)` from JSON lines and writing
/// `INSERT INTO out {select}` to a JSON file sink; the input directory starts with
/// `a.jsonl` holding `jsonl`.
struct EventsPipeline {
    dir: tempfile::TempDir,
    text: String,
}

impl EventsPipeline {
    fn new(jsonl: &str, select: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("events");
        std::fs::create_dir_all(&input).unwrap();
        std::fs::write(input.join("a.jsonl"), jsonl).unwrap();
        let text = format!(
            "CREATE TABLE events (id BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts)
             WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
             CREATE TABLE out WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
             INSERT INTO out {select};",
            input.display(),
            dir.path().join("out").display()
        );
        Self { dir, text }
    }

    /// Runs it at parallelism 1; the rows written.
    fn rows(&self) -> Vec<serde_json::Value> {
        run_at(&self.text, 1);
        lines(&self.dir.path().join("out"))
    }
}

/// Flink's DATE_FORMAT takes Java patterns; DataFusion's echoed such a pattern back as
/// text on every row.
#[test]
fn date_format_understands_flink_patterns() {
    let rows = EventsPipeline::new(
        "{\"id\": 1, \"ts\": \"2025-03-04T05:06:07.089Z\"}\n{\"id\": 2, \"ts\": \"2025-12-31T23:59:59Z\"}\n",
        "SELECT id, DATE_FORMAT(ts, 'yyyy-MM-dd') AS day,
           DATE_FORMAT(ts, 'HH:mm:ss.SSS') AS at, DATE_FORMAT(ts, 'yyyy-MM-dd''T''HH') AS hour
         FROM events",
    )
    .rows();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0]["day"], "2025-03-04");
    assert_eq!(rows[0]["at"], "05:06:07.089");
    assert_eq!(rows[0]["hour"], "2025-03-04T05");
    assert_eq!(rows[1]["day"], "2025-12-31");
    assert_eq!(rows[1]["at"], "23:59:59.000");
}

/// Flink's TIMESTAMPADD and TIMESTAMPDIFF run in SQL with the unit as Flink writes it
/// (a bare word); the values are Flink 2.3's for the same arguments. An unknown unit is
/// refused, named.
#[test]
fn timestampadd_and_timestampdiff_take_flinks_units() {
    let rows = EventsPipeline::new(
        "{\"id\": 1, \"ts\": \"2025-01-31T10:00:00Z\"}\n",
        "SELECT id,
           DATE_FORMAT(TIMESTAMPADD(MONTH, 1, ts), 'yyyy-MM-dd HH:mm:ss') AS next_month,
           DATE_FORMAT(TIMESTAMPADD(day, -13, ts), 'yyyy-MM-dd HH:mm:ss') AS back,
           TIMESTAMPDIFF(MONTH, ts, TIMESTAMP '2025-02-28 09:59:59') AS months,
           TIMESTAMPDIFF(SECOND, ts, TIMESTAMP '2025-02-28 09:59:59') AS seconds,
           TIMESTAMPDIFF(YEAR, TIMESTAMP '2020-06-15 08:00:00', ts) AS years
         FROM events",
    )
    .rows();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["next_month"], "2025-02-28 10:00:00");
    assert_eq!(rows[0]["back"], "2025-01-18 10:00:00");
    assert_eq!(rows[0]["months"], 0);
    assert_eq!(rows[0]["seconds"], 2419199);
    assert_eq!(rows[0]["years"], 4);
    let bad = EventsPipeline::new(
        "{\"id\": 1, \"ts\": \"2025-01-31T10:00:00Z\"}\n",
        "SELECT TIMESTAMPDIFF(FORTNIGHT, ts, ts) AS f FROM events",
    );
    let options = PlanOptions {
        name: "units".into(),
        parallelism: 1,
        max_parallelism: riffle_core::DEFAULT_MAX_PARALLELISM,
        settings: Default::default(),
    };
    let Err(err) = plan_pipeline(&bad.text, &options, &ConnectorRegistry::default()) else {
        panic!("FORTNIGHT is no unit")
    };
    let err = err.to_string();
    assert!(
        err.contains("FORTNIGHT") && err.contains("QUARTER"),
        "{err}"
    );
}

/// CEIL and FLOOR keep an integer an integer and round a DECIMAL to scale 0, as Flink
/// does (DataFusion's gave a DOUBLE: `5.0` in the output).
#[test]
fn ceil_and_floor_keep_flinks_types() {
    let rows = EventsPipeline::new(
        "{\"id\": 5, \"ts\": \"2025-01-31T10:00:00Z\"}\n",
        "SELECT CEIL(id) AS c, FLOOR(id - 10) AS f,
           CAST(CEIL(CAST(-2.25 AS DECIMAL(10, 2)) + id) AS VARCHAR) AS d,
           FLOOR(CAST(id AS DOUBLE) / 2) AS half
         FROM events",
    )
    .rows();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert!(rows[0]["c"].is_i64() && rows[0]["f"].is_i64(), "{rows:?}");
    assert_eq!(rows[0]["c"], 5);
    assert_eq!(rows[0]["f"], -5);
    assert_eq!(rows[0]["d"], "3");
    assert_eq!(rows[0]["half"], 2.0);
}

/// A JSON number in a TIMESTAMP column is epoch milliseconds (it was read as
/// nanoseconds: 1700000003217 became 1970-01-01T00:28:20); text keeps its sub-millisecond
/// digits; neither is refused with the field named, and so is a string of digits (text is
/// a date-time: `"2023"` was read as 2.023 s after the epoch).
#[test]
fn numbers_in_a_timestamp_column_are_epoch_milliseconds() {
    let pipeline = EventsPipeline::new(
        "{\"id\": 1, \"ts\": 1700000003217}\n{\"id\": 2, \"ts\": \"2023-11-14T22:13:23.217456Z\"}\n{\"id\": 3, \"ts\": 1700000003218}\n",
        "SELECT id, DATE_FORMAT(ts, 'yyyy-MM-dd HH:mm:ss.SSSSSS') AS at FROM events",
    );
    let rows = pipeline.rows();
    let at: Vec<&str> = rows.iter().map(|r| r["at"].as_str().unwrap()).collect();
    assert_eq!(
        at,
        [
            "2023-11-14 22:13:23.217000",
            "2023-11-14 22:13:23.217456",
            "2023-11-14 22:13:23.218000"
        ],
        "{rows:?}"
    );
    // A value that is neither is a malformed record naming the file and the field.
    std::fs::write(
        pipeline.dir.path().join("events/b.jsonl"),
        "{\"id\": 4, \"ts\": \"soon\"}\n",
    )
    .unwrap();
    let err = failure(&pipeline.text, "`soon` is no time");
    assert!(
        err.contains("b.jsonl") && err.contains("ts") && err.contains("`soon`"),
        "{err}"
    );
    std::fs::write(
        pipeline.dir.path().join("events/b.jsonl"),
        "{\"id\": 4, \"ts\": \"2023\"}\n",
    )
    .unwrap();
    let err = failure(&pipeline.text, "`\"2023\"` is no time");
    assert!(
        err.contains("b.jsonl") && err.contains("`ts`") && err.contains("is not a date-time"),
        "{err}"
    );
}

/// Identifiers keep their case, as in Flink SQL: an unquoted `itemName` column was
/// lower-cased to `itemname`, never matched the JSON key `itemName`, and every value
/// read as NULL (`count(itemName)` was 0). Keywords and function names stay
/// case-insensitive.
#[test]
fn mixed_case_column_names_read_their_json_keys() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("items");
    std::fs::create_dir_all(&input).unwrap();
    std::fs::write(
        input.join("a.jsonl"),
        "{\"itemName\": \"lamp\", \"reservePrice\": 3, \"dateTime\": \"2025-01-01T00:00:01Z\"}\n\
         {\"itemName\": \"desk\", \"reservePrice\": 5, \"dateTime\": \"2025-01-01T00:00:02Z\"}\n",
    )
    .unwrap();
    let text = format!(
        "CREATE TABLE items (itemName VARCHAR, reservePrice BIGINT, dateTime TIMESTAMP,
           WATERMARK FOR dateTime AS dateTime)
         WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
         CREATE TABLE out WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
         INSERT INTO out SELECT itemName, reservePrice * 2 AS doubledPrice, UPPER(itemName) AS shout
           FROM items WHERE reservePrice > 0;",
        input.display(),
        dir.path().join("out").display()
    );
    run_at(&text, 1);
    let rows = lines(&dir.path().join("out"));
    assert_eq!(rows.len(), 2, "{rows:?}");
    let mut got: Vec<(String, i64, String)> = rows
        .iter()
        .map(|r| {
            (
                r["itemName"].as_str().unwrap_or("NULL").to_string(),
                r["doubledPrice"].as_i64().unwrap_or(-1),
                r["shout"].as_str().unwrap_or("NULL").to_string(),
            )
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            ("desk".to_string(), 10, "DESK".to_string()),
            ("lamp".to_string(), 6, "LAMP".to_string())
        ]
    );
}

/// A source reads only the columns some statement of the pipeline uses (here `a` by
/// one INSERT, `b` by the other; never `c`): the others are skipped unread in JSON,
/// CSV and Parquet alike, so a bad value there fails nothing, while one in a column a
/// statement reads still fails the job, naming it.
#[test]
fn a_source_reads_only_the_columns_its_pipeline_uses() {
    let dir = tempfile::tempdir().unwrap();
    let folder = |name: &str| {
        let path = dir.path().join(name);
        std::fs::create_dir_all(&path).unwrap();
        path
    };
    let (json, csv) = (folder("json"), folder("csv"));
    let (mut json_text, mut csv_text) = (String::new(), String::from("a,b,c,ts\n"));
    for i in 0..30i64 {
        // `c` is a number in most rows, text in some.
        let c = if i % 7 == 0 {
            "\"seven\"".to_string()
        } else {
            i.to_string()
        };
        json_text.push_str(&format!(
            "{{\"a\": {i}, \"b\": \"b{i}\", \"c\": {c}, \"ts\": {}}}\n",
            i * 100
        ));
        csv_text.push_str(&format!("{i},b{i},{},{}\n", c.trim_matches('"'), i * 100));
    }
    std::fs::write(json.join("a.jsonl"), json_text).unwrap();
    std::fs::write(csv.join("a.csv"), csv_text).unwrap();
    let table = |name: &str, path: &Path, format: &str, columns: &str| {
        format!(
            "CREATE TABLE {name} ({columns}, WATERMARK FOR ts AS ts)
             WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = '{format}');",
            path.display()
        )
    };
    let pipeline = |source: &str, out: &str| {
        format!(
            "{source}
             CREATE TABLE {out}_a WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
             CREATE TABLE {out}_b WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
             INSERT INTO {out}_a SELECT a * 2 AS a2 FROM t WHERE a < 10;
             INSERT INTO {out}_b SELECT b FROM t WHERE b LIKE 'b2%';",
            dir.path().join(format!("{out}_a")).display(),
            dir.path().join(format!("{out}_b")).display()
        )
    };
    let columns = "a BIGINT, b VARCHAR, c BIGINT, ts BIGINT";
    // The JSON read whole (all columns), into Parquet, to be read back in part (`a`
    // stored as INT, read as the BIGINT the table declares).
    let parquet = dir.path().join("parquet");
    let copy = format!(
        "{}
         CREATE TABLE p WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'parquet');
         INSERT INTO p SELECT CAST(a AS INT) AS a, b, CAST(a AS BIGINT) AS c, ts FROM t;",
        table(
            "t",
            &json,
            "json",
            "a BIGINT, b VARCHAR, c VARCHAR, ts BIGINT"
        ),
        parquet.display()
    );
    run_at(&copy, 1);
    for (format, path) in [("json", &json), ("csv", &csv), ("parquet", &parquet)] {
        let text = pipeline(&table("t", path, format, columns), format);
        let summary = run(&text);
        assert_eq!(summary.source_rows, 30, "{format}");
        let a2: Vec<i64> = lines(&dir.path().join(format!("{format}_a")))
            .iter()
            .map(|r| r["a2"].as_i64().unwrap())
            .collect();
        let mut a2 = a2;
        a2.sort();
        assert_eq!(a2, (0..10).map(|i| i * 2).collect::<Vec<_>>(), "{format}");
        let b = lines(&dir.path().join(format!("{format}_b")));
        assert_eq!(b.len(), 11, "{format}: b2 and b20..b29: {b:?}");
    }
    // Reading `c` too, the text in it is an error naming the field.
    let text = format!(
        "{}
         CREATE TABLE out WITH ('connector' = 'blackhole');
         INSERT INTO out SELECT a, c FROM t;",
        table("t", &json, "json", columns)
    );
    let err = failure(&text, "`seven` is no BIGINT");
    assert!(err.contains("line 1") && err.contains("`c`"), "{err}");
}

/// A Kafka source with JSON values reads only the used columns too (planning needs no
/// broker); a source table scanned whole reads every column.
#[test]
fn a_kafka_source_reads_only_the_used_columns_and_says_so() {
    let plan = |select: &str| {
        let text = format!(
            "CREATE TABLE bids (auction BIGINT, bidder BIGINT, price BIGINT, extra VARCHAR,
               date_time TIMESTAMP, WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND)
             WITH ('connector' = 'kafka', 'bootstrap.servers' = '127.0.0.1:1', 'topic' = 'bids',
                   'format' = 'json');
             CREATE TABLE out WITH ('connector' = 'blackhole');
             INSERT INTO out {select};"
        );
        plan_at(&text, 1).graph.nodes()[0].describe()
    };
    let some = plan("SELECT auction, price * 2 AS p FROM bids WHERE bidder > 0");
    assert!(some.contains("reading 4 of 5 columns"), "{some}");
    let all = plan("SELECT * FROM bids");
    assert!(!all.contains("reading"), "{all}");
}

/// A filter on a timestamp column lets a Parquet source pass over the row groups whose
/// statistics lie wholly outside it: fewer rows are read, the result is the same, and
/// `explain` says so. A second scan of the table without the filter reads everything.
#[test]
fn a_time_filter_passes_over_parquet_row_groups_outside_it() {
    use riffle_core::arrow::array::{Int64Array, TimestampMillisecondArray};
    use riffle_core::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
    use riffle_core::parquet::arrow::ArrowWriter;
    use riffle_core::parquet::file::properties::WriterProperties;
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir_all(&input).unwrap();
    // 100 rows a second apart from 2025-01-01T00:00:00, ten row groups of ten.
    let start_ms = 1_735_689_600_000i64;
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Millisecond, None),
            false,
        ),
    ]));
    let batch = riffle_core::RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from_iter_values(0..100)),
            Arc::new(TimestampMillisecondArray::from_iter_values(
                (0..100).map(|i| start_ms + i * 1000),
            )),
        ],
    )
    .unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(10))
        .build();
    let file = std::fs::File::create(input.join("t.parquet")).unwrap();
    let mut writer = ArrowWriter::try_new(file, schema, Some(props)).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();

    let pipeline = |out: &str, unfiltered_too: bool| {
        let also = if unfiltered_too {
            format!(
                "CREATE TABLE {out}_all WITH ('connector' = 'blackhole');
                 INSERT INTO {out}_all SELECT id FROM t;"
            )
        } else {
            String::new()
        };
        format!(
            "CREATE TABLE t (id BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)
               WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'parquet');
             CREATE TABLE {out} WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
             INSERT INTO {out} SELECT id FROM t
               WHERE ts >= TIMESTAMP '2025-01-01 00:00:25' AND ts < TIMESTAMP '2025-01-01 00:00:55';
             {also}",
            input.display(),
            dir.path().join(out).display()
        )
    };
    let described = plan_at(&pipeline("described", false), 1).graph.nodes()[0].describe();
    assert!(
        described.contains(
            "passing over row groups and pages with `ts` outside [2025-01-01 00:00:25, 2025-01-01 00:00:55]"
        ),
        "{described}"
    );
    for p in [1, 2] {
        let out = format!("pruned_p{p}");
        let summary = run_at(&pipeline(&out, false), p);
        // Row groups 2–5 hold 00:00:20–00:00:59; the others are passed over.
        assert_eq!(summary.source_rows, 40, "p{p}");
        let mut ids: Vec<i64> = lines(&dir.path().join(&out))
            .iter()
            .map(|r| r["id"].as_i64().unwrap())
            .collect();
        ids.sort();
        assert_eq!(ids, (25..55).collect::<Vec<_>>(), "p{p}");
    }
    let both = pipeline("with_all", true);
    assert!(!plan_at(&both, 1).graph.nodes()[0]
        .describe()
        .contains("passing over"));
    assert_eq!(run_at(&both, 2).source_rows, 100);
}
