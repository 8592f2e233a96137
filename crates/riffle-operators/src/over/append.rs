//! OVER over append-only rows in event-time order: rows wait for the watermark, then
//! each partition's rows are taken in time order, and each leaves with the aggregate
//! of its frame. A partition keeps the rows a later frame can still reach (the last
//! `n` for `ROWS n PRECEDING`, the last `d` of event time for `RANGE d PRECEDING`) or,
//! for `UNBOUNDED PRECEDING`, one running value per aggregate. Rows of the same time
//! are taken in the order of their values (column by column, as the input holds them),
//! where Flink takes them as they arrive: the same frames at any parallelism.

use super::{Acc, OverConfig, OverFrame};
use crate::aggregate::GroupKeys;
use crate::window::{key_group_column, keyed_rows_state, state_columns, whole_rows};
use datafusion_common::ScalarValue;
use riffle_core::arrow::array::{
    ArrayRef, AsArray, BooleanArray, Int64Array, TimestampNanosecondArray, UInt32Array,
};
use riffle_core::arrow::compute::{concat_batches, filter_record_batch, not, take};
use riffle_core::arrow::datatypes::{DataType, Field, Schema, TimestampNanosecondType};
use riffle_core::arrow::row::RowConverter;
use riffle_core::operator::OperatorCounters;
use riffle_core::{
    timestamp_type, Epoch, EventTime, Operator, OperatorContext, OperatorState, RecordBatch, Result,
};
use std::collections::VecDeque;
use std::sync::Arc;

/// The last column of each kind of state row names the kind (`riffle state query`
/// shows tables `{id}_waiting`, `{id}_recent`, `{id}_running`): rows the watermark has
/// not passed (the input row, then `waiting` = true); rows a later frame still reaches
/// (partition, each aggregate's input `arg_{k}`, then `recent`, the row's event time);
/// running values of `UNBOUNDED PRECEDING` frames (partition, `count_{k}` and
/// `value_{k}` per aggregate, then `running` = true).
const WAITING: &str = "waiting";
const RECENT: &str = "recent";
const RUNNING: &str = "running";

/// What a partition remembers of its rows.
#[derive(Debug, Default)]
struct History {
    /// Event time and aggregate inputs of the rows a later frame can reach (bounded
    /// frames only).
    entries: VecDeque<(EventTime, Vec<ScalarValue>)>,
    /// Per aggregate, its value over every row so far (`UNBOUNDED PRECEDING` only).
    running: Vec<Acc>,
}

pub(super) struct AppendOver {
    config: Arc<OverConfig>,
    partitions: GroupKeys,
    histories: Vec<History>,
    /// Rows the watermark has not passed yet.
    pending: Vec<RecordBatch>,
    /// Whole input rows, to order rows of the same time.
    rows: RowConverter,
    watermark: EventTime,
    counters: Arc<OperatorCounters>,
    max_parallelism: u16,
    operator: String,
}

impl AppendOver {
    pub(super) fn new(config: Arc<OverConfig>, ctx: &OperatorContext) -> Result<Self> {
        Ok(Self {
            partitions: config.partitions()?,
            histories: Vec::new(),
            pending: Vec::new(),
            rows: whole_rows(&config.input)?,
            watermark: EventTime::MIN,
            config,
            counters: ctx.counters.clone(),
            max_parallelism: ctx.max_parallelism,
            operator: ctx.operator_id.0.clone(),
        })
    }

    fn unbounded(&self) -> bool {
        matches!(
            self.config.frame,
            OverFrame::Rows(None) | OverFrame::Range(None)
        )
    }

    fn times(&self, batch: &RecordBatch) -> Vec<EventTime> {
        batch
            .column(self.config.input.timestamp_index)
            .as_primitive::<TimestampNanosecondType>()
            .values()
            .to_vec()
    }

    /// The inputs of every aggregate in row `r` of `batch`.
    fn arguments(&self, batch: &RecordBatch, r: usize) -> Result<Vec<ScalarValue>> {
        self.config
            .aggregates
            .iter()
            .map(|(_, column, _)| match column {
                Some(c) => Ok(ScalarValue::try_from_array(batch.column(*c), r)?),
                None => Ok(ScalarValue::Null),
            })
            .collect()
    }

    /// Adds a row to its partition's history.
    fn remember(&mut self, id: usize, ts: EventTime, args: Vec<ScalarValue>) -> Result<()> {
        let unbounded = self.unbounded();
        let aggregates = &self.config.aggregates;
        let h = &mut self.histories[id];
        if unbounded {
            h.running.resize_with(aggregates.len(), Acc::default);
            for ((acc, (f, _, _)), v) in h.running.iter_mut().zip(aggregates).zip(&args) {
                acc.add(*f, v)?;
            }
        } else {
            h.entries.push_back((ts, args));
        }
        Ok(())
    }

    /// The aggregates of the frame of a row at `ts`, the last row of partition `id`.
    fn frame_values(&self, id: usize, ts: EventTime) -> Result<Vec<ScalarValue>> {
        let h = &self.histories[id];
        let aggregates = &self.config.aggregates;
        if self.unbounded() {
            return aggregates
                .iter()
                .zip(&h.running)
                .map(|((f, _, ty), acc)| acc.finish(*f, ty))
                .collect();
        }
        let frame: Vec<&(EventTime, Vec<ScalarValue>)> = match self.config.frame {
            OverFrame::Rows(Some(n)) => h.entries.iter().rev().take(n + 1).collect(),
            OverFrame::Range(Some(d)) => {
                let from = ts.saturating_sub(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
                h.entries.iter().rev().take_while(|e| e.0 >= from).collect()
            }
            _ => Vec::new(),
        };
        aggregates
            .iter()
            .enumerate()
            .map(|(k, (f, _, ty))| {
                let mut acc = Acc::default();
                for (_, args) in frame.iter().rev() {
                    acc.add(*f, &args[k])?;
                }
                acc.finish(*f, ty)
            })
            .collect()
    }

    /// Forgets what no frame after `watermark` can reach.
    fn forget(&mut self, watermark: EventTime) {
        for h in &mut self.histories {
            match self.config.frame {
                OverFrame::Rows(Some(n)) => {
                    while h.entries.len() > n {
                        h.entries.pop_front();
                    }
                }
                OverFrame::Range(Some(d)) => {
                    let d = i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
                    // A later row is at watermark + 1 or after; its frame starts d before.
                    let keep_from = watermark.saturating_add(1).saturating_sub(d);
                    while h.entries.front().is_some_and(|e| e.0 < keep_from) {
                        h.entries.pop_front();
                    }
                }
                _ => {}
            }
        }
    }

    /// Takes the rows at or before `watermark` in event-time order and emits each with
    /// its aggregates.
    fn release(&mut self, watermark: EventTime) -> Result<Option<RecordBatch>> {
        if self.pending.is_empty() {
            return Ok(None);
        }
        let all = concat_batches(&self.config.input.schema, &self.pending)?;
        self.pending.clear();
        let times = self.times(&all);
        let ready_mask = BooleanArray::from_iter(times.iter().map(|t| Some(*t <= watermark)));
        let waiting = filter_record_batch(&all, &not(&ready_mask)?)?;
        if waiting.num_rows() > 0 {
            self.pending.push(waiting);
        }
        let ready = filter_record_batch(&all, &ready_mask)?;
        if ready.num_rows() == 0 {
            return Ok(None);
        }
        // Event-time order; rows of the same time in the order of their values, so a
        // ROWS frame is the same whatever order ties arrive in (at any parallelism,
        // and on a replay).
        let times = self.times(&ready);
        let values = self.rows.convert_columns(ready.columns())?;
        let mut order: Vec<u32> = (0..ready.num_rows() as u32).collect();
        order.sort_by(|&a, &b| {
            (times[a as usize], values.row(a as usize))
                .cmp(&(times[b as usize], values.row(b as usize)))
        });
        let indices = UInt32Array::from(order);
        let columns = ready
            .columns()
            .iter()
            .map(|c| take(c.as_ref(), &indices, None))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let ready = RecordBatch::try_new(ready.schema(), columns)?;
        let times = self.times(&ready);
        let keys: Vec<ArrayRef> = self
            .config
            .partition
            .iter()
            .map(|&i| ready.column(i).clone())
            .collect();
        let rows: Vec<u32> = (0..ready.num_rows() as u32).collect();
        let mut ids = Vec::with_capacity(rows.len());
        self.partitions.intern(&keys, &rows, &mut ids)?;
        if self.histories.len() < self.partitions.len() {
            self.histories
                .resize_with(self.partitions.len(), History::default);
        }
        let n = ready.num_rows();
        let mut values: Vec<Vec<ScalarValue>> = Vec::with_capacity(n);
        let range = matches!(self.config.frame, OverFrame::Range(_));
        let mut r = 0;
        while r < n {
            // RANGE frames hold every row of the current time (its peers): add them all
            // before computing any; ROWS frames end at the row itself.
            let end = if range {
                (r..n).find(|&k| times[k] != times[r]).unwrap_or(n)
            } else {
                r + 1
            };
            for k in r..end {
                let args = self.arguments(&ready, k)?;
                self.remember(ids[k] as usize, times[k], args)?;
            }
            for k in r..end {
                values.push(self.frame_values(ids[k] as usize, times[k])?);
            }
            r = end;
        }
        self.forget(watermark);
        let mut columns: Vec<ArrayRef> = self
            .config
            .output_fields()
            .iter()
            .map(|&i| ready.column(i).clone())
            .collect();
        for k in 0..self.config.aggregates.len() {
            let column = values.iter().map(|v| v[k].clone());
            columns.push(ScalarValue::iter_to_array(column)?);
        }
        columns.push(ready.column(self.config.input.timestamp_index).clone());
        Ok(Some(RecordBatch::try_new(
            self.config.schema.schema.clone(),
            columns,
        )?))
    }

    /// The partition key columns of `ids`, with their key groups.
    fn keyed(&self, ids: &[u32]) -> Result<(Vec<Field>, Vec<ArrayRef>)> {
        let keys = self.partitions.keys(ids)?;
        let (kg_field, kg) = key_group_column(&keys, ids.len(), self.max_parallelism)?;
        let mut fields = vec![kg_field];
        fields.extend(
            self.config
                .partition_schema
                .fields()
                .iter()
                .map(|f| f.as_ref().clone()),
        );
        let mut columns = vec![kg];
        columns.extend(keys);
        Ok((fields, columns))
    }

    fn arg_type(&self, k: usize) -> DataType {
        match self.config.aggregates[k].1 {
            Some(c) => self.config.input.schema.field(c).data_type().clone(),
            None => DataType::Int64,
        }
    }

    /// Typed null when a value is missing (count(*) has no input).
    fn typed(&self, k: usize, v: Option<&ScalarValue>) -> Result<ScalarValue> {
        let ty = self.arg_type(k);
        match v {
            Some(v) if !v.is_null() => Ok(v.cast_to(&ty)?),
            _ => Ok(ScalarValue::try_from(&ty)?),
        }
    }
}

impl Operator for AppendOver {
    fn on_batch(&mut self, _: usize, batch: RecordBatch, _: &mut Vec<RecordBatch>) -> Result<()> {
        let times = self.times(&batch);
        let on_time = BooleanArray::from_iter(times.iter().map(|t| Some(*t > self.watermark)));
        let late = batch.num_rows() - on_time.true_count();
        self.counters.add_late(late as u64);
        let kept = if late == 0 {
            batch
        } else {
            filter_record_batch(&batch, &on_time)?
        };
        if kept.num_rows() > 0 {
            self.pending.push(kept);
        }
        Ok(())
    }

    fn on_watermark(&mut self, watermark: EventTime, out: &mut Vec<RecordBatch>) -> Result<()> {
        if watermark <= self.watermark {
            return Ok(());
        }
        self.watermark = watermark;
        if let Some(batch) = self.release(watermark)? {
            out.push(batch);
        }
        Ok(())
    }

    fn snapshot(&mut self, _: Epoch) -> Result<OperatorState> {
        let mut batches = Vec::new();
        // Rows still waiting, keyed by their partition's key group.
        if !self.pending.is_empty() {
            let pending = concat_batches(&self.config.input.schema, &self.pending)?;
            let waiting: ArrayRef = Arc::new(BooleanArray::from(vec![true; pending.num_rows()]));
            batches.push(keyed_rows_state(
                &self.config.input,
                pending.columns().to_vec(),
                &self.config.partition,
                vec![(Field::new(WAITING, DataType::Boolean, false), waiting)],
                self.max_parallelism,
            )?);
        }
        let aggregates = self.config.aggregates.len();
        // What each partition remembers: its history rows, or its running values.
        let mut ids = Vec::new();
        let mut history: Vec<(EventTime, &Vec<ScalarValue>)> = Vec::new();
        let mut running: Vec<u32> = Vec::new();
        for (id, h) in self.histories.iter().enumerate() {
            for (ts, args) in &h.entries {
                ids.push(id as u32);
                history.push((*ts, args));
            }
            if !h.running.is_empty() {
                running.push(id as u32);
            }
        }
        if !ids.is_empty() {
            let (mut fields, mut columns) = self.keyed(&ids)?;
            for k in 0..aggregates {
                fields.push(Field::new(format!("arg_{k}"), self.arg_type(k), true));
                let values = history
                    .iter()
                    .map(|h| self.typed(k, Some(&h.1[k])))
                    .collect::<Result<Vec<_>>>()?;
                columns.push(ScalarValue::iter_to_array(values)?);
            }
            fields.push(Field::new(RECENT, timestamp_type(), false));
            columns.push(Arc::new(
                TimestampNanosecondArray::from_iter_values(history.iter().map(|h| h.0))
                    .with_timezone("UTC"),
            ));
            batches.push(RecordBatch::try_new(
                Arc::new(Schema::new(fields)),
                columns,
            )?);
        }
        if !running.is_empty() {
            let (mut fields, mut columns) = self.keyed(&running)?;
            for k in 0..aggregates {
                let accs: Vec<&Acc> = running
                    .iter()
                    .map(|&id| &self.histories[id as usize].running[k])
                    .collect();
                fields.push(Field::new(format!("count_{k}"), DataType::Int64, false));
                columns.push(Arc::new(Int64Array::from_iter_values(
                    accs.iter().map(|a| a.count),
                )));
                fields.push(Field::new(format!("value_{k}"), self.arg_type(k), true));
                let values = accs
                    .iter()
                    .map(|a| self.typed(k, a.value.as_ref()))
                    .collect::<Result<Vec<_>>>()?;
                columns.push(ScalarValue::iter_to_array(values)?);
            }
            fields.push(Field::new(RUNNING, DataType::Boolean, false));
            columns.push(Arc::new(BooleanArray::from(vec![true; running.len()])));
            batches.push(RecordBatch::try_new(
                Arc::new(Schema::new(fields)),
                columns,
            )?);
        }
        Ok(OperatorState::of(batches))
    }

    fn restore(&mut self, state: OperatorState) -> Result<()> {
        let aggregates = self.config.aggregates.len();
        for batch in state.batches {
            let schema = batch.schema();
            let kind = schema.fields().last().map(|f| f.name().as_str());
            let (is_history, is_running) = (kind == Some(RECENT), kind == Some(RUNNING));
            if !is_history && !is_running {
                let columns =
                    state_columns(&batch, self.config.input.schema.fields(), &self.operator)?;
                self.pending.push(RecordBatch::try_new(
                    self.config.input.schema.clone(),
                    columns,
                )?);
                continue;
            }
            let keys = state_columns(
                &batch,
                self.config.partition_schema.fields(),
                &self.operator,
            )?;
            let rows: Vec<u32> = (0..batch.num_rows() as u32).collect();
            let mut ids = Vec::with_capacity(rows.len());
            self.partitions.intern(&keys, &rows, &mut ids)?;
            if self.histories.len() < self.partitions.len() {
                self.histories
                    .resize_with(self.partitions.len(), History::default);
            }
            let column = |name: String| -> Result<ArrayRef> {
                batch
                    .column_by_name(&name)
                    .cloned()
                    .ok_or_else(|| riffle_core::Error::State {
                        operator: self.operator.clone(),
                        message: format!("the OVER state has no column `{name}`"),
                    })
            };
            if is_history {
                let ts = column(RECENT.into())?;
                let ts = ts.as_primitive::<TimestampNanosecondType>();
                let args: Vec<ArrayRef> = (0..aggregates)
                    .map(|k| column(format!("arg_{k}")))
                    .collect::<Result<_>>()?;
                for (r, id) in ids.iter().enumerate() {
                    let values = args
                        .iter()
                        .map(|a| Ok(ScalarValue::try_from_array(a, r)?))
                        .collect::<Result<Vec<_>>>()?;
                    self.histories[*id as usize]
                        .entries
                        .push_back((ts.value(r), values));
                }
            } else {
                for k in 0..aggregates {
                    let counts = column(format!("count_{k}"))?;
                    let counts = counts.as_primitive::<riffle_core::arrow::datatypes::Int64Type>();
                    let values = column(format!("value_{k}"))?;
                    for (r, id) in ids.iter().enumerate() {
                        let h = &mut self.histories[*id as usize];
                        h.running.resize_with(aggregates, Acc::default);
                        let value = ScalarValue::try_from_array(&values, r)?;
                        h.running[k] = Acc {
                            count: counts.value(r),
                            value: (!value.is_null()).then_some(value),
                        };
                    }
                }
            }
        }
        Ok(())
    }
}
