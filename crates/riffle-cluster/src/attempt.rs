//! One attempt of a worker, as it runs: its subtasks started, its streams to other
//! workers shipped, and on worker 0 the checkpoint coordinator wired to every worker
//! (docs/cluster.md, "One checkpoint across workers"). Which attempt runs, and what
//! follows it, is [`crate::worker`]'s.

use crate::error::{ClusterError, ClusterResult};
use crate::links::{self, Peer};
use crate::protocol::{Attempt, FromCoordinator, Hello, StreamKind};
use crate::service::{CoordinatorInbox, LocalAttempt};
use crate::worker::{Peers, WorkerJob, WorkerOutcome};
use riffle_runtime::job::{self, attach_coordinator, exactly_once, JobHandle, JobStopper};
use riffle_runtime::supervisor::{finished, RunObserver};
use riffle_runtime::{
    CheckpointConfig, CheckpointEvent, CheckpointListener, CheckpointReport, FileReuse, JobConfig,
    RestoredJob, RuntimeError,
};
use std::sync::{Arc, Mutex};
use tokio::task::JoinHandle;

/// On worker 0: tells the other workers of each committed epoch, so they reuse state
/// files as one process does (docs/cluster.md, "One checkpoint across workers").
#[derive(Default)]
struct CommitNotices(Vec<tokio::sync::mpsc::UnboundedSender<FromCoordinator>>);

impl CheckpointListener for CommitNotices {
    fn on_event(&self, event: &CheckpointEvent) {
        if let CheckpointEvent::Completed { epoch, .. } = event {
            for worker in &self.0 {
                let _ = worker.send(FromCoordinator::Committed(epoch.0));
            }
        }
    }
}

/// On worker 0: the sender other workers' acks streams feed, relayed into the
/// coordinator's `acks` by a task among `shipping`.
///
/// The coordinator reports once every sender of its acks is gone. The inbox holds one
/// until every worker's acks stream arrived, and a stream holds one while it is open;
/// if the attempt failed before then, the coordinator would wait for ever. Aborting the
/// relay with the attempt's other shipments lets it go.
fn relay_acks(
    acks: tokio::sync::mpsc::UnboundedSender<riffle_runtime::SnapshotAck>,
    shipping: &mut Shipments,
) -> tokio::sync::mpsc::UnboundedSender<riffle_runtime::SnapshotAck> {
    let (relay, mut relayed) = tokio::sync::mpsc::unbounded_channel();
    shipping.0.push(tokio::spawn(async move {
        while let Some(ack) = relayed.recv().await {
            if acks.send(ack).is_err() {
                break;
            }
        }
    }));
    relay
}

/// Streams this worker sends; aborted if the attempt fails, awaited if it ends well
/// (their last messages, ends of input and final acks, must reach their workers).
#[derive(Default)]
struct Shipments(Vec<JoinHandle<()>>);

impl Drop for Shipments {
    fn drop(&mut self) {
        for s in &self.0 {
            s.abort();
        }
    }
}

/// Runs this worker's part of `attempt`, restored from `restored`, to its end.
pub(crate) async fn run_attempt(
    job: &WorkerJob<'_>,
    observer: &mut dyn RunObserver,
    mut peers: Peers,
    (attempt, restored): (Attempt, Option<Arc<RestoredJob>>),
) -> ClusterResult<WorkerOutcome> {
    let WorkerJob {
        graph,
        run,
        options,
        service,
        ..
    } = *job;
    let placement = options.placement;
    let me = placement.worker;
    let generation = attempt.generation;
    let mut config = exactly_once(
        &JobConfig {
            restore: restored,
            placement,
            ..run.job.clone()
        },
        generation,
    );
    let mut handle = job::start(graph, &config, true)?;
    // Each subtask holds its part now: this worker's share of the checkpoint is freed as
    // they restore (docs/engine.md, "State beyond memory").
    config.restore = None;
    let remote = std::mem::take(&mut handle.remote);
    let (acks_in, signals_in) = handle.take_remote_inputs();
    let stopper = handle.stopper();
    let mut shipping = Shipments::default();
    let inbox = match (me, acks_in, signals_in) {
        (0, Some(acks), Some(signals)) => Some(CoordinatorInbox {
            acks: relay_acks(acks, &mut shipping),
            signals,
            expected: placement.workers - 1,
        }),
        _ => None,
    };
    service.start_attempt(Arc::new(LocalAttempt {
        generation,
        incoming: Mutex::new(remote.incoming.into_iter().collect()),
        inbox: Mutex::new(inbox),
        barriers: handle.barrier_injector(),
        stopper: stopper.clone(),
        metrics: handle.metrics.clone(),
    }));
    let sent = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let streams = remote.outgoing.len();
    for (key, worker, receiver) in remote.outgoing {
        let peer = peers.get(worker).await?.clone();
        let hello = links::hello(
            &job.options.secret,
            generation,
            me,
            StreamKind::Channel(key),
        );
        shipping.0.push(links::ship_channel(
            peer,
            hello,
            receiver,
            stopper.clone(),
            sent.clone(),
        ));
    }
    let report = if me == 0 {
        let target = (&mut handle, &mut shipping, &stopper);
        Some(coordinate(job, &mut peers, &attempt, &config, target).await?)
    } else {
        let peer = peers.get(0).await?.clone();
        let hello = links::hello(&job.options.secret, generation, me, StreamKind::Acks);
        shipping
            .0
            .push(ship_own_acks(job, peer, hello, &mut handle, &stopper)?);
        None
    };
    observer.started(&handle.metrics);
    let summary = handle.wait().await;
    if summary.is_ok() {
        for shipment in std::mem::take(&mut shipping.0) {
            let _ = shipment.await;
        }
    } else {
        // Ends the streams to other workers (they fail their part too) and the acks
        // relay, so the coordinator sees its acks end and reports.
        drop(shipping);
    }
    let report = match report {
        Some(report) => Some(
            report
                .await
                .map_err(|e| RuntimeError::bug(format!("checkpoint coordinator: {e}")))?,
        ),
        None => None,
    };
    let summary = summary?;
    if let Some(report) = &report {
        finished(report)?;
    }
    Ok(WorkerOutcome {
        summary,
        report,
        generation,
        exchange: (sent.load(std::sync::atomic::Ordering::Relaxed), streams),
    })
}

/// On worker 0: the attempt's checkpoint coordinator, with a barrier stream to every
/// other worker (which also carries word of each committed epoch).
async fn coordinate(
    job: &WorkerJob<'_>,
    peers: &mut Peers,
    attempt: &Attempt,
    config: &JobConfig,
    (handle, shipping, stopper): (&mut JobHandle, &mut Shipments, &JobStopper),
) -> ClusterResult<JoinHandle<CheckpointReport>> {
    let (graph, store, run) = (job.graph, job.store, job.run);
    let generation = attempt.generation;
    let mut remote_sources = Vec::new();
    let mut notices = CommitNotices::default();
    for worker in 1..job.options.placement.workers {
        // Barriers from the coordinator and word of commits share the stream.
        let (sender, mut barriers) = tokio::sync::mpsc::unbounded_channel();
        let (to_worker, messages) = tokio::sync::mpsc::unbounded_channel();
        let forward = to_worker.clone();
        shipping.0.push(tokio::spawn(async move {
            while let Some(barrier) = barriers.recv().await {
                if forward.send(FromCoordinator::Barrier(barrier)).is_err() {
                    return;
                }
            }
            // The coordinator finished (a failed attempt aborts this task first).
            let _ = forward.send(FromCoordinator::End);
        }));
        notices.0.push(to_worker);
        let peer = peers.get(worker).await?.clone();
        let hello = links::hello(&job.options.secret, generation, 0, StreamKind::Barriers);
        shipping
            .0
            .push(links::ship_barriers(peer, hello, messages, stopper.clone()));
        remote_sources.push(sender);
    }
    let checkpoints = CheckpointConfig {
        generation,
        first_epoch: riffle_core::Epoch(attempt.first_epoch),
        state_id: Some(attempt.state_id.clone()),
        history_from: attempt.history_from.map(riffle_core::Epoch),
        taken_back: attempt
            .taken_back
            .iter()
            .map(|&e| riffle_core::Epoch(e))
            .collect(),
        ..run.checkpoints.clone()
    };
    let mut listeners = run.listeners.clone();
    listeners.push(Arc::new(notices));
    let target = (store.clone(), checkpoints, listeners);
    Ok(attach_coordinator(
        graph,
        config,
        handle,
        target,
        remote_sources,
    )?)
}

/// On a worker other than 0: writes its subtasks' state and ships their acks (and task
/// signals) to the coordinator on worker 0.
fn ship_own_acks(
    job: &WorkerJob<'_>,
    peer: Peer,
    hello: Hello,
    handle: &mut JobHandle,
    stopper: &JobStopper,
) -> ClusterResult<JoinHandle<()>> {
    let acks = handle
        .acks
        .take()
        .ok_or_else(|| ClusterError::Protocol("acks were not collected".into()))?;
    let signals = handle.task_signals.take();
    Ok(links::ship_acks(
        peer,
        hello,
        (
            job.store.clone(),
            FileReuse::new(job.graph).continuing(handle.restored_chains.take()),
        ),
        (acks, signals, handle.metrics.clone()),
        stopper.clone(),
    ))
}
