//! The restart benchmark: how long a job with large state takes from a restart to its
//! first output row.
//!
//! A peer source feeds tumbling windows keyed by the unique `id`, so every event is one
//! row of state; the watermark trails by the whole span, so all 64 windows stay open.
//! Phase 1 pauses the sources after `keys` events, takes a savepoint that holds all of
//! them (its epoch is the first checkpoint, so every row is written: a full snapshot,
//! then copied into `savepoints/`), and stops the job. Phase 2 is the restore from that
//! savepoint: recovery reads and verifies it, operators rebuild their state, the sources
//! go on, and the watermark passes the oldest window, which fires — the first output.

use crate::error::BenchError;
use riffle_connectors::peer::PausePoint;
use riffle_connectors::sinks::BlackholeSinkFactory;
use riffle_connectors::PeerSourceFactory;
use riffle_operators::{AggregateFunction, AggregateSpec, WindowAggregateFactory, WindowSpec};
use riffle_runtime::job::{self, JobConfig};
use riffle_runtime::recovery::{recover, recover_from, ExplicitRestore, RestoreFrom};
use riffle_runtime::savepoint::request_savepoint;
use riffle_runtime::{
    savepoint_channel, CheckpointConfig, CheckpointEvent, JobGraph, RecordingListener,
    RuntimeError, RuntimeResult, WatermarkStrategy,
};
use riffle_state::{CheckpointStore, StateRoot};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a restart with large state cost.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RestartMeasured {
    /// Keys (rows) of window state in the checkpoint.
    pub keys: u64,
    /// Bytes of the checkpoint's state files (Snappy Parquet).
    pub state_bytes: u64,
    /// Bytes of the same state as Arrow arrays in memory, once decoded.
    #[serde(default)]
    pub state_memory_bytes: u64,
    /// Duration of the checkpoint that held the state (trigger to COMMITTED).
    pub checkpoint_seconds: f64,
    /// The savepoint: from the request to its manifest (the checkpoint above, then the
    /// copy of its files into `savepoints/`).
    #[serde(default)]
    pub savepoint_seconds: f64,
    /// Recovery: reading and checking the savepoint's files (size, CRC32C, row count;
    /// its subtasks decode them as they restore, within `first_output_seconds`), and
    /// registering it as an epoch.
    pub load_seconds: f64,
    /// From the start of recovery to the first row at the sink.
    pub first_output_seconds: f64,
}

/// The savepoint's label.
const LABEL: &str = "restart-bench";

/// Event time per peer event per subtask at parallelism `p`: `p` × 10 µs.
fn event_nanos(parallelism: u64) -> u64 {
    parallelism * 10_000
}

fn graph(
    keys_per_subtask: u64,
    parallelism: usize,
    pause: Option<PausePoint>,
) -> Result<JobGraph, BenchError> {
    let p = parallelism as u64;
    // 64 windows over the paused events; the watermark trails by the whole span, so none
    // fires before the pause, and events one window (plus a little) past it fire the
    // oldest, holding 1/64 of the state.
    let span = keys_per_subtask * event_nanos(p);
    let window_nanos = (span / 64).max(1_000_000) / 1_000_000 * 1_000_000;
    let window = Duration::from_nanos(window_nanos);
    let tail = (window_nanos + 50_000_000) / event_nanos(p) + 1;
    let mut source = PeerSourceFactory::new((keys_per_subtask + tail) * p, 8192);
    if let Some(pause) = pause {
        source = source.paused_at(pause);
    }
    let mut g = JobGraph::new("restart-bench");
    let watermarks = WatermarkStrategy {
        max_out_of_orderness: Duration::from_nanos(span),
        idle_timeout: None,
    };
    let src = g.source("peer", Arc::new(source), parallelism, watermarks)?;
    let window = WindowAggregateFactory::new(
        g.schema(src),
        &["id"],
        WindowSpec::tumbling(window),
        vec![
            AggregateSpec::count_star("cnt"),
            AggregateSpec::new(AggregateFunction::Sum, "v", "sum_v"),
        ],
    )?;
    let w = g.operator("window", Arc::new(window), parallelism, &[src])?;
    g.sink("sink", Arc::new(BlackholeSinkFactory), parallelism, w)?;
    Ok(g)
}

fn bench_error(e: BenchError) -> RuntimeError {
    RuntimeError::Graph(e.to_string())
}

/// Checkpoints `keys` rows of state into `state_dir`, stops, and times the restart.
///
/// # Errors
/// The job or its storage failed.
pub fn measure_restart(
    runtime: &tokio::runtime::Runtime,
    keys: u64,
    parallelism: usize,
    state_dir: &std::path::Path,
) -> RuntimeResult<RestartMeasured> {
    let keys_per_subtask = keys.div_ceil(parallelism as u64);
    let root = StateRoot::parse(&state_dir.display().to_string())
        .map_err(|e| RuntimeError::transient(e.to_string()))?;
    let result = runtime.block_on(async {
        // Phase 1: build the state, checkpoint it, stop.
        let reached = Arc::new(AtomicUsize::new(0));
        let pause = PausePoint {
            after: keys_per_subtask,
            reached: reached.clone(),
        };
        let first = graph(keys_per_subtask, parallelism, Some(pause)).map_err(bench_error)?;
        let store = CheckpointStore::new(root.clone(), &first.name);
        let recovered = recover(
            &store,
            &first,
            riffle_runtime::recovery::RecoveryOptions {
                start_empty: true,
                ..Default::default()
            },
        )
        .await?;
        let listener = Arc::new(RecordingListener::default());
        // No periodic checkpoint: the savepoint's epoch is the first, a full snapshot.
        let checkpoints = CheckpointConfig {
            interval: Duration::from_secs(3600),
            timeout: Duration::from_secs(600),
            generation: recovered.generation,
            first_epoch: recovered.next_epoch,
            ..CheckpointConfig::default()
        };
        let (savepoints, requests) = savepoint_channel();
        let config = JobConfig {
            savepoints: Some(requests),
            ..JobConfig::default()
        };
        let (handle, report) = job::start_with_checkpoints(
            &first,
            &config,
            store.clone(),
            checkpoints,
            vec![listener.clone()],
        )?;
        while reached.load(Ordering::SeqCst) < parallelism {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let asked = Instant::now();
        let done = request_savepoint(&savepoints, Some(LABEL.into()), false, false)
            .await
            .map_err(RuntimeError::transient)?;
        let savepoint = asked.elapsed();
        let epoch = done.epoch;
        let checkpoint = listener
            .events()
            .iter()
            .find_map(|e| match e {
                CheckpointEvent::Completed {
                    epoch: e, duration, ..
                } if *e == epoch => Some(*duration),
                _ => None,
            })
            .unwrap_or_default();
        handle
            .stopper()
            .fail("benchmark: stopping after the checkpoint".into());
        let _ = handle.wait().await;
        let _ = report.await;
        let manifest = store
            .read_manifest(epoch)
            .await
            .map_err(|e| RuntimeError::transient(e.to_string()))?
            .ok_or_else(|| RuntimeError::bug(format!("epoch {epoch} has no manifest")))?;
        let state_bytes = manifest.files().map(|f| f.bytes).sum();

        // Phase 2: the restore from the savepoint.
        let second = graph(keys_per_subtask, parallelism, None).map_err(bench_error)?;
        let t0 = Instant::now();
        let from = ExplicitRestore {
            from: RestoreFrom::Savepoint {
                store: store.clone(),
                label: LABEL.into(),
            },
            allow_non_restored: false,
        };
        let recovered = recover_from(&store, &second, &from, false).await?;
        let load = t0.elapsed();
        let restored = recovered.restored.clone();
        let config = JobConfig {
            restore: recovered.restored.clone(),
            ..JobConfig::default()
        };
        let checkpoints = CheckpointConfig {
            interval: Duration::from_secs(3600),
            generation: recovered.generation,
            first_epoch: recovered.next_epoch,
            ..CheckpointConfig::default()
        };
        drop(recovered);
        let (handle, report) =
            job::start_with_checkpoints(&second, &config, store, checkpoints, vec![])?;
        while handle.metrics.sink_rows.load(Ordering::Relaxed) == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let first_output = t0.elapsed();
        // The restored state's size decoded, as the subtasks decode it (after the
        // timing: it decodes every file once more).
        let mut state_memory_bytes = 0u64;
        for (id, operator) in restored.iter().flat_map(|r| r.operators.iter()) {
            for batch in operator.subtasks.values().flat_map(|files| files.batches()) {
                let batch = batch.map_err(|message| RuntimeError::Restore {
                    operator: id.clone(),
                    message,
                })?;
                state_memory_bytes += batch.get_array_memory_size() as u64;
            }
        }
        drop(restored);
        handle.stopper().fail("benchmark: done".into());
        let _ = handle.wait().await;
        let _ = report.await;
        Ok(RestartMeasured {
            keys: keys_per_subtask * parallelism as u64,
            state_bytes,
            state_memory_bytes,
            checkpoint_seconds: checkpoint.as_secs_f64(),
            savepoint_seconds: savepoint.as_secs_f64(),
            load_seconds: load.as_secs_f64(),
            first_output_seconds: first_output.as_secs_f64(),
        })
    });
    let _ = std::fs::remove_dir_all(state_dir);
    result
}
