//! The by-window stage: per tumbling window, its rows whose value is the window's
//! extreme (see the module's documentation).

use super::{row_state_batch, row_state_schema, state_error, state_rows, window_starts, Shape};
use crate::window::timestamps;
use riffle_core::arrow::array::BooleanArray;
use riffle_core::arrow::compute::{concat_batches, filter_record_batch};
use riffle_core::operator::OperatorCounters;
use riffle_core::{
    Epoch, EventTime, Operator, OperatorContext, OperatorState, RecordBatch, Result,
};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A window's extreme so far (its order key) and the rows holding it.
struct Best {
    key: i128,
    rows: Vec<RecordBatch>,
    /// Local stage: its rows were sent when the source went idle; later rows at or above
    /// `key` go at once.
    sent: bool,
}

pub(super) struct WindowMaxRows {
    shape: Shape,
    global: bool,
    windows: BTreeMap<EventTime, Best>,
    watermark: EventTime,
    counters: Arc<OperatorCounters>,
    operator: String,
}

impl WindowMaxRows {
    pub(super) fn new(shape: Shape, global: bool, ctx: &OperatorContext) -> Self {
        Self {
            shape,
            global,
            windows: BTreeMap::new(),
            watermark: EventTime::MIN,
            counters: ctx.counters.clone(),
            operator: ctx.operator_id.0.clone(),
        }
    }

    fn closed(&self, start: EventTime) -> bool {
        self.shape.closed(start, self.watermark)
    }
}

impl Operator for WindowMaxRows {
    fn on_batch(&mut self, _: usize, batch: RecordBatch, out: &mut Vec<RecordBatch>) -> Result<()> {
        let ts = timestamps(&batch, self.shape.input.timestamp_index).to_vec();
        let keys = self.shape.keys(&batch)?;
        // Per window in this batch: its extreme and the mask of rows carrying it.
        let mut maxima: BTreeMap<EventTime, i128> = BTreeMap::new();
        let mut late = 0;
        for (&t, key) in ts.iter().zip(&keys) {
            let start = self.shape.window_start(t);
            if self.closed(start) {
                late += 1;
                continue;
            }
            let Some(v) = *key else { continue };
            maxima
                .entry(start)
                .and_modify(|m| *m = (*m).max(v))
                .or_insert(v);
        }
        self.counters.add_late(late);
        for (start, batch_max) in maxima {
            let best = self.windows.entry(start).or_insert(Best {
                key: batch_max,
                rows: Vec::new(),
                sent: false,
            });
            if batch_max < best.key {
                continue;
            }
            if best.sent {
                // Every row that may still be the window's maximum goes at once.
                let floor = best.key;
                best.key = batch_max;
                let mask: BooleanArray = ts
                    .iter()
                    .zip(&keys)
                    .map(|(&t, &key)| {
                        Some(self.shape.window_start(t) == start && key.is_some_and(|k| k >= floor))
                    })
                    .collect();
                out.push(filter_record_batch(&batch, &mask)?);
                continue;
            }
            if batch_max > best.key {
                best.key = batch_max;
                best.rows.clear();
            }
            let mask: BooleanArray = ts
                .iter()
                .zip(&keys)
                .map(|(&t, &key)| {
                    Some(self.shape.window_start(t) == start && key == Some(batch_max))
                })
                .collect();
            best.rows.push(filter_record_batch(&batch, &mask)?);
        }
        Ok(())
    }

    fn on_idle(&mut self, out: &mut Vec<RecordBatch>) -> Result<()> {
        // Downstream stops waiting for this input: what the local stage holds could come
        // too late. (The global stage is never in a source's chain, but it must never
        // fire early either.)
        if self.global {
            return Ok(());
        }
        for best in self.windows.values_mut() {
            if !best.rows.is_empty() {
                out.push(concat_batches(&self.shape.input.schema, &best.rows)?);
                best.rows.clear();
            }
            best.sent = true;
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
            let Some(best) = self.windows.remove(&start) else {
                break;
            };
            if !best.rows.is_empty() {
                out.push(concat_batches(&self.shape.input.schema, &best.rows)?);
            }
            fired += 1;
        }
        self.counters.add_windows(fired);
        Ok(())
    }

    fn snapshot(&mut self, _: Epoch) -> Result<OperatorState> {
        let schema = row_state_schema(&self.shape, &[]);
        let mut batches = Vec::new();
        for (start, best) in &self.windows {
            for rows in &best.rows {
                batches.push(row_state_batch(&schema, *start, rows, Vec::new())?);
            }
        }
        Ok(OperatorState::of(batches))
    }

    fn restore(&mut self, state: OperatorState) -> Result<()> {
        for batch in state.batches {
            let starts = window_starts(&batch, &self.operator)?;
            let rows = state_rows(&batch, &self.shape, &self.operator)?;
            let keys = self.shape.keys(&rows)?;
            for (row, key) in keys.into_iter().enumerate() {
                let key =
                    key.ok_or_else(|| state_error(&self.operator, "a row without a value"))?;
                // Subtasks' states merge at a lower parallelism: only the largest key
                // of a window stays.
                let best = self.windows.entry(starts.value(row)).or_insert(Best {
                    key,
                    rows: Vec::new(),
                    sent: false,
                });
                if key < best.key {
                    continue;
                }
                if key > best.key {
                    best.key = key;
                    best.rows.clear();
                }
                best.rows.push(rows.slice(row, 1));
            }
        }
        Ok(())
    }
}
