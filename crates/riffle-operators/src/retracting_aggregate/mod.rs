//! An unbounded keyed aggregate over a changelog (`GROUP BY` over the result of a
//! filtered or unfiltered `GROUP BY` without a window): `+I`/`+U` rows add to their
//! group, `-U`/`-D` rows take back what they added. Its own result is a changelog: a
//! changed group's previous row is withdrawn (`-U`) before its new one, a group whose
//! rows were all taken back is deleted (`-D`), and a group that gains its first row is
//! inserted (`+I`). docs/engine.md, "Changelog streams".
//!
//! count, sum and avg take a value back by subtracting it (`sums.rs`); min, max and
//! count DISTINCT keep every value of a group with its count (`multisets.rs`).

mod multisets;
mod sums;

use crate::aggregate::{bind_all, describe, touched_in_order, AggregateSpec, GroupKeys};
use crate::delta_log::DeltaLog;
use crate::window::{group_state_batch, state_columns, timestamp_array, timestamps};
use riffle_core::arrow::array::{ArrayRef, Int64Array};
use riffle_core::arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
use riffle_core::{
    row_kind_array, row_kind_field, row_kinds, CommittedEpoch, Epoch, Error, Operator,
    OperatorContext, OperatorFactory, OperatorState, RecordBatch, Result, RowKind, StreamSchema,
};
use std::sync::Arc;
use sums::RetractableSums;

/// The state column holding how many rows a group holds now.
const ROWS_FIELD: &str = "__rows";

/// Plans an aggregate over a changelog.
pub struct RetractingAggregateFactory {
    keys: Vec<usize>,
    key_schema: SchemaRef,
    aggregates: Vec<crate::aggregate::BoundAggregate>,
    specs: Vec<AggregateSpec>,
    input_timestamp: usize,
    schema: StreamSchema,
}

impl RetractingAggregateFactory {
    /// `aggregates` per `keys` of `input`, a changelog.
    ///
    /// # Errors
    /// The input has no row kinds, a column is unknown, or two count DISTINCT of one
    /// column.
    pub fn new(
        input: &StreamSchema,
        keys: &[&str],
        aggregates: Vec<AggregateSpec>,
    ) -> Result<Self> {
        if input.row_kind_index().is_none() {
            return Err(Error::plan(
                "an aggregate that takes rows back needs a changelog input (rows with a `_row_kind`)",
            ));
        }
        let key_idx = keys
            .iter()
            .map(|k| input.index_of(k))
            .collect::<Result<Vec<_>>>()?;
        let key_fields: Vec<Field> = key_idx
            .iter()
            .map(|&i| input.schema.field(i).clone())
            .collect();
        let bound = bind_all(&aggregates, input)?;
        sums::check(&bound)?;
        let mut fields = key_fields.clone();
        fields.extend(bound.iter().map(|a| a.output.clone()));
        fields.push(row_kind_field());
        Ok(Self {
            keys: key_idx,
            key_schema: Arc::new(Schema::new(key_fields)),
            aggregates: bound,
            specs: aggregates,
            input_timestamp: input.timestamp_index,
            schema: StreamSchema::with_timestamp(fields),
        })
    }
}

impl OperatorFactory for RetractingAggregateFactory {
    fn describe(&self) -> String {
        let keys: Vec<_> = self
            .key_schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        format!(
            "retracting {} by ({}), changelog in and out",
            describe(&self.specs),
            keys.join(", ")
        )
    }
    fn output_schema(&self) -> &StreamSchema {
        &self.schema
    }
    fn is_stateful(&self) -> bool {
        true
    }
    fn stable_state(&self) -> bool {
        true // earlier snapshot batches are handed back unchanged (delta snapshots)
    }
    fn key_columns(&self, _: usize) -> Option<Vec<usize>> {
        Some(self.keys.clone())
    }
    fn create(&self, ctx: &OperatorContext) -> Result<Box<dyn Operator>> {
        Ok(Box::new(RetractingAggregate {
            keys: self.keys.clone(),
            table: GroupKeys::new(self.key_schema.clone())?,
            key_schema: self.key_schema.clone(),
            rows: Vec::new(),
            sums: RetractableSums::new(&self.aggregates),
            input_timestamp: self.input_timestamp,
            schema: self.schema.clone(),
            max_parallelism: ctx.max_parallelism,
            operator: ctx.operator_id.0.clone(),
            delta: DeltaLog::default(),
            committed: ctx.committed.clone(),
        }))
    }
}

struct RetractingAggregate {
    keys: Vec<usize>,
    table: GroupKeys,
    key_schema: SchemaRef,
    /// Per group: rows added less rows taken back; a group with none is not in the result.
    rows: Vec<i64>,
    sums: RetractableSums,
    input_timestamp: usize,
    schema: StreamSchema,
    max_parallelism: u16,
    operator: String,
    delta: DeltaLog,
    /// The newest committed epoch heard: the delta log stops holding what it wrote.
    committed: CommittedEpoch,
}

impl RetractingAggregate {
    /// The key and aggregate columns of `groups` as they are now.
    fn values_of(&self, groups: &[u32]) -> Result<Vec<ArrayRef>> {
        let mut columns = self.table.keys(groups)?;
        columns.extend(self.sums.finish(groups)?);
        Ok(columns)
    }

    /// Output rows of `values` with the kinds `kinds`, stamped `ts`.
    fn rows_of(
        &self,
        mut values: Vec<ArrayRef>,
        kinds: Vec<RowKind>,
        ts: Vec<i64>,
    ) -> Result<RecordBatch> {
        values.push(Arc::new(row_kind_array(kinds)));
        values.push(timestamp_array(ts));
        Ok(RecordBatch::try_new(self.schema.schema.clone(), values)?)
    }

    fn state_batch(&self, ids: &[u32]) -> Result<RecordBatch> {
        let rows: ArrayRef = Arc::new(Int64Array::from_iter_values(
            ids.iter().map(|&g| self.rows[g as usize]),
        ));
        let mut state = vec![(Field::new(ROWS_FIELD, DataType::Int64, false), rows)];
        state.extend(self.sums.state(ids));
        group_state_batch(
            &self.table,
            &self.key_schema,
            ids,
            self.max_parallelism,
            state,
        )
    }
}

impl Operator for RetractingAggregate {
    fn on_batch(&mut self, _: usize, batch: RecordBatch, out: &mut Vec<RecordBatch>) -> Result<()> {
        let kinds = row_kinds(&batch)?.ok_or_else(|| {
            Error::plan(format!(
                "{}: an input batch has no `_row_kind`",
                self.operator
            ))
        })?;
        let signs: Vec<i64> = kinds
            .iter()
            .map(|k| if k.is_retraction() { -1 } else { 1 })
            .collect();
        let all: Vec<u32> = (0..batch.num_rows() as u32).collect();
        let keys: Vec<ArrayRef> = self.keys.iter().map(|&i| batch.column(i).clone()).collect();
        let mut groups = Vec::new();
        self.table.intern(&keys, &all, &mut groups)?;
        self.rows.resize(self.table.len(), 0);
        // The touched groups with their newest event time, and whether each was in the
        // result before this batch.
        let ts = timestamps(&batch, self.input_timestamp);
        let touched = touched_in_order(&groups, ts, |_| true);
        let was: Vec<bool> = touched
            .iter()
            .map(|&(g, _)| self.rows[g as usize] > 0)
            .collect();
        let (before, before_ts): (Vec<u32>, Vec<i64>) = touched
            .iter()
            .zip(&was)
            .filter(|(_, &was)| was)
            .map(|(&t, _)| t)
            .unzip();
        // Withdrawn rows carry their old values: taken before the batch applies.
        let old = self.values_of(&before)?;
        for (&g, &s) in groups.iter().zip(&signs) {
            self.rows[g as usize] += s;
        }
        self.sums.apply(batch.columns(), &groups, &signs)?;
        if let Some(&(g, _)) = touched.iter().find(|t| self.rows[t.0 as usize] < 0) {
            return Err(Error::State {
                operator: self.operator.clone(),
                message: format!(
                    "group {g} took back more rows than it was given: the input is not a changelog keyed as this aggregate expects"
                ),
            });
        }
        let ids: Vec<u32> = touched.iter().map(|t| t.0).collect();
        self.delta.touch(&ids);
        // A group that is no longer in the result is deleted rather than updated.
        if !before.is_empty() {
            let kinds = before
                .iter()
                .map(|&g| {
                    if self.rows[g as usize] > 0 {
                        RowKind::UpdateBefore
                    } else {
                        RowKind::Delete
                    }
                })
                .collect();
            out.push(self.rows_of(old, kinds, before_ts)?);
        }
        let mut now = Vec::new();
        let mut kinds = Vec::new();
        let mut now_ts = Vec::new();
        for (&(g, t), &was) in touched.iter().zip(&was) {
            if self.rows[g as usize] <= 0 {
                continue;
            }
            now.push(g);
            kinds.push(if was {
                RowKind::UpdateAfter
            } else {
                RowKind::Insert
            });
            now_ts.push(t);
        }
        if !now.is_empty() {
            let values = self.values_of(&now)?;
            out.push(self.rows_of(values, kinds, now_ts)?);
        }
        Ok(())
    }

    fn snapshot(&mut self, epoch: Epoch) -> Result<OperatorState> {
        self.delta
            .hand_over_committed(epoch, self.committed.newest());
        let len = self.table.len();
        let ids = self.delta.take_changed(len);
        let batch = (!ids.is_empty())
            .then(|| self.state_batch(&ids))
            .transpose()?;
        Ok(self.delta.state_after(batch, len))
    }

    fn restore(&mut self, state: OperatorState) -> Result<()> {
        for batch in state.batches {
            let keys = state_columns(&batch, self.key_schema.fields(), &self.operator)?;
            let all: Vec<u32> = (0..batch.num_rows() as u32).collect();
            let mut groups = Vec::new();
            self.table.intern(&keys, &all, &mut groups)?;
            self.rows.resize(self.table.len(), 0);
            let rows = sums::state_values::<Int64Type>(&batch, ROWS_FIELD, &self.operator)?;
            sums::set_groups(&mut self.rows, &groups, rows.values());
            self.sums.restore(&groups, &batch, &self.operator)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
