//! A Top-N's result as a changelog: per partition a batch changed, the rows its first
//! N ranks held before the batch are withdrawn and the rows they hold after it are
//! added, rank by rank, leaving out ranks whose row did not change. Used by the Top-N of
//! append-only rows when a filter or an aggregate reads it, and always by the Top-N over
//! a changelog (`retract.rs`).
//!
//! Withdrawals come first within a partition, so that a reader never sees a row twice
//! (a retracting aggregate's count never overshoots), and a rank's `-U` precedes its `+U`
//! as a keyed table expects.

use super::{Before, Entry, Held, TopN};
use crate::window::timestamp_array;
use riffle_core::arrow::array::{ArrayRef, Int64Array};
use riffle_core::arrow::row::{OwnedRow, Row, RowConverter};
use riffle_core::{row_kind_array, Error, RecordBatch, Result, RowKind, StreamSchema};
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

/// Appends what one partition emits, given its first N rows before (`old`) and after
/// (`new`) a batch, from rank `from` (0-based) on: withdrawals, then additions.
pub(super) fn rank_changes<'a>(
    old: &[Row<'a>],
    new: &[Row<'a>],
    from: usize,
    picked: &mut Vec<Row<'a>>,
    ranks: &mut Vec<i64>,
    kinds: &mut Vec<RowKind>,
) {
    let mut added = Vec::new();
    for k in from..old.len().max(new.len()) {
        let (withdrawn, put) = rank_change(old.get(k).copied(), new.get(k).copied());
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
    for (row, rank, kind) in added {
        picked.push(row);
        ranks.push(rank);
        kinds.push(kind);
    }
}

/// The output batch of changelog rows: the kept rows' columns but the event time, the
/// rank, the kind, and the event time (the rows' own, or `time` for all).
pub(super) fn changelog_batch(
    rows: &RowConverter,
    input: &StreamSchema,
    schema: &StreamSchema,
    picked: Vec<Row<'_>>,
    ranks: Vec<i64>,
    kinds: Vec<RowKind>,
    time: Option<i64>,
) -> Result<RecordBatch> {
    let n = ranks.len();
    let mut columns = rows.convert_rows(picked)?;
    let ts = columns.remove(input.timestamp_index);
    columns.push(Arc::new(Int64Array::from(ranks)));
    columns.push(Arc::new(row_kind_array(kinds)));
    let ts: ArrayRef = match time {
        Some(t) => timestamp_array(vec![t; n]),
        None => ts,
    };
    columns.push(ts);
    Ok(RecordBatch::try_new(schema.schema.clone(), columns)?)
}

impl TopN {
    /// Offers a batch of appended rows and emits the changed ranks as a changelog.
    pub(super) fn on_changes(
        &mut self,
        batch: &RecordBatch,
        out: &mut Vec<RecordBatch>,
    ) -> Result<()> {
        let mut before = Before::new();
        let changed = self.offer_changes(batch, Some(&mut before))?;
        let mut picked = Vec::new();
        let mut ranks = Vec::new();
        let mut kinds = Vec::new();
        for &(id, from) in &changed {
            let old: Vec<Row<'_>> = before
                .get(&id)
                .map_or(&[][..], Vec::as_slice)
                .iter()
                .map(OwnedRow::row)
                .collect();
            let new = self.tops[id as usize]
                .iter()
                .map(|e| match &e.row {
                    Held::Row(r) => Ok(r.row()),
                    Held::Pending(_) => Err(Error::State {
                        operator: self.operator.clone(),
                        message: "a kept row was never converted".into(),
                    }),
                })
                .collect::<Result<Vec<_>>>()?;
            rank_changes(&old, &new, from, &mut picked, &mut ranks, &mut kinds);
        }
        if picked.is_empty() {
            return Ok(());
        }
        out.push(changelog_batch(
            &self.rows,
            &self.input,
            &self.schema,
            picked,
            ranks,
            kinds,
            None,
        )?);
        Ok(())
    }
}

/// The first `limit` rows of `top`, each converted already (only a failed batch leaves
/// one pending).
pub(super) fn visible_rows(top: &[Entry], limit: usize, operator: &str) -> Result<Vec<OwnedRow>> {
    top.iter()
        .take(limit)
        .map(|e| match &e.row {
            Held::Row(r) => Ok(r.clone()),
            Held::Pending(_) => Err(Error::State {
                operator: operator.into(),
                message: "a kept row was never converted (an earlier batch failed)".into(),
            }),
        })
        .collect()
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
