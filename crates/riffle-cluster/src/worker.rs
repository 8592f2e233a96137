//! One worker process of a job spread over several (docs/cluster.md).
//!
//! Worker 0 recovers (claims the generation, picks the checkpoint) and publishes the
//! attempt; the others fetch it, load the same checkpoint from the shared store, and
//! start their subtasks. Worker 0 runs the coordinator: barriers go out to every
//! worker's sources, acks come back over the network. A failure anywhere fails the
//! attempt on every worker: each process exits with the error, and its supervisor
//! (Kubernetes, or `riffle run --workers`) starts it again, which resumes from the
//! newest committed checkpoint.

use crate::error::{ClusterError, ClusterResult};
use crate::links::{self, Peer};
use crate::protocol::{Attempt, AttemptRequest, Decision, FromCoordinator, StreamKind};
use crate::server::Server;
use crate::service::{CoordinatorInbox, LocalAttempt, WorkerService};
use riffle_runtime::job::{self, attach_coordinator, exactly_once, JobHandle, JobStopper};
use riffle_runtime::supervisor::{
    finished, supervise, AttemptError, Attempts, NextRecovery, RunObserver,
};
use riffle_runtime::{
    CheckpointConfig, CheckpointEvent, CheckpointListener, CheckpointReport, CheckpointedRun,
    FileReuse, JobConfig, JobGraph, JobSummary, Placement, RestoredJob, RuntimeError,
};
use riffle_state::CheckpointStore;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;

/// Where the workers are and which one this is.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// This worker's index and the number of workers.
    pub placement: Placement,
    /// Every worker's address (`host:port`), by index.
    pub addresses: Vec<String>,
    /// Where this worker listens (its address's port, on every interface by default).
    pub listen: SocketAddr,
    /// How long to wait for another worker to come up.
    pub patience: Duration,
}

/// How a worker's attempt went.
#[derive(Debug)]
pub struct WorkerOutcome {
    /// What this worker's subtasks did.
    pub summary: JobSummary,
    /// On worker 0: the coordinator's report.
    pub report: Option<CheckpointReport>,
    /// The attempt's generation.
    pub generation: u64,
    /// Bytes this worker sent to others over its exchange streams (rows, watermarks,
    /// barriers), and how many such streams it had.
    pub exchange: (u64, usize),
}

/// Runs this worker's share of `graph` for one attempt.
///
/// # Errors
/// Recovery or start failed, a peer could not be reached, the job failed on any
/// worker, or (worker 0) its end-of-input checkpoint did not commit.
pub async fn run_worker(
    graph: &JobGraph,
    store: &CheckpointStore,
    run: CheckpointedRun,
    options: &WorkerOptions,
    observer: &mut dyn RunObserver,
) -> ClusterResult<WorkerOutcome> {
    let placement = options.placement;
    if options.addresses.len() != placement.workers || placement.worker >= placement.workers {
        return Err(ClusterError::Unsupported(format!(
            "worker {} of {} workers, but {} addresses",
            placement.worker,
            placement.workers,
            options.addresses.len()
        )));
    }
    let service = WorkerService::default();
    let server = Server::start(service.clone(), options.listen).await?;
    let job = WorkerJob {
        incarnation: incarnation(),
        graph,
        store,
        run: &run,
        options,
        service: &service,
    };
    let mut attempts = WorkerAttempts {
        job,
        recovery: NextRecovery::of(&run),
        failed_generation: 0,
        current: None,
        leader_lost: false,
    };
    let result = supervise(&mut attempts, run.restart, observer).await;
    server.stop().await;
    result.map(|(outcome, _)| outcome)
}

/// A number that tells this process from the worker's earlier and later ones.
fn incarnation() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ (u64::from(std::process::id()) << 32)
}

/// What every attempt of this worker runs with.
#[derive(Clone, Copy)]
struct WorkerJob<'a> {
    /// This process among the worker's processes over time (drawn at its start).
    incarnation: u64,
    graph: &'a JobGraph,
    store: &'a CheckpointStore,
    run: &'a CheckpointedRun,
    options: &'a WorkerOptions,
    service: &'a WorkerService,
}

/// This worker's attempts, under the runtime's one restart loop ([`supervise`]):
/// worker 0 decides each attempt and its restarts; the others rejoin each new attempt
/// worker 0 starts, until worker 0 says the job finished or stops answering.
struct WorkerAttempts<'a> {
    job: WorkerJob<'a>,
    /// Worker 0's next recovery (the others load what worker 0 recovered).
    recovery: NextRecovery,
    /// The generation of the last attempt this worker took part in.
    failed_generation: u64,
    /// The attempt running now, once agreed.
    current: Option<u64>,
    /// A worker other than 0 could not agree with worker 0 on an attempt or hear its
    /// word after one: worker 0 is gone (it finished, or failed for good), so this
    /// worker ends too, as its supervisor then decides, instead of asking for ever.
    leader_lost: bool,
}

impl Attempts for WorkerAttempts<'_> {
    type Outcome = WorkerOutcome;
    type Error = ClusterError;

    async fn run(
        &mut self,
        observer: &mut dyn RunObserver,
    ) -> ClusterResult<Option<WorkerOutcome>> {
        let job = &self.job;
        let options = job.options;
        let mut peers = Peers {
            addresses: options.addresses.clone(),
            patience: options.patience,
            open: HashMap::new(),
        };
        let next = self.failed_generation + 1;
        let follower = options.placement.worker != 0;
        (self.current, self.leader_lost) = (None, false);
        let agreed = agree(job, &mut self.recovery, observer, &mut peers, next).await;
        self.leader_lost = follower && agreed.is_err();
        let agreed = match agreed? {
            Agreed::Run(attempt, restored) => (*attempt, restored),
            // This worker started after the job's last checkpoint committed.
            Agreed::Finished { generation } => return Ok(Some(WorkerOutcome::idle(generation))),
        };
        let generation = agreed.0.generation;
        self.failed_generation = generation;
        self.current = Some(generation);
        let outcome = run_attempt(job, observer, peers, agreed).await?;
        let ended = job_ended(job, outcome).await;
        self.leader_lost = follower && ended.is_err();
        let ended = ended?;
        if ended.is_none() {
            // Worker 0 failed after this worker's part of the attempt ended.
            eprintln!(
                "riffle: worker {}: the job restarted after this worker's part of generation {generation} ended; rejoining",
                options.placement.worker
            );
        }
        Ok(ended)
    }

    fn decides_restarts(&self) -> bool {
        self.job.options.placement.worker == 0
    }

    fn worth_restarting(&self, error: &ClusterError) -> bool {
        !self.leader_lost && error.restartable()
    }

    // The coordinator ran here, but its report went with the failed attempt: the
    // state root says which epoch committed last.
    async fn newest_committed(&self) -> Option<riffle_core::Epoch> {
        self.job.store.latest_hint().await
    }

    fn failed(&self, error: &ClusterError, next: Option<Duration>) {
        let worker = self.job.options.placement.worker;
        let Some(delay) = next else { return };
        let next = match worker {
            0 => format!("starting the next one in {delay:?}"),
            _ => "rejoining the next one".to_string(),
        };
        let attempt = match self.current {
            Some(generation) => format!("attempt of generation {generation}"),
            None => "agreeing on the next attempt".to_string(),
        };
        eprintln!("riffle: worker {worker}: {attempt} failed ({error}); {next}");
    }
}

/// After this worker's part of an attempt ended well: whether the job ended, which
/// worker 0 decides (`None`: it started a newer attempt, which this worker rejoins).
///
/// A worker must not exit before worker 0's last checkpoint commits: if worker 0
/// fails first, the job resumes from an older checkpoint, and every worker's subtasks
/// run again. So the others wait for worker 0's word, and worker 0 waits (up to the
/// peer timeout) until the others have heard it.
async fn job_ended(
    job: &WorkerJob<'_>,
    outcome: WorkerOutcome,
) -> ClusterResult<Option<WorkerOutcome>> {
    let options = job.options;
    let me = options.placement.worker;
    let generation = outcome.generation;
    if me == 0 {
        job.service.publish(Decision::Finished { generation });
        let others = 1..options.placement.workers;
        if !job
            .service
            .all_told_finished(others, options.patience)
            .await
        {
            eprintln!(
                "riffle: worker 0: not every worker heard within {:?} that the job finished; a worker that asks later finds worker 0 gone and fails",
                options.patience
            );
        }
        return Ok(Some(outcome));
    }
    let mut leader = links::connect(&options.addresses[0], options.patience).await?;
    let asked = AttemptRequest {
        worker: me,
        incarnation: job.incarnation,
        at_least: generation + 1,
    };
    Ok(
        match links::fetch_decision(&mut leader, asked, options.patience).await? {
            Decision::Run(_) => None,
            Decision::Finished { .. } => Some(outcome),
            Decision::Pending => return Err(undecided()),
        },
    )
}

impl WorkerOutcome {
    /// A worker that ran nothing: the job had finished when it asked.
    fn idle(generation: u64) -> Self {
        Self {
            summary: JobSummary::default(),
            report: None,
            generation,
            exchange: (0, 0),
        }
    }
}

/// Whether an attempt that failed is worth another: the runtime's rule for the job's
/// own errors, and for storage; a broken link between workers is.
impl AttemptError for ClusterError {
    fn restartable(&self) -> bool {
        match self {
            ClusterError::Runtime(e) => riffle_runtime::supervisor::restartable(e),
            ClusterError::Connect { .. } | ClusterError::Status(_) | ClusterError::Protocol(_) => {
                true
            }
            // As in one process: storage that failed for a moment is retried.
            ClusterError::State(e) => {
                riffle_runtime::CheckpointFailure::of_state(e)
                    == riffle_runtime::CheckpointFailure::Transient
            }
            ClusterError::Unsupported(_) | ClusterError::Encode(_) | ClusterError::Json(_) => false,
        }
    }

    fn runtime(&self) -> Option<&RuntimeError> {
        match self {
            ClusterError::Runtime(e) => Some(e),
            _ => None,
        }
    }
}

/// What the workers agreed to do next.
enum Agreed {
    /// Run this attempt, restored from this state.
    Run(Box<Attempt>, Option<Arc<RestoredJob>>),
    /// Nothing: the job finished in this generation.
    Finished { generation: u64 },
}

/// Worker 0 decides the attempt; the others ask it for one of at least `generation`.
async fn agree(
    job: &WorkerJob<'_>,
    recovery: &mut NextRecovery,
    observer: &mut dyn RunObserver,
    peers: &mut Peers,
    generation: u64,
) -> ClusterResult<Agreed> {
    let WorkerJob {
        graph,
        store,
        options,
        service,
        ..
    } = *job;
    if options.placement.worker == 0 {
        let recovered = recovery.recover(store, graph).await?;
        observer.recovered(&recovered);
        let attempt = Attempt {
            generation: recovered.generation,
            manifest: recovered.manifest.clone(),
            fingerprint: graph.fingerprint(),
            workers: options.placement.workers,
            first_epoch: recovered.next_epoch.0,
            state_id: recovered.state_id.clone(),
            history_from: recovered.history_from.map(|e| e.0),
        };
        let attempt = Box::new(attempt);
        service.publish(Decision::Run(attempt.clone()));
        return Ok(Agreed::Run(attempt, recovered.restored));
    }
    let asked = AttemptRequest {
        worker: options.placement.worker,
        incarnation: job.incarnation,
        at_least: generation,
    };
    let attempt = match links::fetch_decision(peers.get(0).await?, asked, options.patience).await? {
        Decision::Run(attempt) => attempt,
        Decision::Finished { generation } => return Ok(Agreed::Finished { generation }),
        Decision::Pending => return Err(undecided()),
    };
    if attempt.fingerprint != graph.fingerprint() {
        return Err(ClusterError::Unsupported(
            "worker 0 planned a different job: every worker must run the same pipeline file with the same options".into(),
        ));
    }
    if attempt.workers != options.placement.workers {
        return Err(ClusterError::Unsupported(format!(
            "worker 0 runs the job on {} workers, this one was told {}",
            attempt.workers, options.placement.workers
        )));
    }
    let restored = match &attempt.manifest {
        Some(manifest) => Some(Arc::new(RestoredJob::load(store, manifest).await?)),
        None => None,
    };
    Ok(Agreed::Run(attempt, restored))
}

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

/// `links::fetch_decision` asks again while worker 0 has not decided.
fn undecided() -> ClusterError {
    ClusterError::Protocol("worker 0 answered that it has not decided".into())
}

/// Connections to other workers, opened when first needed.
struct Peers {
    addresses: Vec<String>,
    patience: Duration,
    open: HashMap<usize, Peer>,
}

impl Peers {
    async fn get(&mut self, worker: usize) -> ClusterResult<&mut Peer> {
        if !self.open.contains_key(&worker) {
            let peer = links::connect(&self.addresses[worker], self.patience).await?;
            self.open.insert(worker, peer);
        }
        self.open
            .get_mut(&worker)
            .ok_or_else(|| ClusterError::Protocol("connection vanished".into()))
    }
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

async fn run_attempt(
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
    let config = exactly_once(
        &JobConfig {
            restore: restored,
            placement,
            ..run.job.clone()
        },
        generation,
    );
    let mut handle = job::start(graph, &config, true)?;
    let remote = std::mem::take(&mut handle.remote);
    let (acks_in, ends_in) = handle.take_remote_inputs();
    let stopper = handle.stopper();
    let mut shipping = Shipments::default();
    let inbox = match (me, acks_in, ends_in) {
        (0, Some(acks), Some(ends)) => Some(CoordinatorInbox {
            acks: relay_acks(acks, &mut shipping),
            ends,
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
        let hello = links::hello(generation, me, StreamKind::Channel(key));
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
        let hello = links::hello(generation, me, StreamKind::Acks);
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
        let hello = links::hello(generation, 0, StreamKind::Barriers);
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

/// On a worker other than 0: writes its subtasks' state and ships their acks (and ends
/// of input) to the coordinator on worker 0.
fn ship_own_acks(
    job: &WorkerJob<'_>,
    peer: Peer,
    hello: crate::protocol::Hello,
    handle: &mut JobHandle,
    stopper: &JobStopper,
) -> ClusterResult<JoinHandle<()>> {
    let acks = handle
        .acks
        .take()
        .ok_or_else(|| ClusterError::Protocol("acks were not collected".into()))?;
    let ends = handle.end_of_input.take();
    Ok(links::ship_acks(
        peer,
        hello,
        (job.store.clone(), FileReuse::new(job.graph)),
        (acks, ends, handle.metrics.clone()),
        stopper.clone(),
    ))
}
