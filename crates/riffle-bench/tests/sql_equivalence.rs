//! The SQL Nexmark examples (`examples/nexmark/*.sql`) against their Rust-API twins: same
//! generator settings, parallelism 1 and 2, outputs compared row for row (q4, an updating
//! result, by its final value per category).

use crate::common;

use common::{rows, V};
use riffle_bench::queries::{Query, QueryOptions};
use riffle_connectors::nexmark::NexmarkConfig;
use riffle_connectors::sinks::CollectSinkFactory;
use riffle_core::RecordBatch;
use riffle_runtime::JobGraph;
use riffle_sql::{plan_pipeline, Connector, ConnectorRegistry, OptionSpec, PlanOptions, SinkTable};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

const EVENTS: u64 = 120_000;
const RATE: u64 = 2_000;

/// A sink connector collecting rows in memory, registered under `collect`.
struct CollectConnector(Mutex<Option<CollectSinkFactory>>);

impl Connector for CollectConnector {
    fn name(&self) -> &'static str {
        "collect"
    }
    fn options(&self) -> &'static [OptionSpec] {
        &[]
    }
    fn sink(&self, _: &riffle_sql::ddl::TableDef, _: &str) -> riffle_sql::Result<SinkTable> {
        let sink = CollectSinkFactory::new();
        *self.0.lock().unwrap() = Some(sink.clone());
        Ok(SinkTable {
            factory: Arc::new(sink),
            updates: Ok(()),
            retractions: Err("the collect sink keeps rows as they come".into()),
            nested: true,
            needs_withdrawals: false,
        })
    }
}

fn example(query: Query) -> String {
    let path = format!(
        "{}/../../examples/nexmark/{query}.sql",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn execute(graph: &JobGraph) {
    let summary = common::run_graph(graph);
    assert_eq!(
        summary.late_rows_dropped(),
        0,
        "in-order input has no late rows"
    );
}

/// Runs the SQL example with its file sink swapped for an in-memory one.
fn run_sql(query: Query, parallelism: usize) -> Vec<RecordBatch> {
    let sink_options =
        format!("'connector' = 'filesystem', 'path' = 'out/{query}', 'format' = 'json'");
    let text = example(query)
        .replace(&sink_options, "'connector' = 'collect'")
        .replace(
            "'events' = '10M'",
            &format!("'events' = '{EVENTS}', 'rate' = '{RATE}'"),
        );
    assert!(
        text.contains("'collect'"),
        "{query}.sql writes out/{query} as json"
    );
    let collect = Arc::new(CollectConnector(Mutex::new(None)));
    let mut registry = ConnectorRegistry::default();
    registry.register(collect.clone());
    let options = PlanOptions {
        name: query.to_string(),
        parallelism,
        max_parallelism: riffle_core::DEFAULT_MAX_PARALLELISM,
        settings: Default::default(),
    };
    let pipeline = plan_pipeline(&text, &options, &registry)
        .unwrap_or_else(|e| panic!("{query}.sql does not plan: {e}"));
    execute(&pipeline.graph);
    let sink = collect
        .0
        .lock()
        .unwrap()
        .take()
        .expect("the sink was built");
    sink.batches()
}

fn run_rust(query: Query, parallelism: usize) -> Vec<RecordBatch> {
    let sink = CollectSinkFactory::new();
    let opts = QueryOptions {
        nexmark: NexmarkConfig {
            events: Some(EVENTS),
            first_event_rate: RATE,
            ..NexmarkConfig::default()
        },
        parallelism,
        ..QueryOptions::default()
    };
    let graph = riffle_bench::queries::build(query, &opts, Arc::new(sink.clone())).unwrap();
    execute(&graph);
    sink.batches()
}

fn columns(batches: &[RecordBatch]) -> Vec<String> {
    batches
        .first()
        .map(|b| {
            b.schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .filter(|n| n != riffle_core::TIMESTAMP_FIELD)
                .collect()
        })
        .unwrap_or_default()
}

fn check(query: Query) {
    for p in [1, 2] {
        let (sql, rust) = (run_sql(query, p), run_rust(query, p));
        let names = columns(&rust);
        assert_eq!(columns(&sql), names, "{query} p{p}: output columns");
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let (got, want) = (rows(&sql, &refs), rows(&rust, &refs));
        assert!(
            !want.is_empty(),
            "{query} p{p}: no rows; the test would prove nothing"
        );
        assert_eq!(got.len(), want.len(), "{query} p{p}: row count");
        assert_eq!(got, want, "{query} p{p}: rows differ");
    }
}

#[test]
fn q0_sql_equals_rust() {
    check(Query::Q0);
}

#[test]
fn q1_sql_equals_rust() {
    check(Query::Q1);
}

#[test]
fn q2_sql_equals_rust() {
    check(Query::Q2);
}

#[test]
fn q3_sql_equals_rust() {
    check(Query::Q3);
}

#[test]
fn q4_sql_final_averages_equal_rust() {
    // Updating rows interleave differently between runs; the newest row per category is
    // the result.
    let last = |batches: &[RecordBatch]| {
        let mut latest: BTreeMap<V, V> = BTreeMap::new();
        for b in batches {
            for row in rows(std::slice::from_ref(b), &["category", "avg_final"]) {
                latest.insert(row[0].clone(), row[1].clone());
            }
        }
        latest
    };
    for p in [1, 2] {
        let (sql, rust) = (run_sql(Query::Q4, p), run_rust(Query::Q4, p));
        assert_eq!(columns(&sql), columns(&rust), "q4 p{p}: output columns");
        let want = last(&rust);
        assert!(
            want.len() >= 3,
            "q4 p{p}: too few categories to prove anything"
        );
        assert_eq!(last(&sql), want, "q4 p{p}: final averages differ");
    }
}

#[test]
fn q5_sql_equals_rust() {
    check(Query::Q5);
}

#[test]
fn q7_sql_equals_rust() {
    check(Query::Q7);
}

#[test]
fn q8_sql_equals_rust() {
    check(Query::Q8);
}

#[test]
fn q11_sql_equals_rust() {
    check(Query::Q11);
}

#[test]
fn an_interval_join_equals_its_definition_and_frees_state() {
    // Auctions opened within 5 s after their seller registered.
    let text = format!(
        "CREATE TABLE person WITH ('connector' = 'nexmark', 'event_type' = 'person', 'events' = '{EVENTS}', 'rate' = '{RATE}');
         CREATE TABLE auction WITH ('connector' = 'nexmark', 'event_type' = 'auction', 'events' = '{EVENTS}', 'rate' = '{RATE}');
         CREATE TABLE quick WITH ('connector' = 'collect');
         INSERT INTO quick
         SELECT p.id, a.id AS auction
         FROM person p JOIN auction a ON p.id = a.seller
         WHERE a.date_time BETWEEN p.date_time AND p.date_time + INTERVAL '5' SECOND;"
    );
    let config = NexmarkConfig {
        events: Some(EVENTS),
        first_event_rate: RATE,
        ..NexmarkConfig::default()
    };
    let events = common::events(&config);
    let people: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            riffle_connectors::nexmark::Event::Person(p) => Some(p),
            _ => None,
        })
        .collect();
    let mut want = Vec::new();
    for e in &events {
        if let riffle_connectors::nexmark::Event::Auction(a) = e {
            for p in people.iter().filter(|p| p.id == a.seller) {
                if a.date_time_ms >= p.date_time_ms && a.date_time_ms <= p.date_time_ms + 5_000 {
                    want.push(vec![V::I(p.id), V::I(a.id)]);
                }
            }
        }
    }
    want.sort();
    assert!(
        want.len() > 50,
        "too few matches to prove anything: {}",
        want.len()
    );
    for p in [1, 2] {
        let collect = Arc::new(CollectConnector(Mutex::new(None)));
        let mut registry = ConnectorRegistry::default();
        registry.register(collect.clone());
        let options = PlanOptions {
            name: "interval".into(),
            parallelism: p,
            max_parallelism: riffle_core::DEFAULT_MAX_PARALLELISM,
            settings: Default::default(),
        };
        let pipeline = plan_pipeline(&text, &options, &registry).unwrap();
        let join = pipeline
            .graph
            .nodes()
            .iter()
            .find(|n| n.id.0.starts_with("interval_join"))
            .map(|n| n.describe())
            .expect("planned as an interval join");
        assert!(join.contains("keep left 5s, right 0ns"), "{join}");
        execute(&pipeline.graph);
        let sink = collect.0.lock().unwrap().take().unwrap();
        assert_eq!(rows(&sink.batches(), &["id", "auction"]), want, "p{p}");
    }
}
