//! OVER aggregations: `agg(x) OVER (PARTITION BY p ORDER BY o ROWS|RANGE BETWEEN …
//! PRECEDING AND CURRENT ROW)`, one output row per input row: the row and the
//! aggregate of its frame (docs/engine.md, "OVER aggregations").
//!
//! Two inputs, two operators:
//! - **Append-only, ordered by event time** ([`append`]): as in Flink, a row's frame is
//!   final once the watermark passes it, so rows wait for the watermark, are taken in
//!   event-time order, and leave once with their aggregate (late rows are dropped and
//!   counted). `ROWS` and `RANGE` frames, bounded or `UNBOUNDED PRECEDING`.
//! - **Updating** (upserts keyed by the input's key, such as a Top-N's) ([`updating`]):
//!   a changed row moves within its partition, and every row whose frame it touched is
//!   emitted again, keyed as the input was. Flink refuses OVER over updates; riffle's
//!   result is the batch answer over the input's current rows. `ROWS` frames only.

mod accumulate;
mod append;
#[cfg(test)]
mod tests;
mod updating;

pub use accumulate::{Acc, OverFunction};

use crate::aggregate::GroupKeys;
use crate::top_n::OrderColumn;
use crate::window::{fields_but_timestamp, key_schema};
use riffle_core::arrow::compute::SortOptions;
use riffle_core::arrow::datatypes::{DataType, Field, SchemaRef};
use riffle_core::{Error, Operator, OperatorContext, OperatorFactory, Result, StreamSchema};
use std::sync::Arc;
use std::time::Duration;

/// Which preceding rows a frame holds, up to the current row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverFrame {
    /// `ROWS BETWEEN n PRECEDING AND CURRENT ROW`; `None`: `UNBOUNDED PRECEDING`.
    Rows(Option<usize>),
    /// `RANGE BETWEEN d PRECEDING AND CURRENT ROW` over event time, rows of the same
    /// time included; `None`: `UNBOUNDED PRECEDING`.
    Range(Option<Duration>),
}

/// One aggregate of an OVER window.
#[derive(Debug, Clone)]
pub struct OverAggregate {
    /// The function.
    pub function: OverFunction,
    /// Its input column (`None` for `count(*)`).
    pub input: Option<String>,
    /// The output column.
    pub output: String,
    /// The output type.
    pub output_type: DataType,
}

/// What the input is and how its rows are ordered.
#[derive(Debug, Clone)]
pub enum OverInput {
    /// Append-only rows, ordered by their event time.
    EventTime,
    /// Upserts keyed by `key`, ordered by `order`.
    Updating {
        /// The input's key columns (each output row is keyed by them too).
        key: Vec<String>,
        /// The ORDER BY.
        order: Vec<OrderColumn>,
    },
}

/// What both operators are configured with.
#[derive(Debug)]
pub(crate) struct OverConfig {
    input: StreamSchema,
    partition: Vec<usize>,
    partition_schema: SchemaRef,
    frame: OverFrame,
    /// Per aggregate: function, input column, output type.
    aggregates: Vec<(OverFunction, Option<usize>, DataType)>,
    schema: StreamSchema,
}

impl OverConfig {
    /// The output: the input's columns, the aggregates, then `_timestamp`.
    fn output_fields(&self) -> Vec<usize> {
        (0..self.input.schema.fields().len())
            .filter(|&i| i != self.input.timestamp_index)
            .collect()
    }

    fn partitions(&self) -> Result<GroupKeys> {
        GroupKeys::new(self.partition_schema.clone())
    }
}

/// Plans an OVER aggregation.
pub struct OverAggregateFactory {
    config: Arc<OverConfig>,
    mode: Mode,
}

enum Mode {
    EventTime,
    Updating {
        key: Vec<usize>,
        order: Vec<(usize, SortOptions)>,
    },
}

impl OverAggregateFactory {
    /// `aggregates` over `frame` per `partition`, ordered as `input` says.
    ///
    /// # Errors
    /// Unknown columns, output names that clash, a RANGE frame over updates, or a
    /// partition that is not part of an updating input's key (a row could then move
    /// between partitions, which a keyed operator cannot follow).
    pub fn new(
        input: &StreamSchema,
        partition: &[&str],
        frame: OverFrame,
        aggregates: &[OverAggregate],
        mode: OverInput,
    ) -> Result<Self> {
        let partition = partition
            .iter()
            .map(|c| input.index_of(c))
            .collect::<Result<Vec<_>>>()?;
        let partition_schema = key_schema(input, &partition);
        let mut fields = fields_but_timestamp(input);
        let mut specs = Vec::new();
        for a in aggregates {
            if fields.iter().any(|f| f.name() == &a.output) {
                return Err(Error::plan(format!("`{}` is already a column", a.output)));
            }
            let column = a.input.as_deref().map(|c| input.index_of(c)).transpose()?;
            if a.function == OverFunction::Avg {
                let ty = column.map(|c| input.schema.field(c).data_type().clone());
                if !ty
                    .as_ref()
                    .is_some_and(|t| t.is_integer() || t.is_floating())
                {
                    return Err(Error::plan(format!(
                        "OVER avg of {} is not supported; cast the column to BIGINT or DOUBLE",
                        ty.map_or("nothing".to_string(), |t| t.to_string())
                    )));
                }
            }
            fields.push(Field::new(&a.output, a.output_type.clone(), true));
            specs.push((a.function, column, a.output_type.clone()));
        }
        let mode = match mode {
            OverInput::EventTime => Mode::EventTime,
            OverInput::Updating { key, order } => {
                if matches!(frame, OverFrame::Range(_)) {
                    return Err(Error::plan(
                        "an OVER window over updates takes a ROWS frame, not RANGE",
                    ));
                }
                let key = key
                    .iter()
                    .map(|c| input.index_of(c))
                    .collect::<Result<Vec<_>>>()?;
                if let Some(p) = partition.iter().find(|p| !key.contains(p)) {
                    return Err(Error::plan(format!(
                        "the OVER window's partition column `{}` is not part of the key of the updating rows it reads",
                        input.schema.field(*p).name()
                    )));
                }
                let order = OrderColumn::resolve(&order, input)?;
                Mode::Updating { key, order }
            }
        };
        Ok(Self {
            config: Arc::new(OverConfig {
                input: input.clone(),
                partition,
                partition_schema,
                frame,
                aggregates: specs,
                schema: StreamSchema::with_timestamp(fields),
            }),
            mode,
        })
    }
}

impl OperatorFactory for OverAggregateFactory {
    fn describe(&self) -> String {
        let c = &self.config;
        let name = |i: usize| c.input.schema.field(i).name().clone();
        let aggs: Vec<String> = c
            .aggregates
            .iter()
            .enumerate()
            .map(|(k, (f, arg, _))| {
                let out = c.schema.schema.field(c.output_fields().len() + k).name();
                format!("{}({}) as {out}", f.name(), arg.map_or("*".into(), name))
            })
            .collect();
        let frame = match c.frame {
            OverFrame::Rows(Some(n)) => format!("rows {n} preceding"),
            OverFrame::Rows(None) => "rows unbounded preceding".into(),
            OverFrame::Range(Some(d)) => format!("range {d:?} preceding"),
            OverFrame::Range(None) => "range unbounded preceding".into(),
        };
        let partition: Vec<String> = c.partition.iter().map(|&i| name(i)).collect();
        let order = match &self.mode {
            Mode::EventTime => "event time".to_string(),
            Mode::Updating { order, .. } => order
                .iter()
                .map(|(i, o)| format!("{}{}", name(*i), if o.descending { " DESC" } else { "" }))
                .collect::<Vec<_>>()
                .join(", "),
        };
        let updating = match self.mode {
            Mode::EventTime => "",
            Mode::Updating { .. } => ", over updates",
        };
        format!(
            "over {} by ({}) order by {order} {frame}{updating}",
            aggs.join(", "),
            partition.join(", ")
        )
    }

    fn output_kind(&self, _: &[riffle_core::StreamKind]) -> riffle_core::StreamKind {
        match self.mode {
            Mode::EventTime => riffle_core::StreamKind::AppendOnly,
            Mode::Updating { .. } => riffle_core::StreamKind::Upsert,
        }
    }

    fn output_schema(&self) -> &StreamSchema {
        &self.config.schema
    }

    fn is_stateful(&self) -> bool {
        true
    }

    fn stable_state(&self) -> bool {
        // Over updates, a snapshot adds the partitions changed since the last to the
        // earlier batches (`updating`); over event time it is written whole.
        matches!(self.mode, Mode::Updating { .. })
    }

    fn key_columns(&self, _: usize) -> Option<Vec<usize>> {
        Some(self.config.partition.clone())
    }

    fn create(&self, ctx: &OperatorContext) -> Result<Box<dyn Operator>> {
        Ok(match &self.mode {
            Mode::EventTime => Box::new(append::AppendOver::new(self.config.clone(), ctx)?),
            Mode::Updating { key, order } => Box::new(updating::UpdatingOver::new(
                self.config.clone(),
                key,
                order,
                ctx,
            )?),
        })
    }
}
