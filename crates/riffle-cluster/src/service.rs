//! The Flight service every worker serves: streams from other workers feed this
//! worker's tasks (channels), its coordinator (acks, on worker 0) or its sources
//! (barriers); `attempt` tells a starting worker what worker 0 decided; `savepoint`
//! passes another worker's savepoint request to worker 0's coordinator.
//!
//! Every stream and call carries the job's secret ([`JobSecret`]); one without it is
//! refused before it touches the attempt, and logged with the peer's address.

use crate::feeds::{feed_acks, feed_barriers, feed_channel};
use crate::protocol::{AttemptRequest, Decision, Hello, JobSecret, SavepointAsk, StreamKind};
use arrow_flight::flight_service_server::FlightService;
use arrow_flight::{
    Action, ActionType, Criteria, Empty, FlightData, FlightDescriptor, FlightInfo,
    HandshakeRequest, HandshakeResponse, PollInfo, PutResult, SchemaResult, Ticket,
};
use futures::stream::BoxStream;
use riffle_core::Message;
use riffle_runtime::handle::{BarrierInjector, JobStopper};
use riffle_runtime::savepoint::SavepointSender;
use riffle_runtime::{ChannelKey, JobMetrics, SnapshotAck};
use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc::{Sender, UnboundedSender};
use tokio::sync::watch;
use tonic::{Request, Response, Status, Streaming};

/// What an action answers.
type ActionResults = BoxStream<'static, Result<arrow_flight::Result, Status>>;

/// The action that answers an [`AttemptRequest`] with worker 0's [`Decision`], as JSON.
pub const ATTEMPT_ACTION: &str = "attempt";

/// The action that takes a savepoint ([`SavepointAsk`]) on worker 0 and answers its
/// [`SavepointDone`](riffle_runtime::savepoint::SavepointDone) as JSON.
pub const SAVEPOINT_ACTION: &str = "savepoint";

/// How long one `attempt` call waits for worker 0 to decide (then it answers
/// [`Decision::Pending`] and the caller asks again).
const ATTEMPT_POLL: Duration = Duration::from_secs(5);

/// How long a stream waits for this worker to start the attempt it names.
const ATTEMPT_WAIT: Duration = Duration::from_secs(60);

/// Where the coordinator on worker 0 takes other workers' acks and task signals.
pub struct CoordinatorInbox {
    /// Into the coordinator's ack channel.
    pub acks: UnboundedSender<SnapshotAck>,
    /// Into its task signal channel (restores, ends of input).
    pub signals: UnboundedSender<riffle_runtime::TaskSignal>,
    /// Acks streams still expected; once all arrived, the inbox lets go of its senders
    /// so the coordinator ends when the last stream does.
    pub expected: usize,
}

/// One attempt of the job, as this worker runs it.
pub struct LocalAttempt {
    /// Its generation.
    pub generation: u64,
    /// Senders into local tasks, for channels whose sender is on another worker.
    pub incoming: Mutex<HashMap<ChannelKey, Sender<Message>>>,
    /// On worker 0: the coordinator's inbox.
    pub inbox: Mutex<Option<CoordinatorInbox>>,
    /// Injects barriers at this worker's source subtasks.
    pub barriers: BarrierInjector,
    /// Fails the attempt when a stream breaks.
    pub stopper: JobStopper,
    /// The attempt's metrics: word from worker 0 that an epoch committed sets their
    /// completed epoch, which this worker's sources and its file reuse read.
    pub metrics: Arc<JobMetrics>,
}

/// The service state: the attempt this worker runs, once started; on worker 0, what
/// it decided, and which workers it told that the job finished.
#[derive(Clone)]
pub struct WorkerService {
    secret: JobSecret,
    /// On worker 0: where savepoint requests go.
    savepoints: Option<SavepointSender>,
    attempt: watch::Sender<Option<Arc<LocalAttempt>>>,
    decision: watch::Sender<Decision>,
    told_finished: watch::Sender<BTreeSet<usize>>,
    /// Per worker: the generation it was last told to run, and which of its processes
    /// was told.
    joined: Arc<Mutex<HashMap<usize, (u64, u64)>>>,
}

impl WorkerService {
    /// A service that admits streams and calls carrying `secret`; on worker 0,
    /// `savepoints` takes other workers' savepoint requests.
    pub fn new(secret: JobSecret, savepoints: Option<SavepointSender>) -> Self {
        Self {
            secret,
            savepoints,
            attempt: watch::channel(None).0,
            decision: watch::channel(Decision::Pending).0,
            told_finished: watch::channel(BTreeSet::new()).0,
            joined: Arc::default(),
        }
    }

    /// Refuses a stream or call without the job's secret, logging who sent it.
    fn admit(
        &self,
        presented: &JobSecret,
        peer: Option<SocketAddr>,
        what: &str,
    ) -> Result<(), Status> {
        if self.secret.admits(presented) {
            return Ok(());
        }
        tracing::warn!(
            "refused {what} from {} without the job's secret",
            named(peer)
        );
        Err(Status::unauthenticated(
            "not a worker of this job: the job's secret is missing or wrong",
        ))
    }

    /// Streams for `attempt` are served from now on; older attempts' are refused.
    pub fn start_attempt(&self, attempt: Arc<LocalAttempt>) {
        self.attempt.send_replace(Some(attempt));
    }

    /// Worker 0 publishes what every worker must do next.
    pub fn publish(&self, decision: Decision) {
        self.decision.send_replace(decision);
    }

    /// Waits until `workers` have all been told that the job finished, or `patience`
    /// ran out (a worker that is not there learns it when it asks, if worker 0 is
    /// still up; see docs/cluster.md, "Failures").
    pub async fn all_told_finished(
        &self,
        workers: impl IntoIterator<Item = usize>,
        patience: Duration,
    ) -> bool {
        let workers: BTreeSet<usize> = workers.into_iter().collect();
        let mut told = self.told_finished.subscribe();
        tokio::time::timeout(patience, told.wait_for(|t| t.is_superset(&workers)))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    async fn attempt_for(&self, hello: &Hello) -> Result<Arc<LocalAttempt>, Status> {
        let mut current = self.attempt.subscribe();
        let wanted = hello.generation;
        let decided = |a: &Option<Arc<LocalAttempt>>| {
            admission(wanted, a.as_ref().map(|a| a.generation)) != Admission::Wait
        };
        let found = tokio::time::timeout(ATTEMPT_WAIT, current.wait_for(decided))
            .await
            .map_err(|_| {
                Status::unavailable(format!(
                    "worker {} waited {ATTEMPT_WAIT:?} for this worker to start generation {wanted}",
                    hello.worker
                ))
            })?
            .map_err(|_| Status::unavailable("the worker is shutting down"))?
            .clone()
            .ok_or_else(|| Status::internal("no attempt"))?;
        match admission(wanted, Some(found.generation)) {
            Admission::Serve => Ok(found),
            _ => Err(Status::failed_precondition(format!(
                "fenced: worker {} speaks for generation {wanted}, this worker runs generation {}",
                hello.worker, found.generation
            ))),
        }
    }

    /// Worker 0's answer to another worker asking which attempt to run.
    async fn attempt_action(
        &self,
        body: &[u8],
        peer: Option<SocketAddr>,
    ) -> Result<Response<ActionResults>, Status> {
        let asked: AttemptRequest = serde_json::from_slice(body)
            .map_err(|e| Status::invalid_argument(format!("attempt: {e}")))?;
        self.admit(&asked.secret, peer, "a call for the next attempt")?;
        let mut decision = self.decision.subscribe();
        let joined = self.joined.clone();
        let answers = |d: &Decision| {
            let told = joined
                .lock()
                .ok()
                .and_then(|j| j.get(&asked.worker).copied());
            d.answers(asked.at_least)
                && !matches!(d, Decision::Run(a) if late_joiner(told, a.generation, asked.incarnation))
        };
        let answer = match tokio::time::timeout(ATTEMPT_POLL, decision.wait_for(answers)).await {
            Ok(decided) => decided
                .map_err(|_| Status::unavailable("worker 0 is shutting down"))?
                .clone(),
            Err(_) => Decision::Pending,
        };
        match &answer {
            Decision::Run(attempt) => {
                if let Ok(mut joined) = self.joined.lock() {
                    joined.insert(asked.worker, (attempt.generation, asked.incarnation));
                }
            }
            Decision::Finished { .. } => {
                self.told_finished.send_modify(|told| {
                    told.insert(asked.worker);
                });
            }
            Decision::Pending => {}
        }
        answered(&answer)
    }

    /// On worker 0: takes a savepoint another worker's control endpoint was asked for.
    async fn savepoint_action(
        &self,
        body: &[u8],
        peer: Option<SocketAddr>,
    ) -> Result<Response<ActionResults>, Status> {
        let asked: SavepointAsk = serde_json::from_slice(body)
            .map_err(|e| Status::invalid_argument(format!("savepoint: {e}")))?;
        self.admit(&asked.secret, peer, "a savepoint request")?;
        let Some(savepoints) = &self.savepoints else {
            return Err(Status::failed_precondition(
                "savepoints are taken by worker 0's coordinator; this is another worker",
            ));
        };
        let done = riffle_runtime::savepoint::request_savepoint(
            savepoints,
            asked.label,
            asked.stop,
            asked.drain,
        )
        .await
        .map_err(Status::aborted)?;
        answered(&done)
    }
}

/// Whether a worker process asking for an attempt of `generation` comes too late: the
/// worker was `told` to run that generation before, by another of its processes. It
/// was restarted while the attempt ran, so the attempt went on without it (had its
/// subtasks still been running, their broken streams would have failed the attempt).
/// Its state files may be gone by now; it waits for the next decision instead.
fn late_joiner(told: Option<(u64, u64)>, generation: u64, incarnation: u64) -> bool {
    matches!(told, Some((g, process)) if g == generation && process != incarnation)
}

/// What becomes of a stream of one attempt while this worker runs another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Admission {
    /// Same attempt: feed it.
    Serve,
    /// A newer attempt than this worker's (or none yet): wait for this worker to start it.
    Wait,
    /// An older attempt (a zombie): refuse it.
    Refuse,
}

/// Whether a stream of generation `wanted` is served while this worker runs `current`.
fn admission(wanted: u64, current: Option<u64>) -> Admission {
    match current {
        Some(c) if c == wanted => Admission::Serve,
        Some(c) if c > wanted => Admission::Refuse,
        _ => Admission::Wait,
    }
}

/// An action's one answer: `value` as JSON.
fn answered<T: serde::Serialize>(value: &T) -> Result<Response<ActionResults>, Status> {
    let json = serde_json::to_vec(value).map_err(|e| Status::internal(e.to_string()))?;
    let result = arrow_flight::Result { body: json.into() };
    Ok(Response::new(Box::pin(futures::stream::iter([Ok(result)]))))
}

/// A peer's address for a log line.
fn named(peer: Option<SocketAddr>) -> String {
    peer.map_or_else(|| "an unknown peer".to_string(), |p| p.to_string())
}

/// Reads the stream's opening [`Hello`] (its descriptor's command).
async fn hello(stream: &mut Streaming<FlightData>) -> Result<Hello, Status> {
    let first = stream
        .message()
        .await?
        .ok_or_else(|| Status::invalid_argument("an empty stream"))?;
    let descriptor = first
        .flight_descriptor
        .ok_or_else(|| Status::invalid_argument("the first message names no stream"))?;
    serde_json::from_slice(&descriptor.cmd)
        .map_err(|e| Status::invalid_argument(format!("not a riffle stream: {e}")))
}

fn unimplemented<T>(what: &str) -> Result<T, Status> {
    Err(Status::unimplemented(format!(
        "{what}: not a riffle worker call"
    )))
}

#[tonic::async_trait]
impl FlightService for WorkerService {
    type HandshakeStream = BoxStream<'static, Result<HandshakeResponse, Status>>;
    type ListFlightsStream = BoxStream<'static, Result<FlightInfo, Status>>;
    type DoGetStream = BoxStream<'static, Result<FlightData, Status>>;
    type DoPutStream = BoxStream<'static, Result<PutResult, Status>>;
    type DoActionStream = BoxStream<'static, Result<arrow_flight::Result, Status>>;
    type ListActionsStream = BoxStream<'static, Result<ActionType, Status>>;
    type DoExchangeStream = BoxStream<'static, Result<FlightData, Status>>;

    async fn do_put(
        &self,
        request: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoPutStream>, Status> {
        let peer = request.remote_addr();
        let mut stream = request.into_inner();
        // A stream that names itself late holds a call open for nothing: it gets the
        // keep-alive timeout (which matters most with --insecure-exchange, where no
        // handshake stands before it).
        let hello = tokio::time::timeout(crate::links::KEEP_ALIVE_TIMEOUT, hello(&mut stream))
            .await
            .unwrap_or_else(|_| Err(Status::deadline_exceeded("no opening message in time")))
            .inspect_err(|e| {
                tracing::warn!("refused a stream from {}: {}", named(peer), e.message());
            })?;
        self.admit(&hello.secret, peer, "a stream")?;
        let attempt = self.attempt_for(&hello).await?;
        let fed = match hello.stream {
            StreamKind::Channel(key) => feed_channel(&attempt, key, hello.worker, stream).await,
            StreamKind::Acks => feed_acks(&attempt, hello.worker, stream).await,
            StreamKind::Barriers => feed_barriers(&attempt, stream).await,
        };
        if let Err(e) = &fed {
            tracing::warn!(
                "a stream from worker {} at {} ({:?}) failed: {}",
                hello.worker,
                named(peer),
                hello.stream,
                e.message()
            );
        }
        fed?;
        Ok(Response::new(Box::pin(futures::stream::empty())))
    }

    async fn do_action(
        &self,
        request: Request<Action>,
    ) -> Result<Response<Self::DoActionStream>, Status> {
        let peer = request.remote_addr();
        let action = request.into_inner();
        match action.r#type.as_str() {
            ATTEMPT_ACTION => self.attempt_action(&action.body, peer).await,
            SAVEPOINT_ACTION => self.savepoint_action(&action.body, peer).await,
            other => unimplemented(other),
        }
    }

    async fn handshake(
        &self,
        _: Request<Streaming<HandshakeRequest>>,
    ) -> Result<Response<Self::HandshakeStream>, Status> {
        unimplemented("handshake")
    }
    async fn list_flights(
        &self,
        _: Request<Criteria>,
    ) -> Result<Response<Self::ListFlightsStream>, Status> {
        unimplemented("list_flights")
    }
    async fn get_flight_info(
        &self,
        _: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        unimplemented("get_flight_info")
    }
    async fn poll_flight_info(
        &self,
        _: Request<FlightDescriptor>,
    ) -> Result<Response<PollInfo>, Status> {
        unimplemented("poll_flight_info")
    }
    async fn get_schema(
        &self,
        _: Request<FlightDescriptor>,
    ) -> Result<Response<SchemaResult>, Status> {
        unimplemented("get_schema")
    }
    async fn do_get(&self, _: Request<Ticket>) -> Result<Response<Self::DoGetStream>, Status> {
        unimplemented("do_get")
    }
    async fn list_actions(
        &self,
        _: Request<Empty>,
    ) -> Result<Response<Self::ListActionsStream>, Status> {
        unimplemented("list_actions")
    }
    async fn do_exchange(
        &self,
        _: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoExchangeStream>, Status> {
        unimplemented("do_exchange")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_restarted_during_an_attempt_waits_for_the_next() {
        assert!(late_joiner(Some((4, 111)), 4, 222));
    }

    #[test]
    fn a_worker_asking_again_or_for_a_new_attempt_is_told() {
        assert!(!late_joiner(Some((4, 111)), 4, 111));
        assert!(!late_joiner(Some((4, 111)), 5, 222));
        assert!(!late_joiner(None, 4, 222));
    }

    #[test]
    fn a_stream_of_an_older_attempt_is_refused() {
        assert_eq!(admission(3, Some(4)), Admission::Refuse);
    }

    #[test]
    fn a_stream_of_a_newer_attempt_waits_for_this_worker_to_start_it() {
        assert_eq!(admission(5, Some(4)), Admission::Wait);
        assert_eq!(admission(1, None), Admission::Wait);
    }

    #[test]
    fn a_stream_of_the_running_attempt_is_served() {
        assert_eq!(admission(4, Some(4)), Admission::Serve);
    }
}
