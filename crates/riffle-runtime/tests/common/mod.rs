//! Helpers shared by the runtime integration tests.

#![allow(dead_code)]

use riffle_connectors::PeerSourceFactory;
use riffle_runtime::job::{self, JobConfig};
use riffle_runtime::{CheckpointConfig, CheckpointReport, JobGraph, NodeId, WatermarkStrategy};
use riffle_state::CheckpointStore;
use std::sync::Arc;
use std::time::Duration;

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A graph `name` whose one source is the peer generator: `events` events in batches
/// of 500, one subtask, default watermarks.
pub fn peer_graph(name: &str, events: u64) -> (JobGraph, NodeId) {
    let mut g = JobGraph::new(name);
    let src = g
        .source(
            "peer",
            Arc::new(PeerSourceFactory::new(events, 500)),
            1,
            WatermarkStrategy::default(),
        )
        .unwrap();
    (g, src)
}

pub fn no_delay() -> WatermarkStrategy {
    WatermarkStrategy {
        max_out_of_orderness: Duration::ZERO,
        idle_timeout: None,
    }
}

/// Runs `graph` to the end with the coordinator checkpointing into `store`.
pub fn run_checkpointed(
    rt: &tokio::runtime::Runtime,
    graph: &JobGraph,
    store: &CheckpointStore,
    checkpoints: CheckpointConfig,
) -> CheckpointReport {
    rt.block_on(async {
        let (handle, report) = job::start_with_checkpoints(
            graph,
            &JobConfig::default(),
            store.clone(),
            checkpoints,
            vec![],
        )
        .unwrap();
        handle.wait().await.unwrap();
        report.await.unwrap()
    })
}
