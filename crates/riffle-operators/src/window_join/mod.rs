//! Equi-join of two streams inside the same tumbling event-time window.
//!
//! Both sides are keyed by their join keys and buffered per window; when the watermark
//! closes a window the buffered rows are joined with a hash table. `LeftSemi` (`LeftAnti`) emits each
//! left row once if any right row matches (Nexmark q8); `Inner` emits every pair, and
//! as an outer join ([`WindowJoinFactory::with_outer`], `outer.rs`) also each row of an
//! outer side that matched nothing in its window, padded with NULLs: once the window
//! closes a row's matches are all known, so the result stays append-only.
//! Output: the chosen left columns, the chosen right columns (inner only),
//! `window_start`, `window_end`, `_timestamp = window_end − 1ns`.

use crate::aggregate::GroupKeys;
use crate::delta_log::DeltaLog;
mod outer;
mod state;

use crate::window::{
    nanos, timestamp_array, timestamps, window_fields, window_start, window_state_schema,
};
use riffle_core::arrow::array::{ArrayRef, AsArray, StructArray, UInt32Array};
use riffle_core::arrow::buffer::BooleanBuffer;
use riffle_core::arrow::compute::{cast, concat_batches, take_record_batch};
use riffle_core::arrow::datatypes::{
    DataType, Field, Fields, Schema, SchemaRef, TimestampNanosecondType,
};
use riffle_core::operator::OperatorCounters;
use riffle_core::{
    timestamp_type, CommittedEpoch, Epoch, Error, EventTime, Operator, OperatorContext,
    OperatorFactory, OperatorState, RecordBatch, Result, StreamSchema,
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
    /// Each left row without a match in its window, once (`NOT EXISTS`); a row with a
    /// NULL key matches nothing.
    LeftAnti,
    /// `NOT IN`: as `LeftAnti`, with SQL's NULL logic per window — a window whose right
    /// side holds a NULL key emits nothing, and a left row with a NULL key is emitted
    /// only when its window's right side is empty.
    LeftAntiNullAware,
}

/// Plans a window join.
#[derive(Clone)]
pub struct WindowJoinFactory {
    kind: JoinKind,
    left: StreamSchema,
    right: StreamSchema,
    left_keys: Vec<usize>,
    right_keys: Vec<usize>,
    /// What each side buffers: only its key and output columns.
    buffers: [SideBuffer; 2],
    key_schema: SchemaRef,
    size: i64,
    schema: StreamSchema,
    /// Unmatched rows of (left, right) are emitted padded with NULLs.
    outer: (bool, bool),
}

/// The columns one side of a join keeps until its window fires.
#[derive(Clone)]
struct SideBuffer {
    /// Input column indices kept.
    columns: Vec<usize>,
    /// The kept columns' schema.
    schema: SchemaRef,
    /// Key positions in the kept columns.
    keys: Vec<usize>,
    /// Output positions in the kept columns.
    out: Vec<usize>,
}

impl SideBuffer {
    fn new(input: &StreamSchema, keys: &[usize], out: &[usize]) -> Result<Self> {
        let mut columns: Vec<usize> = keys.iter().chain(out).copied().collect();
        columns.sort_unstable();
        columns.dedup();
        let position = |i: &usize| columns.iter().position(|c| c == i).unwrap_or(0);
        Ok(Self {
            schema: Arc::new(input.schema.project(&columns)?),
            keys: keys.iter().map(position).collect(),
            out: out.iter().map(position).collect(),
            columns,
        })
    }
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
        // Keys are nullable when either side's are (a null key never matches); non-null
        // Int64 keys take the group table's fast path.
        let key_schema = Arc::new(Schema::new(
            lk.iter()
                .zip(&rk)
                .map(|(&l, &r)| {
                    let nullable =
                        left.schema.field(l).is_nullable() || right.schema.field(r).is_nullable();
                    left.schema.field(l).clone().with_nullable(nullable)
                })
                .collect::<Vec<_>>(),
        ));
        let buffers = [
            SideBuffer::new(left, &lk, &left_out)?,
            SideBuffer::new(right, &rk, &right_out)?,
        ];
        Ok(Self {
            kind,
            left: left.clone(),
            right: right.clone(),
            left_keys: lk,
            right_keys: rk,
            buffers,
            key_schema,
            size: nanos(size),
            schema: StreamSchema::with_timestamp(fields),
            outer: (false, false),
        })
    }

    /// The same join as a LEFT (`left`), RIGHT (`right`) or FULL outer join: a row of an
    /// outer side that matches nothing in its window is emitted when the window closes,
    /// the other side's columns NULL.
    ///
    /// # Errors
    /// A semi join.
    pub fn with_outer(mut self, left: bool, right: bool) -> Result<Self> {
        if (left || right) && self.kind != JoinKind::Inner {
            return Err(Error::plan("only an inner window join can be outer"));
        }
        self.outer = (left, right);
        let left_fields = self.buffers[0].out.len();
        let fields: Vec<Field> = self
            .schema
            .user_fields()
            .enumerate()
            .map(|(i, f)| {
                // A padded row's other side is NULL.
                let padded = if i < left_fields { right } else { left };
                f.as_ref().clone().with_nullable(f.is_nullable() || padded)
            })
            .collect();
        let window_bounds = 2;
        let mut fields = fields;
        // The window bounds are never padded.
        let n = fields.len();
        for f in &mut fields[n - window_bounds..] {
            *f = f.clone().with_nullable(false);
        }
        self.schema = StreamSchema::with_timestamp(fields);
        Ok(self)
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
        let kind = match self.outer {
            (true, true) => "full outer".to_string(),
            (true, false) => "left outer".to_string(),
            (false, true) => "right outer".to_string(),
            (false, false) => format!("{:?}", self.kind),
        };
        format!(
            "tumble({}) {kind} join on ({}) = ({})",
            crate::window::display_nanos(self.size),
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
            plan: self.clone(),
            windows: BTreeMap::new(),
            watermark: EventTime::MIN,
            counters: ctx.counters.clone(),
            max_parallelism: ctx.max_parallelism,
            operator: ctx.operator_id.0.clone(),
            committed: ctx.committed.clone(),
        }))
    }
}

#[derive(Default)]
struct Buffered {
    sides: [Vec<RecordBatch>; 2],
    /// State batches of `sides[s][..covered[s]]`, one per snapshot that found new rows:
    /// buffered rows never change, so they are turned into state (key groups hashed)
    /// once, and the files holding them are reused by later checkpoints.
    snapshotted: [Vec<RecordBatch>; 2],
    covered: [usize; 2],
    /// A semi join's right side: only which keys occurred matters, so the distinct keys
    /// are kept instead of the rows (fewer rows to hold, checkpoint and join).
    right_keys: Option<KeySet>,
}

/// Distinct join keys and what earlier snapshots wrote of them.
struct KeySet {
    keys: GroupKeys,
    delta: DeltaLog,
}

struct WindowJoin {
    plan: WindowJoinFactory,
    windows: BTreeMap<EventTime, Buffered>,
    watermark: EventTime,
    counters: Arc<OperatorCounters>,
    max_parallelism: u16,
    operator: String,
    /// The newest committed epoch heard: a semi join's key sets stop holding what
    /// committed snapshots wrote.
    committed: CommittedEpoch,
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

    /// The key columns of a batch of `side`'s buffered columns, cast to the key types.
    fn keys_of(&self, side: usize, batch: &RecordBatch) -> Result<Vec<ArrayRef>> {
        self.plan.buffers[side]
            .keys
            .iter()
            .zip(self.plan.key_schema.fields())
            .map(|(&i, f)| Ok(cast(batch.column(i), f.data_type())?))
            .collect()
    }

    /// A semi or anti join, whose right side is only the set of its keys.
    fn semi(&self) -> bool {
        matches!(
            self.plan.kind,
            JoinKind::LeftSemi | JoinKind::LeftAnti | JoinKind::LeftAntiNullAware
        )
    }

    fn join(&self, start: EventTime, buffered: Buffered) -> Result<Option<RecordBatch>> {
        let [left, right] = buffered.sides;
        let (pad_left, pad_right) = self.plan.outer;
        if left.is_empty() && !pad_right {
            return Ok(None);
        }
        let left = concat_batches(&self.plan.buffers[0].schema, &left)?;
        let left_keys = self.keys_of(0, &left)?;
        let left_rows = non_null_rows(&left_keys);
        let mut left_ids = Vec::new();
        let (mut out_left, mut out_right) = (Vec::new(), Vec::new());
        let right = if self.semi() {
            // A NOT IN's right rows with a NULL key are buffered as rows (`on_batch`).
            let right_null = right.iter().any(|b| b.num_rows() > 0);
            let mut matched = vec![false; left.num_rows()];
            let mut right_keys = 0;
            if let Some(set) = buffered.right_keys {
                // Ids below the right side's count are keys the right side holds.
                let mut table = set.keys;
                right_keys = table.len();
                table.intern(&left_keys, &left_rows, &mut left_ids)?;
                for (&row, &id) in left_rows.iter().zip(&left_ids) {
                    matched[row as usize] = (id as usize) < right_keys;
                }
            }
            let all = 0..left.num_rows() as u32;
            match self.plan.kind {
                JoinKind::LeftSemi => out_left.extend(all.filter(|&r| matched[r as usize])),
                JoinKind::LeftAntiNullAware if right_null => {}
                JoinKind::LeftAntiNullAware if right_keys == 0 => out_left.extend(all),
                JoinKind::LeftAntiNullAware => {
                    out_left.extend(left_rows.iter().filter(|&&r| !matched[r as usize]));
                }
                _ => out_left.extend(all.filter(|&r| !matched[r as usize])),
            }
            None
        } else {
            if right.is_empty() && !pad_left {
                return Ok(None);
            }
            let right = concat_batches(&self.plan.buffers[1].schema, &right)?;
            let right_keys = self.keys_of(1, &right)?;
            let right_rows = non_null_rows(&right_keys);
            let mut table = GroupKeys::for_matchable(&self.plan.key_schema)?;
            let mut right_ids = Vec::new();
            table.intern(&right_keys, &right_rows, &mut right_ids)?;
            let mut matches: Vec<Vec<u32>> = vec![Vec::new(); table.len()];
            for (&row, &id) in right_rows.iter().zip(&right_ids) {
                matches[id as usize].push(row);
            }
            table.intern(&left_keys, &left_rows, &mut left_ids)?;
            for (&row, &id) in left_rows.iter().zip(&left_ids) {
                for &r in matches.get(id as usize).into_iter().flatten() {
                    out_left.push(row);
                    out_right.push(r);
                }
            }
            Some(right)
        };
        // The rows each side takes: matched pairs, then an outer side's unmatched rows.
        let (left_take, right_take) = outer::picks(
            out_left,
            out_right,
            (left.num_rows(), right.as_ref().map_or(0, |r| r.num_rows())),
            self.plan.outer,
        );
        let n = left_take.len();
        if n == 0 {
            return Ok(None);
        }
        let left_cols: Vec<ArrayRef> = self.plan.buffers[0]
            .out
            .iter()
            .map(|&i| left.column(i).clone())
            .collect();
        let right_cols: Vec<ArrayRef> = match &right {
            Some(right) => self.plan.buffers[1]
                .out
                .iter()
                .map(|&i| right.column(i).clone())
                .collect(),
            None => Vec::new(),
        };
        let mut columns = outer::take(&left_cols, &left_take)?;
        columns.extend(outer::take(&right_cols, &right_take)?);
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
        let batch = batch.project(&self.plan.buffers[side].columns)?;
        let mut by_start: BTreeMap<EventTime, Vec<u32>> = BTreeMap::new();
        let mut late = 0;
        for (row, &t) in ts.iter().enumerate() {
            let s = window_start(t, self.plan.size);
            if self.closed(s) {
                late += 1;
            } else {
                by_start.entry(s).or_default().push(row as u32);
            }
        }
        self.counters.add_late(late);
        if side == 1 && self.semi() {
            let keys = self.keys_of(1, &batch)?;
            if let Some(valid) = valid_mask(&keys) {
                if self.plan.kind == JoinKind::LeftAntiNullAware {
                    // A NULL key empties its window's NOT IN: one such row per batch and
                    // window is kept as a right row, which the state holds like any.
                    for (&start, rows) in &by_start {
                        if let Some(&r) = rows.iter().find(|&&r| !valid.value(r as usize)) {
                            let part = take_record_batch(&batch, &UInt32Array::from(vec![r]))?;
                            self.windows.entry(start).or_default().sides[1].push(part);
                        }
                    }
                }
                for rows in by_start.values_mut() {
                    rows.retain(|&r| valid.value(r as usize));
                }
            }
            return self.add_right_keys(&keys, by_start);
        }
        for (start, rows) in by_start {
            let part = take_record_batch(&batch, &UInt32Array::from(rows))?;
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

    fn snapshot(&mut self, epoch: Epoch) -> Result<OperatorState> {
        let heard = self.committed.newest();
        let mut batches = Vec::new();
        // Taken out for the loop so `state_batch` can borrow `self`; put back even on error.
        let mut windows = std::mem::take(&mut self.windows);
        let mut result = Ok(());
        'windows: for (&start, buffered) in windows.iter_mut() {
            if let Some(set) = &mut buffered.right_keys {
                let len = set.keys.len();
                set.delta.hand_over_committed(epoch, heard);
                let ids = set.delta.take_changed(len);
                if !ids.is_empty() {
                    match self.key_state_batch(start, &set.keys, &ids) {
                        Ok(batch) => set.delta.push(batch, len),
                        Err(e) => {
                            result = Err(e);
                            break 'windows;
                        }
                    }
                }
                batches.extend(set.delta.batches.iter().cloned());
            }
            for side in 0..2 {
                let covered = buffered.covered[side];
                if buffered.sides[side].len() > covered {
                    // The new rows become one buffered batch that the state batch shares:
                    // no second copy in memory, fewer batches to join when the window fires.
                    let schema = &self.plan.buffers[side].schema;
                    let made = concat_batches(schema, &buffered.sides[side][covered..])
                        .map_err(Error::from)
                        .and_then(|rows| Ok((self.state_batch(start, side, &rows)?, rows)));
                    match made {
                        Ok((batch, rows)) => {
                            buffered.snapshotted[side].push(batch);
                            buffered.sides[side].truncate(covered);
                            buffered.sides[side].push(rows);
                        }
                        Err(e) => {
                            result = Err(e);
                            break 'windows;
                        }
                    }
                    buffered.covered[side] = buffered.sides[side].len();
                }
                batches.extend(buffered.snapshotted[side].iter().cloned());
            }
        }
        self.windows = windows;
        result?;
        Ok(OperatorState::of(batches))
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
            if let Some(keys) = batch.column_by_name(RIGHT_KEYS) {
                self.restore_keys(&starts, keys.as_struct().columns())?;
                continue;
            }
            let (side, rows) = match (batch.column_by_name("left"), batch.column_by_name("right")) {
                (Some(l), _) => (0, l.clone()),
                (_, Some(r)) => (1, r.clone()),
                _ => {
                    return Err(Error::State {
                        operator: self.operator.clone(),
                        message: format!("state batch has none of `left`, `right`, `{RIGHT_KEYS}`"),
                    })
                }
            };
            let rows = RecordBatch::try_new(
                self.plan.buffers[side].schema.clone(),
                rows.as_struct().columns().to_vec(),
            )?;
            // One buffered batch per window, not per row.
            let mut by_window: BTreeMap<i64, Vec<u32>> = BTreeMap::new();
            for (row, start) in starts.values().iter().enumerate() {
                by_window.entry(*start).or_default().push(row as u32);
            }
            for (start, picked) in by_window {
                let part = take_record_batch(&rows, &UInt32Array::from(picked))?;
                self.windows.entry(start).or_default().sides[side].push(part);
            }
        }
        Ok(())
    }
}

/// Where a semi join's state batch holds the distinct right keys.
pub(super) const RIGHT_KEYS: &str = "right_keys";

/// Per row, whether every key is non-null; `None` when no key column has nulls.
pub(crate) fn valid_mask(keys: &[ArrayRef]) -> Option<BooleanBuffer> {
    keys.iter()
        .filter_map(|k| k.logical_nulls())
        .map(|n| n.into_inner())
        .reduce(|a, b| &a & &b)
}

/// The rows whose keys are all non-null: a null key joins nothing.
pub(crate) fn non_null_rows(keys: &[ArrayRef]) -> Vec<u32> {
    let n = keys.first().map_or(0, |k| k.len());
    match valid_mask(keys) {
        None => (0..n as u32).collect(),
        Some(valid) => (0..n as u32).filter(|&r| valid.value(r as usize)).collect(),
    }
}
