//! Window Top-N (`ROW_NUMBER() OVER (PARTITION BY window_start, window_end, … ORDER BY
//! …) <= N` over windowed rows): each window's Top-N is kept apart and leaves once, when
//! the watermark closes the window, so the result is append-only as in Flink. A row of
//! a window that has closed already is late: dropped and counted. A closed window's
//! state goes with it.

use crate::top_n::{TopN, TopNFactory};
use crate::window::state_columns;
use riffle_core::arrow::array::{AsArray, UInt32Array};
use riffle_core::arrow::compute::{cast, take_record_batch};
use riffle_core::arrow::datatypes::TimestampNanosecondType;
use riffle_core::operator::OperatorCounters;
use riffle_core::{
    timestamp_type, Epoch, EventTime, Operator, OperatorContext, OperatorState, RecordBatch, Result,
};
use std::collections::BTreeMap;
use std::sync::Arc;

pub(crate) struct WindowTopN {
    factory: TopNFactory,
    ctx: OperatorContext,
    /// The input column holding each row's window end.
    end: usize,
    /// Each open window's Top-N, by window end.
    windows: BTreeMap<EventTime, TopN>,
    watermark: EventTime,
    counters: Arc<OperatorCounters>,
}

impl WindowTopN {
    pub(crate) fn new(factory: &TopNFactory, end: usize, ctx: &OperatorContext) -> Result<Self> {
        Ok(Self {
            factory: factory.clone(),
            ctx: ctx.clone(),
            end,
            windows: BTreeMap::new(),
            watermark: EventTime::MIN,
            counters: ctx.counters.clone(),
        })
    }

    /// Whether the window ending at `end` has closed.
    fn closed(&self, end: EventTime) -> bool {
        end.saturating_sub(1) <= self.watermark
    }

    /// Offers the rows of `batch` to their windows' Top-Ns; rows of closed windows are
    /// late (counted when `count_late`).
    fn offer(&mut self, batch: &RecordBatch, count_late: bool) -> Result<()> {
        let ends = cast(batch.column(self.end), &timestamp_type())?;
        let ends = ends.as_primitive::<TimestampNanosecondType>();
        let mut by_end: BTreeMap<EventTime, Vec<u32>> = BTreeMap::new();
        let mut late = 0;
        for (r, end) in ends.iter().enumerate() {
            match end {
                Some(end) if !self.closed(end) => by_end.entry(end).or_default().push(r as u32),
                _ => late += 1,
            }
        }
        if count_late {
            self.counters.add_late(late);
        }
        for (end, rows) in by_end {
            let rows = take_record_batch(batch, &UInt32Array::from(rows))?;
            let top = match self.windows.entry(end) {
                std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::btree_map::Entry::Vacant(e) => {
                    e.insert(self.factory.top_n(&self.ctx)?)
                }
            };
            top.offer(&rows)?;
        }
        Ok(())
    }
}

impl Operator for WindowTopN {
    fn on_batch(&mut self, _: usize, batch: RecordBatch, _: &mut Vec<RecordBatch>) -> Result<()> {
        self.offer(&batch, true)
    }

    fn on_watermark(&mut self, watermark: EventTime, out: &mut Vec<RecordBatch>) -> Result<()> {
        self.watermark = self.watermark.max(watermark);
        let watermark = self.watermark;
        while let Some(entry) = self.windows.first_entry() {
            if entry.key().saturating_sub(1) > watermark {
                break;
            }
            let top = entry.remove();
            let all: Vec<(u32, usize)> = (0..top.partitions() as u32).map(|id| (id, 0)).collect();
            let (columns, rank) = top.rows_from(&all)?;
            if !rank.is_empty() {
                out.push(top.output(columns, rank)?);
            }
        }
        Ok(())
    }

    fn snapshot(&mut self, _: Epoch) -> Result<OperatorState> {
        let batches = self
            .windows
            .values()
            .map(TopN::full_state)
            .collect::<Result<_>>()?;
        Ok(OperatorState::of(batches))
    }

    fn restore(&mut self, state: OperatorState) -> Result<()> {
        let input = self.factory.input_schema().clone();
        for batch in state.batches {
            let columns = state_columns(&batch, input.schema.fields(), &self.ctx.operator_id.0)?;
            let rows = RecordBatch::try_new(input.schema.clone(), columns)?;
            // Rows come back best first per window and partition, so ties keep order.
            self.offer(&rows, false)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::top_n::{OrderColumn, TopNFactory};
    use riffle_core::arrow::array::{AsArray, Int64Array, TimestampNanosecondArray};
    use riffle_core::arrow::datatypes::{DataType, Field, Int64Type};
    use riffle_core::{
        timestamp_type, OperatorContext, OperatorFactory, RecordBatch, StreamSchema,
    };
    use std::sync::Arc;

    fn schema() -> StreamSchema {
        StreamSchema::with_timestamp(vec![
            Field::new("window_end", timestamp_type(), false),
            Field::new("v", DataType::Int64, false),
        ])
    }

    fn rows(rows: &[(i64, i64)]) -> RecordBatch {
        RecordBatch::try_new(
            schema().schema.clone(),
            vec![
                Arc::new(
                    TimestampNanosecondArray::from_iter_values(rows.iter().map(|r| r.0))
                        .with_timezone("UTC"),
                ),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
                Arc::new(
                    TimestampNanosecondArray::from_iter_values(rows.iter().map(|r| r.0 - 1))
                        .with_timezone("UTC"),
                ),
            ],
        )
        .unwrap()
    }

    #[test]
    fn each_window_leaves_once_when_it_closes_and_a_late_row_is_dropped() {
        let order = [OrderColumn {
            column: "v".into(),
            descending: true,
            nulls_first: false,
        }];
        let factory = TopNFactory::new(&schema(), &["window_end"], &order, 2, "rank")
            .unwrap()
            .closing_windows("window_end")
            .unwrap();
        let ctx = OperatorContext::detached("top", 0, 1);
        let mut op = factory.create(&ctx).unwrap();
        let mut out = Vec::new();
        op.on_batch(0, rows(&[(10, 1), (10, 5), (20, 7), (10, 3)]), &mut out)
            .unwrap();
        assert!(out.is_empty(), "nothing leaves before its window closes");
        op.on_watermark(9, &mut out).unwrap();
        let values = |b: &RecordBatch| b.column(1).as_primitive::<Int64Type>().values().to_vec();
        assert_eq!(out.len(), 1);
        assert_eq!(values(&out[0]), [5, 3]);
        // Window 10 has closed: a row of it is late.
        op.on_batch(0, rows(&[(10, 9)]), &mut out).unwrap();
        assert_eq!(ctx.counters.values().late_rows_dropped, 1);
        // Window 20 survives a snapshot and restore.
        let state = op.snapshot(riffle_core::Epoch(1)).unwrap();
        let mut restored = factory.create(&ctx).unwrap();
        restored.restore(state).unwrap();
        out.clear();
        restored.on_watermark(19, &mut out).unwrap();
        assert_eq!(values(&out[0]), [7]);
    }
}
