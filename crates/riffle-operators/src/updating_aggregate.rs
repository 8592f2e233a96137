//! An unbounded keyed aggregate (`GROUP BY` without a window) that emits, after each
//! input batch, the new values of every group that batch changed: an upsert stream
//! keyed by the group columns (the newest row for a key replaces older ones).
//!
//! Snapshots are incremental (docs/state-format.md, "Incremental checkpoints"): after the
//! first, one adds only the groups changed since the last to the earlier batches, whose
//! files are reused; a restore reads them in order, a later row of a group replacing an
//! earlier one.

use crate::aggregate::{
    bind_all, describe, AccumulatorSet, AggregateSpec, BoundAggregate, GroupKeys,
};
use crate::delta_log::DeltaLog;
use crate::window::{key_group_column, state_columns, timestamp_array, timestamps, with_row_key};
use riffle_core::arrow::array::ArrayRef;
use riffle_core::arrow::datatypes::{Schema, SchemaRef};
use riffle_core::{
    Epoch, Operator, OperatorContext, OperatorFactory, OperatorState, RecordBatch, Result,
    StreamSchema,
};
use std::sync::Arc;

/// Plans an updating aggregate.
pub struct UpdatingAggregateFactory {
    keys: Vec<usize>,
    key_schema: SchemaRef,
    aggregates: Vec<BoundAggregate>,
    specs: Vec<AggregateSpec>,
    input_timestamp: usize,
    schema: StreamSchema,
}

impl UpdatingAggregateFactory {
    /// `aggregates` per `keys`, updated continuously.
    ///
    /// # Errors
    /// Unknown columns or aggregates that do not apply.
    pub fn new(
        input: &StreamSchema,
        keys: &[&str],
        aggregates: Vec<AggregateSpec>,
    ) -> Result<Self> {
        let key_idx = keys
            .iter()
            .map(|k| input.index_of(k))
            .collect::<Result<Vec<_>>>()?;
        let key_fields: Vec<_> = key_idx
            .iter()
            .map(|&i| input.schema.field(i).clone())
            .collect();
        let bound = bind_all(&aggregates, input)?;
        let mut fields = key_fields.clone();
        fields.extend(bound.iter().map(|a| a.output.clone()));
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

impl OperatorFactory for UpdatingAggregateFactory {
    fn describe(&self) -> String {
        let keys: Vec<_> = self
            .key_schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        format!(
            "updating {} by ({})",
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
        Ok(Box::new(UpdatingAggregate {
            keys: self.keys.clone(),
            table: GroupKeys::new(self.key_schema.clone())?,
            key_schema: self.key_schema.clone(),
            accumulators: AccumulatorSet::new(&self.aggregates),
            distinct: self.aggregates.is_empty(),
            input_timestamp: self.input_timestamp,
            schema: self.schema.clone(),
            max_parallelism: ctx.max_parallelism,
            operator: ctx.operator_id.0.clone(),
            delta: DeltaLog::default(),
        }))
    }
}

struct UpdatingAggregate {
    keys: Vec<usize>,
    table: GroupKeys,
    key_schema: SchemaRef,
    accumulators: AccumulatorSet,
    /// No aggregates: a SELECT DISTINCT, whose groups are emitted once.
    distinct: bool,
    input_timestamp: usize,
    schema: StreamSchema,
    max_parallelism: u16,
    operator: String,
    /// What earlier snapshots wrote, and the groups changed since.
    delta: DeltaLog,
}

impl UpdatingAggregate {
    /// The groups `ids` (keys and accumulator state) as a state batch whose rows are
    /// identified by the group keys.
    fn state_batch(&mut self, ids: &[u32]) -> Result<RecordBatch> {
        let keys = self.table.keys(ids)?;
        let (kg_field, kg) = key_group_column(&keys, ids.len(), self.max_parallelism)?;
        let mut fields = vec![kg_field];
        let mut columns = vec![kg];
        fields.extend(self.key_schema.fields().iter().map(|f| f.as_ref().clone()));
        columns.extend(keys);
        for (f, c) in self.accumulators.state(ids, self.delta.distinct_values())? {
            fields.push(f);
            columns.push(c);
        }
        let row_key: Vec<&str> = self
            .key_schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?;
        with_row_key(batch, &row_key)
    }
}

impl Operator for UpdatingAggregate {
    fn on_batch(&mut self, _: usize, batch: RecordBatch, out: &mut Vec<RecordBatch>) -> Result<()> {
        let rows: Vec<u32> = (0..batch.num_rows() as u32).collect();
        let keys: Vec<ArrayRef> = self.keys.iter().map(|&i| batch.column(i).clone()).collect();
        let mut groups = Vec::new();
        let known = self.table.len() as u32;
        self.table.intern(&keys, &rows, &mut groups)?;
        // Without aggregates (SELECT DISTINCT) a group never changes: emit it once, when
        // it first appears, so the result is append-only.
        let distinct = self.distinct;
        let inputs = self.accumulators.inputs(batch.columns())?;
        self.accumulators.update(&groups, &rows, &inputs);
        // One output row per changed group, in first-touched order, stamped with the
        // newest event time that touched it.
        let ts = timestamps(&batch, self.input_timestamp);
        let mut latest: Vec<(u32, i64)> = Vec::new();
        let mut position = std::collections::HashMap::new();
        for (row, &g) in groups.iter().enumerate() {
            if distinct && g < known {
                continue;
            }
            match position.get(&g) {
                Some(&p) => {
                    let entry: &mut (u32, i64) = &mut latest[p];
                    entry.1 = entry.1.max(ts[row]);
                }
                None => {
                    position.insert(g, latest.len());
                    latest.push((g, ts[row]));
                }
            }
        }
        if latest.is_empty() {
            return Ok(());
        }
        let ids: Vec<u32> = latest.iter().map(|(g, _)| *g).collect();
        self.delta.touch(&ids);
        let mut columns = self.table.keys(&ids)?;
        columns.extend(self.accumulators.finish(&ids)?);
        columns.push(timestamp_array(latest.iter().map(|(_, t)| *t).collect()));
        out.push(RecordBatch::try_new(self.schema.schema.clone(), columns)?);
        Ok(())
    }

    fn snapshot(&mut self, _: Epoch) -> Result<OperatorState> {
        let len = self.table.len();
        let ids = self.delta.take_changed(len);
        if !ids.is_empty() {
            let batch = self.state_batch(&ids)?;
            self.delta.push(batch, len);
        }
        Ok(OperatorState {
            batches: self.delta.batches.clone(),
        })
    }
    fn restore(&mut self, state: OperatorState) -> Result<()> {
        for batch in state.batches {
            let keys = state_columns(&batch, self.key_schema.fields(), &self.operator)?;
            let rows: Vec<u32> = (0..batch.num_rows() as u32).collect();
            let mut groups = Vec::new();
            self.table.intern(&keys, &rows, &mut groups)?;
            self.accumulators.restore(&groups, &batch, &self.operator)?;
        }
        Ok(())
    }
}
