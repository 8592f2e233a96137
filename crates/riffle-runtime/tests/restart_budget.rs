//! A job that runs for months fails now and then; what must end it is failing again and
//! again with no checkpoint committed between. Failures here are injected by an
//! operator that fails the job a set number of times, each once enough checkpoints
//! completed since the failure before (as a listener hears them).

use crate::common;

use common::runtime;
use riffle_connectors::sinks::CollectSinkFactory;
use riffle_connectors::PeerSourceFactory;
use riffle_core::arrow::array::AsArray;
use riffle_core::arrow::datatypes::Int64Type;
use riffle_core::{
    Error, Operator, OperatorContext, OperatorFactory, RecordBatch, Result, StreamSchema,
};
use riffle_runtime::supervisor::Restart;
use riffle_runtime::{
    run_checkpointed, CheckpointConfig, CheckpointEvent, CheckpointListener, CheckpointedRun,
    JobGraph, RestartStrategy, RunObserver, RuntimeError, WatermarkStrategy,
};
use riffle_state::{CheckpointStore, StateRoot};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const EVENTS: u64 = 1_000_000;
const BATCH_ROWS: u64 = 1_000;

/// What the failing operator and the listener share.
#[derive(Default)]
struct Failures {
    /// Failures still to inject.
    left: AtomicU32,
    /// Checkpoints completed since the last injected failure.
    completed_since: AtomicU64,
}

impl CheckpointListener for Failures {
    fn on_event(&self, event: &CheckpointEvent) {
        if let CheckpointEvent::Completed { .. } = event {
            self.completed_since.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// Passes batches on (a millisecond each, so the input lasts a few seconds), failing
/// the job on the first batch after `commits_between` checkpoints completed since the
/// last failure, while failures are left.
struct FailAfterCommits {
    schema: StreamSchema,
    failures: Arc<Failures>,
    commits_between: u64,
}

impl OperatorFactory for FailAfterCommits {
    fn describe(&self) -> String {
        "fail after commits".into()
    }
    fn output_schema(&self) -> &StreamSchema {
        &self.schema
    }
    fn is_stateful(&self) -> bool {
        false
    }
    fn create(&self, _: &OperatorContext) -> Result<Box<dyn Operator>> {
        Ok(Box::new(FailAfterCommitsOp {
            failures: self.failures.clone(),
            commits_between: self.commits_between,
        }))
    }
}

struct FailAfterCommitsOp {
    failures: Arc<Failures>,
    commits_between: u64,
}

impl Operator for FailAfterCommitsOp {
    fn on_batch(&mut self, _: usize, batch: RecordBatch, out: &mut Vec<RecordBatch>) -> Result<()> {
        let f = &self.failures;
        if f.completed_since.load(Ordering::SeqCst) >= self.commits_between
            && f.left
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
        {
            f.completed_since.store(0, Ordering::SeqCst);
            return Err(Error::Injected("an injected failure".into()));
        }
        std::thread::sleep(Duration::from_millis(1));
        out.push(batch);
        Ok(())
    }
}

#[derive(Default)]
struct Observed {
    /// Per failure: the restart that followed, if any.
    failures: Vec<Option<Restart>>,
}

impl RunObserver for Observed {
    fn failed(&mut self, _: &RuntimeError, restart: Option<Restart>) {
        self.failures.push(restart);
    }
}

/// Runs source → failing operator → sink with `failures` to inject, each after
/// `commits_between` completed checkpoints, checkpointing every `interval`, under the
/// default restart strategy but for a 1 ms delay. Returns the outcome's restarts (or
/// the error), the restarts observed, and the ids published.
fn run(
    failures: u32,
    commits_between: u64,
    interval: Duration,
) -> (std::result::Result<u32, RuntimeError>, Observed, Vec<i64>) {
    let shared = Arc::new(Failures {
        left: AtomicU32::new(failures),
        completed_since: AtomicU64::new(0),
    });
    let mut g = JobGraph::new("restart-budget");
    let src = g
        .source(
            "peer",
            Arc::new(PeerSourceFactory::new(EVENTS, BATCH_ROWS)),
            1,
            WatermarkStrategy::default(),
        )
        .unwrap();
    let fail = FailAfterCommits {
        schema: g.schema(src).clone(),
        failures: shared.clone(),
        commits_between,
    };
    let f = g.operator("fail", Arc::new(fail), 1, &[src]).unwrap();
    let sink = CollectSinkFactory::new();
    g.sink("sink", Arc::new(sink.clone()), 1, f).unwrap();
    let store = CheckpointStore::new(StateRoot::parse("memory://").unwrap(), &g.name);
    let attempts = match RestartStrategy::default() {
        RestartStrategy::FixedDelay { attempts, .. } => attempts,
        other => panic!("the default strategy changed: {other:?}"),
    };
    let run = CheckpointedRun {
        checkpoints: CheckpointConfig {
            interval,
            ..CheckpointConfig::default()
        },
        restart: RestartStrategy::FixedDelay {
            attempts,
            delay: Duration::from_millis(1),
        },
        listeners: vec![shared],
        ..CheckpointedRun::default()
    };
    let mut observed = Observed::default();
    let outcome = runtime().block_on(run_checkpointed(&g, &store, run, &mut observed));
    let mut ids: Vec<i64> = sink
        .batches()
        .iter()
        .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
        .collect();
    ids.sort_unstable();
    (outcome.map(|o| o.restarts), observed, ids)
}

#[test]
fn ten_failures_each_after_committed_checkpoints_keep_the_job_running() {
    let (restarts, observed, ids) = run(10, 2, Duration::from_millis(5));
    let restarts = restarts.unwrap_or_else(|e| {
        panic!(
            "the job gave up after {} failures: {e}",
            observed.failures.len()
        )
    });
    assert_eq!(restarts, 10);
    let in_a_row: Vec<Option<u32>> = observed
        .failures
        .iter()
        .map(|r| r.map(|r| r.in_a_row))
        .collect();
    assert_eq!(in_a_row, vec![Some(1); 10], "each failure starts a new row");
    // Exactly-once through every restart: each id published once.
    assert!(
        ids.iter().copied().eq(0..EVENTS as i64),
        "{} ids published",
        ids.len()
    );
}

#[test]
fn ten_failures_in_a_row_end_the_job() {
    // No checkpoint in the run's life (the first would come after an hour), so every
    // failure is in a row with the one before.
    let (result, observed, _) = run(10, 0, Duration::from_secs(3600));
    let error = result.expect_err("the job outlived ten failures in a row");
    assert!(error.to_string().contains("injected failure"), "{error}");
    let in_a_row: Vec<Option<u32>> = observed
        .failures
        .iter()
        .map(|r| r.map(|r| r.in_a_row))
        .collect();
    // The default strategy survives 3 in a row; the fourth ends the job.
    assert_eq!(in_a_row, vec![Some(1), Some(2), Some(3), None]);
}
