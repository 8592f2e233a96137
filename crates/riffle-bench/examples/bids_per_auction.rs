//! Bids per auction per 10-second window on the built-in Nexmark generator, printed as
//! JSON lines. Run: `cargo run --release -p riffle-bench --example bids_per_auction`.

use riffle_connectors::nexmark::{NexmarkConfig, NexmarkTable};
use riffle_connectors::sinks::{StdoutFormat, StdoutSinkFactory};
use riffle_connectors::NexmarkSourceFactory;
use riffle_operators::{AggregateSpec, WindowAggregateFactory, WindowSpec};
use riffle_runtime::job::{self, JobConfig};
use riffle_runtime::{JobGraph, WatermarkStrategy};
use std::sync::Arc;
use std::time::Duration;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config = NexmarkConfig {
        events: Some(100_000),
        first_event_rate: 1_000,
        ..Default::default()
    };
    let mut graph = JobGraph::new("bids-per-auction");
    let watermarks = WatermarkStrategy {
        max_out_of_orderness: Duration::from_secs(4),
        idle_timeout: None,
    };
    let bids = graph.source(
        "bids",
        Arc::new(NexmarkSourceFactory::new(NexmarkTable::Bid, config)),
        2,
        watermarks,
    )?;
    let counts = WindowAggregateFactory::new(
        graph.schema(bids),
        &["auction"],
        WindowSpec::tumbling(Duration::from_secs(10)),
        vec![AggregateSpec::count_star("bids")],
    )?;
    let counts = graph.operator("counts", Arc::new(counts), 2, &[bids])?;
    graph.sink(
        "print",
        Arc::new(StdoutSinkFactory::new(StdoutFormat::Jsonl)),
        1,
        counts,
    )?;
    let runtime = tokio::runtime::Runtime::new()?;
    let summary = runtime.block_on(job::run(&graph, &JobConfig::default()))?;
    eprintln!(
        "{} rows out, {} late rows dropped",
        summary.sink_rows,
        summary.late_rows_dropped()
    );
    Ok(())
}
