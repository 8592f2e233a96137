//! Helpers shared by the Nexmark tests: running a query into memory and reading rows
//! back as comparable values.

#![allow(dead_code)]

use riffle_bench::queries::{self, Query, QueryOptions};
use riffle_connectors::nexmark::{Event, EventGenerator, NexmarkConfig};
use riffle_connectors::sinks::CollectSinkFactory;
use riffle_core::arrow::array::{Array, AsArray};
use riffle_core::arrow::datatypes::{DataType, Float64Type, Int64Type, TimeUnit};
use riffle_core::RecordBatch;
use riffle_runtime::job::{self, JobConfig};
use riffle_runtime::{JobGraph, JobSummary};
use std::sync::Arc;

/// A value in an output row, comparable and hashable.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum V {
    I(i64),
    /// f64 bits (exact comparison).
    F(u64),
    S(String),
}

pub fn f(x: f64) -> V {
    V::F(x.to_bits())
}

/// Rows of `columns` from `batches`, sorted (a multiset).
pub fn rows(batches: &[RecordBatch], columns: &[&str]) -> Vec<Vec<V>> {
    let mut out = Vec::new();
    for b in batches {
        let cols: Vec<_> = columns
            .iter()
            .map(|c| {
                b.column_by_name(c)
                    .unwrap_or_else(|| panic!("no column {c}"))
                    .clone()
            })
            .collect();
        for r in 0..b.num_rows() {
            out.push(cols.iter().map(|c| value(c.as_ref(), r)).collect());
        }
    }
    out.sort();
    out
}

fn value(c: &dyn Array, r: usize) -> V {
    match c.data_type() {
        DataType::Int64 => V::I(c.as_primitive::<Int64Type>().value(r)),
        DataType::Float64 => f(c.as_primitive::<Float64Type>().value(r)),
        DataType::Utf8 => V::S(c.as_string::<i32>().value(r).to_string()),
        DataType::Timestamp(TimeUnit::Millisecond, _) => V::I(
            c.as_primitive::<riffle_core::arrow::datatypes::TimestampMillisecondType>()
                .value(r),
        ),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => V::I(
            c.as_primitive::<riffle_core::arrow::datatypes::TimestampNanosecondType>()
                .value(r),
        ),
        DataType::Decimal128(_, _) => V::S(
            c.as_primitive::<riffle_core::arrow::datatypes::Decimal128Type>()
                .value_as_string(r),
        ),
        other => panic!("unexpected type {other}"),
    }
}

/// Small runs: 2,000 events per event-second so windows and sessions actually close.
pub fn config(events: u64) -> NexmarkConfig {
    NexmarkConfig {
        events: Some(events),
        first_event_rate: 2_000,
        block_events: 997,
        ..NexmarkConfig::default()
    }
}

pub fn run(
    query: Query,
    nexmark: NexmarkConfig,
    parallelism: usize,
) -> (Vec<RecordBatch>, JobSummary) {
    let sink = CollectSinkFactory::new();
    let opts = QueryOptions {
        nexmark,
        parallelism,
        ..QueryOptions::default()
    };
    let graph = queries::build(query, &opts, Arc::new(sink.clone())).expect("query builds");
    let summary = run_graph(&graph);
    (sink.batches(), summary)
}

/// Runs `graph` to its end on a 2-thread runtime.
pub fn run_graph(graph: &JobGraph) -> JobSummary {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime
        .block_on(job::run(graph, &JobConfig::default()))
        .expect("pipeline runs")
}

pub fn events(config: &NexmarkConfig) -> Vec<Event> {
    let g = EventGenerator::new(config.clone());
    (0..config.events.unwrap_or(0))
        .map(|e| g.event(e))
        .collect()
}

pub const MS: i64 = 1_000_000;
