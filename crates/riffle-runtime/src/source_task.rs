//! The loop of a task headed by a source: poll, watermark, barriers between batches.

use crate::chain::{Chain, ChainError};
use crate::exchange::OutputRouter;
use crate::graph::WatermarkStrategy;
use crate::job::{SnapshotAck, TaskExit, TaskIdentity, TaskOutcome};
use crate::metrics::JobMetrics;
use crate::task::{advance_watermark, broadcast, flush, take_snapshot};
use riffle_core::arrow::array::{Array, AsArray};
use riffle_core::arrow::datatypes::TimestampNanosecondType;
use riffle_core::{Barrier, EventTime, Message, OperatorId, Source, SourcePoll, Watermark};
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
}

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

    pub(crate) async fn run(mut self) -> TaskOutcome<TaskExit> {
        let delay =
            i64::try_from(self.watermarks.max_out_of_orderness.as_nanos()).unwrap_or(i64::MAX);
        let mut emitted_watermark = EventTime::MIN;
        let mut idle_since: Option<Instant> = None;
        let mut idle_announced = false;
        loop {
            while let Ok(barrier) = self.barriers.try_recv() {
                let states = match self.source.snapshot() {
                    Ok(state) => vec![(self.source_id.clone(), state)],
                    Err(e) => return Err(self.failed(e).into()),
                };
                take_snapshot(
                    &self.identity,
                    &mut self.chain,
                    &self.routers,
                    &self.acks,
                    barrier,
                    Duration::ZERO,
                    states,
                )
                .await?;
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
                    self.chain.on_batch(0, batch)?;
                    flush(&mut self.chain, &mut self.routers).await?;
                    if let Some(max_seen) = max_seen {
                        self.metrics
                            .source_max_event_time
                            .fetch_max(max_seen, Ordering::Relaxed);
                        let watermark = max_seen.saturating_sub(delay);
                        if watermark > emitted_watermark {
                            emitted_watermark = watermark;
                            advance_watermark(&mut self.chain, &mut self.routers, watermark)
                                .await?;
                        }
                    }
                }
                SourcePoll::Pending => {
                    let since = *idle_since.get_or_insert_with(Instant::now);
                    if let Some(timeout) = self.watermarks.idle_timeout {
                        if !idle_announced && since.elapsed() >= timeout {
                            idle_announced = true;
                            broadcast(&self.routers, Message::Watermark(Watermark::Idle)).await?;
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                SourcePoll::End => break,
            }
        }
        if emitted_watermark < EventTime::MAX {
            self.chain.on_watermark(EventTime::MAX)?;
        }
        let sink = self.chain.on_end()?;
        flush(&mut self.chain, &mut self.routers).await?;
        broadcast(&self.routers, Message::End).await?;
        Ok(TaskExit { sink })
    }
}
