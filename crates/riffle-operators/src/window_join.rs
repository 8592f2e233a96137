//! Equi-join of two streams inside the same tumbling event-time window.
//!
//! Both sides are keyed by their join keys and buffered per window; when the watermark
//! closes a window the buffered rows are joined with a hash table. `LeftSemi` emits each
//! left row once if any right row matches (Nexmark q8); `Inner` emits every pair.
//! Output: the chosen left columns, the chosen right columns (inner only),
//! `window_start`, `window_end`, `_timestamp = window_end − 1ns`.

use crate::aggregate::GroupKeys;
use crate::window::{nanos, take_rows, timestamp_array, timestamps, window_fields, window_start};
use riffle_core::arrow::array::BooleanArray;
use riffle_core::arrow::array::{ArrayRef, AsArray, StructArray, UInt16Array};
use riffle_core::arrow::compute::{cast, concat_batches, filter_record_batch};
use riffle_core::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimestampNanosecondType};
use riffle_core::operator::OperatorCounters;
use riffle_core::state::KEY_GROUP_FIELD;
use riffle_core::{
    timestamp_type, Epoch, Error, EventTime, Operator, OperatorContext, OperatorFactory,
    OperatorState, RecordBatch, Result, StreamSchema,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Which rows a window join emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinKind {
    /// Every matching (left, right) pair.
    Inner,
    /// Each left row with at least one match, once.
    LeftSemi,
}

/// Plans a window join.
pub struct WindowJoinFactory {
    kind: JoinKind,
    left: StreamSchema,
    right: StreamSchema,
    left_keys: Vec<usize>,
    right_keys: Vec<usize>,
    left_out: Vec<usize>,
    right_out: Vec<usize>,
    key_schema: SchemaRef,
    size: i64,
    schema: StreamSchema,
}

impl WindowJoinFactory {
    /// Joins `left` and `right` where `left_keys` equal `right_keys` inside tumbling
    /// windows of `size`, emitting `left_columns` and (inner) `right_columns`.
    ///
    /// # Errors
    /// Unknown columns, key lists of different lengths, or clashing output names.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        kind: JoinKind,
        left: &StreamSchema,
        right: &StreamSchema,
        left_keys: &[&str],
        right_keys: &[&str],
        size: Duration,
        left_columns: &[&str],
        right_columns: &[&str],
    ) -> Result<Self> {
        if left_keys.len() != right_keys.len() || left_keys.is_empty() {
            return Err(Error::plan(
                "a window join needs the same positive number of keys on both sides",
            ));
        }
        let idx = |s: &StreamSchema, names: &[&str]| {
            names
                .iter()
                .map(|n| s.index_of(n))
                .collect::<Result<Vec<_>>>()
        };
        let (lk, rk) = (idx(left, left_keys)?, idx(right, right_keys)?);
        let left_out = idx(left, left_columns)?;
        let right_out = if kind == JoinKind::Inner {
            idx(right, right_columns)?
        } else {
            Vec::new()
        };
        let mut fields: Vec<Field> = left_out
            .iter()
            .map(|&i| left.schema.field(i).clone())
            .collect();
        fields.extend(right_out.iter().map(|&i| right.schema.field(i).clone()));
        for (i, f) in fields.iter().enumerate() {
            if fields[..i].iter().any(|g| g.name() == f.name()) {
                return Err(Error::plan(format!(
                    "join output has two columns named `{}`; rename one side first",
                    f.name()
                )));
            }
        }
        fields.extend(window_fields());
        let key_schema = Arc::new(Schema::new(
            lk.iter()
                .map(|&i| left.schema.field(i).clone().with_nullable(true))
                .collect::<Vec<_>>(),
        ));
        Ok(Self {
            kind,
            left: left.clone(),
            right: right.clone(),
            left_keys: lk,
            right_keys: rk,
            left_out,
            right_out,
            key_schema,
            size: nanos(size),
            schema: StreamSchema::with_timestamp(fields),
        })
    }
}

impl OperatorFactory for WindowJoinFactory {
    fn describe(&self) -> String {
        let names = |s: &StreamSchema, k: &[usize]| {
            k.iter()
                .map(|&i| s.schema.field(i).name().clone())
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "tumble({}) {:?} join on ({}) = ({})",
            crate::window::display_nanos(self.size),
            self.kind,
            names(&self.left, &self.left_keys),
            names(&self.right, &self.right_keys)
        )
        .to_lowercase()
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
    fn stable_state(&self) -> bool {
        true // buffered rows never change; each is snapshotted once and kept
    }
    fn key_columns(&self, input: usize) -> Option<Vec<usize>> {
        Some(if input == 0 {
            self.left_keys.clone()
        } else {
            self.right_keys.clone()
        })
    }
    fn create(&self, ctx: &OperatorContext) -> Result<Box<dyn Operator>> {
        Ok(Box::new(WindowJoin {
            plan: WindowJoinFactory {
                kind: self.kind,
                left: self.left.clone(),
                right: self.right.clone(),
                left_keys: self.left_keys.clone(),
                right_keys: self.right_keys.clone(),
                left_out: self.left_out.clone(),
                right_out: self.right_out.clone(),
                key_schema: self.key_schema.clone(),
                size: self.size,
                schema: self.schema.clone(),
            },
            windows: BTreeMap::new(),
            watermark: EventTime::MIN,
            counters: ctx.counters.clone(),
            max_parallelism: ctx.max_parallelism,
            operator: ctx.operator_id.0.clone(),
        }))
    }
}

#[derive(Default)]
struct Buffered {
    sides: [Vec<RecordBatch>; 2],
    /// State batches of `sides[s][..snapshotted[s].len()]`: buffered rows never change,
    /// so each is turned into state (key groups hashed) once, not at every checkpoint.
    snapshotted: [Vec<RecordBatch>; 2],
}

struct WindowJoin {
    plan: WindowJoinFactory,
    windows: BTreeMap<EventTime, Buffered>,
    watermark: EventTime,
    counters: Arc<OperatorCounters>,
    max_parallelism: u16,
    operator: String,
}

impl WindowJoin {
    fn closed(&self, start: EventTime) -> bool {
        start.saturating_add(self.plan.size - 1) <= self.watermark
    }

    fn side_schema(&self, side: usize) -> &StreamSchema {
        if side == 0 {
            &self.plan.left
        } else {
            &self.plan.right
        }
    }

    fn keys_of(&self, side: usize, batch: &RecordBatch) -> Result<Vec<ArrayRef>> {
        let keys = if side == 0 {
            &self.plan.left_keys
        } else {
            &self.plan.right_keys
        };
        keys.iter()
            .zip(self.plan.key_schema.fields())
            .map(|(&i, f)| Ok(cast(batch.column(i), f.data_type())?))
            .collect()
    }

    fn join(&self, start: EventTime, buffered: Buffered) -> Result<Option<RecordBatch>> {
        let [left, right] = buffered.sides;
        if left.is_empty() || right.is_empty() {
            return Ok(None);
        }
        let left = concat_batches(&self.plan.left.schema, &left)?;
        let right = concat_batches(&self.plan.right.schema, &right)?;
        let mut table = GroupKeys::new(self.plan.key_schema.clone())?;
        let mut right_ids = Vec::new();
        let right_rows: Vec<u32> = (0..right.num_rows() as u32).collect();
        table.intern(&self.keys_of(1, &right)?, &right_rows, &mut right_ids)?;
        let mut matches: Vec<Vec<u32>> = vec![Vec::new(); table.len()];
        for (row, id) in right_ids.iter().enumerate() {
            matches[*id as usize].push(row as u32);
        }
        let mut left_ids = Vec::new();
        let left_rows: Vec<u32> = (0..left.num_rows() as u32).collect();
        table.intern(&self.keys_of(0, &left)?, &left_rows, &mut left_ids)?;
        let (mut out_left, mut out_right) = (Vec::new(), Vec::new());
        for (row, id) in left_ids.iter().enumerate() {
            let Some(found) = matches.get(*id as usize) else {
                continue;
            };
            match self.plan.kind {
                JoinKind::LeftSemi if !found.is_empty() => out_left.push(row as u32),
                JoinKind::Inner => {
                    for r in found {
                        out_left.push(row as u32);
                        out_right.push(*r);
                    }
                }
                JoinKind::LeftSemi => {}
            }
        }
        if out_left.is_empty() {
            return Ok(None);
        }
        let n = out_left.len();
        let left_cols: Vec<ArrayRef> = self
            .plan
            .left_out
            .iter()
            .map(|&i| left.column(i).clone())
            .collect();
        let right_cols: Vec<ArrayRef> = self
            .plan
            .right_out
            .iter()
            .map(|&i| right.column(i).clone())
            .collect();
        let mut columns = take_rows(&left_cols, &out_left)?;
        columns.extend(take_rows(&right_cols, &out_right)?);
        columns.push(timestamp_array(vec![start; n]));
        columns.push(timestamp_array(vec![start + self.plan.size; n]));
        columns.push(timestamp_array(vec![start + self.plan.size - 1; n]));
        Ok(Some(RecordBatch::try_new(
            self.plan.schema.schema.clone(),
            columns,
        )?))
    }
}

impl Operator for WindowJoin {
    fn on_batch(
        &mut self,
        input: usize,
        batch: RecordBatch,
        _: &mut Vec<RecordBatch>,
    ) -> Result<()> {
        let side = input.min(1);
        let ts = timestamps(&batch, self.side_schema(side).timestamp_index).to_vec();
        let mut starts: BTreeMap<EventTime, ()> = BTreeMap::new();
        let mut late = 0;
        for &t in &ts {
            let s = window_start(t, self.plan.size);
            if self.closed(s) {
                late += 1;
            } else {
                starts.insert(s, ());
            }
        }
        self.counters.add_late(late);
        for start in starts.into_keys() {
            let mask: BooleanArray = ts
                .iter()
                .map(|&t| Some(window_start(t, self.plan.size) == start))
                .collect();
            let part = filter_record_batch(&batch, &mask)?;
            self.windows.entry(start).or_default().sides[side].push(part);
        }
        Ok(())
    }

    fn on_watermark(&mut self, watermark: EventTime, out: &mut Vec<RecordBatch>) -> Result<()> {
        self.watermark = watermark;
        let mut fired = 0;
        while let Some(&start) = self.windows.keys().next() {
            if !self.closed(start) {
                break;
            }
            let Some(buffered) = self.windows.remove(&start) else {
                break;
            };
            out.extend(self.join(start, buffered)?);
            fired += 1;
        }
        self.counters.add_windows(fired);
        Ok(())
    }

    fn snapshot(&mut self, _: Epoch) -> Result<OperatorState> {
        let mut batches = Vec::new();
        let mut windows = std::mem::take(&mut self.windows);
        for (start, buffered) in windows.iter_mut() {
            for side in 0..2 {
                let row_fields = self.side_schema(side).schema.fields().clone();
                let name = if side == 0 { "left" } else { "right" };
                let schema = Arc::new(Schema::new(vec![
                    Field::new(KEY_GROUP_FIELD, DataType::UInt16, false),
                    Field::new("window_start", timestamp_type(), false),
                    Field::new(name, DataType::Struct(row_fields.clone()), false),
                ]));
                let done = buffered.snapshotted[side].len();
                for rows in &buffered.sides[side][done..] {
                    let keys = self.keys_of(side, rows)?;
                    let (_, kg) = crate::window::key_group_column(
                        &keys,
                        rows.num_rows(),
                        self.max_parallelism,
                    )?;
                    let kg = kg
                        .as_primitive::<riffle_core::arrow::datatypes::UInt16Type>()
                        .clone();
                    let columns: Vec<ArrayRef> = vec![
                        Arc::new(UInt16Array::from(kg)),
                        timestamp_array(vec![*start; rows.num_rows()]),
                        Arc::new(StructArray::new(
                            row_fields.clone(),
                            rows.columns().to_vec(),
                            None,
                        )),
                    ];
                    buffered.snapshotted[side].push(RecordBatch::try_new(schema.clone(), columns)?);
                }
                batches.extend(buffered.snapshotted[side].iter().cloned());
            }
        }
        self.windows = windows;
        Ok(OperatorState { batches })
    }

    fn restore(&mut self, state: OperatorState) -> Result<()> {
        for batch in state.batches {
            let starts = batch
                .column_by_name("window_start")
                .and_then(|c| c.as_primitive_opt::<TimestampNanosecondType>())
                .ok_or_else(|| Error::State {
                    operator: self.operator.clone(),
                    message: "missing `window_start`".into(),
                })?
                .clone();
            let (side, rows) = match (batch.column_by_name("left"), batch.column_by_name("right")) {
                (Some(l), _) => (0, l.clone()),
                (_, Some(r)) => (1, r.clone()),
                _ => {
                    return Err(Error::State {
                        operator: self.operator.clone(),
                        message: "state batch has neither `left` nor `right`".into(),
                    })
                }
            };
            let rows = rows.as_struct();
            let rows = RecordBatch::try_new(
                self.side_schema(side).schema.clone(),
                rows.columns().to_vec(),
            )?;
            for row in 0..rows.num_rows() {
                self.windows.entry(starts.value(row)).or_default().sides[side]
                    .push(rows.slice(row, 1));
            }
        }
        Ok(())
    }
}
