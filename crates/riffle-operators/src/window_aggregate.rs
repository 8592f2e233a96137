//! Keyed aggregates over tumbling, hopping and cumulating event-time windows, fired by
//! watermark.
//!
//! Output: key columns, `window_start`, `window_end`, aggregates, and `_timestamp =
//! window_end − 1ns` (the window's last instant). A window `[s, e)` fires when the
//! watermark reaches `e − 1`; windows fire in order of end. A row whose every window has
//! fired is late: dropped and counted; a row some of whose windows are still open counts
//! in those (as in Flink).
//!
//! State is kept per *pane* (one slide or step of event time, [`WindowGeometry`]): a row
//! updates one pane, not every window it falls in, and a window fires by merging the
//! panes between its start and end. A pane is dropped once the last window containing
//! it has fired.

use crate::aggregate::normalize_inputs;
use crate::aggregate::{
    bind_all, describe, AccumulatorSet, AggregateSpec, BoundAggregate, GroupKeys,
};
use crate::delta_log::DeltaLog;
use crate::window::{
    key_group_column, timestamp_array, timestamps, window_fields, window_state_schema,
    WindowGeometry, WindowSpec,
};
use riffle_core::arrow::array::{ArrayRef, AsArray, UInt32Array};
use riffle_core::arrow::compute::{take, take_record_batch};
use riffle_core::arrow::datatypes::{Field, Schema, SchemaRef, TimestampNanosecondType};
use riffle_core::operator::OperatorCounters;
use riffle_core::{
    timestamp_type, CommittedEpoch, Epoch, Error, EventTime, Operator, OperatorContext,
    OperatorFactory, OperatorState, RecordBatch, Result, StreamSchema,
};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The state column holding a row's pane start.
const PANE_START: &str = "pane_start";

/// The column of the state batch that says which windows had fired at the snapshot:
/// every window ending at or before it. One row per key group, so that every subtask
/// of a rescaled restore gets it; a subtask restores the smallest it is given.
const FIRED_THROUGH_END: &str = "fired_through_end";

/// The same record as written by earlier versions: the newest fired window's *start*
/// (tumbling and hopping windows only). Read on restore, never written.
const FIRED_THROUGH_START: &str = "fired_through";

/// Plans a tumbling, hopping or cumulating window aggregate.
pub struct WindowAggregateFactory {
    keys: Vec<usize>,
    key_schema: SchemaRef,
    aggregates: Vec<BoundAggregate>,
    specs: Vec<AggregateSpec>,
    geometry: WindowGeometry,
    window: WindowSpec,
    input_timestamp: usize,
    schema: StreamSchema,
}

impl WindowAggregateFactory {
    /// `aggregates` per `keys` per `window` (tumbling, hopping or cumulating) over `input`.
    ///
    /// # Errors
    /// Unknown columns, a session window (use [`crate::SessionAggregateFactory`]), or a
    /// window whose size is not a positive multiple of its slide or step.
    pub fn new(
        input: &StreamSchema,
        keys: &[&str],
        window: WindowSpec,
        aggregates: Vec<AggregateSpec>,
    ) -> Result<Self> {
        if let WindowSpec::Session { .. } = window {
            return Err(Error::plan(
                "session windows are planned by SessionAggregateFactory",
            ));
        }
        let geometry = WindowGeometry::of(window).ok_or_else(|| {
            Error::plan(format!(
                "window size must be a positive multiple of the slide or step: {}",
                window.describe()
            ))
        })?;
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
            geometry,
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
            geometry: self.geometry,
            input_timestamp: self.input_timestamp,
            schema: self.schema.clone(),
            panes: BTreeMap::new(),
            last_fired: None,
            resuming: false,
            watermark: EventTime::MIN,
            counters: ctx.counters.clone(),
            max_parallelism: ctx.max_parallelism,
            operator: ctx.operator_id.0.clone(),
            committed: ctx.committed.clone(),
            scratch: Vec::new(),
            row_key: self
                .key_schema
                .fields()
                .iter()
                .map(|f| f.name().as_str())
                .chain([PANE_START])
                .collect::<Vec<_>>()
                .join(","),
        }))
    }
}

/// The groups of one pane (or, for a tumbling window, of the window).
struct PaneState {
    keys: GroupKeys,
    accumulators: AccumulatorSet,
    /// What the last snapshots wrote and which groups changed since.
    delta: DeltaLog,
}

struct WindowAggregate {
    keys: Vec<usize>,
    key_schema: SchemaRef,
    aggregates: Vec<BoundAggregate>,
    geometry: WindowGeometry,
    input_timestamp: usize,
    schema: StreamSchema,
    /// Panes by start, while a window containing them is open.
    panes: BTreeMap<EventTime, PaneState>,
    /// End of the newest window fired; windows fire in order of end.
    last_fired: Option<EventTime>,
    /// Restored from a snapshot that did not record what had fired (written by an older
    /// version) and not yet told the watermark it resumes at (see `on_watermark`).
    resuming: bool,
    watermark: EventTime,
    counters: Arc<OperatorCounters>,
    max_parallelism: u16,
    operator: String,
    /// The newest committed epoch heard: panes' delta logs stop holding what they wrote.
    committed: CommittedEpoch,
    scratch: Vec<u32>,
    /// The state batches' `riffle.row_key`: deltas repeat a group's key within its pane,
    /// so the key columns and the pane identify a row (the last one written is current).
    row_key: String,
}

impl WindowAggregate {
    /// Whether the window ending at `end` is closed by the watermark.
    fn closed(&self, end: EventTime) -> bool {
        end - 1 <= self.watermark
    }

    fn new_pane(&self) -> Result<PaneState> {
        Ok(PaneState {
            keys: GroupKeys::new(self.key_schema.clone())?,
            accumulators: AccumulatorSet::new(&self.aggregates),
            delta: DeltaLog::default(),
        })
    }

    fn emit(
        &self,
        start: EventTime,
        end: EventTime,
        state: &PaneState,
    ) -> Result<Option<RecordBatch>> {
        let n = state.keys.len();
        if n == 0 {
            return Ok(None);
        }
        let ids: Vec<u32> = (0..n as u32).collect();
        let mut columns = state.keys.keys(&ids)?;
        columns.push(timestamp_array(vec![start; n]));
        columns.push(timestamp_array(vec![end; n]));
        columns.extend(state.accumulators.finish(&ids)?);
        columns.push(timestamp_array(vec![end - 1; n]));
        Ok(Some(RecordBatch::try_new(
            self.schema.schema.clone(),
            columns,
        )?))
    }

    /// The window ending at `end`: its panes merged (a window of one pane is that pane).
    fn fire(&self, end: EventTime) -> Result<Option<RecordBatch>> {
        let start = self.geometry.start_of(end);
        let mut panes = self.panes.range(start..end);
        if self.geometry.one_pane_per_window() || panes.clone().nth(1).is_none() {
            return match panes.next() {
                Some((_, pane)) => self.emit(start, end, pane),
                None => Ok(None),
            };
        }
        let mut merged = self.new_pane()?;
        let mut groups = Vec::new();
        for (_, pane) in panes {
            let ids: Vec<u32> = (0..pane.keys.len() as u32).collect();
            let keys = pane.keys.keys(&ids)?;
            merged.keys.intern(&keys, &ids, &mut groups)?;
            merged
                .accumulators
                .merge_from(&pane.accumulators, &ids, &groups);
        }
        self.emit(start, end, &merged)
    }

    /// Whether the window ending at `end` fired already (before a restore, perhaps at a
    /// watermark higher than the one this run resumed at).
    fn fired(&self, end: EventTime) -> bool {
        self.last_fired.is_some_and(|last| end <= last)
    }

    /// The state batch recording which windows have fired (see [`FIRED_THROUGH_END`]).
    fn fired_batch(&self) -> Result<Option<RecordBatch>> {
        let through = match (self.last_fired, self.watermark > EventTime::MIN) {
            (last, true) => Some(
                last.unwrap_or(EventTime::MIN)
                    .max(self.geometry.newest_closed_end(self.watermark)),
            ),
            (Some(last), false) => Some(last),
            (None, false) => None,
        };
        let Some(through) = through else {
            return Ok(None);
        };
        let groups: Vec<u16> = (0..self.max_parallelism).collect();
        let schema = Arc::new(
            Schema::new(vec![
                Field::new(
                    riffle_core::state::KEY_GROUP_FIELD,
                    riffle_core::arrow::datatypes::DataType::UInt16,
                    false,
                ),
                Field::new(FIRED_THROUGH_END, timestamp_type(), false),
            ])
            .with_metadata(std::collections::HashMap::from([(
                riffle_core::state::INTERNAL_METADATA.to_string(),
                FIRED_THROUGH_END.to_string(),
            )])),
        );
        let n = groups.len();
        Ok(Some(RecordBatch::try_new(
            schema,
            vec![
                Arc::new(riffle_core::arrow::array::UInt16Array::from(groups)),
                timestamp_array(vec![through; n]),
            ],
        )?))
    }
}

impl WindowAggregate {
    /// The state rows of `ids` in the pane starting at `start`.
    fn state_batch(
        &self,
        start: EventTime,
        state: &mut PaneState,
        ids: &[u32],
    ) -> Result<RecordBatch> {
        let keys = state.keys.keys(ids)?;
        let (kg_field, kg) = key_group_column(&keys, ids.len(), self.max_parallelism)?;
        let mut fields = vec![kg_field];
        let mut columns = vec![kg];
        fields.extend(self.key_schema.fields().iter().map(|f| f.as_ref().clone()));
        columns.extend(keys);
        fields.push(Field::new(PANE_START, timestamp_type(), false));
        columns.push(timestamp_array(vec![start; ids.len()]));
        let distinct = state.delta.distinct_values();
        for (f, c) in state.accumulators.state(ids, distinct)? {
            fields.push(f);
            columns.push(c);
        }
        let schema = window_state_schema(fields, start, Some(self.row_key.clone()));
        Ok(RecordBatch::try_new(schema, columns)?)
    }
}

impl Operator for WindowAggregate {
    fn on_batch(&mut self, _: usize, batch: RecordBatch, _: &mut Vec<RecordBatch>) -> Result<()> {
        let ts = timestamps(&batch, self.input_timestamp).to_vec();
        let key_columns: Vec<ArrayRef> =
            self.keys.iter().map(|&i| batch.column(i).clone()).collect();
        // A data batch before any watermark: this run resumed with no watermark (none
        // had passed when the snapshot was taken), so no window had fired.
        self.resuming = false;
        let mut late = 0u64;
        let mut by_start: BTreeMap<EventTime, Vec<u32>> = BTreeMap::new();
        for (row, &t) in ts.iter().enumerate() {
            let pane = self.geometry.pane_of(t);
            let last = self.geometry.last_end(pane);
            if self.closed(last) || self.fired(last) {
                late += 1;
                continue;
            }
            by_start.entry(pane).or_default().push(row as u32);
        }
        self.counters.add_late(late);
        if by_start.is_empty() {
            return Ok(());
        }
        let inputs = normalize_inputs(&self.aggregates, batch.columns())?;
        let mut groups = std::mem::take(&mut self.scratch);
        for (start, rows) in by_start {
            if !self.panes.contains_key(&start) {
                let fresh = self.new_pane()?;
                self.panes.insert(start, fresh);
            }
            let Some(state) = self.panes.get_mut(&start) else {
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
        if std::mem::take(&mut self.resuming) {
            // The runtime hands a restored operator the watermark its snapshot was taken
            // at first: every window closed by it fired before the snapshot. (Subtasks
            // of a keyed exchange see the same watermarks, so this holds after a
            // rescale too.)
            if watermark > EventTime::MIN {
                self.last_fired = Some(self.geometry.newest_closed_end(watermark));
            }
        }
        let mut fired = 0;
        while let Some(&first) = self.panes.keys().next() {
            // The first window holding the oldest pane, unless it already fired.
            let mut end = self.geometry.first_end(first);
            if let Some(last) = self.last_fired {
                end = end.max(last + self.geometry.pane);
            }
            if !self.closed(end) {
                break;
            }
            if let Some(batch) = self.fire(end)? {
                out.push(batch);
                fired += 1;
            }
            self.last_fired = Some(end);
            // Panes whose last window has fired are in no window still to fire (a later
            // pane's last window never ends sooner).
            while self
                .panes
                .first_key_value()
                .is_some_and(|(&p, _)| self.geometry.last_end(p) <= end)
            {
                self.panes.pop_first();
            }
        }
        self.counters.add_windows(fired);
        Ok(())
    }

    fn snapshot(&mut self, epoch: Epoch) -> Result<OperatorState> {
        let heard = self.committed.newest();
        let mut batches = Vec::with_capacity(self.panes.len());
        // Taken out for the loop so `state_batch` can borrow `self`; put back even on error.
        let mut windows = std::mem::take(&mut self.panes);
        let mut result = Ok(());
        for (&start, state) in &mut windows {
            let len = state.keys.len();
            state.delta.hand_over_committed(epoch, heard);
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
        self.panes = windows;
        result?;
        batches.extend(self.fired_batch()?);
        Ok(OperatorState::of(batches))
    }

    fn restore(&mut self, state: OperatorState) -> Result<()> {
        self.resuming = true;
        let mut groups = Vec::new();
        for batch in state.batches {
            // What fired comes from the snapshot itself, never from the first watermark
            // this run sees (which a rescaled restore may set lower).
            let fired_end = |name: &str, offset: i64| {
                batch
                    .column_by_name(name)
                    .and_then(|c| c.as_primitive_opt::<TimestampNanosecondType>())
                    .map(|through| through.values().iter().min().map(|m| m + offset))
            };
            let through = fired_end(FIRED_THROUGH_END, 0)
                .or_else(|| fired_end(FIRED_THROUGH_START, self.geometry.size));
            if let Some(min) = through {
                if let Some(min) = min {
                    self.last_fired = Some(self.last_fired.map_or(min, |l| l.min(min)));
                }
                self.resuming = false;
                continue;
            }
            let starts = batch
                .column_by_name(PANE_START)
                .and_then(|c| c.as_primitive_opt::<TimestampNanosecondType>())
                .ok_or_else(|| Error::State {
                    operator: self.operator.clone(),
                    message: format!("missing `{PANE_START}`"),
                })?
                .clone();
            let keys =
                crate::window::state_columns(&batch, self.key_schema.fields(), &self.operator)?;
            // Rows of one pane are restored together: one key lookup pass and one
            // accumulator pass per pane, not per row.
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
                if !self.panes.contains_key(&start) {
                    let fresh = self.new_pane()?;
                    self.panes.insert(start, fresh);
                }
                let Some(state) = self.panes.get_mut(&start) else {
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
