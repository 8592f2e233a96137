//! After a restart, the checkpoint the job restored from is let go once its subtasks
//! have their parts: it does not stay in memory for the rest of the attempt; and an
//! operator that restores in parts gets it one decoded batch at a time
//! (docs/engine.md, "State beyond memory").

use crate::common::runtime;
use riffle_connectors::sinks::CollectSinkFactory;
use riffle_connectors::PeerSourceFactory;
use riffle_core::arrow::array::{Int64Array, UInt16Array};
use riffle_core::arrow::datatypes::{DataType, Field, Schema};
use riffle_core::state::{CommittedEpoch, KEY_GROUP_FIELD};
use riffle_core::{
    Epoch, Error, Operator, OperatorContext, OperatorFactory, OperatorState, RecordBatch, Result,
    StreamSchema,
};
use riffle_runtime::recovery::Recovered;
use riffle_runtime::{
    run_checkpointed, CheckpointConfig, CheckpointedRun, JobGraph, RestartStrategy, RestoredJob,
    RunObserver, WatermarkStrategy,
};
use riffle_state::{CheckpointStore, StateRoot};
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
        Ok(OperatorState {
            batches: vec![batch],
        })
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

    fn on_end(&mut self, _: &mut Vec<RecordBatch>) -> Result<()> {
        if self.restored {
            let seen = self.seen.lock().unwrap();
            let held = seen.as_ref().is_some_and(|w| w.upgrade().is_some());
            self.held_at_end.lock().unwrap().push(held);
        }
        Ok(())
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
    let mut g = JobGraph::new("restored-state");
    let src = g
        .source(
            "peer",
            Arc::new(PeerSourceFactory::new(EVENTS, 500)),
            1,
            WatermarkStrategy::default(),
        )
        .unwrap();
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
    let run = CheckpointedRun {
        checkpoints: CheckpointConfig {
            interval: Duration::from_millis(5),
            ..CheckpointConfig::default()
        },
        restart: RestartStrategy::FixedDelay {
            attempts: 1,
            delay: Duration::ZERO,
        },
        ..CheckpointedRun::default()
    };
    let outcome = rt
        .block_on(run_checkpointed(&g, &store, run, &mut Watch(seen)))
        .unwrap();
    assert_eq!(outcome.restarts, 1, "the keeper failed once");
    // The restored subtask ran to its end with nothing holding the loaded checkpoint:
    // neither the recovery's result nor the attempt's settings.
    assert_eq!(*held_at_end.lock().unwrap(), [false]);
    // One decoded batch per call, never the whole state at once.
    assert_eq!(*restore_calls.lock().unwrap(), [1, 1, 1]);
    let rows: usize = sink.batches().iter().map(|b| b.num_rows()).sum();
    assert_eq!(rows as u64, EVENTS, "exactly once through the restart");
}
