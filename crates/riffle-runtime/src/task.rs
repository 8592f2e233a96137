//! The loop of a task fed by channels: watermarks, barrier alignment, end of input.

use crate::align::{Alignment, BarrierAligner};
use crate::chain::{Chain, ChainError};
use crate::exchange::OutputRouter;
use crate::protocol::{
    ChainOrCancel, SnapshotAck, TaskExit, TaskIdentity, TaskOutcome, TaskSignal,
};
use crate::watermark::WatermarkTracker;
use riffle_core::{Barrier, BarrierKind, Committable, EventTime, Message, Watermark};
use std::future::poll_fn;
use std::task::Poll;
use std::time::Duration;
use tokio::sync::mpsc::{Receiver, UnboundedSender};

/// One input channel of a task and which logical input of the head operator it feeds.
pub(crate) struct InputChannel {
    pub(crate) logical_input: usize,
    pub(crate) receiver: Receiver<Message>,
}

/// Sends what the chain emitted to every output edge.
/// Restores the chain's state, then tells the coordinator (`signals`, with
/// checkpoints) that this task did: no epoch starts before every task has.
pub(crate) fn restore(
    chain: &mut Chain,
    signals: Option<&UnboundedSender<TaskSignal>>,
) -> TaskOutcome<()> {
    chain.restore_pending()?;
    if let Some(signals) = signals {
        let _ = signals.send(TaskSignal::Restored);
    }
    Ok(())
}

pub(crate) async fn flush(chain: &mut Chain, routers: &mut [OutputRouter]) -> TaskOutcome<()> {
    let tail = chain.tail().clone();
    let routing_failed = |error| {
        ChainOrCancel::Failed(ChainError {
            operator: tail.clone(),
            error,
        })
    };
    for batch in chain.take_emitted() {
        match &mut *routers {
            [] => {}
            [only] => only.send_batch(batch).await.map_err(routing_failed)??,
            many => {
                for router in many.iter_mut() {
                    router
                        .send_batch(batch.clone())
                        .await
                        .map_err(routing_failed)??;
                }
            }
        }
    }
    Ok(())
}

pub(crate) async fn broadcast(routers: &[OutputRouter], message: Message) -> TaskOutcome<()> {
    for router in routers {
        router.broadcast(message.clone()).await?;
    }
    Ok(())
}

pub(crate) async fn advance_watermark(
    chain: &mut Chain,
    routers: &mut [OutputRouter],
    watermark: EventTime,
) -> TaskOutcome<()> {
    let watermark = chain.on_watermark(watermark)?;
    flush(chain, routers).await?;
    broadcast(routers, Message::Watermark(Watermark::EventTime(watermark))).await
}

/// A barrier every input delivered, with what the task knew at that moment.
pub(crate) struct AlignedBarrier {
    pub(crate) barrier: Barrier,
    /// Time from the first input's barrier to the last one's.
    pub(crate) alignment: Duration,
    /// The task's input watermark at the barrier.
    pub(crate) watermark: EventTime,
}

/// Snapshots the chain at an aligned barrier, acks it, and forwards the barrier.
pub(crate) async fn take_snapshot(
    identity: &TaskIdentity,
    chain: &mut Chain,
    routers: &[OutputRouter],
    acks: &Option<UnboundedSender<SnapshotAck>>,
    aligned: AlignedBarrier,
    mut states: Vec<(riffle_core::OperatorId, riffle_core::OperatorState)>,
    mut counters: Vec<(riffle_core::OperatorId, riffle_core::CounterValues)>,
) -> TaskOutcome<()> {
    let AlignedBarrier {
        barrier,
        alignment,
        watermark,
    } = aligned;
    let started = std::time::Instant::now();
    states.extend(chain.snapshot(barrier.epoch)?);
    let held_watermarks = chain.held_watermarks(watermark);
    counters.extend(chain.counters());
    let committables = chain
        .pre_commit(barrier.epoch)?
        .map(|(sink, payload)| Committable {
            sink: sink.0,
            subtask: identity.subtask,
            epoch: barrier.epoch,
            payload,
        })
        .into_iter()
        .collect();
    if let Some(acks) = acks {
        // A closed ack channel means nobody collects snapshots: not this task's failure.
        let _ = acks.send(SnapshotAck {
            task: identity.name.clone(),
            subtask: identity.subtask,
            epoch: barrier.epoch,
            states,
            committables,
            watermark,
            held_watermarks,
            counters,
            alignment,
            snapshot: started.elapsed(),
            written: Vec::new(),
        });
    }
    broadcast(routers, Message::Barrier(barrier)).await
}

/// Receives the next message from any input that is not blocked by alignment.
/// `None` when every open input is blocked or closed.
async fn recv_any(
    inputs: &mut [InputChannel],
    skip: &[bool],
    start: &mut usize,
) -> Option<(usize, Option<Message>)> {
    let n = inputs.len();
    poll_fn(|cx| {
        let mut any_open = false;
        for k in 0..n {
            let i = (*start + k) % n;
            if skip[i] {
                continue;
            }
            any_open = true;
            match inputs[i].receiver.poll_recv(cx) {
                Poll::Ready(message) => {
                    // Start the next scan after this input so no input starves.
                    *start = (i + 1) % n;
                    return Poll::Ready(Some((i, message)));
                }
                Poll::Pending => {}
            }
        }
        if any_open {
            Poll::Pending
        } else {
            Poll::Ready(None)
        }
    })
    .await
}

/// Runs a task whose head reads channels until every input ended.
pub(crate) async fn run_channel_task(
    identity: TaskIdentity,
    mut inputs: Vec<InputChannel>,
    mut chain: Chain,
    mut routers: Vec<OutputRouter>,
    acks: Option<UnboundedSender<SnapshotAck>>,
    signals: Option<UnboundedSender<TaskSignal>>,
    restored_watermark: Option<EventTime>,
) -> TaskOutcome<TaskExit> {
    restore(&mut chain, signals.as_ref())?;
    let n = inputs.len();
    let mut tracker = WatermarkTracker::new(n);
    if let Some(watermark) = restored_watermark {
        // Resume where the checkpoint left event time, so rows that were late before the
        // crash stay late (a closed window is never re-opened and re-emitted).
        tracker.start_at(watermark);
        advance_watermark(&mut chain, &mut routers, watermark).await?;
    }
    let mut aligner = BarrierAligner::new(n);
    let mut ended = vec![false; n];
    let mut skip = vec![false; n];
    let mut start = 0;
    // After a stop-with-savepoint barrier the inputs end without their final watermark:
    // what is still open stays in the savepoint instead of firing.
    let mut stopping = false;
    loop {
        for i in 0..n {
            skip[i] = ended[i] || aligner.is_blocked(i);
        }
        let Some((i, message)) = recv_any(&mut inputs, &skip, &mut start).await else {
            break;
        };
        match message {
            Some(Message::Data(batch)) => {
                chain.on_batch(inputs[i].logical_input, batch)?;
                flush(&mut chain, &mut routers).await?;
            }
            Some(Message::Watermark(w)) => {
                if let Some(advanced) = tracker.update(i, w) {
                    advance_watermark(&mut chain, &mut routers, advanced).await?;
                }
            }
            Some(Message::Barrier(barrier)) => {
                let aligned = aligner.on_barrier(i, barrier).map_err(|source| {
                    tracing::warn!(task = %identity.name, subtask = identity.subtask, "{source}");
                    ChainOrCancel::Protocol(source)
                })?;
                if let Alignment::Complete { barrier, alignment } = aligned {
                    stopping |= matches!(barrier.kind, BarrierKind::StopWithSavepoint { .. });
                    take_snapshot(
                        &identity,
                        &mut chain,
                        &routers,
                        &acks,
                        AlignedBarrier {
                            barrier,
                            alignment,
                            watermark: tracker.current(),
                        },
                        vec![],
                        vec![],
                    )
                    .await?;
                }
            }
            Some(Message::End) => {
                ended[i] = true;
                if let Alignment::Complete { barrier, alignment } = aligner.on_end(i) {
                    stopping |= matches!(barrier.kind, BarrierKind::StopWithSavepoint { .. });
                    take_snapshot(
                        &identity,
                        &mut chain,
                        &routers,
                        &acks,
                        AlignedBarrier {
                            barrier,
                            alignment,
                            watermark: tracker.current(),
                        },
                        vec![],
                        vec![],
                    )
                    .await?;
                }
                if let Some(advanced) = tracker.end(i).filter(|_| !stopping) {
                    advance_watermark(&mut chain, &mut routers, advanced).await?;
                }
            }
            // The sender vanished without End: an upstream task failed or was cancelled.
            None => return Err(ChainOrCancel::Cancelled),
        }
        if ended.iter().all(|e| *e) {
            break;
        }
    }
    let sink = chain.on_end()?;
    flush(&mut chain, &mut routers).await?;
    broadcast(&routers, Message::End).await?;
    Ok(TaskExit { sink })
}
