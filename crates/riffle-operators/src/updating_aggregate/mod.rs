//! An unbounded keyed aggregate (`GROUP BY` without a window) that emits, after each
//! input batch, the new values of every group that batch changed: an upsert stream
//! keyed by the group columns (the newest row for a key replaces older ones).
//!
//! As a changelog ([`UpdatingAggregateFactory::changelog`]) it also withdraws each
//! changed group's previous row (`-U`) before its new one (`+U`; `+I` for a new group),
//! so that a filter downstream can drop either and the result stays exact: a row that
//! stops passing `HAVING` is withdrawn by its `-U` (docs/engine.md, "Changelog streams").
//! The row-kind column is [`riffle_core::ROW_KIND_FIELD`].
//!
//! Snapshots are incremental (docs/state-format.md, "Incremental checkpoints"): after the
//! first, one adds only the groups changed since the last to the earlier batches, whose
//! files are reused; a restore reads them in order, a later row of a group replacing an
//! earlier one.
//!
//! Under `--state-memory` its coldest groups move to a spill tier (`spill.rs`).

mod spill;

use crate::aggregate::{
    bind_all, describe, touched_in_order, AccumulatorSet, AggregateSpec, BoundAggregate, GroupKeys,
};
use crate::delta_log::DeltaLog;
use crate::window::{group_state_batch, timestamp_array, timestamps};
use riffle_core::arrow::array::ArrayRef;
use riffle_core::arrow::datatypes::{Field, Schema, SchemaRef};
use riffle_core::operator::OperatorCounters;
use riffle_core::{
    row_kind_array, row_kind_field, CommittedEpoch, Epoch, Operator, OperatorContext,
    OperatorFactory, OperatorState, RecordBatch, Result, RowKind, StateBytes, StreamKind,
    StreamSchema,
};
use spill::Tier;
use std::sync::Arc;

/// Plans an updating aggregate.
pub struct UpdatingAggregateFactory {
    keys: Vec<usize>,
    key_schema: SchemaRef,
    aggregates: Vec<BoundAggregate>,
    specs: Vec<AggregateSpec>,
    input_timestamp: usize,
    changelog: bool,
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
            changelog: false,
            schema: StreamSchema::with_timestamp(fields),
        })
    }

    /// The same aggregate emitting a changelog: a [`riffle_core::ROW_KIND_FIELD`] column, and the
    /// previous row of every changed group withdrawn (`-U`) before its new row.
    pub fn changelog(mut self) -> Self {
        if !self.changelog {
            let mut fields: Vec<Field> = self
                .schema
                .user_fields()
                .map(|f| f.as_ref().clone())
                .collect();
            fields.push(row_kind_field());
            self.schema = StreamSchema::with_timestamp(fields);
            self.changelog = true;
        }
        self
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
            "updating {} by ({}){}",
            describe(&self.specs),
            keys.join(", "),
            if self.changelog {
                ", changelog -U/+U"
            } else {
                ""
            }
        )
    }
    fn output_schema(&self) -> &StreamSchema {
        &self.schema
    }
    fn output_kind(&self, _: &[StreamKind]) -> StreamKind {
        match (self.changelog, self.aggregates.is_empty()) {
            (true, _) => StreamKind::Changelog,
            // DISTINCT: each distinct row once, when first seen.
            (false, true) => StreamKind::AppendOnly,
            (false, false) => StreamKind::Upsert,
        }
    }
    fn is_stateful(&self) -> bool {
        true
    }
    fn keeps_to_state_memory(&self) -> bool {
        true // cold groups move to the spill tier (spill/mod.rs)
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
            aggregates: self.aggregates.clone(),
            distinct: self.aggregates.is_empty(),
            changelog: self.changelog,
            input_timestamp: self.input_timestamp,
            schema: self.schema.clone(),
            max_parallelism: ctx.max_parallelism,
            operator: ctx.operator_id.0.clone(),
            subtask: ctx.subtask,
            delta: DeltaLog::default(),
            tier: ctx.state_memory.clone().map(Tier::new),
            counters: ctx.counters.clone(),
            committed: ctx.committed.clone(),
            restored: None,
        }))
    }
}

struct UpdatingAggregate {
    keys: Vec<usize>,
    table: GroupKeys,
    key_schema: SchemaRef,
    accumulators: AccumulatorSet,
    aggregates: Vec<BoundAggregate>,
    /// No aggregates: a SELECT DISTINCT, whose groups are emitted once.
    distinct: bool,
    /// Emit row kinds, and withdraw a changed group's previous row.
    changelog: bool,
    input_timestamp: usize,
    schema: StreamSchema,
    max_parallelism: u16,
    operator: String,
    subtask: usize,
    /// What earlier snapshots wrote, and the groups changed since.
    delta: DeltaLog,
    /// The memory budget and spill tier, under `--state-memory`.
    tier: Option<Tier>,
    /// Where the state bytes are reported.
    counters: Arc<OperatorCounters>,
    /// The newest committed epoch heard: the delta log stops holding what it wrote.
    committed: CommittedEpoch,
    /// The restored epoch, when the chain goes on from its files: committed too.
    restored: Option<Epoch>,
}

impl UpdatingAggregate {
    /// Reports the state's bytes in memory and in the spill tier.
    fn report_state_bytes(&self) {
        self.counters.set_state_bytes(StateBytes {
            in_memory: self.memory_size() as u64,
            spilled: self.tier.as_ref().map_or(0, Tier::spilled_bytes),
        });
    }

    /// The current rows of `groups` (id, event time), of the kind `kind(id)` gives when
    /// the stream is a changelog.
    fn rows(&self, groups: &[(u32, i64)], kind: impl Fn(u32) -> RowKind) -> Result<RecordBatch> {
        let ids: Vec<u32> = groups.iter().map(|(g, _)| *g).collect();
        let mut columns = self.table.keys(&ids)?;
        columns.extend(self.accumulators.finish(&ids)?);
        if self.changelog {
            columns.push(Arc::new(row_kind_array(ids.iter().map(|&g| kind(g)))));
        }
        columns.push(timestamp_array(groups.iter().map(|(_, t)| *t).collect()));
        Ok(RecordBatch::try_new(self.schema.schema.clone(), columns)?)
    }

    /// The groups `ids` (keys and accumulator state) as a state batch whose rows are
    /// identified by the group keys.
    fn state_batch(&mut self, ids: &[u32]) -> Result<RecordBatch> {
        let state = self.accumulators.state(ids, self.delta.distinct_values())?;
        group_state_batch(
            &self.table,
            &self.key_schema,
            ids,
            self.max_parallelism,
            state,
        )
    }
}

impl Operator for UpdatingAggregate {
    fn on_batch(&mut self, _: usize, batch: RecordBatch, out: &mut Vec<RecordBatch>) -> Result<()> {
        self.end_restore()?;
        let rows: Vec<u32> = (0..batch.num_rows() as u32).collect();
        let keys: Vec<ArrayRef> = self.keys.iter().map(|&i| batch.column(i).clone()).collect();
        let mut groups = Vec::new();
        let known = self.table.len() as u32;
        self.table.intern(&keys, &rows, &mut groups)?;
        // Groups new in memory may come back from the spill tier: they existed.
        let back = self.take_back(known)?;
        let existed = |g: u32| g < known || back.binary_search(&g).is_ok();
        // Without aggregates (SELECT DISTINCT) a group never changes: emit it once, when
        // it first appears, so the result is append-only.
        let distinct = self.distinct;
        let inputs = self.accumulators.inputs(batch.columns())?;
        // One output row per changed group, in first-touched order, stamped with the
        // newest event time that touched it.
        let ts = timestamps(&batch, self.input_timestamp);
        let latest = touched_in_order(&groups, ts, |g| !(distinct && existed(g)));
        // The rows to withdraw: the values of the groups that existed, before the update.
        let before = if self.changelog && !distinct {
            let old: Vec<(u32, i64)> = (latest.iter().copied())
                .filter(|(g, _)| existed(*g))
                .collect();
            (!old.is_empty())
                .then(|| self.rows(&old, |_| RowKind::UpdateBefore))
                .transpose()?
        } else {
            None
        };
        self.accumulators.update(&groups, &rows, &inputs);
        if latest.is_empty() {
            return Ok(());
        }
        let ids: Vec<u32> = latest.iter().map(|(g, _)| *g).collect();
        self.delta.touch(&ids);
        out.extend(before);
        let after = self.rows(&latest, |g| {
            if existed(g) {
                RowKind::UpdateAfter
            } else {
                RowKind::Insert
            }
        })?;
        out.push(after);
        let len = self.table.len();
        if let Some(tier) = &mut self.tier {
            tier.touch(&ids, len);
            if tier.due(batch.num_rows(), len) {
                self.spill_if_over()?;
                // Without checkpoints no snapshot reports them.
                self.report_state_bytes();
            }
        }
        Ok(())
    }

    fn snapshot(&mut self, epoch: Epoch) -> Result<OperatorState> {
        self.end_restore()?;
        let committed = self.committed.newest().max(self.restored);
        self.delta.hand_over_committed(epoch, committed);
        let len = self.table.len();
        let spilled = self.tier.as_ref().map_or(0, Tier::spilled);
        let noted = self.tier.as_ref().map_or(0, Tier::noted_changed);
        self.delta.set_outside(spilled, noted);
        let ids = self.delta.take_changed(len);
        let batch = (!ids.is_empty())
            .then(|| self.state_batch(&ids))
            .transpose()?;
        if batch.is_none() {
            // No state batch noted the snapshot: the sets start noting what they gain
            // here all the same, or the next delta would hold no gains (a chain started
            // from the tier alone, every group spilled).
            self.accumulators.note_snapshot_taken();
        }
        // A new chain holds every group: the spilled ones are read from the tier, at
        // once or, rolling, in pieces.
        let streamed = self.write_spilled()?;
        // Groups that left memory since the last snapshot, changed: from the tier.
        self.write_left_changed()?;
        let mut state = self.delta.state_after(batch, len);
        state.streamed.extend(streamed);
        // Every group is in the checkpoint now: any may leave memory.
        self.spill_if_over()?;
        self.report_state_bytes();
        Ok(state)
    }
    fn restores_in_parts(&self) -> bool {
        true // batches apply one after the other: a later row of a group replaces it
    }
    fn finish_restore(&mut self) -> Result<()> {
        self.end_restore()
    }
    fn restore(&mut self, state: OperatorState) -> Result<()> {
        for batch in state.batches {
            self.restore_batch(&batch)?;
        }
        self.report_state_bytes();
        Ok(())
    }
    fn continue_chain(
        &mut self,
        chain: Vec<RecordBatch>,
        restored: Epoch,
        snapshots: usize,
    ) -> bool {
        // Every group, in memory or spilled, is as the chain holds it: none is noted as
        // changed (the delta log held no batches while restoring).
        self.delta
            .continue_chain(chain, self.table.len(), snapshots);
        // Count DISTINCT sets note their gains from here: the next delta holds them.
        self.accumulators.note_snapshot_taken();
        self.restored = Some(restored);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::AggregateFunction;
    use riffle_core::arrow::array::{AsArray, Int64Array, TimestampNanosecondArray};
    use riffle_core::arrow::datatypes::{DataType, Int64Type};
    use riffle_core::{row_kinds, OperatorContext};

    fn input() -> StreamSchema {
        StreamSchema::with_timestamp(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("v", DataType::Int64, false),
        ])
    }

    fn batch(rows: &[(i64, i64)]) -> RecordBatch {
        RecordBatch::try_new(
            input().schema.clone(),
            vec![
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
                Arc::new(TimestampNanosecondArray::from(vec![0; rows.len()]).with_timezone("UTC")),
            ],
        )
        .unwrap()
    }

    /// `count(*) AS n, sum(v) AS total GROUP BY k`, as a changelog.
    fn counting() -> Box<dyn Operator> {
        let specs = vec![
            AggregateSpec::new(AggregateFunction::Count, "v", "n"),
            AggregateSpec::new(AggregateFunction::Sum, "v", "total"),
        ];
        UpdatingAggregateFactory::new(&input(), &["k"], specs)
            .unwrap()
            .changelog()
            .create(&OperatorContext::detached("agg", 0, 1))
            .unwrap()
    }

    /// Every output row as (kind, k, n, total).
    fn changes(out: &[RecordBatch]) -> Vec<(&'static str, i64, i64, i64)> {
        let mut all = Vec::new();
        for b in out {
            let kinds = row_kinds(b).unwrap().expect("a changelog has row kinds");
            let col = |name: &str| {
                b.column_by_name(name)
                    .unwrap()
                    .as_primitive::<Int64Type>()
                    .clone()
            };
            let (k, n, total) = (col("k"), col("n"), col("total"));
            for (i, kind) in kinds.iter().enumerate() {
                all.push((kind.short(), k.value(i), n.value(i), total.value(i)));
            }
        }
        all
    }

    #[test]
    fn a_changed_group_withdraws_its_previous_row_before_the_new_one() {
        let mut op = counting();
        let mut out = Vec::new();
        op.on_batch(0, batch(&[(1, 5), (2, 3)]), &mut out).unwrap();
        op.on_batch(0, batch(&[(1, 2), (3, 1), (1, 1)]), &mut out)
            .unwrap();
        assert_eq!(
            changes(&out),
            [
                ("+I", 1, 1, 5),
                ("+I", 2, 1, 3),
                ("-U", 1, 1, 5),
                ("+U", 1, 3, 8),
                ("+I", 3, 1, 1),
            ]
        );
    }

    #[test]
    fn the_changelog_adds_up_to_the_final_groups() {
        // Applying each +I/+U and taking back each -U must leave exactly one row per
        // group, the one a batch aggregate gives.
        let mut op = counting();
        let mut out = Vec::new();
        let mut expected = std::collections::BTreeMap::new();
        for step in 0..40i64 {
            let rows: Vec<(i64, i64)> = (0..7).map(|i| ((step * 7 + i) % 5, step - i)).collect();
            for (k, v) in &rows {
                let e = expected.entry(*k).or_insert((0i64, 0i64));
                e.0 += 1;
                e.1 += v;
            }
            op.on_batch(0, batch(&rows), &mut out).unwrap();
        }
        let mut live: std::collections::BTreeMap<(i64, i64, i64), i64> = Default::default();
        for (kind, k, n, total) in changes(&out) {
            *live.entry((k, n, total)).or_default() += if kind.starts_with('-') { -1 } else { 1 };
        }
        live.retain(|_, count| *count != 0);
        let want: std::collections::BTreeMap<(i64, i64, i64), i64> = expected
            .iter()
            .map(|(k, (n, t))| ((*k, *n, *t), 1))
            .collect();
        assert_eq!(live, want);
    }
}
