//! After a restart, the checkpoint the job restored from is let go once its subtasks
//! have their parts: it does not stay in memory for the rest of the attempt; and an
//! operator that restores in parts gets it one decoded batch at a time
//! (docs/engine.md, "State beyond memory"); and an aggregate that restored its own
//! files goes on from them, its next checkpoint writing only what changed.

use crate::common::{peer_graph, runtime};
use riffle_connectors::sinks::CollectSinkFactory;
use riffle_connectors::PeerSourceFactory;
use riffle_core::arrow::array::{AsArray, Int64Array, UInt16Array};
use riffle_core::arrow::datatypes::{DataType, Field, Int64Type, Schema};
use riffle_core::state::{CommittedEpoch, KEY_GROUP_FIELD};
use riffle_core::{
    Epoch, Error, Operator, OperatorContext, OperatorFactory, OperatorId, OperatorState,
    RecordBatch, Result, StreamSchema,
};
use riffle_operators::{AggregateSpec, UpdatingAggregateFactory};
use riffle_runtime::recovery::Recovered;
use riffle_runtime::{
    run_checkpointed, CheckpointConfig, CheckpointedRun, JobGraph, JobMetrics, RestartStrategy,
    RestoredJob, RunObserver,
};
use riffle_state::{CheckpointStore, StateRoot};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

const EVENTS: u64 = 200_000;
/// Rows of the keeper's state: three batches as the state file is read back (1024 rows
/// each at most).
const STATE_ROWS: usize = 3000;

/// The loaded checkpoint of the run's restart, as the recovery's observer saw it.
type Seen = Arc<Mutex<Option<Weak<RestoredJob>>>>;

/// Counts its rows (its state, written as `STATE_ROWS` copies of the count), slowly (a
/// millisecond a batch, so that checkpoints commit on the way); fails once, while
/// `armed`, after it heard a checkpoint commit; restores in parts, recording how many
/// batches each call had; and at the end records whether anything still holds the
/// checkpoint loaded at the restart.
struct Keeper {
    schema: StreamSchema,
    armed: Arc<AtomicBool>,
    seen: Seen,
    held_at_end: Arc<Mutex<Vec<bool>>>,
    restore_calls: Arc<Mutex<Vec<usize>>>,
}

impl OperatorFactory for Keeper {
    fn describe(&self) -> String {
        "keeper".into()
    }
    fn output_schema(&self) -> &StreamSchema {
        &self.schema
    }
    fn is_stateful(&self) -> bool {
        true
    }
    fn stable_state(&self) -> bool {
        true // so that it hears which epochs committed
    }
    fn create(&self, ctx: &OperatorContext) -> Result<Box<dyn Operator>> {
        Ok(Box::new(KeeperOp {
            rows: 0,
            committed: ctx.committed.clone(),
            restored: false,
            armed: self.armed.clone(),
            seen: self.seen.clone(),
            held_at_end: self.held_at_end.clone(),
            restore_calls: self.restore_calls.clone(),
        }))
    }
}

struct KeeperOp {
    rows: i64,
    committed: CommittedEpoch,
    restored: bool,
    armed: Arc<AtomicBool>,
    seen: Seen,
    held_at_end: Arc<Mutex<Vec<bool>>>,
    restore_calls: Arc<Mutex<Vec<usize>>>,
}

impl Operator for KeeperOp {
    fn on_batch(&mut self, _: usize, batch: RecordBatch, out: &mut Vec<RecordBatch>) -> Result<()> {
        std::thread::sleep(Duration::from_millis(1));
        if self.committed.newest().is_some() && self.armed.swap(false, Ordering::SeqCst) {
            return Err(Error::Injected("fails once, after a checkpoint".into()));
        }
        self.rows += batch.num_rows() as i64;
        out.push(batch);
        Ok(())
    }

    fn snapshot(&mut self, _: Epoch) -> Result<OperatorState> {
        let schema = Arc::new(Schema::new(vec![
            Field::new(KEY_GROUP_FIELD, DataType::UInt16, false),
            Field::new("rows", DataType::Int64, false),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(UInt16Array::from(vec![0; STATE_ROWS])),
                Arc::new(Int64Array::from(vec![self.rows; STATE_ROWS])),
            ],
        )?;
        Ok(OperatorState::of(vec![batch]))
    }

    fn restores_in_parts(&self) -> bool {
        true
    }

    fn restore(&mut self, state: OperatorState) -> Result<()> {
        self.restore_calls.lock().unwrap().push(state.batches.len());
        let batch = state.batches.first().expect("the checkpoint holds a batch");
        self.rows = (batch.column(1).as_any())
            .downcast_ref::<Int64Array>()
            .expect("rows is Int64")
            .value(0);
        self.restored = true;
        Ok(())
    }

    fn finish_restore(&mut self) -> Result<()> {
        self.restore_calls.lock().unwrap().push(0); // 0: the restore's end
        Ok(())
    }

    fn on_end(&mut self, _: &mut Vec<RecordBatch>) -> Result<()> {
        if self.restored {
            let seen = self.seen.lock().unwrap();
            let held = seen.as_ref().is_some_and(|w| w.upgrade().is_some());
            self.held_at_end.lock().unwrap().push(held);
        }
        Ok(())
    }
}

/// A run of `checkpoints` every 5 ms that restarts once, at once.
fn restarting_once(checkpoints: CheckpointConfig) -> CheckpointedRun {
    CheckpointedRun {
        checkpoints: CheckpointConfig {
            interval: Duration::from_millis(5),
            ..checkpoints
        },
        restart: RestartStrategy::FixedDelay {
            attempts: 1,
            delay: Duration::ZERO,
        },
        ..CheckpointedRun::default()
    }
}

/// Keeps a weak reference to each loaded checkpoint.
struct Watch(Seen);

impl RunObserver for Watch {
    fn recovered(&mut self, recovered: &Recovered) {
        if let Some(restored) = &recovered.restored {
            *self.0.lock().unwrap() = Some(Arc::downgrade(restored));
        }
    }
}

#[test]
fn after_a_restart_the_checkpoint_is_decoded_a_batch_at_a_time_and_then_let_go() {
    let rt = runtime();
    let (mut g, src) = peer_graph("restored-state", EVENTS);
    let seen = Seen::default();
    let held_at_end = Arc::new(Mutex::new(Vec::new()));
    let restore_calls = Arc::new(Mutex::new(Vec::new()));
    let keeper = Keeper {
        schema: g.schema(src).clone(),
        armed: Arc::new(AtomicBool::new(true)),
        seen: seen.clone(),
        held_at_end: held_at_end.clone(),
        restore_calls: restore_calls.clone(),
    };
    let k = g.operator("keeper", Arc::new(keeper), 1, &[src]).unwrap();
    let sink = CollectSinkFactory::new();
    g.sink("sink", Arc::new(sink.clone()), 1, k).unwrap();
    let store = CheckpointStore::new(StateRoot::parse("memory://").unwrap(), &g.name);
    let run = restarting_once(CheckpointConfig::default());
    let outcome = rt
        .block_on(run_checkpointed(&g, &store, run, &mut Watch(seen)))
        .unwrap();
    assert_eq!(outcome.restarts, 1, "the keeper failed once");
    // The restored subtask ran to its end with nothing holding the loaded checkpoint:
    // neither the recovery's result nor the attempt's settings.
    assert_eq!(*held_at_end.lock().unwrap(), [false]);
    // One decoded batch per call, never the whole state at once; then the end.
    assert_eq!(*restore_calls.lock().unwrap(), [1, 1, 1, 0]);
    let rows: usize = sink.batches().iter().map(|b| b.num_rows()).sum();
    assert_eq!(rows as u64, EVENTS, "exactly once through the restart");
}

/// Passes its rows on, slowly (a millisecond a batch); fails once, while `armed`, after
/// it heard epoch `after` commit. Its state is one row, which takes `restore_for` to
/// restore.
struct Tripwire {
    schema: StreamSchema,
    armed: Arc<AtomicBool>,
    after: u64,
    restore_for: Duration,
}

impl OperatorFactory for Tripwire {
    fn describe(&self) -> String {
        "tripwire".into()
    }
    fn output_schema(&self) -> &StreamSchema {
        &self.schema
    }
    fn is_stateful(&self) -> bool {
        true
    }
    fn stable_state(&self) -> bool {
        true // so that it hears which epochs committed
    }
    fn create(&self, ctx: &OperatorContext) -> Result<Box<dyn Operator>> {
        Ok(Box::new(TripwireOp {
            committed: ctx.committed.clone(),
            armed: self.armed.clone(),
            after: self.after,
            restore_for: self.restore_for,
        }))
    }
}

struct TripwireOp {
    committed: CommittedEpoch,
    armed: Arc<AtomicBool>,
    after: u64,
    restore_for: Duration,
}

impl Operator for TripwireOp {
    fn on_batch(&mut self, _: usize, batch: RecordBatch, out: &mut Vec<RecordBatch>) -> Result<()> {
        std::thread::sleep(Duration::from_millis(1));
        let heard = self.committed.newest().is_some_and(|e| e.0 >= self.after);
        if heard && self.armed.swap(false, Ordering::SeqCst) {
            return Err(Error::Injected("fails once, after checkpoints".into()));
        }
        out.push(batch);
        Ok(())
    }

    fn snapshot(&mut self, _: Epoch) -> Result<OperatorState> {
        let schema = Arc::new(Schema::new(vec![Field::new(
            KEY_GROUP_FIELD,
            DataType::UInt16,
            false,
        )]));
        let batch = RecordBatch::try_new(schema, vec![Arc::new(UInt16Array::from(vec![0]))])?;
        Ok(OperatorState::of(vec![batch]))
    }

    fn restore(&mut self, _: OperatorState) -> Result<()> {
        std::thread::sleep(self.restore_for);
        Ok(())
    }
}

/// Remembers the epoch each recovery restored.
struct RestoredEpochs(Arc<Mutex<Vec<Epoch>>>);

impl RunObserver for RestoredEpochs {
    fn recovered(&mut self, recovered: &Recovered) {
        if let Some(restored) = &recovered.restored {
            self.0.lock().unwrap().push(restored.epoch);
        }
    }
}

/// The last count per id over `batches`, in order.
fn last_count(batches: &[RecordBatch], id: &str, n: &str) -> HashMap<i64, i64> {
    let mut last = HashMap::new();
    for b in batches {
        let ids = b.column_by_name(id).unwrap().as_primitive::<Int64Type>();
        let counts = b.column_by_name(n).unwrap().as_primitive::<Int64Type>();
        for r in 0..b.num_rows() {
            last.insert(ids.value(r), counts.value(r));
        }
    }
    last
}

#[test]
fn after_a_restart_the_aggregate_goes_on_from_the_restored_files_and_its_next_checkpoint_holds_what_changed(
) {
    let rt = runtime();
    let mut g = JobGraph::new("continued-chain");
    let src = g
        .source(
            "peer",
            Arc::new(PeerSourceFactory::new(EVENTS, 200)),
            2,
            crate::common::no_delay(),
        )
        .unwrap();
    let agg =
        UpdatingAggregateFactory::new(g.schema(src), &["id"], vec![AggregateSpec::count_star("n")])
            .unwrap();
    let a = g.operator("agg", Arc::new(agg), 2, &[src]).unwrap();
    let tripwire = Tripwire {
        schema: g.schema(a).clone(),
        armed: Arc::new(AtomicBool::new(true)),
        after: 4,
        restore_for: Duration::ZERO,
    };
    let t = g.operator("tripwire", Arc::new(tripwire), 2, &[a]).unwrap();
    let sink = CollectSinkFactory::new();
    g.sink("sink", Arc::new(sink.clone()), 2, t).unwrap();
    let store = CheckpointStore::new(StateRoot::parse("memory://").unwrap(), &g.name);
    let run = restarting_once(CheckpointConfig {
        retain: 1000, // the restored epoch's manifest is read at the end
        ..CheckpointConfig::default()
    });
    let restored = Arc::new(Mutex::new(Vec::new()));
    let outcome = rt
        .block_on(run_checkpointed(
            &g,
            &store,
            run,
            &mut RestoredEpochs(restored.clone()),
        ))
        .unwrap();
    assert_eq!(outcome.restarts, 1, "the tripwire failed once");
    let restored = restored.lock().unwrap()[0];
    assert!(restored.0 >= 4, "restored epoch {restored}");

    // The first checkpoint after the restart references the aggregate's restored
    // files and writes only the groups changed since.
    let first = outcome.reports[1].committed[0];
    assert!(
        first > restored,
        "epoch {first} after the restored {restored}"
    );
    let files_of = |epoch: Epoch| {
        let manifest = rt.block_on(store.read_manifest(epoch)).unwrap().unwrap();
        let agg = manifest
            .operators
            .iter()
            .find(|o| o.operator == "agg")
            .unwrap();
        agg.subtasks
            .iter()
            .flat_map(|s| s.files.clone())
            .collect::<Vec<_>>()
    };
    let at_restore: u64 = files_of(restored).iter().map(|f| f.bytes).sum();
    let after = files_of(first);
    let (written, reused): (Vec<_>, Vec<_>) = after
        .iter()
        .partition(|f| riffle_state::layout::written_by(&f.path, first));
    let paths: HashSet<String> = files_of(restored).into_iter().map(|f| f.path).collect();
    assert!(
        !reused.is_empty() && reused.iter().all(|f| paths.contains(&f.path)),
        "epoch {first} references the restored files: {after:?}"
    );
    let written_bytes: u64 = written.iter().map(|f| f.bytes).sum();
    assert!(
        written_bytes < at_restore,
        "epoch {first} wrote {written_bytes} bytes, the restored state is {at_restore}"
    );

    // Exactly once through the restart, and the last checkpoint, a chain started before
    // it, holds every group with its final count.
    let output = sink.batches();
    let want = last_count(&output, "id", "n");
    assert_eq!(want.values().sum::<i64>(), EVENTS as i64);
    let newest = *outcome.reports[1].committed.last().unwrap();
    let manifest = rt.block_on(store.read_manifest(newest)).unwrap().unwrap();
    let state = rt.block_on(RestoredJob::load(&store, &manifest)).unwrap();
    let batches: Vec<RecordBatch> = state.operators[&OperatorId("agg".into())]
        .subtasks
        .values()
        .flat_map(|s| s.decode().unwrap().batches)
        .collect();
    let count = (batches[0].schema().fields().iter())
        .map(|f| f.name().clone())
        .find(|n| n.starts_with("n__"))
        .expect("the count's state column");
    assert_eq!(last_count(&batches, "id", &count), want);
}

#[test]
fn a_restore_longer_than_the_checkpoint_timeout_is_no_failed_checkpoint() {
    let rt = runtime();
    let (mut g, src) = peer_graph("slow-restore", EVENTS);
    let slow = Tripwire {
        schema: g.schema(src).clone(),
        armed: Arc::new(AtomicBool::new(true)),
        after: 1,
        restore_for: Duration::from_millis(800),
    };
    let s = g.operator("slow", Arc::new(slow), 1, &[src]).unwrap();
    let sink = CollectSinkFactory::new();
    g.sink("sink", Arc::new(sink.clone()), 1, s).unwrap();
    let store = CheckpointStore::new(StateRoot::parse("memory://").unwrap(), &g.name);
    // The restore takes eight timeouts: were its epochs started, the ones in flight
    // would time out one after another and fail the job (one tolerated).
    let run = restarting_once(CheckpointConfig {
        timeout: Duration::from_millis(100),
        tolerable_failures: 1,
        ..CheckpointConfig::default()
    });
    let attempts = Attempts::default();
    let outcome = rt
        .block_on(run_checkpointed(&g, &store, run, &mut attempts.clone()))
        .unwrap();
    assert_eq!(outcome.restarts, 1, "the operator failed once");
    let failed: usize = (outcome.reports.iter()).map(|r| r.errors.len()).sum();
    assert_eq!(failed, 0, "{:?}", outcome.reports);
    let rows: usize = sink.batches().iter().map(|b| b.num_rows()).sum();
    assert_eq!(rows as u64, EVENTS, "exactly once through the restart");
    // Each attempt's metrics say how long its restore took: the first restored
    // nothing, the second took the operator's 800 ms (and is done restoring).
    let restore_of = |attempt: &Arc<JobMetrics>| {
        let totals = attempt.operator_totals();
        let slow = totals.iter().find(|t| t.operator.0 == "slow").unwrap();
        (slow.restore_time, attempt.subtasks_restoring())
    };
    let attempts = attempts.0.lock().unwrap();
    assert_eq!(restore_of(&attempts[0]), (None, 0));
    let (took, restoring) = restore_of(&attempts[1]);
    assert!(
        took.is_some_and(|t| t >= Duration::from_millis(800)),
        "{took:?}"
    );
    assert_eq!(restoring, 0);
}

/// Keeps each attempt's live metrics.
#[derive(Clone, Default)]
struct Attempts(Arc<Mutex<Vec<Arc<JobMetrics>>>>);

impl RunObserver for Attempts {
    fn started(&mut self, metrics: &Arc<JobMetrics>) {
        self.0.lock().unwrap().push(metrics.clone());
    }
}
