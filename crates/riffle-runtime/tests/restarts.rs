//! Task failures: the job restarts from its newest checkpoint under the restart strategy,
//! and the published output is exactly that of a run that never failed — including rows
//! that were late before the failure, which stay late after it.

use crate::common;

use common::runtime;
use riffle_connectors::sinks::CollectSinkFactory;
use riffle_connectors::PeerSourceFactory;
use riffle_core::arrow::array::{Array, AsArray, Int64Array, TimestampNanosecondArray};
use riffle_core::arrow::datatypes::{Int64Type, TimestampNanosecondType};
use riffle_core::{
    Error, Operator, OperatorContext, OperatorFactory, RecordBatch, Result, StreamSchema,
};
use riffle_operators::{AggregateSpec, WindowAggregateFactory, WindowSpec};
use riffle_runtime::recovery::Recovered;
use riffle_runtime::supervisor::Restart;
use riffle_runtime::{
    run_checkpointed, CheckpointConfig, CheckpointEvent, CheckpointedRun, JobGraph,
    RecordingListener, RestartStrategy, RunObserver, RuntimeError, WatermarkStrategy,
};
use riffle_state::{CheckpointStore, StateRoot};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const EVENTS: u64 = 400_000;

/// Moves every 50th row one event-second back: behind the watermark, so it is late.
/// Fails the job once, at row `fail_at`, if `armed`.
struct Disturb {
    schema: StreamSchema,
    fail_at: i64,
    armed: Arc<AtomicBool>,
}

impl OperatorFactory for Disturb {
    fn describe(&self) -> String {
        "disturb".into()
    }
    fn output_schema(&self) -> &StreamSchema {
        &self.schema
    }
    fn is_stateful(&self) -> bool {
        false
    }
    fn create(&self, _: &OperatorContext) -> Result<Box<dyn Operator>> {
        Ok(Box::new(DisturbOp {
            fail_at: self.fail_at,
            armed: self.armed.clone(),
        }))
    }
}

struct DisturbOp {
    fail_at: i64,
    armed: Arc<AtomicBool>,
}

impl Operator for DisturbOp {
    fn on_batch(&mut self, _: usize, batch: RecordBatch, out: &mut Vec<RecordBatch>) -> Result<()> {
        let ids = batch.column(0).as_primitive::<Int64Type>();
        if ids.values().contains(&self.fail_at) && self.armed.swap(false, Ordering::SeqCst) {
            return Err(Error::Injected(format!("row {} fails once", self.fail_at)));
        }
        let ts = batch.column(3).as_primitive::<TimestampNanosecondType>();
        let moved: TimestampNanosecondArray = ids
            .values()
            .iter()
            .zip(ts.values().iter())
            .map(|(id, t)| Some(if id % 50 == 0 { t - 1_000_000_000 } else { *t }))
            .collect();
        let mut columns = batch.columns().to_vec();
        columns[3] = Arc::new(moved.with_timezone("UTC"));
        out.push(RecordBatch::try_new(batch.schema(), columns)?);
        Ok(())
    }
}

fn job(armed: Arc<AtomicBool>) -> (JobGraph, CollectSinkFactory) {
    let mut g = JobGraph::new("restarts");
    let watermarks = WatermarkStrategy {
        max_out_of_orderness: Duration::from_millis(20),
        idle_timeout: None,
    };
    let src = g
        .source(
            "peer",
            Arc::new(PeerSourceFactory::new(EVENTS, 500)),
            // One source subtask: which rows are late is then a fact of the input,
            // not of how two sources' watermarks interleave.
            1,
            watermarks,
        )
        .unwrap();
    let schema = g.schema(src).clone();
    let disturb = Disturb {
        schema: schema.clone(),
        fail_at: (EVENTS * 3 / 4) as i64,
        armed,
    };
    let d = g.operator("disturb", Arc::new(disturb), 1, &[src]).unwrap();
    let window = WindowAggregateFactory::new(
        &schema,
        &["k"],
        WindowSpec::tumbling(Duration::from_millis(100)),
        vec![AggregateSpec::count_star("n")],
    )
    .unwrap();
    let w = g.operator("window", Arc::new(window), 2, &[d]).unwrap();
    let sink = CollectSinkFactory::new();
    g.sink("sink", Arc::new(sink.clone()), 2, w).unwrap();
    (g, sink)
}

/// (window_start, k, n), sorted.
fn rows(batches: &[RecordBatch]) -> Vec<(i64, i64, i64)> {
    let mut out = Vec::new();
    for b in batches {
        let col = |n: &str| b.column_by_name(n).unwrap().clone();
        let (ws, k, n) = (col("window_start"), col("k"), col("n"));
        let ks = k.as_any().downcast_ref::<Int64Array>().unwrap();
        for r in 0..b.num_rows() {
            out.push((
                ws.as_primitive::<TimestampNanosecondType>().value(r),
                ks.value(r),
                n.as_primitive::<Int64Type>().value(r),
            ));
        }
    }
    out.sort();
    out
}

#[derive(Default)]
struct Observed {
    restored: Vec<Option<u64>>,
    failures: Vec<String>,
}

impl RunObserver for Observed {
    fn recovered(&mut self, recovered: &Recovered) {
        self.restored.push(recovered.plan.restore.map(|e| e.0));
    }
    fn failed(&mut self, error: &RuntimeError, _: Option<Restart>) {
        self.failures.push(error.to_string());
    }
}

/// Restarts (or the error), published windows, what the observer saw, checkpoint events.
type RunResult = (
    Result<Finished, RuntimeError>,
    Vec<(i64, i64, i64)>,
    Observed,
    Vec<CheckpointEvent>,
);

/// Restarts, and the late rows and windows the summary counted over the whole run.
#[derive(Debug, PartialEq)]
struct Finished {
    restarts: u32,
    late_rows: u64,
    windows: u64,
}

fn run(armed: bool, restart: RestartStrategy) -> RunResult {
    let rt = runtime();
    let (graph, sink) = job(Arc::new(AtomicBool::new(armed)));
    let store = CheckpointStore::new(StateRoot::parse("memory://").unwrap(), &graph.name);
    let listener = Arc::new(RecordingListener::default());
    let config = CheckpointedRun {
        checkpoints: CheckpointConfig {
            interval: Duration::from_millis(5),
            ..CheckpointConfig::default()
        },
        restart,
        listeners: vec![listener.clone()],
        ..CheckpointedRun::default()
    };
    let mut observed = Observed::default();
    let outcome = rt.block_on(run_checkpointed(&graph, &store, config, &mut observed));
    (
        outcome.map(|o| Finished {
            restarts: o.restarts,
            late_rows: o.summary.late_rows_dropped(),
            windows: o.summary.operators.iter().map(|t| t.windows_emitted).sum(),
        }),
        rows(&sink.batches()),
        observed,
        listener.events(),
    )
}

#[test]
fn a_failed_task_restarts_from_the_checkpoint_and_late_rows_stay_late() {
    let (clean, expected, _, events) = run(false, RestartStrategy::None);
    let clean = clean.unwrap();
    assert_eq!(clean.restarts, 0);
    assert!(clean.late_rows > 0, "the input has late rows");
    assert!(!expected.is_empty());
    assert!(
        events
            .iter()
            .any(|e| matches!(e, CheckpointEvent::Completed { .. })),
        "the listener hears completed checkpoints"
    );

    let strategy = RestartStrategy::FixedDelay {
        attempts: 2,
        delay: Duration::from_millis(10),
    };
    let (restarted, got, observed, events) = run(true, strategy);
    let restarted = restarted.unwrap();
    assert_eq!(restarted.restarts, 1, "one failure, one restart");
    // Counters are checkpointed with the state: the resumed run continues them, so the
    // totals count each late row and each window once.
    assert_eq!(restarted.late_rows, clean.late_rows);
    assert_eq!(restarted.windows, clean.windows);
    assert_eq!(observed.failures.len(), 1);
    assert!(
        observed.failures[0].contains("fails once"),
        "{:?}",
        observed.failures
    );
    assert_eq!(observed.restored[0], None, "the first attempt starts empty");
    assert!(
        observed.restored[1].is_some(),
        "the restart resumed from a checkpoint, not from scratch"
    );
    assert!(events.iter().any(|e| matches!(
        e,
        CheckpointEvent::Started {
            end_of_input: true,
            ..
        }
    )));
    assert_eq!(
        got.len(),
        expected.len(),
        "window count differs after the restart"
    );
    assert!(got == expected, "window values differ after the restart");
}

/// `--no-restore` over a state root with an earlier run's checkpoints, and a failure
/// before the new run's first checkpoint: the restart starts from empty state again.
/// (It once restored the replaced history's newest checkpoint, which had finished the
/// input, and published nothing.)
#[test]
fn a_run_started_empty_that_fails_before_its_first_checkpoint_starts_empty_again() {
    let rt = runtime();
    let (graph, _) = job(Arc::new(AtomicBool::new(false)));
    let store = CheckpointStore::new(StateRoot::parse("memory://").unwrap(), &graph.name);
    let earlier = CheckpointedRun {
        restart: RestartStrategy::None,
        ..CheckpointedRun::default()
    };
    rt.block_on(run_checkpointed(&graph, &store, earlier, &mut ()))
        .unwrap();
    let expected = run(false, RestartStrategy::None).1;
    let (graph, sink) = job(Arc::new(AtomicBool::new(true)));
    let again = CheckpointedRun {
        // No checkpoint commits before the failure at three quarters of the input.
        checkpoints: CheckpointConfig {
            interval: Duration::from_secs(3600),
            ..CheckpointConfig::default()
        },
        restart: RestartStrategy::FixedDelay {
            attempts: 1,
            delay: Duration::from_millis(10),
        },
        start_empty: true,
        ..CheckpointedRun::default()
    };
    let mut observed = Observed::default();
    let outcome = rt
        .block_on(run_checkpointed(&graph, &store, again, &mut observed))
        .unwrap();
    assert_eq!(outcome.restarts, 1);
    assert_eq!(
        observed.restored,
        vec![None, None],
        "both attempts start empty"
    );
    assert!(
        rows(&sink.batches()) == expected,
        "the restarted run's windows differ from a clean run's"
    );
}

#[test]
fn without_restarts_a_failure_ends_the_run() {
    let (result, _, observed, _) = run(true, RestartStrategy::None);
    let err = result.unwrap_err().to_string();
    assert!(err.contains("fails once"), "{err}");
    assert_eq!(observed.restored.len(), 1);
}

/// Wraps the peer source and records the epochs it is told are complete.
struct Notified {
    inner: PeerSourceFactory,
    seen: Arc<std::sync::Mutex<Vec<u64>>>,
}

struct NotifiedSource {
    inner: Box<dyn riffle_core::Source>,
    seen: Arc<std::sync::Mutex<Vec<u64>>>,
}

impl riffle_core::SourceFactory for Notified {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn output_schema(&self) -> &StreamSchema {
        self.inner.output_schema()
    }
    fn create(&self, ctx: &OperatorContext) -> Result<Box<dyn riffle_core::Source>> {
        Ok(Box::new(NotifiedSource {
            inner: self.inner.create(ctx)?,
            seen: self.seen.clone(),
        }))
    }
}

impl riffle_core::Source for NotifiedSource {
    fn poll_next(&mut self) -> Result<riffle_core::SourcePoll> {
        self.inner.poll_next()
    }
    fn snapshot(&mut self, epoch: riffle_core::Epoch) -> Result<riffle_core::OperatorState> {
        self.inner.snapshot(epoch)
    }
    fn restore(&mut self, state: riffle_core::OperatorState) -> Result<()> {
        self.inner.restore(state)
    }
    fn on_checkpoint_complete(&mut self, epoch: riffle_core::Epoch) -> Result<()> {
        self.seen.lock().unwrap().push(epoch.0);
        Ok(())
    }
}

#[test]
fn sources_hear_which_checkpoints_completed() {
    let rt = runtime();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut g = JobGraph::new("notified");
    let src = g
        .source(
            "peer",
            Arc::new(Notified {
                inner: PeerSourceFactory::new(2_000_000, 500),
                seen: seen.clone(),
            }),
            1,
            WatermarkStrategy::default(),
        )
        .unwrap();
    g.sink("sink", Arc::new(CollectSinkFactory::new()), 1, src)
        .unwrap();
    let store = CheckpointStore::new(StateRoot::parse("memory://").unwrap(), &g.name);
    let run = CheckpointedRun {
        checkpoints: CheckpointConfig {
            interval: Duration::from_millis(5),
            ..CheckpointConfig::default()
        },
        ..CheckpointedRun::default()
    };
    let outcome = rt
        .block_on(run_checkpointed(&g, &store, run, &mut ()))
        .unwrap();
    let committed: Vec<u64> = outcome.reports[0].committed.iter().map(|e| e.0).collect();
    let seen = seen.lock().unwrap().clone();
    assert!(
        !seen.is_empty(),
        "no completion reached the source ({} epochs committed)",
        committed.len()
    );
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
    assert!(
        seen.iter().all(|e| committed.contains(e)),
        "{seen:?} vs {committed:?}"
    );
}

#[test]
fn a_run_of_an_older_generation_is_fenced_out() {
    let rt = runtime();
    let (graph, _sink) = job(Arc::new(AtomicBool::new(false)));
    let store = CheckpointStore::new(StateRoot::parse("memory://").unwrap(), &graph.name);
    let listener = Arc::new(RecordingListener::default());
    let run = CheckpointedRun {
        checkpoints: CheckpointConfig {
            interval: Duration::from_millis(5),
            ..CheckpointConfig::default()
        },
        restart: RestartStrategy::FixedDelay {
            attempts: 3,
            delay: Duration::from_millis(1),
        },
        listeners: vec![listener.clone()],
        ..CheckpointedRun::default()
    };
    let err = rt.block_on(async {
        let fence = {
            let store = store.clone();
            let listener = listener.clone();
            tokio::spawn(async move {
                // Once this run committed an epoch, a newer process starts on the same
                // state (recovery records its generation first).
                while !listener
                    .events()
                    .iter()
                    .any(|e| matches!(e, CheckpointEvent::Completed { .. }))
                {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                store.claim_generation(99).await.unwrap();
            })
        };
        let result = run_checkpointed(&graph, &store, run, &mut ()).await;
        fence.await.unwrap();
        result.unwrap_err()
    });
    // Typed, so no rewording of the message can turn fencing into a restart.
    assert!(
        matches!(
            err,
            riffle_runtime::RuntimeError::Fenced { current: 99, .. }
        ),
        "the older run stops instead of committing: {err}"
    );
    assert!(
        listener.events().iter().any(|e| matches!(
            e,
            CheckpointEvent::Failed { reason, .. } if reason.contains("fenced")
        )),
        "listeners hear of the fatal failure"
    );
}

/// Turns the state directory's `checkpoints/` into a plain file once recovery is done,
/// so every checkpoint's upload fails.
struct BreakStorage {
    checkpoints: std::path::PathBuf,
}

impl RunObserver for BreakStorage {
    fn recovered(&mut self, _: &Recovered) {
        let _ = std::fs::remove_dir_all(&self.checkpoints);
        std::fs::write(&self.checkpoints, b"not a directory").unwrap();
    }
}

#[test]
fn too_many_failed_checkpoints_in_a_row_fail_the_job() {
    let rt = runtime();
    let (graph, _sink) = job(Arc::new(AtomicBool::new(false)));
    let dir = tempfile::tempdir().unwrap();
    let store = CheckpointStore::new(
        StateRoot::parse(dir.path().to_str().unwrap()).unwrap(),
        &graph.name,
    );
    let listener = Arc::new(RecordingListener::default());
    let run = CheckpointedRun {
        checkpoints: CheckpointConfig {
            interval: Duration::from_millis(5),
            tolerable_failures: 3,
            ..CheckpointConfig::default()
        },
        restart: RestartStrategy::None,
        listeners: vec![listener.clone()],
        ..CheckpointedRun::default()
    };
    let mut observer = BreakStorage {
        checkpoints: dir.path().join(&graph.name).join("checkpoints"),
    };
    let err = rt
        .block_on(run_checkpointed(&graph, &store, run, &mut observer))
        .unwrap_err()
        .to_string();
    assert!(err.contains("4 checkpoints failed in a row"), "{err}");
    let consecutive: Vec<usize> = listener
        .events()
        .iter()
        .filter_map(|e| match e {
            CheckpointEvent::Failed { consecutive, .. } => Some(*consecutive),
            _ => None,
        })
        .collect();
    assert_eq!(
        consecutive,
        vec![1, 2, 3, 4],
        "the fourth failure stops the job"
    );
}
