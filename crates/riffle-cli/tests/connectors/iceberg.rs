//! Nexmark in, Iceberg out: every table is read back with PyIceberg (a reader riffle
//! did not write), through the SQL catalog on the same SQLite file. Here: parallelism,
//! codecs, partitions, a second pipeline refused, a catalog in PostgreSQL; crashes and
//! kills (with a second writer's snapshot in the middle) are in `iceberg_crashes.rs`,
//! REST catalogs in `iceberg_rest.rs`.

use super::common::savepoints::fails;
use super::common::stderr;
use super::kafka::KafkaBroker;
use super::moto::MotoServer;
use super::postgres::PgServer;
use super::{crash, example, kill_randomly, pipeline, run, succeed, CRASH_POINTS};
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "iceberg_crashes.rs"]
mod crashes;
#[path = "iceberg_lost_output.rs"]
mod lost_output;
#[path = "iceberg_rest.rs"]
mod rest;

/// A catalog (a SQLite file, or a PostgreSQL database) and a warehouse (a directory,
/// or a prefix in an S3 bucket).
struct Lake {
    _dir: tempfile::TempDir,
    /// `'catalog.type'`: `sql` or `rest`.
    catalog_type: &'static str,
    /// The catalog as riffle's `'catalog.uri'` names it.
    catalog_uri: String,
    /// The catalog's name (a REST server's backing SQL catalog has its own).
    catalog_name: &'static str,
    /// The same catalog as PyIceberg (SQLAlchemy) names it.
    reader_uri: String,
    /// `file:///…/warehouse` or `s3://bucket/warehouse`.
    warehouse: String,
    /// The S3 server's settings, for riffle and the reader.
    env: Vec<(&'static str, String)>,
    root: PathBuf,
}

/// What PyIceberg reads from a table.
#[derive(Debug)]
struct Read {
    /// Rows as text, sorted.
    rows: Vec<String>,
    /// Snapshot summaries, newest first.
    snapshots: Vec<serde_json::Map<String, serde_json::Value>>,
    /// Names of the data files any snapshot lists, sorted.
    listed: Vec<String>,
    /// Names of the files in the table's data directory, sorted.
    stored: Vec<String>,
    /// The partition spec, as `transform(column)` terms.
    spec: Vec<String>,
    /// The Parquet codecs of the data files (`SNAPPY`, `UNCOMPRESSED`).
    codecs: Vec<String>,
    /// Rows of a scan with a row filter, if one was asked for.
    filtered: Option<Vec<String>>,
}

impl Lake {
    /// The catalog in a SQLite file (the embedded default).
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("catalog.db");
        Self::with_catalog(
            dir,
            format!("sqlite://{}", db.display()),
            format!("sqlite:///{}", db.display()),
        )
    }

    /// The catalog in `server`'s database.
    fn in_postgres(server: &PgServer) -> Self {
        let url = server.url();
        let at = url.trim_start_matches("postgres://");
        Self::with_catalog(
            tempfile::tempdir().unwrap(),
            format!("postgresql://{at}"),
            format!("postgresql+psycopg2://{at}"),
        )
    }

    /// The catalog in a SQLite file, the warehouse in `server`'s bucket.
    fn on_s3(server: &MotoServer) -> Self {
        let mut lake = Self::new();
        lake.warehouse = format!("s3://{}/warehouse", server.bucket);
        lake.env = server.env();
        lake
    }

    fn with_catalog(dir: tempfile::TempDir, catalog_uri: String, reader_uri: String) -> Self {
        let root = dir.path().to_path_buf();
        Self {
            catalog_type: "sql",
            catalog_uri,
            catalog_name: "riffle",
            reader_uri,
            warehouse: format!("file://{}", root.join("warehouse").display()),
            env: Vec::new(),
            root,
            _dir: dir,
        }
    }

    /// `riffle run` of `file` with the lake's environment.
    fn run(&self, file: &Path, state: &Path, parallelism: usize) -> Command {
        let mut cmd = run(file, state, parallelism);
        cmd.envs(self.env.iter().cloned());
        cmd
    }

    /// Bids (`events` Nexmark events, about 100K events/s, in batches of 500 so that
    /// every checkpoint epoch carries rows) into `nexmark.{table}`.
    fn bids_pipeline(&self, name: &str, table: &str, events: &str) -> PathBuf {
        self.partitioned_bids_pipeline(name, table, events, "")
    }

    /// [`bids_pipeline`](Self::bids_pipeline) into a table with `partitioned_by`
    /// (`PARTITIONED BY (…)`, or empty).
    fn partitioned_bids_pipeline(
        &self,
        name: &str,
        table: &str,
        events: &str,
        partitioned_by: &str,
    ) -> PathBuf {
        let text = format!(
            "CREATE TABLE bid (
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH ('connector' = 'nexmark', 'event_type' = 'bid', 'events' = '{events}', 'throttle' = '100K',
    'block_events' = '500');

CREATE TABLE bids (
  auction BIGINT,
  bidder BIGINT,
  price BIGINT,
  channel VARCHAR,
  date_time TIMESTAMP
) {partitioned_by} WITH (
  'connector' = 'iceberg',
  'catalog.type' = '{catalog_type}',
  'catalog.uri' = '{catalog}',
  'warehouse' = '{warehouse}',
  'table' = 'nexmark.{table}',
  'create' = 'true'
);

INSERT INTO bids SELECT auction, bidder, price, channel, date_time FROM bid;
",
            catalog = self.catalog_uri,
            catalog_type = self.catalog_type,
            warehouse = self.warehouse,
        );
        pipeline(&self.root, name, &text)
    }

    /// The SQLite file of a catalog made by [`Lake::new`].
    fn catalog_file(&self) -> PathBuf {
        self.root.join("catalog.db")
    }

    fn state(&self, name: &str) -> PathBuf {
        self.root.join(format!("state-{name}"))
    }

    fn reader(&self, table: &str) -> Command {
        let python = std::env::var("RIFFLE_PYICEBERG_PYTHON")
            .expect("RIFFLE_PYICEBERG_PYTHON: a Python with pyiceberg (scripts/test installs it)");
        let mut cmd = Command::new(python);
        cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/connectors/read_iceberg.py"))
            .arg(self.catalog_name)
            .arg(&self.reader_uri)
            .arg(&self.warehouse)
            .arg(format!("nexmark.{table}"))
            .envs(self.env.iter().cloned());
        cmd
    }

    /// The table as PyIceberg reads it.
    fn read(&self, table: &str) -> Read {
        parse(self.reader(table).output().unwrap())
    }

    /// The table as PyIceberg reads it, and its rows under `row_filter`.
    fn read_filtered(&self, table: &str, row_filter: &str) -> Read {
        parse(
            self.reader(table)
                .args(["filter", row_filter])
                .output()
                .unwrap(),
        )
    }

    /// Appends one row as another writer (PyIceberg) would.
    fn append_foreign_row(&self, table: &str) -> Read {
        let row = r#"{"auction": -1, "bidder": -1, "price": -1, "channel": "foreign", "date_time": null}"#;
        parse(self.reader(table).args(["append", row]).output().unwrap())
    }
}

fn parse(out: std::process::Output) -> Read {
    assert!(out.status.success(), "pyiceberg: {}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names = |key: &str| -> Vec<String> {
        json[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap().to_string())
            .collect()
    };
    Read {
        listed: names("listed"),
        stored: names("stored"),
        spec: names("spec"),
        codecs: names("codecs"),
        filtered: json["filtered"].is_array().then(|| names("filtered")),
        rows: json["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap().to_string())
            .collect(),
        snapshots: json["snapshots"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_object().unwrap().clone())
            .collect(),
    }
}

/// Adds `options` (`'key' = 'value', …`) to the Iceberg table of the pipeline `file`.
fn with_options(file: &Path, options: &str) {
    let text = std::fs::read_to_string(file).unwrap();
    let text = text.replace(
        "'create' = 'true'",
        &format!("'create' = 'true', {options}"),
    );
    std::fs::write(file, text).unwrap();
}

/// riffle's snapshots each name the sink and the epochs they hold, and no epoch is in
/// two of them; returns how many of riffle's snapshots there are.
fn assert_each_epoch_once(read: &Read) -> usize {
    assert_each_epoch_once_of(read, "/bids")
}

/// [`assert_each_epoch_once`] for a sink table named `sink_suffix` (`/table`).
fn assert_each_epoch_once_of(read: &Read, sink_suffix: &str) -> usize {
    let mut seen = std::collections::BTreeSet::new();
    let mut ours = 0;
    for summary in &read.snapshots {
        let Some(sink) = summary.get("riffle.sink-id") else {
            continue;
        };
        ours += 1;
        assert_eq!(summary["operation"], "append", "{summary:?}");
        assert!(sink.as_str().unwrap().ends_with(sink_suffix), "{sink}");
        let epochs = summary["riffle.epochs"].as_str().unwrap();
        for epoch in epochs.split(',') {
            assert!(
                seen.insert(epoch.parse::<u64>().unwrap()),
                "epoch {epoch} committed twice: {:?}",
                read.snapshots
            );
        }
    }
    ours
}

/// Bids among `events` Nexmark events (46 of every 50).
fn bids_of(events: usize) -> usize {
    events / 50 * 46
}

#[test]
fn iceberg_tables_hold_every_bid_once_at_any_parallelism() {
    let lake = Lake::new();
    let p2 = lake.bids_pipeline("p2", "bids_p2", "40K");
    let text = succeed(&mut run(&p2, &lake.state("p2"), 2));
    assert!(text.contains("/nexmark/bids_p2/data/riffle-00"), "{text}");
    let read = lake.read("bids_p2");
    assert_eq!(read.rows.len(), bids_of(40_000));
    let snapshots = assert_each_epoch_once(&read);
    assert!(snapshots >= 2, "{:?}", read.snapshots);
    assert_eq!(snapshots, read.snapshots.len());

    assert_eq!(read.codecs, ["SNAPPY"]);

    // The other codecs, at parallelism 1; pyarrow calls Parquet's LZ4_RAW `LZ4`.
    for (codec, stored) in [
        ("uncompressed", "UNCOMPRESSED"),
        ("zstd", "ZSTD"),
        ("lz4", "LZ4"),
    ] {
        let table = format!("bids_{codec}");
        let p1 = lake.bids_pipeline(codec, &table, "40K");
        with_options(&p1, &format!("'compression' = '{codec}'"));
        succeed(&mut run(&p1, &lake.state(codec), 1));
        let read_p1 = lake.read(&table);
        assert_eq!(read_p1.rows, read.rows, "{codec}");
        assert_eq!(read_p1.codecs, [stored]);
    }
}

#[test]
fn partitioned_tables_hold_the_crash_free_rows_and_readers_prune_by_their_partitions() {
    let lake = Lake::new();
    let clean = lake.bids_pipeline("clean", "bids_clean", "40K");
    succeed(&mut lake.run(&clean, &lake.state("clean"), 2));
    let expected = lake.read("bids_clean").rows;

    // Half the bids' channels are one of 10K `channel-N`: truncated to 4 characters,
    // five partitions.
    let partitioned_by =
        "PARTITIONED BY (truncate(4, channel), bucket(4, auction), days(date_time))";
    let file = lake.partitioned_bids_pipeline("parts", "bids_parts", "40K", partitioned_by);
    let state = lake.state("parts");
    crash(&mut lake.run(&file, &state, 2), "after-snapshot-upload:3");
    succeed(&mut lake.run(&file, &state, 3));
    // Columns in sorted order: auction, bidder, channel, date_time, price.
    let auction = expected[expected.len() / 2]
        .split(',')
        .next()
        .unwrap()
        .to_string();
    let read = lake.read_filtered("bids_parts", &format!("auction = {auction}"));
    assert_eq!(
        read.spec,
        [
            "truncate[4](channel)",
            "bucket[4](auction)",
            "day(date_time)"
        ]
    );
    assert!(
        read.rows == expected,
        "{} rows, expected {}",
        read.rows.len(),
        expected.len()
    );
    assert_each_epoch_once(&read);
    assert_eq!(read.stored, read.listed);
    // Files per partition: more data files than an unpartitioned run writes.
    assert!(read.listed.len() > lake.read("bids_clean").listed.len() * 2);
    let want: Vec<&String> = expected
        .iter()
        .filter(|r| r.split(',').next() == Some(auction.as_str()))
        .collect();
    let got = read.filtered.unwrap();
    assert!(!want.is_empty());
    assert_eq!(got.iter().collect::<Vec<_>>(), want);
    let numbered = expected[0].split(',').nth(2).unwrap().to_string();
    for channel in ["Apple", numbered.as_str()] {
        let read = lake.read_filtered("bids_parts", &format!("channel = '{channel}'"));
        let want: Vec<&String> = expected
            .iter()
            .filter(|r| r.split(',').nth(2) == Some(channel))
            .collect();
        assert_eq!(
            read.filtered.unwrap().iter().collect::<Vec<_>>(),
            want,
            "{channel}"
        );
    }

    // The pipeline's declaration changed: the table keeps its partitioning.
    let changed = lake.partitioned_bids_pipeline(
        "parts",
        "bids_parts",
        "40K",
        "PARTITIONED BY (hours(date_time))",
    );
    let out = lake.run(&changed, &state, 1).output().unwrap();
    assert!(!out.status.success());
    let text = stderr(&out);
    assert!(
        text.contains("the table is partitioned by (truncate[4](channel), bucket[4](auction), day(date_time)), the declaration says (hour(date_time))"),
        "{text}"
    );
}

#[test]
fn a_second_pipeline_writing_the_same_table_is_refused() {
    let lake = Lake::new();
    let first = lake.bids_pipeline("first", "bids", "5K");
    succeed(&mut run(&first, &lake.state("first"), 1));
    let second = lake.bids_pipeline("second", "bids", "5K");
    let out = run(&second, &lake.state("second"), 1).output().unwrap();
    assert!(!out.status.success());
    let text = stderr(&out);
    assert!(text.contains("belongs to"), "{text}");
    assert_eq!(lake.read("bids").rows.len(), bids_of(5_000));
}

#[test]
fn the_catalog_can_live_in_postgresql() {
    let server = PgServer::start();
    let lake = Lake::in_postgres(&server);
    let file = lake.bids_pipeline("pg", "bids", "40K");
    let state = lake.state("pg");
    crash(&mut run(&file, &state, 2), "after-sink-commit:3");
    succeed(&mut run(&file, &state, 1));
    let read = lake.read("bids");
    assert_eq!(read.rows.len(), bids_of(40_000));
    assert!(assert_each_epoch_once(&read) >= 2, "{:?}", read.snapshots);
    // The catalog's tables are in PostgreSQL.
    assert_eq!(
        server.rows("SELECT table_name FROM iceberg_tables WHERE table_namespace = 'nexmark'"),
        ["bids"]
    );
}

#[test]
fn without_checkpoints_every_subtask_appends_at_end_of_input() {
    let lake = Lake::new();
    let file = lake.bids_pipeline("plain", "bids", "10K");
    // Two subtasks create the namespace and table at once on a fresh catalog.
    let out = super::common::riffle()
        .arg("run")
        .arg(&file)
        .args(["--parallelism", "2", "--restart", "none"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let read = lake.read("bids");
    assert_eq!(read.rows.len(), bids_of(10_000));
    // One snapshot per subtask, naming the sink but no epochs.
    assert_eq!(read.snapshots.len(), 2, "{:?}", read.snapshots);
    assert!(read
        .snapshots
        .iter()
        .all(|s| s.contains_key("riffle.sink-id") && !s.contains_key("riffle.epochs")));
}
