//! The by-time stages: rows whose time lies in a window's `[start, end]` (or
//! `[start, end)`) and whose value is that window's extreme (see the module's
//! documentation).
//!
//! The global stage decides. A row counts toward its own window's extreme unless that
//! window has closed (then, like the aggregate it replaces, it is late for the extreme
//! but still meets it if equal). A row exactly at a window's start also meets the
//! previous window (`end_inclusive`). A closed window's extreme stays known, one key per
//! window, so a late row finds it.
//!
//! The local stage forwards every row the global one may need, once: a window's rows at
//! the local extreme when the window closes locally (the global extreme is one of the
//! local ones), and at once every row exactly at a window's start (it may meet the
//! previous window at any value) or behind the local watermark.

use super::{row_state_batch, row_state_schema, state_error, state_rows, window_starts, Shape};
use crate::window::{take_rows, timestamp_array, timestamps};
use riffle_core::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, UInt16Array};
use riffle_core::arrow::compute::{concat_batches, filter_record_batch};
use riffle_core::arrow::datatypes::{DataType, Field, Schema};
use riffle_core::operator::OperatorCounters;
use riffle_core::state::KEY_GROUP_FIELD;
use riffle_core::{
    timestamp_type, Epoch, EventTime, Operator, OperatorContext, OperatorState, RecordBatch,
    Result, StreamSchema,
};
use std::collections::BTreeMap;
use std::sync::Arc;

/// An open window: its extreme so far (order key) and the rows holding it; in the global
/// stage also the rows at its end that may meet it, with their keys.
#[derive(Default)]
struct Open {
    key: Option<i128>,
    rows: Vec<RecordBatch>,
    at_end: Vec<(RecordBatch, Vec<i128>)>,
    /// Local stage: its rows were sent when the source went idle; later rows at or above
    /// `key` go at once.
    sent: bool,
}

impl Open {
    /// Takes the rows of `batch` where `take` holds and whose key is `key`, if that is
    /// not below the window's extreme so far.
    fn offer(&mut self, batch: &RecordBatch, take: &BooleanArray, key: i128) -> Result<()> {
        if self.key.is_some_and(|k| key < k) {
            return Ok(());
        }
        if self.key.is_none_or(|k| key > k) {
            self.key = Some(key);
            self.rows.clear();
        }
        self.rows.push(filter_record_batch(batch, take)?);
        Ok(())
    }
}

/// Per window of `batch`, the largest key among the rows `counted` admits.
fn batch_extremes(
    shape: &Shape,
    ts: &[i64],
    keys: &[Option<i128>],
    counted: impl Fn(usize) -> bool,
) -> BTreeMap<EventTime, i128> {
    let mut out: BTreeMap<EventTime, i128> = BTreeMap::new();
    for (row, (&t, key)) in ts.iter().zip(keys).enumerate() {
        let Some(k) = *key else { continue };
        if counted(row) {
            let e = out.entry(shape.window_start(t)).or_insert(k);
            *e = (*e).max(k);
        }
    }
    out
}

/// Adds each window's rows at the batch's extreme to `windows`.
fn offer_extremes(
    shape: &Shape,
    windows: &mut BTreeMap<EventTime, Open>,
    batch: &RecordBatch,
    ts: &[i64],
    keys: &[Option<i128>],
    counted: impl Fn(usize) -> bool,
) -> Result<()> {
    for (start, key) in batch_extremes(shape, ts, keys, &counted) {
        let take: BooleanArray = (0..ts.len())
            .map(|row| {
                Some(counted(row) && keys[row] == Some(key) && shape.window_start(ts[row]) == start)
            })
            .collect();
        windows.entry(start).or_default().offer(batch, &take, key)?;
    }
    Ok(())
}

/// The local stage.
pub(super) struct Local {
    shape: Shape,
    end_inclusive: bool,
    windows: BTreeMap<EventTime, Open>,
    watermark: EventTime,
}

impl Local {
    pub(super) fn new(shape: Shape, end_inclusive: bool) -> Self {
        Self {
            shape,
            end_inclusive,
            windows: BTreeMap::new(),
            watermark: EventTime::MIN,
        }
    }
}

impl Operator for Local {
    fn on_batch(&mut self, _: usize, batch: RecordBatch, out: &mut Vec<RecordBatch>) -> Result<()> {
        let ts = timestamps(&batch, self.shape.input.timestamp_index).to_vec();
        let keys = self.shape.keys(&batch)?;
        // (Windows are sent only after the source went idle: most batches look up none.)
        let any_sent = self.windows.values().any(|w| w.sent);
        let now: Vec<bool> = ts
            .iter()
            .zip(&keys)
            .map(|(&t, k)| {
                let start = self.shape.window_start(t);
                let sent = || {
                    any_sent
                        && self
                            .windows
                            .get(&start)
                            .is_some_and(|w| w.sent && *k >= w.key)
                };
                k.is_some()
                    && ((self.end_inclusive && t == start)
                        || self.shape.closed(start, self.watermark)
                        || sent())
            })
            .collect();
        if now.iter().any(|&n| n) {
            let mask: BooleanArray = now.iter().map(|&n| Some(n)).collect();
            out.push(filter_record_batch(&batch, &mask)?);
        }
        offer_extremes(&self.shape, &mut self.windows, &batch, &ts, &keys, |row| {
            !now[row]
        })
    }

    fn on_watermark(&mut self, watermark: EventTime, out: &mut Vec<RecordBatch>) -> Result<()> {
        self.watermark = watermark;
        while let Some(entry) = self.windows.first_entry() {
            if !self.shape.closed(*entry.key(), watermark) {
                break;
            }
            let open = entry.remove();
            if !open.rows.is_empty() {
                out.push(concat_batches(&self.shape.input.schema, &open.rows)?);
            }
        }
        Ok(())
    }

    fn on_idle(&mut self, out: &mut Vec<RecordBatch>) -> Result<()> {
        // Downstream stops waiting for this input: what it holds could come too late.
        for open in self.windows.values_mut() {
            if !open.rows.is_empty() {
                out.push(concat_batches(&self.shape.input.schema, &open.rows)?);
                open.rows.clear();
            }
            open.sent = true;
        }
        Ok(())
    }

    fn snapshot(&mut self, _: Epoch) -> Result<OperatorState> {
        rows_state(&self.shape, &self.windows)
    }

    fn restore(&mut self, state: OperatorState) -> Result<()> {
        restore_rows(
            &self.shape,
            &mut self.windows,
            state,
            "max rows by time [local]",
        )
    }
}

/// The global stage.
pub(super) struct Global {
    shape: Shape,
    end_inclusive: bool,
    output: StreamSchema,
    windows: BTreeMap<EventTime, Open>,
    /// Closed windows with rows: their extreme's key and value (one row of the column).
    closed: BTreeMap<EventTime, (i128, ArrayRef)>,
    /// `closed` as snapshots hand it out: the same batches each time, plus one for the
    /// windows closed since (so checkpoints reuse their files), all in one again once
    /// the chain is [`CLOSED_CHAIN`] long.
    closed_chain: Vec<RecordBatch>,
    newly_closed: Vec<EventTime>,
    watermark: EventTime,
    counters: Arc<OperatorCounters>,
    operator: String,
}

impl Global {
    pub(super) fn new(
        shape: Shape,
        end_inclusive: bool,
        output: StreamSchema,
        ctx: &OperatorContext,
    ) -> Self {
        Self {
            shape,
            end_inclusive,
            output,
            windows: BTreeMap::new(),
            closed: BTreeMap::new(),
            closed_chain: Vec::new(),
            newly_closed: Vec::new(),
            watermark: EventTime::MIN,
            counters: ctx.counters.clone(),
            operator: ctx.operator_id.0.clone(),
        }
    }

    /// `rows` with the window starting at `start` appended (start, end, extreme: the
    /// rows' own value, which equals it).
    fn matched(&self, rows: &RecordBatch, starts: Vec<i64>) -> Result<RecordBatch> {
        let ends = starts.iter().map(|s| s + self.shape.size).collect();
        let mut columns = rows.columns().to_vec();
        columns.push(timestamp_array(starts));
        columns.push(timestamp_array(ends));
        columns.push(rows.column(self.shape.value).clone());
        Ok(RecordBatch::try_new(self.output.schema.clone(), columns)?)
    }

    fn key_of_closed(&self, start: EventTime) -> Option<i128> {
        self.closed.get(&start).map(|(k, _)| *k)
    }

    /// A state batch of the closed windows starting at `starts`: `window_start`,
    /// `extreme` (the value's type).
    fn closed_batch(&self, starts: impl Iterator<Item = EventTime>) -> Result<RecordBatch> {
        let value = self.shape.input.schema.field(self.shape.value);
        let schema = Arc::new(Schema::new(vec![
            Field::new(KEY_GROUP_FIELD, DataType::UInt16, false),
            Field::new("window_start", timestamp_type(), false),
            Field::new("extreme", value.data_type().clone(), false),
        ]));
        let (starts, values): (Vec<i64>, Vec<&dyn Array>) = starts
            .filter_map(|s| self.closed.get(&s).map(|(_, v)| (s, v.as_ref())))
            .unzip();
        let n = starts.len();
        Ok(RecordBatch::try_new(
            schema,
            vec![
                Arc::new(UInt16Array::from(vec![0u16; n])),
                timestamp_array(starts),
                riffle_core::arrow::compute::concat(&values)?,
            ],
        )?)
    }
}

impl Operator for Global {
    fn on_batch(&mut self, _: usize, batch: RecordBatch, out: &mut Vec<RecordBatch>) -> Result<()> {
        let ts = timestamps(&batch, self.shape.input.timestamp_index).to_vec();
        let keys = self.shape.keys(&batch)?;
        // Rows that meet an already closed window, with its start.
        let (mut met, mut met_starts) = (Vec::new(), Vec::new());
        let mut counted = vec![false; ts.len()];
        let mut late = 0;
        for (row, (&t, key)) in ts.iter().zip(&keys).enumerate() {
            let start = self.shape.window_start(t);
            if self.shape.closed(start, self.watermark) {
                late += 1;
                if key.is_some() && *key == self.key_of_closed(start) {
                    met.push(row as u32);
                    met_starts.push(start);
                }
            } else {
                counted[row] = key.is_some();
            }
            let previous = start - self.shape.size;
            if !(self.end_inclusive && t == start && key.is_some()) {
                continue;
            }
            if self.shape.closed(previous, self.watermark) {
                if *key == self.key_of_closed(previous) {
                    met.push(row as u32);
                    met_starts.push(previous);
                }
            } else if let Some(k) = *key {
                let open = self.windows.entry(previous).or_default();
                if open.key.is_none_or(|best| k >= best) {
                    open.at_end.push((batch.slice(row, 1), vec![k]));
                }
            }
        }
        self.counters.add_late(late);
        if !met.is_empty() {
            let rows = take_rows(batch.columns(), &met)?;
            let rows = RecordBatch::try_new(batch.schema(), rows)?;
            out.push(self.matched(&rows, met_starts)?);
        }
        offer_extremes(&self.shape, &mut self.windows, &batch, &ts, &keys, |row| {
            counted[row]
        })
    }

    fn on_watermark(&mut self, watermark: EventTime, out: &mut Vec<RecordBatch>) -> Result<()> {
        self.watermark = watermark;
        let mut fired = 0;
        while let Some(entry) = self.windows.first_entry() {
            let start = *entry.key();
            if !self.shape.closed(start, watermark) {
                break;
            }
            let open = entry.remove();
            fired += 1;
            let Some(key) = open.key else { continue };
            let mut rows = open.rows;
            for (batch, keys) in open.at_end {
                let take: BooleanArray = keys.iter().map(|&k| Some(k == key)).collect();
                rows.push(filter_record_batch(&batch, &take)?);
            }
            let rows = concat_batches(&self.shape.input.schema, &rows)?;
            if rows.num_rows() == 0 {
                continue;
            }
            let value = rows.column(self.shape.value).slice(0, 1);
            let n = rows.num_rows();
            out.push(self.matched(&rows, vec![start; n])?);
            self.closed.insert(start, (key, value));
            self.newly_closed.push(start);
        }
        self.counters.add_windows(fired);
        Ok(())
    }

    fn snapshot(&mut self, _: Epoch) -> Result<OperatorState> {
        let mut state = rows_state(&self.shape, &self.windows)?;
        if !self.newly_closed.is_empty() {
            let starts = std::mem::take(&mut self.newly_closed);
            if self.closed_chain.len() >= CLOSED_CHAIN {
                self.closed_chain = vec![self.closed_batch(self.closed.keys().copied())?];
            } else {
                let batch = self.closed_batch(starts.into_iter())?;
                self.closed_chain.push(batch);
            }
        }
        state.batches.extend(self.closed_chain.iter().cloned());
        Ok(state)
    }

    fn restore(&mut self, state: OperatorState) -> Result<()> {
        let (closed, rows): (Vec<RecordBatch>, Vec<RecordBatch>) = state
            .batches
            .into_iter()
            .partition(|b| b.column_by_name("extreme").is_some());
        for batch in closed {
            let starts = window_starts(&batch, &self.operator)?;
            let values = batch
                .column_by_name("extreme")
                .cloned()
                .ok_or_else(|| state_error(&self.operator, "missing `extreme`"))?;
            let keys = super::order_key::order_keys(&values, self.shape.extreme)?;
            for (row, key) in keys.into_iter().enumerate() {
                let key = key.ok_or_else(|| state_error(&self.operator, "a NULL extreme"))?;
                self.closed
                    .insert(starts.value(row), (key, values.slice(row, 1)));
            }
            self.closed_chain.push(batch);
        }
        restore_rows(
            &self.shape,
            &mut self.windows,
            OperatorState::of(rows),
            &self.operator,
        )
    }
}

/// How many batches of closed windows' extremes a snapshot hands out before they are
/// written as one again: a long-running job closes a window every few seconds, and each
/// checkpoint then writes only those closed since the last (and the whole list once in
/// this many checkpoints).
const CLOSED_CHAIN: usize = 32;

/// The open windows' rows: `window_start`, `at_end` (whether the row waits at the
/// window's end rather than holding its extreme), and the row.
fn rows_state(shape: &Shape, windows: &BTreeMap<EventTime, Open>) -> Result<OperatorState> {
    let schema = row_state_schema(shape, &[Field::new("at_end", DataType::Boolean, false)]);
    let mut batches = Vec::new();
    for (start, open) in windows {
        let parts = open
            .rows
            .iter()
            .map(|r| (r, false))
            .chain(open.at_end.iter().map(|(r, _)| (r, true)));
        for (rows, at_end) in parts {
            let n = rows.num_rows();
            if n == 0 {
                continue;
            }
            let at_end: ArrayRef = Arc::new(BooleanArray::from(vec![at_end; n]));
            batches.push(row_state_batch(&schema, *start, rows, vec![at_end])?);
        }
    }
    Ok(OperatorState::of(batches))
}

fn restore_rows(
    shape: &Shape,
    windows: &mut BTreeMap<EventTime, Open>,
    state: OperatorState,
    operator: &str,
) -> Result<()> {
    for batch in state.batches {
        let starts = window_starts(&batch, operator)?;
        let at_end = batch
            .column_by_name("at_end")
            .and_then(|c| c.as_boolean_opt())
            .ok_or_else(|| state_error(operator, "missing `at_end`"))?;
        let rows = state_rows(&batch, shape, operator)?;
        let keys = shape.keys(&rows)?;
        for (row, key) in keys.into_iter().enumerate() {
            let key = key.ok_or_else(|| state_error(operator, "a row without a value"))?;
            let open = windows.entry(starts.value(row)).or_default();
            let one = rows.slice(row, 1);
            if at_end.value(row) {
                open.at_end.push((one, vec![key]));
            } else {
                let all = BooleanArray::from(vec![true]);
                open.offer(&one, &all, key)?;
            }
        }
    }
    Ok(())
}
