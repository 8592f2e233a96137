//! Savepoint requests against a running job, through the runtime API: a savepoint
//! while the job runs on, requests that are refused before anything is taken, and a
//! stop whose savepoint fails — the job stops and says why instead of restarting.

use crate::common;

use common::{no_delay, runtime};
use riffle_connectors::sinks::CollectSinkFactory;
use riffle_connectors::{NexmarkConfig, NexmarkSourceFactory, NexmarkTable};
use riffle_runtime::recovery::Recovered;
use riffle_runtime::savepoint::request_savepoint;
use riffle_runtime::{
    run_checkpointed, savepoint_channel, CheckpointConfig, CheckpointedRun, JobConfig, JobGraph,
    RestartStrategy, RunObserver, SavepointSender,
};
use riffle_state::{CheckpointStore, StateRoot};
use std::sync::Arc;
use std::time::Duration;

/// Bids from a generator slowed to 100K events/s: still running when asked.
fn slow_job() -> JobGraph {
    let config = NexmarkConfig {
        events: Some(100_000_000),
        max_events_per_second: Some(100_000),
        ..NexmarkConfig::default()
    };
    let mut g = JobGraph::new("slow-bids");
    let source = NexmarkSourceFactory::new(NexmarkTable::Bid, config);
    let bids = g.source("bids", Arc::new(source), 1, no_delay()).unwrap();
    g.sink("sink", Arc::new(CollectSinkFactory::new()), 1, bids)
        .unwrap();
    g
}

/// With `break_storage`, turns `checkpoints/` into a plain file once recovery is done,
/// so every epoch's upload fails.
struct Storage {
    checkpoints: std::path::PathBuf,
    break_storage: bool,
}

impl RunObserver for Storage {
    fn recovered(&mut self, _: &Recovered) {
        if self.break_storage {
            let _ = std::fs::remove_dir_all(&self.checkpoints);
            std::fs::write(&self.checkpoints, b"not a directory").unwrap();
        }
    }
}

/// Runs the slow job with periodic checkpoints off; `requests` runs alongside with the
/// sender and returns what it saw.
fn with_requests<T: Send + 'static>(
    break_storage: bool,
    requests: impl FnOnce(
        SavepointSender,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>,
) -> (
    riffle_runtime::CheckpointedOutcome,
    T,
    CheckpointStore,
    tempfile::TempDir,
) {
    let rt = runtime();
    let graph = slow_job();
    let dir = tempfile::tempdir().unwrap();
    let store = CheckpointStore::new(
        StateRoot::parse(dir.path().to_str().unwrap()).unwrap(),
        &graph.name,
    );
    let (sender, receiver) = savepoint_channel();
    let run = CheckpointedRun {
        job: JobConfig {
            savepoints: Some(receiver),
            ..JobConfig::default()
        },
        checkpoints: CheckpointConfig {
            interval: Duration::from_secs(3600),
            tolerable_failures: 100,
            ..CheckpointConfig::default()
        },
        restart: RestartStrategy::FixedDelay {
            attempts: 3,
            delay: Duration::from_millis(10),
        },
        ..CheckpointedRun::default()
    };
    let mut observer = Storage {
        checkpoints: dir.path().join(&graph.name).join("checkpoints"),
        break_storage,
    };
    let (outcome, seen) = rt.block_on(async {
        let asking = tokio::spawn(requests(sender));
        let outcome = run_checkpointed(&graph, &store, run, &mut observer).await;
        (outcome, asking.await.unwrap())
    });
    // The directory lives as long as the caller uses the store.
    (outcome.unwrap(), seen, store, dir)
}

#[test]
fn a_savepoint_while_running_then_a_stop() {
    let (outcome, (first, refused, drain_alone, stop), store, _dir) = with_requests(false, |s| {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let first = request_savepoint(&s, Some("one".into()), false, false).await;
            let refused = request_savepoint(&s, Some("one".into()), false, false).await;
            let drain_alone = request_savepoint(&s, None, false, true).await;
            let stop = request_savepoint(&s, None, true, false).await;
            (first, refused, drain_alone, stop)
        })
    });
    let first = first.unwrap();
    assert_eq!(first.label, "one");
    assert!(!first.stopped);
    assert!(refused.unwrap_err().contains("exists"));
    assert!(drain_alone.unwrap_err().contains("--stop"));
    let stop = stop.unwrap();
    assert!(stop.stopped && stop.epoch > first.epoch);
    assert_eq!(stop.label, format!("sp-{:06}", stop.epoch.0));
    assert_eq!(outcome.stopped, Some(Ok(stop.clone())));
    assert_eq!(outcome.restarts, 0);
    assert!(
        outcome.summary.source_rows < 100_000_000,
        "the job stopped early"
    );
    let rt = runtime();
    let labels: Vec<String> = rt
        .block_on(store.savepoints())
        .unwrap()
        .into_iter()
        .map(|(label, _)| label)
        .collect();
    assert_eq!(labels, vec!["one".to_string(), stop.label]);
}

#[test]
fn a_stop_whose_savepoint_fails_stops_the_job_and_says_why() {
    let (outcome, answer, _, _dir) = with_requests(true, |s| {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            request_savepoint(&s, Some("doomed".into()), true, false).await
        })
    });
    let reason = answer.unwrap_err();
    assert!(reason.contains("savepoint `doomed` failed"), "{reason}");
    // Stopped, not restarted: the sources ended after the barrier as asked.
    assert_eq!(outcome.restarts, 0);
    match outcome.stopped {
        Some(Err(e)) => assert_eq!(e, reason),
        other => panic!("expected a failed stop, got {other:?}"),
    }
}
