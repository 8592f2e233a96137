//! The peer-comparison source: `id = 0..N`, `k = id % 1000`, `v = id % 97`.
//!
//! Subtask `j` of `p` takes the contiguous id range `[j·N/p, (j+1)·N/p)`. So that all
//! subtasks walk the same timeline (as Flink's sequence source does), event time is the
//! position inside the range scaled by `p`: `(id − start) · p / 100` ms, i.e. 100,000
//! events per event-second over the whole job.

use riffle_core::arrow::array::{
    ArrayRef, Int64Array, TimestampMillisecondArray, TimestampNanosecondArray, UInt16Array,
    UInt64Array,
};
use riffle_core::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use riffle_core::state::KEY_GROUP_FIELD;
use riffle_core::{
    Error, OperatorContext, OperatorState, RecordBatch, Result, Source, SourceFactory, SourcePoll,
    StreamSchema,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Builds peer-job source subtasks.
pub struct PeerSourceFactory {
    events: u64,
    batch_rows: u64,
    schema: StreamSchema,
    pause: Option<PausePoint>,
    time_column: bool,
}

/// Holds every subtask after its first `after` events (it reports no data, without
/// ending) until the job is stopped; `reached` counts subtasks that got there. The
/// restart benchmark uses it to checkpoint a known amount of state.
#[derive(Debug, Clone)]
pub struct PausePoint {
    /// Events per subtask before the pause.
    pub after: u64,
    /// Subtasks that reached the pause.
    pub reached: Arc<AtomicUsize>,
}

impl PeerSourceFactory {
    /// A source of `events` rows in batches of `batch_rows`.
    pub fn new(events: u64, batch_rows: u64) -> Self {
        let schema = StreamSchema::with_timestamp(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("k", DataType::Int64, false),
            Field::new("v", DataType::Int64, false),
        ]);
        Self {
            events,
            batch_rows: batch_rows.max(1),
            schema,
            pause: None,
            time_column: false,
        }
    }

    /// The same rows with their event time as a visible column `ts` (milliseconds, as
    /// SQL's `TIMESTAMP(3)`), which SQL windows name. Event time is then whole
    /// milliseconds: `(id − start) · p / 100`, rounded down.
    pub fn with_time_column(mut self) -> Self {
        let mut fields: Vec<Field> = self
            .schema
            .schema
            .fields()
            .iter()
            .filter(|f| f.name() != riffle_core::TIMESTAMP_FIELD)
            .map(|f| f.as_ref().clone())
            .collect();
        fields.push(Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Millisecond, None),
            false,
        ));
        self.schema = StreamSchema::with_timestamp(fields);
        self.time_column = true;
        self
    }

    /// The same source, pausing at `pause` (not part of `describe`: a paused run and its
    /// resumed continuation are one pipeline).
    pub fn paused_at(mut self, pause: PausePoint) -> Self {
        self.pause = Some(pause);
        self
    }
}

impl SourceFactory for PeerSourceFactory {
    fn describe(&self) -> String {
        format!("peer({} events)", self.events)
    }

    fn output_schema(&self) -> &StreamSchema {
        &self.schema
    }

    fn create(&self, ctx: &OperatorContext) -> Result<Box<dyn Source>> {
        let p = ctx.parallelism as u64;
        let start = self.events * ctx.subtask as u64 / p;
        let end = self.events * (ctx.subtask as u64 + 1) / p;
        Ok(Box::new(PeerSource {
            schema: self.schema.clone(),
            start,
            next: start,
            end,
            parallelism: p,
            batch_rows: self.batch_rows,
            pause: self.pause.clone(),
            paused: false,
            time_column: self.time_column,
        }))
    }
}

struct PeerSource {
    schema: StreamSchema,
    start: u64,
    next: u64,
    end: u64,
    parallelism: u64,
    batch_rows: u64,
    pause: Option<PausePoint>,
    paused: bool,
    time_column: bool,
}

/// Nanoseconds of event time per event position: 1/100 ms.
const NANOS_PER_POSITION: i64 = 10_000;
const NANOS_PER_MS: i64 = 1_000_000;

impl Source for PeerSource {
    fn poll_next(&mut self) -> Result<SourcePoll> {
        if self.next >= self.end {
            return Ok(SourcePoll::End);
        }
        let mut stop = (self.next + self.batch_rows).min(self.end);
        if let Some(pause) = &self.pause {
            let at = self.start + pause.after;
            if self.next >= at {
                if !self.paused {
                    self.paused = true;
                    pause.reached.fetch_add(1, Ordering::SeqCst);
                }
                return Ok(SourcePoll::Pending);
            }
            stop = stop.min(at);
        }
        let ids: Vec<i64> = (self.next as i64..stop as i64).collect();
        let k: Vec<i64> = ids.iter().map(|id| id % 1000).collect();
        let v: Vec<i64> = ids.iter().map(|id| id % 97).collect();
        let scale = self.parallelism as i64 * NANOS_PER_POSITION;
        let start = self.start as i64;
        // With a visible `ts`, event time is whole milliseconds, the same in both columns.
        let (ts_ms, ts_ns): (Option<Vec<i64>>, Vec<i64>) = if self.time_column {
            let ms: Vec<i64> = ids
                .iter()
                .map(|id| (id - start) * scale / NANOS_PER_MS)
                .collect();
            let ns = ms.iter().map(|ms| ms * NANOS_PER_MS).collect();
            (Some(ms), ns)
        } else {
            (None, ids.iter().map(|id| (id - start) * scale).collect())
        };
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(ids)),
            Arc::new(Int64Array::from(k)),
            Arc::new(Int64Array::from(v)),
        ];
        if let Some(ms) = ts_ms {
            columns.push(Arc::new(TimestampMillisecondArray::from(ms)));
        }
        columns.push(Arc::new(
            TimestampNanosecondArray::from(ts_ns).with_timezone("UTC"),
        ));
        self.next = stop;
        Ok(SourcePoll::Batch(RecordBatch::try_new(
            self.schema.schema.clone(),
            columns,
        )?))
    }

    fn snapshot(&mut self, _epoch: riffle_core::Epoch) -> Result<OperatorState> {
        let schema = Arc::new(Schema::new(vec![
            Field::new(KEY_GROUP_FIELD, DataType::UInt16, false),
            Field::new("next_id", DataType::UInt64, false),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(UInt16Array::from(vec![0u16])),
                Arc::new(UInt64Array::from(vec![self.next])),
            ],
        )?;
        Ok(OperatorState::of(vec![batch]))
    }

    fn restore(&mut self, state: OperatorState) -> Result<()> {
        let next = state
            .batches
            .first()
            .and_then(|b| b.column_by_name("next_id"))
            .and_then(|c| c.as_any().downcast_ref::<UInt64Array>())
            .ok_or_else(|| Error::State {
                operator: "peer".into(),
                message: "missing UInt64 column `next_id`".into(),
            })?;
        self.next = next.value(0);
        Ok(())
    }
}
