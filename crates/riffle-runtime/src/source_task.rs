//! The loop of a task headed by a source: poll, watermark, barriers between batches.

use crate::chain::{Chain, ChainError};
use crate::exchange::OutputRouter;
use crate::graph::WatermarkStrategy;
use crate::metrics::{FlowCounters, JobMetrics};
use crate::protocol::{SnapshotAck, TaskExit, TaskIdentity, TaskOutcome, TaskSignal};
use crate::task::{advance_watermark, broadcast, flush, restore, take_snapshot, AlignedBarrier};
use riffle_core::arrow::array::{Array, AsArray};
use riffle_core::arrow::datatypes::TimestampNanosecondType;
use riffle_core::operator::OperatorCounters;
use riffle_core::{
    Barrier, BarrierKind, Epoch, EventTime, Message, OperatorId, Source, SourcePoll, Watermark,
};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

/// Everything a source task runs with.
pub(crate) struct SourceTask {
    pub(crate) identity: TaskIdentity,
    pub(crate) source_id: OperatorId,
    pub(crate) source: Box<dyn Source>,
    pub(crate) timestamp_index: usize,
    pub(crate) watermarks: WatermarkStrategy,
    pub(crate) chain: Chain,
    pub(crate) routers: Vec<OutputRouter>,
    pub(crate) barriers: UnboundedReceiver<Barrier>,
    pub(crate) acks: Option<UnboundedSender<SnapshotAck>>,
    pub(crate) metrics: Arc<JobMetrics>,
    /// Watermark of the checkpoint this subtask restored, if any.
    pub(crate) restored_watermark: Option<EventTime>,
    /// The source subtask's counters (checkpointed with its offsets).
    pub(crate) counters: Arc<OperatorCounters>,
    /// What the source emits (for metrics).
    pub(crate) flow: Arc<FlowCounters>,
    /// Checkpoints on: once restored, say so here; at end of input, announce it here
    /// and wait for the [`BarrierKind::EndOfInput`] barrier that commits the remaining
    /// output.
    pub(crate) signals: Option<UnboundedSender<TaskSignal>>,
}

/// How far a source's idle frontier moves before the watermark follows it (100 ms).
const IDLE_FRONTIER_STEP: EventTime = 100_000_000;

fn max_event_time(batch: &riffle_core::RecordBatch, index: usize) -> Option<EventTime> {
    let column = batch
        .column(index)
        .as_primitive::<TimestampNanosecondType>();
    if column.null_count() == column.len() {
        return None;
    }
    riffle_core::arrow::compute::max(column)
}

impl SourceTask {
    fn failed(&self, error: riffle_core::Error) -> ChainError {
        ChainError {
            operator: self.source_id.clone(),
            error,
        }
    }

    /// Snapshots the source and its chain at `barrier` and forwards the barrier.
    async fn checkpoint(&mut self, barrier: Barrier, watermark: EventTime) -> TaskOutcome<()> {
        let states = match self.source.snapshot(barrier.epoch) {
            Ok(state) => vec![(self.source_id.clone(), state)],
            Err(e) => return Err(self.failed(e).into()),
        };
        take_snapshot(
            &self.identity,
            &mut self.chain,
            &self.routers,
            &self.acks,
            AlignedBarrier {
                barrier,
                alignment: Duration::ZERO,
                watermark,
            },
            states,
            vec![(self.source_id.clone(), self.counters.values())],
        )
        .await
    }

    pub(crate) async fn run(mut self) -> TaskOutcome<TaskExit> {
        let delay =
            i64::try_from(self.watermarks.max_out_of_orderness.as_nanos()).unwrap_or(i64::MAX);
        restore(&mut self.chain, self.signals.as_ref())?;
        let mut emitted_watermark = EventTime::MIN;
        if let Some(watermark) = self.restored_watermark {
            emitted_watermark = watermark;
            advance_watermark(&mut self.chain, &mut self.routers, watermark).await?;
        }
        let mut idle_since: Option<Instant> = None;
        let mut idle_announced = false;
        let mut notified = 0;
        // A stop-with-savepoint barrier went out: the source ends without firing what
        // is still open (the savepoint holds it).
        let mut stopped = false;
        'run: loop {
            while let Ok(barrier) = self.barriers.try_recv() {
                if let BarrierKind::StopWithSavepoint { drain } = barrier.kind {
                    if drain && emitted_watermark < EventTime::MAX {
                        emitted_watermark = EventTime::MAX;
                        advance_watermark(&mut self.chain, &mut self.routers, EventTime::MAX)
                            .await?;
                    }
                    self.checkpoint(barrier, emitted_watermark).await?;
                    stopped = true;
                    break 'run;
                }
                self.checkpoint(barrier, emitted_watermark).await?;
            }
            let completed = self.metrics.completed().map_or(0, |e| e.0);
            if completed > notified {
                notified = completed;
                if let Err(e) = self.source.on_checkpoint_complete(Epoch(completed)) {
                    return Err(self.failed(e).into());
                }
            }
            let poll = match self.source.poll_next() {
                Ok(p) => p,
                Err(e) => return Err(self.failed(e).into()),
            };
            match poll {
                SourcePoll::Batch(batch) => {
                    idle_since = None;
                    idle_announced = false;
                    let max_seen = max_event_time(&batch, self.timestamp_index);
                    self.metrics
                        .source_rows
                        .fetch_add(batch.num_rows() as u64, Ordering::Relaxed);
                    self.flow.emitted(std::slice::from_ref(&batch));
                    self.chain.on_batch(0, batch)?;
                    flush(&mut self.chain, &mut self.routers).await?;
                    // A chain that ends in a sink never waits on a channel; yield so
                    // the coordinator and other tasks on this worker get to run.
                    tokio::task::yield_now().await;
                    if let Some(max_seen) = max_seen {
                        self.metrics
                            .source_max_event_time
                            .fetch_max(max_seen, Ordering::Relaxed);
                    }
                    let frontier = self.source.event_time_frontier().or(max_seen);
                    if let Some(frontier) = frontier {
                        let watermark = frontier.saturating_sub(delay);
                        if watermark > emitted_watermark {
                            emitted_watermark = watermark;
                            advance_watermark(&mut self.chain, &mut self.routers, watermark)
                                .await?;
                        }
                    }
                }
                SourcePoll::Pending => {
                    if let Some(frontier) = self.source.idle_frontier() {
                        // Not every millisecond: a tenth of a second is fine for windows.
                        if frontier.saturating_sub(IDLE_FRONTIER_STEP) > emitted_watermark {
                            emitted_watermark = frontier;
                            advance_watermark(&mut self.chain, &mut self.routers, frontier).await?;
                        }
                    }
                    let since = *idle_since.get_or_insert_with(Instant::now);
                    if let Some(timeout) = self.watermarks.idle_timeout {
                        if !idle_announced && since.elapsed() >= timeout {
                            idle_announced = true;
                            // Rows a chained operator holds for this source's watermark
                            // go first: downstream stops waiting for it once idle.
                            self.chain.on_idle()?;
                            flush(&mut self.chain, &mut self.routers).await?;
                            broadcast(&self.routers, Message::Watermark(Watermark::Idle)).await?;
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                SourcePoll::End => break,
            }
        }
        if let Some(ended) = self.signals.take().filter(|_| !stopped) {
            // Exactly-once: fire everything, then wait for the barrier whose epoch
            // commits it; any periodic barrier before that one is taken as usual.
            if emitted_watermark < EventTime::MAX {
                emitted_watermark = EventTime::MAX;
                advance_watermark(&mut self.chain, &mut self.routers, EventTime::MAX).await?;
            }
            let _ = ended.send(TaskSignal::InputEnded);
            while let Some(barrier) = self.barriers.recv().await {
                self.checkpoint(barrier, emitted_watermark).await?;
                if barrier.kind == BarrierKind::EndOfInput
                    || matches!(barrier.kind, BarrierKind::StopWithSavepoint { .. })
                {
                    stopped = matches!(barrier.kind, BarrierKind::StopWithSavepoint { .. });
                    break;
                }
            }
        }
        if emitted_watermark < EventTime::MAX && !stopped {
            self.chain.on_watermark(EventTime::MAX)?;
        }
        let sink = self.chain.on_end()?;
        flush(&mut self.chain, &mut self.routers).await?;
        broadcast(&self.routers, Message::End).await?;
        Ok(TaskExit { sink })
    }
}
