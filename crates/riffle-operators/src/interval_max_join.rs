//! For each left row with a validity interval, the maximum of a right column over the
//! right rows with the same key whose event time lies in the interval, emitted once the
//! watermark passes the interval's end (Nexmark q4's closing price of an auction).
//!
//! Right rows that arrive before their left row wait; once the watermark passes their
//! event time no on-time left row can still match them, so they are dropped. A left row
//! whose interval start is already behind the watermark is late. Left rows without any
//! matching right row produce nothing (inner semantics).
//! Output: the chosen left columns, then `{value_name}` (the maximum), `_timestamp` =
//! interval end.

use crate::aggregate::GroupKeys;
use crate::gather::Referenced;
use crate::window::{key_group_column, take_rows, timestamp_array, timestamps};
use riffle_core::arrow::array::{Array, ArrayRef, AsArray, Float64Array, Int64Array};
use riffle_core::arrow::compute::cast;
use riffle_core::arrow::datatypes::{
    DataType, Field, Float64Type, Schema, SchemaRef, TimeUnit, TimestampNanosecondType,
};
use riffle_core::operator::OperatorCounters;
use riffle_core::{
    Epoch, Error, EventTime, Operator, OperatorContext, OperatorFactory, OperatorState,
    RecordBatch, Result, StreamSchema,
};
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

/// Plans an interval max join.
pub struct IntervalMaxJoinFactory {
    left: StreamSchema,
    right: StreamSchema,
    left_key: usize,
    right_key: usize,
    interval: (usize, usize),
    value: usize,
    left_out: Vec<usize>,
    key_schema: SchemaRef,
    schema: StreamSchema,
}

impl IntervalMaxJoinFactory {
    /// Max of `right.value` per left row over right rows with `right_key = left_key` and
    /// event time in `[left.interval_start, left.interval_end]`, output as `value_name`.
    ///
    /// # Errors
    /// Unknown columns; interval columns that are not timestamps.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        left: &StreamSchema,
        right: &StreamSchema,
        left_key: &str,
        right_key: &str,
        interval: (&str, &str),
        value: &str,
        value_name: &str,
        left_columns: &[&str],
    ) -> Result<Self> {
        let (lk, rk) = (left.index_of(left_key)?, right.index_of(right_key)?);
        let interval = (left.index_of(interval.0)?, left.index_of(interval.1)?);
        for i in [interval.0, interval.1] {
            if !matches!(left.schema.field(i).data_type(), DataType::Timestamp(..)) {
                return Err(Error::plan(format!(
                    "interval column `{}` must be a timestamp",
                    left.schema.field(i).name()
                )));
            }
        }
        let value = right.index_of(value)?;
        if !right.schema.field(value).data_type().is_numeric() {
            return Err(Error::plan(format!(
                "max needs a numeric column, `{}` is not",
                right.schema.field(value).name()
            )));
        }
        let left_out = left_columns
            .iter()
            .map(|c| left.index_of(c))
            .collect::<Result<Vec<_>>>()?;
        let mut fields: Vec<Field> = left_out
            .iter()
            .map(|&i| left.schema.field(i).clone())
            .collect();
        fields.push(Field::new(
            value_name,
            right.schema.field(value).data_type().clone(),
            false,
        ));
        let key_schema = Arc::new(Schema::new(vec![left
            .schema
            .field(lk)
            .clone()
            .with_nullable(true)]));
        Ok(Self {
            left: left.clone(),
            right: right.clone(),
            left_key: lk,
            right_key: rk,
            interval,
            value,
            left_out,
            key_schema,
            schema: StreamSchema::with_timestamp(fields),
        })
    }
}

impl OperatorFactory for IntervalMaxJoinFactory {
    fn describe(&self) -> String {
        format!(
            "max({}) per {} over [{}, {}]",
            self.right.schema.field(self.value).name(),
            self.left.schema.field(self.left_key).name(),
            self.left.schema.field(self.interval.0).name(),
            self.left.schema.field(self.interval.1).name()
        )
    }
    fn output_schema(&self) -> &StreamSchema {
        &self.schema
    }
    fn input_count(&self) -> usize {
        2
    }
    fn is_stateful(&self) -> bool {
        true
    }
    fn key_columns(&self, input: usize) -> Option<Vec<usize>> {
        Some(vec![if input == 0 {
            self.left_key
        } else {
            self.right_key
        }])
    }
    fn create(&self, ctx: &OperatorContext) -> Result<Box<dyn Operator>> {
        Ok(Box::new(IntervalMaxJoin {
            left: self.left.clone(),
            right: self.right.clone(),
            left_key: self.left_key,
            right_key: self.right_key,
            interval: self.interval,
            value: self.value,
            left_out: self.left_out.clone(),
            schema: self.schema.clone(),
            table: GroupKeys::new(self.key_schema.clone())?,
            stored: StoredRows::default(),
            open: HashMap::new(),
            by_end: BTreeSet::new(),
            pending: HashMap::new(),
            pending_order: VecDeque::new(),
            watermark: EventTime::MIN,
            counters: ctx.counters.clone(),
            max_parallelism: ctx.max_parallelism,
            operator: ctx.operator_id.0.clone(),
        }))
    }
}

/// An open left row: its interval, the best right value so far, and where the row is.
struct Open {
    start: EventTime,
    end: EventTime,
    best: Option<f64>,
    /// (stored batch id, row in it).
    at: (u32, u32),
}

/// Left batches still referenced by open rows, with how many rows still point at each.
#[derive(Default)]
struct StoredRows {
    batches: HashMap<u32, (RecordBatch, usize)>,
    next: u32,
}

impl StoredRows {
    fn add(&mut self, batch: RecordBatch) -> u32 {
        let id = self.next;
        self.next += 1;
        self.batches.insert(id, (batch, 0));
        id
    }

    fn retain(&mut self, id: u32) {
        if let Some(entry) = self.batches.get_mut(&id) {
            entry.1 += 1;
        }
    }

    fn release(&mut self, id: u32) {
        if let Some(entry) = self.batches.get_mut(&id) {
            entry.1 -= 1;
            if entry.1 == 0 {
                self.batches.remove(&id);
            }
        }
    }

    /// Drops a batch nobody references (all its rows were late or replaced).
    fn forget_if_unused(&mut self, id: u32) {
        if self.batches.get(&id).is_some_and(|e| e.1 == 0) {
            self.batches.remove(&id);
        }
    }

    /// The rows at `at`, as one batch of `schema`.
    fn gather(&self, schema: &SchemaRef, at: &[(u32, u32)]) -> Result<RecordBatch> {
        let at = Referenced::new(at.iter().map(|&(b, r)| (b as usize, r as usize)));
        let mut batches = Vec::with_capacity(at.batches().len());
        for &id in at.batches() {
            let Some((batch, _)) = self.batches.get(&(id as u32)) else {
                return Err(Error::State {
                    operator: "interval max join".into(),
                    message: format!("a row references stored batch {id}, which is gone"),
                });
            };
            batches.push(batch);
        }
        let mut columns = Vec::with_capacity(schema.fields().len());
        for c in 0..schema.fields().len() {
            let arrays: Vec<&dyn Array> = batches.iter().map(|b| b.column(c).as_ref()).collect();
            columns.push(at.column(&arrays)?);
        }
        Ok(RecordBatch::try_new(schema.clone(), columns)?)
    }
}

struct IntervalMaxJoin {
    left: StreamSchema,
    right: StreamSchema,
    left_key: usize,
    right_key: usize,
    interval: (usize, usize),
    value: usize,
    left_out: Vec<usize>,
    schema: StreamSchema,
    table: GroupKeys,
    stored: StoredRows,
    open: HashMap<u32, Open>,
    by_end: BTreeSet<(EventTime, u32)>,
    /// Right (event time, value) waiting for their left row, per key id.
    pending: HashMap<u32, Vec<(EventTime, f64)>>,
    pending_order: VecDeque<(EventTime, u32)>,
    watermark: EventTime,
    counters: Arc<OperatorCounters>,
    max_parallelism: u16,
    operator: String,
}

fn nanos_column(batch: &RecordBatch, column: usize) -> Result<Vec<i64>> {
    let c = cast(
        batch.column(column),
        &DataType::Timestamp(TimeUnit::Nanosecond, None),
    )?;
    Ok(c.as_primitive::<TimestampNanosecondType>()
        .values()
        .to_vec())
}

impl IntervalMaxJoin {
    fn key_ids(&mut self, batch: &RecordBatch, column: usize) -> Result<Vec<u32>> {
        let key = cast(
            batch.column(column),
            self.table.key_schema().field(0).data_type(),
        )?;
        let rows: Vec<u32> = (0..batch.num_rows() as u32).collect();
        let mut ids = Vec::new();
        self.table.intern(&[key], &rows, &mut ids)?;
        Ok(ids)
    }

    fn open_left(
        &mut self,
        id: u32,
        start: EventTime,
        end: EventTime,
        best: Option<f64>,
        at: (u32, u32),
    ) {
        let mut best = best;
        if let Some(waiting) = self.pending.remove(&id) {
            for (t, v) in waiting {
                if t >= start && t <= end {
                    best = Some(best.map_or(v, |b| b.max(v)));
                }
            }
        }
        self.stored.retain(at.0);
        if let Some(old) = self.open.insert(
            id,
            Open {
                start,
                end,
                best,
                at,
            },
        ) {
            // A second left row with the same key replaces the first (ids are unique in Nexmark).
            self.by_end.remove(&(old.end, id));
            self.stored.release(old.at.0);
        }
        self.by_end.insert((end, id));
    }
}

impl Operator for IntervalMaxJoin {
    fn on_batch(
        &mut self,
        input: usize,
        batch: RecordBatch,
        _: &mut Vec<RecordBatch>,
    ) -> Result<()> {
        if input == 0 {
            let ids = self.key_ids(&batch, self.left_key)?;
            let starts = nanos_column(&batch, self.interval.0)?;
            let ends = nanos_column(&batch, self.interval.1)?;
            let stored = self.stored.add(batch);
            let mut late = 0;
            for row in 0..ids.len() {
                if ends[row] <= self.watermark {
                    late += 1;
                    continue;
                }
                self.open_left(ids[row], starts[row], ends[row], None, (stored, row as u32));
            }
            self.stored.forget_if_unused(stored);
            self.counters.add_late(late);
        } else {
            let ids = self.key_ids(&batch, self.right_key)?;
            let ts = timestamps(&batch, self.right.timestamp_index).to_vec();
            let values = cast(batch.column(self.value), &DataType::Float64)?;
            let values = values.as_primitive::<Float64Type>();
            let mut late = 0;
            for row in 0..batch.num_rows() {
                let (id, t, v) = (ids[row], ts[row], values.value(row));
                if t <= self.watermark {
                    late += 1;
                    continue;
                }
                match self.open.get_mut(&id) {
                    Some(open) if t >= open.start && t <= open.end => {
                        open.best = Some(open.best.map_or(v, |b| b.max(v)))
                    }
                    Some(_) => {}
                    None => {
                        self.pending.entry(id).or_default().push((t, v));
                        self.pending_order.push_back((t, id));
                    }
                }
            }
            self.counters.add_late(late);
        }
        Ok(())
    }

    fn on_watermark(&mut self, watermark: EventTime, out: &mut Vec<RecordBatch>) -> Result<()> {
        self.watermark = watermark;
        while let Some(&(t, id)) = self.pending_order.front() {
            if t > watermark {
                break;
            }
            self.pending_order.pop_front();
            if let Some(list) = self.pending.get_mut(&id) {
                list.retain(|(pt, _)| *pt > watermark);
                if list.is_empty() {
                    self.pending.remove(&id);
                }
            }
        }
        let mut closed = Vec::new();
        while let Some(&(end, id)) = self.by_end.first() {
            if end > watermark {
                break;
            }
            self.by_end.pop_first();
            if let Some(open) = self.open.remove(&id) {
                closed.push(open);
            }
        }
        let matched: Vec<&Open> = closed.iter().filter(|o| o.best.is_some()).collect();
        let result = if matched.is_empty() {
            None
        } else {
            let at: Vec<(u32, u32)> = matched.iter().map(|o| o.at).collect();
            let finals: Vec<f64> = matched.iter().filter_map(|o| o.best).collect();
            let ends: Vec<EventTime> = matched.iter().map(|o| o.end).collect();
            Some((self.stored.gather(&self.left.schema, &at)?, finals, ends))
        };
        for open in &closed {
            self.stored.release(open.at.0);
        }
        let Some((left, finals, ends)) = result else {
            return Ok(());
        };
        let all: Vec<u32> = (0..left.num_rows() as u32).collect();
        let selected: Vec<ArrayRef> = self
            .left_out
            .iter()
            .map(|&i| left.column(i).clone())
            .collect();
        let mut columns = take_rows(&selected, &all)?;
        let value_type = self
            .schema
            .schema
            .field(self.left_out.len())
            .data_type()
            .clone();
        let finals: ArrayRef = Arc::new(Float64Array::from(finals));
        columns.push(cast(&finals, &value_type)?);
        columns.push(timestamp_array(ends));
        self.counters.add_windows(all.len() as u64);
        out.push(RecordBatch::try_new(self.schema.schema.clone(), columns)?);
        Ok(())
    }

    fn snapshot(&mut self, _: Epoch) -> Result<OperatorState> {
        // Open left rows with their best value so far; waiting right rows as (key, time, value).
        let mut batches = Vec::new();
        if !self.open.is_empty() {
            let opens: Vec<&Open> = self.open.values().collect();
            let at: Vec<(u32, u32)> = opens.iter().map(|o| o.at).collect();
            let rows = self.stored.gather(&self.left.schema, &at)?;
            let keys = vec![cast(
                rows.column(self.left_key),
                self.table.key_schema().field(0).data_type(),
            )?];
            let (kg_field, kg) = key_group_column(&keys, rows.num_rows(), self.max_parallelism)?;
            let mut fields = vec![kg_field, Field::new("best", DataType::Float64, true)];
            let mut columns: Vec<ArrayRef> = vec![
                kg,
                Arc::new(Float64Array::from(
                    opens.iter().map(|o| o.best).collect::<Vec<_>>(),
                )),
            ];
            fields.push(Field::new(
                "left",
                DataType::Struct(self.left.schema.fields().clone()),
                false,
            ));
            columns.push(Arc::new(riffle_core::arrow::array::StructArray::new(
                self.left.schema.fields().clone(),
                rows.columns().to_vec(),
                None,
            )));
            batches.push(RecordBatch::try_new(
                Arc::new(Schema::new(fields)),
                columns,
            )?);
        }
        let waiting: Vec<(u32, EventTime, f64)> = self
            .pending
            .iter()
            .flat_map(|(id, l)| l.iter().map(move |(t, v)| (*id, *t, *v)))
            .collect();
        if !waiting.is_empty() {
            let ids: Vec<u32> = waiting.iter().map(|w| w.0).collect();
            let keys = self.table.keys(&ids)?;
            let (kg_field, kg) = key_group_column(&keys, ids.len(), self.max_parallelism)?;
            let key_field = self
                .table
                .key_schema()
                .field(0)
                .clone()
                .with_name("pending_key");
            let fields = vec![
                kg_field,
                key_field,
                Field::new("pending_time", DataType::Int64, false),
                Field::new("pending_value", DataType::Float64, false),
            ];
            let columns: Vec<ArrayRef> = vec![
                kg,
                keys[0].clone(),
                Arc::new(Int64Array::from(
                    waiting.iter().map(|w| w.1).collect::<Vec<_>>(),
                )),
                Arc::new(Float64Array::from(
                    waiting.iter().map(|w| w.2).collect::<Vec<_>>(),
                )),
            ];
            batches.push(RecordBatch::try_new(
                Arc::new(Schema::new(fields)),
                columns,
            )?);
        }
        Ok(OperatorState::of(batches))
    }

    fn restore(&mut self, state: OperatorState) -> Result<()> {
        let operator = self.operator.clone();
        let bad = |m: &str| Error::State {
            operator: operator.clone(),
            message: m.into(),
        };
        for batch in state.batches {
            if let Some(left) = batch.column_by_name("left") {
                let rows = RecordBatch::try_new(
                    self.left.schema.clone(),
                    left.as_struct().columns().to_vec(),
                )?;
                let best = batch
                    .column_by_name("best")
                    .and_then(|c| c.as_primitive_opt::<Float64Type>())
                    .ok_or_else(|| bad("missing `best`"))?
                    .clone();
                let ids = self.key_ids(&rows, self.left_key)?;
                let (starts, ends) = (
                    nanos_column(&rows, self.interval.0)?,
                    nanos_column(&rows, self.interval.1)?,
                );
                let stored = self.stored.add(rows);
                for row in 0..ids.len() {
                    let b = best.is_valid(row).then(|| best.value(row));
                    self.open_left(ids[row], starts[row], ends[row], b, (stored, row as u32));
                }
            } else if let Some(keys) = batch.column_by_name("pending_key") {
                let keys = keys.clone();
                let rows: Vec<u32> = (0..batch.num_rows() as u32).collect();
                let mut ids = Vec::new();
                self.table.intern(&[keys], &rows, &mut ids)?;
                let t = batch
                    .column_by_name("pending_time")
                    .and_then(|c| c.as_primitive_opt::<riffle_core::arrow::datatypes::Int64Type>())
                    .ok_or_else(|| bad("missing `pending_time`"))?
                    .clone();
                let v = batch
                    .column_by_name("pending_value")
                    .and_then(|c| c.as_primitive_opt::<Float64Type>())
                    .ok_or_else(|| bad("missing `pending_value`"))?
                    .clone();
                for (row, &id) in ids.iter().enumerate() {
                    self.pending
                        .entry(id)
                        .or_default()
                        .push((t.value(row), v.value(row)));
                    self.pending_order.push_back((t.value(row), id));
                }
            } else {
                return Err(bad("unknown state batch"));
            }
        }
        Ok(())
    }
}
