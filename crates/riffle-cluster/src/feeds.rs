//! The receiving ends of streams from other workers: a channel into a local task, acks
//! into the coordinator (on worker 0), barriers into this worker's sources.

use crate::ack;
use crate::protocol::{ChannelControl, FromCoordinator, ToCoordinator};
use crate::service::LocalAttempt;
use crate::wire::{Decoded, StreamDecoder};
use arrow_flight::FlightData;
use riffle_core::{Epoch, Message};
use riffle_runtime::ChannelKey;
use tonic::{Status, Streaming};

fn protocol(e: crate::error::ClusterError) -> Status {
    Status::invalid_argument(e.to_string())
}

/// The next message of a stream from another worker (`None` at its end). A broken
/// stream fails this worker's attempt, naming `what` broke.
async fn received(
    stream: &mut Streaming<FlightData>,
    attempt: &LocalAttempt,
    what: impl Fn() -> String,
) -> Result<Option<FlightData>, Status> {
    stream.message().await.inspect_err(|e| {
        crate::links::peer_failed(
            &attempt.stopper,
            format!("{} broke: {}", what(), e.message()),
        )
    })
}

/// Fails the attempt because a stream ended before it should have (`why`).
fn ended_early(attempt: &LocalAttempt, why: &str) -> Result<(), Status> {
    crate::links::peer_failed(&attempt.stopper, why.to_string());
    Err(Status::aborted("the stream ended early"))
}

/// Feeds a remote channel into the local task it belongs to.
pub(crate) async fn feed_channel(
    attempt: &LocalAttempt,
    key: ChannelKey,
    from: usize,
    mut stream: Streaming<FlightData>,
) -> Result<(), Status> {
    let sender = attempt
        .incoming
        .lock()
        .map_err(|_| Status::internal("poisoned"))?
        .remove(&key)
        .ok_or_else(|| Status::failed_precondition(format!("no task here waits for the {key}")))?;
    let mut decoder = StreamDecoder::default();
    let what = || format!("worker {from}'s {key}");
    loop {
        let Some(data) = received(&mut stream, attempt, what).await? else {
            return ended_early(
                attempt,
                &format!("{} ended before its end of input", what()),
            );
        };
        let message = match decoder.decode::<ChannelControl>(&data).map_err(protocol)? {
            None => continue,
            Some(Decoded::Batch(b)) => Message::Data(b),
            Some(Decoded::Control(ChannelControl::Watermark(w))) => Message::Watermark(w),
            Some(Decoded::Control(ChannelControl::Barrier(b))) => Message::Barrier(b),
            Some(Decoded::Control(ChannelControl::End)) => {
                let _ = sender.send(Message::End).await;
                return Ok(());
            }
        };
        if sender.send(message).await.is_err() {
            return Err(Status::cancelled("the receiving task is gone"));
        }
    }
}

/// Passes another worker's acks and task signals to the coordinator.
pub(crate) async fn feed_acks(
    attempt: &LocalAttempt,
    from: usize,
    mut stream: Streaming<FlightData>,
) -> Result<(), Status> {
    let (acks, signals) = {
        let mut inbox = attempt
            .inbox
            .lock()
            .map_err(|_| Status::internal("poisoned"))?;
        let Some(open) = inbox.as_mut() else {
            return Err(Status::failed_precondition(
                "acks go to worker 0, or every worker's acks stream is already open",
            ));
        };
        let senders = (open.acks.clone(), open.signals.clone());
        open.expected = open.expected.saturating_sub(1);
        if open.expected == 0 {
            *inbox = None;
        }
        senders
    };
    let mut decoder = StreamDecoder::default();
    let what = || format!("the acks stream of worker {from}");
    loop {
        let Some(data) = received(&mut stream, attempt, what).await? else {
            return Ok(());
        };
        match decoder.decode::<ToCoordinator>(&data).map_err(protocol)? {
            None => {}
            Some(Decoded::Control(ToCoordinator::Signal(signal))) => {
                let _ = signals.send(signal);
            }
            Some(Decoded::Control(ToCoordinator::Ack(header))) => {
                let _ = acks.send(ack::ack(header));
            }
            Some(Decoded::Batch(_)) => {
                return Err(Status::invalid_argument(
                    "state batches do not travel on the acks stream: each worker writes its own",
                ))
            }
        }
    }
}

/// Injects barriers from the coordinator at this worker's sources.
pub(crate) async fn feed_barriers(
    attempt: &LocalAttempt,
    mut stream: Streaming<FlightData>,
) -> Result<(), Status> {
    let mut decoder = StreamDecoder::default();
    let what = || "the barrier stream from worker 0".to_string();
    loop {
        // Without the coordinator no checkpoint completes: the attempt is over. A job
        // with no channel from worker 0 to this worker hears of it only here.
        let Some(data) = received(&mut stream, attempt, what).await? else {
            return ended_early(
                attempt,
                &format!("{} ended before its coordinator did", what()),
            );
        };
        match decoder.decode::<FromCoordinator>(&data).map_err(protocol)? {
            Some(Decoded::Control(FromCoordinator::Barrier(barrier))) => {
                attempt.barriers.inject(barrier)
            }
            Some(Decoded::Control(FromCoordinator::Committed(epoch))) => {
                attempt.metrics.checkpoint_completed(Epoch(epoch))
            }
            Some(Decoded::Control(FromCoordinator::End)) => return Ok(()),
            Some(Decoded::Batch(_)) | None => {}
        }
    }
}
