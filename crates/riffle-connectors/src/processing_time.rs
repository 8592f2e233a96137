//! Processing time at the source: a wrapper that stamps each row's event time with the
//! wall clock when the source reads it, and whose watermark follows the clock even
//! while nothing arrives. A pipeline whose windows run on `PROCTIME()` reads its sources
//! this way (docs/from-flink.md, "Processing time"). Offsets are the wrapped source's,
//! so a restore replays exactly the rows after the checkpoint; the replayed rows are
//! stamped with the time of the replay, as Flink's processing time would be.

use riffle_core::arrow::array::{ArrayRef, TimestampNanosecondArray};
use riffle_core::{
    Epoch, EventTime, OperatorContext, OperatorState, RecordBatch, Result, Source, SourceFactory,
    SourcePoll, StreamSchema, TimeBounds,
};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Builds processing-time subtasks of a source.
pub struct ProcessingTimeSourceFactory {
    inner: Arc<dyn SourceFactory>,
}

impl ProcessingTimeSourceFactory {
    /// `inner`'s rows, timed by the clock instead of their event-time column.
    pub fn new(inner: Arc<dyn SourceFactory>) -> Self {
        Self { inner }
    }
}

impl SourceFactory for ProcessingTimeSourceFactory {
    fn describe(&self) -> String {
        format!("{}, in processing time", self.inner.describe())
    }

    fn output_schema(&self) -> &StreamSchema {
        self.inner.output_schema()
    }

    fn input_listing(&self) -> Option<String> {
        self.inner.input_listing()
    }

    fn can_rescale(&self) -> bool {
        self.inner.can_rescale()
    }

    fn restores_from_every_subtask(&self) -> bool {
        self.inner.restores_from_every_subtask()
    }

    fn reading_only(&self, used: &[usize]) -> Option<Arc<dyn SourceFactory>> {
        let inner = self.inner.reading_only(used)?;
        Some(Arc::new(Self::new(inner)))
    }

    fn reading_times_within(
        &self,
        column: usize,
        bounds: TimeBounds,
    ) -> Option<Arc<dyn SourceFactory>> {
        let inner = self.inner.reading_times_within(column, bounds)?;
        Some(Arc::new(Self::new(inner)))
    }

    fn create(&self, ctx: &OperatorContext) -> Result<Box<dyn Source>> {
        Ok(Box::new(ProcessingTimeSource {
            inner: self.inner.create(ctx)?,
            timestamp: self.inner.output_schema().timestamp_index,
        }))
    }
}

struct ProcessingTimeSource {
    inner: Box<dyn Source>,
    timestamp: usize,
}

/// The wall clock in nanoseconds since the epoch.
fn now() -> EventTime {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

impl Source for ProcessingTimeSource {
    fn poll_next(&mut self) -> Result<SourcePoll> {
        Ok(match self.inner.poll_next()? {
            SourcePoll::Batch(batch) => {
                let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
                let stamp = TimestampNanosecondArray::from_value(now(), batch.num_rows())
                    .with_timezone("UTC");
                columns[self.timestamp] = Arc::new(stamp);
                SourcePoll::Batch(RecordBatch::try_new(batch.schema(), columns)?)
            }
            other => other,
        })
    }

    fn snapshot(&mut self, epoch: Epoch) -> Result<OperatorState> {
        self.inner.snapshot(epoch)
    }

    fn event_time_frontier(&self) -> Option<EventTime> {
        Some(now())
    }

    fn idle_frontier(&self) -> Option<EventTime> {
        Some(now())
    }

    fn restore(&mut self, state: OperatorState) -> Result<()> {
        self.inner.restore(state)
    }

    fn on_checkpoint_complete(&mut self, epoch: Epoch) -> Result<()> {
        self.inner.on_checkpoint_complete(epoch)
    }
}
