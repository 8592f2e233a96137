//! Per tumbling window, the input rows whose value is the window's maximum (or minimum):
//! a window aggregate (`max`) joined back to its input, without buffering the window.
//!
//! Two shapes of SQL run as this operator (docs/engine.md, "Rows holding a window's
//! maximum"):
//! - **by window** (`ON s.window = m.window AND s.v = m.max`; Nexmark q5's second stage,
//!   the rewritten q7): a window's rows at its maximum. Output rows keep the input
//!   schema.
//! - **by time** (`ON s.v = m.max AND s.t BETWEEN m.window_end - size AND m.window_end`;
//!   Flink's q7 text): every row whose time lies in a window's `[start, end]` (or
//!   `[start, end)`) and whose value is that window's maximum. A row exactly at a
//!   window's end can match both that window and the next, and a row behind the
//!   watermark still matches the maximum of its closed window, as the join would; the
//!   output appends the window's start, end and maximum.
//!
//! Run it twice for parallelism: a local stage on every subtask (forward), then a global
//! stage (`global = true`, one subtask) over the local results; the answer is the same
//! because a global maximum is a local maximum, and the local stage forwards every row
//! the global one may still need (docs/engine.md).

mod by_time;
mod by_window;
mod order_key;

use riffle_core::arrow::array::{ArrayRef, AsArray, PrimitiveArray, StructArray, UInt16Array};
use riffle_core::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimestampNanosecondType};
use riffle_core::state::KEY_GROUP_FIELD;
use riffle_core::{
    timestamp_type, Error, EventTime, Operator, OperatorContext, OperatorFactory, RecordBatch,
    Result, StreamSchema,
};
use std::sync::Arc;
use std::time::Duration;

use crate::window::nanos;

/// Which end of a window's values its rows must hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extreme {
    /// `MAX(v)`.
    Max,
    /// `MIN(v)`.
    Min,
}

impl Extreme {
    /// The SQL function's name.
    pub fn name(self) -> &'static str {
        match self {
            Extreme::Max => "max",
            Extreme::Min => "min",
        }
    }
}

/// Which rows meet a window's extreme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Matching {
    /// The window's own rows.
    ByWindow,
    /// Rows whose time is in `[start, end]` (`end_inclusive`) or `[start, end)`.
    ByTime { end_inclusive: bool },
}

/// Plans a window-max-rows stage.
pub struct WindowMaxRowsFactory {
    value: usize,
    size: i64,
    global: bool,
    extreme: Extreme,
    matching: Matching,
    input: StreamSchema,
    output: StreamSchema,
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
            extreme: Extreme::Max,
            matching: Matching::ByWindow,
            input: input.clone(),
            output: input.clone(),
        })
    }

    /// The rows holding the minimum instead.
    #[must_use]
    pub fn extreme(mut self, extreme: Extreme) -> Self {
        self.extreme = extreme;
        self
    }

    /// Matches rows by time instead of by window: every row whose event time lies in a
    /// window's `[start, end]` (`end_inclusive`, SQL's `BETWEEN`) or `[start, end)` and
    /// whose value equals that window's extreme. The global stage appends the window's
    /// start and end (timestamps) and the extreme, named `columns`.
    ///
    /// # Errors
    /// A name in `columns` that the input already has.
    pub fn by_time(mut self, end_inclusive: bool, columns: [&str; 3]) -> Result<Self> {
        self.matching = Matching::ByTime { end_inclusive };
        if !self.global {
            return Ok(self);
        }
        let mut fields: Vec<Field> = self
            .input
            .schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        for name in columns {
            if self.input.schema.field_with_name(name).is_ok() {
                return Err(Error::plan(format!(
                    "max rows by time: the input already has a column `{name}`"
                )));
            }
        }
        let value = self.input.schema.field(self.value);
        fields.push(Field::new(columns[0], timestamp_type(), false));
        fields.push(Field::new(columns[1], timestamp_type(), false));
        fields.push(Field::new(columns[2], value.data_type().clone(), false));
        self.output = StreamSchema::new(Arc::new(Schema::new(fields)))?;
        Ok(self)
    }
}

impl OperatorFactory for WindowMaxRowsFactory {
    fn describe(&self) -> String {
        let stage = if self.global { "global" } else { "local" };
        let size = crate::window::display_nanos(self.size);
        let value = self.input.schema.field(self.value).name();
        let extreme = self.extreme.name();
        match self.matching {
            Matching::ByWindow => format!("tumble({size}) rows with {extreme}({value}) [{stage}]"),
            Matching::ByTime { end_inclusive } => {
                let end = if end_inclusive { "]" } else { ")" };
                format!("rows whose time is in [start, end{end} of a tumble({size}) holding its {extreme}({value}) [{stage}]")
            }
        }
    }
    fn output_schema(&self) -> &StreamSchema {
        &self.output
    }
    fn is_stateful(&self) -> bool {
        true
    }
    fn key_columns(&self, _: usize) -> Option<Vec<usize>> {
        self.global.then(Vec::new)
    }
    fn stable_state(&self) -> bool {
        // The by-time global stage hands out its closed windows' extremes as the same
        // batches from snapshot to snapshot.
        self.global && matches!(self.matching, Matching::ByTime { .. })
    }
    fn create(&self, ctx: &OperatorContext) -> Result<Box<dyn Operator>> {
        let shape = Shape {
            value: self.value,
            size: self.size,
            extreme: self.extreme,
            input: self.input.clone(),
        };
        Ok(match self.matching {
            Matching::ByWindow => Box::new(by_window::WindowMaxRows::new(shape, self.global, ctx)),
            Matching::ByTime { end_inclusive } => {
                if self.global {
                    Box::new(by_time::Global::new(
                        shape,
                        end_inclusive,
                        self.output.clone(),
                        ctx,
                    ))
                } else {
                    Box::new(by_time::Local::new(shape, end_inclusive))
                }
            }
        })
    }
}

/// What every stage knows of its input.
#[derive(Clone)]
struct Shape {
    value: usize,
    size: i64,
    extreme: Extreme,
    input: StreamSchema,
}

impl Shape {
    /// Whether the window starting at `start` has closed under `watermark`: its extreme
    /// is final.
    fn closed(&self, start: i64, watermark: i64) -> bool {
        start.saturating_add(self.size - 1) <= watermark
    }

    fn window_start(&self, t: i64) -> i64 {
        crate::window::window_start(t, self.size)
    }

    /// The order keys of `batch`'s value column (see [`order_key::order_keys`]).
    fn keys(&self, batch: &riffle_core::RecordBatch) -> Result<Vec<Option<i128>>> {
        order_key::order_keys(batch.column(self.value), self.extreme)
    }
}

/// The schema of the stages' row state: `_key_group`, `window_start`, `middle`, then the
/// row as a struct column `row`.
fn row_state_schema(shape: &Shape, middle: &[Field]) -> SchemaRef {
    let mut fields = vec![
        Field::new(KEY_GROUP_FIELD, DataType::UInt16, false),
        Field::new("window_start", timestamp_type(), false),
    ];
    fields.extend_from_slice(middle);
    fields.push(Field::new(
        "row",
        DataType::Struct(shape.input.schema.fields().clone()),
        false,
    ));
    Arc::new(Schema::new(fields))
}

/// A state batch of [`row_state_schema`]: `rows` of the window at `start` (all in key
/// group 0: the global stage is one subtask), with the `middle` columns.
fn row_state_batch(
    schema: &SchemaRef,
    start: EventTime,
    rows: &RecordBatch,
    middle: Vec<ArrayRef>,
) -> Result<RecordBatch> {
    let n = rows.num_rows();
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(UInt16Array::from(vec![0u16; n])),
        crate::window::timestamp_array(vec![start; n]),
    ];
    columns.extend(middle);
    let row_fields = match schema.fields().last().map(|f| f.data_type()) {
        Some(DataType::Struct(fields)) => fields.clone(),
        _ => rows.schema().fields().clone(),
    };
    columns.push(Arc::new(StructArray::new(
        row_fields,
        rows.columns().to_vec(),
        None,
    )));
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

/// A state batch that does not hold what this operator wrote.
fn state_error(operator: &str, message: &str) -> Error {
    Error::State {
        operator: operator.to_string(),
        message: message.into(),
    }
}

/// The `window_start` column of a state batch.
fn window_starts<'a>(
    batch: &'a RecordBatch,
    operator: &str,
) -> Result<&'a PrimitiveArray<TimestampNanosecondType>> {
    batch
        .column_by_name("window_start")
        .and_then(|c| c.as_primitive_opt::<TimestampNanosecondType>())
        .ok_or_else(|| state_error(operator, "missing `window_start`"))
}

/// The rows of a state batch's struct column `row`, as batches of the input.
fn state_rows(batch: &RecordBatch, shape: &Shape, operator: &str) -> Result<RecordBatch> {
    let rows = batch
        .column_by_name("row")
        .and_then(|c| c.as_struct_opt())
        .ok_or_else(|| state_error(operator, "missing struct column `row`"))?;
    Ok(RecordBatch::try_new(
        shape.input.schema.clone(),
        rows.columns().to_vec(),
    )?)
}

#[cfg(test)]
mod tests;
