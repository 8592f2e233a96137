//! One worker process of a job spread over several (docs/cluster.md).
//!
//! Worker 0 recovers (claims the generation, picks the checkpoint) and publishes the
//! attempt; the others fetch it, load the same checkpoint from the shared store, and
//! start their subtasks. Worker 0 runs the coordinator: barriers go out to every
//! worker's sources, acks come back over the network. A failure anywhere fails the
//! attempt on every worker: each process exits with the error, and its supervisor
//! (Kubernetes, or `riffle run --workers`) starts it again, which resumes from the
//! newest committed checkpoint.

use crate::attempt::run_attempt;
use crate::error::{ClusterError, ClusterResult};
use crate::leader_silence::LeaderSilence;
use crate::links::{self, Peer};
use crate::protocol::{Attempt, AttemptRequest, Decision, JobSecret};
use crate::server::Server;
use crate::service::WorkerService;
use crate::tls::ExchangeTls;
use riffle_runtime::restore_share::RestoreShare;
use riffle_runtime::supervisor::{supervise, AttemptError, Attempts, NextRecovery, RunObserver};
use riffle_runtime::{
    CheckpointReport, CheckpointedRun, JobGraph, JobSummary, Placement, RestoredJob, RuntimeError,
};
use riffle_state::CheckpointStore;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    /// The job's secret, which every stream and call between its workers carries.
    pub secret: JobSecret,
    /// Mutual TLS on the exchange; `None` only with `--insecure-exchange`.
    pub tls: Option<ExchangeTls>,
    /// On worker 0: where other workers' savepoint requests go.
    pub savepoints: Option<riffle_runtime::savepoint::SavepointSender>,
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
    let savepoints = options.savepoints.clone().filter(|_| placement.worker == 0);
    let service = WorkerService::new(options.secret.clone(), savepoints);
    let server = Server::start(service.clone(), options.listen, options.tls.as_ref()).await?;
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
        leader_silence: LeaderSilence::default(),
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
pub(crate) struct WorkerJob<'a> {
    /// This process among the worker's processes over time (drawn at its start).
    pub(crate) incarnation: u64,
    pub(crate) graph: &'a JobGraph,
    pub(crate) store: &'a CheckpointStore,
    pub(crate) run: &'a CheckpointedRun,
    pub(crate) options: &'a WorkerOptions,
    pub(crate) service: &'a WorkerService,
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
    /// word after one, for the whole patience: worker 0 is gone (it finished, or failed
    /// for good), so this worker ends too, as its supervisor then decides, instead of
    /// asking for ever.
    leader_lost: bool,
    /// How long worker 0 has not answered this worker (one failed try is not enough:
    /// this worker may have been paused while the try's timer ran).
    leader_silence: LeaderSilence,
}

impl WorkerAttempts<'_> {
    /// Notes how an exchange with worker 0 begun at `tried` went; a follower whose
    /// worker 0 stayed silent for the patience counts it as gone.
    fn heard_leader<T>(&mut self, tried: Instant, heard: &ClusterResult<T>) {
        let follower = self.job.options.placement.worker != 0;
        self.leader_lost = match heard {
            Ok(_) => {
                self.leader_silence.answered();
                false
            }
            Err(_) => {
                let patience = self.job.options.patience;
                follower && self.leader_silence.failed(tried, Instant::now(), patience)
            }
        };
    }
}

impl Attempts for WorkerAttempts<'_> {
    type Outcome = WorkerOutcome;
    type Error = ClusterError;

    async fn run(
        &mut self,
        observer: &mut dyn RunObserver,
    ) -> ClusterResult<Option<WorkerOutcome>> {
        // A copy, so that `self` stays free to note how worker 0 answered.
        let job = self.job;
        let job = &job;
        let options = job.options;
        let mut peers = Peers {
            addresses: options.addresses.clone(),
            tls: options.tls.clone(),
            patience: options.patience,
            open: HashMap::new(),
        };
        let next = self.failed_generation + 1;
        (self.current, self.leader_lost) = (None, false);
        let tried = Instant::now();
        let agreed = agree(job, &mut self.recovery, observer, &mut peers, next).await;
        self.heard_leader(tried, &agreed);
        let agreed = match agreed? {
            Agreed::Run(attempt, restored) => (*attempt, restored),
            // This worker started after the job's last checkpoint committed.
            Agreed::Finished { generation } => return Ok(Some(WorkerOutcome::idle(generation))),
        };
        let generation = agreed.0.generation;
        self.failed_generation = generation;
        self.current = Some(generation);
        let outcome = run_attempt(job, observer, peers, agreed).await?;
        let tried = Instant::now();
        let ended = job_ended(job, outcome).await;
        self.heard_leader(tried, &ended);
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
    let mut leader = links::connect(
        &options.addresses[0],
        options.tls.as_ref(),
        options.patience,
    )
    .await?;
    let asked = AttemptRequest {
        secret: options.secret.clone(),
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
            inputs: graph.input_listing(),
            workers: options.placement.workers,
            first_epoch: recovered.next_epoch.0,
            state_id: recovered.state_id.clone(),
            history_from: recovered.history_from.map(|e| e.0),
            taken_back: recovered.taken_back.iter().map(|e| e.0).collect(),
        };
        let attempt = Box::new(attempt);
        service.publish(Decision::Run(attempt.clone()));
        // Recovery read and checked every file (size, CRC32C, row count: a damaged one
        // sends it to an older checkpoint); worker 0 keeps only its share.
        let restored = match (&recovered.restored, &recovered.manifest) {
            (Some(full), Some(manifest)) => {
                let share = RestoreShare::of(graph, options.placement, manifest);
                let kept = full.as_ref().clone().keep_share(&share, manifest);
                let (held, total) = kept.bytes;
                eprintln!(
                    "riffle: worker 0: holds {held} of the checkpoint's {total} state bytes (its share)"
                );
                Some(Arc::new(kept))
            }
            _ => recovered.restored.clone(),
        };
        return Ok(Agreed::Run(attempt, restored));
    }
    let asked = AttemptRequest {
        secret: options.secret.clone(),
        worker: options.placement.worker,
        incarnation: job.incarnation,
        at_least: generation,
    };
    let attempt = match links::fetch_decision(peers.get(0).await?, asked, options.patience).await? {
        Decision::Run(attempt) => attempt,
        Decision::Finished { generation } => return Ok(Agreed::Finished { generation }),
        Decision::Pending => return Err(undecided()),
    };
    same_job(
        &attempt,
        (&graph.fingerprint(), &graph.input_listing()),
        options.placement.workers,
    )?;
    // Only this worker's share of the state: its subtasks' key groups (and every
    // source position). The manifest says what the others read.
    let restored = match &attempt.manifest {
        Some(manifest) => {
            let share = RestoreShare::of(graph, options.placement, manifest);
            let restored = RestoredJob::load_share(store, manifest, Some(&share))
                .await?
                .continuing_from(manifest, riffle_core::Epoch(attempt.first_epoch));
            let (read, total) = restored.bytes;
            eprintln!(
                "riffle: worker {}: restored {read} of the checkpoint's {total} state bytes (its share)",
                options.placement.worker
            );
            Some(Arc::new(restored))
        }
        None => None,
    };
    Ok(Agreed::Run(attempt, restored))
}

/// `links::fetch_decision` asks again while worker 0 has not decided.
fn undecided() -> ClusterError {
    ClusterError::Protocol("worker 0 answered that it has not decided".into())
}

/// Connections to other workers, opened when first needed.
pub(crate) struct Peers {
    addresses: Vec<String>,
    tls: Option<ExchangeTls>,
    patience: Duration,
    open: HashMap<usize, Peer>,
}

impl Peers {
    pub(crate) async fn get(&mut self, worker: usize) -> ClusterResult<&mut Peer> {
        if !self.open.contains_key(&worker) {
            let peer =
                links::connect(&self.addresses[worker], self.tls.as_ref(), self.patience).await?;
            self.open.insert(worker, peer);
        }
        self.open
            .get_mut(&worker)
            .ok_or_else(|| ClusterError::Protocol("connection vanished".into()))
    }
}

/// Refuses an attempt of worker 0 that this worker cannot run as the same job: another
/// plan, other input files (the splits would differ: some read twice, some never), or
/// another number of workers. `(fingerprint, inputs)` are this worker's.
fn same_job(
    attempt: &Attempt,
    (fingerprint, inputs): (&str, &str),
    workers: usize,
) -> ClusterResult<()> {
    if attempt.fingerprint != fingerprint {
        return Err(ClusterError::Unsupported(
            "worker 0 planned a different job: every worker must run the same pipeline file with the same options".into(),
        ));
    }
    if attempt.inputs != inputs {
        return Err(ClusterError::Unsupported(format!(
            "worker 0 found other input files than this worker ({} there, {inputs} here): every worker must see the same files, or they would cut the input into different splits; files added or grown since worker 0 listed them are read once the whole job (worker 0 too) starts again",
            if attempt.inputs.is_empty() { "none sent: an older riffle?" } else { &attempt.inputs }
        )));
    }
    if attempt.workers != workers {
        return Err(ClusterError::Unsupported(format!(
            "worker 0 runs the job on {} workers, this one was told {workers}",
            attempt.workers
        )));
    }
    Ok(())
}

#[cfg(test)]
mod same_job_tests {
    use super::*;

    fn attempt(inputs: &str) -> Attempt {
        Attempt {
            generation: 1,
            manifest: None,
            fingerprint: "f".into(),
            inputs: inputs.into(),
            workers: 2,
            first_epoch: 1,
            state_id: "s".into(),
            history_from: None,
            taken_back: Vec::new(),
        }
    }

    #[test]
    fn a_worker_that_found_other_input_files_is_refused() {
        let listing = "bids: 2 files, 00000000000000aa";
        assert!(same_job(&attempt(listing), ("f", listing), 2).is_ok());
        let refused = same_job(
            &attempt(listing),
            ("f", "bids: 3 files, 00000000000000bb"),
            2,
        );
        assert!(
            matches!(refused, Err(ClusterError::Unsupported(_))),
            "{refused:?}"
        );
        assert!(same_job(&attempt(listing), ("g", listing), 2).is_err());
        assert!(same_job(&attempt(listing), ("f", listing), 3).is_err());
    }
}
