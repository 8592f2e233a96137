//! One simulated run of the pipeline: what a process does with its state root, minus
//! the dataflow. It recovers as `riffle run` does, then takes epochs as the coordinator
//! does — one in flight, a failed epoch's sink output carried into the next, more than
//! [`TOLERABLE_FAILURES`] failures in a row fail the run — and commits each with the
//! real commit protocol.

use super::sink::SimSink;
use super::world::{Shared, PIPELINE};
use rand::Rng;
use riffle_core::arrow::array::{UInt16Array, UInt64Array};
use riffle_core::arrow::datatypes::{DataType, Field, Schema};
use riffle_core::state::KEY_GROUP_FIELD;
use riffle_core::{
    Epoch, OperatorContext, OperatorId, OperatorState, RecordBatch, Source, SourceFactory,
    StreamSchema,
};
use riffle_runtime::coordinator::commit::{EpochCommitter, EpochOutcome, SinkCommits};
use riffle_runtime::recovery::{recover, RecoveryOptions};
use riffle_runtime::restore::StateOwner;
use riffle_runtime::{JobGraph, RestoredState, RuntimeError, WatermarkStrategy};
use riffle_state::manifest::SubtaskEntry;
use riffle_state::{CheckpointStore, Manifest, OperatorEntry};
use std::collections::HashMap;
use std::sync::Arc;

/// Rows the source holds: 0, 1, … SOURCE_ROWS - 1.
pub const SOURCE_ROWS: u64 = 40;

/// Failed epochs in a row a run tolerates (as `CheckpointConfig`'s default).
const TOLERABLE_FAILURES: usize = 3;

/// Committed epochs kept: few, so that GC runs often.
const RETAIN: usize = 2;

/// How a run ended.
#[derive(Debug, Clone)]
pub enum ActorEnd {
    /// It committed the epoch holding the source's last row.
    Done,
    /// A newer run owns the state.
    Fenced,
    /// Recovery refused, or the run failed (the supervisor would start a new one).
    Failed(String),
}

/// The source's description in the plan; never run.
struct CountingSource(StreamSchema);

impl SourceFactory for CountingSource {
    fn describe(&self) -> String {
        format!("counting(0..{SOURCE_ROWS})")
    }

    fn output_schema(&self) -> &StreamSchema {
        &self.0
    }

    fn create(&self, _: &OperatorContext) -> riffle_core::Result<Box<dyn Source>> {
        Err(riffle_core::Error::plan(
            "the simulation reads the source itself",
        ))
    }
}

/// The plan every run has: `src` → `out`.
pub fn graph(sink: Arc<SimSink>) -> JobGraph {
    let mut graph = JobGraph::new(PIPELINE);
    let schema = StreamSchema::with_timestamp(vec![Field::new("n", DataType::UInt64, false)]);
    let no_delay = WatermarkStrategy {
        max_out_of_orderness: std::time::Duration::ZERO,
        idle_timeout: None,
    };
    let src = graph
        .source("src", Arc::new(CountingSource(schema)), 1, no_delay)
        .expect("source");
    graph.sink("out", sink, 1, src).expect("sink");
    graph
}

/// The source's state: the offset of its next row.
fn offset_state(offset: u64) -> OperatorState {
    let schema = Arc::new(Schema::new(vec![
        Field::new(KEY_GROUP_FIELD, DataType::UInt16, false),
        Field::new("offset", DataType::UInt64, false),
    ]));
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(UInt16Array::from(vec![0])),
            Arc::new(UInt64Array::from(vec![offset])),
        ],
    )
    .expect("offset batch");
    OperatorState::of(vec![batch])
}

fn restored_offset(state: Option<RestoredState>) -> u64 {
    state
        .and_then(|s| s.batches().next())
        .map(|b| b.expect("a checked state file decodes"))
        .and_then(|b| {
            b.column_by_name("offset")
                .and_then(|c| c.as_any().downcast_ref::<UInt64Array>().map(|a| a.value(0)))
        })
        .unwrap_or(0)
}

/// Runs actor `id` until it ends.
pub async fn run_actor(
    id: usize,
    store: CheckpointStore,
    graph: Arc<JobGraph>,
    sink: Arc<SimSink>,
    world: Shared,
) -> ActorEnd {
    let recovered = match recover(&store, &graph, RecoveryOptions::default()).await {
        Ok(r) => r,
        Err(RuntimeError::Fenced { .. }) => return ActorEnd::Fenced,
        Err(e) => return ActorEnd::Failed(e.to_string()),
    };
    let generation = recovered.generation;
    let src = OperatorId("src".into());
    let state = match &recovered.restored {
        Some(job) => {
            match job.state_for(
                &src,
                0,
                1,
                graph.max_parallelism,
                StateOwner::Source {
                    can_rescale: false,
                    from_every_subtask: false,
                },
            ) {
                Ok(state) => state,
                Err(e) => return ActorEnd::Failed(e),
            }
        }
        None => None,
    };
    let mut offset = restored_offset(state);
    world.lock().trace(format!(
        "a{id} g{generation} resumes at row {offset} from {:?}, next epoch {}",
        recovered.plan.restore, recovered.next_epoch
    ));
    let sinks: HashMap<String, Arc<dyn riffle_core::SinkFactory>> = graph.sinks();
    let committer = EpochCommitter {
        store: &store,
        sinks: &sinks,
        retain: RETAIN,
        sink_commits: SinkCommits::Inline,
        deadline: None,
        requests: None,
    };
    let mut epoch = recovered.next_epoch;
    let mut carried = Vec::new();
    let mut failures = 0;
    loop {
        // The barrier: the source's rows since the last one reach the sink, which
        // stages them; the source moves on whatever becomes of the epoch.
        let step = world.lock().rng.random_range(0..=4);
        let end = (offset + step).min(SOURCE_ROWS);
        let mut committables = std::mem::take(&mut carried);
        if end > offset {
            committables.push(sink.stage(generation, epoch, offset..end));
        }
        offset = end;
        let outcome = match store
            .write_state(epoch, generation, "src", 0, &offset_state(offset))
            .await
        {
            Err(e) => Err((EpochOutcome::Retry, e.to_string())),
            Ok(written) => {
                let files = written.into_iter().flat_map(|w| w.files).collect();
                let manifest = manifest(&graph, generation, epoch, files, committables.clone());
                committer
                    .commit_epoch(&manifest)
                    .await
                    .map_err(|e| (e.outcome, e.reason))
            }
        };
        match outcome {
            Ok(()) if offset == SOURCE_ROWS => return ActorEnd::Done,
            Ok(()) => failures = 0,
            Err((EpochOutcome::Retry, why)) => {
                world
                    .lock()
                    .trace(format!("a{id} g{generation} epoch {epoch} failed: {why}"));
                carried = committables;
                failures += 1;
                if failures > TOLERABLE_FAILURES {
                    return ActorEnd::Failed(format!("{failures} epochs failed in a row"));
                }
            }
            Err((EpochOutcome::MustRecover, why)) => {
                return ActorEnd::Failed(format!("epoch {epoch} must be recovered: {why}"))
            }
            Err((EpochOutcome::Fenced { .. }, _)) => return ActorEnd::Fenced,
        }
        epoch = Epoch(epoch.0 + 1);
    }
}

fn manifest(
    graph: &JobGraph,
    generation: u64,
    epoch: Epoch,
    files: Vec<riffle_state::FileEntry>,
    committables: Vec<riffle_core::Committable>,
) -> Manifest {
    let mut m = Manifest::prepared(PIPELINE, generation, epoch, 0);
    m.plan_fingerprint = graph.fingerprint();
    m.operators.push(OperatorEntry {
        operator: "src".into(),
        parallelism: 1,
        max_parallelism: graph.max_parallelism,
        subtasks: vec![SubtaskEntry {
            subtask: 0,
            files,
            watermark: None,
        }],
        description: None,
        output_schema: None,
    });
    m.sink_committables = committables;
    m
}
