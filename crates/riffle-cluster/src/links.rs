//! The sending ends between workers: a connection per peer, one stream per remote
//! channel, this worker's acks to worker 0, and worker 0's barriers to the others.

use crate::ack;
use crate::error::{ClusterError, ClusterResult};
use crate::protocol::{
    AttemptRequest, ChannelControl, Decision, FromCoordinator, Hello, JobSecret, SavepointAsk,
    StreamKind, ToCoordinator,
};
use crate::service::{ATTEMPT_ACTION, SAVEPOINT_ACTION};
use crate::tls::{host_of, ExchangeTls};
use crate::wire::StreamEncoder;
use arrow_flight::flight_service_client::FlightServiceClient;
use arrow_flight::{Action, FlightData, FlightDescriptor};
use futures::stream::{self, StreamExt};
use riffle_core::Message;
use riffle_runtime::handle::JobStopper;
use riffle_runtime::{FileReuse, JobMetrics, SnapshotAck, TaskSignal};
use riffle_state::CheckpointStore;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::{Receiver, UnboundedReceiver};
use tokio::task::JoinHandle;
use tonic::transport::{Channel, Endpoint};

/// How often an idle connection is pinged, and how long a ping may go unanswered.
pub const KEEP_ALIVE: Duration = Duration::from_secs(1);
/// See [`KEEP_ALIVE`].
pub const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(5);

/// HTTP/2 flow-control window of each stream, bytes.
pub const STREAM_WINDOW: u32 = 4 << 20;
/// HTTP/2 flow-control window of each connection, bytes.
pub const CONNECTION_WINDOW: u32 = 16 << 20;

/// The largest HTTP/2 frame a worker accepts, bytes: a batch of rows crosses in a few
/// frames, not dozens of HTTP/2's default 16 KiB.
pub const FRAME_SIZE: u32 = 1 << 20;

/// A connection to one worker, shared by every stream to it (HTTP/2 multiplexes them,
/// each with its own flow-control window: a slow receiver slows only its senders).
pub type Peer = FlightServiceClient<Channel>;

/// Connects to the worker at `address` (`host:port`), retrying while it starts, for up
/// to `patience`; over mutual TLS when `tls` is given (the worker's certificate must
/// name the address's host).
///
/// # Errors
/// The address is malformed, or nothing answered in time.
pub async fn connect(
    address: &str,
    tls: Option<&ExchangeTls>,
    patience: Duration,
) -> ClusterResult<Peer> {
    let failed = |message: String| ClusterError::Connect {
        address: address.to_string(),
        message,
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let mut endpoint = Endpoint::from_shared(format!("{scheme}://{address}"))
        .map_err(|e| failed(e.to_string()))?;
    if let Some(tls) = tls {
        endpoint = endpoint
            .tls_config(tls.client(host_of(address)))
            .map_err(|e| failed(format!("TLS: {e}")))?;
    }
    let endpoint = endpoint
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_secs(2))
        // A worker that stops answering (paused, cut off) fails its streams within
        // seconds, which fails the attempt everywhere.
        .http2_keep_alive_interval(KEEP_ALIVE)
        .keep_alive_timeout(KEEP_ALIVE_TIMEOUT)
        .keep_alive_while_idle(true)
        // Windows of a few batches: HTTP/2's default 64 KiB stalls a stream every round
        // trip. Backpressure still holds: a window is bounded, and refills only as the
        // receiver reads.
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_frame_size(FRAME_SIZE);
    let started = Instant::now();
    loop {
        // A worker that took the connection but does not finish the handshake within
        // the keep-alive timeout is paused or cut off, not starting: the attempt fails
        // now, as its keep-alive would fail an open connection.
        let Ok(connected) = tokio::time::timeout(KEEP_ALIVE_TIMEOUT, endpoint.connect()).await
        else {
            return Err(failed(format!(
                "took the connection but did not finish the handshake in {KEEP_ALIVE_TIMEOUT:?} (paused or cut off?)"
            )));
        };
        match connected {
            Ok(channel) => {
                return Ok(FlightServiceClient::new(channel)
                    .max_decoding_message_size(usize::MAX)
                    .max_encoding_message_size(usize::MAX))
            }
            Err(e) if started.elapsed() >= patience => {
                return Err(failed(format!(
                    "not reachable for {patience:?}: {}",
                    error_chain(&e)
                )))
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// An error with its causes (a TLS failure hides under "transport error").
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        text.push_str(&format!(": {e}"));
        cause = e.source();
    }
    text
}

/// Asks worker 0 what to do next: run an attempt of generation `asked.at_least` or
/// newer, or stop because the job finished. While worker 0 answers that it has not
/// decided, this asks again for as long as it takes; while worker 0 cannot be reached
/// (it is restarting), for up to `patience`.
///
/// # Errors
/// Worker 0 did not answer for `patience`, or answered nonsense.
pub async fn fetch_decision(
    peer: &mut Peer,
    asked: AttemptRequest,
    patience: Duration,
) -> ClusterResult<Decision> {
    let mut last_answer = Instant::now();
    loop {
        let action = Action {
            r#type: ATTEMPT_ACTION.into(),
            body: serde_json::to_vec(&asked)
                .map_err(ClusterError::Json)?
                .into(),
        };
        let status = match peer.do_action(action).await {
            Ok(results) => {
                let mut results = results.into_inner();
                let result = results
                    .message()
                    .await?
                    .ok_or_else(|| ClusterError::Protocol("worker 0 sent no decision".into()))?;
                match serde_json::from_slice(&result.body).map_err(ClusterError::Json)? {
                    Decision::Pending => {
                        last_answer = Instant::now();
                        continue;
                    }
                    decided => return Ok(decided),
                }
            }
            Err(status) => status,
        };
        // Worker 0 is restarting or still recovering: ask again while patience lasts.
        if last_answer.elapsed() >= patience {
            return Err(status.into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn opening(hello: &Hello) -> ClusterResult<FlightData> {
    let cmd = serde_json::to_vec(hello).map_err(ClusterError::Json)?;
    Ok(FlightData {
        flight_descriptor: Some(FlightDescriptor::new_cmd(cmd)),
        ..FlightData::default()
    })
}

/// Sends `messages` as one stream opened by `hello`; an error ends it, and `failed`
/// says why.
fn put(
    peer: Peer,
    hello: Hello,
    messages: stream::BoxStream<'static, Vec<FlightData>>,
    failed: impl Fn(String) + Send + 'static,
) -> futures::future::BoxFuture<'static, ()> {
    Box::pin(async move {
        let what = match hello.stream {
            StreamKind::Channel(key) => format!("sending the {key}"),
            StreamKind::Acks => "sending acks to worker 0".to_string(),
            StreamKind::Barriers => "sending barriers".to_string(),
        };
        let first = match opening(&hello) {
            Ok(first) => first,
            Err(e) => return failed(format!("{what}: {e}")),
        };
        let body = stream::iter([first])
            .chain(messages.flat_map(stream::iter))
            .map(Ok);
        let mut client = arrow_flight::FlightClient::new_from_inner(peer);
        match client.do_put(body).await {
            Ok(mut results) => {
                // The receiver answers once it has taken the whole stream.
                while let Some(result) = results.next().await {
                    if let Err(e) = result {
                        return failed(format!("{what}: {}", reason(&e)));
                    }
                }
            }
            Err(e) => failed(format!("{what}: {}", reason(&e))),
        }
    })
}

/// What went wrong with a call, without the transport's layers of wrapping.
fn reason(error: &arrow_flight::error::FlightError) -> String {
    match error {
        arrow_flight::error::FlightError::Tonic(status) => status.message().to_string(),
        other => other.to_string(),
    }
}

/// The encoded messages, or `None` (ending the stream) after failing the attempt.
fn encoded(
    stopper: &JobStopper,
    result: ClusterResult<Vec<FlightData>>,
) -> Option<Vec<FlightData>> {
    match result {
        Ok(data) => Some(data),
        Err(e) => {
            peer_failed(stopper, format!("sending to another worker: {e}"));
            None
        }
    }
}

/// Ships the local channel `receiver` to the task on `peer` that `hello` names,
/// counting the bytes it sends into `sent`.
pub fn ship_channel(
    peer: Peer,
    hello: Hello,
    receiver: Receiver<Message>,
    stopper: JobStopper,
    sent: Arc<AtomicU64>,
) -> JoinHandle<()> {
    let encoding = stopper.clone();
    let messages = stream::unfold(
        (receiver, StreamEncoder::default(), false),
        move |(mut receiver, mut encoder, ended)| {
            let stopper = encoding.clone();
            let sent = sent.clone();
            async move {
                if ended {
                    return None;
                }
                let message = receiver.recv().await?;
                let ends = matches!(message, Message::End);
                let data = match message {
                    Message::Data(batch) => encoder.batch(&batch),
                    Message::Watermark(w) => encoder
                        .control(&ChannelControl::Watermark(w))
                        .map(|d| vec![d]),
                    Message::Barrier(b) => encoder
                        .control(&ChannelControl::Barrier(b))
                        .map(|d| vec![d]),
                    Message::End => encoder.control(&ChannelControl::End).map(|d| vec![d]),
                };
                let data = encoded(&stopper, data)?;
                let bytes: usize = data.iter().map(wire_bytes).sum();
                sent.fetch_add(bytes as u64, Ordering::Relaxed);
                Some((data, (receiver, encoder, ends)))
            }
        },
    );
    tokio::spawn(put(peer, hello, messages.boxed(), fail_attempt(stopper)))
}

/// Fails the attempt with the reason a stream broke.
fn fail_attempt(stopper: JobStopper) -> impl Fn(String) + Send + 'static {
    move |message| peer_failed(&stopper, message)
}

/// Fails the attempt because a stream between workers broke.
pub fn peer_failed(stopper: &JobStopper, message: String) {
    stopper.fail_with(riffle_runtime::RuntimeError::Peer(message));
}

/// The bytes a message puts on the wire (before HTTP/2 framing).
fn wire_bytes(data: &FlightData) -> usize {
    data.data_header.len() + data.data_body.len() + data.app_metadata.len()
}

/// What a worker sends its coordinator, in the order it happened.
enum Outgoing {
    Ack(SnapshotAck),
    Signal(TaskSignal),
}

/// Ships this worker's acks and task signals to the coordinator on worker 0, having
/// written each ack's state to `store` itself. The stream ends when both channels close
/// (every local task ended).
pub fn ship_acks(
    peer: Peer,
    hello: Hello,
    (store, reuse): (CheckpointStore, FileReuse),
    (acks, signals, metrics): (
        UnboundedReceiver<SnapshotAck>,
        Option<UnboundedReceiver<TaskSignal>>,
        Arc<JobMetrics>,
    ),
    stopper: JobStopper,
) -> JoinHandle<()> {
    let generation = hello.generation;
    let acks = stream::unfold(acks, |mut r| async move {
        r.recv().await.map(|a| (Outgoing::Ack(a), r))
    });
    let signals = stream::unfold(signals, |r| async move {
        let mut r = r?;
        r.recv().await.map(|s| (Outgoing::Signal(s), Some(r)))
    });
    let encoding = stopper.clone();
    let encoder = StreamEncoder::default();
    // One ack at a time: each may reuse files the one before recorded.
    let inputs = stream::select(acks, signals).boxed();
    let messages = stream::unfold(
        (inputs, reuse, metrics, store),
        move |(mut inputs, mut reuse, metrics, store)| async move {
            let message = match inputs.next().await? {
                Outgoing::Signal(s) => Ok(Some(ToCoordinator::Signal(s))),
                Outgoing::Ack(a) => {
                    let heard = metrics.completed();
                    ack::write_state((&store, generation), &mut reuse, heard, a)
                        .await
                        .map(|header| header.map(ToCoordinator::Ack))
                }
            };
            Some((message, (inputs, reuse, metrics, store)))
        },
    )
    .filter_map(move |message| {
        // A late ack, dropped, sends nothing.
        let message = message.transpose();
        let data = message.map(|m| m.and_then(|m| encoder.control(&m)).map(|d| vec![d]));
        futures::future::ready(data.and_then(|data| encoded(&encoding, data)))
    });
    tokio::spawn(put(peer, hello, messages.boxed(), fail_attempt(stopper)))
}

/// Ships the coordinator's barriers for `peer`'s source subtasks. A broken barrier
/// stream does not fail the attempt by itself: a worker that ends normally closes it
/// while worker 0 still runs, and a worker that died breaks its acks stream, which does.
pub fn ship_barriers(
    peer: Peer,
    hello: Hello,
    messages: UnboundedReceiver<FromCoordinator>,
    stopper: JobStopper,
) -> JoinHandle<()> {
    let encoder = StreamEncoder::default();
    let encoding = stopper.clone();
    let messages = stream::unfold(
        messages,
        |mut r| async move { r.recv().await.map(|m| (m, r)) },
    )
    .filter_map(move |m| {
        futures::future::ready(encoded(&encoding, encoder.control(&m).map(|d| vec![d])))
    });
    let lost = |message: String| tracing::debug!(%message, "barrier stream ended");
    tokio::spawn(put(peer, hello, messages.boxed(), lost))
}

/// The opening of a stream of `worker` for the attempt of `generation`.
pub fn hello(secret: &JobSecret, generation: u64, worker: usize, stream: StreamKind) -> Hello {
    Hello {
        secret: secret.clone(),
        generation,
        worker,
        stream,
    }
}

/// Passes savepoint requests made at this worker (its control endpoint) on to worker 0
/// at `leader`, whose coordinator takes them, and their answers back. Returns the
/// sender the control endpoint asks.
pub fn forward_savepoints(
    leader: String,
    tls: Option<ExchangeTls>,
    secret: JobSecret,
    patience: Duration,
) -> riffle_runtime::savepoint::SavepointSender {
    let (sender, mut requests) =
        tokio::sync::mpsc::unbounded_channel::<riffle_runtime::savepoint::SavepointRequest>();
    tokio::spawn(async move {
        while let Some(request) = requests.recv().await {
            let ask = SavepointAsk {
                secret: secret.clone(),
                label: request.label,
                stop: request.stop,
                drain: request.drain,
            };
            let answer = ask_leader(&leader, tls.as_ref(), patience, &ask).await;
            let _ = request.reply.send(answer);
        }
    });
    sender
}

/// One savepoint request to worker 0, and its answer.
async fn ask_leader(
    leader: &str,
    tls: Option<&ExchangeTls>,
    patience: Duration,
    ask: &SavepointAsk,
) -> Result<riffle_runtime::savepoint::SavepointDone, String> {
    let mut peer = connect(leader, tls, patience)
        .await
        .map_err(|e| format!("passing the savepoint request to worker 0: {e}"))?;
    let action = Action {
        r#type: SAVEPOINT_ACTION.into(),
        body: serde_json::to_vec(ask).map_err(|e| e.to_string())?.into(),
    };
    let mut results = peer
        .do_action(action)
        .await
        .map_err(|s| format!("worker 0: {}", s.message()))?
        .into_inner();
    let result = results
        .message()
        .await
        .map_err(|s| format!("worker 0: {}", s.message()))?
        .ok_or("worker 0 answered nothing")?;
    serde_json::from_slice(&result.body).map_err(|e| format!("worker 0's answer: {e}"))
}
