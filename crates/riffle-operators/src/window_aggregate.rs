//! Keyed aggregates over tumbling and hopping event-time windows, fired by watermark.
//!
//! Output: key columns, `window_start`, `window_end`, aggregates, and `_timestamp =
//! window_end − 1ns` (the window's last instant). A window `[s, e)` fires when the
//! watermark reaches `e − 1`; a row whose every window has fired is late: dropped and
//! counted.

use crate::aggregate::normalize_inputs;
use crate::aggregate::{
    bind_all, describe, AccumulatorSet, AggregateSpec, BoundAggregate, GroupKeys,
};
use crate::delta_log::DeltaLog;
use crate::window::{
    key_group_column, nanos, timestamp_array, timestamps, window_fields, window_start,
    window_state_schema, WindowSpec,
};
use riffle_core::arrow::array::{ArrayRef, AsArray, UInt32Array};
use riffle_core::arrow::compute::{take, take_record_batch};
use riffle_core::arrow::datatypes::{Schema, SchemaRef, TimestampNanosecondType};
use riffle_core::operator::OperatorCounters;
use riffle_core::{
    Epoch, Error, EventTime, Operator, OperatorContext, OperatorFactory, OperatorState,
    RecordBatch, Result, StreamSchema,
};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Plans a tumbling or hopping window aggregate.
pub struct WindowAggregateFactory {
    keys: Vec<usize>,
    key_schema: SchemaRef,
    aggregates: Vec<BoundAggregate>,
    specs: Vec<AggregateSpec>,
    size: i64,
    slide: i64,
    window: WindowSpec,
    input_timestamp: usize,
    schema: StreamSchema,
}

impl WindowAggregateFactory {
    /// `aggregates` per `keys` per `window` (tumbling or hopping) over `input`.
    ///
    /// # Errors
    /// Unknown columns, a session window (use [`crate::SessionAggregateFactory`]), or a
    /// hop whose size is not a positive multiple of its slide.
    pub fn new(
        input: &StreamSchema,
        keys: &[&str],
        window: WindowSpec,
        aggregates: Vec<AggregateSpec>,
    ) -> Result<Self> {
        let (size, slide) = match window {
            WindowSpec::Tumbling { size } => (nanos(size), nanos(size)),
            WindowSpec::Hopping { size, slide } => (nanos(size), nanos(slide)),
            WindowSpec::Session { .. } => {
                return Err(Error::plan(
                    "session windows are planned by SessionAggregateFactory",
                ))
            }
        };
        if size <= 0 || slide <= 0 || size % slide != 0 {
            return Err(Error::plan(format!(
                "window size must be a positive multiple of the slide: {}",
                window.describe()
            )));
        }
        let key_idx = keys
            .iter()
            .map(|k| input.index_of(k))
            .collect::<Result<Vec<_>>>()?;
        let key_fields: Vec<_> = key_idx
            .iter()
            .map(|&i| input.schema.field(i).clone())
            .collect();
        let key_schema = Arc::new(Schema::new(key_fields.clone()));
        let bound = bind_all(&aggregates, input)?;
        let mut fields = key_fields;
        fields.extend(window_fields());
        fields.extend(bound.iter().map(|a| a.output.clone()));
        let schema = StreamSchema::with_timestamp(fields);
        Ok(Self {
            keys: key_idx,
            key_schema,
            aggregates: bound,
            specs: aggregates,
            size,
            slide,
            window,
            input_timestamp: input.timestamp_index,
            schema,
        })
    }
}

impl OperatorFactory for WindowAggregateFactory {
    fn describe(&self) -> String {
        let keys: Vec<_> = self
            .key_schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        format!(
            "{} {} by ({})",
            self.window.describe(),
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
    fn stable_state(&self) -> bool {
        true // a window keeps its earlier snapshot batches (and files) and adds deltas
    }
    fn key_columns(&self, _: usize) -> Option<Vec<usize>> {
        Some(self.keys.clone())
    }
    fn create(&self, ctx: &OperatorContext) -> Result<Box<dyn Operator>> {
        Ok(Box::new(WindowAggregate {
            keys: self.keys.clone(),
            key_schema: self.key_schema.clone(),
            aggregates: self.aggregates.clone(),
            size: self.size,
            slide: self.slide,
            input_timestamp: self.input_timestamp,
            schema: self.schema.clone(),
            windows: BTreeMap::new(),
            watermark: EventTime::MIN,
            counters: ctx.counters.clone(),
            max_parallelism: ctx.max_parallelism,
            operator: ctx.operator_id.0.clone(),
            scratch: Vec::new(),
        }))
    }
}

struct WindowState {
    keys: GroupKeys,
    accumulators: AccumulatorSet,
    /// What the last snapshots wrote and which groups changed since.
    delta: DeltaLog,
}

struct WindowAggregate {
    keys: Vec<usize>,
    key_schema: SchemaRef,
    aggregates: Vec<BoundAggregate>,
    size: i64,
    slide: i64,
    input_timestamp: usize,
    schema: StreamSchema,
    /// Open windows by start.
    windows: BTreeMap<EventTime, WindowState>,
    watermark: EventTime,
    counters: Arc<OperatorCounters>,
    max_parallelism: u16,
    operator: String,
    scratch: Vec<u32>,
}

impl WindowAggregate {
    fn closed(&self, start: EventTime) -> bool {
        start.saturating_add(self.size - 1) <= self.watermark
    }

    fn new_window(&self) -> Result<WindowState> {
        Ok(WindowState {
            keys: GroupKeys::new(self.key_schema.clone())?,
            accumulators: AccumulatorSet::new(&self.aggregates),
            delta: DeltaLog::default(),
        })
    }

    fn emit(&self, start: EventTime, state: WindowState) -> Result<RecordBatch> {
        let ids: Vec<u32> = (0..state.keys.len() as u32).collect();
        let mut columns = state.keys.keys(&ids)?;
        let n = ids.len();
        columns.push(timestamp_array(vec![start; n]));
        columns.push(timestamp_array(vec![start + self.size; n]));
        columns.extend(state.accumulators.finish(&ids)?);
        columns.push(timestamp_array(vec![start + self.size - 1; n]));
        Ok(RecordBatch::try_new(self.schema.schema.clone(), columns)?)
    }
}

impl WindowAggregate {
    /// The state rows of `ids` in the window starting at `start`.
    fn state_batch(
        &self,
        start: EventTime,
        state: &WindowState,
        ids: &[u32],
    ) -> Result<RecordBatch> {
        let keys = state.keys.keys(ids)?;
        let (kg_field, kg) = key_group_column(&keys, ids.len(), self.max_parallelism)?;
        let mut fields = vec![kg_field];
        let mut columns = vec![kg];
        fields.extend(self.key_schema.fields().iter().map(|f| f.as_ref().clone()));
        columns.extend(keys);
        let [ws, _] = window_fields();
        fields.push(ws);
        columns.push(timestamp_array(vec![start; ids.len()]));
        for (f, c) in state.accumulators.state(ids)? {
            fields.push(f);
            columns.push(c);
        }
        let schema = window_state_schema(fields, start);
        Ok(RecordBatch::try_new(schema, columns)?)
    }
}

impl Operator for WindowAggregate {
    fn on_batch(&mut self, _: usize, batch: RecordBatch, _: &mut Vec<RecordBatch>) -> Result<()> {
        let ts = timestamps(&batch, self.input_timestamp).to_vec();
        let key_columns: Vec<ArrayRef> =
            self.keys.iter().map(|&i| batch.column(i).clone()).collect();
        let windows_per_row = self.size / self.slide;
        // For each of the row's windows (offset j back from the newest), rows grouped by start.
        let mut late = 0u64;
        let mut by_start: BTreeMap<EventTime, Vec<u32>> = BTreeMap::new();
        for (row, &t) in ts.iter().enumerate() {
            let newest = window_start(t, self.slide);
            if self.closed(newest) {
                late += 1;
                continue;
            }
            for j in 0..windows_per_row {
                let start = newest - j * self.slide;
                if !self.closed(start) {
                    by_start.entry(start).or_default().push(row as u32);
                }
            }
        }
        self.counters.add_late(late);
        if by_start.is_empty() {
            return Ok(());
        }
        let inputs = normalize_inputs(&self.aggregates, batch.columns())?;
        let mut groups = std::mem::take(&mut self.scratch);
        for (start, rows) in by_start {
            if !self.windows.contains_key(&start) {
                let fresh = self.new_window()?;
                self.windows.insert(start, fresh);
            }
            let Some(state) = self.windows.get_mut(&start) else {
                continue;
            };
            state.keys.intern(&key_columns, &rows, &mut groups)?;
            state.accumulators.update(&groups, &rows, &inputs);
            state.delta.touch(&groups);
        }
        self.scratch = groups;
        Ok(())
    }

    fn on_watermark(&mut self, watermark: EventTime, out: &mut Vec<RecordBatch>) -> Result<()> {
        self.watermark = watermark;
        let mut fired = 0;
        while let Some(&start) = self.windows.keys().next() {
            if !self.closed(start) {
                break;
            }
            let Some(state) = self.windows.remove(&start) else {
                break;
            };
            out.push(self.emit(start, state)?);
            fired += 1;
        }
        self.counters.add_windows(fired);
        Ok(())
    }

    fn snapshot(&mut self, _: Epoch) -> Result<OperatorState> {
        let mut batches = Vec::with_capacity(self.windows.len());
        // Taken out for the loop so `state_batch` can borrow `self`; put back even on error.
        let mut windows = std::mem::take(&mut self.windows);
        let mut result = Ok(());
        for (&start, state) in &mut windows {
            let len = state.keys.len();
            let ids = state.delta.take_changed(len);
            if !ids.is_empty() {
                match self.state_batch(start, state, &ids) {
                    Ok(batch) => state.delta.push(batch, len),
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                }
            }
            batches.extend(state.delta.batches.iter().cloned());
        }
        self.windows = windows;
        result?;
        Ok(OperatorState { batches })
    }

    fn restore(&mut self, state: OperatorState) -> Result<()> {
        let mut groups = Vec::new();
        for batch in state.batches {
            let starts = batch
                .column_by_name("window_start")
                .and_then(|c| c.as_primitive_opt::<TimestampNanosecondType>())
                .ok_or_else(|| Error::State {
                    operator: self.operator.clone(),
                    message: "missing `window_start`".into(),
                })?
                .clone();
            let keys: Vec<ArrayRef> = self
                .key_schema
                .fields()
                .iter()
                .map(|f| {
                    batch
                        .column_by_name(f.name())
                        .cloned()
                        .ok_or_else(|| Error::State {
                            operator: self.operator.clone(),
                            message: format!("missing key column `{}`", f.name()),
                        })
                })
                .collect::<Result<_>>()?;
            // Rows of one window are restored together: one key lookup pass and one
            // accumulator pass per window, not per row.
            let mut by_window: BTreeMap<i64, Vec<u32>> = BTreeMap::new();
            for (row, start) in starts.values().iter().enumerate() {
                by_window.entry(*start).or_default().push(row as u32);
            }
            for (start, rows) in by_window {
                let indices = UInt32Array::from(rows);
                let part = take_record_batch(&batch, &indices)?;
                let part_keys: Vec<ArrayRef> = keys
                    .iter()
                    .map(|k| take(k.as_ref(), &indices, None))
                    .collect::<std::result::Result<_, _>>()?;
                if !self.windows.contains_key(&start) {
                    let fresh = self.new_window()?;
                    self.windows.insert(start, fresh);
                }
                let Some(state) = self.windows.get_mut(&start) else {
                    continue;
                };
                let all: Vec<u32> = (0..part.num_rows() as u32).collect();
                state.keys.intern(&part_keys, &all, &mut groups)?;
                state.accumulators.restore(&groups, &part, &self.operator)?;
            }
        }
        Ok(())
    }
}
