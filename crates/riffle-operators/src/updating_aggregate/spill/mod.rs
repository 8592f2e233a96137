//! The updating aggregate under a memory budget (docs/engine.md, "State beyond memory"):
//! when its groups outgrow the subtask's share of `--state-memory`, the coldest ones
//! move to the spill tier, and a group that comes back is taken from there before its
//! rows are applied.
//!
//! Any group may leave, at any time. One that the checkpoint chain does not hold as it
//! is now (new or changed since the last snapshot, [`DeltaLog::held_by_chain`]) leaves
//! noted as changed, and the next snapshot reads it back from the tier into its delta
//! ([`SpillStore::drain_changed`]); its tier copy holds whole count DISTINCT sets,
//! which a restore unions with the chain's. A snapshot that starts a new chain writes
//! the spilled groups too, from the tier: in pieces over the next snapshots while the
//! old chain stays (a rolling restart), so that they are never all in memory at once;
//! all at once only when there is no old chain to keep.

use super::UpdatingAggregate;
use crate::aggregate::{AccumulatorSet, DistinctValues, GroupKeys};
use crate::spill::{Leaving, SpillStore, ValueCodec};
use crate::window::keyed_state_batch;
use riffle_core::arrow::array::{ArrayRef, BooleanArray};
use riffle_core::arrow::compute::filter_record_batch;
use riffle_core::arrow::datatypes::{Field, Schema};
use riffle_core::{Error, RecordBatch, Result, StateMemory};
use std::sync::Arc;

/// Groups spilled or read back per store pass when a snapshot lists the tier.
const CHUNK: usize = 8192;

/// The longest key the tier takes (the LSM tree's keys are at most 64 KiB): groups
/// with longer keys stay in memory.
const MAX_KEY_BYTES: usize = 60 * 1024;

/// Input rows between measurements of memory, at least (fewer in tests, so that a few
/// hundred small batches spill between snapshots).
const MIN_CHECK_ROWS: usize = if cfg!(test) { 64 } else { 8192 };

/// A spill leaves this share of the budget in use, so that spills come in bulk.
const AFTER_SPILL: (u64, u64) = (3, 4);

/// The fewest spilled groups a snapshot writes while a rolling restart goes on (fewer
/// in tests, so that a few hundred groups take several snapshots).
const MIN_ROLL_GROUPS: usize = if cfg!(test) { 16 } else { 8192 };

/// Snapshots a rolling restart takes at most: the one after writes all that is left
/// (groups spilled beyond the cursor faster than it moves would hold the old chain, and
/// its files, forever).
const MAX_ROLL_SNAPSHOTS: usize = crate::delta_log::MAX_CHAIN;

/// How far a rolling restart has written the tier's groups into the new chain.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Rolled {
    /// None yet.
    Nothing,
    /// Every group up to this key (in key order).
    Through(Vec<u8>),
}
/// The budget and the tier of one subtask.
pub(super) struct Tier {
    memory: StateMemory,
    /// Opened at the first spill.
    store: Option<SpillStore>,
    /// The state columns' encoding, made at the first spill.
    codec: Option<ValueCodec>,
    /// Per group id, the clock when last touched: the coldest spill first.
    touched: Vec<u64>,
    clock: u64,
    /// Input rows since memory was last measured.
    rows_since_check: usize,
    /// While the delta log rolls: how far the tier is in the new chain.
    rolled: Option<Rolled>,
    /// Snapshots the current rolling restart has written pieces in.
    roll_snapshots: usize,
}

impl Tier {
    pub(super) fn new(memory: StateMemory) -> Self {
        Self {
            memory,
            store: None,
            codec: None,
            touched: Vec::new(),
            clock: 0,
            rows_since_check: 0,
            rolled: None,
            roll_snapshots: 0,
        }
    }

    /// Spilled groups a snapshot writes while rolling: half the budget's worth, at
    /// least [`MIN_ROLL_GROUPS`].
    fn roll_groups(&self) -> usize {
        let per_group = self
            .spilled_bytes()
            .checked_div(self.spilled() as u64)
            .unwrap_or(1)
            .max(1);
        usize::try_from(self.memory.bytes / 2 / per_group)
            .unwrap_or(usize::MAX)
            .max(MIN_ROLL_GROUPS)
    }

    /// Groups in the tier.
    pub(super) fn spilled(&self) -> usize {
        self.store.as_ref().map_or(0, SpillStore::len)
    }

    /// Groups noted as changed in the tier, at most (the next snapshot's to write).
    pub(super) fn noted_changed(&self) -> usize {
        self.store.as_ref().map_or(0, SpillStore::noted_changed)
    }

    /// Bytes of the groups in the tier.
    pub(super) fn spilled_bytes(&self) -> u64 {
        self.store.as_ref().map_or(0, SpillStore::bytes)
    }

    /// Notes that `groups` were touched by the current input batch.
    pub(super) fn touch(&mut self, groups: &[u32], len: usize) {
        self.clock += 1;
        self.touched.resize(len, 0);
        for &g in groups {
            self.touched[g as usize] = self.clock;
        }
    }

    /// Whether memory is due to be measured after `rows` more input rows with `groups`
    /// groups in memory (often enough to hold the budget, rarely enough to cost nothing).
    pub(super) fn due(&mut self, rows: usize, groups: usize) -> bool {
        self.rows_since_check += rows;
        if self.rows_since_check >= (groups / 8).max(MIN_CHECK_ROWS) {
            self.rows_since_check = 0;
            true
        } else {
            false
        }
    }
}

impl UpdatingAggregate {
    /// Bytes the groups in memory hold.
    pub(super) fn memory_size(&self) -> usize {
        self.table.memory_size() + self.accumulators.memory_size()
    }

    /// Takes back from the tier every group among ids `first_new..` (new in memory)
    /// that is there, its accumulators restored; returns their ids, ascending.
    pub(super) fn take_back(&mut self, first_new: u32) -> Result<Vec<u32>> {
        let Some(tier) = &mut self.tier else {
            return Ok(Vec::new());
        };
        let (Some(store), Some(codec)) = (&mut tier.store, &tier.codec) else {
            return Ok(Vec::new());
        };
        if store.len() == 0 {
            return Ok(Vec::new());
        }
        let new = first_new..self.table.len() as u32;
        let keys: Vec<Vec<u8>> = new
            .clone()
            .map(|id| {
                let mut key = Vec::new();
                self.table.key_bytes(id, &mut key);
                key
            })
            .collect();
        let (mut ids, mut values) = (Vec::new(), Vec::new());
        for (id, value) in new.zip(store.take_all(&keys)?) {
            if let Some(value) = value {
                ids.push(id);
                values.push(value);
            }
        }
        if !ids.is_empty() && !codec.fields().is_empty() {
            let values: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
            let state = codec.fields().iter().cloned().zip(codec.decode(&values)?);
            let batch = named_columns(state.collect())?;
            self.accumulators.restore(&ids, &batch, &self.operator)?;
        }
        Ok(ids)
    }

    /// Moves the coldest groups to the tier when memory is over the budget, down to
    /// [`AFTER_SPILL`] of it.
    pub(super) fn spill_if_over(&mut self) -> Result<()> {
        let Some(tier) = &self.tier else {
            return Ok(());
        };
        let len = self.table.len();
        let memory = self.memory_size() as u64;
        if len == 0 || memory <= tier.memory.bytes || !self.table.has_key_bytes() {
            return Ok(());
        }
        let per_group = (memory / len as u64).max(1);
        let keep = (tier.memory.bytes * AFTER_SPILL.0 / AFTER_SPILL.1 / per_group) as usize;
        let mut leaving: Vec<u32> = (0..len as u32)
            .filter(|&g| self.table.key_len(g) <= MAX_KEY_BYTES)
            .collect();
        let n = len.saturating_sub(keep).min(leaving.len());
        if n == 0 {
            return Ok(());
        }
        let touched = |g: &u32| tier.touched.get(*g as usize).copied().unwrap_or(0);
        if n < leaving.len() {
            leaving.select_nth_unstable_by_key(n - 1, touched);
            leaving.truncate(n);
        }
        leaving.sort_unstable();
        let kept = complement(&leaving, len);
        self.spill(&leaving)?;
        self.keep_only(&kept)
    }

    /// Writes groups `ids` (ascending) to the tier, those the chain does not hold as
    /// they are noted as changed.
    fn spill(&mut self, ids: &[u32]) -> Result<()> {
        let state = self.accumulators.state_columns(ids, DistinctValues::All)?;
        let Some(tier) = &mut self.tier else {
            return Ok(());
        };
        if tier.codec.is_none() {
            tier.codec = Some(ValueCodec::new(
                state.iter().map(|(f, _)| f.clone()).collect(),
            )?);
        }
        let codec = tier
            .codec
            .as_ref()
            .ok_or_else(|| Error::Spill("no value codec".into()))?;
        let values = if codec.fields().is_empty() {
            vec![Vec::new(); ids.len()]
        } else {
            let columns: Vec<ArrayRef> = state.into_iter().map(|(_, c)| c).collect();
            codec.encode(&columns)?
        };
        let groups = ids
            .iter()
            .zip(values)
            .map(|(&id, value)| {
                let mut key = Vec::new();
                self.table.key_bytes(id, &mut key);
                Leaving {
                    key,
                    value,
                    changed: !self.delta.held_by_chain(id),
                }
            })
            .collect();
        if tier.store.is_none() {
            tier.store = Some(SpillStore::open(
                &tier.memory,
                &self.operator,
                self.subtask,
            )?);
        }
        let store = tier
            .store
            .as_mut()
            .ok_or_else(|| Error::Spill("no store".into()))?;
        store.put_all(groups)
    }

    /// Rebuilds memory with only groups `kept` (ascending old ids), renumbered `0..`.
    fn keep_only(&mut self, kept: &[u32]) -> Result<()> {
        let keys = self.table.keys(kept)?;
        let state = self.accumulators.state_columns(kept, DistinctValues::All)?;
        let mut table = GroupKeys::new(self.key_schema.clone())?;
        let mut accumulators = AccumulatorSet::new(&self.aggregates);
        let rows: Vec<u32> = (0..kept.len() as u32).collect();
        let mut ids = Vec::new();
        table.intern(&keys, &rows, &mut ids)?;
        // Once a snapshot was taken, sets note what they gain for the chain it
        // continued; a kept group that changed since then keeps its gains noted (whole
        // sets: a restore takes the union).
        let noting = !self.delta.batches.is_empty();
        let changed: Vec<bool> = kept.iter().map(|&g| !self.delta.held_by_chain(g)).collect();
        match (!state.is_empty())
            .then(|| named_columns(state))
            .transpose()?
        {
            Some(batch) if noting => {
                let (held, not_held) = split_rows(&batch, &ids, &changed)?;
                accumulators.restore(&held.0, &held.1, &self.operator)?;
                accumulators.ensure(kept.len());
                accumulators.note_snapshot_taken();
                accumulators.restore(&not_held.0, &not_held.1, &self.operator)?;
            }
            Some(batch) => accumulators.restore(&ids, &batch, &self.operator)?,
            None if noting => {
                accumulators.ensure(kept.len());
                accumulators.note_snapshot_taken();
            }
            None => {}
        }
        accumulators.ensure(kept.len());
        self.table = table;
        self.accumulators = accumulators;
        self.delta.retain(kept);
        if let Some(tier) = &mut self.tier {
            tier.touched = kept
                .iter()
                .map(|&g| tier.touched.get(g as usize).copied().unwrap_or(0))
                .collect();
        }
        Ok(())
    }

    /// Adds the spilled groups to a snapshot's new chain: all of them when it started
    /// afresh; while the delta log rolls, the next piece, and once all are in, the old
    /// chain goes.
    pub(super) fn write_spilled(&mut self) -> Result<()> {
        let Some(tier) = &mut self.tier else {
            return Ok(());
        };
        if !self.delta.rolling() {
            tier.rolled = None;
            if self.delta.restarted() {
                for batch in self.spilled_state()? {
                    self.delta.push_outside(batch);
                }
            }
            return Ok(());
        }
        if self.delta.restarted() || tier.rolled.is_none() {
            tier.rolled = Some(Rolled::Nothing);
            tier.roll_snapshots = 0;
        }
        tier.roll_snapshots += 1;
        let n = if tier.roll_snapshots > MAX_ROLL_SNAPSHOTS {
            usize::MAX
        } else {
            tier.roll_groups()
        };
        let after = match &tier.rolled {
            Some(Rolled::Through(key)) => Some(key.clone()),
            _ => None,
        };
        let groups = match &tier.store {
            Some(store) => store.chunk_after(after.as_deref(), n)?,
            None => Vec::new(),
        };
        let last = groups.last().map(|(k, _)| k.clone());
        if !groups.is_empty() {
            let batch = self.spilled_batch(&groups)?;
            self.delta.push_outside(batch);
        }
        match last.filter(|_| groups.len() == n) {
            Some(key) => {
                if let Some(tier) = &mut self.tier {
                    tier.rolled = Some(Rolled::Through(key));
                }
            }
            None => {
                self.delta.rolled();
                if let Some(tier) = &mut self.tier {
                    tier.rolled = None;
                }
            }
        }
        Ok(())
    }

    /// Adds the groups that left memory changed since the last snapshot to this
    /// snapshot, read from the tier (after [`write_spilled`](Self::write_spilled)); a
    /// snapshot that wrote the whole tier only forgets them.
    pub(super) fn write_left_changed(&mut self) -> Result<()> {
        let whole_tier = self.delta.restarted() && !self.delta.rolling();
        let Some(mut store) = self.tier.as_mut().and_then(|t| t.store.take()) else {
            return Ok(());
        };
        let mut batches = Vec::new();
        let drained = if whole_tier {
            store.forget_changed()
        } else {
            store.drain_changed(CHUNK, |groups| {
                batches.push(self.spilled_batch(groups)?);
                Ok(())
            })
        };
        if let Some(tier) = &mut self.tier {
            tier.store = Some(store);
        }
        drained?;
        for batch in batches {
            self.delta.push_outside(batch);
        }
        Ok(())
    }

    /// Every spilled group as state batches, for a snapshot that starts a new chain.
    fn spilled_state(&self) -> Result<Vec<RecordBatch>> {
        let Some(store) = self.tier.as_ref().and_then(|t| t.store.as_ref()) else {
            return Ok(Vec::new());
        };
        let mut batches = Vec::new();
        store.for_each_chunk(CHUNK, |groups| {
            batches.push(self.spilled_batch(groups)?);
            Ok(())
        })?;
        Ok(batches)
    }

    /// Spilled groups (key bytes, encoded state) as a state batch.
    fn spilled_batch(&self, groups: &[(Vec<u8>, Vec<u8>)]) -> Result<RecordBatch> {
        let codec = self
            .tier
            .as_ref()
            .and_then(|t| t.codec.as_ref())
            .ok_or_else(|| Error::Spill("no value codec".into()))?;
        let keys: Vec<&[u8]> = groups.iter().map(|(k, _)| k.as_slice()).collect();
        let keys = self.table.keys_from_bytes(&keys)?;
        let state = if codec.fields().is_empty() {
            Vec::new()
        } else {
            let values: Vec<&[u8]> = groups.iter().map(|(_, v)| v.as_slice()).collect();
            codec
                .fields()
                .iter()
                .cloned()
                .zip(codec.decode(&values)?)
                .collect()
        };
        keyed_state_batch(keys, &self.key_schema, self.max_parallelism, state)
    }
}

/// State columns as a batch, named as snapshots name them (what an accumulator set
/// restores from).
fn named_columns(state: Vec<(Field, ArrayRef)>) -> Result<RecordBatch> {
    let (fields, columns): (Vec<Field>, Vec<ArrayRef>) = state.into_iter().unzip();
    Ok(RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns,
    )?)
}

/// The rows of `batch` (of groups `ids`) split by `changed`: the unchanged rows and
/// their ids, then the changed ones.
type Rows = (Vec<u32>, RecordBatch);
fn split_rows(batch: &RecordBatch, ids: &[u32], changed: &[bool]) -> Result<(Rows, Rows)> {
    let part = |want: bool| -> Result<Rows> {
        let mask = BooleanArray::from_iter(changed.iter().map(|&c| Some(c == want)));
        let ids = (ids.iter().zip(changed))
            .filter(|(_, &c)| c == want)
            .map(|(&id, _)| id)
            .collect();
        Ok((ids, filter_record_batch(batch, &mask)?))
    };
    Ok((part(false)?, part(true)?))
}

/// The ids `0..len` not in `ids` (ascending).
fn complement(ids: &[u32], len: usize) -> Vec<u32> {
    let mut out = Vec::with_capacity(len - ids.len());
    let mut next = ids.iter().peekable();
    for g in 0..len as u32 {
        if next.peek() == Some(&&g) {
            next.next();
        } else {
            out.push(g);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::UpdatingAggregateFactory;
    use crate::aggregate::{AggregateFunction, AggregateSpec};
    use riffle_core::arrow::array::{Int64Array, StringArray, TimestampNanosecondArray};
    use riffle_core::arrow::datatypes::{DataType, Field};
    use riffle_core::arrow::util::pretty::pretty_format_batches;
    use riffle_core::{
        Epoch, Operator, OperatorContext, OperatorFactory, RecordBatch, StateMemory, StreamSchema,
    };
    use std::sync::Arc;

    fn input() -> StreamSchema {
        StreamSchema::with_timestamp(vec![
            Field::new("k", DataType::Utf8, false),
            Field::new("v", DataType::Int64, false),
        ])
    }

    /// Rows `(k, v)` of batch `step`: keys come and go, most return after a while.
    fn batch(step: i64) -> RecordBatch {
        let rows: Vec<(String, i64)> = (0..17)
            .map(|i| {
                (
                    format!("key-{}", (step * 13 + i * 7) % 400),
                    (step * i) % 11,
                )
            })
            .collect();
        RecordBatch::try_new(
            input().schema.clone(),
            vec![
                Arc::new(StringArray::from_iter_values(rows.iter().map(|r| &r.0))),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
                Arc::new(
                    TimestampNanosecondArray::from(vec![step; rows.len()]).with_timezone("UTC"),
                ),
            ],
        )
        .unwrap()
    }

    /// `count(*), sum(v), count(DISTINCT v), max(k) GROUP BY k` as a changelog, with
    /// `budget` bytes of state memory spilling under `dir`.
    fn aggregate(budget: Option<(u64, &std::path::Path)>) -> Box<dyn Operator> {
        aggregate_counted(budget, &OperatorContext::detached("agg", 0, 1))
    }

    fn aggregate_counted(
        budget: Option<(u64, &std::path::Path)>,
        ctx: &OperatorContext,
    ) -> Box<dyn Operator> {
        let specs = vec![
            AggregateSpec::count_star("n"),
            AggregateSpec::new(AggregateFunction::Sum, "v", "total"),
            AggregateSpec::new(AggregateFunction::CountDistinct, "v", "values"),
            AggregateSpec::new(AggregateFunction::Max, "k", "top"),
        ];
        let mut ctx = ctx.clone();
        ctx.state_memory = budget.map(|(bytes, dir)| StateMemory {
            bytes,
            spill_dir: dir.to_path_buf(),
        });
        UpdatingAggregateFactory::new(&input(), &["k"], specs)
            .unwrap()
            .changelog()
            .create(&ctx)
            .unwrap()
    }

    fn text(out: &[RecordBatch]) -> String {
        pretty_format_batches(out).unwrap().to_string()
    }

    /// Feeds batches `steps` to `op`, a snapshot after every `every`; the output and
    /// the last snapshot.
    fn feed(
        op: &mut dyn Operator,
        steps: std::ops::Range<i64>,
        every: i64,
    ) -> (Vec<RecordBatch>, riffle_core::OperatorState) {
        let mut out = Vec::new();
        let mut state = Default::default();
        for step in steps {
            op.on_batch(0, batch(step), &mut out).unwrap();
            if step % every == every - 1 {
                state = op.snapshot(Epoch(step as u64)).unwrap();
            }
        }
        (out, state)
    }

    fn spilled_tiers(dir: &std::path::Path) -> usize {
        std::fs::read_dir(dir).map_or(0, |d| d.count())
    }

    #[test]
    fn groups_beyond_the_budget_are_spilled_and_taken_back_without_changing_the_output() {
        let dir = tempfile::tempdir().unwrap();
        let mut reference = aggregate(None);
        let ctx = OperatorContext::detached("agg", 0, 1);
        let mut spilling = aggregate_counted(Some((2048, dir.path())), &ctx);
        // 90 batches, a snapshot every 2: the delta chain restarts (at 32 batches)
        // with most groups in the tier.
        let (want, _) = feed(reference.as_mut(), 0..90, 2);
        let (got, _) = feed(spilling.as_mut(), 0..90, 2);
        assert_eq!(spilled_tiers(dir.path()), 1, "the budget made it spill");
        assert_eq!(text(&got), text(&want));
        let bytes = ctx.counters.state_bytes();
        assert!(bytes.in_memory > 0 && bytes.in_memory < 4096, "{bytes:?}");
        assert!(bytes.spilled > 0, "{bytes:?}");
        drop(spilling);
        assert_eq!(
            spilled_tiers(dir.path()),
            0,
            "the tier goes with its subtask"
        );
    }

    #[test]
    fn a_checkpoint_taken_with_groups_spilled_restores_every_group() {
        let dir = tempfile::tempdir().unwrap();
        let mut reference = aggregate(None);
        let (_, want_state) = feed(reference.as_mut(), 0..70, 2);
        let mut spilling = aggregate(Some((2048, dir.path())));
        let (_, state) = feed(spilling.as_mut(), 0..70, 2);
        assert!(spilled_tiers(dir.path()) > 0);
        // The checkpoint, restored without a budget and with one, goes on as the
        // reference's does.
        let (want, _) = {
            let mut op = aggregate(None);
            op.restore(want_state).unwrap();
            feed(op.as_mut(), 70..120, 3)
        };
        for budget in [None, Some((1024, dir.path()))] {
            let mut op = aggregate(budget);
            op.restore(state.clone()).unwrap();
            let (got, _) = feed(op.as_mut(), 70..120, 3);
            assert_eq!(text(&got), text(&want), "budget {budget:?}");
        }
    }

    #[test]
    fn a_chain_started_with_every_group_spilled_still_notes_what_sets_gain() {
        let dir = tempfile::tempdir().unwrap();
        let mut reference = aggregate(None);
        let (_, state) = feed(reference.as_mut(), 0..40, 4);
        // A budget of one byte: the restore spills every group, so the next snapshot
        // starts its chain from the tier alone.
        let mut op = aggregate(Some((1, dir.path())));
        op.restore(state.clone()).unwrap();
        op.snapshot(Epoch(100)).unwrap();
        let (_, after) = feed(op.as_mut(), 40..44, 4);
        let (want, _) = {
            let mut op = aggregate(None);
            op.restore(state).unwrap();
            feed(op.as_mut(), 40..44, 4);
            feed(op.as_mut(), 44..70, 5)
        };
        let mut restored = aggregate(None);
        restored.restore(after).unwrap();
        let (got, _) = feed(restored.as_mut(), 44..70, 5);
        assert_eq!(text(&got), text(&want));
    }

    /// What the checkpoint writer makes of snapshots: a handed-over batch is the whole
    /// batch first seen with the same first column (the file that holds it).
    #[derive(Default)]
    struct Writer {
        whole: std::collections::HashMap<(usize, usize, usize), RecordBatch>,
    }

    impl Writer {
        fn resolve(&mut self, state: riffle_core::OperatorState) -> riffle_core::OperatorState {
            let batches = state.batches.into_iter().map(|b| {
                let data = b.column(0).to_data();
                let id = (
                    data.buffers()[0].as_ptr() as usize,
                    data.offset(),
                    b.num_rows(),
                );
                if riffle_core::is_handed(&b) {
                    self.whole[&id].clone()
                } else {
                    self.whole.insert(id, b.clone());
                    b
                }
            });
            riffle_core::OperatorState {
                batches: batches.collect(),
            }
        }
    }

    #[test]
    fn rolling_restarts_keep_every_group_in_each_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = OperatorContext::detached("agg", 0, 1);
        let mut op = aggregate_counted(Some((2048, dir.path())), &ctx);
        let mut reference = aggregate(None);
        let mut writer = Writer::default();
        let (mut got, mut want) = (Vec::new(), Vec::new());
        let mut longest = 0;
        for step in 0..150 {
            op.on_batch(0, batch(step), &mut got).unwrap();
            reference.on_batch(0, batch(step), &mut want).unwrap();
            let epoch = Epoch(step as u64 + 1);
            let raw = op.snapshot(epoch).unwrap();
            longest = longest.max(raw.batches.len());
            let state = writer.resolve(raw);
            // Every epoch commits.
            ctx.committed.heard(epoch);
            if step % 23 == 22 {
                // The checkpoint, restored, goes on as the uninterrupted reference does.
                let mut restored = aggregate(None);
                restored.restore(state).unwrap();
                let mut again = aggregate(None);
                again.restore(reference.snapshot(epoch).unwrap()).unwrap();
                let (after, _) = feed(restored.as_mut(), 150..170, 100);
                let (expected, _) = feed(again.as_mut(), 150..170, 100);
                assert_eq!(text(&after), text(&expected), "checkpoint of step {step}");
            }
        }
        assert_eq!(text(&got), text(&want));
        assert!(
            longest > crate::delta_log::MAX_CHAIN + 1,
            "a restart kept the old chain while rolling: {longest}"
        );
    }

    #[test]
    fn groups_that_leave_between_snapshots_reach_the_next_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = OperatorContext::detached("agg", 0, 1);
        let mut op = aggregate_counted(Some((2048, dir.path())), &ctx);
        let mut reference = aggregate(None);
        let mut writer = Writer::default();
        let (mut got, mut want) = (Vec::new(), Vec::new());
        let mut checked = 0;
        // Memory is measured every 64 rows (4 batches), a snapshot taken every 9
        // batches: groups new or changed since the last one leave in between, sets
        // that gained values among them and among those kept.
        for step in 0..240 {
            op.on_batch(0, batch(step), &mut got).unwrap();
            reference.on_batch(0, batch(step), &mut want).unwrap();
            if step % 9 != 8 {
                continue;
            }
            let epoch = Epoch(step as u64 + 1);
            let state = writer.resolve(op.snapshot(epoch).unwrap());
            ctx.committed.heard(epoch);
            let reference_state = reference.snapshot(epoch).unwrap();
            if step % 3 == 2 {
                // The checkpoint, restored, goes on as the uninterrupted reference does.
                let mut restored = aggregate(None);
                restored.restore(state).unwrap();
                let mut again = aggregate(None);
                again.restore(reference_state).unwrap();
                let (after, _) = feed(restored.as_mut(), 240..260, 100);
                let (expected, _) = feed(again.as_mut(), 240..260, 100);
                assert_eq!(text(&after), text(&expected), "checkpoint of step {step}");
                checked += 1;
            }
        }
        assert_eq!(text(&got), text(&want));
        assert!(checked > 5);
        assert!(ctx.counters.state_bytes().spilled > 0);
    }

    #[test]
    fn without_checkpoints_groups_are_spilled_as_they_cool() {
        let dir = tempfile::tempdir().unwrap();
        let mut reference = aggregate(None);
        // No snapshot ever: batches of 17 rows, memory measured every 8192.
        let ctx = OperatorContext::detached("agg", 0, 1);
        let mut spilling = aggregate_counted(Some((1024, dir.path())), &ctx);
        let (want, _) = feed(reference.as_mut(), 0..1200, i64::MAX);
        let (got, _) = feed(spilling.as_mut(), 0..1200, i64::MAX);
        assert_eq!(spilled_tiers(dir.path()), 1);
        assert_eq!(text(&got), text(&want));
        assert!(
            ctx.counters.state_bytes().spilled > 0,
            "reported without snapshots"
        );
    }
}
