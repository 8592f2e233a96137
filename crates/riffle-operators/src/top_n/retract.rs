//! A Top-N over a changelog (the rows of an unwindowed GROUP BY, ranked): rows are
//! withdrawn as well as added, so every row of a partition is kept — when a top row is
//! withdrawn the next one takes its rank — in an ordered map from (order key, arrival)
//! to the row, where adding and withdrawing cost O(log n) and the first N are read in
//! order. The output is always a changelog (`changelog.rs`).
//!
//! The kept rows drop the kind column and carry event time 0: a withdrawal names its row
//! by value, and a `-U`'s event time need not equal its `+I`'s. What a batch emits
//! carries the batch's latest event time. State: every partition's rows in order,
//! written whole at each checkpoint (a partition its withdrawals emptied has no row a
//! later delta could replace its earlier rows with).

use super::changelog::{changelog_batch, rank_changes};
use super::TopNFactory;
use crate::aggregate::GroupKeys;
use crate::window::{state_columns, timestamp_array, timestamps, whole_rows};
use riffle_core::arrow::array::ArrayRef;
use riffle_core::arrow::row::{OwnedRow, Row, RowConverter};
use riffle_core::{
    row_kinds, Epoch, Error, Operator, OperatorContext, OperatorState, RecordBatch, Result,
    RowKind, StreamSchema,
};
use std::collections::{BTreeMap, HashSet};

/// One partition's rows by (order key, arrival): ties keep arrival order.
type Ordered = BTreeMap<(OwnedRow, u64), OwnedRow>;

pub(crate) struct RetractTopN {
    partition: Vec<usize>,
    order: Vec<usize>,
    limit: usize,
    partitions: GroupKeys,
    order_rows: RowConverter,
    rows: RowConverter,
    /// Per partition id: its rows.
    tops: Vec<Ordered>,
    /// Rows added so far: each one's arrival number.
    arrivals: u64,
    /// The input's columns but the row kind: what a kept row holds.
    input: StreamSchema,
    schema: StreamSchema,
    rank: String,
    /// Where incoming batches carry their row kinds.
    kind_at: usize,
    max_parallelism: u16,
    operator: String,
}

/// Whether `key` is (or, added, would be) among the first `limit` rows of `top`.
fn visible(top: &Ordered, key: &(OwnedRow, u64), limit: usize) -> bool {
    match top.keys().nth(limit - 1) {
        Some(last) => key <= last,
        None => true,
    }
}

impl RetractTopN {
    pub(crate) fn new(f: &TopNFactory, kind_at: usize, ctx: &OperatorContext) -> Result<Self> {
        Ok(Self {
            partition: f.partition.clone(),
            order: f.order.iter().map(|(i, _)| *i).collect(),
            limit: f.limit,
            partitions: GroupKeys::new(f.partition_schema.clone())?,
            order_rows: f.order_converter()?,
            rows: whole_rows(&f.input)?,
            tops: Vec::new(),
            arrivals: 0,
            input: f.input.clone(),
            schema: f.schema.clone(),
            rank: f.rank.clone(),
            kind_at,
            max_parallelism: ctx.max_parallelism,
            operator: ctx.operator_id.0.clone(),
        })
    }

    /// A batch's rows as kept (no kind column, event time 0), their kinds, and the
    /// batch's latest event time.
    fn split_kinds(&self, batch: &RecordBatch) -> Result<(RecordBatch, Vec<RowKind>, i64)> {
        let kinds = row_kinds(batch)?.ok_or_else(|| Error::State {
            operator: self.operator.clone(),
            message: "a changelog batch without row kinds".into(),
        })?;
        let mut columns = batch.columns().to_vec();
        columns.remove(self.kind_at);
        let ts = self.input.timestamp_index;
        let at = if self.kind_at <= ts { ts + 1 } else { ts };
        let latest = timestamps(batch, at).iter().copied().max().unwrap_or(0);
        columns[ts] = timestamp_array(vec![0; batch.num_rows()]);
        let rows = RecordBatch::try_new(self.input.schema.clone(), columns)?;
        Ok((rows, kinds, latest))
    }

    /// Adds (or, with `kinds`, adds and withdraws) `rows`; returns the partitions whose
    /// first `limit` rows changed, each with those rows as they were.
    fn apply(
        &mut self,
        rows: &RecordBatch,
        kinds: Option<&[RowKind]>,
    ) -> Result<Vec<(u32, Vec<OwnedRow>)>> {
        let ids =
            super::partition_ids(&mut self.partitions, &self.partition, rows, &mut self.tops)?;
        let order: Vec<ArrayRef> = self.order.iter().map(|&i| rows.column(i).clone()).collect();
        let order = self.order_rows.convert_columns(&order)?;
        let whole = self.rows.convert_columns(rows.columns())?;
        let mut seen: HashSet<u32> = HashSet::new();
        let mut changed: Vec<(u32, Vec<OwnedRow>)> = Vec::new();
        let limit = self.limit;
        for (r, &id) in ids.iter().enumerate() {
            let top = &mut self.tops[id as usize];
            let row = whole.row(r);
            let (key, withdrawn) = if kinds.is_some_and(|k| k[r].is_retraction()) {
                let key = order.row(r).owned();
                let found = top
                    .range((key.clone(), 0)..=(key, u64::MAX))
                    .find(|(_, kept)| kept.row() == row)
                    .map(|(k, _)| k.clone())
                    .ok_or_else(|| Error::State {
                        operator: self.operator.clone(),
                        message: "the input withdraws a row it never inserted".into(),
                    })?;
                (found, true)
            } else {
                self.arrivals += 1;
                ((order.row(r).owned(), self.arrivals), false)
            };
            if visible(top, &key, limit) && seen.insert(id) {
                changed.push((id, top.values().take(limit).cloned().collect()));
            }
            if withdrawn {
                top.remove(&key);
            } else {
                top.insert(key, row.owned());
            }
        }
        Ok(changed)
    }

    /// Every partition's rows in order, with their rank, as one state batch.
    fn state_batch(&self) -> Result<RecordBatch> {
        let mut picked: Vec<Row<'_>> = Vec::new();
        let mut rank: Vec<i64> = Vec::new();
        for top in &self.tops {
            for (k, row) in top.values().enumerate() {
                picked.push(row.row());
                rank.push(k as i64 + 1);
            }
        }
        let columns = self.rows.convert_rows(picked)?;
        super::ranked_state(
            &self.input,
            &self.partition,
            &self.rank,
            columns,
            rank,
            self.max_parallelism,
        )
    }
}

impl Operator for RetractTopN {
    fn on_batch(&mut self, _: usize, batch: RecordBatch, out: &mut Vec<RecordBatch>) -> Result<()> {
        let (rows, kinds, latest) = self.split_kinds(&batch)?;
        let changed = self.apply(&rows, Some(&kinds))?;
        let mut picked = Vec::new();
        let mut ranks = Vec::new();
        let mut emitted = Vec::new();
        for (id, old) in &changed {
            let old: Vec<Row<'_>> = old.iter().map(OwnedRow::row).collect();
            let new: Vec<Row<'_>> = self.tops[*id as usize]
                .values()
                .take(self.limit)
                .map(OwnedRow::row)
                .collect();
            rank_changes(&old, &new, 0, &mut picked, &mut ranks, &mut emitted);
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
            emitted,
            Some(latest),
        )?);
        Ok(())
    }

    fn snapshot(&mut self, _: Epoch) -> Result<OperatorState> {
        Ok(OperatorState::of(vec![self.state_batch()?]))
    }

    fn restore(&mut self, state: OperatorState) -> Result<()> {
        for batch in state.batches {
            let columns = state_columns(&batch, self.input.schema.fields(), &self.operator)?;
            let rows = RecordBatch::try_new(self.input.schema.clone(), columns)?;
            // Rows come back in order per partition, so ties keep their order.
            self.apply(&rows, None)?;
        }
        Ok(())
    }
}
