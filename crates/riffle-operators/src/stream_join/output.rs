//! What a stream join emits: joined pairs, and rows of one side padded with NULLs for
//! the other (an unbounded outer join's `+I`/`-D`, an outer interval join's final ones).

use super::StreamJoin;
use crate::gather::Referenced;
use riffle_core::arrow::array::{new_null_array, ArrayRef, AsArray};
use riffle_core::arrow::datatypes::TimestampNanosecondType;
use riffle_core::{row_kind_array, RecordBatch, Result, RowKind};
use std::sync::Arc;

impl StreamJoin {
    /// Whether the output carries row kinds (an unbounded outer join).
    pub(super) fn changelog(&self) -> bool {
        (self.outer[0] || self.outer[1]) && self.condition.is_none()
    }

    /// Rows `rows` of `side` alone, the other side's columns NULL, of kind `kind`.
    pub(super) fn padded(
        &self,
        side: usize,
        rows: Vec<(usize, usize)>,
        kind: RowKind,
    ) -> Result<RecordBatch> {
        let n = rows.len();
        let rows = Referenced::new(rows);
        self.pad(side, n, Some(kind), |c| self.gather(side, c, &rows))
    }

    /// `rows` (of `side`'s schema) alone, the other side's columns NULL (append-only).
    pub(super) fn padded_batch(&self, side: usize, rows: &RecordBatch) -> Result<RecordBatch> {
        self.pad(side, rows.num_rows(), None, |c| Ok(rows.column(c).clone()))
    }

    /// `n` output rows whose `side` columns are `column(i)` of that side's field `i`.
    fn pad(
        &self,
        side: usize,
        n: usize,
        kind: Option<RowKind>,
        column: impl Fn(usize) -> Result<ArrayRef>,
    ) -> Result<RecordBatch> {
        let mut columns = Vec::new();
        for s in 0..2 {
            for &c in &self.outputs[s] {
                columns.push(if s == side {
                    column(c)?
                } else {
                    new_null_array(self.sides[s].schema.field(c).data_type(), n)
                });
            }
        }
        if let Some(kind) = kind {
            columns.push(Arc::new(row_kind_array(std::iter::repeat_n(kind, n))));
        }
        columns.push(column(self.sides[side].timestamp_index)?);
        Ok(RecordBatch::try_new(self.schema.schema.clone(), columns)?)
    }

    /// The joined rows of pairs (`mine` of `side`, `theirs` of the other side).
    pub(super) fn joined(
        &self,
        side: usize,
        mine: Vec<(usize, usize)>,
        theirs: Vec<(usize, usize)>,
    ) -> Result<RecordBatch> {
        let (mine, theirs) = (Referenced::new(mine), Referenced::new(theirs));
        let (left_rows, right_rows) = if side == 0 {
            (&mine, &theirs)
        } else {
            (&theirs, &mine)
        };
        let mut columns = Vec::new();
        for &c in &self.outputs[0] {
            columns.push(self.gather(0, c, left_rows)?);
        }
        for &c in &self.outputs[1] {
            columns.push(self.gather(1, c, right_rows)?);
        }
        let lt = self.gather(0, self.sides[0].timestamp_index, left_rows)?;
        let rt = self.gather(1, self.sides[1].timestamp_index, right_rows)?;
        let (lt, rt) = (
            lt.as_primitive::<TimestampNanosecondType>(),
            rt.as_primitive::<TimestampNanosecondType>(),
        );
        let ts: Vec<i64> = lt
            .values()
            .iter()
            .zip(rt.values())
            .map(|(a, b)| *a.max(b))
            .collect();
        if self.changelog() {
            columns.push(Arc::new(row_kind_array(std::iter::repeat_n(
                RowKind::Insert,
                ts.len(),
            ))));
        }
        columns.push(crate::window::timestamp_array(ts));
        Ok(RecordBatch::try_new(self.schema.schema.clone(), columns)?)
    }
}
