//! Starting a job with its checkpoint coordinator: exactly-once settings, and the
//! coordinator on a thread of its own, fed by the job's acks (and, on worker 0 of a job
//! spread over workers, by the other workers' acks and barrier streams).

use super::{start, JobConfig};
use crate::error::{RuntimeError, RuntimeResult};
use crate::graph::JobGraph;
use crate::handle::JobHandle;
use std::sync::Arc;

/// Starts `graph` with a [`CheckpointCoordinator`](crate::CheckpointCoordinator) taking
/// checkpoints into `store`, exactly-once (sinks publish only committed epochs, and a
/// bounded run ends with an end-of-input checkpoint). The coordinator's report resolves
/// when the job's tasks end.
///
/// # Errors
/// As [`start`].
pub fn start_with_checkpoints(
    graph: &JobGraph,
    config: &JobConfig,
    store: riffle_state::CheckpointStore,
    checkpoints: crate::CheckpointConfig,
    listeners: Vec<Arc<dyn crate::CheckpointListener>>,
) -> RuntimeResult<(JobHandle, tokio::task::JoinHandle<crate::CheckpointReport>)> {
    let config = exactly_once(config, checkpoints.generation);
    let mut handle = start(graph, &config, true)?;
    let report = attach_coordinator(
        graph,
        &config,
        &mut handle,
        (store, checkpoints, listeners),
        Vec::new(),
    )?;
    Ok((handle, report))
}

/// `config` for an exactly-once run of `generation`: sinks publish only what
/// checkpoints commit, and acks are collected.
pub fn exactly_once(config: &JobConfig, generation: u64) -> JobConfig {
    JobConfig {
        exactly_once: true,
        generation,
        ..config.clone()
    }
}

/// Where checkpoints go, how they are taken, and who hears of them.
pub type CheckpointTarget = (
    riffle_state::CheckpointStore,
    crate::CheckpointConfig,
    Vec<Arc<dyn crate::CheckpointListener>>,
);

/// Starts the checkpoint coordinator of a job started with acks collected. Of a job
/// spread over workers (run on worker 0), `remote_sources` carry barriers to the
/// other workers' source subtasks, whose acks arrive through
/// [`JobHandle::take_remote_inputs`].
///
/// # Errors
/// The acks were not collected, or the coordinator's thread could not start.
pub fn attach_coordinator(
    graph: &JobGraph,
    config: &JobConfig,
    handle: &mut JobHandle,
    (store, checkpoints, listeners): CheckpointTarget,
    remote_sources: Vec<tokio::sync::mpsc::UnboundedSender<riffle_core::Barrier>>,
) -> RuntimeResult<tokio::task::JoinHandle<crate::CheckpointReport>> {
    let acks = handle
        .acks
        .take()
        .ok_or_else(|| RuntimeError::Graph("acks were not collected".into()))?;
    let operators = graph
        .nodes()
        .iter()
        .filter(|n| n.is_stateful())
        .map(|n| {
            (
                n.id.clone(),
                crate::coordinator::OperatorInfo {
                    parallelism: n.parallelism,
                    max_parallelism: graph.max_parallelism,
                    stable_state: n.has_stable_state(),
                    description: Some(n.describe()),
                    output_schema: Some(n.output_columns()),
                },
            )
        })
        .collect();
    let requests = Arc::new(riffle_state::RequestCounts::default());
    let coordinator = crate::CheckpointCoordinator {
        store: store.counted(requests.clone()),
        requests,
        config: checkpoints,
        pipeline: graph.name.clone(),
        operators,
        sinks: graph.sinks(),
        task_count: handle.job_tasks,
        source_subtasks: handle.job_sources,
        plan_fingerprint: graph.fingerprint(),
        metrics: Some(handle.metrics.clone()),
        listeners,
    };
    let mut injector = handle.barrier_injector();
    injector.senders.extend(remote_sources);
    let inputs = crate::coordinator::CoordinatorInputs {
        injector,
        acks,
        task_signals: handle.task_signals.take(),
        stopper: handle.stopper(),
        savepoints: config.savepoints.clone(),
        restored_chains: handle.restored_chains.take(),
    };
    spawn_coordinator(coordinator, inputs)
}

/// Runs the coordinator on a thread of its own: on a worker of the job's runtime it
/// waits behind busy tasks at every await (each state file write and fsync), which
/// stretched a 20 MiB checkpoint to seconds on 2 cores. The handle resolves to its report.
fn spawn_coordinator(
    coordinator: crate::coordinator::CheckpointCoordinator,
    inputs: crate::coordinator::CoordinatorInputs,
) -> RuntimeResult<tokio::task::JoinHandle<crate::CheckpointReport>> {
    let (done, report) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("riffle-checkpoints".into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            let report = match runtime {
                Ok(runtime) => runtime.block_on(coordinator.run(inputs)),
                Err(e) => crate::CheckpointReport {
                    errors: vec![format!("cannot start the checkpoint coordinator: {e}")],
                    ..Default::default()
                },
            };
            let _ = done.send(report);
        })
        .map_err(|e| RuntimeError::transient(format!("cannot start the checkpoint thread: {e}")))?;
    Ok(tokio::spawn(async move {
        report.await.unwrap_or_else(|_| crate::CheckpointReport {
            errors: vec!["the checkpoint coordinator stopped unexpectedly".into()],
            ..Default::default()
        })
    }))
}
