//! One copy of each row per hopping or cumulating window that holds it, as Flink's
//! `HOP` and `CUMULATE` table functions return them when their rows are not grouped
//! right away (a window join, a plain `SELECT`).
//!
//! Each copy carries its window's bounds as columns and the event time `end − 1`, the
//! last instant of its window: downstream a window is then named by the pane its rows'
//! time falls in, as for the rows of a window aggregate (docs/engine.md, "Window
//! aggregates"), so a window join pairs the copies of one window only.

use crate::window::{
    fields_but_timestamp, take_rows, timestamp_array, timestamps, WindowGeometry,
    WINDOW_TIME_BEFORE_END_NANOS,
};
use riffle_core::arrow::array::ArrayRef;
use riffle_core::arrow::datatypes::{Field, Schema};
use riffle_core::{
    timestamp_type, Error, Operator, OperatorContext, OperatorFactory, RecordBatch, Result,
    StreamSchema,
};
use std::sync::Arc;

use crate::WindowSpec;

/// A bound of a row's window, written as a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowBound {
    /// `window_start`.
    Start,
    /// `window_end`.
    End,
    /// `window_time`: the end less one millisecond, as in Flink.
    Time,
}

/// Plans a window expansion.
#[derive(Debug)]
pub struct WindowExpandFactory {
    spec: WindowSpec,
    geometry: WindowGeometry,
    bounds: Vec<WindowBound>,
    input_timestamp: usize,
    schema: StreamSchema,
}

impl WindowExpandFactory {
    /// Passes `input`'s columns, then one column per `(name, bound)`, then the event time.
    ///
    /// # Errors
    /// A session or tumbling window (a row is in one window there: nothing to expand), or
    /// lengths that are not multiples of the slide or step.
    pub fn new(
        input: &StreamSchema,
        spec: WindowSpec,
        columns: &[(&str, WindowBound)],
    ) -> Result<Self> {
        let geometry = match spec {
            WindowSpec::Hopping { .. } | WindowSpec::Cumulating { .. } => WindowGeometry::of(spec),
            _ => None,
        }
        .ok_or_else(|| {
            Error::plan(format!(
                "only hopping and cumulating windows are expanded per window, not {}",
                spec.describe()
            ))
        })?;
        let mut fields = fields_but_timestamp(input);
        for (name, _) in columns {
            fields.push(Field::new(*name, timestamp_type(), false));
        }
        fields.push(input.schema.field(input.timestamp_index).clone());
        Ok(Self {
            spec,
            geometry,
            bounds: columns.iter().map(|(_, b)| *b).collect(),
            input_timestamp: input.timestamp_index,
            schema: StreamSchema::new(Arc::new(Schema::new(fields)))?,
        })
    }
}

impl OperatorFactory for WindowExpandFactory {
    fn describe(&self) -> String {
        format!("a row per {} window", self.spec.describe())
    }

    fn output_schema(&self) -> &StreamSchema {
        &self.schema
    }

    fn is_stateful(&self) -> bool {
        false
    }

    fn create(&self, _: &OperatorContext) -> Result<Box<dyn Operator>> {
        Ok(Box::new(WindowExpand {
            geometry: self.geometry,
            bounds: self.bounds.clone(),
            input_timestamp: self.input_timestamp,
            schema: self.schema.clone(),
        }))
    }
}

struct WindowExpand {
    geometry: WindowGeometry,
    bounds: Vec<WindowBound>,
    input_timestamp: usize,
    schema: StreamSchema,
}

/// The ends of the windows holding event time `ts`, oldest first.
fn window_ends(geometry: &WindowGeometry, ts: i64) -> impl Iterator<Item = i64> {
    let step = geometry.pane;
    let pane = geometry.pane_of(ts);
    let (first, last) = (geometry.first_end(pane), geometry.last_end(pane));
    (0..)
        .map(move |k| first + k * step)
        .take_while(move |end| *end <= last)
}

impl Operator for WindowExpand {
    fn on_batch(&mut self, _: usize, batch: RecordBatch, out: &mut Vec<RecordBatch>) -> Result<()> {
        let mut rows: Vec<u32> = Vec::new();
        let mut ends: Vec<i64> = Vec::new();
        for (row, &ts) in timestamps(&batch, self.input_timestamp).iter().enumerate() {
            for end in window_ends(&self.geometry, ts) {
                rows.push(row as u32);
                ends.push(end);
            }
        }
        let passed: Vec<ArrayRef> = (batch.columns().iter().enumerate())
            .filter(|(i, _)| *i != self.input_timestamp)
            .map(|(_, c)| c.clone())
            .collect();
        let mut columns = take_rows(&passed, &rows)?;
        for bound in &self.bounds {
            let values = ends.iter().map(|&end| match bound {
                WindowBound::Start => self.geometry.start_of(end),
                WindowBound::End => end,
                WindowBound::Time => end - WINDOW_TIME_BEFORE_END_NANOS,
            });
            columns.push(timestamp_array(values.collect()));
        }
        columns.push(timestamp_array(ends.iter().map(|end| end - 1).collect()));
        out.push(RecordBatch::try_new(self.schema.schema.clone(), columns)?);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ends(spec: WindowSpec, ts_ms: i64) -> Vec<i64> {
        let g = WindowGeometry::of(spec).unwrap();
        window_ends(&g, ts_ms * 1_000_000)
            .map(|e| e / 1_000_000)
            .collect()
    }

    #[test]
    fn a_row_is_in_every_hop_that_covers_it_and_every_cumulate_still_growing() {
        let s = Duration::from_secs;
        let hop = WindowSpec::Hopping {
            size: s(10),
            slide: s(5),
        };
        assert_eq!(ends(hop, 12_000), vec![15_000, 20_000]);
        assert_eq!(ends(hop, 15_000), vec![20_000, 25_000]);
        assert_eq!(ends(hop, 14_999), vec![15_000, 20_000]);
        let cumulate = WindowSpec::Cumulating {
            step: s(2),
            max: s(6),
        };
        // Windows [0,2) [0,4) [0,6), then [6,8) …: 3.5 s is in [0,4) and [0,6).
        assert_eq!(ends(cumulate, 3_500), vec![4_000, 6_000]);
        assert_eq!(ends(cumulate, 6_000), vec![8_000, 10_000, 12_000]);
        let g = WindowGeometry::of(cumulate).unwrap();
        assert_eq!(g.start_of(10_000_000_000), 6_000_000_000);
    }
}
