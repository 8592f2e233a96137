//! Keyed aggregates over session windows: rows of one key at most `gap` apart form one
//! session `[first, last + gap)`; a session fires when the watermark reaches its end − 1.
//!
//! Output: key columns, `window_start`, `window_end`, aggregates, `_timestamp =
//! window_end − 1ns`. A row whose own window `[t, t + gap)` has already closed is late.

use crate::aggregate::{
    bind_all, describe, AccumulatorSet, AggregateSpec, BoundAggregate, DistinctValues, GroupKeys,
};
use crate::window::{key_group_column, nanos, timestamp_array, timestamps, window_fields};
use riffle_core::arrow::array::{ArrayRef, AsArray};
use riffle_core::arrow::datatypes::{Field, Schema, SchemaRef, TimestampNanosecondType};
use riffle_core::operator::OperatorCounters;
use riffle_core::{
    Epoch, Error, EventTime, Operator, OperatorContext, OperatorFactory, OperatorState,
    RecordBatch, Result, StreamSchema,
};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

/// Plans a session-window aggregate.
pub struct SessionAggregateFactory {
    keys: Vec<usize>,
    key_schema: SchemaRef,
    aggregates: Vec<BoundAggregate>,
    specs: Vec<AggregateSpec>,
    gap: i64,
    input_timestamp: usize,
    schema: StreamSchema,
}

impl SessionAggregateFactory {
    /// `aggregates` per session of `keys` with inactivity `gap`.
    ///
    /// # Errors
    /// Unknown columns or a zero gap.
    pub fn new(
        input: &StreamSchema,
        keys: &[&str],
        gap: Duration,
        aggregates: Vec<AggregateSpec>,
    ) -> Result<Self> {
        if gap.is_zero() {
            return Err(Error::plan("session gap must be positive"));
        }
        let key_idx = keys
            .iter()
            .map(|k| input.index_of(k))
            .collect::<Result<Vec<_>>>()?;
        let key_fields: Vec<Field> = key_idx
            .iter()
            .map(|&i| input.schema.field(i).clone())
            .collect();
        let bound = bind_all(&aggregates, input)?;
        let mut fields = key_fields.clone();
        fields.extend(window_fields());
        fields.extend(bound.iter().map(|a| a.output.clone()));
        Ok(Self {
            keys: key_idx,
            key_schema: Arc::new(Schema::new(key_fields)),
            aggregates: bound,
            specs: aggregates,
            gap: nanos(gap),
            input_timestamp: input.timestamp_index,
            schema: StreamSchema::with_timestamp(fields),
        })
    }
}

impl OperatorFactory for SessionAggregateFactory {
    fn describe(&self) -> String {
        let keys: Vec<_> = self
            .key_schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        format!(
            "session({}) {} by ({})",
            crate::window::display_nanos(self.gap),
            describe(&self.specs),
            keys.join(", ")
        )
    }
    fn output_schema(&self) -> &StreamSchema {
        &self.schema
    }
    fn is_stateful(&self) -> bool {
        true
    }
    fn key_columns(&self, _: usize) -> Option<Vec<usize>> {
        Some(self.keys.clone())
    }
    fn create(&self, ctx: &OperatorContext) -> Result<Box<dyn Operator>> {
        Ok(Box::new(SessionAggregate {
            keys: self.keys.clone(),
            key_table: GroupKeys::new(self.key_schema.clone())?,
            key_schema: self.key_schema.clone(),
            accumulators: AccumulatorSet::new(&self.aggregates),
            sessions: Vec::new(),
            by_end: BTreeSet::new(),
            free: Vec::new(),
            gap: self.gap,
            input_timestamp: self.input_timestamp,
            schema: self.schema.clone(),
            watermark: EventTime::MIN,
            counters: ctx.counters.clone(),
            max_parallelism: ctx.max_parallelism,
            operator: ctx.operator_id.0.clone(),
        }))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Session {
    start: EventTime,
    end: EventTime,
    slot: u32,
}

struct SessionAggregate {
    keys: Vec<usize>,
    key_table: GroupKeys,
    key_schema: SchemaRef,
    accumulators: AccumulatorSet,
    /// Open sessions per key id, unordered.
    sessions: Vec<Vec<Session>>,
    /// (end, key id, start): which session fires next.
    by_end: BTreeSet<(EventTime, u32, EventTime)>,
    free: Vec<u32>,
    gap: i64,
    input_timestamp: usize,
    schema: StreamSchema,
    watermark: EventTime,
    counters: Arc<OperatorCounters>,
    max_parallelism: u16,
    operator: String,
}

impl SessionAggregate {
    fn allocate(&mut self) -> u32 {
        match self.free.pop() {
            Some(slot) => {
                self.accumulators.reset(slot);
                slot
            }
            None => {
                let slot = self.accumulators.len() as u32;
                self.accumulators.ensure(slot as usize + 1);
                slot
            }
        }
    }

    /// Puts `[start, end)` for `key` into the session table, merging sessions that
    /// overlap or touch (rows exactly one gap apart are one session, as in Flink); returns
    /// the slot holding the merged session's accumulators.
    fn place(&mut self, key: u32, start: EventTime, end: EventTime, slot: Option<u32>) -> u32 {
        if self.sessions.len() <= key as usize {
            self.sessions.resize_with(key as usize + 1, Vec::new);
        }
        let (mut start, mut end) = (start, end);
        let mut target = slot;
        let mut i = 0;
        while i < self.sessions[key as usize].len() {
            let s = self.sessions[key as usize][i];
            if s.start <= end && start <= s.end {
                self.sessions[key as usize].swap_remove(i);
                self.by_end.remove(&(s.end, key, s.start));
                start = start.min(s.start);
                end = end.max(s.end);
                match target {
                    None => target = Some(s.slot),
                    Some(t) => {
                        self.accumulators.merge(t, s.slot);
                        self.free.push(s.slot);
                    }
                }
            } else {
                i += 1;
            }
        }
        let slot = match target {
            Some(t) => t,
            None => self.allocate(),
        };
        self.sessions[key as usize].push(Session { start, end, slot });
        self.by_end.insert((end, key, start));
        slot
    }
}

impl Operator for SessionAggregate {
    fn on_batch(&mut self, _: usize, batch: RecordBatch, _: &mut Vec<RecordBatch>) -> Result<()> {
        let ts = timestamps(&batch, self.input_timestamp).to_vec();
        let key_columns: Vec<ArrayRef> =
            self.keys.iter().map(|&i| batch.column(i).clone()).collect();
        let all_rows: Vec<u32> = (0..batch.num_rows() as u32).collect();
        let mut key_ids = Vec::new();
        self.key_table
            .intern(&key_columns, &all_rows, &mut key_ids)?;
        let inputs = self.accumulators.inputs(batch.columns())?;
        let mut late = 0;
        for (row, &t) in ts.iter().enumerate() {
            if t.saturating_add(self.gap - 1) <= self.watermark {
                late += 1;
                continue;
            }
            let slot = self.place(key_ids[row], t, t.saturating_add(self.gap), None);
            self.accumulators.update(&[slot], &[row as u32], &inputs);
        }
        self.counters.add_late(late);
        Ok(())
    }

    fn on_watermark(&mut self, watermark: EventTime, out: &mut Vec<RecordBatch>) -> Result<()> {
        self.watermark = watermark;
        let mut fired = Vec::new();
        while let Some(&(end, key, start)) = self.by_end.first() {
            if end.saturating_sub(1) > watermark {
                break;
            }
            self.by_end.pop_first();
            let list = &mut self.sessions[key as usize];
            if let Some(pos) = list.iter().position(|s| s.start == start && s.end == end) {
                let s = list.swap_remove(pos);
                fired.push((key, s));
            }
        }
        if fired.is_empty() {
            return Ok(());
        }
        let key_ids: Vec<u32> = fired.iter().map(|(k, _)| *k).collect();
        let slots: Vec<u32> = fired.iter().map(|(_, s)| s.slot).collect();
        let mut columns = self.key_table.keys(&key_ids)?;
        columns.push(timestamp_array(
            fired.iter().map(|(_, s)| s.start).collect(),
        ));
        columns.push(timestamp_array(fired.iter().map(|(_, s)| s.end).collect()));
        columns.extend(self.accumulators.finish(&slots)?);
        columns.push(timestamp_array(
            fired.iter().map(|(_, s)| s.end - 1).collect(),
        ));
        out.push(RecordBatch::try_new(self.schema.schema.clone(), columns)?);
        self.free.extend(slots);
        self.counters.add_windows(fired.len() as u64);
        Ok(())
    }

    fn snapshot(&mut self, _: Epoch) -> Result<OperatorState> {
        let open: Vec<(u32, Session)> = self
            .sessions
            .iter()
            .enumerate()
            .flat_map(|(k, list)| list.iter().map(move |s| (k as u32, *s)))
            .collect();
        let key_ids: Vec<u32> = open.iter().map(|(k, _)| *k).collect();
        let slots: Vec<u32> = open.iter().map(|(_, s)| s.slot).collect();
        let keys = self.key_table.keys(&key_ids)?;
        let (kg_field, kg) = key_group_column(&keys, open.len(), self.max_parallelism)?;
        let mut fields = vec![kg_field];
        let mut columns = vec![kg];
        fields.extend(self.key_schema.fields().iter().map(|f| f.as_ref().clone()));
        columns.extend(keys);
        fields.extend(window_fields());
        columns.push(timestamp_array(open.iter().map(|(_, s)| s.start).collect()));
        columns.push(timestamp_array(open.iter().map(|(_, s)| s.end).collect()));
        for (f, c) in self.accumulators.state(&slots, DistinctValues::All)? {
            fields.push(f);
            columns.push(c);
        }
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?;
        Ok(OperatorState::of(vec![batch]))
    }

    fn restore(&mut self, state: OperatorState) -> Result<()> {
        let operator = self.operator.clone();
        let bad = |m: String| Error::State {
            operator: operator.clone(),
            message: m,
        };
        for batch in state.batches {
            let col = |n: &str| {
                batch
                    .column_by_name(n)
                    .and_then(|c| c.as_primitive_opt::<TimestampNanosecondType>())
                    .cloned()
                    .ok_or_else(|| bad(format!("missing `{n}`")))
            };
            let (starts, ends) = (col("window_start")?, col("window_end")?);
            let keys: Vec<ArrayRef> = self
                .key_schema
                .fields()
                .iter()
                .map(|f| {
                    batch
                        .column_by_name(f.name())
                        .cloned()
                        .ok_or_else(|| bad(format!("missing key `{}`", f.name())))
                })
                .collect::<Result<_>>()?;
            let rows: Vec<u32> = (0..batch.num_rows() as u32).collect();
            let mut key_ids = Vec::new();
            self.key_table.intern(&keys, &rows, &mut key_ids)?;
            for (row, &key) in key_ids.iter().enumerate() {
                let slot = self.allocate();
                self.accumulators
                    .restore(&[slot], &batch.slice(row, 1), &operator)?;
                self.place(key, starts.value(row), ends.value(row), Some(slot));
            }
        }
        Ok(())
    }
}
