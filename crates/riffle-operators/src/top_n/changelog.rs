//! A Top-N's result as a changelog: per partition a batch changed, the rows its visible
//! ranks held before the batch are withdrawn and the rows they hold after it are added,
//! rank by rank, leaving out ranks whose row did not change.
//!
//! Withdrawals come first within a partition, so that a reader never sees a row twice
//! (a retracting aggregate's count never overshoots), and a rank's `-U` precedes its `+U`
//! as a keyed table expects.

use super::{Before, Held, TopN};
use crate::window::timestamp_array;
use riffle_core::arrow::array::{ArrayRef, Int64Array};
use riffle_core::arrow::row::Row;
use riffle_core::{row_kind_array, Error, RecordBatch, Result, RowKind};
use std::sync::Arc;

/// A row to emit and its kind.
type Emitted<'a> = Option<(Row<'a>, RowKind)>;

/// What one rank of a changed partition emits: its old row withdrawn (`-U`, or `-D` when
/// the rank is empty now) and its new row added (`+U`, or `+I` when it was empty).
pub(crate) fn rank_change<'a>(
    old: Option<Row<'a>>,
    new: Option<Row<'a>>,
) -> (Emitted<'a>, Emitted<'a>) {
    match (old, new) {
        (Some(o), Some(n)) if o == n => (None, None),
        (Some(o), Some(n)) => (
            Some((o, RowKind::UpdateBefore)),
            Some((n, RowKind::UpdateAfter)),
        ),
        (Some(o), None) => (Some((o, RowKind::Delete)), None),
        (None, Some(n)) => (None, Some((n, RowKind::Insert))),
        (None, None) => (None, None),
    }
}

impl TopN {
    /// Offers a batch and emits the changed ranks as a changelog.
    pub(super) fn on_changes(
        &mut self,
        batch: &RecordBatch,
        out: &mut Vec<RecordBatch>,
    ) -> Result<()> {
        let mut before = Before::new();
        let (changed, time) = match self.kind_at {
            Some(at) => {
                let (rows, kinds, latest) = self.split_kinds(batch, at)?;
                let changed = self.offer_changes(&rows, Some(&kinds), Some(&mut before))?;
                (changed, Some(latest))
            }
            None => (self.offer_changes(batch, None, Some(&mut before))?, None),
        };
        if changed.is_empty() {
            return Ok(());
        }
        let mut picked: Vec<Row<'_>> = Vec::new();
        let mut ranks = Vec::new();
        let mut kinds = Vec::new();
        let mut added: Vec<(Row<'_>, i64, RowKind)> = Vec::new();
        for &(id, from) in &changed {
            let old = before.get(&id).map_or(&[][..], Vec::as_slice);
            let new = &self.tops[id as usize];
            let visible = old.len().max(new.len().min(self.limit));
            added.clear();
            for k in from..visible {
                let new_row = match new.get(k).filter(|_| k < self.limit).map(|e| &e.row) {
                    Some(Held::Row(r)) => Some(r.row()),
                    Some(Held::Pending(_)) => {
                        return Err(Error::State {
                            operator: self.operator.clone(),
                            message: "a kept row was never converted".into(),
                        })
                    }
                    None => None,
                };
                let (withdrawn, put) = rank_change(old.get(k).map(|r| r.row()), new_row);
                let rank = k as i64 + 1;
                if let Some((row, kind)) = withdrawn {
                    picked.push(row);
                    ranks.push(rank);
                    kinds.push(kind);
                }
                if let Some((row, kind)) = put {
                    added.push((row, rank, kind));
                }
            }
            for &(row, rank, kind) in &added {
                picked.push(row);
                ranks.push(rank);
                kinds.push(kind);
            }
        }
        if picked.is_empty() {
            return Ok(());
        }
        let mut columns = self.rows.convert_rows(picked)?;
        let n = ranks.len();
        let ts = columns.remove(self.input.timestamp_index);
        columns.push(Arc::new(Int64Array::from(ranks)));
        columns.push(Arc::new(row_kind_array(kinds)));
        // Over a changelog the kept rows have no event time of their own
        // (`TopN::split_kinds`): what a batch emits carries the batch's latest.
        let ts: ArrayRef = match time {
            Some(t) => timestamp_array(vec![t; n]),
            None => ts,
        };
        columns.push(ts);
        out.push(RecordBatch::try_new(self.schema.schema.clone(), columns)?);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use riffle_core::arrow::array::Int64Array;
    use riffle_core::arrow::datatypes::DataType;
    use riffle_core::arrow::row::{RowConverter, SortField};

    #[test]
    fn a_rank_emits_only_what_changed_at_it() {
        let conv = RowConverter::new(vec![SortField::new(DataType::Int64)]).unwrap();
        let rows = conv
            .convert_columns(&[Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef])
            .unwrap();
        let (a, b) = (rows.row(0), rows.row(1));
        assert_eq!(rank_change(Some(a), Some(a)), (None, None));
        assert_eq!(
            rank_change(Some(a), Some(b)),
            (
                Some((a, RowKind::UpdateBefore)),
                Some((b, RowKind::UpdateAfter))
            )
        );
        assert_eq!(
            rank_change(Some(a), None),
            (Some((a, RowKind::Delete)), None)
        );
        assert_eq!(
            rank_change(None, Some(b)),
            (None, Some((b, RowKind::Insert)))
        );
        assert_eq!(rank_change(None, None), (None, None));
    }
}
