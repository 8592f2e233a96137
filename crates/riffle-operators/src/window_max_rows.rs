//! Per tumbling window, the input rows whose value equals the window's maximum: a
//! window aggregate (`max`) joined back to its input, without buffering the window.
//!
//! Nexmark q7 (highest bid per window) and the second stage of q5 (hottest auctions per
//! hop window) are this operator. Run it twice for parallelism: a local stage on every
//! subtask (forward), then a global stage (`global = true`, one subtask) over the local
//! results; the answer is the same because a global maximum is a local maximum.
//! Output rows keep the input schema and event time.

use crate::window::{nanos, timestamp_array, timestamps, window_start};
use riffle_core::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, StructArray, UInt16Array};
use riffle_core::arrow::compute::{cast, concat_batches, filter_record_batch};
use riffle_core::arrow::datatypes::{
    DataType, Field, Fields, Float64Type, Schema, TimestampNanosecondType,
};
use riffle_core::operator::OperatorCounters;
use riffle_core::state::KEY_GROUP_FIELD;
use riffle_core::{
    timestamp_type, Epoch, Error, EventTime, Operator, OperatorContext, OperatorFactory,
    OperatorState, RecordBatch, Result, StreamSchema,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Plans a window-max-rows stage.
pub struct WindowMaxRowsFactory {
    value: usize,
    size: i64,
    global: bool,
    schema: StreamSchema,
}

impl WindowMaxRowsFactory {
    /// Rows of `input` whose numeric `value` column is the maximum of their tumbling
    /// window of `size`. `global` gathers all rows on one subtask.
    ///
    /// # Errors
    /// Unknown or non-numeric value column; zero size.
    pub fn new(input: &StreamSchema, value: &str, size: Duration, global: bool) -> Result<Self> {
        let value = input.index_of(value)?;
        let ty = input.schema.field(value).data_type();
        if !(ty.is_integer() || ty.is_floating()) {
            return Err(Error::plan(format!(
                "max rows needs a numeric column, `{}` is {ty}",
                input.schema.field(value).name()
            )));
        }
        if size.is_zero() {
            return Err(Error::plan("window size must be positive"));
        }
        Ok(Self {
            value,
            size: nanos(size),
            global,
            schema: input.clone(),
        })
    }
}

impl OperatorFactory for WindowMaxRowsFactory {
    fn describe(&self) -> String {
        let stage = if self.global { "global" } else { "local" };
        format!(
            "tumble({}) rows with max({}) [{stage}]",
            crate::window::display_nanos(self.size),
            self.schema.schema.field(self.value).name()
        )
    }
    fn output_schema(&self) -> &StreamSchema {
        &self.schema
    }
    fn is_stateful(&self) -> bool {
        true
    }
    fn key_columns(&self, _: usize) -> Option<Vec<usize>> {
        self.global.then(Vec::new)
    }
    fn create(&self, ctx: &OperatorContext) -> Result<Box<dyn Operator>> {
        Ok(Box::new(WindowMaxRows {
            value: self.value,
            size: self.size,
            schema: self.schema.clone(),
            windows: BTreeMap::new(),
            watermark: EventTime::MIN,
            counters: ctx.counters.clone(),
            operator: ctx.operator_id.0.clone(),
        }))
    }
}

struct Best {
    max: f64,
    rows: Vec<RecordBatch>,
}

struct WindowMaxRows {
    value: usize,
    size: i64,
    schema: StreamSchema,
    windows: BTreeMap<EventTime, Best>,
    watermark: EventTime,
    counters: Arc<OperatorCounters>,
    operator: String,
}

impl WindowMaxRows {
    fn closed(&self, start: EventTime) -> bool {
        start.saturating_add(self.size - 1) <= self.watermark
    }
}

impl Operator for WindowMaxRows {
    fn on_batch(&mut self, _: usize, batch: RecordBatch, _: &mut Vec<RecordBatch>) -> Result<()> {
        let ts = timestamps(&batch, self.schema.timestamp_index).to_vec();
        let values = cast(batch.column(self.value), &DataType::Float64)?;
        let values = values.as_primitive::<Float64Type>();
        // Per window in this batch: its max and the mask of rows carrying it.
        let mut maxima: BTreeMap<EventTime, f64> = BTreeMap::new();
        let mut late = 0;
        for (row, &t) in ts.iter().enumerate() {
            let start = window_start(t, self.size);
            if self.closed(start) {
                late += 1;
                continue;
            }
            if values.is_null(row) {
                continue;
            }
            let v = values.value(row);
            maxima
                .entry(start)
                .and_modify(|m| *m = m.max(v))
                .or_insert(v);
        }
        self.counters.add_late(late);
        for (start, batch_max) in maxima {
            let best = self.windows.entry(start).or_insert(Best {
                max: f64::NEG_INFINITY,
                rows: Vec::new(),
            });
            if batch_max < best.max {
                continue;
            }
            if batch_max > best.max {
                best.max = batch_max;
                best.rows.clear();
            }
            let mask: BooleanArray = ts
                .iter()
                .enumerate()
                .map(|(row, &t)| {
                    Some(
                        window_start(t, self.size) == start
                            && values.is_valid(row)
                            && values.value(row) == batch_max,
                    )
                })
                .collect();
            best.rows.push(filter_record_batch(&batch, &mask)?);
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
                out.push(concat_batches(&self.schema.schema, &best.rows)?);
            }
            fired += 1;
        }
        self.counters.add_windows(fired);
        Ok(())
    }

    fn snapshot(&mut self, _: Epoch) -> Result<OperatorState> {
        let row_fields: Fields = self.schema.schema.fields().clone();
        let schema = Arc::new(Schema::new(vec![
            Field::new(KEY_GROUP_FIELD, DataType::UInt16, false),
            Field::new("window_start", timestamp_type(), false),
            Field::new("row", DataType::Struct(row_fields.clone()), false),
        ]));
        let mut batches = Vec::new();
        for (start, best) in &self.windows {
            for rows in &best.rows {
                let n = rows.num_rows();
                let columns: Vec<ArrayRef> = vec![
                    Arc::new(UInt16Array::from(vec![0u16; n])),
                    timestamp_array(vec![*start; n]),
                    Arc::new(StructArray::new(
                        row_fields.clone(),
                        rows.columns().to_vec(),
                        None,
                    )),
                ];
                batches.push(RecordBatch::try_new(schema.clone(), columns)?);
            }
        }
        Ok(OperatorState { batches })
    }

    fn restore(&mut self, state: OperatorState) -> Result<()> {
        let bad = |m: &str| Error::State {
            operator: self.operator.clone(),
            message: m.into(),
        };
        for batch in state.batches {
            let starts = batch
                .column_by_name("window_start")
                .and_then(|c| c.as_primitive_opt::<TimestampNanosecondType>())
                .ok_or_else(|| bad("missing `window_start`"))?
                .clone();
            let rows = batch
                .column_by_name("row")
                .and_then(|c| c.as_struct_opt())
                .ok_or_else(|| bad("missing struct column `row`"))?;
            let rows = RecordBatch::try_new(self.schema.schema.clone(), rows.columns().to_vec())?;
            for row in 0..rows.num_rows() {
                let one = rows.slice(row, 1);
                let value = cast(one.column(self.value), &DataType::Float64)?;
                let value = value.as_primitive::<Float64Type>().value(0);
                let best = self.windows.entry(starts.value(row)).or_insert(Best {
                    max: value,
                    rows: Vec::new(),
                });
                best.max = value;
                best.rows.push(one);
            }
        }
        Ok(())
    }
}
