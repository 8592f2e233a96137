//! The same bids-per-auction job, checkpointed every 100 ms into `./riffle-state` and
//! written exactly-once as JSON lines into `./out-bids`. Kill it (Ctrl-C, or `kill -9`)
//! and run it again: it resumes from its newest checkpoint. Run:
//! `cargo run --release -p riffle-bench --example exactly_once`.

use riffle_connectors::nexmark::{NexmarkConfig, NexmarkTable};
use riffle_connectors::sinks::{FileFormat, FileSinkFactory, RollingPolicy};
use riffle_connectors::NexmarkSourceFactory;
use riffle_operators::{AggregateSpec, WindowAggregateFactory, WindowSpec};
use riffle_runtime::recovery::Recovered;
use riffle_runtime::{
    run_checkpointed, CheckpointConfig, CheckpointedRun, JobGraph, RestartStrategy, RunObserver,
    WatermarkStrategy,
};
use riffle_state::{CheckpointStore, StateRoot};
use std::sync::Arc;
use std::time::Duration;

/// Says where each (re)start resumes from.
struct Announce;

impl RunObserver for Announce {
    fn recovered(&mut self, recovered: &Recovered) {
        match recovered.plan.restore {
            Some(epoch) => eprintln!("resuming from checkpoint epoch {epoch}"),
            None => eprintln!("starting from empty state"),
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config = NexmarkConfig {
        events: Some(20_000_000),
        first_event_rate: 100_000,
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
    // Staged as .inprogress files, renamed when the checkpoint covering them commits.
    let files = FileSinkFactory::new("out-bids", FileFormat::Jsonl, RollingPolicy::default());
    graph.sink("files", Arc::new(files), 2, counts)?;

    let store = CheckpointStore::new(StateRoot::parse("./riffle-state")?, &graph.name);
    let run = CheckpointedRun {
        checkpoints: CheckpointConfig {
            interval: Duration::from_millis(100),
            ..CheckpointConfig::default()
        },
        restart: RestartStrategy::FixedDelay {
            attempts: 3,
            delay: Duration::from_secs(1),
        },
        ..CheckpointedRun::default()
    };
    let runtime = tokio::runtime::Runtime::new()?;
    let outcome = runtime.block_on(run_checkpointed(&graph, &store, run, &mut Announce))?;
    let report = outcome.reports.last().cloned().unwrap_or_default();
    eprintln!(
        "this run published {} rows into out-bids/ (with the rows of earlier runs: each exactly once); {} checkpoints committed",
        outcome.summary.sink_rows,
        report.committed.len()
    );
    Ok(())
}
